//! [`Runs`]: the one way every front end starts, resumes, tells, follows and supervises a kept
//! run. The CLI, MCP's `session_run`, the dashboard, ACP's run questions and the web page
//! translate their own words into these calls and the answers back; none of them chooses the
//! agents' tools, records a run, spawns a supervisor or reads the store on a timer.
//!
//! How a run goes on is said once, by [`How`]: supervised here (the caller drives the
//! [`Supervised`] it is given), in a detached `berth run supervise` process of its own
//! ([`SuperviseArgs`] is that process's command line, written by `detach.rs` and parsed by
//! the CLI), hosted by a server on a task of its own, or queued for a pool's workers.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use berth_agent::{Agent, AgentBuilder, CancellationToken};
use berth_ops::Ops;

use crate::agents::AgentNumber;
use crate::batch::{BatchStart, StartedBatch};
use crate::detach::{Detach, Supervise, SuperviseArgs};
use crate::error::RunError;
use crate::event::RunEvent;
use crate::follow::{Changes, Follow, Questions};
use crate::kept::{KeptError, RunId, RunRecord, RunStore, StoredRequest};
use crate::request::RunRequest;
use crate::supervisor::{Host, Next, Supervised};
use crate::worker::WorkerOptions;

/// The runs of one home, and berth's own agent for them, made once: a front end opens this
/// at its start and asks it for everything a run's life needs.
#[derive(Clone)]
pub struct Runs {
    ops: Ops,
    store: RunStore,
    /// berth's own agent with its built-in tools; an ACP agent of a request is its own.
    agent: Agent,
    /// The berth program a detached supervisor runs: this process's own, unless told.
    program: PathBuf,
}

/// How a run started, resumed or told goes on.
#[derive(Debug, Clone)]
pub enum How {
    /// Supervised by this process: the caller drives the [`Supervised`] it is given (shows
    /// it, stops it on Ctrl-C), and SIGTERM stops the run.
    Here,
    /// In a `berth run supervise` process of its own, which outlives the caller; answered
    /// once that process has taken the run.
    Detached,
    /// Supervised by this server on a task of its own, every event kept and none shown;
    /// `by` names the server in what its log says. The server's SIGTERM is its own.
    Hosted { by: &'static str },
    /// Recorded queued for a pool's workers (start only).
    Queued(Queue),
}

/// Where a queued run is worked from: a repository by a URL every node fetches (`repo`,
/// else the `origin` of the repository holding `from`), pinned to `node` when named.
#[derive(Debug, Clone)]
pub struct Queue {
    pub repo: Option<PathBuf>,
    pub from: PathBuf,
    pub node: Option<String>,
}

/// A run started or resumed.
pub enum Started {
    /// Supervised here: drive it to its end ([`Supervised::next`], then `finish`).
    Here(Box<Supervised>),
    /// In process `supervisor`.
    Detached { record: RunRecord, supervisor: u32 },
    /// Hosted: its agent's first news, `Started` once its session exists, or why the run
    /// ended before (it is still checked, summed up and kept).
    Hosted {
        record: RunRecord,
        first: Result<RunEvent, String>,
    },
    /// Queued for the pool.
    Queued(RunRecord),
}

/// What to tell an agent of a kept run.
#[derive(Debug, Clone, Default)]
pub struct Telling<'a> {
    /// The agent; the run's only one when `None`.
    pub agent: Option<AgentNumber>,
    pub text: &'a str,
    /// Tools the told turn of a run that is over may also use (`run tell --allow`): refused
    /// for a run still running, and for a turn not supervised here or hosted.
    pub allow: &'a [String],
    /// A run still running: its agent's current turn is cut first (`run tell --now`).
    pub now: bool,
}

/// What a tell did.
pub enum Told {
    /// The run is running: the agent (0-based) is told at its next step, or once its
    /// current turn ends (`--now`: its turn was cut).
    Queued { agent: usize },
    /// The run was over: the agent's told turn, supervised here.
    Here(Box<Supervised>),
    /// The run was over: the agent's told turn, in process `supervisor`.
    Detached { agent: usize, supervisor: u32 },
    /// The run was over: the agent's told turn, hosted by this server.
    Hosted { agent: usize },
}

impl Runs {
    /// The runs of `ops`'s home, where its records are (files, or the database every node
    /// shares).
    pub async fn open(ops: Ops) -> Result<Runs, RunError> {
        let store = RunStore::open(&ops).await?;
        Ok(Runs::with_store(ops, store))
    }

    /// The runs kept in `store`.
    pub fn with_store(ops: Ops, store: RunStore) -> Runs {
        let agent = AgentBuilder::new(ops.clone())
            .tools(berth_agent::tools::builtin())
            .build();
        let program = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("berth"));
        Runs {
            ops,
            store,
            agent,
            program,
        }
    }

    /// The same runs, with berth's own agent as `agent` makes it (a server's, shared with
    /// its sessions).
    pub fn with_agent(self, agent: Agent) -> Runs {
        Runs { agent, ..self }
    }

    /// The same runs, with detached supervisors run by `program` (a test's, or a front end
    /// that is not the berth binary).
    pub fn with_program(self, program: &Path) -> Runs {
        Runs {
            program: program.to_owned(),
            ..self
        }
    }

    /// The records, for reading (list, show, logs, stop, answer).
    pub fn store(&self) -> &RunStore {
        &self.store
    }

    /// berth's own agent for these runs.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Checks `request` (a key for berth's agent, each agent's command), records it, and
    /// starts it as `how` says. A run that cannot start makes nothing; one queued is checked
    /// as far as this machine can, and the rest where it is taken.
    pub async fn start(&self, request: RunRequest, how: How) -> Result<Started, RunError> {
        if let How::Queued(q) = &how {
            let record = crate::worker::queue(
                &self.ops,
                &self.store,
                request,
                q.repo.as_deref(),
                &q.from,
                q.node.clone(),
            )
            .await?;
            return Ok(Started::Queued(record));
        }
        let request = crate::preflight::preflight(&self.ops, &self.agent, request).await?;
        let record = self.store.create(StoredRequest::of(&request)).await?;
        if let How::Detached = how {
            let supervisor = self.detach(&record.id, Detach::Start).await?;
            return Ok(Started::Detached { record, supervisor });
        }
        self.supervised(&record.id, request, how).await
    }

    /// Continues run `id`'s unfinished agents where they stopped; refused while it runs, or
    /// when every agent finished.
    pub async fn resume(&self, id: &RunId, how: How) -> Result<Started, RunError> {
        // Refused here before anything starts; the agents are then read from the record
        // under the run's lock, as a detached supervisor reads them.
        self.store.resumable(id).await?;
        match how {
            How::Queued(_) => Err(RunError::Ops(berth_ops::Error::invalid(
                "a run is queued when it starts; resume it here, detached, or on a server",
            ))),
            How::Detached => {
                let supervisor = self.detach(id, Detach::Resume).await?;
                let record = self.store.load(id).await?;
                Ok(Started::Detached { record, supervisor })
            }
            how => {
                let mut supervision = self.store.supervise(id).await?;
                let again = supervision.record().unfinished();
                let request = supervision.request_again(again).await?;
                self.started(supervision, request, how).await
            }
        }
    }

    /// Tells an agent of run `id`: queued for a run still running (cutting its current turn
    /// first with `now`), or, for a run that is over, a told turn in its workspace and
    /// session, started as `how` says.
    #[tracing::instrument(name = "run.tell", skip_all, fields(run = %id))]
    pub async fn tell(&self, id: &RunId, telling: Telling<'_>, how: How) -> Result<Told, RunError> {
        let which = telling.agent.map(AgentNumber::index);
        let text = telling.text;
        if text.trim().is_empty() {
            return Err(RunError::EmptyTask);
        }
        if !telling.allow.is_empty() && !self.store.load(id).await?.state.is_over() {
            return Err(RunError::Ops(berth_ops::Error::refused(format!(
                "run {id} is still running: --allow widens the turn of an agent of a run that is over; wait for it (`berth run wait {id}`), then tell it"
            ))));
        }
        if let Some(agent) = self
            .store
            .queue_tell_if_running(id, which, text, telling.now)
            .await?
        {
            return Ok(Told::Queued { agent });
        }
        match how {
            How::Queued(_) => Err(RunError::Ops(berth_ops::Error::invalid(
                "a told turn runs here, detached, or on a server; it is not queued",
            ))),
            How::Detached if !telling.allow.is_empty() => {
                Err(RunError::Ops(berth_ops::Error::invalid(
                    "--allow widens a told turn supervised here; a detached one has the run's policy",
                )))
            }
            How::Detached => {
                let (agent, supervisor) = crate::detach::tell_detached(
                    &self.ops,
                    &self.store,
                    id,
                    which,
                    text,
                    &self.program,
                )
                .await?;
                Ok(Told::Detached { agent, supervisor })
            }
            how => self.told_turn(id, which, telling, how).await,
        }
    }

    /// The told turn of a run that is over, supervised here or hosted.
    async fn told_turn(
        &self,
        id: &RunId,
        which: Option<usize>,
        telling: Telling<'_>,
        how: How,
    ) -> Result<Told, RunError> {
        let host = match how {
            How::Hosted { .. } => Host::Server,
            _ => Host::Own,
        };
        let supervised = Supervised::tell(
            self.ops.clone(),
            self.agent.clone(),
            &self.store,
            id,
            which,
            telling.text,
            telling.allow,
            host,
        )
        .await?;
        match how {
            How::Hosted { by } => {
                supervised.spawn_hosted(by);
                // Without a name, the run's only agent (or `tellable` refused it).
                Ok(Told::Hosted {
                    agent: which.unwrap_or(0),
                })
            }
            _ => Ok(Told::Here(Box::new(supervised))),
        }
    }

    /// Run `id`'s events after `from` (0: all of them), as they are kept, until the run is
    /// over and every event is read. Woken by Postgres's `LISTEN` where the runs are kept
    /// there; read again every [`crate::follow::LOOK_EVERY`] otherwise.
    pub fn follow(&self, id: &RunId, from: u64) -> Follow {
        Follow::new(self.store.clone(), id.clone(), from)
    }

    /// The questions agent `agent` (0-based) of run `id` waits on, each once, as it asks
    /// them, until the run is over.
    pub fn questions(&self, id: &RunId, agent: usize) -> Questions {
        Questions::new(self.follow(id, 0), agent)
    }

    /// Word that some run may have changed, for a front end that shows the list of runs.
    pub fn changes(&self) -> Changes {
        Changes::new(self.store.clone())
    }

    /// Starts one run per request as one batch (`berth run --tasks`): detached, or queued.
    pub async fn start_batch(
        &self,
        requests: Vec<RunRequest>,
        queue: Option<Queue>,
    ) -> Result<StartedBatch, RunError> {
        let how = match &queue {
            None => BatchStart::Detached {
                program: &self.program,
            },
            Some(q) => BatchStart::Queued {
                repo: q.repo.as_deref(),
                here: &q.from,
                node: q.node.clone(),
            },
        };
        crate::batch::start_batch(&self.ops, &self.store, requests, how).await
    }

    /// Takes queued runs from the pool until `stop` (`berth serve` on a database store).
    pub async fn work(
        &self,
        options: WorkerOptions,
        stop: CancellationToken,
    ) -> Result<(), KeptError> {
        crate::worker::work(
            self.ops.clone(),
            self.agent.clone(),
            self.store.clone(),
            options,
            stop,
        )
        .await
    }

    /// The body of a detached supervisor (`berth run supervise`): takes the run `args` name,
    /// starts, resumes or tells it as they say (a told text read from `told`), and supervises
    /// it to its end. The run as it ended.
    pub async fn supervise_detached(
        &self,
        args: &SuperviseArgs,
        mut told: impl Read,
    ) -> Result<RunRecord, RunError> {
        // The terminal that started the run may close; its hangup is not this process's end.
        let _hangup =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).map_err(io)?;
        let id = &args.run;
        let supervised = match args.what {
            Supervise::Tell { agent } => {
                let mut text = String::new();
                told.read_to_string(&mut text).map_err(io)?;
                let telling = Telling {
                    agent: Some(agent),
                    text: &text,
                    ..Telling::default()
                };
                match self.tell(id, telling, How::Here).await? {
                    Told::Here(supervised) => supervised,
                    // Queued meanwhile for a run that runs again: its supervisor tells it.
                    _ => return Ok(self.store.load(id).await?),
                }
            }
            what => {
                let mut supervision = self.store.supervise(id).await?;
                let again = match what {
                    Supervise::Resume => supervision.record().unfinished(),
                    _ => BTreeMap::new(),
                };
                let request = supervision.request_again(again).await?;
                match self.started(supervision, request, How::Here).await? {
                    Started::Here(supervised) => supervised,
                    _ => unreachable!("a run started here is supervised here"),
                }
            }
        };
        let mut supervised = *supervised;
        while let Some(next) = supervised.next().await {
            if let Next::Unkept(e) = next {
                tracing::warn!(run = %id, "run {id}: {e} (the run goes on)");
            }
        }
        Ok(supervised.finish().await?)
    }

    /// Run `id`, just recorded, supervised here or hosted.
    async fn supervised(
        &self,
        id: &RunId,
        request: RunRequest,
        how: How,
    ) -> Result<Started, RunError> {
        let supervision = self.store.supervise(id).await?;
        self.started(supervision, request, how).await
    }

    async fn started(
        &self,
        supervision: crate::kept::Supervision,
        request: RunRequest,
        how: How,
    ) -> Result<Started, RunError> {
        let host = match how {
            How::Hosted { .. } => Host::Server,
            _ => Host::Own,
        };
        let mut supervised = Supervised::start(
            self.ops.clone(),
            self.agent.clone(),
            supervision,
            request,
            host,
        )
        .await?;
        match how {
            How::Hosted { by } => {
                let first = supervised.until_started().await;
                let record = supervised.record().clone();
                // Driven to its end whatever the first news was: a run that failed to
                // start still checks nothing, sums up, and is kept so.
                supervised.spawn_hosted(by);
                Ok(Started::Hosted { record, first })
            }
            _ => Ok(Started::Here(Box::new(supervised))),
        }
    }

    /// Hands run `id` to a supervisor process of its own.
    async fn detach(&self, id: &RunId, what: Detach) -> Result<u32, RunError> {
        crate::detach::detach(&self.ops, &self.store, id, what, &self.program).await
    }
}

fn io(e: std::io::Error) -> RunError {
    RunError::Ops(berth_ops::Error::rule(
        berth_ops::ErrorKind::Io,
        format!("the run's supervisor: {e}"),
    ))
}
