//! Several tasks at once (`berth run --tasks FILE`): one run per task, each with the same
//! agents and options. Every run is checked before any is recorded (a bad agent makes
//! nothing at all); then each is recorded with its place in one batch ([`BatchPlace`]) and
//! started in a supervisor process of its own, as `berth run --detach` starts one, or queued
//! for a pool, as `berth run --queue` does. They run at once; [`crate::kept::batch_runs`] reads
//! them back in the file's order.

use std::path::Path;

use berth_ops::Ops;

use crate::detach::{Detach, detach};
use crate::error::RunError;
use crate::kept::{BatchId, BatchPlace, RunRecord, RunStore, StoredRequest};
use crate::request::RunRequest;
use crate::tasks::TASKS_MAX;
use crate::tasks::TasksError;

/// How each run of a batch is started.
#[derive(Debug, Clone)]
pub(crate) enum BatchStart<'a> {
    /// In a supervisor process of its own: `program` (the berth binary), as
    /// [`crate::Runs::start`] does with [`crate::How::Detached`].
    Detached { program: &'a Path },
    /// Queued for a pool's workers, as [`crate::worker::queue`] does, with its arguments.
    Queued {
        repo: Option<&'a Path>,
        here: &'a Path,
        node: Option<String>,
    },
}

/// A batch started: its id, and its runs in the file's order.
#[derive(Debug, Clone)]
pub struct StartedBatch {
    pub id: BatchId,
    pub runs: Vec<BatchRun>,
}

/// One run of a batch, as recorded.
#[derive(Debug, Clone)]
pub struct BatchRun {
    pub record: RunRecord,
    /// The process supervising it, when started detached (`None`: queued).
    pub supervisor: Option<u32>,
}

/// Starts one run per request, in their order, as one batch. Each request is checked first
/// as its own run would be ([`crate::preflight::preflight`], or what a queue checks), and one refused
/// makes nothing. Should a run then fail to start (its supervisor did not come up), the
/// runs before it go on and the error says so ([`RunError::BatchCut`]).
pub(crate) async fn start_batch(
    ops: &Ops,
    store: &RunStore,
    requests: Vec<RunRequest>,
    how: BatchStart<'_>,
) -> Result<StartedBatch, RunError> {
    match requests.len() {
        0 => return Err(TasksError::NoTasks.into()),
        count if count > TASKS_MAX => return Err(TasksError::TooMany { count }.into()),
        _ => {}
    }
    let checker = berth_agent::AgentBuilder::new(ops.clone()).build();
    let mut checked = Vec::with_capacity(requests.len());
    for request in requests {
        checked.push(match &how {
            BatchStart::Detached { .. } => {
                StoredRequest::of(&crate::preflight::preflight(ops, &checker, request).await?)
            }
            BatchStart::Queued { repo, here, node } => {
                crate::worker::queued_request(ops, store, &request, *repo, here, node.clone())?
            }
        });
    }
    let id = BatchId::generate();
    let count = checked.len();
    let mut runs = Vec::with_capacity(count);
    for (index, stored) in checked.into_iter().enumerate() {
        let place = BatchPlace {
            id: id.clone(),
            index,
            count,
        };
        let stored = StoredRequest {
            batch: Some(place),
            ..stored
        };
        match start_one(ops, store, stored, &how).await {
            Ok(run) => runs.push(run),
            Err(e) => {
                return Err(RunError::BatchCut {
                    batch: id,
                    run: index + 1,
                    count,
                    error: Box::new(e),
                });
            }
        }
    }
    Ok(StartedBatch { id, runs })
}

/// Records one run of a batch and starts it as `how` says.
async fn start_one(
    ops: &Ops,
    store: &RunStore,
    stored: StoredRequest,
    how: &BatchStart<'_>,
) -> Result<BatchRun, RunError> {
    let record = store.create(stored).await?;
    let supervisor = match how {
        BatchStart::Detached { program } => {
            Some(detach(ops, store, &record.id, Detach::Start, program).await?)
        }
        BatchStart::Queued { .. } => None,
    };
    Ok(BatchRun { record, supervisor })
}
