//! Runs kept in the home's database (SQLite or Postgres), so that every node on one database
//! sees every run, and a queued run is taken by whichever worker is free.
//!
//! A supervisor's hold is a lease (berth-store-sql's `runs` row: owner, until, fence) which a
//! task renews a third of the way through; every write names the fence the hold was given,
//! so once another node took the run (the lease ran out: this node was stopped, cut off, or
//! too slow) nothing this one writes lands, and the hold says it is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use berth_store_sql::{RunColumns, RunRequestRow, SqlRuns};

use super::{
    Decide, Hold, KeptError, PageCursor, Request, RunBackend, RunId, RunRecord, StopRequest,
};
use crate::event::RunEvent;

/// Answers of the run's agents held back before they are written together: a piece of an
/// answer is one event, and one statement each would cost a round trip per piece.
const TEXT_BATCH: usize = 64;

#[derive(Clone)]
pub(crate) struct DbRuns {
    pub(crate) runs: SqlRuns,
    /// This process's name in the leases it takes.
    pub(crate) node: String,
    pub(crate) lease: Duration,
}

impl std::fmt::Debug for DbRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbRuns").field("node", &self.node).finish()
    }
}

fn store_err(e: impl Into<berth_ops::Error>) -> KeptError {
    KeptError::Store(e.into())
}

/// What a run is filed under, from its record.
pub(crate) fn columns(record: &RunRecord) -> (i64, usize) {
    (
        record.created_at.timestamp_nanos_opt().unwrap_or(i64::MAX),
        record.agents.len(),
    )
}

fn parse(id: &str, text: &str) -> Result<RunRecord, KeptError> {
    serde_json::from_str(text).map_err(|e| KeptError::Corrupt {
        path: format!("the run record {id} in the database").into(),
        reason: e.to_string(),
    })
}

fn event_text(event: &RunEvent) -> String {
    serde_json::to_string(event).expect("a run event serializes")
}

impl DbRuns {
    /// A hold on run `id` with `fence`, renewed from now on.
    pub(crate) fn held(&self, id: &RunId, fence: i64) -> Box<dyn Hold> {
        let lost = Arc::new(AtomicBool::new(false));
        let renew = {
            let (runs, id, lost, lease) =
                (self.runs.clone(), id.to_string(), lost.clone(), self.lease);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(lease / 3).await;
                    match runs.renew(&id, fence, lease).await {
                        Ok(true) => {}
                        Ok(false) => {
                            tracing::warn!(run = %id, fence, "the run's lease was lost: another node took it over");
                            lost.store(true, Ordering::Release);
                            return;
                        }
                        // The database is out of reach for now: tried again next time; the
                        // fence keeps this node from writing once another took the run.
                        Err(e) => {
                            tracing::warn!(run = %id, fence, "the run's lease could not be renewed (tried again): {e}");
                        }
                    }
                }
            })
        };
        Box::new(DbHold {
            runs: self.runs.clone(),
            id: id.clone(),
            fence,
            lost,
            renew,
            pending: Vec::new(),
        })
    }

    /// Claims a queued run (or one whose worker's lease lapsed) of at most `room` agents.
    pub(crate) async fn claim(
        &self,
        room: usize,
    ) -> Result<Option<(RunId, Box<dyn Hold>)>, KeptError> {
        let Some((id, fence)) = self
            .runs
            .claim(&self.node, room, self.lease)
            .await
            .map_err(store_err)?
        else {
            return Ok(None);
        };
        let id = RunId::try_from(id)?;
        let hold = self.held(&id, fence);
        Ok(Some((id, hold)))
    }
}

#[async_trait]
impl RunBackend for DbRuns {
    async fn insert(&self, record: &RunRecord) -> Result<bool, KeptError> {
        let (created_ns, agents) = columns(record);
        let text = serde_json::to_string(record).expect("a run record serializes");
        let pool = record.request.pool.as_ref();
        self.runs
            .insert(
                &RunColumns {
                    id: record.id.as_str(),
                    created_ns,
                    state: record.state.as_str(),
                    pooled: pool.is_some(),
                    node: pool.and_then(|p| p.node.as_deref()),
                    agents,
                },
                &text,
            )
            .await
            .map_err(store_err)
    }

    async fn read(&self, id: &RunId) -> Result<RunRecord, KeptError> {
        match self.runs.get(id.as_str()).await.map_err(store_err)? {
            Some(row) => parse(&row.id, &row.record),
            None => Err(KeptError::NotFound(id.to_string())),
        }
    }

    async fn ids(&self) -> Result<Vec<RunId>, KeptError> {
        Ok(self
            .runs
            .ids()
            .await
            .map_err(store_err)?
            .into_iter()
            .filter_map(|id| RunId::try_from(id).ok())
            .collect())
    }

    async fn list(&self) -> Result<Vec<Result<RunRecord, KeptError>>, KeptError> {
        Ok(self
            .runs
            .list()
            .await
            .map_err(store_err)?
            .iter()
            .map(|row| parse(&row.id, &row.record))
            .collect())
    }

    async fn page(
        &self,
        limit: usize,
        after: Option<&PageCursor>,
    ) -> Result<Vec<Result<RunRecord, KeptError>>, KeptError> {
        let after = after.map(|c| (c.created_ns, c.id.as_str()));
        Ok(self
            .runs
            .page(limit, after)
            .await
            .map_err(store_err)?
            .iter()
            .map(|row| parse(&row.id, &row.record))
            .collect())
    }

    async fn supervised(&self, id: &RunId) -> Result<bool, KeptError> {
        match self.runs.get(id.as_str()).await.map_err(store_err)? {
            Some(row) => Ok(row.leased),
            None => Err(KeptError::NotFound(id.to_string())),
        }
    }

    async fn write_unsupervised(
        &self,
        id: &RunId,
        decide: &Decide,
    ) -> Result<RunRecord, KeptError> {
        let Some(row) = self.runs.get(id.as_str()).await.map_err(store_err)? else {
            return Err(KeptError::NotFound(id.to_string()));
        };
        let mut record = parse(&row.id, &row.record)?;
        if row.leased || !decide(&mut record) {
            return Ok(record);
        }
        let text = serde_json::to_string(&record).expect("a run record serializes");
        let written = self
            .runs
            .write_unheld(id.as_str(), row.fence, record.state.as_str(), &text)
            .await
            .map_err(store_err)?;
        if written {
            Ok(record)
        } else {
            // Taken meanwhile: as its new holder keeps it.
            self.read(id).await
        }
    }

    async fn delete_unsupervised(&self, id: &RunId) -> Result<bool, KeptError> {
        self.runs
            .delete_unheld(id.as_str())
            .await
            .map_err(store_err)
    }

    async fn hold(&self, id: &RunId) -> Result<Box<dyn Hold>, KeptError> {
        let fence = self
            .runs
            .take(id.as_str(), &self.node, self.lease)
            .await
            .map_err(store_err)?;
        match fence {
            Some(fence) => Ok(self.held(id, fence)),
            None => {
                let row = self.runs.get(id.as_str()).await.map_err(store_err)?;
                Err(KeptError::Busy {
                    id: id.clone(),
                    pid: row
                        .and_then(|r| r.owner)
                        .map_or_else(|| "unknown".to_owned(), |o| format!("of node {o}")),
                })
            }
        }
    }

    async fn request(
        &self,
        record: &RunRecord,
        request: &Request,
        _pid: u32,
    ) -> Result<(), KeptError> {
        let row = match request {
            Request::Stop(StopRequest::All) => RunRequestRow {
                kind: "stop".into(),
                agent: None,
                body: String::new(),
            },
            Request::Stop(StopRequest::Agent(i)) => RunRequestRow {
                kind: "stop".into(),
                agent: Some(*i as i64),
                body: String::new(),
            },
            Request::Tell { agent, text, now } => RunRequestRow {
                kind: if *now { "tell-now" } else { "tell" }.into(),
                agent: Some(*agent as i64),
                body: text.clone(),
            },
            Request::Answer {
                agent,
                question,
                answer,
            } => RunRequestRow {
                kind: "answer".into(),
                agent: Some(*agent as i64),
                body: format!("{question} {}", answer.as_str()),
            },
        };
        // Its supervisor, on whichever node, takes it at its next look (every second).
        self.runs
            .request(record.id.as_str(), &row)
            .await
            .map_err(store_err)
    }

    async fn events(&self, id: &RunId, cursor: u64) -> Result<(Vec<RunEvent>, u64), KeptError> {
        let after = i64::try_from(cursor).unwrap_or(i64::MAX);
        let rows = self
            .runs
            .events(id.as_str(), after)
            .await
            .map_err(store_err)?;
        let mut next = cursor;
        let mut events = Vec::with_capacity(rows.len());
        for (seq, text) in rows {
            let event = serde_json::from_str(&text).map_err(|e| KeptError::Corrupt {
                path: format!("the events of run {id} in the database").into(),
                reason: format!("event {seq}: {e}"),
            })?;
            events.push(event);
            next = seq as u64;
        }
        Ok((events, next))
    }

    async fn run_of_session(&self, session: &str) -> Result<Option<RunId>, KeptError> {
        Ok(self
            .runs
            .run_of_session(session)
            .await
            .map_err(store_err)?
            .and_then(|id| RunId::try_from(id).ok()))
    }

    async fn index_session(&self, session: &str, id: &RunId) {
        // An index that cannot be written is only slower to find.
        let _ = self.runs.index_session(session, id.as_str()).await;
    }
}

/// A supervisor's lease on a run kept in the database.
struct DbHold {
    runs: SqlRuns,
    id: RunId,
    fence: i64,
    lost: Arc<AtomicBool>,
    renew: tokio::task::JoinHandle<()>,
    /// Events held back to be written together (pieces of answers).
    pending: Vec<String>,
}

impl DbHold {
    fn fenced(&self) -> KeptError {
        self.lost.store(true, Ordering::Release);
        KeptError::Fenced {
            id: self.id.clone(),
        }
    }
}

#[async_trait]
impl Hold for DbHold {
    fn lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    async fn write(&mut self, record: &RunRecord) -> Result<(), KeptError> {
        self.flush().await?;
        let text = serde_json::to_string(record).expect("a run record serializes");
        let written = self
            .runs
            .write(self.id.as_str(), self.fence, record.state.as_str(), &text)
            .await
            .map_err(store_err)?;
        if !written {
            return Err(self.fenced());
        }
        Ok(())
    }

    async fn append(&mut self, event: &RunEvent, _durable: bool) -> Result<(), KeptError> {
        self.pending.push(event_text(event));
        if matches!(event, RunEvent::Text { .. }) && self.pending.len() < TEXT_BATCH {
            return Ok(());
        }
        self.flush().await
    }

    async fn flush(&mut self) -> Result<(), KeptError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let appended = self
            .runs
            .append(self.id.as_str(), self.fence, &self.pending)
            .await
            .map_err(store_err)?;
        if !appended {
            self.pending.clear();
            return Err(self.fenced());
        }
        self.pending.clear();
        Ok(())
    }

    async fn requests(&mut self) -> Vec<Request> {
        let Ok(rows) = self.runs.take_requests(self.id.as_str(), self.fence).await else {
            return Vec::new();
        };
        rows.into_iter()
            .filter_map(|r| match (r.kind.as_str(), r.agent) {
                ("stop", None) => Some(Request::Stop(StopRequest::All)),
                ("stop", Some(i)) => {
                    Some(Request::Stop(StopRequest::Agent(usize::try_from(i).ok()?)))
                }
                (kind @ ("tell" | "tell-now"), Some(i)) => Some(Request::Tell {
                    agent: usize::try_from(i).ok()?,
                    text: r.body,
                    now: kind == "tell-now",
                }),
                ("answer", Some(i)) => {
                    let (question, answer) = r.body.split_once(' ')?;
                    Some(Request::Answer {
                        agent: usize::try_from(i).ok()?,
                        question: question.to_owned(),
                        answer: answer.parse().ok()?,
                    })
                }
                _ => None,
            })
            .collect()
    }

    async fn release(mut self: Box<Self>) {
        if let Err(e) = self.flush().await {
            tracing::warn!(run = %self.id, "the run's last events could not be written: {e}");
        }
        self.renew.abort();
        // Not released, the lease lapses by itself: another node waits that much longer.
        if let Err(e) = self.runs.release(self.id.as_str(), self.fence).await {
            tracing::warn!(run = %self.id, "the run's lease could not be released: {e}");
        }
    }
}

impl Drop for DbHold {
    fn drop(&mut self) {
        // Dropped without a release (a process ending): the lease runs out by itself.
        self.renew.abort();
    }
}
