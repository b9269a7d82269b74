//! A turn's answer kept aside while it streams (`Ops::keep_partial_answer`), so that a process
//! killed mid-answer does not lose what the person saw.

use std::sync::{Arc, Mutex};

use berth_ops::{Ops, Session};

/// How often the answer streaming is kept aside (`Ops::keep_partial_answer`), so a process
/// killed mid-answer loses at most this much of what the person saw. An answer shorter than
/// this is never kept aside at all.
const KEEP_PARTIAL_EVERY: std::time::Duration = std::time::Duration::from_millis(300);

/// Keeps the answer streaming aside every [`KEEP_PARTIAL_EVERY`] (`Ops::keep_partial_answer`),
/// on a task of its own, so streaming never waits for the disk: what a killed process's
/// person saw is found by whoever opens the session next.
pub(super) struct PartialKeeper {
    text: Arc<Mutex<String>>,
    changed: Arc<tokio::sync::Notify>,
    task: tokio::task::JoinHandle<()>,
    wrote: Arc<std::sync::atomic::AtomicBool>,
}

impl PartialKeeper {
    pub(super) fn start(ops: Ops, session: Session, written: usize) -> PartialKeeper {
        let text = Arc::new(Mutex::new(String::new()));
        let changed = Arc::new(tokio::sync::Notify::new());
        let wrote = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let task = {
            let (text, changed, wrote) = (text.clone(), changed.clone(), wrote.clone());
            tokio::spawn(async move {
                // How much of the text is kept already: the first keep writes the file (whole,
                // durably), and the ones after append what came since, so each costs one
                // write, not a new file and a sync.
                let mut kept = 0;
                loop {
                    changed.notified().await;
                    tokio::time::sleep(KEEP_PARTIAL_EVERY).await;
                    let now = text.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    let done = match kept {
                        0 => ops.keep_partial_answer(&session, written, &now).await,
                        _ => match ops.extend_partial_answer(&session, &now[kept..]).await {
                            // Gone meanwhile: written whole again.
                            Err(e) if e.kind() == berth_ops::ErrorKind::NotFound => {
                                ops.keep_partial_answer(&session, written, &now).await
                            }
                            other => other,
                        },
                    };
                    if done.is_ok() {
                        kept = now.len();
                        wrote.store(true, std::sync::atomic::Ordering::Release);
                    } else {
                        // What a failed append left is not known: the next keep writes whole.
                        kept = 0;
                    }
                }
            })
        };
        PartialKeeper {
            text,
            changed,
            task,
            wrote,
        }
    }

    /// A piece of the answer was shown.
    pub(super) fn show(&self, piece: &str) {
        self.text
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_str(piece);
        self.changed.notify_one();
    }

    /// Stops keeping; whether anything was kept aside (to forget once the answer is written).
    /// A write under way may still land: the transcript's length then tells it stale.
    pub(super) fn stop(self) -> bool {
        self.task.abort();
        self.wrote.load(std::sync::atomic::Ordering::Acquire)
    }
}
