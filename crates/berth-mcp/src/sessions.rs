//! MCP sessions over HTTP, bounded: at most `max` at once, the least recently used closed
//! first, and any session idle for `idle` closed.
//!
//! rmcp's `LocalSessionManager` keeps every session until it expires on its own, and a worker
//! that expires stays in its map; one local client opening sessions and never closing them
//! reached 1.2 GB in 13 s. This wraps it: every use of a session records when, a new session
//! beyond the cap closes the one used longest ago, and a sweep closes idle ones. A closed
//! session's next request gets 404, upon which clients initialize again, as the spec says.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{EventStore, ServerSseMessage};
use rmcp::transport::streamable_http_server::{RestoreOutcome, SessionId, SessionManager};

/// Sessions kept at once unless `--max-sessions` says otherwise: ample for the agents of one
/// machine, and about 60 MB at the ~59 KB a session costs.
pub const DEFAULT_MAX_SESSIONS: usize = 1000;

/// How long a session may go unused unless `--session-idle-timeout` says otherwise.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(30 * 60);

pub struct BoundedSessions {
    inner: LocalSessionManager,
    max: usize,
    idle: Duration,
    /// When each open session was last used.
    used: Mutex<HashMap<SessionId, Instant>>,
    /// Sessions closed by the cap, to return freed memory now and then.
    closed: std::sync::atomic::AtomicUsize,
}

impl BoundedSessions {
    /// A manager of at most `max` sessions, each closed after `idle` without use. Call
    /// [`BoundedSessions::sweep`] on a timer for the idle part.
    pub fn new(max: usize, idle: Duration) -> BoundedSessions {
        let mut inner = LocalSessionManager::default();
        // rmcp's own expiry is only a safety net, after ours: a session it expires stays in
        // its map, and answers errors instead of 404.
        inner.session_config.keep_alive = Some(idle + Duration::from_secs(60));
        BoundedSessions {
            inner,
            max: max.max(1),
            idle,
            used: Mutex::default(),
            closed: Default::default(),
        }
    }

    fn used(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Instant>> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn touch(&self, id: &SessionId) {
        if let Some(at) = self.used().get_mut(id) {
            *at = Instant::now();
        }
    }

    /// Closes every session idle longer than the limit; returns how many.
    pub async fn sweep(&self) -> usize {
        let stale: Vec<SessionId> = {
            let used = self.used();
            used.iter()
                .filter(|(_, at)| at.elapsed() > self.idle)
                .map(|(id, _)| id.clone())
                .collect()
        };
        for id in &stale {
            let _ = self.close_session(id).await;
        }
        if !stale.is_empty() {
            release_memory();
        }
        stale.len()
    }

    /// How often [`BoundedSessions::sweep`] should run: often enough that a session outlives
    /// its limit by at most a tenth of it.
    pub fn sweep_every(&self) -> Duration {
        (self.idle / 10).clamp(Duration::from_millis(100), Duration::from_secs(60))
    }
}

impl SessionManager for BoundedSessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let created = self.inner.create_session().await?;
        let evicted = {
            let mut used = self.used();
            used.insert(created.0.clone(), Instant::now());
            if used.len() > self.max {
                let oldest = used
                    .iter()
                    .filter(|(id, _)| **id != created.0)
                    .min_by_key(|(_, at)| **at)
                    .map(|(id, _)| id.clone());
                if let Some(id) = &oldest {
                    used.remove(id);
                }
                oldest
            } else {
                None
            }
        };
        if let Some(id) = evicted {
            let _ = self.inner.close_session(&id).await;
            release_memory_every(&self.closed, 256);
        }
        Ok(created)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        // What the cap or the sweep closed is gone, whatever rmcp's map still holds.
        Ok(self.used().contains_key(id) && self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.used().remove(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        self.inner.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

/// Calls [`release_memory`] on every `every`-th call.
fn release_memory_every(count: &std::sync::atomic::AtomicUsize, every: usize) {
    let n = count.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    if n.is_multiple_of(every) {
        release_memory();
    }
}

/// Hands memory that closed sessions freed back to the system. glibc's allocator keeps freed
/// memory in its arenas; without this, a server that once held thousands of sessions stays that
/// size after they are gone.
fn release_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator's own to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}
