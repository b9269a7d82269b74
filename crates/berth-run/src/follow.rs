//! Following kept runs from any process: a run's events as they are kept ([`Follow`]), the
//! questions one of its agents waits on ([`Questions`]), and word that some run changed
//! ([`Changes`]). Written once for every front end (`run logs -f`, the dashboard, ACP's run
//! questions): on Postgres a follower sleeps until the database's `NOTIFY` names its run,
//! with a slow look as well in case a notice was lost while the connection was down; on
//! files and SQLite, which cannot wake anyone, it reads again every [`LOOK_EVERY`].

use std::collections::HashSet;
use std::time::{Duration, Instant};

use berth_store_sql::RunsListener;

use crate::event::{AgentStatus, RunEvent, Waiting};
use crate::kept::{KeptError, RunId, RunStore};

/// How often a follower reads again where nothing can wake it (files, SQLite).
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(200);

/// How often a follower woken by Postgres reads again anyway: a notice sent while its
/// connection was down is lost, and this bounds how late that makes it.
const LOOK_ANYWAY: Duration = Duration::from_secs(2);

/// A listener opened on first use: `None` inside once it is known there is none (or it
/// broke, and the looks go on without it).
struct Waker {
    store: RunStore,
    listener: Option<Option<RunsListener>>,
}

impl Waker {
    fn new(store: RunStore) -> Waker {
        Waker {
            store,
            listener: None,
        }
    }

    /// Waits until run `id` (any run, for `None`) may have changed.
    async fn changed(&mut self, id: Option<&RunId>) {
        if self.listener.is_none() {
            let opened = self.store.listen_changes().await;
            if let Err(e) = &opened {
                tracing::debug!("runs are read again every {LOOK_EVERY:?}: no listener: {e}");
            }
            self.listener = Some(opened.ok().flatten());
        }
        let Some(Some(listener)) = self.listener.as_mut() else {
            tokio::time::sleep(LOOK_EVERY).await;
            return;
        };
        let woken = async {
            loop {
                match listener.next().await {
                    Ok(Some(run)) if id.is_none_or(|id| id.as_str() == run) => return true,
                    Ok(Some(_)) => {}
                    // Notices were missed: this run's may be among them.
                    Ok(None) => return true,
                    Err(_) => return false,
                }
            }
        };
        tokio::select! {
            ok = woken => if !ok {
                tracing::debug!("the runs' listener broke: read again every {LOOK_EVERY:?}");
                self.listener = Some(None);
            },
            _ = tokio::time::sleep(LOOK_ANYWAY) => {}
        }
    }
}

/// A run's events as they are kept, in batches, until the run is over and every one of its
/// events has been given. Made by [`crate::Runs::follow`].
pub struct Follow {
    store: RunStore,
    id: RunId,
    cursor: u64,
    waker: Waker,
    read_once: bool,
    done: bool,
}

impl Follow {
    pub(crate) fn new(store: RunStore, id: RunId, from: u64) -> Follow {
        Follow {
            waker: Waker::new(store.clone()),
            store,
            id,
            cursor: from,
            read_once: false,
            done: false,
        }
    }

    /// The events kept since the last batch; `None` once the run is over and all are given.
    /// An error ends the stream (the run was deleted, or its record cannot be read).
    pub async fn next(&mut self) -> Option<Result<Vec<RunEvent>, KeptError>> {
        loop {
            if self.done {
                return None;
            }
            if self.read_once {
                self.waker.changed(Some(&self.id)).await;
            }
            self.read_once = true;
            // The state is read before the events: a run over then has all its events kept.
            let over = match self.store.load(&self.id).await {
                Ok(record) => record.state.is_over(),
                Err(e) => return self.ends(e),
            };
            let (events, next) = match self.store.events(&self.id, self.cursor).await {
                Ok(read) => read,
                Err(e) => return self.ends(e),
            };
            self.cursor = next;
            self.done = over;
            if !events.is_empty() {
                return Some(Ok(events));
            }
        }
    }

    /// Where the next batch starts: a cursor to follow on from later.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The run followed.
    pub fn run(&self) -> &RunId {
        &self.id
    }

    /// Whether the database wakes this follower (Postgres's `NOTIFY`), once it has waited.
    pub fn woken_by_database(&self) -> bool {
        matches!(self.waker.listener, Some(Some(_)))
    }

    fn ends(&mut self, e: KeptError) -> Option<Result<Vec<RunEvent>, KeptError>> {
        self.done = true;
        Some(Err(e))
    }
}

/// The questions one agent of a run waits on (a call its policy leaves to a person, with
/// `--ask`), each given once while it is still unanswered, until the run is over. Made by
/// [`crate::Runs::questions`].
pub struct Questions {
    follow: Follow,
    agent: usize,
    status: AgentStatus,
    asked: HashSet<String>,
}

impl Questions {
    pub(crate) fn new(follow: Follow, agent: usize) -> Questions {
        Questions {
            follow,
            agent,
            status: AgentStatus::default(),
            asked: HashSet::new(),
        }
    }

    /// The next question the agent waits on; `None` once the run is over. A question asked
    /// and answered between two reads is not given.
    pub async fn next(&mut self) -> Option<Result<Waiting, KeptError>> {
        loop {
            let events = match self.follow.next().await? {
                Ok(events) => events,
                Err(e) => return Some(Err(e)),
            };
            for event in events.iter().filter(|e| e.agent() == Some(self.agent)) {
                self.status.apply(event);
            }
            if let Some(waiting) = &self.status.waiting
                && self.asked.insert(waiting.question.clone())
            {
                return Some(Ok(waiting.clone()));
            }
        }
    }
}

/// Word that some run may have changed (queued, recorded, an event kept): for a front end
/// that shows the list of runs, which reads its page again on each. Made by
/// [`crate::Runs::changes`]; the first call returns at once.
pub struct Changes {
    waker: Waker,
    first: bool,
    /// When the current wait ends where nothing wakes this (files, SQLite). Kept across
    /// calls, so a caller that drops the future for other work (the dashboard's `select!`
    /// on the followed run's events) comes back to the same deadline, not a new second.
    due: Option<Instant>,
}

/// How often the list is read again where nothing can wake it: it changes less than one run's
/// events do.
const LIST_EVERY: Duration = Duration::from_secs(1);

impl Changes {
    pub(crate) fn new(store: RunStore) -> Changes {
        Changes {
            waker: Waker::new(store),
            first: true,
            due: None,
        }
    }

    /// Returns when the runs may have changed since the last call: at once the first time;
    /// then on Postgres's notice (or its slow look), and [`LIST_EVERY`] after the last return
    /// elsewhere, however often the future is dropped and made again meanwhile.
    pub async fn next(&mut self) {
        if std::mem::take(&mut self.first) {
            return;
        }
        let due = *self.due.get_or_insert_with(|| Instant::now() + LIST_EVERY);
        loop {
            match &self.waker.listener {
                Some(Some(_)) => {
                    self.waker.changed(None).await;
                    break;
                }
                Some(None) => {
                    tokio::time::sleep_until(due.into()).await;
                    break;
                }
                // Not opened yet: the first wait opens it (and looks once if there is none).
                None => {
                    self.waker.changed(None).await;
                    let woken = matches!(self.waker.listener, Some(Some(_)));
                    if woken || Instant::now() >= due {
                        break;
                    }
                }
            }
        }
        self.due = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dashboard waits on the list's changes beside the followed run's events, and drops
    /// the wait whenever a batch of events comes first: the list still comes round each
    /// second while a run streams, not only once the stream pauses.
    #[tokio::test]
    async fn a_wait_dropped_again_and_again_still_ends_on_time() {
        let home = tempfile::tempdir().unwrap();
        let mut changes = Changes::new(RunStore::files(home.path()));
        changes.next().await;
        let start = Instant::now();
        let ended = tokio::time::timeout(Duration::from_secs(3), async {
            loop {
                tokio::select! {
                    () = changes.next() => return,
                    // A batch of the followed run's events, ten times a second.
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "the list was never read again");
        let took = start.elapsed();
        assert!(
            took >= LIST_EVERY,
            "read again after {took:?}: sooner than each second"
        );
        assert!(took < LIST_EVERY + Duration::from_millis(500), "{took:?}");
    }
}
