//! Where runs are kept, as primitives: what files and a database each do, over which
//! [`RunStore`](super::RunStore) writes its rules once; and the requests other processes
//! leave for a run's supervisor.

use std::fmt;

use async_trait::async_trait;

use super::*;
use crate::event::RunEvent;

/// A stop or a tell left for a run's supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request {
    Stop(StopRequest),
    Tell {
        agent: usize,
        text: String,
        /// `--now`: its current turn is cut first.
        now: bool,
    },
    /// A person's answer to agent `agent`'s question (`--ask`).
    Answer {
        agent: usize,
        question: String,
        answer: crate::ask::Answer,
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
    /// Deletes the run and all that is kept of it in the store, unless a supervisor holds it
    /// now: whether it was deleted.
    async fn delete_unsupervised(&self, id: &RunId) -> Result<bool, KeptError>;
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
