//! The agent runtime: [`AgentBuilder`] makes an [`Agent`], which runs turns of sessions.
//!
//! A turn: the prompt is appended to the transcript; then, until the model ends its turn, the
//! conversation goes to the provider, the answer streams out as events, the tool calls it makes
//! run (those that write or run commands only with the front end's permission), and their
//! results go back. Every event goes through one channel, in the order it happened, and
//! [`AgentEvent::TurnEnded`] is always the last. The cancellation token stops the provider's
//! stream and running tools at once; the text a person already saw is kept in the transcript,
//! marked as interrupted. Each tool call is recorded in the transcript with its result, as a
//! `## Tool` message: a record for people (and a run's review), which is not sent back to the
//! model when the session goes on.
//!
//! The turn's phases, one module each:
//! - [`live`]: the hold (one turn at a time in a session, taken before anything reads the
//!   history) and the running turn as a follower sees it;
//! - [`setup`]: the session's config, provider and history;
//! - [`turn_loop`]: the prompt made durable, then the model's rounds and their tool calls;
//! - [`partial`]: the answer kept aside while it streams, for a process killed mid-answer.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use berth_core::config::McpServerSettings;
use berth_ops::{ModelChoice, Ops, Session, WorkspaceId};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::context::{self, Fill};
use crate::conversation::{Image, Usage};
use crate::events::{AgentEvent, Permissions, TurnStop};
use crate::http::{Http, HttpPolicy};
use crate::mcp::{McpServers, ServerStatus};
use crate::provider::Provider;
use crate::providers::SetupError;
use crate::tools::{Commands, Files, Toolbox};

/// Tool rounds a turn may take unless `[agent] max_tool_iterations` says otherwise.
pub const DEFAULT_MAX_TOOL_ITERATIONS: u32 = 50;

/// Output tokens asked for unless `[providers.X] max_tokens` says otherwise.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

pub use berth_ops::INTERRUPTED;
pub use setup::DEFAULT_SYSTEM_PROMPT;

mod live;
mod partial;
mod setup;
mod turn_loop;

pub use live::Following;
use live::{LiveTurn, LiveTurns};
use setup::Setup;

/// What stops a turn from starting.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Ops(#[from] berth_ops::Error),
    #[error(transparent)]
    Setup(#[from] SetupError),
}

impl AgentError {
    /// The kind every front end maps, as it maps an operation's: a missing key is not
    /// configured; a bad base URL is a config value to fix (invalid); an HTTP client that
    /// cannot be built, I/O.
    pub fn kind(&self) -> berth_ops::ErrorKind {
        match self {
            AgentError::Ops(e) => e.kind(),
            AgentError::Setup(e) => berth_core::Kinded::kind(e),
        }
    }
}

impl berth_core::Kinded for AgentError {
    fn kind(&self) -> berth_core::ErrorKind {
        AgentError::kind(self)
    }
}

/// Builds an [`Agent`]: the operations (stores, config) it works through, the tools it offers,
/// and, where a front end or a test wants one, a provider of its own instead of the one the
/// config names.
pub struct AgentBuilder {
    ops: Ops,
    tools: Toolbox,
    provider: Option<Arc<dyn Provider>>,
    policy: HttpPolicy,
    system_prompt: Option<String>,
}

impl AgentBuilder {
    pub fn new(ops: Ops) -> AgentBuilder {
        AgentBuilder {
            ops,
            tools: Toolbox::new(),
            provider: None,
            policy: HttpPolicy::default(),
            system_prompt: None,
        }
    }

    pub fn tools(mut self, tools: Toolbox) -> AgentBuilder {
        self.tools = tools;
        self
    }

    /// Calls this provider instead of the one each session's config names.
    pub fn provider(mut self, provider: Arc<dyn Provider>) -> AgentBuilder {
        self.provider = Some(provider);
        self
    }

    /// Retries and timeouts of the providers made from config.
    pub fn http_policy(mut self, policy: HttpPolicy) -> AgentBuilder {
        self.policy = policy;
        self
    }

    /// Replaces the built-in system prompt (the workspace context is still added to it).
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> AgentBuilder {
        self.system_prompt = Some(prompt.into());
        self
    }

    pub fn build(self) -> Agent {
        Agent {
            inner: Arc::new(Inner {
                ops: self.ops,
                tools: self.tools,
                provider: self.provider,
                policy: self.policy,
                http: OnceLock::new(),
                system_prompt: self.system_prompt,
                always_allowed: Mutex::default(),
                mcp: Mutex::default(),
                live: Arc::default(),
            }),
        }
    }
}

/// berth's agent. Cheap to clone; one agent serves many sessions and turns.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

struct Inner {
    ops: Ops,
    tools: Toolbox,
    provider: Option<Arc<dyn Provider>>,
    policy: HttpPolicy,
    /// The HTTP client of every provider made from config, built on first use and kept: a
    /// new one per turn cost milliseconds (it loads the system's root certificates).
    http: OnceLock<Result<Http, String>>,
    system_prompt: Option<String>,
    /// `(session, tool)` pairs the front end allowed for the rest of the session.
    always_allowed: Mutex<HashSet<(String, String)>>,
    /// The external servers of each `[[mcp_servers]]` list met so far (workspaces may name
    /// different ones), started on first use and kept for the agent's life.
    mcp: Mutex<Vec<(Vec<McpServerSettings>, Arc<McpServers>)>>,
    /// The turns running now, for followers.
    live: Arc<LiveTurns>,
}

/// One turn to run.
pub struct TurnRequest {
    pub session: Session,
    pub prompt: String,
    /// Pictures attached to the prompt. The model sees them in this turn; the transcript keeps
    /// a note of each (type and size), which is what later turns see.
    pub images: Vec<Image>,
    /// Where file tools and commands work, confined.
    pub cwd: PathBuf,
    pub permissions: Arc<dyn Permissions>,
    pub cancel: CancellationToken,
    /// What the front end brings: its files, its terminals, its choice of model.
    pub options: TurnOptions,
}

/// A front end's own reach for a turn. The default: the disk, berth's own processes, and the
/// model the workspace's config names.
#[derive(Clone, Default)]
pub struct TurnOptions {
    /// Where file tools read and write (an editor's buffers).
    pub files: Option<Arc<dyn Files>>,
    /// Where `run_command` runs (an editor's terminals).
    pub commands: Option<Arc<dyn Commands>>,
    /// The provider and model to call in this turn instead of the session's
    /// ([`Ops::session_model`]); not kept. A front end that lets a person choose keeps the
    /// choice with [`Ops::choose_session_model`] instead, so every later turn calls it.
    pub model: Option<ModelChoice>,
    /// A client's own MCP servers (ACP `mcpServers`), whose tools join the config's.
    pub mcp: Option<Arc<McpServers>>,
    /// Asked with the turn's tokens after each answer: `true` stops the turn there, before
    /// any tool the answer asked for runs (a run's budget). The turn ends `Cancelled`.
    pub stop_after: Option<Arc<dyn Fn(Usage) -> bool + Send + Sync>>,
    /// What a person said while the turn worked (`berth run tell`), taken once each step's
    /// tool results are in: each text joins the conversation beside them as the person's,
    /// and the turn goes on with it, uncancelled. Said as [`AgentEvent::Told`] and kept in
    /// the transcript where it joined.
    pub told: Option<Arc<dyn Fn() -> Vec<String> + Send + Sync>>,
}

/// A running turn: its events, in order, ending with [`AgentEvent::TurnEnded`].
pub struct Turn {
    events: Events,
    /// Whether [`AgentEvent::TurnEnded`] was handed out.
    ended: bool,
    /// The provider and model this turn calls.
    pub provider: &'static str,
    pub model: String,
    /// The model's context window, in tokens.
    pub context_tokens: u64,
}

/// Where a [`Turn`]'s events come from: the turn's own task (bounded: a front end that reads
/// slowly holds the model's stream back), or, for a follower, the turn's record
/// ([`Agent::follow`]), which never waits for one.
enum Events {
    Own(mpsc::Receiver<AgentEvent>),
    Followed(mpsc::UnboundedReceiver<AgentEvent>),
}

impl Events {
    async fn recv(&mut self) -> Option<AgentEvent> {
        match self {
            Events::Own(rx) => rx.recv().await,
            Events::Followed(rx) => rx.recv().await,
        }
    }
}

impl Agent {
    /// The operations this agent works through.
    pub fn ops(&self) -> &Ops {
        &self.inner.ops
    }

    /// How full a session's context window is: what its next turn would send, estimated (a
    /// front end's `/context`), with `model` instead of the session's when given.
    pub async fn context_fill(
        &self,
        session: &Session,
        model: Option<&ModelChoice>,
    ) -> Result<Fill, AgentError> {
        let setup = self.inner.setup(session, model).await?;
        Ok(context::fill(
            &setup.history,
            &setup.system,
            &self.inner.tools.specs(),
            &setup.window,
        ))
    }

    /// Whether a turn could start in `workspace` (`None`: a workspace not made yet, which has
    /// only the user's config), calling `model` when given (as `--model` reads a name), else
    /// the configured one: its provider has a key and a usable base URL. Nothing is made, so
    /// a front end asks this before it makes the workspace, session or worktree a turn needs.
    pub async fn preflight(
        &self,
        workspace: Option<&WorkspaceId>,
        model: Option<&str>,
    ) -> Result<(), AgentError> {
        let config = self.inner.config(workspace, None).await?;
        let config = match model {
            Some(name) => {
                let choice = ModelChoice::parse(name, &ModelChoice::configured(&config), &config)?;
                self.inner.config(workspace, Some(&choice)).await?
            }
            None => config,
        };
        self.inner.provider(&config).map(drop)
    }

    /// [`Agent::preflight`] for a new session's first turn of a front end working in `dir`:
    /// in the workspace [`Ops::workspace_for_turn`] would give it (`workspace` names one),
    /// found without making `default`, so a turn that cannot start leaves nothing behind.
    pub async fn preflight_in(
        &self,
        workspace: Option<&str>,
        dir: &std::path::Path,
        model: Option<&str>,
    ) -> Result<(), AgentError> {
        let ws = self
            .inner
            .ops
            .workspace_for_turn_if_made(workspace, dir)
            .await?;
        self.preflight(ws.as_ref().map(|w| &w.id), model).await
    }

    /// Whether turns in `workspace` can call `model` (its provider has a key): for a front end
    /// that switches models, to refuse at once rather than at the next prompt.
    pub async fn check_model(
        &self,
        workspace: &WorkspaceId,
        model: &ModelChoice,
    ) -> Result<(), AgentError> {
        let config = self.inner.config(Some(workspace), Some(model)).await?;
        self.inner.provider(&config).map(drop)
    }

    /// The model a person names (`/model`, `--model`, a run's model), switching from
    /// `current` ([`ModelChoice::parse`]), once turns in `workspace` can call it: a provider
    /// without a key is refused now, not at the next prompt.
    pub async fn parse_model(
        &self,
        workspace: &WorkspaceId,
        name: &str,
        current: &ModelChoice,
    ) -> Result<ModelChoice, AgentError> {
        let config = self.inner.config(Some(workspace), None).await?;
        let choice = ModelChoice::parse(name, current, &config)?;
        self.check_model(workspace, &choice).await.map_err(|e| {
            berth_ops::Error::rule(e.kind(), format!("cannot switch to {choice}: {e}"))
        })?;
        Ok(choice)
    }

    /// The external MCP servers this agent has met (from the config of the workspaces it ran
    /// turns in), with their state: for a front end's `/mcp`.
    pub fn mcp_status(&self) -> Vec<ServerStatus> {
        let known = self.inner.mcp.lock().unwrap_or_else(|e| e.into_inner());
        known.iter().flat_map(|(_, s)| s.status()).collect()
    }

    /// The state of the servers `settings` names (a workspace's `[[mcp_servers]]`), "not
    /// started" for those no turn has used yet; nothing is started.
    pub fn mcp_status_of(&self, settings: &[McpServerSettings]) -> Vec<ServerStatus> {
        self.inner.mcp_servers(settings).status()
    }

    /// Starts a turn. What can fail before anything is sent (the session answers a prompt
    /// elsewhere, its config names no usable provider, a key is missing, the transcript cannot
    /// be read) fails here; after that, failures end the turn with [`TurnStop::Failed`].
    pub async fn start_turn(&self, mut request: TurnRequest) -> Result<Turn, AgentError> {
        if let Some(prompt) = self.skill_prompt(&request).await? {
            request.prompt = prompt;
        }
        // One turn at a time in a session, whichever process or server runs it: held before
        // the history is read, so no turn starts from a history another is writing.
        let hold = self.inner.ops.hold_turn(&request.session).await?;
        let setup = async {
            // An answer a killed process left aside joins the transcript before the model
            // reads it.
            self.inner
                .ops
                .recover_partial_answer(&request.session, &hold)
                .await?;
            self.inner
                .setup(&request.session, request.options.model.as_ref())
                .await
        };
        let setup = match setup.await {
            Ok(setup) => setup,
            // A turn that cannot start leaves no hold behind.
            Err(e) => {
                hold.release().await;
                return Err(e);
            }
        };
        let (tx, rx) = mpsc::channel(256);
        let turn = Turn {
            events: Events::Own(rx),
            ended: false,
            provider: setup.provider.name(),
            model: setup.model.clone(),
            context_tokens: setup.window.total,
        };
        let live = self.inner.live.begin(
            request.session.id.as_str(),
            setup.transcript_len,
            turn_loop::transcript_prompt(&request),
            &turn,
        );
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let mut out = Out {
                tx,
                live,
                in_context: 0,
                counted: false,
                first_prompt: None,
                titled: None,
            };
            let (stop, usage) = inner.run(setup, &request, &mut out).await;
            // The session keeps what its turns cost, however they ended (a turn that ends
            // with its answer counted already).
            if !out.counted {
                inner.count(&request.session, usage, &mut out).await;
            }
            // Given back before the turn says it ended: the next prompt finds it free.
            hold.release().await;
            let in_context = out.in_context;
            let titled = out.titled.take();
            out.send(AgentEvent::TurnEnded {
                stop,
                usage,
                in_context,
                titled,
            })
            .await;
        });
        Ok(turn)
    }

    /// The prompt a turn's `/name` becomes when `name` is one of the workspace's skills
    /// ([`slash::invoked_skill`]); `None` for any other prompt.
    async fn skill_prompt(&self, request: &TurnRequest) -> Result<Option<String>, AgentError> {
        if !request.prompt.trim_start().starts_with('/') {
            return Ok(None);
        }
        let ws = self
            .inner
            .ops
            .resolve_workspace(request.session.workspace_id.as_str())
            .await?;
        let skills = self.inner.ops.skills(Some(&ws)).await?;
        let Some(skill) = crate::slash::invoked_skill(&skills, &request.prompt) else {
            return Ok(None);
        };
        let skill = skill.clone();
        let typed = request.prompt.clone();
        let prompt = berth_ops::blocking(move || {
            let body = skill.body()?;
            Ok(crate::slash::skill_prompt(&typed, &skill, &body))
        })
        .await?;
        Ok(Some(prompt))
    }

    /// The turn this agent runs in `session` now, as someone else than its client sees it:
    /// for a front end that reopens a session mid-turn (and so cannot take its hold), to show
    /// the turn live instead of a history that is still being written. `None` when this agent
    /// runs no turn there (a turn in another process is seen once it has ended).
    pub fn follow(&self, session: &Session) -> Option<Following> {
        self.inner.live.follow(session.id.as_str())
    }
}

impl Turn {
    /// The turn's next event, in order; `None` once [`AgentEvent::TurnEnded`] was given. The
    /// turn's task always sends that end last; should the task die before (a panic), the end
    /// comes from here as a failure, so every front end sees one end, said one way.
    pub async fn next_event(&mut self) -> Option<AgentEvent> {
        if self.ended {
            return None;
        }
        let event = self
            .events
            .recv()
            .await
            .unwrap_or_else(|| AgentEvent::TurnEnded {
                stop: TurnStop::Failed {
                    message: "the agent stopped without ending the turn".to_owned(),
                },
                usage: Usage::default(),
                in_context: 0,
                titled: None,
            });
        self.ended = matches!(event, AgentEvent::TurnEnded { .. });
        Some(event)
    }
}

/// The sending side of a turn's events. A front end that stopped listening does not stop the
/// turn: its transcript is still written.
struct Out {
    tx: mpsc::Sender<AgentEvent>,
    /// The turn's record for followers.
    live: LiveTurn,
    /// What the last answered request read and wrote (see [`AgentEvent::TurnEnded`]).
    in_context: u64,
    /// Whether the turn's tokens were added to the session already.
    counted: bool,
    /// The turn's prompt, when it is the session's first and is durable: the count at the
    /// turn's end titles the session after it.
    first_prompt: Option<String>,
    /// The session's title after the count of its first turn (the one the count gave it,
    /// or one a person gave meanwhile): [`AgentEvent::TurnEnded`]'s `titled`.
    titled: Option<String>,
}

impl Out {
    async fn send(&mut self, event: AgentEvent) {
        self.live.publish(&event);
        let _ = self.tx.send(event).await;
    }
}
