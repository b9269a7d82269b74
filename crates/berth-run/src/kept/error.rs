//! Why a kept run could not be read or written, and the kind each reason is.

use std::io;
use std::path::PathBuf;

use berth_ops::ErrorKind;

use super::*;

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
    #[error(
        "invalid batch id {0:?}: a batch id is the 12 hex digits `berth run --tasks` printed (4 or more of its first will do)"
    )]
    BadBatchId(String),
    #[error(
        "no run is in batch {0}: a batch id is what `berth run --tasks` printed, and `berth run show RUN` names a run's batch (`berth run list --batch ID` lists a batch's runs)"
    )]
    BatchNotFound(String),
    #[error("batch id prefix {prefix:?} matches {} batches ({}); give more of it", ids.len(), ids.join(", "))]
    AmbiguousBatch { prefix: String, ids: Vec<String> },
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
            | KeptError::BadBatchId(_)
            | KeptError::BadCursor(_)
            | KeptError::Ambiguous { .. }
            | KeptError::AmbiguousBatch { .. }
            | KeptError::NoSuchAgent { .. }
            | KeptError::WhichAgent { .. } => ErrorKind::Invalid,
            KeptError::NotFound(_) | KeptError::BatchNotFound(_) => ErrorKind::NotFound,
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

impl berth_ops::Kinded for KeptError {
    fn kind(&self) -> berth_ops::ErrorKind {
        KeptError::kind(self)
    }
}
