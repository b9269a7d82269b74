//! A supervisor's hold on a run: the record it alone writes, each event kept in order, and
//! the stops, tells and answers other processes left for it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::*;
use crate::event::AgentStatus;
use crate::event::RunEvent;
use crate::request::Resume;

/// What other processes asked of a run's supervisor since its last look.
#[derive(Debug, Default)]
pub struct Requests {
    pub stops: Vec<StopRequest>,
    /// What to tell agents, in the order they came.
    pub tells: Vec<Tell>,
    /// Each agent's index, its question and the answer.
    pub answers: Vec<(usize, String, crate::ask::Answer)>,
}

/// What an agent at work is told (`RunStore::queue_tell_if_running`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tell {
    /// The agent's index.
    pub agent: usize,
    pub text: String,
    /// `--now`: its current turn is cut first (`RunStore::queue_tell_if_running`).
    pub now: bool,
}

/// A run's supervisor's hold on it: the hold, and the record it keeps.
pub struct Supervision {
    pub(super) store: RunStore,
    /// `None` once let go.
    pub(super) hold: Option<Box<dyn Hold>>,
    pub(super) record: RunRecord,
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

    /// The request that runs again the agents `again` names (none: the run as it was
    /// asked), their state back to starting first: what a resume, a told turn and a worker
    /// taking a run over each start.
    pub async fn request_again(
        &mut self,
        again: BTreeMap<usize, Resume>,
    ) -> Result<crate::request::RunRequest, KeptError> {
        if !again.is_empty() {
            self.resuming(&again).await?;
        }
        Ok(self.record.request.request(again))
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
                Request::Tell { agent, text, now } => taken.tells.push(Tell { agent, text, now }),
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
