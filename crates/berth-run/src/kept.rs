//! Kept runs: a run outlives the terminal that started it (`berth run --detach`), can be
//! looked at and stopped from another one (or another node), and is found failed, never
//! "working" forever, after its supervisor or the machine died.
//!
//! [`RunStore`] holds every rule of a kept run once (what a reader does with a run whose
//! supervisor is gone, who may be told or stopped, what resume continues); where runs are
//! kept is a [`RunBackend`]:
//! - `files.rs`: `<home>/runs/<id>/`, for a home whose store is its files; a supervisor's
//!   hold is a `flock` the kernel drops when the process dies;
//! - `db.rs`: the home's database (SQLite, or Postgres shared by a pool of nodes); a hold is
//!   a lease renewed while the supervisor works, and a fence that keeps a node whose lease ran
//!   out from writing again.
//!
//! Either way the record (`RunRecord`: the request, each agent's node, workspace, session and
//! state) is written only by the run's supervisor, and its events are kept in order beside it.
//! The answers themselves are in the sessions' transcripts.

mod db;
mod files;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use berth_ops::{ErrorKind, Ops, Repository};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    AgentSpec, AgentState, AgentStatus, AgentSummary, Policy, Resume, RunEvent, RunRequest,
};
use files::read_events;

/// How long a run recorded but not yet taken by its supervisor counts as starting, not failed.
const STARTING_GRACE: Duration = Duration::from_secs(30);

/// Why a run's agents failed when its supervisor died under them.
const SUPERVISOR_GONE: &str = "the run's supervisor stopped before it ended (it was killed, or the machine restarted); its workspaces and transcripts are kept, and `berth run resume` continues it";

/// A run's id: 12 lowercase hex digits, made by berth; it names the run's folder.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

impl RunId {
    fn generate() -> RunId {
        RunId(uuid::Uuid::new_v4().simple().to_string()[..12].to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = KeptError;
    fn try_from(value: String) -> Result<RunId, KeptError> {
        let ok = !value.is_empty()
            && value.len() <= 64
            && value
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if ok {
            Ok(RunId(value))
        } else {
            Err(KeptError::BadId(value.chars().take(80).collect()))
        }
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A run's request as kept, to start it again (resume) in another process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredRequest {
    pub task: String,
    /// The repository the workspaces are worktrees of (none for a run in a workspace).
    pub repository: Option<PathBuf>,
    pub workspace: Option<String>,
    pub agents: Vec<AgentSpec>,
    pub name: Option<String>,
    pub allow: Vec<String>,
    pub allow_all: bool,
    pub check: Option<String>,
    pub check_timeout_secs: u64,
    /// `--agent-writable` (absent in runs kept before it existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_writable: Vec<PathBuf>,
    /// The repository was named by URL: each agent's branch is pushed to it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub push: bool,
    /// `--max-tokens`, `--max-cost` (absent in runs kept before budgets existed).
    #[serde(default)]
    pub budget: crate::Budget,
    /// A queued run (`berth run --queue`): worked by whichever worker takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolPlace>,
    /// `--ask`: a call the policy does not cover waits this long for a person's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_timeout_secs: Option<u64>,
}

/// Where a queued run may be worked, and what it is made from there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolPlace {
    /// The node it is pinned to (`--node`); any when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The URL every node fetches the repository from, and pushes each agent's branch to.
    pub repo_url: String,
}

impl StoredRequest {
    /// A request as [`crate::prepare`] settled it.
    pub fn of(request: &RunRequest) -> StoredRequest {
        StoredRequest {
            task: request.task.clone(),
            repository: match &request.repository {
                Repository::Named(dir) | Repository::Around(dir) => Some(dir.clone()),
                Repository::None => None,
            },
            workspace: request.workspace.clone(),
            agents: request.agents.clone(),
            name: request.name.clone(),
            allow: request.policy.named(),
            allow_all: request.policy.allows_all(),
            check: request.check.clone(),
            check_timeout_secs: request.check_timeout.as_secs(),
            agent_writable: request.agent_writable.clone(),
            push: request.push,
            budget: request.budget,
            pool: None,
            ask_timeout_secs: request.ask.map(|d| d.as_secs()),
        }
    }

    /// The request again, to run the agents in `resume` (all of them when it is empty).
    pub fn request(&self, resume: BTreeMap<usize, Resume>) -> RunRequest {
        RunRequest {
            task: self.task.clone(),
            repository: match &self.repository {
                Some(dir) => Repository::Named(dir.clone()),
                None => Repository::None,
            },
            workspace: self.workspace.clone(),
            agents: self.agents.clone(),
            name: self.name.clone(),
            policy: Policy::new(&self.allow, self.allow_all),
            check: self.check.clone(),
            check_timeout: Duration::from_secs(self.check_timeout_secs),
            resume,
            agent_writable: self.agent_writable.clone(),
            push: self.push,
            budget: self.budget,
            max_agents: None,
            stderr_dir: None,
            ask: self.ask_timeout_secs.map(Duration::from_secs),
        }
    }
}

/// Where a run is as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Queued for a worker (`berth run --queue`): nothing made yet.
    Queued,
    /// Recorded; its supervisor is starting.
    Starting,
    /// Its supervisor is at work.
    Running,
    /// Every agent ended and the summary is in.
    Ended,
    /// Its supervisor died before the run ended.
    Failed,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Ended => "ended",
            RunState::Failed => "failed",
        }
    }

    /// Whether the run is over (ended or failed).
    pub fn is_over(self) -> bool {
        matches!(self, RunState::Ended | RunState::Failed)
    }
}

/// One agent of a kept run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentRecord {
    pub label: String,
    /// The machine its supervisor ran it on (its host name), once it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub workspace: Option<String>,
    pub session: Option<String>,
    pub worktree: Option<PathBuf>,
    /// An ACP agent's own session id, to load on resume.
    pub acp_session: Option<String>,
    /// Where it is (its answer is in its session's transcript, not here).
    #[serde(flatten)]
    pub status: AgentStatus,
    /// How it ended, once the run summed up.
    pub summary: Option<AgentSummary>,
    /// What was done with its work once it ended: merged, discarded or kept on purpose.
    /// Set by whatever merged or deleted its workspace (`run pick`, `run discard`,
    /// `workspace merge`, `workspace delete`, the review page); never by its turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AgentOutcome>,
}

/// What was done with an agent's work once it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentOutcome {
    /// Its work was merged into a branch of the repository.
    Merged,
    /// Its work was dropped on purpose (its commits kept on berth's lost-work ref).
    Discarded,
    /// Another agent was picked, and this one's workspace kept (`run pick --keep-others`).
    Kept,
}

impl AgentOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentOutcome::Merged => "merged",
            AgentOutcome::Discarded => "discarded",
            AgentOutcome::Kept => "kept",
        }
    }

    /// Whether the agent's part is over for good: nothing more to tell it.
    pub fn is_closed(self) -> bool {
        matches!(self, AgentOutcome::Merged | AgentOutcome::Discarded)
    }
}

/// A run as kept in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: RunId,
    pub created_at: DateTime<Utc>,
    /// When a supervisor last took it (a queued run waits from `created_at` to this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub state: RunState,
    /// The process supervising it, while it runs.
    pub supervisor: Option<u32>,
    /// Why it failed as a whole.
    pub message: Option<String>,
    pub request: StoredRequest,
    pub agents: Vec<AgentRecord>,
}

impl RunRecord {
    fn new(id: RunId, request: StoredRequest) -> RunRecord {
        let state = match request.pool {
            Some(_) => RunState::Queued,
            None => RunState::Starting,
        };
        let agents = request
            .agents
            .iter()
            .map(|spec| AgentRecord {
                label: spec.label(),
                node: None,
                workspace: None,
                session: None,
                worktree: None,
                acp_session: None,
                status: AgentStatus::default(),
                summary: None,
                outcome: None,
            })
            .collect();
        RunRecord {
            id,
            created_at: Utc::now(),
            started_at: None,
            ended_at: None,
            state,
            supervisor: None,
            message: None,
            request,
            agents,
        }
    }

    /// Whether the run is over with every agent done and every check passed: what the CLI's
    /// exit status says.
    pub fn succeeded(&self) -> bool {
        self.state == RunState::Ended
            && self.agents.iter().all(|a| {
                a.status.state == AgentState::Done
                    && a.summary
                        .as_ref()
                        .and_then(|s| s.check.as_ref())
                        .is_none_or(|c| c.passed)
            })
    }

    /// The agents `run resume` continues: those not done that have a session to continue.
    pub fn unfinished(&self) -> BTreeMap<usize, Resume> {
        self.agents
            .iter()
            .enumerate()
            .filter(|(_, a)| a.status.state != AgentState::Done)
            .filter_map(|(i, a)| {
                Some((
                    i,
                    Resume {
                        workspace: a.workspace.clone()?,
                        session: a.session.clone()?,
                        acp_session: a.acp_session.clone(),
                        prompt: None,
                        moved: false,
                    },
                ))
            })
            .collect()
    }

    /// Takes in one event, as worked on node `node`; whether the record changed in a way
    /// worth writing (the answer's text is not kept here).
    fn take(&mut self, event: &RunEvent, node: &str) -> bool {
        if let RunEvent::Summary { agents } = event {
            for summary in agents {
                if let Some(a) = self.agents.get_mut(summary.agent) {
                    a.summary = Some(summary.clone());
                }
            }
            self.state = RunState::Ended;
            self.ended_at = Some(Utc::now());
            self.supervisor = None;
            return true;
        }
        let Some(a) = event.agent().and_then(|i| self.agents.get_mut(i)) else {
            return false;
        };
        match event {
            RunEvent::Text { .. } => return false,
            RunEvent::Started {
                workspace,
                session,
                worktree,
                ..
            } => {
                a.workspace = Some(workspace.clone());
                a.session = Some(session.clone());
                a.worktree = Some(worktree.clone());
                // Kept by the supervisor, on the machine that runs the agent.
                a.node = Some(node.to_owned());
            }
            RunEvent::AgentSession { id, .. } => a.acp_session = Some(id.clone()),
            _ => {}
        }
        a.status.apply(event);
        true
    }

    /// Ends a queued run that no worker took yet: stopped, its agents never started.
    fn stop_queued(&mut self) {
        self.state = RunState::Ended;
        self.ended_at = Some(Utc::now());
        self.message = Some("stopped before a worker took it".to_owned());
        for a in &mut self.agents {
            a.status.state = AgentState::Stopped;
            a.status.stop = Some("cancelled".to_owned());
            a.status.message = Some("stopped while queued, before it started".to_owned());
        }
    }

    /// Marks the run failed, and each agent that had not ended, for `why`.
    fn fail(&mut self, why: &str) {
        self.state = RunState::Failed;
        self.ended_at = Some(Utc::now());
        self.supervisor = None;
        self.message = Some(why.to_owned());
        for a in &mut self.agents {
            if !a.status.state.is_final() {
                a.status.state = AgentState::Failed;
                a.status.stop = Some("failed".to_owned());
                a.status.message = Some(why.to_owned());
            }
        }
    }
}

/// A request to stop a run or one of its agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRequest {
    All,
    /// The agent's index, 0-based.
    Agent(usize),
}

/// Why a kept run could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum KeptError {
    #[error("invalid run id {0:?}: a run id is the hex digits `berth run list` shows")]
    BadId(String),
    #[error("run {0} not found")]
    NotFound(String),
    #[error("run id prefix {prefix:?} matches {} runs ({}); give more of it", ids.len(), ids.join(", "))]
    Ambiguous { prefix: String, ids: Vec<String> },
    #[error("the run record {} is corrupt: {reason}; it was left as it is", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("run {id} is being supervised by process {pid}")]
    Busy { id: RunId, pid: String },
    #[error("run {id} is not running: it {}", state.as_str())]
    NotRunning { id: RunId, state: RunState },
    #[error("run {id} is still {}: stop it first, or wait for it", state.as_str())]
    StillRunning { id: RunId, state: RunState },
    #[error("run {0} has nothing to resume: every agent is done, or never got a session")]
    NothingToResume(RunId),
    #[error("run {id} has {count} agents: say which with --agent N (1 is the first)")]
    WhichAgent { id: RunId, count: usize },
    #[error("agent {agent} of run {id} never started (it has no session): there is no one to tell")]
    NeverStarted { id: RunId, agent: usize },
    #[error(
        "agent {agent} of run {id} has ended while the others work: tell it once the run is over (`berth run wait {id}`)"
    )]
    AgentEnded { id: RunId, agent: usize },
    #[error(
        "agent {agent} of run {id} was {}: its part is over; tell another agent, or start a new run",
        outcome.as_str()
    )]
    AgentClosed {
        id: RunId,
        agent: usize,
        outcome: AgentOutcome,
    },
    #[error(
        "agent {agent} of run {id} waits on no question: it was answered, or it never asked (a run asks only with --ask)"
    )]
    NothingAsked { id: RunId, agent: usize },
    #[error("{0:?} is not a cursor of `berth run list`: give the one a page ended with")]
    BadCursor(String),
    #[error("run {id} has no agent {agent}: it has {count}")]
    NoSuchAgent {
        id: RunId,
        agent: usize,
        count: usize,
    },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Store(berth_ops::Error),
    #[error(
        "run {id} was taken by another node after this one's hold on it ran out; this node writes nothing more to it"
    )]
    Fenced { id: RunId },
    #[error(
        "queued runs and workers need the runs in a database every node reaches: set [store] url (or BERTH_STORE_URL) to postgres://… (or sqlite://… for one machine)"
    )]
    NeedsDatabase,
}

impl KeptError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            KeptError::BadId(_)
            | KeptError::BadCursor(_)
            | KeptError::Ambiguous { .. }
            | KeptError::NoSuchAgent { .. }
            | KeptError::WhichAgent { .. } => ErrorKind::Invalid,
            KeptError::NotFound(_) => ErrorKind::NotFound,
            KeptError::Corrupt { .. } => ErrorKind::Corrupt,
            KeptError::Busy { .. }
            | KeptError::NotRunning { .. }
            | KeptError::StillRunning { .. }
            | KeptError::NothingToResume(_)
            | KeptError::AgentEnded { .. }
            | KeptError::AgentClosed { .. }
            | KeptError::NothingAsked { .. }
            | KeptError::NeverStarted { .. } => ErrorKind::Refused,
            KeptError::Io { .. } => ErrorKind::Io,
            KeptError::Store(e) => e.kind(),
            KeptError::Fenced { .. } => ErrorKind::Conflict,
            KeptError::NeedsDatabase => ErrorKind::NotConfigured,
        }
    }
}

/// A stop or a tell left for a run's supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request {
    Stop(StopRequest),
    Tell {
        agent: usize,
        text: String,
    },
    /// A person's answer to agent `agent`'s question (`--ask`).
    Answer {
        agent: usize,
        question: String,
        answer: crate::Answer,
    },
}

/// What a reader decides about a run whose supervisor is gone: whether it changed it.
pub(crate) type Decide = dyn for<'r> Fn(&'r mut RunRecord) -> bool + Sync;

/// Where runs are kept: the primitives [`RunStore`]'s rules are written over, the same on
/// files and in a database (the conformance tests below run on each).
#[async_trait]
pub(crate) trait RunBackend: Send + Sync + fmt::Debug {
    /// Files a new run; `false` when its id is taken.
    async fn insert(&self, record: &RunRecord) -> Result<bool, KeptError>;
    /// The run as written (`NotFound`, `Corrupt`).
    async fn read(&self, id: &RunId) -> Result<RunRecord, KeptError>;
    async fn ids(&self) -> Result<Vec<RunId>, KeptError>;
    /// Every run; one whose record cannot be read is an error in its place.
    async fn list(&self) -> Result<Vec<Result<RunRecord, KeptError>>, KeptError>;
    /// At most `limit` runs, newest first, after `after`; one whose record cannot be read is
    /// an error in its place (on files, where its time cannot be read either: on the first
    /// page), never left out.
    async fn page(
        &self,
        limit: usize,
        after: Option<&PageCursor>,
    ) -> Result<Vec<Result<RunRecord, KeptError>>, KeptError>;
    /// Whether a supervisor holds the run now.
    async fn supervised(&self, id: &RunId) -> Result<bool, KeptError>;
    /// Writes the run on behalf of a supervisor that is gone: under the backend's exclusion
    /// the run is read again and, when still nobody holds it and `decide` changed it
    /// (`true`), written. The run as it then is.
    async fn write_unsupervised(&self, id: &RunId, decide: &Decide)
    -> Result<RunRecord, KeptError>;
    /// Becomes the run's supervisor: refused (`Busy`) while another holds it.
    async fn hold(&self, id: &RunId) -> Result<Box<dyn Hold>, KeptError>;
    /// Leaves `request` for the supervisor of `record` (process `pid`, on files), and tells
    /// it to look where it can.
    async fn request(
        &self,
        record: &RunRecord,
        request: &Request,
        pid: u32,
    ) -> Result<(), KeptError>;
    /// The run's events after `cursor` (0: from the first), and the cursor after them.
    async fn events(&self, id: &RunId, cursor: u64) -> Result<(Vec<RunEvent>, u64), KeptError>;
    /// The run a session was last indexed under.
    async fn run_of_session(&self, session: &str) -> Result<Option<RunId>, KeptError>;
    async fn index_session(&self, session: &str, id: &RunId);
}

/// A supervisor's hold on its run: what it writes goes through it.
#[async_trait]
pub(crate) trait Hold: Send {
    /// Whether another took the run (a lapsed lease): nothing more is written.
    fn lost(&self) -> bool;
    async fn write(&mut self, record: &RunRecord) -> Result<(), KeptError>;
    /// Appends an event; `durable`: on disk before this returns.
    async fn append(&mut self, event: &RunEvent, durable: bool) -> Result<(), KeptError>;
    /// Writes what `append` held back.
    async fn flush(&mut self) -> Result<(), KeptError>;
    /// The stops and tells left since the last look, taken.
    async fn requests(&mut self) -> Vec<Request>;
    /// Lets the run go (its end, or the supervisor's): another may take it at once.
    async fn release(self: Box<Self>);
}

/// The kept runs of one home: in its database when its store is one, else in its files.
#[derive(Debug, Clone)]
pub struct RunStore {
    backend: Arc<dyn RunBackend>,
    /// The database backend again, for what only it can do (queue, claim).
    db: Option<db::DbRuns>,
    home: PathBuf,
    /// The name this process's supervisors record as the node of the agents they run.
    node: String,
}

impl RunStore {
    /// The runs kept in files under `home` (`<home>/runs`).
    pub fn files(home: &Path) -> RunStore {
        RunStore {
            backend: Arc::new(files::FileRuns::new(home)),
            db: None,
            home: home.to_owned(),
            node: berth_ops::notices::node_name(),
        }
    }

    /// The runs of `ops`'s home, kept where its records are: its database, or its files. A
    /// home with runs kept in files before its records moved to a database has those runs
    /// copied in (each once, when it is over), so none is lost.
    pub async fn open(ops: &Ops) -> Result<RunStore, KeptError> {
        let Some(sql) = ops.database() else {
            return Ok(RunStore::files(ops.home()));
        };
        let lease = ops
            .config(None)
            .await
            .map(|l| l.config.pool.lease())
            .unwrap_or_else(|_| berth_ops::PoolSettings::default().lease());
        let db = db::DbRuns {
            runs: sql.runs(),
            node: berth_ops::notices::node_name(),
            lease,
        };
        let store = RunStore {
            backend: Arc::new(db.clone()),
            db: Some(db),
            home: ops.home().to_owned(),
            node: berth_ops::notices::node_name(),
        };
        store.adopt_file_runs().await?;
        Ok(store)
    }

    /// The same runs, this process named `node` in the records and leases it writes (a
    /// worker's `--node`).
    pub fn with_node(mut self, node: &str) -> RunStore {
        self.node = node.to_owned();
        if let Some(db) = &mut self.db {
            db.node = node.to_owned();
            self.backend = Arc::new(db.clone());
        }
        self
    }

    /// The node this process records.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Whether runs are kept in a database (and so may be queued for workers).
    pub fn pooled(&self) -> bool {
        self.db.is_some()
    }

    /// Copies the runs kept in files under the home into the database, each that is over
    /// and not yet there; a run still running there is copied by a later look, once over.
    async fn adopt_file_runs(&self) -> Result<(), KeptError> {
        let Some(db) = &self.db else { return Ok(()) };
        let files = files::FileRuns::new(&self.home);
        for id in files.ids_sync()? {
            let moved = files.dir(&id).join("moved");
            if moved.exists() {
                continue;
            }
            let Ok(record) = files.read_sync(&id) else {
                continue;
            };
            if !record.state.is_over() || files.supervised_sync(&id)? {
                continue;
            }
            let (events, _) = read_events(&files.dir(&id).join("events.jsonl"), 0)?;
            let events: Vec<String> = events
                .iter()
                .map(|e| serde_json::to_string(e).expect("a run event serializes"))
                .collect();
            let (created_ns, agents) = db::columns(&record);
            let text = serde_json::to_string(&record).expect("a run record serializes");
            db.runs
                .adopt(
                    &berth_store_sql::RunColumns {
                        id: id.as_str(),
                        created_ns,
                        state: record.state.as_str(),
                        pooled: false,
                        node: None,
                        agents,
                    },
                    &text,
                    &events,
                )
                .await
                .map_err(|e| KeptError::Store(e.into()))?;
            for a in &record.agents {
                if let Some(session) = &a.session {
                    db.index_session(session, &id).await;
                }
            }
            // Its files stay as they were; the mark says they are in the database now.
            let _ = berth_confined::write_atomic(&moved, b"");
        }
        Ok(())
    }

    /// Where agent `agent`'s (0-based) standard error is kept, on the machine that ran it:
    /// a file of the run's folder under this home, whichever store keeps the run.
    pub fn stderr_path(&self, id: &RunId, agent: usize) -> PathBuf {
        self.run_dir(id).join(format!("agent-{}.stderr", agent + 1))
    }

    /// The run's folder on this machine (`<home>/runs/<id>`), for what only this machine
    /// keeps: a supervisor's output, its agents' standard error.
    fn run_dir(&self, id: &RunId) -> PathBuf {
        self.home.join("runs").join(id.as_str())
    }

    /// Where a detached supervisor's own output goes: a file on this machine, whichever
    /// store keeps the run.
    pub fn log_path(&self, id: &RunId) -> PathBuf {
        self.home
            .join("runs")
            .join(id.as_str())
            .join("supervisor.log")
    }

    /// Records a new run: starting, for this process to supervise; or queued for a worker
    /// when its request says so (refused without a database).
    pub async fn create(&self, request: StoredRequest) -> Result<RunRecord, KeptError> {
        if request.pool.is_some() && self.db.is_none() {
            return Err(KeptError::NeedsDatabase);
        }
        loop {
            let record = RunRecord::new(RunId::generate(), request.clone());
            if self.backend.insert(&record).await? {
                return Ok(record);
            }
        }
    }

    /// The run an id or a prefix of one (4 digits or more) names.
    pub async fn resolve(&self, identifier: &str) -> Result<RunId, KeptError> {
        // Said as it was given: `RUN` is no id, whatever its lowercase is.
        let id = RunId::try_from(identifier.to_ascii_lowercase())
            .map_err(|_| KeptError::BadId(identifier.to_owned()))?;
        match self.backend.read(&id).await {
            Ok(_) => return Ok(id),
            Err(KeptError::NotFound(_)) => {}
            // There, but unreadable: the id names it all the same.
            Err(KeptError::Corrupt { .. }) => return Ok(id),
            Err(e) => return Err(e),
        }
        if id.as_str().len() >= 4 {
            let mut found: Vec<String> = self
                .backend
                .ids()
                .await?
                .into_iter()
                .filter(|i| i.as_str().starts_with(id.as_str()))
                .map(String::from)
                .collect();
            found.sort();
            match found.len() {
                0 => {}
                1 => return Ok(RunId(found.remove(0))),
                _ => {
                    return Err(KeptError::Ambiguous {
                        prefix: identifier.to_owned(),
                        ids: found,
                    });
                }
            }
        }
        Err(KeptError::NotFound(identifier.to_owned()))
    }

    /// Every run, newest first; a run whose record cannot be read is an error in its place.
    pub async fn list(&self) -> Result<Vec<Result<RunRecord, KeptError>>, KeptError> {
        let mut runs = Vec::new();
        for run in self.backend.list().await? {
            runs.push(match run {
                Ok(r) => self.alive_or_failed(r).await,
                Err(e) => Err(e),
            });
        }
        runs.sort_by(|a, b| match (a, b) {
            (Ok(a), Ok(b)) => b.created_at.cmp(&a.created_at),
            (Ok(_), Err(_)) => std::cmp::Ordering::Less,
            (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
            (Err(_), Err(_)) => std::cmp::Ordering::Equal,
        });
        Ok(runs)
    }

    /// At most `limit` runs (1 to [`berth_ops::PAGE_MAX`]), newest first, after the run
    /// `cursor` names (from a page before: `None` for the first); and the cursor of the next
    /// page when there may be one. Only that page's records are read (one query on a
    /// database).
    pub async fn page(&self, limit: usize, cursor: Option<&str>) -> Result<RunPage, KeptError> {
        let limit = limit.clamp(1, berth_ops::PAGE_MAX);
        let after = cursor.map(PageCursor::parse).transpose()?;
        let found = self.backend.page(limit, after.as_ref()).await?;
        let next = (found.len() >= limit)
            .then(|| found.iter().rev().find_map(|r| r.as_ref().ok()))
            .flatten()
            .map(|r| PageCursor::of(r).to_string());
        let mut runs = Vec::with_capacity(found.len());
        for run in found {
            runs.push(match run {
                Ok(record) => self.alive_or_failed(record).await,
                Err(e) => Err(e),
            });
        }
        Ok(RunPage { runs, next })
    }

    /// The kept run one of whose agents works in session `session`, and that agent's index;
    /// the newest, should two have (a run resumed in the same session is the same run).
    pub async fn find_session(
        &self,
        session: &str,
    ) -> Result<Option<(RunRecord, usize)>, KeptError> {
        // The index the supervisor keeps, checked against the run it names; else, for runs
        // kept before it, every record looked at.
        if let Some(id) = self.backend.run_of_session(session).await?
            && let Ok(run) = self.backend.read(&id).await
            && let Some(i) = run
                .agents
                .iter()
                .position(|a| a.session.as_deref() == Some(session))
        {
            return Ok(Some((self.alive_or_failed(run).await?, i)));
        }
        let found = self
            .newest_with(|a| a.session.as_deref() == Some(session))
            .await?;
        match found {
            Some((run, i)) => {
                self.backend.index_session(session, &run.id).await;
                Ok(Some((self.alive_or_failed(run).await?, i)))
            }
            None => Ok(None),
        }
    }

    /// The run's events after `cursor` (0: all), and the cursor to read on from.
    pub async fn events(&self, id: &RunId, cursor: u64) -> Result<(Vec<RunEvent>, u64), KeptError> {
        self.backend.events(id, cursor).await
    }

    /// Where agent `agent` of `record` is in its latest turn, its answer so far included:
    /// the events since its last start folded as every watcher folds them. What a process
    /// that is not the run's supervisor shows. An agent resumed or told, whose new turn has
    /// not started yet, is as the record has it (starting).
    pub async fn agent_status(
        &self,
        record: &RunRecord,
        agent: usize,
    ) -> Result<AgentStatus, KeptError> {
        let (events, _) = self.backend.events(&record.id, 0).await?;
        let mine: Vec<&RunEvent> = events.iter().filter(|e| e.agent() == Some(agent)).collect();
        let latest = mine
            .iter()
            .rposition(|e| matches!(e, RunEvent::Started { .. }))
            .unwrap_or(0);
        let mut status = AgentStatus::default();
        for event in &mine[latest..] {
            status.apply(event);
        }
        let kept = record.agents.get(agent).map(|a| &a.status);
        if let Some(kept) = kept
            && !kept.state.is_final()
            && status.state.is_final()
        {
            return Ok(kept.clone());
        }
        Ok(status)
    }

    /// The run as it is: one not over whose supervisor is gone is recorded failed first (a
    /// queued run is not: a worker takes it, or takes it over). Never takes a supervisor's
    /// hold.
    pub async fn load(&self, id: &RunId) -> Result<RunRecord, KeptError> {
        let record = self.backend.read(id).await?;
        self.alive_or_failed(record).await
    }

    async fn alive_or_failed(&self, record: RunRecord) -> Result<RunRecord, KeptError> {
        if record.state.is_over()
            || record.request.pool.is_some()
            || self.backend.supervised(&record.id).await?
        {
            return Ok(record);
        }
        let decide = |record: &mut RunRecord| {
            let young = Utc::now()
                .signed_duration_since(record.created_at)
                .to_std()
                .is_ok_and(|age| age < STARTING_GRACE);
            if record.state.is_over() || (record.state == RunState::Starting && young) {
                return false;
            }
            record.fail(SUPERVISOR_GONE);
            true
        };
        self.backend.write_unsupervised(&record.id, &decide).await
    }

    /// Becomes the run's supervisor: takes its hold (refused while another process holds
    /// it) and records this process as running it.
    pub async fn supervise(&self, id: &RunId) -> Result<Supervision, KeptError> {
        let hold = self.backend.hold(id).await?;
        self.supervising(id, hold).await
    }

    async fn supervising(
        &self,
        id: &RunId,
        mut hold: Box<dyn Hold>,
    ) -> Result<Supervision, KeptError> {
        let mut record = self.backend.read(id).await?;
        record.state = RunState::Running;
        record.supervisor = Some(std::process::id());
        record.started_at = Some(Utc::now());
        record.ended_at = None;
        record.message = None;
        hold.write(&record).await?;
        Ok(Supervision {
            store: self.clone(),
            hold: Some(hold),
            record,
        })
    }

    /// Takes a queued run this node may work (pinned to it or to none) of at most `room`
    /// agents, or one whose worker's hold lapsed, and supervises it. `None` when there is
    /// none. Refused without a database.
    pub async fn claim(&self, room: usize) -> Result<Option<Supervision>, KeptError> {
        let Some(db) = &self.db else {
            return Err(KeptError::NeedsDatabase);
        };
        let Some((id, hold)) = db.claim(room).await? else {
            return Ok(None);
        };
        self.supervising(&id, hold).await.map(Some)
    }

    /// A listener woken when a run is queued, on a database that can (Postgres).
    pub async fn listen(&self) -> Result<Option<berth_store_sql::RunsListener>, KeptError> {
        match &self.db {
            Some(db) => db
                .runs
                .listen()
                .await
                .map_err(|e| KeptError::Store(e.into())),
            None => Err(KeptError::NeedsDatabase),
        }
    }

    /// The agents `run resume` would continue: refused while the run is not over, or when
    /// none is left to continue.
    pub async fn resumable(&self, id: &RunId) -> Result<BTreeMap<usize, Resume>, KeptError> {
        let record = self.load(id).await?;
        if !record.state.is_over() {
            return Err(KeptError::StillRunning {
                id: id.clone(),
                state: record.state,
            });
        }
        let again = record.unfinished();
        if again.is_empty() {
            return Err(KeptError::NothingToResume(id.clone()));
        }
        Ok(again)
    }

    /// Queues `text` for agent `agent` (the only one when `None`) of the running run `id`:
    /// its supervisor tells the agent once its current turn ends, in the same session. The
    /// agent's index. Refused for an agent that has ended already (the run goes on without
    /// it), or one with no session yet.
    pub async fn queue_tell(
        &self,
        id: &RunId,
        agent: Option<usize>,
        text: &str,
    ) -> Result<usize, KeptError> {
        let record = self.load(id).await?;
        let pid = supervisor_of(&record)?;
        let i = which_agent(id, &record, agent)?;
        let a = &record.agents[i];
        closed(id, i, a)?;
        // An ACP agent's process answers one prompt: it is told once the run is over.
        if matches!(
            record.request.agents.get(i),
            Some(crate::AgentSpec::Acp { .. })
        ) {
            return Err(KeptError::StillRunning {
                id: id.clone(),
                state: record.state,
            });
        }
        if a.status.state.is_final() {
            return Err(KeptError::AgentEnded {
                id: id.clone(),
                agent: i + 1,
            });
        }
        let request = Request::Tell {
            agent: i,
            text: text.to_owned(),
        };
        self.backend.request(&record, &request, pid).await?;
        Ok(i)
    }

    /// Answers the question agent `agent` (the only one when `None`) of the running run `id`
    /// waits on (`--ask`): its supervisor passes the answer on at its next look. The agent's
    /// index and the question's tool. Refused when the agent waits on nothing.
    pub async fn queue_answer(
        &self,
        id: &RunId,
        agent: Option<usize>,
        answer: crate::Answer,
    ) -> Result<(usize, String), KeptError> {
        self.queue_answer_to(id, agent, None, answer).await
    }

    /// [`RunStore::queue_answer`], for question `question` only when it names one: refused
    /// when the agent waits on another (the one asked about was answered meanwhile).
    pub async fn queue_answer_to(
        &self,
        id: &RunId,
        agent: Option<usize>,
        question: Option<&str>,
        answer: crate::Answer,
    ) -> Result<(usize, String), KeptError> {
        let record = self.load(id).await?;
        let pid = supervisor_of(&record)?;
        let i = which_agent(id, &record, agent)?;
        let Some(waiting) = record.agents[i]
            .status
            .waiting
            .clone()
            .filter(|w| question.is_none_or(|q| q == w.question))
        else {
            return Err(KeptError::NothingAsked {
                id: id.clone(),
                agent: i + 1,
            });
        };
        let request = Request::Answer {
            agent: i,
            question: waiting.question,
            answer,
        };
        self.backend.request(&record, &request, pid).await?;
        Ok((i, waiting.tool))
    }

    /// Agent `agent` of a run that is over (the only one when `None`), to be told `text` in
    /// its workspace and session (`berth run tell`), whatever way it ended. Refused while the
    /// run is running, and for an agent that never got a session.
    pub async fn tellable(
        &self,
        id: &RunId,
        agent: Option<usize>,
        text: &str,
    ) -> Result<BTreeMap<usize, Resume>, KeptError> {
        let record = self.load(id).await?;
        if !record.state.is_over() {
            return Err(KeptError::StillRunning {
                id: id.clone(),
                state: record.state,
            });
        }
        let i = which_agent(id, &record, agent)?;
        let a = &record.agents[i];
        closed(id, i, a)?;
        let (Some(workspace), Some(session)) = (&a.workspace, &a.session) else {
            return Err(KeptError::NeverStarted {
                id: id.clone(),
                agent: i + 1,
            });
        };
        Ok(BTreeMap::from([(
            i,
            Resume {
                workspace: workspace.clone(),
                session: session.clone(),
                acp_session: a.acp_session.clone(),
                prompt: Some(text.to_owned()),
                moved: false,
            },
        )]))
    }

    /// Asks the run's supervisor to stop the run or one agent. Refused when the run is not
    /// running (a queued run has no supervisor yet: it is stopped as it is taken).
    pub async fn request_stop(
        &self,
        id: &RunId,
        what: StopRequest,
    ) -> Result<RunRecord, KeptError> {
        let record = self.load(id).await?;
        if let StopRequest::Agent(agent) = what
            && agent >= record.agents.len()
        {
            return Err(KeptError::NoSuchAgent {
                id: id.clone(),
                agent: agent + 1,
                count: record.agents.len(),
            });
        }
        if record.state == RunState::Queued && what == StopRequest::All {
            // No worker has it: ended here, unless one takes it meanwhile (its fence moves,
            // and the write is refused); then its worker is asked, as for any running run.
            let decide = |record: &mut RunRecord| {
                if record.state != RunState::Queued {
                    return false;
                }
                record.stop_queued();
                true
            };
            let now = self.backend.write_unsupervised(id, &decide).await?;
            if now.state.is_over() {
                return Ok(now);
            }
        }
        let pid = match (record.state, record.supervisor) {
            (RunState::Running, Some(pid)) => pid,
            (RunState::Queued | RunState::Starting, _) if record.request.pool.is_some() => 0,
            (state, _) => {
                return Err(KeptError::NotRunning {
                    id: id.clone(),
                    state,
                });
            }
        };
        self.backend
            .request(&record, &Request::Stop(what), pid)
            .await?;
        Ok(record)
    }
}

impl RunStore {
    /// The run and the agent (its index) that worked in workspace `workspace` (an id); the
    /// newest, should two have (a run resumed in the same workspace is the same run).
    pub async fn find_workspace(
        &self,
        workspace: &str,
    ) -> Result<Option<(RunRecord, usize)>, KeptError> {
        self.newest_with(|a| a.workspace.as_deref() == Some(workspace))
            .await
    }

    /// The newest run one of whose agents `is` holds, and that agent's index; every record
    /// read (no index names it).
    async fn newest_with(
        &self,
        is: impl Fn(&AgentRecord) -> bool,
    ) -> Result<Option<(RunRecord, usize)>, KeptError> {
        let mut found: Option<(RunRecord, usize)> = None;
        for run in self.backend.list().await?.into_iter().flatten() {
            let Some(i) = run.agents.iter().position(&is) else {
                continue;
            };
            if found
                .as_ref()
                .is_none_or(|(newest, _)| run.created_at > newest.created_at)
            {
                found = Some((run, i));
            }
        }
        Ok(found)
    }

    /// Records what was done with agent `agent`'s work. Refused while the run is supervised
    /// (its supervisor writes the record then): finish a run once it is over.
    pub async fn set_outcome(
        &self,
        id: &RunId,
        agent: usize,
        outcome: AgentOutcome,
    ) -> Result<RunRecord, KeptError> {
        let record = self.load(id).await?;
        if agent >= record.agents.len() {
            return Err(KeptError::NoSuchAgent {
                id: id.clone(),
                agent: agent + 1,
                count: record.agents.len(),
            });
        }
        if !record.state.is_over() {
            return Err(KeptError::StillRunning {
                id: id.clone(),
                state: record.state,
            });
        }
        let decide = move |record: &mut RunRecord| {
            if !record.state.is_over() {
                return false;
            }
            match record.agents.get_mut(agent) {
                Some(a) if a.outcome != Some(outcome) => {
                    a.outcome = Some(outcome);
                    true
                }
                _ => false,
            }
        };
        let now = self.backend.write_unsupervised(id, &decide).await?;
        if now.agents.get(agent).and_then(|a| a.outcome) != Some(outcome) {
            // A supervisor took the run meanwhile (`run tell`, `run resume`).
            return Err(KeptError::StillRunning {
                id: id.clone(),
                state: now.state,
            });
        }
        Ok(now)
    }
}

/// One page of the kept runs, newest first.
#[derive(Debug)]
pub struct RunPage {
    /// Newest first; a run whose record cannot be read is an error in its place.
    pub runs: Vec<Result<RunRecord, KeptError>>,
    /// The cursor of the next page, when there may be one.
    pub next: Option<String>,
}

/// Where a page of runs ends: the last run's creation time (nanoseconds) and id, written
/// `<ns>.<id>`. Runs are ordered newest first, then by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PageCursor {
    pub created_ns: i64,
    pub id: RunId,
}

impl PageCursor {
    fn of(record: &RunRecord) -> PageCursor {
        PageCursor {
            created_ns: record.created_at.timestamp_nanos_opt().unwrap_or(i64::MAX),
            id: record.id.clone(),
        }
    }

    fn parse(text: &str) -> Result<PageCursor, KeptError> {
        let bad = || KeptError::BadCursor(text.to_owned());
        let (ns, id) = text.split_once('.').ok_or_else(bad)?;
        Ok(PageCursor {
            created_ns: ns.parse().map_err(|_| bad())?,
            id: RunId::try_from(id.to_owned()).map_err(|_| bad())?,
        })
    }

    /// Whether `record` comes after this cursor, newest first.
    pub(crate) fn before(&self, record: &RunRecord) -> bool {
        let ns = record.created_at.timestamp_nanos_opt().unwrap_or(i64::MAX);
        ns < self.created_ns || (ns == self.created_ns && record.id.as_str() > self.id.as_str())
    }
}

impl fmt::Display for PageCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.created_ns, self.id)
    }
}

/// What other processes asked of a run's supervisor since its last look.
#[derive(Debug, Default)]
pub struct Requests {
    pub stops: Vec<StopRequest>,
    /// Each agent's index and what to tell it, in the order they came.
    pub tells: Vec<(usize, String)>,
    /// Each agent's index, its question and the answer.
    pub answers: Vec<(usize, String, crate::Answer)>,
}

/// A run's supervisor's hold on it: the hold, and the record it keeps.
pub struct Supervision {
    store: RunStore,
    /// `None` once let go.
    hold: Option<Box<dyn Hold>>,
    record: RunRecord,
}

impl Supervision {
    pub fn record(&self) -> &RunRecord {
        &self.record
    }

    /// Where the run's agents' standard error is kept on this machine.
    pub fn stderr_dir(&self) -> PathBuf {
        self.store.run_dir(&self.record.id)
    }

    fn hold(&mut self) -> Result<&mut Box<dyn Hold>, KeptError> {
        self.hold.as_mut().ok_or_else(|| KeptError::Fenced {
            id: self.record.id.clone(),
        })
    }

    /// Whether another node took the run (this one's lease ran out): it must stop working it.
    pub fn lost(&self) -> bool {
        self.hold.as_ref().is_none_or(|h| h.lost())
    }

    /// Readies the agents `resume` names to run again: their state back to starting.
    pub async fn resuming(&mut self, resume: &BTreeMap<usize, Resume>) -> Result<(), KeptError> {
        for i in resume.keys() {
            if let Some(a) = self.record.agents.get_mut(*i) {
                a.status = AgentStatus::default();
                a.summary = None;
            }
        }
        let record = self.record.clone();
        self.hold()?.write(&record).await
    }

    /// Records that the run could not start at all, and why.
    pub async fn fail(&mut self, why: &str) -> Result<(), KeptError> {
        self.record.fail(why);
        let record = self.record.clone();
        self.hold()?.write(&record).await
    }

    /// Keeps one event: appended to the log, and the record rewritten when it changed.
    pub async fn take(&mut self, event: &RunEvent) -> Result<(), KeptError> {
        if let RunEvent::Started { session, .. } = event {
            self.store
                .backend
                .index_session(session, &self.record.id)
                .await;
        }
        let summary = matches!(event, RunEvent::Summary { .. });
        let node = self.store.node.clone();
        let changed = self.record.take(event, &node);
        let hold = self.hold()?;
        hold.append(event, summary).await?;
        if changed {
            let record = self.record.clone();
            self.hold()?.write(&record).await?;
        }
        Ok(())
    }

    /// Writes what was held back (pieces of answers), for watchers elsewhere.
    pub async fn flush(&mut self) -> Result<(), KeptError> {
        self.hold()?.flush().await
    }

    /// The stops, tells and answers queued since the last look, taken: tells in the order
    /// they came, each agent's index and text.
    pub async fn requests(&mut self) -> Requests {
        let mut taken = Requests::default();
        let Ok(hold) = self.hold() else {
            return taken;
        };
        for request in hold.requests().await {
            match request {
                Request::Stop(s) => taken.stops.push(s),
                Request::Tell { agent, text } => taken.tells.push((agent, text)),
                Request::Answer {
                    agent,
                    question,
                    answer,
                } => taken.answers.push((agent, question, answer)),
            }
        }
        taken
    }

    /// Lets the run go, so another may take it at once (a lease given back); the record is
    /// as it was last written.
    pub async fn release(&mut self) {
        if let Some(hold) = self.hold.take() {
            hold.release().await;
        }
    }
}

/// The process supervising `record`, which runs; refused otherwise.
fn supervisor_of(record: &RunRecord) -> Result<u32, KeptError> {
    match (record.state, record.supervisor) {
        (RunState::Running, Some(pid)) => Ok(pid),
        (state, _) => Err(KeptError::NotRunning {
            id: record.id.clone(),
            state,
        }),
    }
}

/// Refuses to tell agent `i` more once its work was merged or discarded.
fn closed(id: &RunId, i: usize, a: &AgentRecord) -> Result<(), KeptError> {
    match a.outcome {
        Some(outcome) if outcome.is_closed() => Err(KeptError::AgentClosed {
            id: id.clone(),
            agent: i + 1,
            outcome,
        }),
        _ => Ok(()),
    }
}

/// The agent a tell names: `agent` (0-based) when the run has it, else the only one; one
/// with no session yet has no one to tell.
fn which_agent(id: &RunId, record: &RunRecord, agent: Option<usize>) -> Result<usize, KeptError> {
    let count = record.agents.len();
    let i = match agent {
        Some(i) if i < count => i,
        Some(i) => {
            return Err(KeptError::NoSuchAgent {
                id: id.clone(),
                agent: i + 1,
                count,
            });
        }
        None if count == 1 => 0,
        None => {
            return Err(KeptError::WhichAgent {
                id: id.clone(),
                count,
            });
        }
    };
    if record.agents[i].session.is_none() {
        return Err(KeptError::NeverStarted {
            id: id.clone(),
            agent: i + 1,
        });
    }
    Ok(i)
}

#[cfg(test)]
impl StoredRequest {
    /// A run of one berth agent in a workspace `w`, for tests.
    pub(crate) fn one_agent(task: &str) -> StoredRequest {
        StoredRequest {
            task: task.into(),
            repository: None,
            workspace: Some("w".into()),
            agents: vec![crate::AgentSpec::Berth { model: None }],
            name: None,
            allow: vec![],
            allow_all: false,
            check: None,
            check_timeout_secs: 1,
            agent_writable: vec![],
            push: false,
            budget: Default::default(),
            pool: None,
            ask_timeout_secs: None,
        }
    }
}

/// The conformance suite of kept runs: every rule of [`RunStore`] held on each backend
/// (files, SQLite, Postgres). The Postgres tests need the server `test.sh` starts, and fail
/// without it.
#[cfg(test)]
mod conformance {
    use super::*;

    /// A lease short enough for a test to see it lapse.
    const LEASE_SECS: &str = "1";

    struct Place {
        _home: tempfile::TempDir,
        ops: Ops,
    }

    fn place(url: Option<String>) -> Place {
        let home = tempfile::tempdir().unwrap();
        let mut env = vec![("BERTH_POOL__LEASE_SECS".to_owned(), LEASE_SECS.to_owned())];
        if let Some(url) = url {
            env.push(("BERTH_STORE_URL".to_owned(), url));
        }
        let ops = berth_ops::open(home.path(), &env).unwrap();
        Place { _home: home, ops }
    }

    fn sqlite(home: &Path) -> String {
        format!("sqlite://{}", home.join("berth.db").display())
    }

    async fn each_backend(test: impl AsyncFn(RunStore, &'static str)) {
        let files = place(None);
        test(RunStore::open(&files.ops).await.unwrap(), "files").await;
        let dir = tempfile::tempdir().unwrap();
        let lite = place(Some(sqlite(dir.path())));
        test(RunStore::open(&lite.ops).await.unwrap(), "sqlite").await;
        let pg = place(Some(berth_testkit::postgres::fresh_database().await));
        test(RunStore::open(&pg.ops).await.unwrap(), "postgres").await;
    }

    fn started(session: &str) -> RunEvent {
        RunEvent::Started {
            agent: 0,
            label: "berth".into(),
            workspace: "ws-1".into(),
            workspace_name: "w-1".into(),
            session: session.into(),
            worktree: "/nowhere".into(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_is_found_listed_and_resolved() {
        each_backend(async |store, name| {
            let a = store
                .create(StoredRequest::one_agent("first"))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            let b = store
                .create(StoredRequest::one_agent("second"))
                .await
                .unwrap();
            assert_eq!(a.state, RunState::Starting, "{name}");
            let listed: Vec<String> = store
                .list()
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.unwrap().request.task)
                .collect();
            assert_eq!(listed, ["second", "first"], "{name}: newest first");
            assert_eq!(store.resolve(a.id.as_str()).await.unwrap(), a.id, "{name}");
            assert_eq!(store.resolve(&b.id.as_str()[..8]).await.unwrap(), b.id);
            assert!(matches!(
                store.resolve("abcdef012345").await,
                Err(KeptError::NotFound(_))
            ));
            assert!(matches!(
                store.resolve("../etc").await,
                Err(KeptError::BadId(_))
            ));
            // Just made: starting, not failed, though no supervisor holds it yet.
            assert_eq!(store.load(&a.id).await.unwrap().state, RunState::Starting);

            // Pages, newest first: each cut where the one before ended, none twice.
            let c = store
                .create(StoredRequest::one_agent("third"))
                .await
                .unwrap();
            let first = store.page(2, None).await.unwrap();
            let tasks = |p: &RunPage| -> Vec<String> {
                p.runs
                    .iter()
                    .map(|r| r.as_ref().unwrap().request.task.clone())
                    .collect()
            };
            assert_eq!(tasks(&first), ["third", "second"], "{name}");
            let second = store.page(2, first.next.as_deref()).await.unwrap();
            assert_eq!(tasks(&second), ["first"], "{name}");
            assert_eq!(second.next, None, "{name}: the last page says so");
            assert_eq!(store.page(5, None).await.unwrap().runs.len(), 3);
            assert_eq!(first.runs[0].as_ref().unwrap().id, c.id);
            assert!(matches!(
                store.page(2, Some("nonsense")).await,
                Err(KeptError::BadCursor(_))
            ));
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_supervisor_keeps_events_in_order_and_takes_requests() {
        // This process supervises: a request on files signals it, as it would a supervisor.
        let _listening =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1()).unwrap();
        each_backend(async |store, name| {
            let run = store.create(StoredRequest::one_agent("t")).await.unwrap();
            let mut held = store.supervise(&run.id).await.unwrap();
            assert_eq!(store.load(&run.id).await.unwrap().state, RunState::Running);
            // A second supervisor is refused while the first holds the run.
            assert!(
                matches!(store.supervise(&run.id).await, Err(KeptError::Busy { .. })),
                "{name}"
            );
            held.take(&started("s-1")).await.unwrap();
            for n in 0..100 {
                held.take(&RunEvent::Text {
                    agent: 0,
                    text: format!("{n} "),
                })
                .await
                .unwrap();
            }
            held.flush().await.unwrap();
            let (events, cursor) = store.events(&run.id, 0).await.unwrap();
            assert_eq!(events.len(), 101, "{name}");
            let text: String = events
                .iter()
                .filter_map(|e| match e {
                    RunEvent::Text { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            assert!(
                text.starts_with("0 1 2 ") && text.ends_with("98 99 "),
                "{name}"
            );
            let (more, again) = store.events(&run.id, cursor).await.unwrap();
            assert!(
                more.is_empty() && again == cursor,
                "{name}: read on from the cursor"
            );
            // The node and session are kept, and the session finds its run.
            let kept = store.load(&run.id).await.unwrap();
            assert_eq!(kept.agents[0].session.as_deref(), Some("s-1"));
            assert_eq!(kept.agents[0].node.as_deref(), Some(store.node()));
            let (found, agent) = store.find_session("s-1").await.unwrap().unwrap();
            assert_eq!((found.id, agent), (run.id.clone(), 0), "{name}");
            // A tell and a stop reach the supervisor, in the order they came.
            store.queue_tell(&run.id, None, "one").await.unwrap();
            store.queue_tell(&run.id, Some(0), "two").await.unwrap();
            store
                .request_stop(&run.id, StopRequest::Agent(0))
                .await
                .unwrap();
            // A question waits (`--ask`): an answer finds it, and nothing else is answered.
            assert!(matches!(
                store
                    .queue_answer(&run.id, None, crate::Answer::Allow)
                    .await,
                Err(KeptError::NothingAsked { .. })
            ));
            held.take(&RunEvent::Asked {
                agent: 0,
                question: "q1".into(),
                tool: "write_file".into(),
                description: "write out.txt".into(),
            })
            .await
            .unwrap();
            let (agent, tool) = store
                .queue_answer(&run.id, None, crate::Answer::AllowAlways)
                .await
                .unwrap();
            assert_eq!((agent, tool.as_str()), (0, "write_file"), "{name}");
            let taken = held.requests().await;
            assert_eq!(taken.stops, [StopRequest::Agent(0)], "{name}");
            assert_eq!(
                taken.tells,
                [(0, "one".to_owned()), (0, "two".to_owned())],
                "{name}"
            );
            assert_eq!(
                taken.answers,
                [(0, "q1".to_owned(), crate::Answer::AllowAlways)],
                "{name}"
            );
            let again = held.requests().await;
            assert!(
                again.stops.is_empty() && again.tells.is_empty() && again.answers.is_empty(),
                "{name}: taken once"
            );
            // Over: the summary kept, a resume refused with nothing to resume.
            held.take(&RunEvent::Summary { agents: vec![] })
                .await
                .unwrap();
            held.release().await;
            assert_eq!(store.load(&run.id).await.unwrap().state, RunState::Ended);
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_whose_supervisor_is_gone_is_found_failed() {
        each_backend(async |store, name| {
            let run = store.create(StoredRequest::one_agent("t")).await.unwrap();
            let mut held = store.supervise(&run.id).await.unwrap();
            held.take(&started("s-2")).await.unwrap();
            // Dropped without a word, as a killed process drops it.
            drop(held);
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let record = loop {
                let record = store.load(&run.id).await.unwrap();
                if record.state.is_over() || std::time::Instant::now() > deadline {
                    break record;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            };
            assert_eq!(record.state, RunState::Failed, "{name}");
            assert_eq!(record.agents[0].status.state, AgentState::Failed, "{name}");
            // `run resume` continues it in the session it had.
            let again = store.resumable(&run.id).await.unwrap();
            assert_eq!(again[&0].session, "s-2", "{name}");
            // And a supervisor takes it again.
            let held = store.supervise(&run.id).await.unwrap();
            assert_eq!(held.record().state, RunState::Running, "{name}");
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_corrupt_record_is_an_error_never_missing() {
        // Files only: a database row's record is written by berth alone; the files'
        // are a person's to break.
        let files = place(None);
        let store = RunStore::open(&files.ops).await.unwrap();
        let run = store.create(StoredRequest::one_agent("t")).await.unwrap();
        let path = files
            .ops
            .home()
            .join("runs")
            .join(run.id.as_str())
            .join("run.json");
        std::fs::write(&path, b"{ not json").unwrap();
        assert!(matches!(
            store.load(&run.id).await,
            Err(KeptError::Corrupt { .. })
        ));
        assert_eq!(store.resolve(run.id.as_str()).await.unwrap(), run.id);
        let listed = store.list().await.unwrap();
        assert!(matches!(listed[..], [Err(KeptError::Corrupt { .. })]));
        // Left as it was.
        assert_eq!(std::fs::read(&path).unwrap(), b"{ not json");
    }

    fn pooled(task: &str, node: Option<&str>) -> StoredRequest {
        StoredRequest {
            pool: Some(PoolPlace {
                node: node.map(str::to_owned),
                repo_url: "file:///nowhere.git".into(),
            }),
            ..StoredRequest::one_agent(task)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queued_runs_are_claimed_once_each_by_node() {
        let files = place(None);
        let store = RunStore::open(&files.ops).await.unwrap();
        assert!(matches!(
            store.create(pooled("t", None)).await,
            Err(KeptError::NeedsDatabase)
        ));
        let dir = tempfile::tempdir().unwrap();
        let lite = place(Some(sqlite(dir.path())));
        let pg = place(Some(berth_testkit::postgres::fresh_database().await));
        for (ops, name) in [(&lite.ops, "sqlite"), (&pg.ops, "postgres")] {
            let a = RunStore::open(ops).await.unwrap().with_node("a");
            let b = RunStore::open(ops).await.unwrap().with_node("b");
            let any = a.create(pooled("any", None)).await.unwrap();
            assert_eq!(any.state, RunState::Queued, "{name}");
            let for_b = a.create(pooled("for b", Some("b"))).await.unwrap();
            // Queued is not failed, however long nobody holds it.
            assert_eq!(a.load(&any.id).await.unwrap().state, RunState::Queued);
            // `a` may take only the unpinned one; `b` then the one pinned to it.
            let got = a.claim(4).await.unwrap().expect("a claims");
            assert_eq!(got.record().id, any.id, "{name}");
            assert!(a.claim(4).await.unwrap().is_none(), "{name}");
            let got_b = b.claim(4).await.unwrap().expect("b claims");
            assert_eq!(got_b.record().id, for_b.id, "{name}");
            assert!(
                b.claim(4).await.unwrap().is_none(),
                "{name}: each taken once"
            );
            // A run larger than the room left waits.
            let mut wide = pooled("wide", None);
            wide.agents = vec![crate::AgentSpec::Berth { model: None }; 3];
            let wide = a.create(wide).await.unwrap();
            assert!(b.claim(2).await.unwrap().is_none(), "{name}");
            assert_eq!(b.claim(3).await.unwrap().unwrap().record().id, wide.id);
            drop((got, got_b));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_node_whose_lease_lapsed_is_fenced_out() {
        let pg = place(Some(berth_testkit::postgres::fresh_database().await));
        let a = RunStore::open(&pg.ops).await.unwrap().with_node("a");
        let b = RunStore::open(&pg.ops).await.unwrap().with_node("b");
        let run = a.create(pooled("t", None)).await.unwrap();
        let mut first = a.claim(1).await.unwrap().unwrap();
        first.take(&started("s-3")).await.unwrap();
        // `a` stops renewing (a frozen or cut-off node): its lease lapses, `b` takes over.
        drop(first.hold.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut second = loop {
            if let Some(s) = b.claim(1).await.unwrap() {
                break s;
            }
            assert!(std::time::Instant::now() < deadline, "never taken over");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // A queued run's lapsed hold is not a failure: it stays for the next worker.
        assert_eq!(second.record().state, RunState::Running);
        assert_eq!(second.record().agents[0].session.as_deref(), Some("s-3"));
        second.take(&started("s-4")).await.unwrap();
        // The old holder, back, writes nothing: every write of its fence (the first) is
        // refused, and its supervision says it lost the run.
        assert!(first.lost());
        assert!(matches!(
            first.take(&started("s-x")).await,
            Err(KeptError::Fenced { .. })
        ));
        let db = a.db.clone().unwrap();
        let stale = db
            .runs
            .write(run.id.as_str(), 1, "failed", "{}")
            .await
            .unwrap();
        assert!(!stale, "a write of the old fence landed");
        let appended = db
            .runs
            .append(run.id.as_str(), 1, &["{}".to_owned()])
            .await
            .unwrap();
        assert!(!appended, "an event of the old fence landed");
        let now = a.load(&run.id).await.unwrap();
        assert_eq!(now.agents[0].session.as_deref(), Some("s-4"));
        assert_eq!(now.agents[0].node.as_deref(), Some("b"));
    }
}
