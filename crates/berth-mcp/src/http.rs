//! Streamable HTTP at `/mcp`: the router that berth-serve mounts, both in `berth serve` and
//! alone for `berth mcp --transport http`. Who may call it (the token, the loopback rule, a
//! browser's `Origin` beyond these checks) is berth-serve's guard's to decide, in front of it:
//! this crate has no listener and no token of its own.
//!
//! - `Host` is checked against the names this server answers to and `Origin` against the
//!   origins allowed to call it (both by rmcp), so a web page cannot reach a local server
//!   through DNS rebinding: a foreign `Origin` gets 403.
//! - Request bodies over a limit get 413 (rmcp), before any parsing.
//! - A response of one message is written at once: its head, SSE priming event, message and
//!   end are gathered into one write (`sessions`), not sent as the handler gets to each (the
//!   listener sets `TCP_NODELAY`, so nothing waits for a delayed ACK either).
//! - Sessions are bounded (`sessions`): at most `--max-sessions`, the least recently used
//!   closed first, and each closed after `--session-idle-timeout` without use.
//! - `DELETE` of a session answers 204 No Content (rmcp answers 202, which clients such as
//!   the official Python SDK report as a failed termination).
//!
//! Each MCP session gets its own [`BerthMcp::connection`], so subscriptions are per client
//! while `list_changed` reaches all of them.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::BerthMcp;
use crate::sessions::BoundedSessions;

/// How `/mcp` answers: the names and origins it serves, its body limit and its sessions.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The address the server listens on: requests addressed to it are its own.
    pub listen: SocketAddr,
    /// Host names (or `host:port`) besides loopback that requests may be addressed to.
    pub allowed_hosts: Vec<String>,
    /// Browser origins besides loopback pages (`https://app.example.com:443`, `:*` for any
    /// port) that may call the server.
    pub allowed_origins: Vec<String>,
    pub max_request_bytes: usize,
    /// Sessions kept at once; beyond it the least recently used is closed.
    pub max_sessions: usize,
    /// A session unused this long is closed.
    pub session_idle: std::time::Duration,
}

/// Requests larger than this get 413 unless the server is told otherwise: room for a storage
/// write of a few MiB, far from what would strain memory.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// `/mcp`, for berth-serve to mount (alone, or beside the other routes of `berth serve`): the
/// MCP service with its `Host` and `Origin` checks, body limit and bounded sessions, and the
/// 204 for a deleted session. Who may call it (a token) is berth-serve's guard's to decide.
/// The cancellation token returned ends every open SSE stream: cancel it on shutdown, or a
/// graceful shutdown waits for them forever.
pub fn router(server: BerthMcp, options: &HttpOptions) -> (axum::Router, CancellationToken) {
    let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
    if !options.listen.ip().is_unspecified() {
        hosts.push(options.listen.ip().to_string());
    }
    hosts.extend(options.allowed_hosts.iter().cloned());
    let mut origins: Vec<String> = LOOPBACK_ORIGINS.iter().map(|o| o.to_string()).collect();
    origins.extend(options.allowed_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_request_bytes);
    let sessions_done = config.cancellation_token.clone();
    let sessions = Arc::new(BoundedSessions::new(
        options.max_sessions,
        options.session_idle,
    ));
    {
        let sessions = sessions.clone();
        let done = sessions_done.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(sessions.sweep_every());
            loop {
                tokio::select! {
                    _ = done.cancelled() => return,
                    _ = every.tick() => { sessions.sweep().await; }
                }
            }
        });
    }
    let service = StreamableHttpService::new(move || Ok(server.connection()), sessions, config);
    let app = axum::Router::new()
        .route_service("/mcp", service)
        .layer(middleware::from_fn(session_deleted_is_no_content));
    (app, sessions_done)
}

/// A session ended by `DELETE` answers 204 No Content, what clients expect, not rmcp's 202.
async fn session_deleted_is_no_content(request: Request, next: Next) -> Response {
    let delete = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
        *response.body_mut() = Body::empty();
        response.headers_mut().remove(header::CONTENT_LENGTH);
        response.headers_mut().remove(header::CONTENT_TYPE);
    }
    response
}
