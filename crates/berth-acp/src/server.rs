//! The connection's handlers. Each parses its request, calls `Ops` or the agent, and answers.
//!
//! Handlers run in the connection's dispatch loop, which waits for each; so everything that
//! does I/O or waits (a store read, a turn, a question to the client) runs on a task spawned
//! with `cx.spawn`, which always answers its request and ends `Ok(())` (an `Err` from a
//! spawned task would close the connection). Only what must be ordered with later messages
//! happens in the loop itself: marking a session busy before the next prompt is read, and
//! cancelling.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ClientCapabilities, ClientRequest, CloseSessionRequest,
    CloseSessionResponse, ConfigOptionUpdate, ContentBlock, ContentChunk, DeleteSessionRequest,
    DeleteSessionResponse, ForkSessionRequest, ForkSessionResponse, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, ResumeSessionRequest,
    ResumeSessionResponse, SessionCapabilities, SessionCloseCapabilities, SessionConfigOption,
    SessionConfigOptionValue, SessionDeleteCapabilities, SessionForkCapabilities, SessionId,
    SessionInfo, SessionInfoUpdate, SessionListCapabilities, SessionNotification,
    SessionResumeCapabilities, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, StopReason, TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent as AcpAgent, Client};
use berth_agent::mcp::{McpServerSettings, Secret};
use berth_agent::slash::{Command, FrontEnd};
use berth_agent::{
    Agent, CancellationToken, Following, McpServers, ToolContext, TurnOptions, TurnRequest,
};
use berth_ops::{ClientSession, DeviceId, HeldTo, Ops, Reach, Session};
use serde_json::Value;

use crate::client::{ClientFiles, ClientPermissions, ClientTerminals, Relayed};
use crate::commands::Typed;
use crate::turn::Relay;
use crate::{commands, content, errors, models};

/// How many sessions one `session/list` page holds (ACP's request names no size).
pub const LIST_PAGE: usize = berth_ops::PAGE_DEFAULT;

/// Whom a connection acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A client on this machine (stdio), or one with the admin token: its `cwd` is a folder
    /// here, and it may open any session.
    Trusted,
    /// One device, by its token (`berth serve`): its paths mean nothing here, so its sessions
    /// work in its workspace's folder or worktree, never a `cwd` it sends; it reaches only its
    /// workspace's sessions, and names no other device.
    Device(DeviceId),
}

/// One connection's state: the client's capabilities and the sessions it opened. Sessions
/// themselves live in berth's store; this only knows which are open here and which is busy.
pub struct Server {
    ops: Ops,
    agent: Agent,
    caller: Caller,
    client: Mutex<ClientCapabilities>,
    sessions: Mutex<HashMap<String, Arc<Open>>>,
    /// Asked before each prompt goes to the agent (`berth serve`'s prompt rate).
    gate: Option<PromptGate>,
    /// When the client last sent a request or a notification.
    last_heard: Mutex<Instant>,
}

/// Whether a prompt may go to the agent now; `Err` says why not, and the prompt is answered
/// with it (kind `refused`) without reaching the agent.
pub type PromptGate = Arc<dyn Fn() -> std::result::Result<(), String> + Send + Sync>;

/// A session open on this connection.
struct Open {
    session: Session,
    /// Where its tools work.
    work_dir: PathBuf,
    /// The running prompt's cancellation, while one runs.
    running: Mutex<Option<CancellationToken>>,
    /// The client's own MCP servers for this session, started on its first turn.
    mcp: Option<Arc<McpServers>>,
    /// Whether the client knows the session's title (it had one, or was told it).
    title_told: std::sync::atomic::AtomicBool,
    /// The skills its `/` menu was last offered, by name.
    offered: Mutex<Vec<String>>,
}

/// What reopening a session found of its turn.
enum Reopened {
    /// It was free; held until the reopening has read what it needs.
    Held(berth_ops::TurnHold),
    /// A turn runs: this agent's, to follow, or another process's (`None`).
    Running(Option<Following>),
}

type Result<T, E = agent_client_protocol::Error> = std::result::Result<T, E>;

impl Server {
    pub fn new(ops: Ops, agent: Agent) -> Server {
        Server::for_caller(ops, agent, Caller::Trusted)
    }

    /// A connection that acts for `caller`.
    pub fn for_caller(ops: Ops, agent: Agent, caller: Caller) -> Server {
        Server {
            ops,
            agent,
            caller,
            client: Mutex::default(),
            sessions: Mutex::default(),
            gate: None,
            last_heard: Mutex::new(Instant::now()),
        }
    }

    /// This connection with `gate` asked before each prompt.
    pub fn with_prompt_gate(mut self, gate: PromptGate) -> Server {
        self.gate = Some(gate);
        self
    }

    /// How long the client has been silent while no prompt of its runs; `None` while one
    /// runs (a long turn sends, and the client need say nothing). For a transport whose
    /// connections outlive their requests, to end one its client left.
    pub fn idle_for(&self) -> Option<Duration> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let running = sessions.values().any(|open| {
            open.running
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some()
        });
        if running {
            return None;
        }
        Some(
            self.last_heard
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .elapsed(),
        )
    }

    fn heard(&self) {
        *self.last_heard.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// What this connection is held to (berth-ops' rule of reach): a device's workspace.
    async fn held(&self) -> Result<HeldTo> {
        self.ops.held_to(&self.reach()).await.map_err(errors::ops)
    }

    /// Whom this connection acts for, in berth-ops' words.
    fn reach(&self) -> Reach {
        match &self.caller {
            Caller::Trusted => Reach::All,
            Caller::Device(device) => Reach::Device(device.clone()),
        }
    }

    fn open(&self, id: &SessionId) -> Result<Arc<Open>> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&*id.0)
            .cloned()
            .ok_or_else(|| {
                agent_client_protocol::v1::schema::Error::session_not_found(id.clone()).into()
            })
    }

    /// Opens `session` on this connection.
    fn register(
        &self,
        session: Session,
        work_dir: PathBuf,
        mcp: Option<Arc<McpServers>>,
    ) -> Arc<Open> {
        let titled = !session.title.is_empty();
        let open = Arc::new(Open {
            session,
            work_dir,
            running: Mutex::default(),
            mcp,
            title_told: std::sync::atomic::AtomicBool::new(titled),
            offered: Mutex::default(),
        });
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(open.session.id.to_string(), open.clone());
        open
    }

    fn capabilities(&self) -> ClientCapabilities {
        self.client
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn initialize(&self, request: InitializeRequest) -> InitializeResponse {
        *self.client.lock().unwrap_or_else(|e| e.into_inner()) = request.client_capabilities;
        let sessions = SessionCapabilities::new()
            .list(SessionListCapabilities::new())
            .resume(SessionResumeCapabilities::new())
            .close(SessionCloseCapabilities::new())
            .delete(SessionDeleteCapabilities::new())
            .fork(SessionForkCapabilities::new());
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            // Claude, GPT and Gemini all take images; an OpenAI-compatible server that does not
            // answers the turn with its own error.
            .prompt_capabilities(PromptCapabilities::new().embedded_context(true).image(true))
            // stdio servers are always supported; Streamable HTTP ones too. SSE is not.
            .mcp_capabilities(McpCapabilities::new().http(true))
            .session_capabilities(sessions);
        // Version 1 is the one this agent speaks; a client asking for a later one gets 1 and
        // decides, as the protocol says.
        InitializeResponse::new(agent_client_protocol::schema::ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .agent_info(
                Implementation::new("berth", env!("CARGO_PKG_VERSION")).title("berth".to_owned()),
            )
    }

    async fn new_session(&self, request: NewSessionRequest) -> Result<NewSessionResponse> {
        let meta = request.meta.as_ref();
        let mut key = meta_string(meta, "sessionId")?;
        let mut device = meta_string(meta, "deviceId")?;
        if let Caller::Device(me) = &self.caller {
            // The token says who this is: it lands in its own workspace, whatever it sends.
            if device.as_deref().is_some_and(|d| d != me.as_str()) {
                return Err(errors::of_kind(
                    berth_ops::ErrorKind::Refused,
                    format!("this connection acts for device {me}; it cannot name another"),
                ));
            }
            if key.is_some() {
                return Err(errors::of_kind(
                    berth_ops::ErrorKind::Refused,
                    format!(
                        "this connection acts for device {me}, whose sessions are in its own workspace; _meta.sessionId names a workspace, which only an admin's connection may"
                    ),
                ));
            }
            key = None;
            device = Some(me.to_string());
        }
        if key.is_none() && device.is_none() {
            check_cwd(&request.cwd)?;
        }
        // A session no prompt could be answered in is not made: said now, as `chat` says it,
        // rather than at the first prompt, with a workspace and a session left behind. A
        // device's or a keyed session's workspace may not exist yet: the global config says.
        let checked = match (&key, &device) {
            (None, None) => self.agent.preflight_in(None, &request.cwd, None).await,
            _ => self.agent.preflight(None, None).await,
        };
        checked.map_err(errors::agent)?;
        let mcp = self.client_mcp(&request.mcp_servers).await?;
        let got = self
            .ops
            .client_session(ClientSession {
                cwd: request.cwd.clone(),
                workspace_key: key,
                device,
                title: String::new(),
            })
            .await
            .map_err(errors::ops)?;
        let open = self.register(got.session, got.work_dir, mcp);
        let options = self.config_options(&open).await?;
        Ok(NewSessionResponse::new(open.session.id.to_string()).config_options(options))
    }

    /// Opens a stored session on this connection: its tools work where `Ops::turn_folder`
    /// says (a device's workspace, else the session's folder), else, when it has none on this
    /// machine, in the client's `cwd`. With the session's turn held when it was free (what a
    /// killed process streamed of its last answer is then in the transcript), else the turn
    /// this agent runs there, to follow.
    async fn reopen(
        &self,
        id: &SessionId,
        cwd: &Path,
        mcp: &[McpServer],
    ) -> Result<(Arc<Open>, Reopened)> {
        let mcp = self.client_mcp(mcp).await?;
        let session = self.ops.session(&id.0).await.map_err(errors::ops)?;
        let held = self.held().await?;
        // Another workspace's session is not there, for a device.
        if !held.reaches(&session.workspace_id) {
            return Err(
                agent_client_protocol::v1::schema::Error::session_not_found(id.clone()).into(),
            );
        }
        let work_dir = match self
            .ops
            .turn_folder(&held, &session)
            .await
            .map_err(errors::ops)?
        {
            Some(dir) => dir,
            None => {
                check_cwd(cwd)?;
                cwd.to_path_buf()
            }
        };
        // Held before the history is touched: a turn running now (this server's, another
        // connection's, another process's) is never recovered, nor read half-written.
        let reopened = match self
            .ops
            .try_hold_turn(&session)
            .await
            .map_err(errors::ops)?
        {
            Some(hold) => {
                self.ops
                    .recover_partial_answer(&session, &hold)
                    .await
                    .map_err(errors::ops)?;
                Reopened::Held(hold)
            }
            None => Reopened::Running(self.agent.follow(&session)),
        };
        Ok((self.register(session, work_dir, mcp), reopened))
    }

    /// The MCP servers the client asks for, as berth-ops' rule lets them run (a device's
    /// only where the admin allowed them). A server of a transport berth does not speak is
    /// left out for a trusted client and refused for a device.
    async fn client_mcp(&self, servers: &[McpServer]) -> Result<Option<Arc<McpServers>>> {
        let reach = self.reach();
        if let Reach::Device(me) = &reach
            && servers
                .iter()
                .any(|s| !matches!(s, McpServer::Stdio(_) | McpServer::Http(_)))
        {
            return Err(errors::ops(berth_ops::device_mcp_refused(
                me,
                "an MCP server of another kind",
            )));
        }
        let settings = self
            .ops
            .client_mcp_servers(&reach, client_mcp(servers))
            .await
            .map_err(errors::ops)?;
        Ok((!settings.is_empty()).then(|| Arc::new(McpServers::new(&settings))))
    }

    async fn load_session(
        &self,
        request: LoadSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<LoadSessionResponse> {
        let (open, reopened) = self
            .reopen(&request.session_id, &request.cwd, &request.mcp_servers)
            .await?;
        let mut transcript = self
            .ops
            .transcript(&open.session)
            .await
            .map_err(errors::ops)?;
        // A turn runs there: a run's agent's, maybe, whose questions (`--ask`) this client's
        // person may answer, unless it is a device's.
        if matches!(reopened, Reopened::Running(_)) && matches!(self.caller, Caller::Trusted) {
            crate::run_questions::follow(
                self.ops.clone(),
                open.session.id.to_string(),
                request.session_id.clone(),
                cx.clone(),
            );
        }
        let following = match reopened {
            Reopened::Held(hold) => {
                hold.release().await;
                None
            }
            // A turn runs: what is durable of the session before it, its prompt, then the
            // turn as it goes (what it streamed so far first). Its answer is written once, by
            // the turn itself.
            Reopened::Running(Some(following)) => {
                transcript.messages.truncate(following.before);
                transcript.messages.push(berth_ops::Message::new(
                    berth_ops::Role::User,
                    following.prompt.clone(),
                ));
                Some(following.turn)
            }
            // Another process's turn: what is durable now; the rest is there once it ends.
            Reopened::Running(None) => None,
        };
        for update in content::replay(&transcript) {
            cx.send_notification(SessionNotification::new(request.session_id.clone(), update))?;
        }
        cx.send_notification(SessionNotification::new(
            request.session_id.clone(),
            self.commands_for(&open).await,
        ))?;
        if let Some(turn) = following {
            let relay = Relay {
                cx: cx.clone(),
                session_id: request.session_id.clone(),
                relayed: Arc::new(Relayed::default()),
                terminals: Arc::new(Mutex::new(HashMap::new())),
            };
            let work_dir = open.work_dir.clone();
            // The prompt's answer is its client's; this connection is shown the turn.
            tokio::spawn(async move {
                let _ = relay.run(turn, &work_dir).await;
            });
        }
        let options = self.config_options(&open).await?;
        Ok(LoadSessionResponse::new().config_options(options))
    }

    async fn resume_session(&self, request: ResumeSessionRequest) -> Result<ResumeSessionResponse> {
        let (open, reopened) = self
            .reopen(&request.session_id, &request.cwd, &request.mcp_servers)
            .await?;
        if let Reopened::Held(hold) = reopened {
            hold.release().await;
        }
        let options = self.config_options(&open).await?;
        Ok(ResumeSessionResponse::new().config_options(options))
    }

    fn close_session(&self, request: &CloseSessionRequest) -> Result<CloseSessionResponse> {
        let open = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&*request.session_id.0);
        match open {
            Some(open) => {
                if let Some(cancel) = &*open.running.lock().unwrap_or_else(|e| e.into_inner()) {
                    cancel.cancel();
                }
                Ok(CloseSessionResponse::new())
            }
            None => Err(agent_client_protocol::v1::schema::Error::session_not_found(
                request.session_id.clone(),
            )
            .into()),
        }
    }

    /// `session/fork`: a new session whose history is a copy of the first one's
    /// ([`Ops::fork_session`]), open on this connection; the first is left as it was. The fork
    /// stays in the first one's workspace (a device's, in its own); it works where a reopened
    /// session would, else in the client's `cwd`.
    async fn fork_session(&self, request: ForkSessionRequest) -> Result<ForkSessionResponse> {
        let not_found = || {
            agent_client_protocol::v1::schema::Error::session_not_found(request.session_id.clone())
        };
        let from = self
            .ops
            .session(&request.session_id.0)
            .await
            .map_err(errors::ops)?;
        let held = self.held().await?;
        if !held.reaches(&from.workspace_id) {
            return Err(not_found().into());
        }
        let mcp = self.client_mcp(&request.mcp_servers).await?;
        let forked = self
            .ops
            .fork_session(&from, None, None, None)
            .await
            .map_err(errors::ops)?;
        let work_dir = match self
            .ops
            .turn_folder(&held, &forked)
            .await
            .map_err(errors::ops)?
        {
            Some(dir) => dir,
            None => {
                check_cwd(&request.cwd)?;
                request.cwd.clone()
            }
        };
        let open = self.register(forked, work_dir, mcp);
        let options = self.config_options(&open).await?;
        Ok(ForkSessionResponse::new(open.session.id.to_string()).config_options(options))
    }

    /// Deletes a berth session, its transcript and storage, as `berth session rm` does (the
    /// editor's own question is the confirmation); never its workspace. A device deletes
    /// only its workspace's sessions; a session answering a prompt is not deleted.
    async fn delete_session(&self, request: DeleteSessionRequest) -> Result<DeleteSessionResponse> {
        let not_found = || {
            agent_client_protocol::v1::schema::Error::session_not_found(request.session_id.clone())
        };
        let session = self
            .ops
            .session(&request.session_id.0)
            .await
            .map_err(errors::ops)?;
        if !self.held().await?.reaches(&session.workspace_id) {
            return Err(not_found().into());
        }
        let busy = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&*request.session_id.0)
            .is_some_and(|open| {
                open.running
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_some()
            });
        if busy {
            return Err(errors::of_kind(
                berth_ops::ErrorKind::Refused,
                format!(
                    "session {} is answering a prompt; cancel it before deleting it",
                    session.id
                ),
            ));
        }
        // Held while it is deleted: a turn elsewhere (another process, another server) keeps
        // its session.
        let hold = self.ops.hold_turn(&session).await.map_err(errors::ops)?;
        let deleted = self.ops.delete_session(&session).await;
        drop(hold);
        deleted.map_err(errors::ops)?;
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&*request.session_id.0);
        Ok(DeleteSessionResponse::new())
    }

    /// The sessions of the home (those whose folder is `cwd`, when asked), a page at a time
    /// in id order: the paging rules and the session's folder are `Ops`'s.
    async fn list_sessions(&self, request: ListSessionsRequest) -> Result<ListSessionsResponse> {
        // A device sees the sessions that work in its workspace's folder: its own.
        let folder = match self.held().await?.workspace() {
            Some(ws) => Some(self.ops.work_dir(ws).map_err(errors::ops)?),
            None => request.cwd.clone(),
        };
        let page = self
            .ops
            .folder_session_page(
                request.cursor.as_deref(),
                Some(LIST_PAGE),
                folder.as_deref(),
            )
            .await
            .map_err(errors::ops)?;
        let sessions = page
            .items
            .into_iter()
            .map(|(s, folder)| {
                let info = SessionInfo::new(s.id.to_string(), folder)
                    .updated_at(s.updated_at.to_rfc3339());
                if s.title.is_empty() {
                    info
                } else {
                    info.title(s.title)
                }
            })
            .collect();
        Ok(ListSessionsResponse::new(sessions).next_cursor(page.next))
    }

    /// The session's options: its model, as `Ops::session_model` resolves it.
    async fn config_options(&self, open: &Open) -> Result<Vec<SessionConfigOption>> {
        let config = self
            .ops
            .config(Some(&open.session.workspace_id))
            .await
            .map_err(errors::ops)?;
        let current = self
            .ops
            .session_model_in(&open.session, &config.config)
            .await
            .map_err(errors::ops)?;
        Ok(vec![models::option(&config, &current.choice)])
    }

    async fn set_config_option(
        &self,
        request: SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse> {
        let open = self.open(&request.session_id)?;
        if &*request.config_id.0 != models::OPTION_ID {
            return Err(errors::invalid(format!(
                "berth has no session option {:?}; its option is {:?}",
                request.config_id.0,
                models::OPTION_ID
            )));
        }
        let SessionConfigOptionValue::ValueId { value } = &request.value else {
            return Err(errors::invalid("the model option takes one of its values"));
        };
        let config = self
            .ops
            .config(Some(&open.session.workspace_id))
            .await
            .map_err(errors::ops)?;
        let current = self
            .ops
            .session_model_in(&open.session, &config.config)
            .await
            .map_err(errors::ops)?;
        let choice = models::parse(&config, &current.choice, &value.0).ok_or_else(|| {
            errors::invalid(format!(
                "{:?} is not a model this workspace's config offers: {}",
                value.0,
                models::choices(&config)
                    .iter()
                    .map(models::value_id)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        // Kept with the session, so every later turn, in any process and front end, calls it.
        self.ops
            .choose_session_model(&open.session, &choice)
            .await
            .map_err(errors::ops)?;
        Ok(SetSessionConfigOptionResponse::new(
            self.config_options(&open).await?,
        ))
    }

    /// The commands a session's prompt offers: berth's own, then its workspace's skills (read
    /// now; one that cannot be read offers none). Which skills it offered is kept with it.
    async fn commands_for(&self, open: &Open) -> SessionUpdate {
        let skills = self.skills_of(&open.session).await;
        *open.offered.lock().unwrap_or_else(|e| e.into_inner()) = skill_names(&skills);
        commands::available(&skills)
    }

    /// [`Server::commands_for`] the session open as `id`, with the id, for a client to be told.
    async fn commands_of(&self, id: &SessionId) -> Option<(SessionId, SessionUpdate)> {
        let open = self.open(id).ok()?;
        Some((id.clone(), self.commands_for(&open).await))
    }

    /// The commands again when the workspace's skills changed since they were offered (a skill
    /// added or removed during the session): after each prompt.
    async fn commands_if_changed(&self, open: &Open) -> Option<(SessionId, SessionUpdate)> {
        let skills = self.skills_of(&open.session).await;
        let names = skill_names(&skills);
        let mut offered = open.offered.lock().unwrap_or_else(|e| e.into_inner());
        if *offered == names {
            return None;
        }
        *offered = names;
        Some((
            open.session.id.to_string().into(),
            commands::available(&skills),
        ))
    }

    async fn skills_of(&self, session: &Session) -> berth_ops::skills::Skills {
        match self
            .ops
            .resolve_workspace(session.workspace_id.as_str())
            .await
        {
            Ok(ws) => self.ops.skills(Some(&ws)).await.unwrap_or_default(),
            Err(_) => Default::default(),
        }
    }

    /// Marks the session busy, in the dispatch loop, so a second prompt read after this one is
    /// refused; the turn itself runs on its own task.
    fn begin_prompt(&self, id: &SessionId) -> Result<(Arc<Open>, CancellationToken)> {
        let open = self.open(id)?;
        let mut running = open.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.is_some() {
            return Err(errors::refused(format!(
                "session {} is still answering a prompt; wait for its answer or send session/cancel first",
                id.0
            )));
        }
        let cancel = CancellationToken::new();
        *running = Some(cancel.clone());
        drop(running);
        Ok((open, cancel))
    }

    async fn prompt(
        &self,
        open: &Open,
        mut request: PromptRequest,
        cancel: CancellationToken,
        cx: &ConnectionTo<Client>,
    ) -> Result<PromptResponse> {
        match commands::typed(&request.prompt) {
            Some(Typed::Command(command)) => return self.command(open, command, cx).await,
            Some(Typed::Usage(message)) => {
                say(cx, open, message);
                return Ok(PromptResponse::new(StopReason::EndTurn));
            }
            None => commands::unescape(&mut request.prompt),
        }
        let caps = self.capabilities();
        let session_id = request.session_id.clone();
        let files = (caps.fs.read_text_file || caps.fs.write_text_file).then(|| {
            Arc::new(ClientFiles {
                cx: cx.clone(),
                session_id: session_id.clone(),
                read: caps.fs.read_text_file,
                write: caps.fs.write_text_file,
            }) as Arc<dyn berth_agent::Files>
        });
        let terminals = Arc::new(Mutex::new(HashMap::new()));
        let commands = caps.terminal.then(|| {
            Arc::new(ClientTerminals {
                cx: cx.clone(),
                session_id: session_id.clone(),
                by_call: terminals.clone(),
            }) as Arc<dyn berth_agent::Commands>
        });
        let mut tool_cx = ToolContext::new(
            open.work_dir.clone(),
            self.ops.clone(),
            open.session.clone(),
            cancel.clone(),
        );
        tool_cx.files = files.clone();
        let prompt = content::prompt(&request.prompt, &tool_cx).await?;
        let relayed = Arc::new(Relayed::default());
        let turn = self
            .agent
            .start_turn(TurnRequest {
                session: open.session.clone(),
                prompt: prompt.text,
                images: prompt.images,
                cwd: open.work_dir.clone(),
                permissions: Arc::new(ClientPermissions {
                    cx: cx.clone(),
                    session_id: session_id.clone(),
                    relayed: relayed.clone(),
                    may_lift_sandbox: self.reach().may_lift_sandbox(),
                    ops: self.ops.clone(),
                    session: open.session.clone(),
                }),
                cancel,
                options: TurnOptions {
                    files,
                    commands,
                    model: None,
                    mcp: open.mcp.clone(),
                    stop_after: None,
                },
            })
            .await
            .map_err(errors::agent)?;
        let relay = Relay {
            cx: cx.clone(),
            session_id,
            relayed,
            terminals,
        };
        let answer = relay.run(turn, &open.work_dir).await;
        // A session's first prompt titles it: the editor is told, before the answer.
        if !open.title_told.load(std::sync::atomic::Ordering::Relaxed)
            && let Ok(now) = self.ops.session(open.session.id.as_str()).await
            && !now.title.is_empty()
        {
            open.title_told
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let update = SessionInfoUpdate::new().title(now.title);
            let _ = cx.send_notification(SessionNotification::new(
                acp_id(&open.session),
                SessionUpdate::SessionInfoUpdate(update),
            ));
        }
        answer
    }

    /// A prompt that is one of berth's slash commands: run on the session (as `berth chat`
    /// runs it), its answer one message, the model not called. A command that fails says why
    /// in that message, as chat says it.
    async fn command(
        &self,
        open: &Open,
        command: Command,
        cx: &ConnectionTo<Client>,
    ) -> Result<PromptResponse> {
        let done = self
            .agent
            .session_command(&open.session, &open.work_dir, &command, FrontEnd::Editor)
            .await;
        match done {
            Ok(text) => {
                say(cx, open, text);
                // The editor's model picker shows the switch too.
                if matches!(command, Command::Model(Some(_))) {
                    let options = self.config_options(open).await?;
                    let _ = cx.send_notification(SessionNotification::new(
                        acp_id(&open.session),
                        SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options)),
                    ));
                }
            }
            Err(e) => say(cx, open, format!("{}: {e}", command.name())),
        }
        Ok(PromptResponse::new(StopReason::EndTurn))
    }

    fn cancel(&self, request: &CancelNotification) {
        let open = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&*request.session_id.0)
            .cloned();
        if let Some(open) = open
            && let Some(cancel) = &*open.running.lock().unwrap_or_else(|e| e.into_inner())
        {
            cancel.cancel();
        }
    }
}

/// One message from berth (not the model) in the session.
fn say(cx: &ConnectionTo<Client>, open: &Open, text: String) {
    let chunk = ContentChunk::new(ContentBlock::Text(TextContent::new(text)));
    let _ = cx.send_notification(SessionNotification::new(
        acp_id(&open.session),
        SessionUpdate::AgentMessageChunk(chunk),
    ));
}

/// A string in the request's `_meta`; anything but a string there is refused.
fn meta_string(meta: Option<&serde_json::Map<String, Value>>, key: &str) -> Result<Option<String>> {
    match meta.and_then(|m| m.get(key)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(errors::invalid(format!(
            "_meta.{key} must be a string, not {other}"
        ))),
    }
}

/// The client's folder must be an absolute path to a folder that exists.
fn check_cwd(cwd: &Path) -> Result<()> {
    if !cwd.is_absolute() {
        return Err(errors::invalid(format!(
            "cwd must be an absolute path, not {:?}",
            cwd.display().to_string()
        )));
    }
    if !cwd.is_dir() {
        return Err(errors::invalid(format!(
            "cwd {} is not a folder on this machine",
            cwd.display()
        )));
    }
    Ok(())
}

/// The client's MCP servers, in the shape of berth's own `[[mcp_servers]]`. SSE servers
/// (a transport the MCP specification has replaced) are left out, with a message.
fn client_mcp(servers: &[McpServer]) -> Vec<McpServerSettings> {
    let mut settings = Vec::new();
    for server in servers {
        match server {
            McpServer::Stdio(s) => settings.push(McpServerSettings {
                name: s.name.clone(),
                command: Some(s.command.to_string_lossy().into_owned()),
                args: s.args.clone(),
                env: s
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), Secret::new(v.value.clone())))
                    .collect(),
                ..McpServerSettings::default()
            }),
            McpServer::Http(h) => settings.push(McpServerSettings {
                name: h.name.clone(),
                url: Some(h.url.clone()),
                headers: h
                    .headers
                    .iter()
                    .map(|v| (v.name.clone(), Secret::new(v.value.clone())))
                    .collect(),
                ..McpServerSettings::default()
            }),
            McpServer::Sse(s) => eprintln!(
                "berth acp: MCP server {:?} uses SSE, which berth does not speak; offer it over Streamable HTTP",
                s.name
            ),
            _ => eprintln!("berth acp: an MCP server of a kind berth does not know is left out"),
        }
    }
    settings
}

/// The connection's handlers over `server`: every request through [`Server::dispatch`], and
/// the one notification berth takes, `session/cancel`.
pub fn builder(
    server: Arc<Server>,
) -> agent_client_protocol::v1::Builder<
    AcpAgent,
    impl agent_client_protocol::HandleDispatchFrom<Client>,
> {
    let cancels = server.clone();
    AcpAgent
        .v1()
        .name("berth")
        .on_receive_request(
            async move |request: ClientRequest,
                        responder: Responder<Value>,
                        cx: ConnectionTo<Client>| {
                server.dispatch(request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx: ConnectionTo<Client>| {
                cancels.heard();
                cancels.cancel(&notification);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
}

impl Server {
    /// The table of requests. It runs in the connection's dispatch loop: what is quick and
    /// must be ordered with the messages after it (initialize, close, marking a session busy
    /// before its next prompt is read) answers here; everything that waits answers from a
    /// task of its own ([`answer_later`]).
    fn dispatch(
        self: &Arc<Self>,
        request: ClientRequest,
        responder: Responder<Value>,
        cx: ConnectionTo<Client>,
    ) -> Result<()> {
        self.heard();
        let s = self.clone();
        match request {
            ClientRequest::InitializeRequest(r) => answer(responder, Ok(self.initialize(r))),
            ClientRequest::CloseSessionRequest(r) => answer(responder, self.close_session(&r)),
            ClientRequest::NewSessionRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    let answer = s.new_session(r).await;
                    // Once the editor knows the session: the commands its prompt offers.
                    let tell = match &answer {
                        Ok(a) => s.commands_of(&a.session_id).await,
                        Err(_) => None,
                    };
                    (answer, tell)
                })
            }
            ClientRequest::ForkSessionRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    let answer = s.fork_session(r).await;
                    let tell = match &answer {
                        Ok(a) => s.commands_of(&a.session_id).await,
                        Err(_) => None,
                    };
                    (answer, tell)
                })
            }
            ClientRequest::LoadSessionRequest(r) => {
                answer_later(&cx, responder, move |cx| async move {
                    (s.load_session(r, &cx).await, None)
                })
            }
            ClientRequest::ResumeSessionRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    let id = r.session_id.clone();
                    let answer = s.resume_session(r).await;
                    let tell = match answer.is_ok() {
                        true => s.commands_of(&id).await,
                        false => None,
                    };
                    (answer, tell)
                })
            }
            ClientRequest::DeleteSessionRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    (s.delete_session(r).await, None)
                })
            }
            ClientRequest::ListSessionsRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    (s.list_sessions(r).await, None)
                })
            }
            ClientRequest::SetSessionConfigOptionRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    (s.set_config_option(r).await, None)
                })
            }
            ClientRequest::PromptRequest(r) => {
                if let Some(gate) = &self.gate
                    && let Err(why) = gate()
                {
                    return responder.respond_with_error(errors::refused(why));
                }
                // Busy from now: a prompt read next is refused, not queued.
                let (open, cancel) = match self.begin_prompt(&r.session_id) {
                    Ok(begun) => begun,
                    Err(e) => return responder.respond_with_error(e),
                };
                answer_later(&cx, responder, move |cx| async move {
                    let answer = s.prompt(&open, r, cancel, &cx).await;
                    // Free before answering: the client may send its next prompt the moment
                    // it reads this answer.
                    *open.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
                    // A skill added or removed meanwhile: the editor's menu follows.
                    let tell = s.commands_if_changed(&open).await;
                    (answer, tell)
                })
            }
            other => responder.respond_with_error(
                agent_client_protocol::v1::schema::Error::method_not_found()
                    .data(format!("berth does not handle {}", request_method(&other)))
                    .into(),
            ),
        }
    }
}

/// Answers a request now.
fn answer<T: serde::Serialize>(responder: Responder<Value>, answer: Result<T>) -> Result<()> {
    responder.respond_with_result(answer.and_then(to_value))
}

/// Answers a request from a task of its own: `work` gives the answer and, when the client
/// should then be told the commands a session's prompt offers, that session's id and them.
fn answer_later<T, F, Fut>(
    cx: &ConnectionTo<Client>,
    responder: Responder<Value>,
    work: F,
) -> Result<()>
where
    T: serde::Serialize,
    F: FnOnce(ConnectionTo<Client>) -> Fut,
    Fut: std::future::Future<Output = (Result<T>, Option<(SessionId, SessionUpdate)>)>
        + Send
        + 'static,
{
    let cx2 = cx.clone();
    let work = work(cx.clone());
    cx.spawn(async move {
        let (result, tell_commands) = work.await;
        let _ = responder.respond_with_result(result.and_then(to_value));
        if let Some((id, commands)) = tell_commands {
            let _ = cx2.send_notification(SessionNotification::new(id, commands));
        }
        // An error here would close the connection; the request was answered.
        Ok(())
    })
}

fn to_value<T: serde::Serialize>(answer: T) -> Result<Value> {
    serde_json::to_value(answer)
        .map_err(|e| errors::of_kind(berth_ops::ErrorKind::Io, e.to_string()))
}

/// The method of a request berth does not handle, for its error.
fn request_method(request: &ClientRequest) -> String {
    request.method().to_owned()
}

/// The ACP session id of a berth session (they are one id).
fn acp_id(session: &Session) -> SessionId {
    SessionId::new(session.id.to_string())
}

/// The names of `skills`, as a menu offered them.
fn skill_names(skills: &berth_ops::skills::Skills) -> Vec<String> {
    skills.skills.iter().map(|s| s.name.clone()).collect()
}
