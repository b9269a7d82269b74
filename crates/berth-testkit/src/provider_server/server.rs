//! The server itself: the listener, the queue of scripted replies, and the record of every
//! request, shared by the accept loop and the test that owns the [`ProviderServer`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::connection::serve;
use super::reply::Reply;

/// A running provider server. Cloning is not offered: one owner stops it by dropping it.
pub struct ProviderServer {
    url: String,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub(super) struct Shared {
    state: Mutex<State>,
    /// Whether new connections leave Nagle's algorithm on (see [`ProviderServer::set_nagle`]).
    nagle: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) replies: VecDeque<Reply>,
    pub(super) requests: Vec<RecordedRequest>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock must not hide its own failure behind a
        // poisoned-lock panic in every later call.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ProviderServer {
    /// Starts the server on `127.0.0.1` (a free port) as a task of the current tokio runtime.
    ///
    /// The server only runs while that runtime does: in a test that blocks its thread (waits on
    /// a child process, say) on a current-thread runtime, use [`start_in_background`].
    ///
    /// [`start_in_background`]: ProviderServer::start_in_background
    pub async fn start() -> ProviderServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a port on 127.0.0.1 for the provider server");
        let url = format!(
            "http://{}",
            listener.local_addr().expect("the server's address")
        );
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            nagle: Default::default(),
        });
        let (stop, stop_rx) = watch::channel(false);
        tokio::spawn(accept_loop(listener, shared.clone(), stop_rx));
        ProviderServer {
            url,
            shared,
            stop,
            thread: None,
        }
    }

    /// Starts the server on a thread of its own, with its own tokio runtime: for a plain
    /// `#[test]`, or one that blocks while a child process talks to the server.
    pub fn start_in_background() -> ProviderServer {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind a port on 127.0.0.1 for the provider server");
        std_listener
            .set_nonblocking(true)
            .expect("make the provider server's socket non-blocking");
        let url = format!(
            "http://{}",
            std_listener.local_addr().expect("the server's address")
        );
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            nagle: Default::default(),
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("provider-server".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a tokio runtime for the provider server");
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(std_listener)
                        .expect("hand the provider server's socket to tokio");
                    accept_loop(listener, thread_shared, stop_rx).await;
                });
            })
            .expect("spawn the provider server's thread");
        ProviderServer {
            url,
            shared,
            stop: stop_tx,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Queues `reply` as the answer to the next request that has none yet. Replies are used
    /// in order, one per request, whatever the request's path. A request that finds the queue
    /// empty is answered `400` with a JSON error that says so (a 4xx, so that a client does
    /// not retry it into more confusion).
    pub fn push(&self, reply: Reply) -> &Self {
        self.shared.lock().replies.push_back(reply);
        self
    }

    /// Leaves Nagle's algorithm on for the connections accepted from now on, so that events
    /// written in a burst are coalesced into few TCP segments while the client has not yet
    /// acknowledged the last. Off by default, as on the providers' own servers.
    pub fn set_nagle(&self, on: bool) {
        self.shared
            .nagle
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Every request received so far, in arrival order. A request is recorded before its
    /// reply is written, so once a client saw a response its request is here.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// How many requests arrived so far.
    pub fn request_count(&self) -> usize {
        self.shared.lock().requests.len()
    }

    /// How many queued replies no request has used yet.
    pub fn pending_replies(&self) -> usize {
        self.shared.lock().replies.len()
    }
}

impl Drop for ProviderServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            // The accept loop stops at once; a connection still being answered is dropped
            // with its runtime.
            let _ = thread.join();
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                // As the providers' servers do (Go's net/http and most front proxies set it on
                // every connection): each flushed event leaves at once instead of waiting, under
                // Nagle's algorithm, for the client to acknowledge the one before.
                let _ = stream.set_nodelay(!shared.nagle.load(std::sync::atomic::Ordering::Relaxed));
                let shared = shared.clone();
                let stop = stop.clone();
                tokio::spawn(async move {
                    let mut stop = stop;
                    tokio::select! {
                        _ = stop.changed() => {}
                        _ = serve(stream, shared) => {}
                    }
                });
            }
        }
    }
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// The request target: the path with its query string (`/v1beta/models/m:x?alt=sse`).
    pub path: String,
    /// Header names in lower case, values as sent, in order.
    pub headers: Vec<(String, String)>,
    /// The body as JSON; `Value::Null` when it is empty or not JSON (see `raw_body`).
    pub body: Value,
    pub raw_body: Vec<u8>,
    /// When its whole body had arrived: the moment the reply (and its `delay_head`) starts.
    pub received_at: std::time::Instant,
}

impl RecordedRequest {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The query string of the path, without the `?` (empty when none).
    pub fn query(&self) -> &str {
        self.path.split_once('?').map_or("", |(_, q)| q)
    }

    /// Whether `needle` appears anywhere in the request line or the headers: to assert that a
    /// secret was sent only where it belongs.
    pub fn head_contains(&self, needle: &str) -> bool {
        self.path.contains(needle)
            || self
                .headers
                .iter()
                .any(|(n, v)| n.contains(needle) || v.contains(needle))
    }
}
