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
                        return None;
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

    /// Keeps what is left to keep and gives the record as the run ended.
    pub fn finish(mut self) -> Result<RunRecord, KeptError> {
        if let Some(event) = self.unkept.take() {
            self.supervision.take(&event)?;
        }
        Ok(self.supervision.record().clone())
    }
}
