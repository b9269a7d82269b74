//! Which agents a run starts, any mix of them:
//!
//! - `--agent SPEC`, repeatable: `berth` (berth's own agent), `berth:MODEL`, `cmd:COMMAND` (any
//!   ACP agent by its command line), or a name: an `[agents.NAME]` entry of the config, or a
//!   built-in one (`claude-code`, `codex`, `gemini`; [`builtin_agents`]);
//! - `--agents 3`: three of the default agent (`[run] agent`, else berth's own), or of the one
//!   `--agent` names; or a mix of berth's own by provider or model, `claude:2,openai:1`;
//! - `--agent-cmd COMMAND`, the same as `--agent cmd:COMMAND`.
//!
//! Every model berth's own agent is given is checked here, before anything is made: a name
//! that is neither a provider, `provider/model`, nor a model berth knows is refused, since the
//! provider would otherwise be called with it, with real keys, by every agent of the run.

use std::path::PathBuf;

use berth_ops::{AgentDeclared, Config, ProviderKind};

/// One agent of a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "agent", rename_all = "snake_case")]
pub enum AgentSpec {
    /// berth's own agent, on this model (as `/model` reads a name: a model, a provider, or
    /// `provider/model`), else the workspace's configured one.
    Berth { model: Option<String> },
    /// Any ACP agent, started by this command line (`sh -c`) in the worktree.
    Acp {
        command: String,
        /// The name it was chosen by (`claude-code`, an `[agents.NAME]` entry).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Its own state, writable (an entry's `writable`); empty: what berth knows of its
        /// program, or the run's `--agent-writable`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        writable: Vec<PathBuf>,
        /// Variables of berth's environment it gets besides its provider's.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        env: Vec<String>,
        /// Where its provider is, besides what berth knows of its program.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hosts: Vec<String>,
        /// Whether its provider keys stay in berth (an entry's `mask_keys`); `None`: as berth
        /// knows its program.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mask_keys: Option<bool>,
    },
}

impl AgentSpec {
    /// An ACP agent by its command line alone.
    pub fn command(command: &str) -> AgentSpec {
        AgentSpec::Acp {
            command: command.trim().to_owned(),
            name: None,
            writable: Vec::new(),
            env: Vec::new(),
            hosts: Vec::new(),
            mask_keys: None,
        }
    }

    /// How the agent is shown: `berth`, `berth (openai)`, `claude-code`, or its command.
    pub fn label(&self) -> String {
        match self {
            AgentSpec::Berth { model: None } => "berth".to_owned(),
            AgentSpec::Berth { model: Some(m) } => format!("berth ({m})"),
            AgentSpec::Acp {
                name: Some(name), ..
            } => name.clone(),
            AgentSpec::Acp { command, .. } => command.clone(),
        }
    }

    /// The label of an ACP agent, which a session it works in records; `None` for berth's
    /// own agent, whose session records its model instead.
    pub fn acp_label(&self) -> Option<String> {
        match self {
            AgentSpec::Berth { .. } => None,
            AgentSpec::Acp { .. } => Some(self.label()),
        }
    }

    pub(crate) fn model(&self) -> Option<&str> {
        match self {
            AgentSpec::Berth { model } => model.as_deref(),
            AgentSpec::Acp { .. } => None,
        }
    }

    /// What the spec says of an ACP agent's process beyond its program; `run_writable` (the
    /// run's `--agent-writable`) where the spec names none.
    pub(crate) fn declared(&self, run_writable: &[PathBuf]) -> AgentDeclared {
        match self {
            AgentSpec::Acp {
                writable,
                env,
                hosts,
                mask_keys,
                ..
            } => AgentDeclared {
                writable: match writable.is_empty() {
                    true => run_writable.to_vec(),
                    false => writable.clone(),
                },
                env: env.clone(),
                hosts: hosts.clone(),
                mask_keys: *mask_keys,
            },
            AgentSpec::Berth { .. } => AgentDeclared::default(),
        }
    }
}

/// An agent's number as people and front ends give it, 1 for the first: the one place it
/// becomes an index into a run's agents ([`AgentNumber::index`]), and where 0 is refused.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "usize", into = "usize")]
pub struct AgentNumber(std::num::NonZeroUsize);

impl From<AgentNumber> for usize {
    fn from(n: AgentNumber) -> usize {
        n.get()
    }
}

impl AgentNumber {
    /// The agent at `index` (0-based).
    pub fn of_index(index: usize) -> AgentNumber {
        AgentNumber(std::num::NonZeroUsize::MIN.saturating_add(index))
    }

    /// Its index among the run's agents (0-based).
    pub fn index(self) -> usize {
        self.0.get() - 1
    }

    pub fn get(self) -> usize {
        self.0.get()
    }
}

impl TryFrom<usize> for AgentNumber {
    type Error = berth_ops::Error;

    fn try_from(n: usize) -> Result<AgentNumber, berth_ops::Error> {
        std::num::NonZeroUsize::new(n)
            .map(AgentNumber)
            .ok_or_else(|| {
                berth_ops::Error::invalid("agents are counted from 1: agent 0 does not exist")
            })
    }
}

impl std::str::FromStr for AgentNumber {
    type Err = berth_ops::Error;

    fn from_str(s: &str) -> Result<AgentNumber, berth_ops::Error> {
        let n: usize = s.trim().parse().map_err(|_| {
            berth_ops::Error::invalid(format!("{s:?} is not an agent's number: 1 is the first"))
        })?;
        AgentNumber::try_from(n)
    }
}

impl std::fmt::Display for AgentNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The ACP agents a run knows by name without any config: (name, command), from
/// berth-sandbox's one table of what berth knows of each agent (`AgentProfile`), which also
/// has its provider and what of its state it writes and obeys.
pub fn builtin_agents() -> impl Iterator<Item = (&'static str, &'static str)> {
    berth_sandbox::agent_profiles().map(|p| (p.builtin, p.command))
}

/// How a run's agents were named on its command line (or by MCP).
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentChoice<'a> {
    /// `--agents`: a count, or a mix of berth's own by model.
    pub agents: Option<&'a str>,
    /// `--agent SPEC`, each.
    pub agent: &'a [String],
    /// `--model`: berth's own agents' model, for a count.
    pub model: Option<&'a str>,
    /// `--agent-cmd`.
    pub agent_cmd: Option<&'a str>,
}

/// The agents `choice` names, each model checked ([`check_model_name`]) against `config`.
pub fn choose_agents(
    choice: AgentChoice<'_>,
    config: &Config,
) -> Result<Vec<AgentSpec>, berth_ops::Error> {
    let invalid = |why: String| berth_ops::Error::invalid(why);
    let specs = if choice.agent.is_empty() {
        match (choice.agents, choice.model, choice.agent_cmd) {
            // Only a count (or nothing): the default agent.
            (count, None, None) if count.is_none_or(|c| c.trim().parse::<usize>().is_ok()) => {
                let n = count.unwrap_or("1");
                match &config.run.agent {
                    Some(default) => {
                        let one = parse_agent(default, config)
                            .map_err(|e| invalid(format!("[run] agent = {default:?}: {e}")))?;
                        repeat(one, n)?
                    }
                    None => parse_agents(n, None, None)?,
                }
            }
            (count, model, command) => parse_agents(count.unwrap_or("1"), model, command)?,
        }
    } else {
        if choice.agent_cmd.is_some() {
            return Err(invalid(
                "--agent-cmd and --agent name agents both: write the command as --agent \"cmd:COMMAND\"".to_owned(),
            ));
        }
        if choice.model.is_some() {
            return Err(invalid(
                "--model is for berth's agents counted by --agents: write --agent berth:MODEL"
                    .to_owned(),
            ));
        }
        let mut specs = Vec::new();
        for spec in choice.agent {
            specs.push(parse_agent(spec, config)?);
        }
        match (choice.agents, specs.as_slice()) {
            (None, _) => specs,
            (Some(n), [one]) => repeat(one.clone(), n)?,
            (Some(_), _) => {
                return Err(invalid(
                    "--agents with several --agent: each --agent is one agent; give --agents only to repeat a single --agent".to_owned(),
                ));
            }
        }
    };
    if specs.len() > MAX_AGENTS {
        return Err(invalid(format!(
            "a run takes 1 to {MAX_AGENTS} agents, not {}",
            specs.len()
        )));
    }
    for spec in &specs {
        if let Some(model) = spec.model() {
            check_model_name(model, config)?;
        }
    }
    Ok(specs)
}

/// `one`, `n` times (`n` a count of 1 to [`MAX_AGENTS`]).
fn repeat(one: AgentSpec, n: &str) -> Result<Vec<AgentSpec>, berth_ops::Error> {
    match n.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_AGENTS).contains(&n) => Ok(vec![one; n]),
        _ => Err(berth_ops::Error::invalid(format!(
            "--agents repeats an --agent 1 to {MAX_AGENTS} times, not {n:?}"
        ))),
    }
}

/// One `--agent SPEC`: `berth`, `berth:MODEL`, `cmd:COMMAND`, or an agent's name.
pub fn parse_agent(spec: &str, config: &Config) -> Result<AgentSpec, berth_ops::Error> {
    let invalid = |why: String| berth_ops::Error::invalid(why);
    let spec = spec.trim();
    if spec == "berth" {
        return Ok(AgentSpec::Berth { model: None });
    }
    if let Some(model) = spec.strip_prefix("berth:") {
        if model.trim().is_empty() {
            return Err(invalid(
                "berth: names no model; write berth:MODEL, or berth".to_owned(),
            ));
        }
        return Ok(AgentSpec::Berth {
            model: Some(model.trim().to_owned()),
        });
    }
    if let Some(command) = spec.strip_prefix("cmd:") {
        if command.trim().is_empty() {
            return Err(invalid(
                "cmd: names no command; write cmd:COMMAND".to_owned(),
            ));
        }
        return Ok(AgentSpec::command(command));
    }
    if let Some(entry) = config.agents.get(spec) {
        if entry.command.trim().is_empty() {
            return Err(invalid(format!("[agents.{spec}] has no command")));
        }
        let home = berth_ops::user_home();
        let expand = |p: &String| match (p.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(p),
        };
        return Ok(AgentSpec::Acp {
            command: entry.command.trim().to_owned(),
            name: Some(spec.to_owned()),
            writable: entry.writable.iter().map(expand).collect(),
            env: entry.env.clone(),
            hosts: entry.hosts.clone(),
            mask_keys: entry.mask_keys,
        });
    }
    if let Some((name, command)) = builtin_agents().find(|(name, _)| *name == spec) {
        let mut one = AgentSpec::command(command);
        if let AgentSpec::Acp { name: n, .. } = &mut one {
            *n = Some(name.to_owned());
        }
        return Ok(one);
    }
    let mut known: Vec<String> = vec!["berth".into(), "berth:MODEL".into(), "cmd:COMMAND".into()];
    known.extend(builtin_agents().map(|(name, _)| name.to_owned()));
    known.extend(config.agents.keys().cloned());
    Err(invalid(format!(
        "no agent is named {spec:?}: --agent takes {}",
        known.join(", ")
    )))
}

/// Model families berth knows by name: a bare model name must be of one of them (or be
/// configured, or priced in `[prices]`) to be taken as the current provider's model.
const FAMILIES: [&str; 7] = ["claude-", "gpt-", "o1", "o3", "o4", "chatgpt-", "gemini-"];

/// Refuses a model name for berth's own agent that is neither a provider (`claude`),
/// `provider/model` (any model of a provider berth knows: `openai/library/qwen2.5`), nor a
/// model berth knows: of a known family (`claude-…`, `gpt-…`, `gemini-…`), configured
/// (`model`, `[providers.*] model`) or priced (`[prices]`).
pub fn check_model_name(name: &str, config: &Config) -> Result<(), berth_ops::Error> {
    let providers = "claude, openai, gemini";
    let refuse = |why: String| Err(berth_ops::Error::invalid(why));
    if name.parse::<ProviderKind>().is_ok() {
        return Ok(());
    }
    if let Some((provider, model)) = name.split_once('/') {
        if provider.parse::<ProviderKind>().is_err() {
            return refuse(format!(
                "{name:?}: {provider:?} is not a provider berth knows ({providers}); write provider/model, such as openai/{model}"
            ));
        }
        if model.is_empty() {
            return refuse(format!("{name:?} names no model after the provider"));
        }
        return Ok(());
    }
    let configured = [
        config.model.as_deref(),
        config.providers.claude.model.as_deref(),
        config.providers.openai.model.as_deref(),
        config.providers.gemini.model.as_deref(),
    ];
    let known = FAMILIES.iter().any(|f| name.starts_with(f))
        || configured.contains(&Some(name))
        || config.prices.contains_key(name);
    if known {
        return Ok(());
    }
    refuse(format!(
        "{name:?} is neither a provider ({providers}) nor a model berth knows (claude-…, gpt-…, o3…, gemini-…, or one in [prices]); for another model, name its provider too: claude/{name}, openai/{name}"
    ))
}

/// The agents `--agents` names: a count (each berth's own on `model`, or the ACP agent
/// `command` when one is given), or `NAME:COUNT` pairs of berth's own agents separated by
/// commas, each NAME a model as `/model` reads one (`claude:2,openai/gpt-4.1:1`).
pub fn parse_agents(
    text: &str,
    model: Option<&str>,
    command: Option<&str>,
) -> Result<Vec<AgentSpec>, berth_ops::Error> {
    let text = text.trim();
    let invalid = |why: String| berth_ops::Error::invalid(why);
    if command.is_some_and(|c| c.trim().is_empty()) {
        return Err(invalid("--agent-cmd names no command".to_owned()));
    }
    if let Ok(n) = text.parse::<usize>() {
        if n == 0 || n > MAX_AGENTS {
            return Err(invalid(format!(
                "--agents takes 1 to {MAX_AGENTS} agents, not {n}"
            )));
        }
        let spec = match command {
            Some(c) if model.is_some() => {
                return Err(invalid(format!(
                    "--model chooses berth's own agent's model; the ACP agent `{c}` chooses its own"
                )));
            }
            Some(c) => AgentSpec::command(c),
            None => AgentSpec::Berth {
                model: model.map(str::to_owned),
            },
        };
        return Ok(vec![spec; n]);
    }
    if command.is_some() {
        return Err(invalid(
            "with --agent-cmd, --agents is a count: a mix by model is for berth's own agent"
                .to_owned(),
        ));
    }
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, count) = match part.rsplit_once(':') {
            Some((name, count)) => (name, count),
            None => (part, "1"),
        };
        let count: usize = count
            .parse()
            .map_err(|_| invalid(format!("{part:?} is not NAME:COUNT (for example claude:2)")))?;
        if name.is_empty() || name.chars().any(char::is_whitespace) || count == 0 {
            return Err(invalid(format!(
                "{part:?} is not NAME:COUNT (for example claude:2)"
            )));
        }
        out.extend(std::iter::repeat_n(
            AgentSpec::Berth {
                model: Some(name.to_owned()),
            },
            count,
        ));
    }
    if out.is_empty() || out.len() > MAX_AGENTS {
        return Err(invalid(format!(
            "--agents takes 1 to {MAX_AGENTS} agents: a count, or NAME:COUNT pairs such as claude:2,openai:1"
        )));
    }
    Ok(out)
}

/// Agents one run may start: each is a worktree and a stream of model calls.
pub const MAX_AGENTS: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    fn berth(model: Option<&str>) -> AgentSpec {
        AgentSpec::Berth {
            model: model.map(str::to_owned),
        }
    }

    #[test]
    fn agent_numbers_count_from_one() {
        let third: AgentNumber = "3".parse().unwrap();
        assert_eq!((third.get(), third.index()), (3, 2));
        assert_eq!(AgentNumber::of_index(2), third);
        assert_eq!(third.to_string(), "3");
        let zero = "0".parse::<AgentNumber>().unwrap_err().to_string();
        assert!(zero.contains("counted from 1"), "{zero}");
        assert!("x".parse::<AgentNumber>().is_err());
        assert!(AgentNumber::try_from(0).is_err());
    }

    #[test]
    fn a_count_or_a_mix() {
        assert_eq!(parse_agents("2", None, None).unwrap(), vec![berth(None); 2]);
        assert_eq!(
            parse_agents("3", Some("openai"), None).unwrap(),
            vec![berth(Some("openai")); 3]
        );
        assert_eq!(
            parse_agents("claude:2, openai/gpt-4.1:1", None, None).unwrap(),
            vec![
                berth(Some("claude")),
                berth(Some("claude")),
                berth(Some("openai/gpt-4.1"))
            ]
        );
        assert_eq!(
            parse_agents("gemini", None, None).unwrap(),
            vec![berth(Some("gemini"))]
        );
        assert_eq!(
            parse_agents("2", None, Some("berth acp")).unwrap(),
            vec![AgentSpec::command("berth acp"); 2]
        );
        assert!(parse_agents("claude:2", None, Some("x")).is_err());
        assert!(parse_agents("2", Some("openai"), Some("x")).is_err());
        assert!(parse_agents("2", None, Some(" ")).is_err());
        for bad in ["0", "", "claude:0", "claude:x", ":2", "99", "a b:1"] {
            assert!(parse_agents(bad, None, None).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn any_mix_by_agent() {
        let mut config = Config::default();
        config.agents.insert(
            "mine".into(),
            berth_ops::AgentEntry {
                command: "my-agent --acp".into(),
                env: vec!["MY_KEY".into()],
                hosts: vec!["api.example.com".into()],
                mask_keys: Some(true),
                ..Default::default()
            },
        );
        let given: Vec<String> = [
            "claude-code",
            "codex",
            "berth:claude/claude-sonnet-4",
            "cmd:gemini --experimental-acp",
            "mine",
            "berth",
        ]
        .map(String::from)
        .to_vec();
        let choice = AgentChoice {
            agent: &given,
            ..Default::default()
        };
        let specs = choose_agents(choice, &config).unwrap();
        let labels: Vec<String> = specs.iter().map(AgentSpec::label).collect();
        assert_eq!(
            labels,
            [
                "claude-code",
                "codex",
                "berth (claude/claude-sonnet-4)",
                "gemini --experimental-acp",
                "mine",
                "berth"
            ]
        );
        assert!(
            matches!(&specs[0], AgentSpec::Acp { command, .. } if command == "claude-agent-acp")
        );
        let declared = specs[4].declared(&[]);
        assert_eq!(declared.env, ["MY_KEY"]);
        assert_eq!(declared.hosts, ["api.example.com"]);
        assert_eq!(declared.mask_keys, Some(true), "the entry opts in");
        assert_eq!(specs[0].declared(&[]).mask_keys, None, "as berth knows it");
        // --agents repeats one --agent, or the default agent.
        let one = ["codex".to_owned()];
        let three = AgentChoice {
            agents: Some("3"),
            agent: &one,
            ..Default::default()
        };
        assert_eq!(choose_agents(three, &config).unwrap().len(), 3);
        config.run.agent = Some("mine".into());
        let default = choose_agents(
            AgentChoice {
                agents: Some("2"),
                ..Default::default()
            },
            &config,
        )
        .unwrap();
        assert_eq!(default, vec![specs[4].clone(); 2]);
        // Refused: a name nobody knows, naming what is known; --agents with several.
        let unknown = ["claude".to_owned()];
        let e = choose_agents(
            AgentChoice {
                agent: &unknown,
                ..Default::default()
            },
            &config,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("claude-code, codex, gemini, mine"),
            "{e}"
        );
        assert_eq!(e.kind(), berth_ops::ErrorKind::Invalid);
        let two = ["codex".to_owned(), "berth".to_owned()];
        assert!(
            choose_agents(
                AgentChoice {
                    agents: Some("2"),
                    agent: &two,
                    ..Default::default()
                },
                &config
            )
            .is_err()
        );
    }

    #[test]
    fn models_nobody_knows_are_refused_before_anything_is_made() {
        let mut config = Config::default();
        let mix = |text: &str, config: &Config| {
            choose_agents(
                AgentChoice {
                    agents: Some(text),
                    ..Default::default()
                },
                config,
            )
        };
        assert!(mix("claude:1,openai/gpt-4.1:1,gemini-2.5-pro:1", &config).is_ok());
        assert!(mix("openai/library/qwen2.5:1", &config).is_ok());
        let acp = mix("claude:1,acp:1", &config).unwrap_err().to_string();
        assert!(acp.contains("\"acp\" is neither a provider"), "{acp}");
        let prov = mix("nosuchprov/foo:1", &config).unwrap_err().to_string();
        assert!(prov.contains("\"nosuchprov\" is not a provider"), "{prov}");
        // Known by the config: configured or priced.
        config.providers.openai.model = Some("local-llama".into());
        assert!(mix("local-llama:1", &config).is_ok());
        let agent = ["berth:sonet".to_owned()];
        assert!(
            choose_agents(
                AgentChoice {
                    agent: &agent,
                    ..Default::default()
                },
                &config
            )
            .is_err()
        );
    }
}
