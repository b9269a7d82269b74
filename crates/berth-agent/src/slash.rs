//! berth's slash commands, for every front end that takes typed lines: what a line is (a
//! prompt for the model, or one of the commands: the seed's `/workspace`, `/clear`,
//! `/context`, `/help`, `/quit`, and berth's own), and what the commands that work on a
//! session answer. `berth chat` runs them at its prompt; `berth acp` offers the ones that make
//! sense in an editor (`available_commands_update`) and runs them when a prompt is one.
//!
//! [`Agent::session_command`] runs a command on a session that exists, with the text to show;
//! a front end handles only what is its own (chat's `/new`, `/load`, `/sessions`, `/quit`, and
//! the commands typed before its session is made).

use std::path::Path;

use berth_core::config::Config;
use berth_ops::{ModelChoice, Session, SessionModel, Workspace};

use crate::context::Fill;
use crate::mcp::ServerStatus;
use crate::runtime::{Agent, AgentError};

/// One slash command: how it is typed, what it does, and whether an editor offers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The command with its arguments, as `/help` lists it.
    pub usage: &'static str,
    pub what: &'static str,
    /// Offered over ACP too. The others are `berth chat`'s own: an editor has its own ways to
    /// start, list, switch and leave sessions.
    pub in_editors: bool,
}

impl Spec {
    /// The name, without the slash or arguments (`model`).
    pub fn name(&self) -> &'static str {
        let usage = self.usage.trim_start_matches('/');
        usage.split(' ').next().unwrap_or(usage)
    }

    /// What follows the name, when it takes an argument (`[NAME]`).
    pub fn argument(&self) -> Option<&'static str> {
        self.usage.split_once(' ').map(|(_, arg)| arg)
    }
}

/// The slash commands, as `/help` lists them.
pub const COMMANDS: &[Spec] = &[
    Spec {
        usage: "/workspace",
        what: "the workspace (name, id), the session, provider, model and message count",
        in_editors: true,
    },
    Spec {
        usage: "/clear",
        what: "reset the session: its transcript is emptied, the next prompt starts afresh",
        in_editors: true,
    },
    Spec {
        usage: "/context",
        what: "messages and estimated tokens in the model's context window",
        in_editors: true,
    },
    Spec {
        usage: "/model [NAME]",
        what: "show the model, or switch this session to NAME (a model, a provider, or provider/model)",
        in_editors: true,
    },
    Spec {
        usage: "/sessions",
        what: "the workspace's sessions",
        in_editors: false,
    },
    Spec {
        usage: "/new",
        what: "start a new session (with the next prompt)",
        in_editors: false,
    },
    Spec {
        usage: "/load ID",
        what: "continue another session (its id or a 4+ character prefix)",
        in_editors: false,
    },
    Spec {
        usage: "/mcp",
        what: "external MCP servers: their state and tool counts",
        in_editors: true,
    },
    Spec {
        usage: "/help",
        what: "this list",
        in_editors: true,
    },
    Spec {
        usage: "/quit",
        what: "leave (also /exit, Ctrl-D, or Ctrl-C twice)",
        in_editors: false,
    },
];

/// The commands an editor is offered.
pub fn editor_commands() -> impl Iterator<Item = &'static Spec> {
    COMMANDS.iter().filter(|c| c.in_editors)
}

/// The skill a prompt invokes, `/name` or `/name what to do`: a skill of the workspace is a
/// command of every front end. berth's own commands come first (a skill named `clear` is read
/// with the `skill` tool only), and `//name` is a prompt.
pub fn invoked_skill<'a>(
    skills: &'a berth_ops::skills::Skills,
    prompt: &str,
) -> Option<&'a berth_ops::skills::Skill> {
    let Input::Unknown(name) = parse(prompt) else {
        return None;
    };
    skills.get(name.trim_start_matches('/'))
}

/// The prompt a skill's invocation becomes: the line as typed (so the transcript and the
/// session's title read as the person wrote), then the skill's instructions for the model.
pub fn skill_prompt(typed: &str, skill: &berth_ops::skills::Skill, body: &str) -> String {
    format!(
        "{}\n\n---\nThe person invoked the skill \"{}\" ({} skills){}. Its instructions:\n\n{}",
        typed.trim(),
        skill.name,
        skill.source,
        match skill.files.is_empty() {
            true => String::new(),
            false => format!(
                "; its other files, read with the `skill` tool's `file`: {}",
                skill.files.join(", ")
            ),
        },
        body.trim_end()
    )
}

/// Which front end a command is typed in: what `/help` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontEnd {
    Chat,
    Editor,
}

/// A slash command, with its argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Workspace,
    Clear,
    Context,
    Model(Option<String>),
    Sessions,
    New,
    Load(String),
    Mcp,
    Help,
    Quit,
}

impl Command {
    /// How it is typed, without its argument (`/model`).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Workspace => "/workspace",
            Command::Clear => "/clear",
            Command::Context => "/context",
            Command::Model(_) => "/model",
            Command::Sessions => "/sessions",
            Command::New => "/new",
            Command::Load(_) => "/load",
            Command::Mcp => "/mcp",
            Command::Help => "/help",
            Command::Quit => "/quit",
        }
    }

    /// Whether an editor offers it.
    pub fn in_editors(&self) -> bool {
        let name = &self.name()[1..];
        COMMANDS.iter().any(|c| c.name() == name && c.in_editors)
    }
}

/// What a line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Nothing but blanks: the prompt again.
    Empty,
    /// A prompt for the model. A line starting with `//` sends the rest with one `/`.
    Prompt(String),
    Command(Command),
    /// A known command used wrongly: what to type instead.
    Usage(String),
    /// `/name` that is no command.
    Unknown(String),
}

pub fn parse(line: &str) -> Input {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Input::Empty;
    }
    if let Some(rest) = trimmed.strip_prefix("//") {
        return Input::Prompt(format!("/{rest}"));
    }
    let Some(rest) = trimmed.strip_prefix('/') else {
        return Input::Prompt(line.to_owned());
    };
    let (name, arg) = match rest.split_once(char::is_whitespace) {
        Some((name, arg)) => (name, arg.trim()),
        None => (rest, ""),
    };
    let none = |command: Command, usage: &str| {
        if arg.is_empty() {
            Input::Command(command)
        } else {
            Input::Usage(format!("{usage} takes no argument"))
        }
    };
    match name {
        "workspace" => none(Command::Workspace, "/workspace"),
        "clear" => none(Command::Clear, "/clear"),
        "context" => none(Command::Context, "/context"),
        "sessions" => none(Command::Sessions, "/sessions"),
        "new" => none(Command::New, "/new"),
        "mcp" => none(Command::Mcp, "/mcp"),
        "help" => none(Command::Help, "/help"),
        "quit" | "exit" => none(Command::Quit, "/quit"),
        "model" if arg.is_empty() => Input::Command(Command::Model(None)),
        "model" if arg.contains(char::is_whitespace) => {
            Input::Usage("usage: /model [NAME], one word (openai/gpt-4.1, say)".to_owned())
        }
        "model" => Input::Command(Command::Model(Some(arg.to_owned()))),
        "load" if arg.is_empty() || arg.contains(char::is_whitespace) => Input::Usage(
            "usage: /load ID (a session id or a 4+ character prefix; /sessions lists them)"
                .to_owned(),
        ),
        "load" => Input::Command(Command::Load(arg.to_owned())),
        _ => Input::Unknown(format!("/{name}")),
    }
}

/// The names of the commands, for an unknown command's message.
pub fn names() -> String {
    COMMANDS
        .iter()
        .map(|c| c.usage.split(' ').next().unwrap_or(c.usage))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `/help`: the commands the front end offers, then (in chat) the keys.
pub fn help(front: FrontEnd) -> String {
    let offered: Vec<&Spec> = COMMANDS
        .iter()
        .filter(|c| front == FrontEnd::Chat || c.in_editors)
        .collect();
    let width = offered.iter().map(|c| c.usage.len()).max().unwrap_or(0);
    let mut out = String::new();
    for c in offered {
        out.push_str(&format!("  {:width$}  {}\n", c.usage, c.what));
    }
    match front {
        FrontEnd::Chat => out.push_str(
            "Anything else is a prompt for the model (start it with // to send a line that \
             begins with /).\nCtrl-C stops a running turn; at an empty prompt, twice, it quits, \
             as Ctrl-D does. Up and down walk the history.\n",
        ),
        FrontEnd::Editor => out.push_str(
            "Anything else is a prompt for the model (start it with // to send a line that \
             begins with /).\n",
        ),
    }
    out
}

/// `/workspace`: where the session is and what it calls. `session` is `None` for a session
/// made with the next prompt.
pub fn workspace_text(
    workspace: &Workspace,
    session: Option<&Session>,
    messages: usize,
    model: &SessionModel,
    folder: &Path,
) -> String {
    let session = session.map_or_else(
        || "new (made with the next prompt)".to_owned(),
        berth_ops::session_label,
    );
    let name = workspace
        .name
        .as_ref()
        .map_or_else(|| "(no name)".to_owned(), |n| n.to_string());
    let switched = if model.kept {
        " (chosen for this session)"
    } else {
        ""
    };
    format!(
        "workspace  {name}\nid         {}\nsession    {session}\nprovider   {}\nmodel      {}{switched}\nmessages   {messages}\nfolder     {}",
        workspace.id,
        model.choice.provider,
        model.choice.model,
        folder.display()
    )
}

/// `/context`: how full the context window is.
pub fn context_text(fill: &Fill) -> String {
    let kept = if fill.in_window == fill.messages {
        "all in the context window".to_owned()
    } else {
        format!(
            "{} in the context window; the {} oldest are left out",
            fill.in_window,
            fill.messages - fill.in_window
        )
    };
    format!(
        "messages   {} ({kept})\ntokens     about {} of {} (with the system prompt and tools; {} kept for the answer)",
        fill.messages,
        thousands(fill.tokens),
        thousands(fill.window),
        thousands(fill.reserve)
    )
}

/// `/model`: the model, where it comes from, and the others the config offers.
pub fn model_text(resolved: &SessionModel, config: &Config) -> String {
    let (now, configured) = (&resolved.choice, &resolved.configured);
    let mut text = if resolved.kept {
        format!("model      {now} (chosen for this session; the config names {configured})")
    } else {
        format!("model      {now} (the workspace's config)")
    };
    if let Some(warning) = resolved.warning() {
        text.push_str(&format!("\nnote       {warning}"));
    }
    let others: Vec<String> = ModelChoice::choices(config)
        .into_iter()
        .filter(|c| c != now)
        .map(|c| c.to_string())
        .collect();
    if !others.is_empty() {
        text.push_str(&format!("\nalso       {}", others.join(", ")));
    }
    text.push_str(
        "\n/model NAME switches this session: a model of the same provider, a provider, or provider/model",
    );
    text
}

/// `/model NAME`, done.
pub fn switched_text(choice: &ModelChoice) -> String {
    format!("this session now calls {choice}")
}

/// `/clear`, done.
pub fn cleared_text(session: &Session) -> String {
    format!(
        "cleared session {}: its transcript is empty, the next prompt starts afresh",
        session.id
    )
}

/// `/mcp`: each configured server, its state and how many tools it offers.
pub fn mcp_text(servers: &[ServerStatus]) -> String {
    if servers.is_empty() {
        return "no MCP servers configured ([[mcp_servers]] in berth's config)".to_owned();
    }
    let width = servers.iter().map(|s| s.name.len()).max().unwrap_or(0);
    servers
        .iter()
        .map(|s| {
            let tools = match s.tools {
                1 => "1 tool".to_owned(),
                n => format!("{n} tools"),
            };
            format!("{:width$}  {tools:>9}  {}", s.name, s.state)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl Agent {
    /// Runs `command` on `session`, whose tools work in `folder`; the text to show. A command
    /// that is not the session's (chat's `/new`, `/load`, `/sessions`, `/quit`) answers what
    /// to do instead, in an editor's words: chat runs those itself.
    pub async fn session_command(
        &self,
        session: &Session,
        folder: &Path,
        command: &Command,
        front: FrontEnd,
    ) -> Result<String, AgentError> {
        let ops = self.ops();
        Ok(match command {
            Command::Workspace => {
                let workspace = ops.resolve_workspace(session.workspace_id.as_str()).await?;
                let model = ops.session_model(session).await?;
                let messages = ops.transcript(session).await?.messages.len();
                workspace_text(&workspace, Some(session), messages, &model, folder)
            }
            Command::Clear => {
                // Not while a turn answers in it, here or in another process.
                let hold = ops.hold_turn(session).await?;
                let cleared = ops.clear_session(session).await;
                hold.release().await;
                cleared?;
                cleared_text(session)
            }
            Command::Context => context_text(&self.context_fill(session, None).await?),
            Command::Model(None) => {
                let config = ops.config(Some(&session.workspace_id)).await?.config;
                model_text(&ops.session_model_in(session, &config).await?, &config)
            }
            Command::Model(Some(name)) => {
                let current = ops.session_model(session).await?.choice;
                let choice = self
                    .parse_model(&session.workspace_id, name, &current)
                    .await?;
                // Kept with the session, so a later chat, `chat -p` or an editor calls it too.
                ops.choose_session_model(session, &choice).await?;
                switched_text(&choice)
            }
            Command::Mcp => {
                let config = ops.config(Some(&session.workspace_id)).await?.config;
                mcp_text(&self.mcp_status_of(&config.mcp_servers))
            }
            Command::Help => help(front),
            Command::Sessions | Command::New | Command::Load(_) | Command::Quit => format!(
                "{} is berth chat's; in an editor, its own session list starts, opens and \
                 leaves sessions (the commands here: {})",
                command.name(),
                editor_commands()
                    .map(|c| format!("/{}", c.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_and_commands() {
        assert_eq!(parse(""), Input::Empty);
        assert_eq!(parse("   "), Input::Empty);
        assert_eq!(parse("hello /x"), Input::Prompt("hello /x".into()));
        // A prompt is sent as typed, inner blanks and all.
        assert_eq!(
            parse("  two  words "),
            Input::Prompt("  two  words ".into())
        );
        assert_eq!(parse("//etc/hosts?"), Input::Prompt("/etc/hosts?".into()));
        assert_eq!(parse("/clear"), Input::Command(Command::Clear));
        assert_eq!(parse("  /quit  "), Input::Command(Command::Quit));
        assert_eq!(parse("/exit"), Input::Command(Command::Quit));
        assert_eq!(parse("/model"), Input::Command(Command::Model(None)));
        assert_eq!(
            parse("/model  openai/gpt-4.1 "),
            Input::Command(Command::Model(Some("openai/gpt-4.1".into())))
        );
        assert_eq!(
            parse("/load 3f2a"),
            Input::Command(Command::Load("3f2a".into()))
        );
        assert!(matches!(parse("/load"), Input::Usage(_)));
        assert!(matches!(parse("/clear now"), Input::Usage(_)));
        assert!(matches!(parse("/model a b"), Input::Usage(_)));
        assert_eq!(parse("/nope x"), Input::Unknown("/nope".into()));
        assert_eq!(parse("/"), Input::Unknown("/".into()));
    }

    #[test]
    fn every_command_in_the_list_parses() {
        for c in COMMANDS {
            let line = c.usage.replace("[NAME]", "").replace("ID", "abcd");
            let Input::Command(command) = parse(&line) else {
                panic!("{} does not parse", c.usage)
            };
            assert_eq!(command.name(), format!("/{}", c.name()));
            assert_eq!(command.in_editors(), c.in_editors, "{}", c.usage);
        }
        assert!(names().starts_with("/workspace, /clear, /context, /model"));
        assert!(help(FrontEnd::Chat).contains("/load ID"));
    }

    #[test]
    fn an_editor_is_offered_what_works_on_one_session() {
        let offered: Vec<_> = editor_commands().map(Spec::name).collect();
        assert_eq!(
            offered,
            ["workspace", "clear", "context", "model", "mcp", "help"]
        );
        let help = help(FrontEnd::Editor);
        assert!(help.contains("/clear") && !help.contains("/load") && !help.contains("Ctrl-D"));
        let model = COMMANDS.iter().find(|c| c.name() == "model").unwrap();
        assert_eq!(model.argument(), Some("[NAME]"));
        assert_eq!(COMMANDS[0].argument(), None);
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(200_000), "200,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
