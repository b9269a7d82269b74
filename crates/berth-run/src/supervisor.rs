//! A run under its supervisor: the process that holds the run's lock ([`Supervision`]) keeps
//! every event as it comes, honours stop requests from other processes (`berth run stop`),
//! and hands each event on to whoever shows the run (a table on a terminal, or nothing when
//! detached).
//!
//! Events are handed on before they are kept: the table sees a piece of the answer as soon
//! as the agent sends it, and the record's write (an fsync) never holds it back.

use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::kept::{KeptError, RunRecord, StopRequest, Supervision};
use crate::{Run, RunEvent};

/// How often stop requests are looked for when no signal said so (one sent before the
/// supervisor listened, or lost).
const STOP_POLL: Duration = Duration::from_secs(1);

/// A run and its supervision.
pub struct Supervised {
    run: Run,
    supervision: Supervision,
    /// `berth run stop` writes its request, then sends SIGUSR1.
    stop_asked: Signal,
    /// SIGTERM stops the whole run, as Ctrl-C does in the foreground.
    terminate: Signal,
    poll: tokio::time::Interval,
    /// An event taken from the run whose keeping is still to do.
    unkept: Option<RunEvent>,
    over: bool,
}

/// What [`Supervised::next`] gives.
pub enum Next {
    /// An event of the run.
    Event(RunEvent),
    /// An event could not be kept (the run goes on; its transcripts are still written).
    Unkept(KeptError),
}

impl Supervised {
    /// Supervises `run`; must be called within a tokio runtime.
    pub fn new(run: Run, supervision: Supervision) -> std::io::Result<Supervised> {
        let mut poll = tokio::time::interval(STOP_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Ok(Supervised {
            run,
            supervision,
            stop_asked: signal(SignalKind::user_defined1())?,
            terminate: signal(SignalKind::terminate())?,
            poll,
            unkept: None,
            over: false,
        })
    }

    /// The run's record as kept so far.
    pub fn record(&self) -> &RunRecord {
        self.supervision.record()
    }

    /// Stops every agent (Ctrl-C in the foreground).
    pub fn stop(&self) {
        self.run.stop();
    }

    /// The next event, once the previous one is kept; `None` after the summary. Cancel-safe:
    /// it awaits only the run's channel, signals and a timer, and an event it took is kept
    /// and given by the next call if this one is dropped.
    pub async fn next(&mut self) -> Option<Next> {
        if let Some(event) = self.unkept.take()
            && let Err(e) = self.supervision.take(&event)
        {
            return Some(Next::Unkept(e));
        }
        loop {
            if self.over {
                return None;
            }
            tokio::select! {
                event = self.run.events.recv() => {
                    let Some(event) = event else {
                        self.over = true;
                        // Ended before its summary: the run is failed, and says why, rather
                        // than left "running" under a supervisor about to exit.
                        let why = self.run.why_it_broke().await;
                        return self.supervision.fail(&why).err().map(Next::Unkept);
                    };
                    if matches!(event, RunEvent::Summary { .. }) {
                        self.over = true;
                    }
                    // Handed on now; kept on the next call, before anything else happens.
                    self.unkept = Some(event.clone());
                    return Some(Next::Event(event));
                }
                _ = self.stop_asked.recv() => self.honour_stops(),
                _ = self.terminate.recv() => self.run.stop(),
                _ = self.poll.tick() => self.honour_stops(),
            }
        }
    }

    fn honour_stops(&self) {
        for request in self.supervision.stop_requests() {
            match request {
                StopRequest::All => self.run.stop(),
                StopRequest::Agent(i) => self.run.stop_agent(i),
            }
        }
    }

    /// Ends the run now, before its summary (a second Ctrl-C): what is left to keep is kept,
    /// and the agents that had not ended are recorded failed for `why`.
    pub fn abandon(mut self, why: &str) -> Result<RunRecord, KeptError> {
        self.run.stop();
        if let Some(event) = self.unkept.take() {
            self.supervision.take(&event)?;
        }
        self.supervision.fail(why)?;
        Ok(self.supervision.record().clone())
    }

    /// Keeps what is left to keep and gives the record as the run ended.
    pub fn finish(mut self) -> Result<RunRecord, KeptError> {
        if let Some(event) = self.unkept.take() {
            self.supervision.take(&event)?;
        }
        Ok(self.supervision.record().clone())
    }
}

#[cfg(test)]
mod tests {
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::kept::{RunState, RunStore, StoredRequest};
    use crate::{Run, Stopper};

    /// A run whose task panicked closed its events without a summary; its supervisor kept it
    /// "running" and exited, and it read "running" until someone looked for a supervisor.
    #[tokio::test]
    async fn a_panic_in_the_run_leaves_it_failed_saying_why() {
        let tmp = tempfile::tempdir().unwrap();
        let store = RunStore::new(tmp.path());
        let record = store.create(StoredRequest::one_agent("t")).unwrap();
        let supervision = store.supervise(&record.id).unwrap();
        let (tx, events) = tokio::sync::mpsc::channel::<RunEvent>(8);
        let task = tokio::spawn(async move {
            let _events = tx;
            panic!("a bug of the run's own");
        });
        let all = CancellationToken::new();
        let run = Run {
            events,
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
        let ended = supervised.finish().unwrap();
        assert_eq!(ended.state, RunState::Failed);
        let why = ended.message.unwrap();
        assert!(why.contains("a bug of the run's own"), "{why}");
        // Kept so, on disk, while the supervisor is still alive.
        let kept = store.load(&record.id).unwrap();
        assert_eq!(kept.state, RunState::Failed);
        assert_eq!(kept.agents[0].status.state, crate::AgentState::Failed);
    }
}
