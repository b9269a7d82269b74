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

mod anthropic;
mod connection;
mod gemini;
mod openai;
mod reply;
mod server;
mod sse;
mod turn;

pub use anthropic::anthropic_stream_error;
pub use reply::{Framing, Reply};
pub use server::{ProviderServer, RecordedRequest};
pub use sse::{data_error, sse_event};
pub use turn::{Block, Stop, Turn};
