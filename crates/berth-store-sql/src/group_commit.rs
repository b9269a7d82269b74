//! Transcript appends on SQLite, committed in groups.
//!
//! With `synchronous = FULL` every commit waits for the disk, and SQLite has one writer at a
//! time: fifty turns that each append their prompt at once made fifty commits in a row, each
//! behind a lock and a sync, before the last one could ask its model. Appends that arrive
//! together now go into one transaction, one sync: the first to arrive starts a leader task,
//! which takes every append waiting, writes each under a savepoint of its own (one that
//! fails, a closed session, fails alone), commits, answers each, and goes again until none
//! waits. Each append is still committed before it returns.
//!
//! The leader is a task of its own, not the caller's future: a caller that gives up (its turn
//! cancelled) never strands the others. It lives only while appends wait, so the store keeps
//! no task in any runtime.

use std::sync::Mutex;

use berth_core::transcript::Message;
use berth_core::{Error, SessionId};
use tokio::sync::oneshot;

use crate::SqlStore;

/// Appends waiting for the leader, and whether one is at work.
#[derive(Default)]
pub(crate) struct Appends {
    queue: Mutex<Queue>,
    /// How many transactions the leader committed, for tests.
    #[cfg(test)]
    pub(crate) commits: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Pending>,
    leading: bool,
}

struct Pending {
    id: SessionId,
    message: Message,
    done: oneshot::Sender<berth_core::Result<()>>,
}

/// The most appends one transaction takes.
const MOST: usize = 256;

impl SqlStore {
    /// Appends `message`, committed with the appends that arrive with it.
    pub(crate) async fn append_grouped(
        &self,
        id: &SessionId,
        message: &Message,
    ) -> berth_core::Result<()> {
        let (done, answer) = oneshot::channel();
        let lead = {
            let mut queue = lock(&self.appends().queue);
            queue.waiting.push(Pending {
                id: id.clone(),
                message: message.clone(),
                done,
            });
            !std::mem::replace(&mut queue.leading, true)
        };
        if lead {
            let store = self.clone();
            tokio::spawn(async move { store.lead().await });
        }
        answer.await.unwrap_or_else(|_| {
            Err(Error::io(
                "the append's group commit ended without an answer",
                std::io::Error::other("its task stopped"),
            ))
        })
    }

    /// Commits groups until no append waits.
    async fn lead(&self) {
        // Should this task stop before the queue is empty (a panic, its runtime ending), the
        // next append leads again, and those waiting hear that their group is gone.
        let mut stepping_down = SteppingDown(Some(self));
        loop {
            let group: Vec<Pending> = {
                let mut queue = lock(&self.appends().queue);
                if queue.waiting.is_empty() {
                    queue.leading = false;
                    // Given back here, under the lock: a new append may lead at once.
                    stepping_down.0 = None;
                    return;
                }
                let take = queue.waiting.len().min(MOST);
                queue.waiting.drain(..take).collect()
            };
            self.commit_group(group).await;
        }
    }

    /// One transaction for `group`, each append under a savepoint; answers each.
    async fn commit_group(&self, group: Vec<Pending>) {
        let mut tx = match self.pool().begin().await {
            Ok(tx) => tx,
            Err(e) => return fail_all(group, &self.err(e).to_string()),
        };
        let mut answers = Vec::with_capacity(group.len());
        for p in &group {
            let one = async {
                tx.exec("SAVEPOINT one_append", &[]).await?;
                let appended = self.append_in(&mut tx, &p.id, &p.message).await;
                match appended {
                    Ok(()) => tx.exec("RELEASE one_append", &[]).await.map(drop),
                    Err(e) => {
                        tx.exec("ROLLBACK TO one_append", &[]).await?;
                        tx.exec("RELEASE one_append", &[]).await?;
                        Err(e)
                    }
                }
            };
            answers.push(one.await.map_err(|e| self.err(e)));
        }
        match tx.commit().await {
            Ok(()) => {
                #[cfg(test)]
                self.appends()
                    .commits
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                for (p, answer) in group.into_iter().zip(answers) {
                    let _ = p.done.send(answer);
                }
            }
            Err(e) => fail_all(group, &self.err(e).to_string()),
        }
    }
}

/// Answers every append of a group that could not be committed.
fn fail_all(group: Vec<Pending>, why: &str) {
    for p in group {
        let _ = p.done.send(Err(Error::io(
            format!("cannot append to session {}", p.id),
            std::io::Error::other(why.to_owned()),
        )));
    }
}

/// Gives the lead back when the leader stops before the queue is empty (a panic, its runtime
/// ending): the appends still waiting fail (their senders dropped), and the next append leads.
struct SteppingDown<'a>(Option<&'a SqlStore>);

impl Drop for SteppingDown<'_> {
    fn drop(&mut self) {
        if let Some(store) = self.0 {
            let mut queue = lock(&store.appends().queue);
            queue.leading = false;
            queue.waiting.clear();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
