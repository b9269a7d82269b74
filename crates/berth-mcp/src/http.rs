//! Streamable HTTP at `/mcp`, with the checks the MCP spec asks of an HTTP server.
//!
//! - `Host` is checked against the names this server answers to and `Origin` against the
//!   origins allowed to call it (both by rmcp), so a web page cannot reach a local server
//!   through DNS rebinding: a foreign `Origin` gets 403.
//! - A bearer token, when set, is required on every request (401 without it), compared in
//!   constant time.
//! - An address other than loopback is refused without a token: anyone who can reach it could
//!   otherwise create and remove workspaces.
//! - Request bodies over a limit get 413 (rmcp), before any parsing.
//! - Every accepted connection has `TCP_NODELAY`: with Nagle's algorithm, the last small
//!   segment of a response waited for the client's delayed ACK (about 40 ms per request on a
//!   kept-alive connection). And a response of one message is written at once: its head, SSE
//!   priming event, message and end are gathered into one write (`sessions`), not sent as the
//!   handler gets to each.
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
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::sessions::BoundedSessions;
use crate::{BerthMcp, ServeError};

/// How `berth mcp --transport http` listens.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub listen: SocketAddr,
    /// The bearer token every request must carry; required off loopback.
    pub token: Option<String>,
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

/// Serves MCP over HTTP until SIGINT or SIGTERM. `on_listening` is called with the bound
/// address (useful with port 0) once requests can be accepted.
pub async fn serve_http(
    server: BerthMcp,
    options: HttpOptions,
    on_listening: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    if !options.listen.ip().is_loopback() && options.token.is_none() {
        return Err(ServeError::PublicWithoutToken(options.listen));
    }
    let (mut app, sessions_done) = router(server, &options);
    if let Some(token) = options.token {
        app = app.layer(middleware::from_fn_with_state(
            Arc::<str>::from(token),
            require_token,
        ));
    }
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| ServeError::Listen {
            addr: options.listen,
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| ServeError::Listen {
        addr: options.listen,
        source,
    })?;
    let listener = listener.tap_io(|tcp| {
        // Without it, every kept-alive request waits for the client's delayed ACK.
        let _ = tcp.set_nodelay(true);
    });
    on_listening(bound);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            // Open SSE streams would keep a graceful shutdown waiting forever; end them.
            sessions_done.cancel();
        })
        .await
        .map_err(|e| ServeError::Protocol(e.to_string()))
}

/// `/mcp`, to serve or to mount beside other routes (`berth serve`): the MCP service with
/// its `Host` and `Origin` checks, body limit and bounded sessions, and the 204 for a deleted
/// session. Who may call it (a token) is the caller's to add. The token returned ends every
/// open SSE stream: cancel it on shutdown, or a graceful shutdown waits for them forever.
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

async fn require_token(State(token): State<Arc<str>>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented {
        Some(p) if same(p.as_bytes(), token.as_bytes()) => next.run(request).await,
        _ => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "this berth MCP server needs `Authorization: Bearer <token>`, the token it was started with\n",
        )
            .into_response(),
    }
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

/// Equality whose time does not depend on where the inputs differ, so the token cannot be
/// guessed a byte at a time from response times.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return interrupt.await.unwrap_or(()),
            };
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn token_comparison() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secre"));
        assert!(!same(b"", b"x"));
    }
}
