//! Interactive `berth chat`: a conversation with berth's agent on a terminal. A thin front end
//! like `chat -p` and ACP: the runtime runs the turns (`berth_agent`), the operations layer
//! picks workspaces and sessions and keeps transcripts (`berth_ops`); this module reads lines
//! (`editor`), shows events (`screen`), asks permissions inline, and runs the slash commands
//! (`slash`).
//!
//! Ctrl-C has two meanings. While a line is read, the editor has the terminal in raw mode and
//! gets it as a key: it clears the line, or at an empty line counts toward quitting. While a
//! turn runs, the terminal is in its normal mode and Ctrl-C is SIGINT, which this process
//! catches for as long as the chat lasts: it cancels the turn (the provider's stream and
//! running tools stop at once; the text shown is kept in the transcript, marked interrupted).

use std::io::Stdout;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;
use berth_agent::{
    Agent, AgentBuilder, AgentEvent, CancellationToken, Decision, ModelChoice, PermissionRequest,
    Permissions, SessionModel, TurnOptions, TurnRequest,
};
use berth_ops::{Ops, Session, SessionChoice, Workspace};
use tokio::sync::{mpsc, oneshot};

use super::editor::{LineEditor, Read};
use super::screen::Screen;
use super::slash::{self, Command, Input};
use crate::cli::ChatArgs;

/// The prompt a line is typed after.
const PROMPT: &str = "berth> ";

/// The line history, in berth's home.
const HISTORY_FILE: &str = "chat_history";

/// Sessions `/sessions` lists, the newest.
const SESSIONS_LISTED: usize = 20;

pub async fn run(ops: Ops, args: ChatArgs) -> anyhow::Result<()> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    // From here on Ctrl-C stops turns, not the process. The handler goes in before the editor
    // starts: rustyline puts back, after each line, the SIGINT handler it found.
    let interrupts = Interrupts::new().context("cannot catch Ctrl-C")?;
    let (workspace, session) = match super::session_choice(&args) {
        Some(choice) => {
            let s = ops
                .session_for_turn(args.workspace.as_deref(), &cwd, choice)
                .await?;
            let ws = ops.resolve_workspace(s.workspace_id.as_str()).await?;
            (ws, Some(s))
        }
        // The session is made with the first prompt: a chat left without a word leaves no
        // empty session behind.
        None => (
            ops.workspace_for_turn(args.workspace.as_deref(), &cwd)
                .await?,
            None,
        ),
    };
    let editor =
        LineEditor::start(ops.home().join(HISTORY_FILE)).context("cannot start the line editor")?;
    let stdout = std::io::stdout();
    let color = super::color(&stdout);
    let agent = AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
    let mut chat = Chat {
        ops,
        agent,
        cwd,
        workspace,
        session,
        pending_model: None,
        allowed: super::policy(&args),
        editor,
        interrupts,
        screen: Screen::new(stdout, color),
    };
    if let Some(name) = &args.model {
        chat.switch_model(name).await?;
    }
    chat.banner().await?;
    chat.converse().await
}

struct Chat {
    ops: Ops,
    agent: Agent,
    /// Where file tools and commands work.
    cwd: PathBuf,
    workspace: Workspace,
    /// `None`: a new session, made with the next prompt.
    session: Option<Session>,
    /// A model chosen with `/model` before the session is made; kept with it when it is.
    /// Once there is a session, its choice is the session's own (`Ops::session_model`).
    pending_model: Option<ModelChoice>,
    /// Tools `--allow` lets run without asking.
    allowed: berth_agent::Policy,
    editor: LineEditor,
    interrupts: Interrupts,
    screen: Screen<Stdout>,
}

impl Chat {
    async fn banner(&mut self) -> anyhow::Result<()> {
        let model = self.model_now().await?;
        if let Some(warning) = model.warning() {
            self.screen.error(&warning)?;
        }
        let model = model.choice;
        let session = match &self.session {
            Some(s) => {
                let n = self.ops.transcript(s).await?.messages.len();
                format!("session {} ({n} messages)", berth_ops::session_label(s))
            }
            None => "a new session".to_owned(),
        };
        self.screen.activity(&format!(
            "berth chat · workspace {} · {session} · {model}",
            self.workspace.label()
        ))?;
        self.screen
            .activity("/help lists the commands · Ctrl-C stops a turn · Ctrl-D quits")?;
        Ok(())
    }

    /// Reads lines until `/quit`, Ctrl-D, or Ctrl-C twice at an empty prompt.
    async fn converse(&mut self) -> anyhow::Result<()> {
        let mut interrupted = false;
        loop {
            self.screen.end_line()?;
            let line = match self
                .editor
                .read(PROMPT, true)
                .await
                .context("cannot read from the terminal")?
            {
                Read::Eof => return Ok(()),
                Read::Interrupted if interrupted => return Ok(()),
                Read::Interrupted => {
                    interrupted = true;
                    self.screen
                        .activity("(Ctrl-C again, /quit or Ctrl-D to leave)")?;
                    continue;
                }
                Read::Line(line) => line,
            };
            interrupted = false;
            let done = match slash::parse(&line) {
                Input::Empty => Ok(()),
                Input::Prompt(prompt) => self.turn(prompt).await,
                Input::Command(Command::Quit) => return Ok(()),
                Input::Command(command) => self.command(command).await,
                Input::Usage(message) => Err(anyhow::anyhow!(message)),
                Input::Unknown(name) => Err(anyhow::anyhow!(
                    "unknown command {name}; the commands are {} (/help says what they do; // starts a prompt with /)",
                    slash::names()
                )),
            };
            if let Err(e) = done {
                self.screen.error(&format!("{e:#}"))?;
            }
        }
    }

    /// The model the session calls: the session's own, or for a session not made yet, the one
    /// chosen for it, else the config's.
    async fn model_now(&self) -> anyhow::Result<SessionModel> {
        if let Some(s) = &self.session {
            return Ok(self.ops.session_model(s).await?);
        }
        let config = self.ops.config(Some(&self.workspace.id)).await?.config;
        let configured = ModelChoice::configured(&config);
        Ok(SessionModel {
            choice: self
                .pending_model
                .clone()
                .unwrap_or_else(|| configured.clone()),
            kept: self.pending_model.is_some(),
            configured,
            set_aside: None,
        })
    }

    /// One turn: its events shown as they come, its permission questions asked in order with
    /// them, Ctrl-C cancelling it.
    async fn turn(&mut self, prompt: String) -> anyhow::Result<()> {
        // A Ctrl-C from before this turn (typed while no line was read) is not for it.
        self.interrupts.forget();
        let session = match &self.session {
            Some(s) => s.clone(),
            None => {
                let s = self
                    .ops
                    .session_for_turn(
                        Some(self.workspace.id.as_str()),
                        &self.cwd,
                        SessionChoice::New {
                            first_prompt: prompt.clone(),
                        },
                    )
                    .await?;
                if let Some(m) = self.pending_model.take() {
                    self.ops.choose_session_model(&s, &m).await?;
                }
                self.session = Some(s.clone());
                s
            }
        };
        let cancel = CancellationToken::new();
        let (asks, mut asked) = mpsc::channel(1);
        let permissions = Arc::new(AskPermissions {
            asks,
            allowed: self.allowed.clone(),
        });
        let mut turn = self
            .agent
            .start_turn(TurnRequest {
                session: session.clone(),
                prompt,
                images: Vec::new(),
                cwd: self.cwd.clone(),
                permissions,
                cancel: cancel.clone(),
                options: TurnOptions::default(),
            })
            .await?;
        loop {
            tokio::select! {
                biased;
                () = self.interrupts.recv(), if !cancel.is_cancelled() => cancel.cancel(),
                Some(event) = turn.next_event() => {
                    if let AgentEvent::TurnEnded { stop, .. } = &event {
                        self.screen.end_line()?;
                        if *stop == berth_agent::TurnStop::Cancelled {
                            self.screen.activity(
                                "[interrupted] what was shown is kept in the session",
                            )?;
                        } else if let Some(message) = super::ending(stop, turn.provider) {
                            self.screen.error(&message)?;
                        }
                        return Ok(());
                    }
                    self.show(event)?;
                }
                Some(ask) = asked.recv() => {
                    let decision = self.ask(&ask.request, &cancel).await?;
                    let _ = ask.reply.send(decision);
                }
            }
        }
    }

    fn show(&mut self, event: AgentEvent) -> std::io::Result<()> {
        match event {
            AgentEvent::Text { text } => self.screen.text(&text),
            AgentEvent::Thought { text } => self.screen.thought(&text),
            AgentEvent::ToolStarted {
                name, arguments, ..
            } => self.screen.tool_started(&name, &arguments),
            // The question itself comes through `AskPermissions`, with the same description.
            AgentEvent::PermissionAsked { .. } => Ok(()),
            AgentEvent::ToolFinished {
                name,
                output,
                is_error,
                ..
            } => self.screen.tool_finished(&name, &output, is_error),
            AgentEvent::Notice { message } => self.screen.say(&format!("berth: {message}")),
            AgentEvent::Plan { steps } => self.screen.plan(&steps),
            AgentEvent::TurnEnded { .. } => Ok(()),
        }
    }

    /// Asks whether a tool may run: what it would do, then y (once), a (always, this
    /// session), n. Ctrl-C refuses and cancels the turn.
    async fn ask(
        &mut self,
        request: &PermissionRequest,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Decision> {
        self.screen.end_line()?;
        self.screen.request(&request.description)?;
        let question = format!(
            "allow {}? [y] once, [a] always in this session, [n] no: ",
            request.tool
        );
        loop {
            let read = self
                .editor
                .read(&question, false)
                .await
                .context("cannot read from the terminal")?;
            match read {
                Read::Line(answer) => match answer.trim().to_lowercase().as_str() {
                    "y" | "yes" => return Ok(Decision::AllowOnce),
                    "a" | "always" => return Ok(Decision::AllowAlways),
                    "n" | "no" => return Ok(Decision::Reject),
                    _ => self.screen.say("answer y, a or n")?,
                },
                Read::Interrupted => {
                    cancel.cancel();
                    return Ok(Decision::Reject);
                }
                Read::Eof => return Ok(Decision::Reject),
            }
        }
    }

    async fn command(&mut self, command: Command) -> anyhow::Result<()> {
        match command {
            Command::Workspace => self.show_workspace().await,
            Command::Clear => match &self.session {
                None => Ok(self
                    .screen
                    .say("nothing to clear: the session has no messages yet")?),
                Some(s) => {
                    self.ops.clear_session(s).await?;
                    Ok(self.screen.say(&format!(
                        "cleared session {}: its transcript is empty, the next prompt starts afresh",
                        s.id
                    ))?)
                }
            },
            Command::Context => self.show_context().await,
            Command::Model(None) => self.show_model().await,
            Command::Model(Some(name)) => self.switch_model(&name).await,
            Command::Sessions => self.list_sessions().await,
            Command::New => {
                self.session = None;
                self.pending_model = None;
                Ok(self
                    .screen
                    .say("a new session starts with your next prompt")?)
            }
            Command::Load(id) => self.load(&id).await,
            Command::Mcp => {
                let config = self.ops.config(Some(&self.workspace.id)).await?.config;
                let servers = self.agent.mcp_status_of(&config.mcp_servers);
                Ok(self.screen.say(&mcp_servers(&servers))?)
            }
            Command::Help => Ok(self.screen.say(&slash::help())?),
            Command::Quit => Ok(()),
        }
    }

    async fn show_workspace(&mut self) -> anyhow::Result<()> {
        let now = self.model_now().await?;
        let model = &now.choice;
        let (session, messages) = match &self.session {
            Some(s) => (
                berth_ops::session_label(s),
                self.ops.transcript(s).await?.messages.len(),
            ),
            None => ("new (made with the next prompt)".to_owned(), 0),
        };
        let name = self
            .workspace
            .name
            .as_ref()
            .map_or_else(|| "(no name)".to_owned(), |n| n.to_string());
        let switched = if now.kept {
            " (chosen for this session)"
        } else {
            ""
        };
        let text = format!(
            "workspace  {name}\nid         {}\nsession    {session}\nprovider   {}\nmodel      {}{switched}\nmessages   {messages}\nfolder     {}",
            self.workspace.id,
            model.provider,
            model.model,
            self.cwd.display()
        );
        Ok(self.screen.say(&text)?)
    }

    async fn show_context(&mut self) -> anyhow::Result<()> {
        let Some(session) = &self.session else {
            return Ok(self
                .screen
                .say("messages   0 (the session starts with your next prompt)")?);
        };
        let fill = self.agent.context_fill(session, None).await?;
        let kept = if fill.in_window == fill.messages {
            "all in the context window".to_owned()
        } else {
            format!(
                "{} in the context window; the {} oldest are left out",
                fill.in_window,
                fill.messages - fill.in_window
            )
        };
        let text = format!(
            "messages   {} ({kept})\ntokens     about {} of {} (with the system prompt and tools; {} kept for the answer)",
            fill.messages,
            thousands(fill.tokens),
            thousands(fill.window),
            thousands(fill.reserve)
        );
        Ok(self.screen.say(&text)?)
    }

    async fn show_model(&mut self) -> anyhow::Result<()> {
        let config = self.ops.config(Some(&self.workspace.id)).await?.config;
        let resolved = self.model_now().await?;
        let (now, configured) = (&resolved.choice, &resolved.configured);
        let mut text = if resolved.kept {
            format!("model      {now} (chosen for this session; the config names {configured})")
        } else {
            format!("model      {now} (the workspace's config)")
        };
        if let Some(warning) = resolved.warning() {
            text.push_str(&format!("\nnote       {warning}"));
        }
        let others: Vec<String> = ModelChoice::choices(&config)
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
        Ok(self.screen.say(&text)?)
    }

    async fn switch_model(&mut self, name: &str) -> anyhow::Result<()> {
        let current = self.model_now().await?.choice;
        let choice = self
            .agent
            .parse_model(&self.workspace.id, name, &current)
            .await?;
        // Kept with the session, so a later chat, `chat -p` or an editor calls it too; a
        // session not made yet gets it when it is.
        match &self.session {
            Some(s) => self.ops.choose_session_model(s, &choice).await?,
            None => self.pending_model = Some(choice.clone()),
        }
        Ok(self
            .screen
            .say(&format!("this session now calls {choice}"))?)
    }

    async fn list_sessions(&mut self) -> anyhow::Result<()> {
        let sessions = self.ops.session_records(Some(&self.workspace.id)).await?;
        if sessions.is_empty() {
            return Ok(self.screen.say(&format!(
                "workspace {} has no sessions yet",
                self.workspace.label()
            ))?);
        }
        let current = self.session.as_ref().map(|s| &s.id);
        let skipped = sessions.len().saturating_sub(SESSIONS_LISTED);
        let mut text = String::new();
        if skipped > 0 {
            text.push_str(&format!(
                "({skipped} older: berth session list --workspace {})\n",
                self.workspace.id
            ));
        }
        for s in &sessions[skipped..] {
            let mark = if Some(&s.id) == current { '*' } else { ' ' };
            let short: String = s.id.as_str().chars().take(8).collect();
            let when = s
                .created_at
                .with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M");
            text.push_str(&format!("{mark} {short}  {when}  {}\n", s.title));
        }
        if current.is_none() {
            text.push_str("* new (made with the next prompt)\n");
        }
        text.push_str("/load ID continues one");
        Ok(self.screen.say(&text)?)
    }

    async fn load(&mut self, id: &str) -> anyhow::Result<()> {
        let session = self.ops.resolve_session(id).await?;
        let workspace = self
            .ops
            .resolve_workspace(session.workspace_id.as_str())
            .await?;
        let messages = self.ops.transcript(&session).await?.messages.len();
        let text = format!(
            "continuing session {} ({messages} messages) in workspace {}",
            berth_ops::session_label(&session),
            workspace.label()
        );
        self.workspace = workspace;
        self.session = Some(session);
        self.pending_model = None;
        Ok(self.screen.say(&text)?)
    }
}

/// `/mcp`: each configured server, its state and how many tools it offers.
fn mcp_servers(servers: &[berth_agent::ServerStatus]) -> String {
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
fn thousands(n: u64) -> String {
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

/// A permission question on its way to the person.
struct Ask {
    request: PermissionRequest,
    reply: oneshot::Sender<Decision>,
}

/// Permissions a person answers at the chat's prompt, in order with the turn's events: the
/// question goes to the chat's loop, which shows it once the events before it are shown.
struct AskPermissions {
    asks: mpsc::Sender<Ask>,
    allowed: berth_agent::Policy,
}

#[async_trait]
impl Permissions for AskPermissions {
    async fn decide(&self, request: &PermissionRequest) -> Decision {
        if self.allowed.allows(&request.tool) {
            return Decision::AllowOnce;
        }
        let (reply, answer) = oneshot::channel();
        let ask = Ask {
            request: request.clone(),
            reply,
        };
        if self.asks.send(ask).await.is_err() {
            return Decision::Reject;
        }
        answer.await.unwrap_or(Decision::Reject)
    }
}

/// Ctrl-C as a signal: while a turn runs (the editor takes it as a key while it reads a line).
struct Interrupts {
    #[cfg(unix)]
    signal: tokio::signal::unix::Signal,
    #[cfg(windows)]
    signal: tokio::signal::windows::CtrlC,
}

impl Interrupts {
    fn new() -> std::io::Result<Interrupts> {
        Ok(Interrupts {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?,
            #[cfg(windows)]
            signal: tokio::signal::windows::ctrl_c()?,
        })
    }

    /// The next Ctrl-C.
    async fn recv(&mut self) {
        if self.signal.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }

    /// Drops a Ctrl-C that came in before now.
    fn forget(&mut self) {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        while let std::task::Poll::Ready(Some(())) = self.signal.poll_recv(&mut cx) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(200_000), "200,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
