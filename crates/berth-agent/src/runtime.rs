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

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use berth_core::config::{Config, McpServerSettings};
use berth_ops::{Message, ModelChoice, Ops, Role, Session, WorkspaceId, tool_record};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::context::{self, Fill, Window};
use crate::conversation::{
    ChatMessage, Image, Part, Speaker, StopReason, ToolCall, ToolResult, ToolSpec, Usage,
};
use crate::events::{AgentEvent, Decision, PermissionRequest, Permissions, TurnStop};
use crate::http::{Http, HttpPolicy};
use crate::mcp::{McpServers, ServerStatus};
use crate::provider::{Provider, ProviderError, ProviderEvent, ProviderRequest, ProviderStream};
use crate::providers::{self, SetupError};
use crate::tools::{
    Commands, FileChange, Files, Preview, Tool, ToolContext, ToolKind, Toolbox, plan,
};

/// Tool rounds a turn may take unless `[agent] max_tool_iterations` says otherwise.
pub const DEFAULT_MAX_TOOL_ITERATIONS: u32 = 50;

/// Output tokens asked for unless `[providers.X] max_tokens` says otherwise.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

pub use berth_ops::INTERRUPTED;

/// How often the answer streaming is kept aside (`Ops::keep_partial_answer`), so a process
/// killed mid-answer loses at most this much of what the person saw. An answer shorter than
/// this is never kept aside at all.
const KEEP_PARTIAL_EVERY: std::time::Duration = std::time::Duration::from_millis(300);

/// What stops a turn from starting.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Ops(#[from] berth_ops::Error),
    #[error(transparent)]
    Setup(#[from] SetupError),
}

impl AgentError {
    /// The kind every front end maps, as it maps an operation's: a missing key or a bad base
    /// URL is a config value to fix (invalid); an HTTP client that cannot be built, I/O.
    pub fn kind(&self) -> berth_ops::ErrorKind {
        match self {
            AgentError::Ops(e) => e.kind(),
            AgentError::Setup(SetupError::MissingKey { .. } | SetupError::BadBaseUrl { .. }) => {
                berth_ops::ErrorKind::Invalid
            }
            AgentError::Setup(SetupError::Http(_)) => berth_ops::ErrorKind::Io,
        }
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
}

/// A running turn: its events, in order, ending with [`AgentEvent::TurnEnded`].
pub struct Turn {
    events: mpsc::Receiver<AgentEvent>,
    /// Whether [`AgentEvent::TurnEnded`] was handed out.
    ended: bool,
    /// The provider and model this turn calls.
    pub provider: &'static str,
    pub model: String,
    /// The model's context window, in tokens.
    pub context_tokens: u64,
}

/// What a turn is set up with before it runs.
struct Setup {
    provider: Arc<dyn Provider>,
    model: String,
    max_tokens: u32,
    max_tool_iterations: u32,
    system: String,
    window: Window,
    history: Vec<ChatMessage>,
    /// How many messages the transcript held when the turn began.
    transcript_len: usize,
    /// The workspace's `[[mcp_servers]]`.
    mcp: Arc<McpServers>,
    /// Why the session's kept model was set aside, said at the turn's start.
    model_warning: Option<String>,
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

    /// Whether turns in `workspace` can call `model` (its provider has a key): for a front end
    /// that switches models, to refuse at once rather than at the next prompt.
    pub async fn check_model(
        &self,
        workspace: &WorkspaceId,
        model: &ModelChoice,
    ) -> Result<(), AgentError> {
        let config = self.inner.config(workspace, Some(model)).await?;
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
        let config = self.inner.config(workspace, None).await?;
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

    /// Starts a turn. What can fail before anything is sent (the session's config names no
    /// usable provider, a key is missing, the transcript cannot be read) fails here; after
    /// that, failures end the turn with [`TurnStop::Failed`].
    pub async fn start_turn(&self, request: TurnRequest) -> Result<Turn, AgentError> {
        let setup = self
            .inner
            .setup(&request.session, request.options.model.as_ref())
            .await?;
        // One turn at a time in a session, whichever process or server runs it (taken once
        // the turn can start: a hold is never left behind by a setup that failed).
        let hold = self.inner.ops.hold_turn(&request.session).await?;
        let (tx, rx) = mpsc::channel(256);
        let turn = Turn {
            events: rx,
            ended: false,
            provider: setup.provider.name(),
            model: setup.model.clone(),
            context_tokens: setup.window.total,
        };
        let inner = self.inner.clone();
        tokio::spawn(async move {
            let mut out = Out {
                tx,
                in_context: 0,
                counted: false,
            };
            let (stop, usage) = inner.run(setup, &request, &mut out).await;
            // The session keeps what its turns cost, however they ended (a turn that ends
            // with its answer counted already).
            if !out.counted
                && let Some(message) = inner.count(&request.session, usage).await
            {
                out.send(AgentEvent::Notice { message }).await;
            }
            // Given back before the turn says it ended: the next prompt finds it free.
            hold.release().await;
            let in_context = out.in_context;
            out.send(AgentEvent::TurnEnded {
                stop,
                usage,
                in_context,
            })
            .await;
        });
        Ok(turn)
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
            });
        self.ended = matches!(event, AgentEvent::TurnEnded { .. });
        Some(event)
    }
}

/// The sending side of a turn's events. A front end that stopped listening does not stop the
/// turn: its transcript is still written.
struct Out {
    tx: mpsc::Sender<AgentEvent>,
    /// What the last answered request read and wrote (see [`AgentEvent::TurnEnded`]).
    in_context: u64,
    /// Whether the turn's tokens were added to the session already.
    counted: bool,
}

impl Out {
    async fn send(&mut self, event: AgentEvent) {
        let _ = self.tx.send(event).await;
    }
}

impl Inner {
    /// The servers of one `[[mcp_servers]]` list, made once per distinct list.
    fn mcp_servers(&self, settings: &[McpServerSettings]) -> Arc<McpServers> {
        let mut known = self.mcp.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, servers)) = known.iter().find(|(s, _)| s == settings) {
            return servers.clone();
        }
        let servers = Arc::new(McpServers::new(settings));
        known.push((settings.to_vec(), servers.clone()));
        servers
    }

    /// The turn's tools: the built-in ones, then those of the config's and the client's MCP
    /// servers (started now if this is their first turn). A server that cannot start is a
    /// notice, once, and the turn goes on without it.
    async fn turn_tools(
        &self,
        config_servers: &McpServers,
        request: &TurnRequest,
        out: &mut Out,
    ) -> Toolbox {
        let mut toolbox = self.tools.clone();
        let client_servers = request.options.mcp.as_deref();
        for servers in std::iter::once(config_servers).chain(client_servers) {
            if servers.is_empty() {
                continue;
            }
            let (tools, notices) = servers.tools().await;
            for message in notices {
                out.send(AgentEvent::Notice { message }).await;
            }
            for tool in tools {
                toolbox = toolbox.with(tool);
            }
        }
        toolbox
    }

    /// The workspace's merged config, calling `choice` when given.
    async fn config(
        &self,
        workspace: &WorkspaceId,
        choice: Option<&ModelChoice>,
    ) -> Result<Config, AgentError> {
        let mut config: Config = self.ops.config(Some(workspace)).await?.config;
        if let Some(choice) = choice {
            calling(&mut config, choice);
        }
        Ok(config)
    }

    /// The merged config of the session's workspace, calling the model `choice` names, else
    /// the session's own ([`Ops::session_model`]); and the warning, when the session's kept
    /// choice was set aside.
    async fn session_config(
        &self,
        session: &Session,
        choice: Option<&ModelChoice>,
    ) -> Result<(Config, Option<String>), AgentError> {
        let mut config: Config = self.ops.config(Some(&session.workspace_id)).await?.config;
        let (choice, warning) = match choice {
            Some(c) => (c.clone(), None),
            None => {
                let model = self.ops.session_model_in(session, &config).await?;
                let warning = model.warning();
                (model.choice, warning)
            }
        };
        calling(&mut config, &choice);
        Ok((config, warning))
    }

    /// The builder's provider, else the one `config` names, with its key.
    fn provider(&self, config: &Config) -> Result<Arc<dyn Provider>, AgentError> {
        Ok(match &self.provider {
            Some(p) => p.clone(),
            None => {
                let http = self
                    .http
                    .get_or_init(|| Http::new(self.policy.clone()))
                    .as_ref()
                    .map_err(|e| SetupError::Http(e.clone()))?;
                providers::from_config(config, http)?
            }
        })
    }

    async fn setup(
        &self,
        session: &Session,
        choice: Option<&ModelChoice>,
    ) -> Result<Setup, AgentError> {
        let (config, model_warning) = self.session_config(session, choice).await?;
        let provider = self.provider(&config)?;
        let kind = config.provider();
        let max_tokens = config
            .provider_settings(kind)
            .max_tokens
            .unwrap_or(DEFAULT_MAX_TOKENS);
        let ws = self
            .ops
            .resolve_workspace(session.workspace_id.as_str())
            .await?;
        let workspace_context = self.ops.context(&ws).await?;
        // An answer a killed process left aside joins the transcript before the model reads it.
        self.ops.recover_partial_answer(session).await?;
        let transcript = self.ops.transcript(session).await?;
        let transcript_len = transcript.messages.len();
        let mut system = self
            .system_prompt
            .clone()
            .unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.to_owned());
        let mut history = Vec::new();
        for m in transcript.messages {
            match m.role {
                Role::User => history.push(ChatMessage::user_text(m.content)),
                Role::Assistant => history.push(ChatMessage::assistant_text(m.content)),
                // System messages of the transcript are instructions: they join the prompt.
                Role::System => {
                    system.push_str("\n\n");
                    system.push_str(&m.content);
                }
                // A record of a past call: the model sees what it concluded from it, in its
                // own answers, not the call itself (a provider wants a call's id and its
                // result paired within one turn).
                Role::Tool => {}
            }
        }
        if let Some(text) = workspace_context {
            system.push_str("\n\n## Workspace context (context.md)\n\n");
            system.push_str(&text);
        }
        Ok(Setup {
            provider,
            model: config.model().to_owned(),
            max_tokens,
            max_tool_iterations: config
                .agent
                .max_tool_iterations
                .unwrap_or(DEFAULT_MAX_TOOL_ITERATIONS),
            window: Window::for_provider(kind, config.agent.context_tokens, max_tokens),
            system,
            history,
            transcript_len,
            mcp: self.mcp_servers(&config.mcp_servers),
            model_warning,
        })
    }

    /// Runs the turn to its end; returns how it ended and the tokens used. A session's first
    /// prompt also titles it, if it has no title: a convenience, so failing to set one does not
    /// stop the turn. The title is written once the prompt is (both take the session's lock:
    /// the prompt's append must not wait for it), while the answer streams: nothing but the
    /// turn's end waits for it, so it is there when the turn is over, as before, without its
    /// durable write holding back the first piece of the answer.
    async fn run(&self, setup: Setup, request: &TurnRequest, out: &mut Out) -> (TurnStop, Usage) {
        let first_prompt = !setup.history.iter().any(|m| m.speaker == Speaker::User);
        let (prompt_written, written) = oneshot::channel();
        let title = async {
            // Sent when the prompt's append is over; dropped if the turn ends before.
            let _ = written.await;
            if first_prompt {
                let _ = self
                    .ops
                    .title_untitled(&request.session, &request.prompt)
                    .await;
            }
        };
        let (ended, ()) = tokio::join!(self.run_turn(setup, request, out, prompt_written), title);
        ended
    }

    /// The turn itself: [`Inner::run`] without the title; `prompt_written` is told when the
    /// prompt's append is over.
    async fn run_turn(
        &self,
        mut setup: Setup,
        request: &TurnRequest,
        out: &mut Out,
        prompt_written: oneshot::Sender<()>,
    ) -> (TurnStop, Usage) {
        let mut usage = Usage::default();
        if let Some(message) = setup.model_warning.take() {
            out.send(AgentEvent::Notice { message }).await;
        }
        let session = &request.session;
        let cancel = &request.cancel;
        let mut history = std::mem::take(&mut setup.history);
        history.push(ChatMessage::user_with_images(
            request.prompt.clone(),
            &request.images,
        ));
        // The prompt is written to the transcript while the turn's tools are gathered (external
        // MCP servers starting): the two waits overlap instead of adding up. The model is asked
        // only once the prompt is durable, so a crash never leaves an answer, or a bill, for a
        // prompt the session does not hold; a failed append ends the turn before it is asked.
        let prompt = Message::new(Role::User, transcript_prompt(request));
        let gather = async {
            let toolbox = self.turn_tools(&setup.mcp, request, out).await;
            let tools = toolbox.specs();
            (toolbox, tools)
        };
        let (appended, (toolbox, tools)) =
            tokio::join!(self.ops.append_message(session, &prompt), gather);
        let _ = prompt_written.send(());
        if let Err(e) = appended {
            return (failed(e), usage);
        }
        let first = provider_request(&setup, &history, &tools);
        let mut opened = open_answer(&*setup.provider, first, cancel).await;
        // Messages in the transcript so far: an answer kept aside follows them.
        let mut written = setup.transcript_len + 1;
        let cx = ToolContext {
            cwd: request.cwd.clone(),
            ops: self.ops.clone(),
            session: session.clone(),
            cancel: cancel.clone(),
            call_id: String::new(),
            files: request.options.files.clone(),
            commands: request.options.commands.clone(),
            unconfined: false,
        };
        let mut rounds = 0;
        loop {
            let keeper = PartialKeeper::start(self.ops.clone(), session.clone(), written);
            let answer = self
                .stream_answer(&*setup.provider, opened, cancel, out, &keeper)
                .await;
            // The round's answer is about to be the transcript's (or never will be).
            let kept = keeper.stop();
            let (message, stop, used) = match answer {
                Ok(done) => done,
                Err((shown, error)) => {
                    // What the person saw stays, marked; nothing is sent again.
                    if !shown.is_empty() {
                        let text = format!("{shown}{INTERRUPTED}");
                        let _ = self
                            .ops
                            .append_message(session, &Message::new(Role::Assistant, text))
                            .await;
                    }
                    if kept {
                        let _ = self.ops.forget_partial_answer(session).await;
                    }
                    let stop = match error {
                        ProviderError::Cancelled => TurnStop::Cancelled,
                        e => TurnStop::Failed {
                            message: e.to_string(),
                        },
                    };
                    return (stop, usage);
                }
            };
            usage.add(used);
            out.in_context = used.input_tokens + used.output_tokens;
            let text = message.text();
            let calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
            let append = async {
                match text.is_empty() {
                    true => Ok(()),
                    false => {
                        self.ops
                            .append_message(session, &Message::new(Role::Assistant, text))
                            .await
                    }
                }
            };
            // The last answer's append and the turn's count go to disk together (the
            // transcript and the record have a lock each): the count never holds up the end.
            let appended = if calls.is_empty() {
                let (appended, counted) = tokio::join!(append, self.count(session, usage));
                out.counted = true;
                if let Some(message) = counted {
                    out.send(AgentEvent::Notice { message }).await;
                }
                appended
            } else {
                append.await
            };
            if let Err(e) = appended {
                return (failed(e), usage);
            }
            if !message.text().is_empty() {
                written += 1;
            }
            if kept {
                let _ = self.ops.forget_partial_answer(session).await;
            }
            history.push(message);
            if calls.is_empty() {
                let stop = match stop {
                    StopReason::MaxTokens => TurnStop::MaxTokens,
                    StopReason::Refusal => TurnStop::Refusal,
                    _ => TurnStop::EndTurn,
                };
                return (stop, usage);
            }
            rounds += 1;
            if rounds > setup.max_tool_iterations {
                return (TurnStop::MaxToolIterations, usage);
            }
            let results = self.run_tools(&toolbox, &calls, &cx, request, out).await;
            // Each call and its result join the transcript, in the order the model made them:
            // the session is then a whole record of what the agent did.
            for (call, result) in calls.iter().zip(&results) {
                let input = match &call.arguments {
                    Ok(value) => value.to_string(),
                    Err(raw) => raw.clone(),
                };
                let record = tool_record(&call.name, &input, result.is_error, &result.content);
                if let Err(e) = self.ops.append_message(session, &record).await {
                    return (failed(e), usage);
                }
                written += 1;
            }
            if cancel.is_cancelled() {
                return (TurnStop::Cancelled, usage);
            }
            history.push(ChatMessage {
                speaker: Speaker::User,
                parts: results.into_iter().map(Part::ToolResult).collect(),
            });
            let next = provider_request(&setup, &history, &tools);
            opened = open_answer(&*setup.provider, next, cancel).await;
        }
    }

    /// Adds a turn's tokens to its session; what to tell the person when that fails (a
    /// failure to count is said, not a failed turn).
    async fn count(&self, session: &Session, usage: Usage) -> Option<String> {
        let used = berth_ops::TokenUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        };
        if used.is_zero() {
            return None;
        }
        let counted = self.ops.add_session_usage(session, used).await;
        counted
            .err()
            .map(|e| format!("the tokens of this turn could not be counted: {e}"))
    }

    /// One model answer, streamed out as events. On failure, the text already shown.
    async fn stream_answer(
        &self,
        provider: &dyn Provider,
        opened: Result<ProviderStream, ProviderError>,
        cancel: &CancellationToken,
        out: &mut Out,
        keeper: &PartialKeeper,
    ) -> Result<(ChatMessage, StopReason, Usage), (String, ProviderError)> {
        let mut shown = String::new();
        let mut stream = opened.map_err(|e| (String::new(), e))?;
        // An event read ahead while merging pieces, handled next.
        let mut ahead = None;
        loop {
            let next = match ahead.take() {
                Some(next) => next,
                None => tokio::select! {
                    _ = cancel.cancelled() => return Err((shown, ProviderError::Cancelled)),
                    n = stream.next() => n,
                },
            };
            match next {
                Some(Ok(ProviderEvent::TextDelta(mut t))) => {
                    ahead = merge_ready(&mut stream, &mut t, false);
                    shown.push_str(&t);
                    keeper.show(&t);
                    out.send(AgentEvent::Text { text: t }).await;
                }
                Some(Ok(ProviderEvent::ThoughtDelta(mut t))) => {
                    ahead = merge_ready(&mut stream, &mut t, true);
                    out.send(AgentEvent::Thought { text: t }).await;
                }
                // Calls are announced when they run, in order, with their permission asks.
                Some(Ok(ProviderEvent::ToolCall(_))) => {}
                Some(Ok(ProviderEvent::Done {
                    message,
                    stop,
                    usage,
                })) => return Ok((message, stop, usage)),
                Some(Err(e)) => return Err((shown, e)),
                None => {
                    let e = ProviderError::Stream {
                        provider: provider.name(),
                        message: "the stream ended without finishing the answer".to_owned(),
                    };
                    return Err((shown, e));
                }
            }
        }
    }

    /// Runs a round of tool calls: permissions are asked one at a time, in order (a person
    /// answers them); the calls allowed then run concurrently. Results come back in call
    /// order, one per call, errors included.
    async fn run_tools(
        &self,
        toolbox: &Toolbox,
        calls: &[ToolCall],
        cx: &ToolContext,
        request: &TurnRequest,
        out: &mut Out,
    ) -> Vec<ToolResult> {
        enum Plan {
            Run(Value, Option<FileChange>),
            Answer(String),
        }
        let mut plans = Vec::with_capacity(calls.len());
        for call in calls {
            let arguments = call.arguments.clone().unwrap_or(Value::Null);
            let tool = toolbox.get(&call.name);
            out.send(AgentEvent::ToolStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                // A tool the model made up runs nothing; it is shown as `other`.
                kind: tool.map_or(ToolKind::Other, |t| t.kind()),
                location: tool.and_then(|t| t.location(&arguments)),
                arguments: arguments.clone(),
            })
            .await;
            let plan = match (&call.arguments, toolbox.get(&call.name)) {
                (Err(raw), _) => Plan::Answer(format!(
                    "the arguments of this call are not valid JSON, so it did not run: {raw:?}; call {} again with a JSON object",
                    call.name
                )),
                (_, None) => Plan::Answer(format!(
                    "there is no tool named {:?}; the tools are: {}",
                    call.name,
                    toolbox
                        .specs()
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                (Ok(args), Some(tool)) if tool.needs_permission() => {
                    let key = (request.session.id.to_string(), call.name.clone());
                    let remembered = self.allowed_always(&key);
                    let cx = cx.for_call(&call.id);
                    let Preview {
                        description,
                        change,
                    } = tool.preview(args, &cx).await;
                    if remembered {
                        Plan::Run(args.clone(), change)
                    } else {
                        out.send(AgentEvent::PermissionAsked {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            description: description.clone(),
                            change: change.clone(),
                        })
                        .await;
                        let asked = PermissionRequest {
                            call_id: call.id.clone(),
                            tool: call.name.clone(),
                            arguments: args.clone(),
                            description,
                            change: change.clone(),
                        };
                        let decision = tokio::select! {
                            _ = request.cancel.cancelled() => Decision::Reject,
                            d = request.permissions.decide(&asked) => d,
                        };
                        match decision {
                            Decision::AllowOnce => Plan::Run(args.clone(), change),
                            Decision::AllowAlways => {
                                self.always_allowed
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .insert(key);
                                Plan::Run(args.clone(), change)
                            }
                            Decision::Reject => Plan::Answer(format!(
                                "the user refused to let {} run; do not try it again unasked — say what you wanted to do, or find another way",
                                call.name
                            )),
                            Decision::Expired => Plan::Answer(format!(
                                "nobody answered the request to let {} run in the time allowed, so it did not run; say what you wanted to do, and the user can ask for it again",
                                call.name
                            )),
                        }
                    }
                }
                (Ok(args), Some(_)) => Plan::Run(args.clone(), None),
            };
            plans.push(plan);
        }
        let runs = calls.iter().zip(plans).map(|(call, plan)| async move {
            let (content, is_error, change) = match plan {
                Plan::Answer(message) => (message, true, None),
                Plan::Run(args, change) => {
                    let tool = toolbox.get(&call.name).expect("planned to run").clone();
                    let cx = cx.for_call(&call.id);
                    let ran = tokio::select! {
                        _ = cx.cancel.cancelled() => Err("cancelled by the user".to_owned()),
                        r = tool.call(args.clone(), &cx) => r,
                    };
                    let ran = match unconfined_once(&*tool, call, &args, &cx, request, &ran).await {
                        Some(again) => again,
                        None => ran,
                    };
                    match ran {
                        Ok(output) => (output, false, change),
                        Err(message) => (message, true, None),
                    }
                }
            };
            (
                ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content,
                    is_error,
                },
                change,
            )
        });
        let done = futures::future::join_all(runs).await;
        let mut results = Vec::with_capacity(done.len());
        for ((r, change), call) in done.into_iter().zip(calls) {
            if r.name == plan::NAME
                && !r.is_error
                && let Some(steps) = call
                    .arguments
                    .as_ref()
                    .ok()
                    .and_then(|a| plan::parse(a).ok())
            {
                out.send(AgentEvent::Plan { steps }).await;
            }
            out.send(AgentEvent::ToolFinished {
                id: r.call_id.clone(),
                name: r.name.clone(),
                output: r.content.clone(),
                is_error: r.is_error,
                change,
            })
            .await;
            results.push(r);
        }
        results
    }

    fn allowed_always(&self, key: &(String, String)) -> bool {
        self.always_allowed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(key)
    }
}

/// A command the sandbox refused part of, run once more without it when a person allows it
/// (`Permissions::allow_unconfined`); `None` when it is not asked or not allowed.
async fn unconfined_once(
    tool: &dyn Tool,
    call: &ToolCall,
    args: &Value,
    cx: &ToolContext,
    request: &TurnRequest,
    ran: &Result<String, String>,
) -> Option<Result<String, String>> {
    let output = match ran {
        Ok(o) | Err(o) => o,
    };
    if tool.kind() != ToolKind::Execute || cx.cancel.is_cancelled() {
        return None;
    }
    let note = output
        .lines()
        .find(|l| l.starts_with(berth_sandbox::NOTE_MARK))?;
    let command = args.get("command").and_then(Value::as_str)?;
    let asked = PermissionRequest {
        call_id: call.id.clone(),
        tool: format!("{} without the sandbox", call.name),
        arguments: args.clone(),
        description: format!(
            "run once more without the sandbox, with all of your rights:\n$ {command}\n\n{note}"
        ),
        change: None,
    };
    let allowed = tokio::select! {
        _ = cx.cancel.cancelled() => false,
        a = request.permissions.allow_unconfined(&asked) => a,
    };
    if !allowed {
        return None;
    }
    let unconfined = ToolContext {
        unconfined: true,
        ..cx.clone()
    };
    let again = tokio::select! {
        _ = cx.cancel.cancelled() => Err("cancelled by the user".to_owned()),
        r = tool.call(args.clone(), &unconfined) => r,
    };
    let said =
        "(the sandbox refused part of it; run again without the sandbox, as the user allowed once)";
    Some(match again {
        Ok(o) => Ok(format!("{said}\n{o}")),
        Err(e) => Err(format!("{said}\n{e}")),
    })
}

/// Keeps the answer streaming aside every [`KEEP_PARTIAL_EVERY`] (`Ops::keep_partial_answer`),
/// on a task of its own, so streaming never waits for the disk: what a killed process's
/// person saw is found by whoever opens the session next.
struct PartialKeeper {
    text: Arc<Mutex<String>>,
    changed: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
    wrote: Arc<std::sync::atomic::AtomicBool>,
}

impl PartialKeeper {
    fn start(ops: Ops, session: Session, written: usize) -> PartialKeeper {
        let text = Arc::new(Mutex::new(String::new()));
        let changed = Arc::new(tokio::sync::Notify::new());
        let wrote = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let task = {
            let (text, changed, wrote) = (text.clone(), changed.clone(), wrote.clone());
            tokio::spawn(async move {
                loop {
                    changed.notified().await;
                    tokio::time::sleep(KEEP_PARTIAL_EVERY).await;
                    let now = text.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    if ops
                        .keep_partial_answer(&session, written, &now)
                        .await
                        .is_ok()
                    {
                        wrote.store(true, std::sync::atomic::Ordering::Release);
                    }
                }
            })
        };
        PartialKeeper {
            text,
            changed,
            task,
            wrote,
        }
    }

    /// A piece of the answer was shown.
    fn show(&self, piece: &str) {
        self.text
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_str(piece);
        self.changed.notify_one();
    }

    /// Stops keeping; whether anything was kept aside (to forget once the answer is written).
    /// A write under way may still land: the transcript's length then tells it stale.
    fn stop(self) -> bool {
        self.task.abort();
        self.wrote.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Appends to `text` the pieces of the same kind (thoughts, or answer text) that have
/// already arrived, without waiting: a fast stream then costs the front end one event per
/// read rather than one per piece. Returns the first other item read, to be handled next.
fn merge_ready(
    stream: &mut ProviderStream,
    text: &mut String,
    thought: bool,
) -> Option<Option<Result<ProviderEvent, ProviderError>>> {
    use futures::FutureExt;
    loop {
        match stream.next().now_or_never()? {
            Some(Ok(ProviderEvent::TextDelta(more))) if !thought => text.push_str(&more),
            Some(Ok(ProviderEvent::ThoughtDelta(more))) if thought => text.push_str(&more),
            other => return Some(other),
        }
    }
}

/// The request for the model's next answer: the conversation so far, compacted to fit.
fn provider_request(setup: &Setup, history: &[ChatMessage], tools: &[ToolSpec]) -> ProviderRequest {
    ProviderRequest {
        model: setup.model.clone(),
        system: setup.system.clone(),
        messages: context::compact(history, &setup.system, tools, &setup.window),
        tools: tools.to_vec(),
        max_tokens: setup.max_tokens,
    }
}

/// The provider's answer to `request`, started: its stream, or why it could not start.
async fn open_answer(
    provider: &dyn Provider,
    request: ProviderRequest,
    cancel: &CancellationToken,
) -> Result<ProviderStream, ProviderError> {
    tokio::select! {
        _ = cancel.cancelled() => Err(ProviderError::Cancelled),
        s = provider.stream(request, cancel.clone()) => s,
    }
}

fn failed(e: impl std::fmt::Display) -> TurnStop {
    TurnStop::Failed {
        message: e.to_string(),
    }
}

/// The prompt as the transcript keeps it: its text, then a note of each attached image (a
/// transcript is text a person reads and edits; the pixels went to the model once).
fn transcript_prompt(request: &TurnRequest) -> String {
    let mut text = request.prompt.clone();
    for image in &request.images {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&format!(
            "[image attached: {}, {} KB]",
            image.mime_type,
            image.decoded_len().div_ceil(1024)
        ));
    }
    text
}

/// The system prompt unless the builder is given another.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are berth's coding agent, working in a person's \
project through the tools you are given. Read before you change; keep changes small and \
explain them. File paths are relative to the working directory and cannot leave it. Writing \
files and running commands need the person's permission; if they refuse, do not retry \
unasked. When a tool fails, read its message: it says what to do next.";

/// `config` calling `choice` instead of the model it names.
fn calling(config: &mut Config, choice: &ModelChoice) {
    config.provider = Some(choice.provider);
    config.model = Some(choice.model.clone());
}
