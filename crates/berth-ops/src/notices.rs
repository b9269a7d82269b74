//! The home's notifications (`[[notify]]` in its config, and `[serve] public_url` for links):
//! every part of berth that knows of an event tells [`Ops::notify`], which queues it and
//! returns (`berth_notify` delivers it). The notifier is made with the first notice, inside
//! the runtime that sends it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use berth_core::config::{Config, NotifySettings};
use berth_notify::Notifier;
pub use berth_notify::{Delivery, Notice, NotifyEvent, deliveries, node_name, sink_label};

use crate::Ops;

/// The file each delivery's outcome is kept in, in the home.
pub const LOG: &str = "notify.log";

pub(crate) struct Notices {
    entries: Vec<NotifySettings>,
    public_url: Option<String>,
    log: PathBuf,
    notifier: OnceLock<Notifier>,
}

impl Notices {
    pub(crate) fn new(home: &Path, config: &Config) -> Notices {
        Notices {
            entries: config.notify.clone(),
            public_url: config.serve.public_url.clone(),
            log: home.join(LOG),
            notifier: OnceLock::new(),
        }
    }

    fn notifier(&self) -> &Notifier {
        self.notifier.get_or_init(|| {
            Notifier::new(
                self.entries.clone(),
                self.public_url.clone(),
                self.log.clone(),
            )
        })
    }
}

impl Ops {
    /// Tells the `[[notify]]` entries of `notice`: queued, never waited for. Outside a tokio
    /// runtime nothing is sent.
    pub fn notify(&self, notice: Notice) {
        if self.notices.entries.is_empty() || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        self.notices.notifier().send(notice);
    }

    /// Whether any `[[notify]]` entry is set: a caller may skip making notices otherwise.
    pub fn notifications_on(&self) -> bool {
        !self.notices.entries.is_empty()
    }

    /// Waits, for at most `within`, until the notices sent so far are delivered or given up:
    /// for a process about to exit.
    pub async fn flush_notices(&self, within: Duration) {
        if let Some(notifier) = self.notices.notifier.get() {
            notifier.flush(within).await;
        }
    }
}
