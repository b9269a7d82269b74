//! Runs kept on disk, so that a run outlives the terminal that started it (`berth run
//! --detach`), can be looked at and stopped from another one, and is found failed, never
//! "working" forever, after its supervisor or the machine died.
//!
//! Each run has a folder `<home>/runs/<id>/`:
//! - `run.json`: the [`RunRecord`] (the request, each agent's workspace, session and state),
//!   written only by the run's supervisor, atomically and durably, on every event but the
//!   answer's text (which the sessions' transcripts keep);
//! - `events.jsonl`: every [`RunEvent`] as it came, one JSON object per line (what `run logs`
//!   shows and follows); appended without an fsync each: a log to watch, not the record;
//! - `lock`: held (an exclusive `flock`) by the supervisor for as long as it lives. The kernel
//!   drops it when the process dies, however it dies, so "is the run still running?" is "is
//!   its lock held?", which a reused pid or a reboot cannot fool. Only a supervisor ever
//!   takes it: a reader asks the kernel's table of locks whether someone holds it, so that
//!   readers polling a run (`run wait`, a page) never make a new supervisor wait or give up;
//! - `record.lock`: held for a moment by whoever writes `run.json` on the run's behalf when
//!   its supervisor is gone (a reader that finds a run not over and its lock free records it
//!   failed, [`RunStore::load`]), and by a supervisor taking the run: the two never write
//!   over each other;
//! - `stop`, `stop-<N>`: a request to stop the run or its agent N, which the supervisor takes
//!   when `SIGUSR1` (or its next poll) tells it to look.
//!
//! Runs are this machine's processes, so they are kept under the home whichever store holds
//! the workspaces and sessions.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_ops::{ErrorKind, Repository};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    AgentSpec, AgentState, AgentStatus, AgentSummary, Policy, Resume, RunEvent, RunRequest,
};

/// How long a run recorded but not yet taken by its supervisor counts as starting, not failed.
const STARTING_GRACE: Duration = Duration::from_secs(30);

/// How long [`RunStore::supervise`] waits for the lock of a supervisor that is ending.
const LOCK_PATIENCE: Duration = Duration::from_secs(3);

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
        }
    }
}

/// Where a run is as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
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
}

/// A run as kept in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: RunId,
    pub created_at: DateTime<Utc>,
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
            })
            .collect();
        RunRecord {
            id,
            created_at: Utc::now(),
            ended_at: None,
            state: RunState::Starting,
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
                    },
                ))
            })
            .collect()
    }

    /// Takes in one event; whether the record changed in a way worth writing (the answer's
    /// text is not kept here).
    fn take(&mut self, event: &RunEvent) -> bool {
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
                a.node = Some(berth_ops::notices::node_name());
            }
            RunEvent::AgentSession { id, .. } => a.acp_session = Some(id.clone()),
            _ => {}
        }
        a.status.apply(event);
        true
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
    #[error("run {id} has no agent {agent}: it has {count}")]
    NoSuchAgent {
        id: RunId,
        agent: usize,
        count: usize,
    },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl KeptError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            KeptError::BadId(_)
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
            | KeptError::NeverStarted { .. } => ErrorKind::Refused,
            KeptError::Io { .. } => ErrorKind::Io,
        }
    }
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> KeptError + '_ {
    move |source| KeptError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The runs of one home.
#[derive(Debug, Clone)]
pub struct RunStore {
    root: PathBuf,
}

impl RunStore {
    /// The runs under `home` (`<home>/runs`).
    pub fn new(home: &Path) -> RunStore {
        RunStore {
            root: home.join("runs"),
        }
    }

    fn dir(&self, id: &RunId) -> PathBuf {
        self.root.join(id.as_str())
    }

    fn record_path(&self, id: &RunId) -> PathBuf {
        self.dir(id).join("run.json")
    }

    /// The run's event log, one JSON [`RunEvent`] per line.
    pub fn events_path(&self, id: &RunId) -> PathBuf {
        self.dir(id).join("events.jsonl")
    }

    /// Where a detached supervisor's own output goes.
    pub fn log_path(&self, id: &RunId) -> PathBuf {
        self.dir(id).join("supervisor.log")
    }

    /// Records a new run, starting.
    pub fn create(&self, request: StoredRequest) -> Result<RunRecord, KeptError> {
        fs::create_dir_all(&self.root).map_err(io_at(&self.root))?;
        let id = loop {
            let id = RunId::generate();
            match fs::create_dir(self.dir(&id)) {
                Ok(()) => break id,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_at(&self.root)(e)),
            }
        };
        let record = RunRecord::new(id, request);
        self.write(&record)?;
        Ok(record)
    }

    /// The run an id or a prefix of one (4 digits or more) names.
    pub fn resolve(&self, identifier: &str) -> Result<RunId, KeptError> {
        let id = RunId::try_from(identifier.to_ascii_lowercase())?;
        if self.record_path(&id).exists() {
            return Ok(id);
        }
        if id.as_str().len() >= 4 {
            let mut found: Vec<String> = self
                .ids()?
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

    fn ids(&self) -> Result<Vec<RunId>, KeptError> {
        let entries = match fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_at(&self.root)(e)),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_at(&self.root))?;
            // Anything else in the folder (a person's notes) is not a run.
            if let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|n| RunId::try_from(n.to_owned()).ok())
                && entry.path().join("run.json").exists()
            {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Every run, newest first; a run whose record cannot be read is an error in its place.
    pub fn list(&self) -> Result<Vec<Result<RunRecord, KeptError>>, KeptError> {
        let mut runs: Vec<Result<RunRecord, KeptError>> =
            self.ids()?.iter().map(|id| self.load(id)).collect();
        runs.sort_by(|a, b| match (a, b) {
            (Ok(a), Ok(b)) => b.created_at.cmp(&a.created_at),
            (Ok(_), Err(_)) => std::cmp::Ordering::Less,
            (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
            (Err(_), Err(_)) => std::cmp::Ordering::Equal,
        });
        Ok(runs)
    }

    /// The kept run one of whose agents works in session `session`, and that agent's index;
    /// the newest, should two have (a run resumed in the same session is the same run).
    pub fn find_session(&self, session: &str) -> Result<Option<(RunRecord, usize)>, KeptError> {
        // The index the supervisor keeps (`run-sessions/<session>`: the run's id), checked
        // against the run it names; else, for runs kept before it, every record looked at.
        if let Some(path) = self.session_index(session)
            && let Ok(text) = fs::read_to_string(&path)
            && let Ok(id) = RunId::try_from(text.trim().to_owned())
            && let Ok(run) = self.read(&id)
            && let Some(i) = run
                .agents
                .iter()
                .position(|a| a.session.as_deref() == Some(session))
        {
            return Ok(Some((self.load(&id)?, i)));
        }
        let found = self.scan_for_session(session)?;
        if let Some((run, _)) = &found {
            self.index_session(session, &run.id);
        }
        Ok(found)
    }

    /// Where the index names the run of `session`; `None` for a session id that cannot be a
    /// file's name.
    fn session_index(&self, session: &str) -> Option<PathBuf> {
        berth_ops::SessionId::new(session).ok()?;
        Some(self.sessions_dir().join(session))
    }

    /// The index of sessions to runs: beside `runs/`, which holds one folder per run only.
    fn sessions_dir(&self) -> PathBuf {
        self.root.with_file_name("run-sessions")
    }

    /// Keeps `id` as the run of `session`, for [`RunStore::find_session`]; an index that
    /// cannot be written is only slower to find.
    fn index_session(&self, session: &str, id: &RunId) {
        if let Some(path) = self.session_index(session) {
            let _ = fs::create_dir_all(self.sessions_dir());
            let _ = berth_confined::write_atomic(&path, id.as_str().as_bytes());
        }
    }

    fn scan_for_session(&self, session: &str) -> Result<Option<(RunRecord, usize)>, KeptError> {
        // The records as written, matched first: only the run found is loaded, with the look
        // for a live supervisor `load` makes (MCP asks this at every status poll).
        let mut found: Option<(RunRecord, usize)> = None;
        for id in self.ids()? {
            let Ok(run) = self.read(&id) else { continue };
            let Some(i) = run
                .agents
                .iter()
                .position(|a| a.session.as_deref() == Some(session))
            else {
                continue;
            };
            if found
                .as_ref()
                .is_none_or(|(newest, _)| run.created_at > newest.created_at)
            {
                found = Some((run, i));
            }
        }
        match found {
            Some((run, i)) => Ok(Some((self.load(&run.id)?, i))),
            None => Ok(None),
        }
    }

    /// Where agent `agent` of `record` is in its latest turn, its answer so far included:
    /// the events since its last start folded as every watcher folds them. What a process
    /// that is not the run's supervisor shows. An agent resumed or told, whose new turn has
    /// not started yet, is as the record has it (starting).
    pub fn agent_status(&self, record: &RunRecord, agent: usize) -> Result<AgentStatus, KeptError> {
        let (events, _) = read_events(&self.events_path(&record.id), 0)?;
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

    /// The run as it is: one not over whose supervisor is gone is recorded failed first.
    /// Never takes the supervisor's lock.
    pub fn load(&self, id: &RunId) -> Result<RunRecord, KeptError> {
        let record = self.read(id)?;
        if record.state.is_over() || self.supervised(id)? {
            return Ok(record);
        }
        let _writing = self.record_lock(id)?;
        // Looked at again under the record's lock: a supervisor taking the run now writes
        // after this, and one that took it already is seen.
        let mut record = self.read(id)?;
        let young = Utc::now()
            .signed_duration_since(record.created_at)
            .to_std()
            .is_ok_and(|age| age < STARTING_GRACE);
        if record.state.is_over()
            || (record.state == RunState::Starting && young)
            || self.supervised(id)?
        {
            return Ok(record);
        }
        record.fail(SUPERVISOR_GONE);
        self.write(&record)?;
        Ok(record)
    }

    /// Whether a process holds the run's lock (its supervisor lives), from the kernel's table
    /// of locks. When that table cannot be read, the run counts as supervised: a run is never
    /// recorded failed on a guess.
    fn supervised(&self, id: &RunId) -> Result<bool, KeptError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.dir(id).join("lock");
        let meta = match fs::metadata(&path) {
            Ok(meta) => meta,
            // No lock file: no supervisor ever took the run.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_at(&path)(e)),
        };
        Ok(lock_holders(meta.dev(), meta.ino()).is_none_or(|holders| !holders.is_empty()))
    }

    /// The lock of `run.json`'s writes made on the run's behalf, taken (waiting for the
    /// moment another holds it).
    fn record_lock(&self, id: &RunId) -> Result<File, KeptError> {
        let path = self.dir(id).join("record.lock");
        let file = lock_file(&path)?;
        file.lock().map_err(io_at(&path))?;
        Ok(file)
    }

    /// Becomes the run's supervisor: takes its lock (refused while another process holds
    /// it) and records this process as running it.
    pub fn supervise(&self, id: &RunId) -> Result<Supervision, KeptError> {
        let waited = std::time::Instant::now();
        // Only a supervisor that is ending (a resume right after a run ended) holds it: no
        // reader ever does.
        let lock = loop {
            if let Some(lock) = self.try_lock(id)? {
                break lock;
            }
            if waited.elapsed() > LOCK_PATIENCE {
                let pid = self
                    .read(id)?
                    .supervisor
                    .map_or_else(|| "unknown".to_owned(), |p| p.to_string());
                return Err(KeptError::Busy {
                    id: id.clone(),
                    pid,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let writing = self.record_lock(id)?;
        let mut record = self.read(id)?;
        record.state = RunState::Running;
        record.supervisor = Some(std::process::id());
        record.ended_at = None;
        record.message = None;
        self.write(&record)?;
        drop(writing);
        let path = self.events_path(id);
        let events = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_at(&path))?;
        Ok(Supervision {
            store: self.clone(),
            _lock: lock,
            record,
            events,
        })
    }

    /// The agents `run resume` would continue: refused while the run is not over, or when
    /// none is left to continue.
    pub fn resumable(&self, id: &RunId) -> Result<BTreeMap<usize, Resume>, KeptError> {
        let record = self.load(id)?;
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

    /// Agent `agent` of a run that is over (the only one when `None`), to be told `text` in
    /// its workspace and session (`berth run tell`), whatever way it ended. Refused while the
    /// run is running, and for an agent that never got a session.
    /// Queues `text` for agent `agent` (the only one when `None`) of the running run `id`:
    /// its supervisor tells the agent once its current turn ends, in the same session. The
    /// agent's index. Refused for an agent that has ended already (the run goes on without
    /// it), or one with no session yet.
    pub fn queue_tell(
        &self,
        id: &RunId,
        agent: Option<usize>,
        text: &str,
    ) -> Result<usize, KeptError> {
        let record = self.load(id)?;
        let pid = match (record.state, record.supervisor) {
            (RunState::Running, Some(pid)) => pid,
            (state, _) => {
                return Err(KeptError::NotRunning {
                    id: id.clone(),
                    state,
                });
            }
        };
        let i = which_agent(id, &record, agent)?;
        let a = &record.agents[i];
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
        // Named so that the supervisor takes them in the order they came.
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = self.dir(id).join(format!("tell-{i}-{stamp:032}"));
        berth_confined::write_atomic(&path, text.as_bytes()).map_err(io_at(&path))?;
        self.signal_supervisor(id, pid)?;
        Ok(i)
    }

    pub fn tellable(
        &self,
        id: &RunId,
        agent: Option<usize>,
        text: &str,
    ) -> Result<BTreeMap<usize, Resume>, KeptError> {
        let record = self.load(id)?;
        if !record.state.is_over() {
            return Err(KeptError::StillRunning {
                id: id.clone(),
                state: record.state,
            });
        }
        let i = which_agent(id, &record, agent)?;
        let a = &record.agents[i];
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
            },
        )]))
    }

    /// Asks the run's supervisor to stop the run or one agent: a request file, then
    /// `SIGUSR1`. Refused when the run is not running.
    pub fn request_stop(&self, id: &RunId, what: StopRequest) -> Result<RunRecord, KeptError> {
        let record = self.load(id)?;
        if let StopRequest::Agent(agent) = what
            && agent >= record.agents.len()
        {
            return Err(KeptError::NoSuchAgent {
                id: id.clone(),
                agent: agent + 1,
                count: record.agents.len(),
            });
        }
        let pid = match (record.state, record.supervisor) {
            (RunState::Running, Some(pid)) => pid,
            (state, _) => {
                return Err(KeptError::NotRunning {
                    id: id.clone(),
                    state,
                });
            }
        };
        let name = match what {
            StopRequest::All => "stop".to_owned(),
            StopRequest::Agent(i) => format!("stop-{i}"),
        };
        let path = self.dir(id).join(name);
        berth_confined::write_atomic(&path, b"").map_err(io_at(&path))?;
        // A signal not sent (the supervisor just ended, or the pid is not its) is no loss:
        // the supervisor's poll finds the request file.
        self.signal_supervisor(id, pid)?;
        Ok(record)
    }

    /// Sends `SIGUSR1` to `pid` only when it is the process holding the run's lock. The
    /// process is pinned first (a pidfd), then the kernel's table of locks must name it as
    /// the lock's holder; so a pid the supervisor left and another process took is never
    /// signalled (`SIGUSR1`'s default action would kill it). Whether it was sent.
    fn signal_supervisor(&self, id: &RunId, pid: u32) -> Result<bool, KeptError> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::fs::MetadataExt;
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return Ok(false);
        };
        // SAFETY: pidfd_open takes a pid and no flags, and returns a new descriptor we own.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if raw < 0 {
            return Ok(false);
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
        let path = self.dir(id).join("lock");
        let meta = fs::metadata(&path).map_err(io_at(&path))?;
        if !lock_holders(meta.dev(), meta.ino()).is_some_and(|h| h.contains(&pid)) {
            return Ok(false);
        }
        // SAFETY: a signal to the pinned process; no siginfo, no flags.
        let sent = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                libc::SIGUSR1,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        Ok(sent == 0)
    }

    fn read(&self, id: &RunId) -> Result<RunRecord, KeptError> {
        let path = self.record_path(id);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(KeptError::NotFound(id.to_string()));
            }
            Err(e) => return Err(io_at(&path)(e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| KeptError::Corrupt {
            path,
            reason: e.to_string(),
        })
    }

    fn write(&self, record: &RunRecord) -> Result<(), KeptError> {
        let path = self.record_path(&record.id);
        let mut bytes = serde_json::to_vec_pretty(record).expect("a run record serializes");
        bytes.push(b'\n');
        berth_confined::write_atomic(&path, &bytes).map_err(io_at(&path))
    }

    /// The run's lock if no one holds it; `None` while its supervisor lives.
    fn try_lock(&self, id: &RunId) -> Result<Option<File>, KeptError> {
        let path = self.dir(id).join("lock");
        let file = lock_file(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(io_at(&path)(e)),
        }
    }
}

/// A lock file of a run, opened (made when missing), not yet locked.
fn lock_file(path: &Path) -> Result<File, KeptError> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io_at(path))
}

/// The processes holding a `flock` on the file of device `dev` and inode `ino`, from
/// `/proc/locks` (`1: FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF`; a waiter's
/// line has `->` and holds nothing); `None` when the table cannot be read.
///
/// The kernel writes the table in pieces, and a lock taken or let go elsewhere meanwhile can
/// make a piece skip an entry or repeat one; so an empty answer is asked again, a few times,
/// before it is believed (a repeated entry names the same holder).
fn lock_holders(dev: u64, ino: u64) -> Option<Vec<libc::pid_t>> {
    let file = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    let mut holders = Vec::new();
    for _ in 0..5 {
        let table = fs::read_to_string("/proc/locks").ok()?;
        holders = table
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                match fields.as_slice() {
                    [_, "FLOCK", _, _, pid, at, ..] if *at == file => pid.parse().ok(),
                    _ => None,
                }
            })
            .collect();
        if !holders.is_empty() {
            break;
        }
    }
    Some(holders)
}

/// A run's supervisor's hold on it: the lock, the record it keeps, and the event log.
pub struct Supervision {
    store: RunStore,
    _lock: File,
    record: RunRecord,
    events: File,
}

impl Supervision {
    pub fn record(&self) -> &RunRecord {
        &self.record
    }

    /// Readies the agents `resume` names to run again: their state back to starting.
    pub fn resuming(&mut self, resume: &BTreeMap<usize, Resume>) -> Result<(), KeptError> {
        for i in resume.keys() {
            if let Some(a) = self.record.agents.get_mut(*i) {
                a.status = AgentStatus::default();
                a.summary = None;
            }
        }
        self.store.write(&self.record)
    }

    /// Records that the run could not start at all, and why.
    pub fn fail(&mut self, why: &str) -> Result<(), KeptError> {
        self.record.fail(why);
        self.store.write(&self.record)
    }

    /// Keeps one event: appended to the log, and the record rewritten when it changed.
    pub fn take(&mut self, event: &RunEvent) -> Result<(), KeptError> {
        if let RunEvent::Started { session, .. } = event {
            self.store.index_session(session, &self.record.id);
        }
        let mut line = serde_json::to_vec(event).expect("a run event serializes");
        line.push(b'\n');
        let path = self.store.events_path(&self.record.id);
        self.events.write_all(&line).map_err(io_at(&path))?;
        if self.record.take(event) {
            if matches!(event, RunEvent::Summary { .. }) {
                self.events.sync_data().map_err(io_at(&path))?;
            }
            self.store.write(&self.record)?;
        }
        Ok(())
    }

    /// The tells queued since the last look (`RunStore::queue_tell`), taken in the order
    /// they came: each agent's index and text.
    pub fn tell_requests(&self) -> Vec<(usize, String)> {
        let dir = self.store.dir(&self.record.id);
        let Ok(entries) = fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut found: Vec<(String, usize, PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let (agent, _) = name.strip_prefix("tell-")?.split_once('-')?;
                let agent = agent.parse().ok()?;
                Some((name, agent, e.path()))
            })
            .collect();
        found.sort();
        found
            .into_iter()
            .filter_map(|(_, agent, path)| {
                let text = fs::read_to_string(&path).ok()?;
                fs::remove_file(&path).ok()?;
                Some((agent, text))
            })
            .collect()
    }

    /// The stop requests made since the last look, taken (their files removed).
    pub fn stop_requests(&self) -> Vec<StopRequest> {
        let dir = self.store.dir(&self.record.id);
        let Ok(entries) = fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut requests = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let request = match name {
                "stop" => StopRequest::All,
                _ => match name.strip_prefix("stop-").and_then(|n| n.parse().ok()) {
                    Some(i) => StopRequest::Agent(i),
                    None => continue,
                },
            };
            if fs::remove_file(entry.path()).is_ok() {
                requests.push(request);
            }
        }
        requests
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

/// Reads a run's event log from `offset`: the whole events after it, and the offset after
/// the last whole line (a line being written is read next time).
pub fn read_events(path: &Path, offset: u64) -> Result<(Vec<RunEvent>, u64), KeptError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), offset)),
        Err(e) => return Err(io_at(path)(e)),
    };
    file.seek(SeekFrom::Start(offset)).map_err(io_at(path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_at(path))?;
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut events = Vec::new();
    for (n, line) in bytes[..whole].split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let event = serde_json::from_slice(line).map_err(|e| KeptError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("event {} after byte {offset}: {e}", n + 1),
        })?;
        events.push(event);
    }
    Ok((events, offset + whole as u64))
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run stop` read the supervisor's pid and sent it SIGUSR1, whose default action kills:
    /// a process that took the pid of a supervisor gone (here, one that never held the lock)
    /// was killed. Only the lock's holder is signalled now.
    fn new_run(store: &RunStore) -> RunRecord {
        store.create(StoredRequest::one_agent("t")).unwrap()
    }

    /// `load` took the supervisor's lock to see whether a supervisor lived: readers polling
    /// a run held it much of the time, so a supervisor taking the run waited, or gave up
    /// "busy". Readers now ask the kernel's table of locks.
    #[test]
    fn readers_never_take_the_supervisors_lock() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let store = RunStore::new(tmp.path());
        // Just made, not yet taken: a reader looks for its supervisor on every load.
        let record = new_run(&store);
        std::fs::File::create(store.dir(&record.id).join("lock")).unwrap();
        let meta = std::fs::metadata(store.dir(&record.id).join("lock")).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (store, id, stop) = (store.clone(), record.id.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut loads = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        // Never recorded failed under a supervisor taking it.
                        let state = store.load(&id).unwrap().state;
                        assert!(matches!(state, RunState::Starting | RunState::Running));
                        loads += 1;
                    }
                    loads
                })
            })
            .collect();
        let started = std::time::Instant::now();
        let mut looks = 0;
        while started.elapsed() < Duration::from_millis(700) {
            let holders = lock_holders(meta.dev(), meta.ino()).unwrap();
            assert!(holders.is_empty(), "a reader held the run's lock");
            looks += 1;
        }
        // A supervisor takes the run at once, however busy its readers are.
        let taking = std::time::Instant::now();
        let supervision = store.supervise(&record.id).unwrap();
        assert!(taking.elapsed() < Duration::from_millis(500));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let loads: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
        assert!(loads > 100 && looks > 100, "{loads} loads, {looks} looks");
        assert_eq!(store.load(&record.id).unwrap().state, RunState::Running);
        drop(supervision);
        // Its supervisor gone, the next reader records the run failed.
        assert_eq!(store.load(&record.id).unwrap().state, RunState::Failed);
    }

    #[test]
    fn stop_signals_no_process_but_the_locks_holder() {
        let tmp = tempfile::tempdir().unwrap();
        let store = RunStore::new(tmp.path());
        let record = new_run(&store);
        let mut bystander = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // The run's lock is held (as a live supervisor holds it), by this process.
        let _held = store
            .try_lock(&record.id)
            .unwrap()
            .expect("the lock is free");
        let mut running = store.read(&record.id).unwrap();
        running.state = RunState::Running;
        running.supervisor = Some(bystander.id());
        store.write(&running).unwrap();

        store
            .request_stop(&record.id, StopRequest::All)
            .expect("the request is written");
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            bystander.try_wait().unwrap().is_none(),
            "a process that does not hold the run's lock was signalled"
        );
        assert!(store.dir(&record.id).join("stop").exists());
        // The holder is found where the kernel keeps it.
        let meta = std::fs::metadata(store.dir(&record.id).join("lock")).unwrap();
        use std::os::unix::fs::MetadataExt;
        // (Under CI the table once listed this process twice for the one lock; every entry
        // must be this process.)
        let holders = lock_holders(meta.dev(), meta.ino()).unwrap();
        assert!(
            !holders.is_empty()
                && holders
                    .iter()
                    .all(|p| *p == std::process::id() as libc::pid_t),
            "{holders:?}"
        );
        bystander.kill().unwrap();
        bystander.wait().unwrap();
    }
}
