//! Local stand-ins for the LLM providers: a small, real HTTP/1.1 server on `127.0.0.1` that
//! records every request and answers each from a script, with the exact bytes the test asks
//! for, and builders for each provider's real streaming wire format.
//!
//! The server is hand-rolled on a tokio `TcpListener` rather than built on an HTTP library so
//! that a test controls the bytes exactly: where a chunk ends (inside a UTF-8 character, if it
//! likes), how long the server pauses between chunks, and whether the connection is cut in the
//! middle of a body. Every response says `Connection: close`, so each request gets a
//! connection of its own and nothing depends on a client's connection pooling.
//!
//! ```no_run
//! # async fn demo() {
//! use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
//! let server = ProviderServer::start().await;
//! server.push(Reply::anthropic(&Turn::new().text(["Hel", "lo"])));
//! // ... point the provider at server.url() and run it ...
//! let requests = server.requests();
//! assert_eq!(requests[0].path, "/v1/messages");
//! # }
//! ```
//!
//! - [`ProviderServer::start`] runs the server as a task on the caller's tokio runtime (a
//!   `#[tokio::test]`); [`ProviderServer::start_in_background`] runs it on a runtime thread of
//!   its own, for a plain `#[test]` that blocks (on a child process running `berth`, say).
//!   Either way, dropping the [`ProviderServer`] stops it.
//! - [`Reply`] is one scripted answer: a status, headers, and a body written chunk by chunk
//!   (each flushed), with optional pauses, optionally cut off before its end.
//! - [`Turn`] describes a model's answer in no dialect (text, thinking, tool calls with their
//!   JSON in pieces, why it stopped, usage); [`Turn::anthropic_events`],
//!   [`Turn::openai_events`] and [`Turn::gemini_events`] spell it as each provider streams it,
//!   and [`Reply::anthropic`], [`Reply::openai`] and [`Reply::gemini`] wrap those in a reply.
//! - [`Reply::anthropic_error`], [`Reply::openai_error`] and [`Reply::gemini_error`] are error
//!   answers in each provider's documented shape; [`anthropic_stream_error`] and
//!   [`data_error`] are error events inside a stream.
//!
//! Base URLs as berth's providers take them: Anthropic and Gemini use [`ProviderServer::url`]
//! as it is; OpenAI's base URL carries the version, so `format!("{}/v1", server.url())`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running provider server. Cloning is not offered: one owner stops it by dropping it.
pub struct ProviderServer {
    url: String,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    state: Mutex<State>,
    /// Whether new connections leave Nagle's algorithm on (see [`ProviderServer::set_nagle`]).
    nagle: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    requests: Vec<RecordedRequest>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
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

/// How a body's end is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`: each piece is one HTTP chunk; a cut leaves the client
    /// without the final zero-length chunk, which it sees as a broken body.
    Chunked,
    /// `Content-Length` of all the pieces; a cut leaves the body short.
    Length,
    /// Neither: the body ends when the connection closes, so a cut looks like a clean end
    /// to HTTP and only the dialect can tell the answer was not finished.
    Close,
}

#[derive(Debug, Clone)]
enum Piece {
    Bytes(Vec<u8>),
    Pause(Duration),
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    pieces: Vec<Piece>,
    framing: Framing,
    /// Set by a cut: the length of the whole body, of which only a part is written.
    cut: Option<usize>,
    head_delay: Duration,
}

impl Reply {
    /// A reply with `status`, `content_type`, and no body yet (add it with [`Reply::chunk`]).
    pub fn new(status: u16, content_type: &str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            pieces: Vec::new(),
            framing: Framing::Chunked,
            cut: None,
            head_delay: Duration::ZERO,
        }
    }

    /// `200` with `text/event-stream`, chunked, each event (a complete `event:`/`data:` block
    /// with its blank line) written and flushed as one chunk.
    pub fn sse<I, S>(events: I) -> Reply
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        events
            .into_iter()
            .fold(Reply::new(200, "text/event-stream"), |r, e| {
                r.chunk(e.into().into_bytes())
            })
    }

    /// Like [`Reply::sse`], with the chunks given as bytes: to split a UTF-8 character across
    /// chunks, or an event across several.
    pub fn sse_bytes<I>(chunks: I) -> Reply
    where
        I: IntoIterator<Item = Vec<u8>>,
    {
        chunks
            .into_iter()
            .fold(Reply::new(200, "text/event-stream"), Reply::chunk)
    }

    /// `status` with a JSON body, sent with a `Content-Length`.
    pub fn json(status: u16, body: &Value) -> Reply {
        Reply::new(status, "application/json")
            .chunk(body.to_string().into_bytes())
            .framing(Framing::Length)
    }

    /// The Anthropic Messages stream of `turn`.
    pub fn anthropic(turn: &Turn) -> Reply {
        Reply::sse(turn.anthropic_events())
    }

    /// The OpenAI Chat Completions stream of `turn`.
    pub fn openai(turn: &Turn) -> Reply {
        Reply::sse(turn.openai_events())
    }

    /// The Gemini `streamGenerateContent?alt=sse` stream of `turn`.
    pub fn gemini(turn: &Turn) -> Reply {
        Reply::sse(turn.gemini_events())
    }

    /// An Anthropic error answer: `{"type":"error","error":{"type":…,"message":…}}`, with the
    /// error type Anthropic documents for `status`.
    pub fn anthropic_error(status: u16, message: &str) -> Reply {
        let kind = match status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            402 => "billing_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            504 => "timeout_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        Reply::json(
            status,
            &json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }

    /// An OpenAI error answer: `{"error":{"message":…,"type":…,"param":null,"code":…}}`.
    pub fn openai_error(status: u16, message: &str) -> Reply {
        let (kind, code) = match status {
            401 => ("invalid_request_error", json!("invalid_api_key")),
            429 => ("requests", json!("rate_limit_exceeded")),
            500..=599 => ("server_error", Value::Null),
            _ => ("invalid_request_error", Value::Null),
        };
        Reply::json(
            status,
            &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
        )
    }

    /// A Gemini (Google API) error answer: `{"error":{"code":…,"message":…,"status":…}}`.
    pub fn gemini_error(status: u16, message: &str) -> Reply {
        Reply::json(
            status,
            &json!({"error": {"code": status, "message": message, "status": google_status(status)}}),
        )
    }

    /// Adds a header (`Retry-After`, say).
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers
            .push((name.to_ascii_lowercase(), value.to_owned()));
        self
    }

    /// Appends a chunk of body.
    pub fn chunk(mut self, bytes: impl Into<Vec<u8>>) -> Reply {
        self.pieces.push(Piece::Bytes(bytes.into()));
        self
    }

    /// Appends a pause: the next chunk is written `delay` after the previous one.
    pub fn pause(mut self, delay: Duration) -> Reply {
        self.pieces.push(Piece::Pause(delay));
        self
    }

    /// Pauses for `delay` after the first `chunks` chunks.
    pub fn pause_after(mut self, chunks: usize, delay: Duration) -> Reply {
        let at = self.piece_index_after(chunks);
        self.pieces.insert(at, Piece::Pause(delay));
        self
    }

    /// Pauses for `delay` between every two chunks.
    pub fn pause_between(mut self, delay: Duration) -> Reply {
        let mut pieces = Vec::with_capacity(self.pieces.len() * 2);
        for piece in self.pieces {
            if matches!(piece, Piece::Bytes(_)) && !pieces.is_empty() {
                pieces.push(Piece::Pause(delay));
            }
            pieces.push(piece);
        }
        self.pieces = pieces;
        self
    }

    /// Waits `delay` before writing the status line: a slow first byte.
    pub fn delay_head(mut self, delay: Duration) -> Reply {
        self.head_delay = delay;
        self
    }

    /// Writes only the first `chunks` chunks, then closes the connection without ending the
    /// body (see [`Framing`] for what the client sees).
    pub fn cut_after(mut self, chunks: usize) -> Reply {
        let full = self.body_len();
        let at = self.piece_index_after(chunks);
        self.pieces.truncate(at);
        self.cut = Some(self.cut.unwrap_or(full));
        self
    }

    /// How the body's end is marked; [`Framing::Chunked`] unless said otherwise.
    pub fn framing(mut self, framing: Framing) -> Reply {
        self.framing = framing;
        self
    }

    fn body_len(&self) -> usize {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Bytes(b) => b.len(),
                Piece::Pause(_) => 0,
            })
            .sum()
    }

    /// The index in `pieces` just after the `chunks`-th chunk of bytes.
    fn piece_index_after(&self, chunks: usize) -> usize {
        let mut seen = 0;
        for (i, piece) in self.pieces.iter().enumerate() {
            if seen == chunks {
                return i;
            }
            if matches!(piece, Piece::Bytes(_)) {
                seen += 1;
            }
        }
        self.pieces.len()
    }
}

fn google_status(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

/// An Anthropic `error` event inside a stream (`overloaded_error`, say).
pub fn anthropic_stream_error(kind: &str, message: &str) -> String {
    sse_event(
        Some("error"),
        &json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

/// An error as OpenAI-compatible servers and Gemini send one inside a stream: a `data:` line
/// holding `{"error":{"message":…,"code":…}}`.
pub fn data_error(code: u16, message: &str) -> String {
    sse_event(
        None,
        &json!({"error": {"code": code, "message": message, "status": google_status(code)}}),
    )
}

/// One server-sent event: an optional `event:` line, one `data:` line, and the blank line.
pub fn sse_event(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

// ---------------------------------------------------------------------------------------
// The turn, in no dialect, and how each provider streams it.

/// Why the model stopped, in no dialect; each dialect spells it its own way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    EndTurn,
    ToolUse,
    MaxTokens,
    Refusal,
    /// Sent as it is (`"pause_turn"`, `"RECITATION"`, …).
    Raw(String),
}

/// One part of a model's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Visible text in pieces. `signature` is Gemini's `thoughtSignature` on a text part (on
    /// the last piece); the other dialects ignore it.
    Text {
        deltas: Vec<String>,
        signature: Option<String>,
    },
    /// Reasoning in pieces, with Anthropic's `signature` (Gemini: the `thoughtSignature` of
    /// the last thought part; OpenAI-compatible servers stream it as `reasoning_content` and
    /// have no signature).
    Thinking {
        deltas: Vec<String>,
        signature: String,
    },
    /// Anthropic's `redacted_thinking` block; the other dialects leave it out.
    RedactedThinking { data: String },
    /// A tool call whose arguments are streamed in `pieces` (Anthropic `input_json_delta`s,
    /// OpenAI `arguments` deltas). Gemini sends a call whole, so there the pieces are joined
    /// and must make JSON. An empty `id` is left out where the dialect allows (Gemini).
    /// `signature` is Gemini's `thoughtSignature` on the call's part.
    ToolCall {
        id: String,
        name: String,
        pieces: Vec<String>,
        signature: Option<String>,
    },
}

/// A model's answer in no dialect, built with the chained methods.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub blocks: Vec<Block>,
    /// `None`: `ToolUse` when the turn has tool calls, else `EndTurn`.
    pub stop: Option<Stop>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub model: String,
}

impl Default for Turn {
    fn default() -> Turn {
        Turn::new()
    }
}

fn strings<I, S>(items: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    items.into_iter().map(Into::into).collect()
}

impl Turn {
    pub fn new() -> Turn {
        Turn {
            blocks: Vec::new(),
            stop: None,
            input_tokens: 12,
            output_tokens: 7,
            model: "test-model".into(),
        }
    }

    /// Text, streamed as `deltas`.
    pub fn text<I, S>(mut self, deltas: I) -> Turn
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.blocks.push(Block::Text {
            deltas: strings(deltas),
            signature: None,
        });
        self
    }

    /// Text whose last part carries Gemini's `thoughtSignature`.
    pub fn signed_text<I, S>(mut self, deltas: I, signature: &str) -> Turn
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.blocks.push(Block::Text {
            deltas: strings(deltas),
            signature: Some(signature.into()),
        });
        self
    }

    /// Reasoning, streamed as `deltas`, signed with `signature`.
    pub fn thinking<I, S>(mut self, deltas: I, signature: &str) -> Turn
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.blocks.push(Block::Thinking {
            deltas: strings(deltas),
            signature: signature.into(),
        });
        self
    }

    /// An Anthropic `redacted_thinking` block.
    pub fn redacted_thinking(mut self, data: &str) -> Turn {
        self.blocks
            .push(Block::RedactedThinking { data: data.into() });
        self
    }

    /// A tool call with its JSON arguments streamed in `pieces`.
    pub fn tool_call<I, S>(mut self, id: &str, name: &str, pieces: I) -> Turn
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.blocks.push(Block::ToolCall {
            id: id.into(),
            name: name.into(),
            pieces: strings(pieces),
            signature: None,
        });
        self
    }

    /// A tool call whose part carries Gemini's `thoughtSignature`.
    pub fn signed_tool_call<I, S>(
        mut self,
        id: &str,
        name: &str,
        pieces: I,
        signature: &str,
    ) -> Turn
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.blocks.push(Block::ToolCall {
            id: id.into(),
            name: name.into(),
            pieces: strings(pieces),
            signature: Some(signature.into()),
        });
        self
    }

    pub fn stop(mut self, stop: Stop) -> Turn {
        self.stop = Some(stop);
        self
    }

    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Turn {
        self.input_tokens = input_tokens;
        self.output_tokens = output_tokens;
        self
    }

    fn has_tool_calls(&self) -> bool {
        self.blocks
            .iter()
            .any(|b| matches!(b, Block::ToolCall { .. }))
    }

    fn stop_or_default(&self) -> Stop {
        self.stop.clone().unwrap_or(if self.has_tool_calls() {
            Stop::ToolUse
        } else {
            Stop::EndTurn
        })
    }

    /// The turn as the Anthropic Messages API streams it: `message_start`, a `ping`, per
    /// block `content_block_start` / `content_block_delta`s / `content_block_stop`, then
    /// `message_delta` (stop reason, output tokens) and `message_stop`.
    pub fn anthropic_events(&self) -> Vec<String> {
        let ev = |name: &str, data: Value| sse_event(Some(name), &data);
        let mut out = vec![
            ev(
                "message_start",
                json!({"type": "message_start", "message": {
                    "id": "msg_test", "type": "message", "role": "assistant", "content": [],
                    "model": self.model, "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": self.input_tokens, "output_tokens": 1}
                }}),
            ),
            ev("ping", json!({"type": "ping"})),
        ];
        for (index, block) in self.blocks.iter().enumerate() {
            let start = |content_block: Value| {
                ev(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": content_block}),
                )
            };
            let delta = |delta: Value| {
                ev(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                )
            };
            match block {
                Block::Text { deltas, .. } => {
                    out.push(start(json!({"type": "text", "text": ""})));
                    for d in deltas {
                        out.push(delta(json!({"type": "text_delta", "text": d})));
                    }
                }
                Block::Thinking { deltas, signature } => {
                    out.push(start(json!({"type": "thinking", "thinking": ""})));
                    for d in deltas {
                        out.push(delta(json!({"type": "thinking_delta", "thinking": d})));
                    }
                    out.push(delta(
                        json!({"type": "signature_delta", "signature": signature}),
                    ));
                }
                Block::RedactedThinking { data } => {
                    out.push(start(json!({"type": "redacted_thinking", "data": data})));
                }
                Block::ToolCall {
                    id, name, pieces, ..
                } => {
                    out.push(start(
                        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    ));
                    for p in pieces {
                        out.push(delta(
                            json!({"type": "input_json_delta", "partial_json": p}),
                        ));
                    }
                }
            }
            out.push(ev(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        let stop = match self.stop_or_default() {
            Stop::EndTurn => "end_turn".to_owned(),
            Stop::ToolUse => "tool_use".to_owned(),
            Stop::MaxTokens => "max_tokens".to_owned(),
            Stop::Refusal => "refusal".to_owned(),
            Stop::Raw(s) => s,
        };
        out.push(ev(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop, "stop_sequence": null},
                   "usage": {"output_tokens": self.output_tokens}}),
        ));
        out.push(ev("message_stop", json!({"type": "message_stop"})));
        out
    }

    /// The turn as OpenAI Chat Completions streams it with `stream_options.include_usage`:
    /// `chat.completion.chunk`s whose `choices[0].delta` carries the role, `content` pieces,
    /// `reasoning_content` pieces (as DeepSeek, vLLM and others send reasoning), and
    /// `tool_calls` by index (id, type and name in a call's first delta, then `arguments`
    /// pieces); then a chunk with `finish_reason`, a chunk with `usage` and no choices, and
    /// `data: [DONE]`.
    pub fn openai_events(&self) -> Vec<String> {
        let chunk = |choices: Value, usage: Value| {
            sse_event(
                None,
                &json!({"id": "chatcmpl-test", "object": "chat.completion.chunk",
                        "created": 1_700_000_000, "model": self.model,
                        "system_fingerprint": "fp_test", "choices": choices, "usage": usage}),
            )
        };
        let delta = |delta: Value| {
            chunk(
                json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
                Value::Null,
            )
        };
        let mut out = vec![delta(
            json!({"role": "assistant", "content": "", "refusal": null}),
        )];
        let mut call_index = 0;
        for block in &self.blocks {
            match block {
                Block::Text { deltas, .. } => {
                    for d in deltas {
                        out.push(delta(json!({"content": d})));
                    }
                }
                Block::Thinking { deltas, .. } => {
                    for d in deltas {
                        out.push(delta(json!({"reasoning_content": d})));
                    }
                }
                Block::RedactedThinking { .. } => {}
                Block::ToolCall {
                    id, name, pieces, ..
                } => {
                    out.push(delta(json!({"tool_calls": [{
                        "index": call_index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""}
                    }]})));
                    for p in pieces {
                        out.push(delta(json!({"tool_calls": [{
                            "index": call_index, "function": {"arguments": p}
                        }]})));
                    }
                    call_index += 1;
                }
            }
        }
        let finish = match self.stop_or_default() {
            Stop::EndTurn => "stop".to_owned(),
            Stop::ToolUse => "tool_calls".to_owned(),
            Stop::MaxTokens => "length".to_owned(),
            Stop::Refusal => "content_filter".to_owned(),
            Stop::Raw(s) => s,
        };
        out.push(chunk(
            json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish}]),
            Value::Null,
        ));
        out.push(chunk(
            json!([]),
            json!({"prompt_tokens": self.input_tokens, "completion_tokens": self.output_tokens,
                   "total_tokens": self.input_tokens + self.output_tokens}),
        ));
        out.push("data: [DONE]\n\n".to_owned());
        out
    }

    /// The turn as Gemini's `streamGenerateContent?alt=sse` streams it: one
    /// `GenerateContentResponse` per `data:` line. Each text or thought piece is a part of a
    /// response of its own (thoughts with `"thought": true`, a signature as
    /// `thoughtSignature` on the last piece); consecutive tool calls arrive whole, together in
    /// one response, as Gemini sends parallel calls. The last response also carries
    /// `finishReason` and `usageMetadata`.
    ///
    /// Panics when a tool call's joined pieces are not a JSON object: Gemini cannot send
    /// that, so such a turn is a mistake in the test.
    pub fn gemini_events(&self) -> Vec<String> {
        let mut responses: Vec<Vec<Value>> = Vec::new();
        let mut calls: Vec<Value> = Vec::new();
        for block in &self.blocks {
            if !matches!(block, Block::ToolCall { .. }) && !calls.is_empty() {
                responses.push(std::mem::take(&mut calls));
            }
            match block {
                Block::Text { deltas, .. } | Block::Thinking { deltas, .. } => {
                    let (thought, signature) = match block {
                        Block::Thinking { signature, .. } => (true, Some(signature)),
                        Block::Text { signature, .. } => (false, signature.as_ref()),
                        _ => (false, None),
                    };
                    let last = deltas.len().saturating_sub(1);
                    for (i, d) in deltas.iter().enumerate() {
                        let mut part = json!({"text": d});
                        if thought {
                            part["thought"] = json!(true);
                        }
                        if let (true, Some(sig)) = (i == last, signature) {
                            part["thoughtSignature"] = json!(sig);
                        }
                        responses.push(vec![part]);
                    }
                }
                Block::RedactedThinking { .. } => {}
                Block::ToolCall {
                    id,
                    name,
                    pieces,
                    signature,
                } => {
                    let joined = pieces.concat();
                    let args: Value = serde_json::from_str(&joined).unwrap_or_else(|e| {
                        panic!("a Gemini tool call's arguments must be JSON ({e}): {joined}")
                    });
                    assert!(args.is_object(), "Gemini's args are an object: {joined}");
                    let mut call = json!({"name": name, "args": args});
                    if !id.is_empty() {
                        call["id"] = json!(id);
                    }
                    let mut part = json!({"functionCall": call});
                    if let Some(sig) = signature {
                        part["thoughtSignature"] = json!(sig);
                    }
                    calls.push(part);
                }
            }
        }
        if !calls.is_empty() {
            responses.push(calls);
        }
        if responses.is_empty() {
            responses.push(Vec::new());
        }
        let finish = match self.stop_or_default() {
            Stop::EndTurn | Stop::ToolUse => "STOP".to_owned(),
            Stop::MaxTokens => "MAX_TOKENS".to_owned(),
            Stop::Refusal => "SAFETY".to_owned(),
            Stop::Raw(s) => s,
        };
        let count = responses.len();
        responses
            .into_iter()
            .enumerate()
            .map(|(i, parts)| {
                let mut candidate =
                    json!({"content": {"role": "model", "parts": parts}, "index": 0});
                let mut response = json!({"candidates": [], "modelVersion": self.model,
                                          "responseId": "resp-test"});
                if i + 1 == count {
                    candidate["finishReason"] = json!(finish);
                    response["usageMetadata"] = json!({
                        "promptTokenCount": self.input_tokens,
                        "candidatesTokenCount": self.output_tokens,
                        "totalTokenCount": self.input_tokens + self.output_tokens
                    });
                }
                response["candidates"] = json!([candidate]);
                sse_event(None, &response)
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------
// The connection: read one request, record it, write its scripted reply, close.

/// Requests larger than this are refused: a test that sends more has a bug.
const MAX_REQUEST: usize = 64 * 1024 * 1024;

async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let request = match read_request(&mut stream).await {
        Ok(Some(r)) => r,
        // The client went away before sending a request (a probe, a cancelled connect).
        Ok(None) => return,
        Err(message) => {
            let reply = Reply::json(400, &json!({"error": {"message": message}}));
            let _ = write_reply(&mut stream, &reply).await;
            return;
        }
    };
    let reply = {
        let mut state = shared.lock();
        let n = state.requests.len() + 1;
        let reply = state.replies.pop_front().unwrap_or_else(|| {
            Reply::json(
                400,
                &json!({"error": {"message": format!(
                    "berth-testkit provider server: no reply scripted for request {n} ({} {})",
                    request.method, request.path
                )}}),
            )
        });
        state.requests.push(request);
        reply
    };
    let _ = write_reply(&mut stream, &reply).await;
}

/// Reads one request. `Ok(None)`: the connection closed before any byte.
async fn read_request(stream: &mut TcpStream) -> Result<Option<RecordedRequest>, String> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 64 * 1024 {
            return Err("request head too large".into());
        }
        let mut chunk = [0u8; 8192];
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading the request: {e}"))?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err("the connection closed inside the request head".into())
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head =
        std::str::from_utf8(&buf[..head_end]).map_err(|_| "the request head is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut words = request_line.split(' ');
    let (Some(method), Some(path), Some(_version)) = (words.next(), words.next(), words.next())
    else {
        return Err(format!("bad request line {request_line:?}"));
    };
    let mut headers = Vec::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("bad header line {line:?}"));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let (method, path) = (method.to_owned(), path.to_owned());
    let mut rest = buf[head_end + 4..].to_vec();
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let raw_body = if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked(stream, rest).await?
    } else {
        let length: usize = match get("content-length") {
            Some(v) => v.parse().map_err(|_| format!("bad content-length {v:?}"))?,
            None => 0,
        };
        if length > MAX_REQUEST {
            return Err("request body too large".into());
        }
        while rest.len() < length {
            let mut chunk = vec![0u8; (length - rest.len()).min(64 * 1024)];
            let n = stream
                .read(&mut chunk)
                .await
                .map_err(|e| format!("reading the request body: {e}"))?;
            if n == 0 {
                return Err("the connection closed inside the request body".into());
            }
            rest.extend_from_slice(&chunk[..n]);
        }
        rest.truncate(length);
        rest
    };
    let body = serde_json::from_slice(&raw_body).unwrap_or(Value::Null);
    Ok(Some(RecordedRequest {
        method,
        path,
        headers,
        body,
        raw_body,
        received_at: std::time::Instant::now(),
    }))
}

async fn read_chunked(stream: &mut TcpStream, mut buf: Vec<u8>) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(&buf, b"\r\n") {
                break i;
            }
            fill(stream, &mut buf).await?;
        };
        let size_text = std::str::from_utf8(&buf[..line_end]).map_err(|_| "bad chunk size")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        if body.len() + size > MAX_REQUEST {
            return Err("request body too large".into());
        }
        buf.drain(..line_end + 2);
        if size == 0 {
            // Trailers are not used by any client the tests run; the body is complete.
            return Ok(body);
        }
        while buf.len() < size + 2 {
            fill(stream, &mut buf).await?;
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), String> {
    let mut chunk = [0u8; 8192];
    let n = stream
        .read(&mut chunk)
        .await
        .map_err(|e| format!("reading the request body: {e}"))?;
    if n == 0 {
        return Err("the connection closed inside the request body".into());
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

async fn write_reply(stream: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
    if !reply.head_delay.is_zero() {
        tokio::time::sleep(reply.head_delay).await;
    }
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match reply.framing {
        Framing::Chunked => head.push_str("transfer-encoding: chunked\r\n"),
        Framing::Length => {
            // The length of the whole scripted body, even when a cut writes less of it.
            let length = reply.cut.unwrap_or_else(|| reply.body_len());
            head.push_str(&format!("content-length: {length}\r\n"));
        }
        Framing::Close => {}
    }
    head.push_str("connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await?;
    for piece in &reply.pieces {
        match piece {
            Piece::Pause(d) => tokio::time::sleep(*d).await,
            Piece::Bytes(bytes) => {
                if bytes.is_empty() {
                    // An empty HTTP chunk would end a chunked body early.
                    continue;
                }
                if reply.framing == Framing::Chunked {
                    stream
                        .write_all(format!("{:x}\r\n", bytes.len()).as_bytes())
                        .await?;
                    stream.write_all(bytes).await?;
                    stream.write_all(b"\r\n").await?;
                } else {
                    stream.write_all(bytes).await?;
                }
                stream.flush().await?;
            }
        }
    }
    if reply.framing == Framing::Chunked && reply.cut.is_none() {
        stream.write_all(b"0\r\n\r\n").await?;
    }
    stream.flush().await?;
    stream.shutdown().await
}
