//! Postgres's notices of runs (`LISTEN`), heard on one connection per store and handed to
//! every listener of the process.
//!
//! A listener used to take a connection of the store's pool and keep it for as long as it
//! listened: a worker, and every follower of a run (the dashboard, `run logs -f`, each ACP
//! session an agent of a run works in). Sixteen of them in one `berth serve` (the pool's
//! size) left no connection for anything else, and every query then waited. Now the first
//! listener opens one connection of its own, outside the pool, and a task reads it for all.

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use tokio::sync::{Mutex, broadcast};
use tokio::task::JoinHandle;

use crate::Result;
use crate::runs::{RUN_CHANGES_CHANNEL, RUNS_CHANNEL};

/// How many notices a slow listener may fall behind before it is told it missed some.
const BEHIND: usize = 1024;

/// What the connection heard.
#[derive(Debug, Clone)]
enum Heard {
    /// A notice: its channel and its payload (a run's id).
    Notice { channel: String, run: String },
    /// Notices may have been lost: the connection broke and was made again.
    Missed,
}

/// The store's one listening connection, made when first asked for; shared by the store's
/// clones.
#[derive(Default)]
pub(crate) struct Notices {
    hub: Mutex<Option<Hub>>,
}

struct Hub {
    heard: broadcast::Sender<Heard>,
    reader: JoinHandle<()>,
}

impl Notices {
    /// A listener of `channels`, on the connection this store listens on (made now, with
    /// the options of `pool`, if there is none yet or its reader ended with its runtime).
    pub(crate) async fn listen(
        &self,
        pool: &PgPool,
        channels: &'static [&'static str],
    ) -> Result<RunsListener> {
        let mut hub = self.hub.lock().await;
        if let Some(h) = hub.as_ref().filter(|h| !h.reader.is_finished()) {
            return Ok(RunsListener {
                heard: h.heard.subscribe(),
                channels,
            });
        }
        // A pool of one, so sqlx makes the connection again when it breaks; not the store's.
        let own = PgPoolOptions::new()
            .max_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_lazy_with((*pool.connect_options()).clone());
        let mut listener = PgListener::connect_with(&own).await?;
        listener
            .listen_all([RUNS_CHANNEL, RUN_CHANGES_CHANNEL])
            .await?;
        let (heard, receiver) = broadcast::channel(BEHIND);
        let reader = tokio::spawn(read(listener, heard.clone()));
        *hub = Some(Hub { heard, reader });
        Ok(RunsListener {
            heard: receiver,
            channels,
        })
    }
}

/// Hands on what `listener` hears until the process ends (or the runtime it was made on).
async fn read(mut listener: PgListener, heard: broadcast::Sender<Heard>) {
    loop {
        // `None`: the connection was lost and made again, and a notice sent meanwhile is lost.
        let next = match listener.try_recv().await {
            Ok(Some(notice)) => Heard::Notice {
                channel: notice.channel().to_owned(),
                run: notice.payload().to_owned(),
            },
            Ok(None) => Heard::Missed,
            Err(e) => {
                tracing::debug!("the runs' listening connection broke: {e}; making it again");
                tokio::time::sleep(Duration::from_secs(1)).await;
                Heard::Missed
            }
        };
        // No listener now is no error: one may come.
        let _ = heard.send(next);
    }
}

/// Postgres's notices of queued or changed runs, for one worker or follower.
pub struct RunsListener {
    heard: broadcast::Receiver<Heard>,
    channels: &'static [&'static str],
}

impl RunsListener {
    /// Waits for the next run queued (or changed, for a follower): its id; `None` when
    /// notices may have been missed (the connection broke, or this listener fell behind),
    /// so any run may have changed. An error once the connection's reader is gone.
    pub async fn next(&mut self) -> std::result::Result<Option<String>, String> {
        loop {
            match self.heard.recv().await {
                Ok(Heard::Notice { channel, run }) if self.channels.contains(&channel.as_str()) => {
                    return Ok(Some(run));
                }
                Ok(Heard::Notice { .. }) => {}
                Ok(Heard::Missed) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    return Ok(None);
                }
                Err(broadcast::error::RecvError::Closed) => {
                    return Err("the runs' listening connection is gone".to_owned());
                }
            }
        }
    }
}
