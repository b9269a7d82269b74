//! A batch: the runs one file of tasks started (`berth run --tasks`), each keeping the
//! batch's id and its place in the file's order in its request. No record of its own: a
//! batch is the runs that name it, so it is kept, copied and deleted with them, on files and
//! in a database alike.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::*;

/// Digits in a batch's id.
const BATCH_ID_LEN: usize = 12;

/// A batch's id: 12 lowercase hex digits, made by berth.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BatchId(String);

impl BatchId {
    pub(crate) fn generate() -> BatchId {
        BatchId(uuid::Uuid::new_v4().simple().to_string()[..BATCH_ID_LEN].to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether `text` is lowercase hex digits, at most a whole id's.
fn is_hex_prefix(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= BATCH_ID_LEN
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl TryFrom<String> for BatchId {
    type Error = KeptError;
    fn try_from(value: String) -> Result<BatchId, KeptError> {
        if value.len() == BATCH_ID_LEN && is_hex_prefix(&value) {
            Ok(BatchId(value))
        } else {
            Err(KeptError::BadBatchId(value.chars().take(80).collect()))
        }
    }
}

impl From<BatchId> for String {
    fn from(id: BatchId) -> String {
        id.0
    }
}

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A run's place in its batch, kept in its request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchPlace {
    pub id: BatchId,
    /// Its task's place in the file, from 0.
    pub index: usize,
    /// How many runs the batch was started with: a reader missing one of them knows it.
    pub count: usize,
}

/// The runs of batch `id`, in the file's order, each as [`RunStore::load`] gives it (one
/// whose supervisor is gone found failed). A batch no run names is `BatchNotFound`. A run of
/// it that was deleted is simply not there; but when one is missing and some run's record
/// cannot be read, that error is returned: the unreadable run may be the missing one, and a
/// batch is never read short of a run it has.
pub async fn batch_runs(store: &RunStore, id: &BatchId) -> Result<Vec<RunRecord>, KeptError> {
    let mut found = Vec::new();
    let mut unreadable = None;
    for run in store.backend.list().await? {
        match run {
            Ok(record) if record.request.batch.as_ref().is_some_and(|b| b.id == *id) => {
                found.push(record)
            }
            Ok(_) => {}
            Err(e) => {
                unreadable.get_or_insert(e);
            }
        }
    }
    let count = found
        .iter()
        .filter_map(|r| r.request.batch.as_ref().map(|b| b.count))
        .max();
    let Some(count) = count else {
        return Err(KeptError::BatchNotFound(id.to_string()));
    };
    if found.len() < count
        && let Some(e) = unreadable
    {
        return Err(e);
    }
    let place = |r: &RunRecord| r.request.batch.as_ref().map_or(0, |b| b.index);
    found.sort_by(|a, b| {
        place(a)
            .cmp(&place(b))
            .then(a.created_at.cmp(&b.created_at))
    });
    let mut runs = Vec::with_capacity(found.len());
    for record in found {
        runs.push(store.alive_or_failed(record).await?);
    }
    Ok(runs)
}

/// The batch an id or a prefix of one (`berth_ops::MIN_PREFIX` digits or more) names, among
/// the batches of the kept runs: refused when the prefix names several, not found when it
/// names none.
pub async fn resolve_batch(store: &RunStore, identifier: &str) -> Result<BatchId, KeptError> {
    // Said as it was given: `ABC` is no id, whatever its lowercase is.
    let prefix = identifier.to_ascii_lowercase();
    if !is_hex_prefix(&prefix) {
        return Err(KeptError::BadBatchId(identifier.chars().take(80).collect()));
    }
    let mut ids: Vec<BatchId> = store
        .backend
        .list()
        .await?
        .into_iter()
        .flatten()
        .filter_map(|r| r.request.batch.map(|b| b.id))
        .collect();
    ids.sort();
    ids.dedup();
    match berth_ops::named_by_id(&prefix, ids, |b| b.as_str()) {
        berth_ops::Named::Nothing => Err(KeptError::BatchNotFound(identifier.to_owned())),
        berth_ops::Named::One(id) => Ok(id),
        berth_ops::Named::Several(ids) => Err(KeptError::AmbiguousBatch {
            prefix: identifier.to_owned(),
            ids: ids.into_iter().map(String::from).collect(),
        }),
    }
}
