//! A run under its supervisor: the process that holds the run's lock ([`Supervision`]) keeps
//! every event as it comes, honours stop requests from other processes (`berth run stop`),
//! and hands each event on to whoever shows the run (a table on a terminal, or nothing when
//! detached).
//!
//! Events are handed on before they are kept: the table sees a piece of the answer as soon
//! as the agent sends it, and the record's write (an fsync) never holds it back.

use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use berth_agent::Agent;
use berth_ops::Ops;

use crate::error::RunError;
use crate::event::RunEvent;
use crate::kept::{KeptError, RunId, RunRecord, RunStore, StopRequest, Supervision};
use crate::request::RunRequest;
use crate::running::Run;

/// How often stop requests are looked for when no signal said so (one sent before the
/// supervisor listened, or lost).
const STOP_POLL: Duration = Duration::from_secs(1);

/// A run and its supervision.
pub struct Supervised {
    run: Run,
    supervision: Supervision,
    /// `berth run stop` writes its request, then sends SIGUSR1.
    stop_asked: Signal,
    /// SIGTERM stops the whole run, as Ctrl-C does in the foreground; not listened for in a
    /// server, whose own SIGTERM is its shutdown ([`Supervised::hosted`]).
    terminate: Option<Signal>,
    poll: tokio::time::Interval,
    /// An event taken from the run whose keeping is still to do.
    unkept: Option<RunEvent>,
    over: bool,
    /// Another node took the run: said once, then the run is stopped here.
    fenced: bool,
    /// The run is a told turn (`run tell`): its end is `told_done`, not the run's end again.
    told: bool,
    /// A person stopped the whole run (Ctrl-C, `run stop`, SIGTERM): they know it ended, so
    /// its end is not notified.
    stopped_by_person: bool,
}

/// What [`Supervised::next`] gives.
pub enum Next {
    /// An event of the run.
    Event(RunEvent),
    /// An event could not be kept (the run goes on; its transcripts are still written).
    Unkept(KeptError),
}

/// Who supervises a run: a process of its own, or a server that hosts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Host {
    /// The CLI in the foreground, or a detached `berth run supervise`: SIGTERM stops the run.
    Own,
    /// A server (MCP's `session_run`), whose SIGTERM is its own shutdown.
    Server,
}

impl Supervised {
    /// Starts `request` under `supervision`: the one way every front end starts a kept run.
    /// A run that cannot start is recorded failed, saying why.
    #[tracing::instrument(name = "run.start", skip_all, fields(run = %supervision.record().id))]
    pub(crate) async fn start(
        ops: Ops,
        agent: Agent,
        mut supervision: Supervision,
        mut request: RunRequest,
        host: Host,
    ) -> Result<Supervised, RunError> {
        let told = request.resume.values().any(|r| r.prompt.is_some());
        request.stderr_dir = Some(supervision.stderr_dir());
        let run = match crate::running::start(ops, agent, request) {
            Ok(run) => run,
            Err(e) => {
                supervision.fail(&e.to_string()).await?;
                return Err(e);
            }
        };
        let supervised = match host {
            Host::Own => Supervised::new(run, supervision),
            Host::Server => Supervised::hosted(run, supervision),
        };
        supervised
            .map(|mut s| {
                s.told = told;
                s
            })
            .map_err(|e| {
                RunError::Ops(berth_ops::Error::rule(
                    berth_ops::ErrorKind::Io,
                    format!("cannot listen for the run's stop requests: {e}"),
                ))
            })
    }

    /// Tells agent `which` (0-based; the only one when `None`) of the kept run `id`, which is
    /// over, `text` (not empty: [`crate::Runs::tell`] checked it), in its workspace and
    /// session, with the run's agent and policy. Checked first as a new run is (a key, the
    /// agent's command); refused while the run is running.
    #[allow(clippy::too_many_arguments)]
    #[tracing::instrument(name = "run.tell", skip_all, fields(run = %id))]
    pub(crate) async fn tell(
        ops: Ops,
        agent: Agent,
        store: &RunStore,
        id: &RunId,
        which: Option<usize>,
        text: &str,
        allow: &[String],
        host: Host,
    ) -> Result<Supervised, RunError> {
        let again = store.tellable(id, which, text).await?;
        let request = store.load(id).await?.request.request(again.clone());
        crate::preflight::preflight(&ops, &agent, request).await?;
        let mut supervision = store.supervise(id).await?;
        let mut request = supervision.request_again(again).await?;
        if !allow.is_empty() {
            // Wider for the told turn only: the run keeps its own policy.
            let mut tools = request.policy.named();
            tools.extend(allow.iter().map(|t| t.trim().to_owned()));
            request.policy = berth_agent::Policy::new(&tools, request.policy.allows_all());
        }
        Supervised::start(ops, agent, supervision, request, host).await
    }

    /// Supervises `run` in a process of its own (the CLI's, or a detached supervisor), where
    /// SIGTERM stops the run; must be called within a tokio runtime.
    pub(crate) fn new(run: Run, supervision: Supervision) -> std::io::Result<Supervised> {
        Supervised::with(run, supervision, Some(signal(SignalKind::terminate())?))
    }

    /// Supervises `run` in a server (MCP's `session_run`), which keeps SIGTERM for its own
    /// shutdown; stop requests are honoured as everywhere.
    pub(crate) fn hosted(run: Run, supervision: Supervision) -> std::io::Result<Supervised> {
        Supervised::with(run, supervision, None)
    }

    fn with(
        run: Run,
        supervision: Supervision,
        terminate: Option<Signal>,
    ) -> std::io::Result<Supervised> {
        let mut poll = tokio::time::interval(STOP_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Ok(Supervised {
            run,
            supervision,
            stop_asked: signal(SignalKind::user_defined1())?,
            terminate,
            poll,
            unkept: None,
            over: false,
            fenced: false,
            told: false,
            stopped_by_person: false,
        })
    }

    /// Drives the run until an agent's `Started` event, kept in the record before this
    /// returns (so a status read elsewhere sees it): that event; or why the run ended first
    /// (the agent's failure, or that it ended before any session was made). What a front end
    /// that answers once the run is under way waits for (MCP's `session_run`).
    pub(crate) async fn until_started(&mut self) -> Result<RunEvent, String> {
        loop {
            match self.next().await {
                Some(Next::Event(event @ RunEvent::Started { .. })) => {
                    if let Err(e) = self.keep().await {
                        tracing::warn!(id = %self.record().id, "run {}: {e} (the run goes on)", self.record().id);
                    }
                    return Ok(event);
                }
                Some(Next::Event(RunEvent::Ended {
                    message: Some(m), ..
                })) => return Err(m),
                Some(Next::Event(_)) => {}
                Some(Next::Unkept(e)) => {
                    tracing::warn!(id = %self.record().id, "run {}: {e}", self.record().id)
                }
                None => return Err("the run ended before its session was made".to_owned()),
            }
        }
    }

    /// Supervises the run to its end on a task of its own, every event kept and none shown:
    /// for a server that hosts it (MCP's `session_run` and `session_tell`, the web page's
    /// Tell). What cannot be kept is logged (`tracing`), naming `who`.
    pub(crate) fn spawn_hosted(mut self, who: &'static str) {
        let id = self.record().id.clone();
        tokio::spawn(async move {
            while let Some(next) = self.next().await {
                if let Next::Unkept(e) = next {
                    tracing::warn!(%id, host = who, "run {id}: {e} (the run goes on)");
                }
            }
            if let Err(e) = self.finish().await {
                tracing::error!(%id, host = who, "run {id}: {e}");
            }
        });
    }

    /// The run's record as kept so far.
    pub fn record(&self) -> &RunRecord {
        self.supervision.record()
    }

    /// Stops every agent (Ctrl-C in the foreground): a person's stop, so the run's end is
    /// not notified.
    pub fn stop(&mut self) {
        self.stopped_by_person = true;
        self.run.stop();
    }

    /// The next event, once the previous one is kept; `None` after the summary. Cancel-safe:
    /// it awaits only the run's channel, signals and a timer, and an event it took is kept
    /// and given by the next call if this one is dropped.
    pub async fn next(&mut self) -> Option<Next> {
        if let Some(event) = self.unkept.take()
            && let Err(e) = self.supervision.take(&event).await
        {
            return Some(Next::Unkept(e));
        }
        loop {
            if self.over {
                return None;
            }
            if self.supervision.lost() && !self.fenced {
                // Another node took the run: this one stops working it, and writes nothing.
                self.fenced = true;
                self.run.stop();
                return Some(Next::Unkept(KeptError::Fenced {
                    id: self.record().id.clone(),
                }));
            }
            tokio::select! {
                event = self.run.events.recv() => {
                    let Some(event) = event else {
                        self.over = true;
                        // Ended before its summary: the run is failed, and says why, rather
                        // than left "running" under a supervisor about to exit.
                        let why = self.run.why_it_broke().await;
                        return self.supervision.fail(&why).await.err().map(Next::Unkept);
                    };
                    if matches!(event, RunEvent::Summary { .. }) {
                        self.over = true;
                    }
                    if self.run.ops.notifications_on() {
                        let how = crate::notices::How {
                            told: self.told,
                            stopped_by_person: self.stopped_by_person,
                        };
                        for notice in crate::notices::of(self.supervision.record(), &event, how) {
                            self.run.ops.notify(notice);
                        }
                    }
                    // Handed on now; kept on the next call, before anything else happens.
                    self.unkept = Some(event.clone());
                    return Some(Next::Event(event));
                }
                _ = self.stop_asked.recv() => self.honour_stops().await,
                _ = terminated(&mut self.terminate) => self.run.stop(),
                _ = self.poll.tick() => {
                    // Pieces of answers held back reach watchers elsewhere at least this often.
                    if let Err(e) = self.supervision.flush().await {
                        return Some(Next::Unkept(e));
                    }
                    self.honour_stops().await
                }
            }
        }
    }

    /// Keeps now the event [`Supervised::next`] last gave, rather than on the next call: for
    /// a caller that answers from the record as soon as it has the event (MCP's
    /// `session_run`, once its agent's session exists).
    pub(crate) async fn keep(&mut self) -> Result<(), KeptError> {
        match self.unkept.take() {
            Some(event) => self.supervision.take(&event).await,
            None => Ok(()),
        }
    }

    /// Stop requests, and tells queued for agents at work (`RunStore::queue_tell_if_running`).
    async fn honour_stops(&mut self) {
        let crate::kept::Requests {
            stops,
            tells,
            answers,
        } = self.supervision.requests().await;
        for (agent, question, answer) in answers {
            // Not waiting any more (answered twice, expired, stopped): nothing to do.
            self.run.answer(agent, &question, answer);
        }
        for request in stops {
            match request {
                StopRequest::All => self.stop(),
                StopRequest::Agent(i) => self.run.stop_agent(i),
            }
        }
        for crate::kept::Tell { agent, text, now } in tells {
            let taken = match now {
                true => self.run.tell_now(agent, text),
                false => self.run.tell(agent, text),
            };
            if !taken {
                tracing::warn!(
                    id = %self.record().id,
                    agent = agent + 1,
                    "run {}: agent {} was told something after its last turn ended; tell it again once the run is over",
                    self.record().id,
                    agent + 1
                );
            }
        }
    }

    /// Ends the run now, before its summary (a second Ctrl-C): what is left to keep is kept,
    /// and the agents that had not ended are recorded failed for `why`.
    pub async fn abandon(mut self, why: &str) -> Result<RunRecord, KeptError> {
        self.run.stop();
        if let Some(event) = self.unkept.take() {
            self.supervision.take(&event).await?;
        }
        self.supervision.fail(why).await?;
        self.supervision.release().await;
        Ok(self.supervision.record().clone())
    }

    /// Keeps what is left to keep and gives the record as the run ended.
    #[tracing::instrument(name = "run.finish", skip_all, fields(run = %self.supervision.record().id))]
    pub async fn finish(mut self) -> Result<RunRecord, KeptError> {
        if let Some(event) = self.unkept.take() {
            self.supervision.take(&event).await?;
        }
        self.supervision.flush().await?;
        self.supervision.release().await;
        Ok(self.supervision.record().clone())
    }
}

/// The next SIGTERM, when it is listened for; never otherwise.
async fn terminated(terminate: &mut Option<Signal>) {
    match terminate {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::kept::{RunState, RunStore, StoredRequest};
    use crate::running::Run;
    use crate::running::Stopper;

    /// A run whose task panicked closed its events without a summary; its supervisor kept it
    /// "running" and exited, and it read "running" until someone looked for a supervisor.
    #[tokio::test]
    async fn a_panic_in_the_run_leaves_it_failed_saying_why() {
        let tmp = tempfile::tempdir().unwrap();
        let store = RunStore::files(tmp.path());
        let record = store.create(StoredRequest::one_agent("t")).await.unwrap();
        let supervision = store.supervise(&record.id).await.unwrap();
        let (tx, events) = tokio::sync::mpsc::channel::<RunEvent>(8);
        let task = tokio::spawn(async move {
            let _events = tx;
            panic!("a bug of the run's own");
        });
        let all = CancellationToken::new();
        let run = Run {
            events,
            ops: berth_ops::open(&tmp.path().join("home"), &[]).unwrap(),
            told: Default::default(),
            questions: Default::default(),
            stopper: Stopper {
                agents: vec![all.child_token()],
                all,
            },
            task: Some(task),
        };
        let mut supervised = Supervised::new(run, supervision).unwrap();
        while let Some(next) = supervised.next().await {
            if let Next::Unkept(e) = next {
                panic!("{e}");
            }
        }
        let ended = supervised.finish().await.unwrap();
        assert_eq!(ended.state, RunState::Failed);
        let why = ended.message.unwrap();
        assert!(why.contains("a bug of the run's own"), "{why}");
        // Kept so, on disk, while the supervisor is still alive.
        let kept = store.load(&record.id).await.unwrap();
        assert_eq!(kept.state, RunState::Failed);
        assert_eq!(
            kept.agents[0].status.state,
            crate::event::AgentState::Failed
        );
    }
}
