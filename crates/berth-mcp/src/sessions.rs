//! MCP sessions over HTTP, bounded: at most `max` at once, the least recently used closed
//! first, and any session unused for `idle` closed.
//!
//! rmcp's `LocalSessionManager` keeps every session until it expires on its own, and a worker
//! that expires stays in its map; one local client opening sessions and never closing them
//! reached 1.2 GB in 13 s. This wraps it: every use of a session records when, a new session
//! beyond the cap closes the one used longest ago, and a sweep closes idle ones. A closed
//! session's next request gets 404, upon which clients initialize again, as the spec says.
//!
//! A session is in use while a request of it runs or a stream of it is open (the stream a
//! client keeps for notifications), so a connected client that is only listening is not
//! closed as idle; the cap still counts it, since the cap is what bounds memory.
//!
//! A request's response is also held back until its message is ready (for at most
//! [`GATHER`]), so that the head, the SSE priming event and the message leave in one write:
//! each write is a TCP segment of its own, and a client waits for all of them.

use std::collections::{BTreeMap, HashMap};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
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

/// How long a response's head waits for its message. Nearly every request is answered well
/// within it; a longer one (a git checkout with setup commands) gets its head by then, before
/// a client or proxy would give up waiting for one.
const GATHER: Duration = Duration::from_secs(1);

pub struct BoundedSessions {
    inner: LocalSessionManager,
    max: usize,
    idle: Duration,
    book: Arc<Mutex<Book>>,
    /// Sessions closed by the cap, to return freed memory now and then.
    closed: AtomicUsize,
}

/// The open sessions in order of last use.
#[derive(Default)]
struct Book {
    open: HashMap<SessionId, Use>,
    /// Open sessions by their last use, oldest first; keys are a counter, so never equal.
    order: BTreeMap<u64, SessionId>,
    clock: u64,
}

struct Use {
    /// The session's key in `order`.
    tick: u64,
    at: Instant,
    /// Streams of the session open now (a running request, a listening client).
    streams: usize,
}

impl Book {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn insert(&mut self, id: SessionId) {
        let tick = self.tick();
        self.order.insert(tick, id.clone());
        let at = Instant::now();
        self.open.insert(
            id,
            Use {
                tick,
                at,
                streams: 0,
            },
        );
    }

    /// Marks `id` used now; `streams` is added to its count of open streams.
    fn touch(&mut self, id: &SessionId, streams: isize) {
        let tick = self.tick();
        let Some(used) = self.open.get_mut(id) else {
            return;
        };
        self.order.remove(&used.tick);
        used.tick = tick;
        used.at = Instant::now();
        used.streams = used.streams.saturating_add_signed(streams);
        self.order.insert(tick, id.clone());
    }

    fn remove(&mut self, id: &SessionId) -> bool {
        match self.open.remove(id) {
            Some(used) => {
                self.order.remove(&used.tick);
                true
            }
            None => false,
        }
    }

    /// Removes and returns the session used longest ago.
    fn pop_oldest(&mut self) -> Option<SessionId> {
        let (_, id) = self.order.pop_first()?;
        self.open.remove(&id);
        Some(id)
    }

    /// Removes and returns the sessions unused for longer than `idle`, none of whose streams
    /// are open. Only the idle end of the order is looked at.
    fn take_idle(&mut self, idle: Duration) -> Vec<SessionId> {
        let mut stale = Vec::new();
        for id in self.order.values() {
            let used = &self.open[id];
            if used.at.elapsed() <= idle {
                break;
            }
            if used.streams == 0 {
                stale.push(id.clone());
            }
        }
        for id in &stale {
            self.remove(id);
        }
        stale
    }
}

impl BoundedSessions {
    /// A manager of at most `max` sessions, each closed after `idle` without use. Call
    /// [`BoundedSessions::sweep`] on a timer for the idle part.
    pub fn new(max: usize, idle: Duration) -> BoundedSessions {
        let mut inner = LocalSessionManager::default();
        // rmcp's own expiry counts only messages, not open streams, so it would close a
        // client that is listening; it is pushed out of the way, while ours decides.
        inner.session_config.keep_alive = None;
        BoundedSessions {
            inner,
            max: max.max(1),
            idle,
            book: Arc::default(),
            closed: AtomicUsize::new(0),
        }
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        lock(&self.book)
    }

    fn touch(&self, id: &SessionId) {
        self.book().touch(id, 0);
    }

    /// Closes every session unused longer than the limit; returns how many.
    pub async fn sweep(&self) -> usize {
        let stale = self.book().take_idle(self.idle);
        for id in &stale {
            let _ = self.inner.close_session(id).await;
        }
        if !stale.is_empty() {
            release_memory_soon();
        }
        stale.len()
    }

    /// How often [`BoundedSessions::sweep`] should run: often enough that a session outlives
    /// its limit by at most a tenth of it.
    pub fn sweep_every(&self) -> Duration {
        (self.idle / 10).clamp(Duration::from_millis(100), Duration::from_secs(60))
    }

    /// `stream`, counted as a use of session `id` while it is open.
    fn tracked<S>(&self, id: &SessionId, stream: S) -> Tracked<S> {
        self.book().touch(id, 1);
        Tracked {
            inner: Box::pin(stream),
            book: self.book.clone(),
            id: id.clone(),
        }
    }
}

fn lock(book: &Mutex<Book>) -> MutexGuard<'_, Book> {
    book.lock().unwrap_or_else(|e| e.into_inner())
}

/// A session's stream that keeps it in use until dropped.
struct Tracked<S> {
    inner: Pin<Box<S>>,
    book: Arc<Mutex<Book>>,
    id: SessionId,
}

impl<S: Stream> Stream for Tracked<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl<S> Drop for Tracked<S> {
    fn drop(&mut self) {
        lock(&self.book).touch(&self.id, -1);
    }
}

/// `stream` with what it yields within [`GATHER`] gathered first: its messages up to the
/// request's answer and the end of the stream, or up to a notification (progress, a log
/// line), which is passed on at once. Yielded together, they are written together.
async fn gathered<S>(stream: S) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static
where
    S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
{
    let mut stream = Box::pin(stream.fuse());
    let mut ready = Vec::new();
    let until = tokio::time::Instant::now() + GATHER;
    while let Ok(Some(message)) = tokio::time::timeout_at(until, stream.next()).await {
        let answer = matches!(
            message.message.as_deref(),
            None | Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_))
        );
        ready.push(message);
        if !answer {
            break;
        }
    }
    futures::stream::iter(ready).chain(stream)
}

impl SessionManager for BoundedSessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let created = self.inner.create_session().await?;
        let evicted = {
            let mut book = self.book();
            book.insert(created.0.clone());
            // The new session is the newest, so it is never the one popped.
            if book.open.len() > self.max {
                book.pop_oldest()
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
        Ok(self.book().open.contains_key(id) && self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        if self.book().remove(id) {
            release_memory_every(&self.closed, 256);
        }
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_stream(id, message).await?;
        let stream = self.tracked(id, stream);
        Ok(gathered(stream).await)
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
        let stream = self.inner.create_standalone_stream(id).await?;
        Ok(self.tracked(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.resume(id, last_event_id).await?;
        Ok(self.tracked(id, stream))
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

/// Calls [`release_memory_soon`] on every `every`-th call.
fn release_memory_every(count: &AtomicUsize, every: usize) {
    let n = count.fetch_add(1, Ordering::Relaxed) + 1;
    if n.is_multiple_of(every) {
        release_memory_soon();
    }
}

/// [`release_memory`] a moment from now. Closing a session only tells its worker to stop;
/// the worker, its handler and their buffers are freed as those tasks end, after the close
/// returns, and memory trimmed before that stays with the process (measured: 30 MiB left
/// after 20,000 sessions expired, against 12 MiB idle).
fn release_memory_soon() {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            release_memory();
        });
    } else {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> SessionId {
        SessionId::from(s)
    }

    fn message(value: serde_json::Value) -> ServerSseMessage {
        ServerSseMessage::from_message(serde_json::from_value(value).unwrap())
    }

    fn answer() -> ServerSseMessage {
        message(serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {}}))
    }

    /// A request's stream as rmcp makes it: a priming event now, the rest as `later` says.
    fn request_stream(
        later: Vec<(u64, ServerSseMessage)>,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
        let first = futures::stream::iter([ServerSseMessage::priming("0", Duration::from_secs(3))]);
        let rest = futures::stream::iter(later).then(|(ms, m)| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            m
        });
        first.chain(rest)
    }

    /// How many items the stream has ready right away (what one write would carry), and
    /// whether it has ended.
    fn ready_now(stream: impl Stream<Item = ServerSseMessage>) -> (usize, bool) {
        use futures::FutureExt;
        let mut stream = Box::pin(stream);
        let mut n = 0;
        loop {
            match stream.next().now_or_never() {
                Some(Some(_)) => n += 1,
                Some(None) => return (n, true),
                None => return (n, false),
            }
        }
    }

    #[tokio::test]
    async fn an_answer_and_the_end_are_gathered_with_the_priming_event() {
        let start = Instant::now();
        let stream = gathered(request_stream(vec![(30, answer())])).await;
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert_eq!(ready_now(stream), (2, true));
    }

    #[tokio::test]
    async fn a_notification_is_passed_on_at_once() {
        let progress = message(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1}
        }));
        let stream = gathered(request_stream(vec![(10, progress), (400, answer())])).await;
        // The priming event and the notification, not waiting for the answer.
        assert_eq!(ready_now(stream), (2, false));
    }

    #[tokio::test]
    async fn a_slow_answer_gets_its_head_after_the_gathering_time() {
        let start = Instant::now();
        let stream = gathered(request_stream(vec![(1500, answer())])).await;
        let waited = start.elapsed();
        assert!(
            waited >= GATHER && waited < Duration::from_millis(1400),
            "{waited:?}"
        );
        assert_eq!(ready_now(stream), (1, false));
    }

    #[test]
    fn the_least_recently_used_is_popped_first() {
        let mut book = Book::default();
        for s in ["a", "b", "c"] {
            book.insert(id(s));
        }
        book.touch(&id("a"), 0);
        assert_eq!(book.pop_oldest(), Some(id("b")));
        assert_eq!(book.pop_oldest(), Some(id("c")));
        assert_eq!(book.pop_oldest(), Some(id("a")));
        assert_eq!(book.pop_oldest(), None);
        assert!(book.open.is_empty());
    }

    #[test]
    fn only_idle_sessions_without_open_streams_are_taken() {
        let mut book = Book::default();
        for s in ["idle", "listening", "busy"] {
            book.insert(id(s));
        }
        book.touch(&id("listening"), 1);
        std::thread::sleep(Duration::from_millis(30));
        book.touch(&id("busy"), 0);
        assert_eq!(book.take_idle(Duration::from_millis(20)), vec![id("idle")]);
        assert!(book.open.contains_key(&id("listening")));
        // Once its stream closes, the listening session is used as of then.
        book.touch(&id("listening"), -1);
        assert!(book.take_idle(Duration::from_millis(20)).is_empty());
        std::thread::sleep(Duration::from_millis(30));
        let mut rest = book.take_idle(Duration::from_millis(20));
        rest.sort();
        assert_eq!(rest, vec![id("busy"), id("listening")]);
        assert!(book.order.is_empty());
    }
}
