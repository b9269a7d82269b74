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

mod backend;
mod batch;
#[cfg(test)]
mod conformance;
mod db;
mod error;
mod files;
mod record;
mod supervision;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use berth_ops::Ops;
use chrono::Utc;

use crate::event::AgentStatus;
use crate::event::RunEvent;
use crate::request::Resume;
pub(crate) use files::lock_holders;
use files::read_events;

pub(crate) use backend::{Decide, Hold, Request, RunBackend};
pub use batch::{BatchId, BatchPlace, batch_runs, resolve_batch};
pub use error::KeptError;
pub use record::{
    AgentOutcome, AgentRecord, MergeRecord, PoolPlace, Review, ReviewStage, RunId, RunRecord,
    RunState, StopRequest, StoredRequest,
};
pub use supervision::{Requests, Supervision, Tell};

/// How long a run recorded but not yet taken by its supervisor counts as starting, not failed.
const STARTING_GRACE: Duration = Duration::from_secs(30);

/// Why a run's agents failed when its supervisor died under them.
const SUPERVISOR_GONE: &str = "the run's supervisor stopped before it ended (it was killed, or the machine restarted); its workspaces and transcripts are kept, and `berth run resume` continues it";

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

    /// Where agent `agent`'s (0-based) check output is kept (its first 64 KiB and last MiB),
    /// on the machine that ran it, as its standard error is.
    pub fn check_path(&self, id: &RunId, agent: usize) -> PathBuf {
        self.run_dir(id).join(check_log_name(agent))
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

    /// The run an id or a prefix of one (`berth_ops::MIN_PREFIX` digits or more) names.
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
        let mut ids: Vec<String> = self
            .backend
            .ids()
            .await?
            .into_iter()
            .map(String::from)
            .collect();
        ids.sort();
        match berth_ops::named_by_id(id.as_str(), ids, |i| i.as_str()) {
            berth_ops::Named::One(one) => Ok(RunId(one)),
            berth_ops::Named::Several(ids) => Err(KeptError::Ambiguous {
                prefix: identifier.to_owned(),
                ids,
            }),
            berth_ops::Named::Nothing => Err(KeptError::NotFound(identifier.to_owned())),
        }
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

    /// A page of the runs waiting for review (over, nothing picked or discarded: `run list
    /// --review`), newest first, after `cursor`: pages are read until `limit` such runs are
    /// found, since a page of the newest runs may hold none. A run whose record cannot be
    /// read is an error in its place, never left out. The cursor follows the last run kept.
    pub async fn review_page(
        &self,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<RunPage, KeptError> {
        let limit = limit.clamp(1, berth_ops::PAGE_MAX);
        let mut runs: Vec<Result<RunRecord, KeptError>> = Vec::new();
        let mut cursor = cursor.map(str::to_owned);
        let next_after = |runs: &[Result<RunRecord, KeptError>]| {
            runs.iter()
                .rev()
                .find_map(|r| r.as_ref().ok())
                .map(|r| PageCursor::of(r).to_string())
        };
        loop {
            let page = self.page(limit, cursor.as_deref()).await?;
            for run in page.runs {
                if matches!(&run, Ok(r) if r.review().stage != ReviewStage::Review) {
                    continue;
                }
                if runs.len() == limit {
                    let next = next_after(&runs);
                    return Ok(RunPage { runs, next });
                }
                runs.push(run);
            }
            if page.next.is_none() {
                return Ok(RunPage { runs, next: None });
            }
            if runs.len() == limit {
                let next = next_after(&runs);
                return Ok(RunPage { runs, next });
            }
            cursor = page.next;
        }
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
    /// not started yet, is as the record has it (starting); one the record has ended (failed
    /// by a supervisor that went away) is ended; one still working has worked since the run
    /// was made.
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
        if let Some(kept) = kept {
            if !kept.state.is_final() && status.state.is_final() {
                return Ok(kept.clone());
            }
            // What only the record knows: an agent failed by a supervisor that went away.
            if kept.state.is_final() && !status.state.is_final() {
                status.state = kept.state;
                status.stop = kept.stop.clone();
                status.message = kept.message.clone();
            }
        }
        if status.stop.is_none() {
            let so_far = Utc::now() - record.created_at;
            status.elapsed_ms = u64::try_from(so_far.num_milliseconds()).unwrap_or(0);
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
    pub(crate) async fn listen(&self) -> Result<Option<berth_store_sql::RunsListener>, KeptError> {
        match &self.db {
            Some(db) => db
                .runs
                .listen()
                .await
                .map_err(|e| KeptError::Store(e.into())),
            None => Err(KeptError::NeedsDatabase),
        }
    }

    /// A listener woken, with the run's id, when a run is queued or its record or events
    /// change, on a database that can (Postgres); `None` elsewhere, where a follower reads
    /// again after a while.
    pub(crate) async fn listen_changes(
        &self,
    ) -> Result<Option<berth_store_sql::RunsListener>, KeptError> {
        match &self.db {
            Some(db) => db
                .runs
                .listen_changes()
                .await
                .map_err(|e| KeptError::Store(e.into())),
            None => Ok(None),
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

    /// Queues `text` for agent `agent` (the only one when `None`) of run `id` if it is
    /// running: its supervisor passes it on, and the agent takes it at its next step (berth's
    /// own agent, beside the step's tool results), else as its next prompt once its current
    /// turn ends (an ACP agent, in the same process), in the same session. With `now`
    /// (`berth run tell --now`) the agent's current turn alone is cut first, and it goes on
    /// with `text`, then with what was queued before. The agent's index; `None` when the run
    /// is not running (over, or not yet taken), for the caller to start a told turn instead.
    /// Refused for an agent that has ended already (the run goes on without it), or one with
    /// no session yet.
    pub(crate) async fn queue_tell_if_running(
        &self,
        id: &RunId,
        agent: Option<usize>,
        text: &str,
        now: bool,
    ) -> Result<Option<usize>, KeptError> {
        match self.queue_telling(id, agent, text, now).await {
            Ok(agent) => Ok(Some(agent)),
            Err(KeptError::NotRunning { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn queue_telling(
        &self,
        id: &RunId,
        agent: Option<usize>,
        text: &str,
        now: bool,
    ) -> Result<usize, KeptError> {
        let record = self.load(id).await?;
        let pid = supervisor_of(&record)?;
        let i = which_agent(id, &record, agent)?;
        let a = &record.agents[i];
        closed(id, i, a)?;
        if a.status.state.is_final() {
            return Err(KeptError::AgentEnded {
                id: id.clone(),
                agent: i + 1,
            });
        }
        let request = Request::Tell {
            agent: i,
            text: text.to_owned(),
            now,
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
        answer: crate::ask::Answer,
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
        answer: crate::ask::Answer,
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

    /// Waits until run `id` is over, looking four times a second: its record then.
    pub async fn wait(&self, id: &RunId) -> Result<RunRecord, KeptError> {
        loop {
            let record = self.load(id).await?;
            if record.state.is_over() {
                return Ok(record);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Asks the run to stop (`what`, as [`RunStore::request_stop`]), then waits, at most
    /// `within`, to see what it asked for stopped: the record as last read.
    pub async fn stop_and_wait(
        &self,
        id: &RunId,
        what: StopRequest,
        within: Duration,
    ) -> Result<RunRecord, KeptError> {
        self.request_stop(id, what).await?;
        let asked = std::time::Instant::now();
        loop {
            let record = self.load(id).await?;
            let stopped = match what {
                StopRequest::All => record.agents.iter().all(|a| a.status.state.is_final()),
                StopRequest::Agent(i) => record
                    .agents
                    .get(i)
                    .is_none_or(|a| a.status.state.is_final()),
            };
            if stopped || record.state.is_over() || asked.elapsed() > within {
                return Ok(record);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
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

    /// Deletes the record of run `id`, which must be over, with its events and (on this
    /// machine) its folder of kept output. Refused while a supervisor holds it.
    pub async fn delete(&self, id: &RunId) -> Result<(), KeptError> {
        let record = self.load(id).await?;
        if !record.state.is_over() {
            return Err(KeptError::StillRunning {
                id: id.clone(),
                state: record.state,
            });
        }
        if !self.backend.delete_unsupervised(id).await? {
            let now = self.load(id).await?;
            return Err(KeptError::StillRunning {
                id: id.clone(),
                state: now.state,
            });
        }
        // On a database, what only this machine kept of it (standard error, checks' output).
        if self.db.is_some() {
            let dir = self.run_dir(id);
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(KeptError::Io { path: dir, source }),
            }
        }
        Ok(())
    }

    /// Records what was done with agent `agent`'s work. Refused while the run is supervised
    /// (its supervisor writes the record then): finish a run once it is over.
    pub async fn set_outcome(
        &self,
        id: &RunId,
        agent: usize,
        outcome: AgentOutcome,
    ) -> Result<RunRecord, KeptError> {
        self.change_agent(id, agent, move |a| a.outcome = Some(outcome))
            .await
    }

    /// Changes what is recorded of agent `agent`'s work once the run is over (its outcome,
    /// its lost ref, its merge), and nothing else of the run. Refused while the run is
    /// supervised (its supervisor writes the record then).
    pub async fn change_agent(
        &self,
        id: &RunId,
        agent: usize,
        change: impl Fn(&mut AgentRecord) + Send + Sync + Clone + 'static,
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
        // Whether `change` would still change the agent: compared as written.
        let changes = {
            let change = change.clone();
            move |a: &AgentRecord| {
                let mut changed = a.clone();
                change(&mut changed);
                serde_json::to_value(&changed).ok() != serde_json::to_value(a).ok()
            }
        };
        let decide = {
            let changes = changes.clone();
            move |record: &mut RunRecord| {
                if !record.state.is_over() {
                    return false;
                }
                match record.agents.get_mut(agent) {
                    Some(a) if changes(a) => {
                        change(a);
                        true
                    }
                    _ => false,
                }
            }
        };
        let now = self.backend.write_unsupervised(id, &decide).await?;
        if !now.state.is_over() || now.agents.get(agent).is_none_or(&changes) {
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

/// The file in a run's folder that keeps agent `i`'s (0-based) check output.
pub(crate) fn check_log_name(i: usize) -> String {
    format!("agent-{}.check", i + 1)
}
