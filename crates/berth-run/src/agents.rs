//! Which agents a run starts: `--agents 3` (three of berth's own, on the session's model or
//! `--model`'s, or three of the ACP agent `--agent-cmd` names), or a mix of berth's own by
//! provider or model such as `claude:2,openai:1`.

use crate::RunError;

/// One agent of a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "agent", rename_all = "snake_case")]
pub enum AgentSpec {
    /// berth's own agent, on this model (as `/model` reads a name: a model, a provider, or
    /// `provider/model`), else the workspace's configured one.
    Berth { model: Option<String> },
    /// Any ACP agent, started by this command line (`sh -c`) in the worktree.
    Acp { command: String },
}

impl AgentSpec {
    /// How the agent is shown: `berth`, or `berth (openai)`.
    pub fn label(&self) -> String {
        match self {
            AgentSpec::Berth { model: None } => "berth".to_owned(),
            AgentSpec::Berth { model: Some(m) } => format!("berth ({m})"),
            AgentSpec::Acp { command } => command.clone(),
        }
    }

    pub(crate) fn model(&self) -> Option<&str> {
        match self {
            AgentSpec::Berth { model } => model.as_deref(),
            AgentSpec::Acp { .. } => None,
        }
    }
}

/// The agents `--agents` names: a count (each berth's own on `model`, or the ACP agent
/// `command` when one is given), or `NAME:COUNT` pairs of berth's own agents separated by
/// commas, each NAME a model as `/model` reads one (`claude:2,openai/gpt-4.1:1`).
pub fn parse_agents(
    text: &str,
    model: Option<&str>,
    command: Option<&str>,
) -> Result<Vec<AgentSpec>, RunError> {
    let text = text.trim();
    let invalid = |why: String| RunError::Ops(berth_ops::Error::invalid(why));
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
            Some(c) => AgentSpec::Acp {
                command: c.trim().to_owned(),
            },
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
            vec![
                AgentSpec::Acp {
                    command: "berth acp".into()
                };
                2
            ]
        );
        assert!(parse_agents("claude:2", None, Some("x")).is_err());
        assert!(parse_agents("2", Some("openai"), Some("x")).is_err());
        assert!(parse_agents("2", None, Some(" ")).is_err());
        for bad in ["0", "", "claude:0", "claude:x", ":2", "99", "a b:1"] {
            assert!(parse_agents(bad, None, None).is_err(), "{bad:?}");
        }
    }
}
