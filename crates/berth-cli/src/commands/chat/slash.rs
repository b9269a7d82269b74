//! What a line typed at `berth chat`'s prompt is: a prompt for the model, or one of the slash
//! commands (the seed's `/workspace`, `/clear`, `/context`, `/help`, `/quit`, and berth's own).

/// The slash commands, as `/help` lists them: the command with its arguments, and what it does.
pub const COMMANDS: &[(&str, &str)] = &[
    (
        "/workspace",
        "the workspace (name, id), the session, provider, model and message count",
    ),
    (
        "/clear",
        "reset the session: its transcript is emptied, the next prompt starts afresh",
    ),
    (
        "/context",
        "messages and estimated tokens in the model's context window",
    ),
    (
        "/model [NAME]",
        "show the model, or switch this session to NAME (a model, a provider, or provider/model)",
    ),
    ("/sessions", "the workspace's sessions"),
    ("/new", "start a new session (with the next prompt)"),
    (
        "/load ID",
        "continue another session (its id or a 4+ character prefix)",
    ),
    ("/mcp", "external MCP servers: their state and tool counts"),
    ("/help", "this list"),
    ("/quit", "leave (also /exit, Ctrl-D, or Ctrl-C twice)"),
];

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
        .map(|(c, _)| c.split(' ').next().unwrap_or(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `/help`: the commands, then the keys.
pub fn help() -> String {
    let width = COMMANDS.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (command, what) in COMMANDS {
        out.push_str(&format!("  {command:width$}  {what}\n"));
    }
    out.push_str(
        "Anything else is a prompt for the model (start it with // to send a line that begins \
         with /).\nCtrl-C stops a running turn; at an empty prompt, twice, it quits, as Ctrl-D \
         does. Up and down walk the history.\n",
    );
    out
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
        for (command, _) in COMMANDS {
            let line = command.replace("[NAME]", "").replace("ID", "abcd");
            assert!(
                matches!(parse(&line), Input::Command(_)),
                "{command} does not parse"
            );
        }
        assert!(names().starts_with("/workspace, /clear, /context, /model"));
        assert!(help().contains("/load ID"));
    }
}
