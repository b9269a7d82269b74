//! `berth chat -p`: one turn of berth's agent for scripts. The answer streams to stdout, and
//! nothing else goes there; tool activity, thoughts and errors go to stderr. Without `-p`, on a
//! terminal, the conversation of `interactive`.

mod editor;
mod interactive;
mod screen;

use std::io::{IsTerminal, Read, Write};
use std::sync::Arc;

use anyhow::{Context, bail};
use async_trait::async_trait;
use berth_agent::{
    AgentBuilder, AgentEvent, CancellationToken, Decision, PermissionRequest, Permissions, Policy,
    TurnRequest, TurnStop,
};
use berth_ops::{Ops, SessionChoice};

use super::Interrupted;
use crate::cli::ChatArgs;

pub async fn run(ops: Ops, args: ChatArgs) -> anyhow::Result<()> {
    let chatted = chat(ops, args).await;
    // The chat's sessions end with it, and so do the processes their agent started in the
    // background (berth's lifeline would take them down with this process too; this also
    // drops them from the workspace's registry).
    berth_agent::tools::background::end_all().await;
    chatted
}

async fn chat(ops: Ops, args: ChatArgs) -> anyhow::Result<()> {
    let Some(prompt) = args.prompt.clone() else {
        if !std::io::stdin().is_terminal() {
            return Err(berth_ops::Error::invalid(
                "`berth chat` without -p needs a terminal; for a script, pass the prompt with -p PROMPT (or -p - to read it from standard input)",
            )
            .into());
        }
        return interactive::run(ops, args).await;
    };
    let prompt = prompt_text(prompt)?;
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let agent = AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
    let choice = match session_choice(&args) {
        Some(choice) => choice,
        None => {
            // A chat that cannot answer leaves no `default` workspace or empty session behind;
            // an existing session keeps its own model, which its turn checks.
            agent
                .preflight_in(args.workspace.as_deref(), &cwd, args.model.as_deref())
                .await?;
            SessionChoice::New {
                first_prompt: prompt.clone(),
            }
        }
    };
    let session = ops
        .session_for_turn(args.workspace.as_deref(), &cwd, choice)
        .await?;
    if let Some(name) = &args.model {
        let current = ops.session_model(&session).await?.choice;
        let choice = agent
            .parse_model(&session.workspace_id, name, &current)
            .await?;
        ops.choose_session_model(&session, &choice).await?;
    }
    let cancel = CancellationToken::new();
    let permissions = Arc::new(FlagPermissions {
        allowed: policy(&args),
    });
    let turn = agent
        .start_turn(TurnRequest {
            session: session.clone(),
            prompt,
            images: Vec::new(),
            cwd,
            permissions,
            cancel: cancel.clone(),
            options: Default::default(),
        })
        .await?;
    {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        });
    }
    print_turn(turn, &session.id).await
}

/// The prompt of `-p`: read from standard input when it is `-`; never empty.
fn prompt_text(prompt: String) -> anyhow::Result<String> {
    let prompt = if prompt == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the prompt from standard input")?;
        text
    } else {
        prompt
    };
    if prompt.trim().is_empty() {
        bail!("the prompt is empty");
    }
    Ok(prompt)
}

/// Prints a turn as it goes: the answer to stdout, the rest to stderr; how it ended.
async fn print_turn(
    mut turn: berth_agent::Turn,
    session: &impl std::fmt::Display,
) -> anyhow::Result<()> {
    let color = color(&std::io::stderr());
    // On a terminal, the model's words with every control character shown as its escape
    // (they may quote a file it read); into a pipe, as it wrote them.
    let on_terminal = std::io::stdout().is_terminal();
    let dim = |s: &str| {
        let s = crate::render::lines(s);
        if color {
            format!("\x1b[2m{s}\x1b[0m")
        } else {
            s
        }
    };
    let mut stdout = std::io::stdout().lock();
    let mut ends_with_newline = true;
    while let Some(event) = turn.next_event().await {
        match event {
            AgentEvent::Text { text } => {
                match on_terminal {
                    true => stdout.write_all(crate::render::lines(&text).as_bytes())?,
                    false => stdout.write_all(text.as_bytes())?,
                }
                stdout.flush()?;
                if !text.is_empty() {
                    ends_with_newline = text.ends_with('\n');
                }
            }
            AgentEvent::Thought { text } => eprint!("{}", dim(&text)),
            AgentEvent::ToolStarted {
                name, arguments, ..
            } => eprintln!("{}", dim(&format!("→ {name} {arguments}"))),
            AgentEvent::PermissionAsked { .. } | AgentEvent::Usage { .. } => {}
            AgentEvent::Notice { message } => {
                eprintln!("berth: {}", crate::render::lines(&message))
            }
            AgentEvent::Told { text } => eprintln!("told: {}", crate::render::lines(&text)),
            AgentEvent::Plan { steps } => {
                eprintln!("{}", crate::render::lines(&screen::plan_text(&steps)))
            }
            AgentEvent::ToolFinished {
                name,
                output,
                is_error: true,
                ..
            } => eprintln!("{}", dim(&format!("✗ {name}: {}", first_line(&output)))),
            AgentEvent::ToolFinished { .. } => {}
            AgentEvent::TurnEnded { stop, .. } => {
                if !ends_with_newline {
                    stdout.write_all(b"\n")?;
                    stdout.flush()?;
                }
                return match stop {
                    TurnStop::Cancelled => Err(Interrupted(format!(
                        "interrupted; the text shown so far is kept in session {}",
                        session
                    ))
                    .into()),
                    stop => match ending(&stop, turn.provider) {
                        None => Ok(()),
                        Some(message) => bail!("{message}"),
                    },
                };
            }
        }
    }
    unreachable!("a turn's events end with TurnEnded")
}

/// The session `--session` or `--continue` names; `None`: a new one.
fn session_choice(args: &ChatArgs) -> Option<SessionChoice> {
    match (&args.session, args.continue_latest) {
        (Some(s), _) => Some(SessionChoice::Existing(s.clone())),
        (None, true) => Some(SessionChoice::Latest),
        (None, false) => None,
    }
}

/// Whether to colour what goes to `stream`: a terminal, and no `NO_COLOR` (set and not empty,
/// as no-color.org says).
fn color(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The tools `--allow` and `--allow-all` let write and run without asking.
fn policy(args: &ChatArgs) -> Policy {
    Policy::new(&args.allow, args.allow_all)
}

/// What went wrong when a turn did not end with the model's finished answer (`None` when it
/// did). A cancelled turn is each front end's own to report.
fn ending(stop: &TurnStop, provider: &str) -> Option<String> {
    match stop {
        TurnStop::EndTurn => None,
        TurnStop::Cancelled => Some("interrupted".to_owned()),
        TurnStop::Failed { message } => Some(message.clone()),
        TurnStop::MaxTokens => Some(format!(
            "the answer was cut: the model reached its output limit ([providers.{provider}] max_tokens)"
        )),
        TurnStop::MaxToolIterations => Some(
            "the turn stopped after too many tool rounds ([agent] max_tool_iterations)".to_owned(),
        ),
        TurnStop::Refusal => Some("the model refused to answer".to_owned()),
    }
}

/// Permissions answered from the command line: allowed tools run, everything else is refused
/// and the person is told how to allow it.
struct FlagPermissions {
    allowed: Policy,
}

#[async_trait]
impl Permissions for FlagPermissions {
    async fn decide(&self, request: &PermissionRequest) -> Decision {
        if self.allowed.allows(&request.tool) {
            Decision::AllowOnce
        } else {
            eprintln!(
                "refused {} (allow it with --allow {} or --allow-all): {}",
                request.tool,
                request.tool,
                crate::render::cell(first_line(&request.description))
            );
            Decision::Reject
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}
