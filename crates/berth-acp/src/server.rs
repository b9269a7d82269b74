//! The connection's handlers. Each parses its request, calls `Ops` or the agent, and answers.
//!
//! Handlers run in the connection's dispatch loop, which waits for each; so everything that
//! does I/O or waits (a store read, a turn, a question to the client) runs on a task spawned
//! with `cx.spawn`, which always answers its request and ends `Ok(())` (an `Err` from a
//! spawned task would close the connection). Only what must be ordered with later messages
//! happens in the loop itself: marking a session busy before the next prompt is read, and
//! cancelling.

mod dispatch;
mod mcp_servers;
mod menu;
mod options;
mod prompt;
mod sessions;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    AgentCapabilities, ClientCapabilities, Implementation, InitializeRequest, InitializeResponse,
    McpCapabilities, PromptCapabilities, SessionCapabilities, SessionCloseCapabilities,
    SessionDeleteCapabilities, SessionForkCapabilities, SessionId, SessionListCapabilities,
    SessionResumeCapabilities,
};
use berth_agent::{Agent, CancellationToken, Following, McpServers};
use berth_ops::{DeviceId, HeldTo, Ops, Reach, Session};

use crate::errors;

pub use dispatch::builder;

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

impl Drop for Server {
    /// The connection's end ends its sessions, and what their agent started in the
    /// background.
    fn drop(&mut self) {
        let sessions = self.sessions.get_mut().unwrap_or_else(|e| e.into_inner());
        for id in sessions.keys() {
            berth_agent::tools::background::kill_session(id);
        }
    }
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
        let open = Arc::new(Open {
            session,
            work_dir,
            running: Mutex::default(),
            mcp,
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
}

/// The ACP session id of a berth session (they are one id).
fn acp_id(session: &Session) -> SessionId {
    SessionId::new(session.id.to_string())
}
