//! Interactive `berth chat`: a conversation with berth's agent on a terminal. A thin front end
//! like `chat -p` and ACP: the runtime runs the turns (`berth_agent`), the operations layer
//! picks workspaces and sessions and keeps transcripts (`berth_ops`); this module reads lines
//! (`editor`), shows events (`screen`), asks permissions inline, and runs the slash commands
//! (`berth_agent::slash`, shared with ACP; only chat's own, and those typed before the session
//! is made, are handled here).
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
use berth_agent::slash::{self, Command, FrontEnd, Input};
use berth_agent::{
    Agent, AgentBuilder, AgentEvent, CancellationToken, Decision, ModelChoice, PermissionRequest,
    Permissions, SessionModel, TurnOptions, TurnRequest,
};
use berth_ops::{Ops, Session, SessionChoice, Workspace};
use tokio::sync::{mpsc, oneshot};

use super::editor::{LineEditor, Read};
use super::screen::Screen;
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
    let agent = AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
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
        None => {
            agent
                .preflight_in(args.workspace.as_deref(), &cwd, args.model.as_deref())
                .await?;
            (
                ops.workspace_for_turn(args.workspace.as_deref(), &cwd)
                    .await?,
                None,
            )
        }
    };
    let editor =
        LineEditor::start(ops.home().join(HISTORY_FILE)).context("cannot start the line editor")?;
    let stdout = std::io::stdout();
    let color = super::color(&stdout);
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
                // A skill of the workspace is a command too: the agent reads it into the turn.
                Input::Unknown(name) => match self.ops.skills(Some(&self.workspace)).await {
                    Ok(skills) if slash::invoked_skill(&skills, &line).is_some() => {
                        self.turn(line.trim().to_owned()).await
                    }
                    _ => Err(anyhow::anyhow!(
                        "unknown command {name}; the commands are {} and the workspace's skills (`berth skill list`) (/help says what they do; // starts a prompt with /)",
                        slash::names()
                    )),
                },
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
                    let decision = self.ask(&ask.request, ask.once_only, &cancel).await?;
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
            AgentEvent::Told { text } => self.screen.say(&format!("told: {text}")),
            AgentEvent::Plan { steps } => self.screen.plan(&steps),
            AgentEvent::TurnEnded { .. } | AgentEvent::Usage { .. } => Ok(()),
        }
    }

    /// Asks whether a tool may run: what it would do, then y (once), a (always, this
    /// session), n; a question `once_only` offers no "always". Ctrl-C refuses and cancels the
    /// turn.
    async fn ask(
        &mut self,
        request: &PermissionRequest,
        once_only: bool,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Decision> {
        self.screen.end_line()?;
        self.screen.request(&request.description)?;
        let question = match once_only {
            true => format!("allow {}? [y] once, [n] no: ", request.tool),
            false => format!(
                "allow {}? [y] once, [a] always in this session, [n] no: ",
                request.tool
            ),
        };
        loop {
            let read = self
                .editor
                .read(&question, false)
                .await
                .context("cannot read from the terminal")?;
            match read {
                Read::Line(answer) => match answer.trim().to_lowercase().as_str() {
                    "y" | "yes" => return Ok(Decision::AllowOnce),
                    "a" | "always" if !once_only => return Ok(Decision::AllowAlways),
                    "n" | "no" => return Ok(Decision::Reject),
                    _ if once_only => self.screen.say("answer y or n")?,
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
        match (&command, &self.session) {
            (Command::Sessions, _) => return self.list_sessions().await,
            (Command::New, _) => {
                self.session = None;
                self.pending_model = None;
                return Ok(self
                    .screen
                    .say("a new session starts with your next prompt")?);
            }
            (Command::Load(id), _) => return self.load(id).await,
            (Command::Quit, _) => return Ok(()),
            (Command::Model(Some(name)), _) => return self.switch_model(name).await,
            // The session's own: the same commands, and answers, as in an editor.
            (_, Some(session)) => {
                let text = self
                    .agent
                    .session_command(session, &self.cwd, &command, FrontEnd::Chat)
                    .await?;
                return Ok(self.screen.say(&text)?);
            }
            (_, None) => {}
        }
        // Typed before the session is made.
        let text = match command {
            Command::Workspace => {
                let model = self.model_now().await?;
                slash::workspace_text(&self.workspace, None, 0, &model, &self.cwd)
            }
            Command::Clear => "nothing to clear: the session has no messages yet".to_owned(),
            Command::Context => {
                "messages   0 (the session starts with your next prompt)".to_owned()
            }
            Command::Model(_) => {
                let config = self.ops.config(Some(&self.workspace.id)).await?.config;
                slash::model_text(&self.model_now().await?, &config)
            }
            Command::Mcp => {
                let config = self.ops.config(Some(&self.workspace.id)).await?.config;
                slash::mcp_text(&self.agent.mcp_status_of(&config.mcp_servers))
            }
            Command::Help => slash::help(FrontEnd::Chat),
            Command::Sessions | Command::New | Command::Load(_) | Command::Quit => return Ok(()),
        };
        Ok(self.screen.say(&text)?)
    }

    /// `/model NAME` and `--model`: kept with the session (as an editor's `/model` keeps it),
    /// or, for a session not made yet, given to it when it is.
    async fn switch_model(&mut self, name: &str) -> anyhow::Result<()> {
        if let Some(session) = &self.session {
            let command = Command::Model(Some(name.to_owned()));
            let text = self
                .agent
                .session_command(session, &self.cwd, &command, FrontEnd::Chat)
                .await?;
            return Ok(self.screen.say(&text)?);
        }
        let current = self.model_now().await?.choice;
        let choice = self
            .agent
            .parse_model(&self.workspace.id, name, &current)
            .await?;
        self.pending_model = Some(choice.clone());
        Ok(self.screen.say(&slash::switched_text(&choice))?)
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

/// A permission question on its way to the person.
struct Ask {
    request: PermissionRequest,
    /// A question with no "always" (to lift the sandbox).
    once_only: bool,
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
            once_only: false,
            reply,
        };
        if self.asks.send(ask).await.is_err() {
            return Decision::Reject;
        }
        answer.await.unwrap_or(Decision::Reject)
    }

    /// Always asked of the person (no `--allow` answers it), and allowed for this run only:
    /// the question offers no "always". A sandbox lifted for the rest of the chat would be a
    /// far bigger grant than the one command the person has read, so "always" is not offered
    /// rather than made to stick (each refusal is asked about again); to run everything
    /// unconfined, a person sets `[sandbox] mode = "off"`.
    async fn allow_unconfined(&self, request: &PermissionRequest) -> bool {
        let (reply, answer) = oneshot::channel();
        let ask = Ask {
            request: request.clone(),
            once_only: true,
            reply,
        };
        if self.asks.send(ask).await.is_err() {
            return false;
        }
        matches!(answer.await, Ok(Decision::AllowOnce))
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
