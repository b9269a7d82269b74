//! berth-serve: berth on the network, for phones, editors on other machines, and teams. One
//! listener serves:
//!
//! - `/acp`: berth's agent over the Agent Client Protocol, on a WebSocket, one JSON-RPC
//!   message per text frame (`websocket.rs`), or over plain HTTP, POST and server-sent events
//!   (`acp_http.rs`, the official transport's server). The ACP server is berth-acp's, the one
//!   `berth acp` serves on stdio, handed these transports instead: everything it does there
//!   (streaming, permissions, cancel, load, list, resume, fork, images, the model option, the
//!   device flow) it does here. A client that does not offer `fs/*` or `terminal/*` gets
//!   berth's own tools, confined to the session's folder or worktree;
//! - `/mcp`: berth's MCP server over Streamable HTTP (berth-mcp's router). `berth mcp
//!   --transport http` is this server with `/mcp` and `/healthz` alone ([`serve_mcp`]), so
//!   both have one perimeter: one guard, one token store, one loopback rule;
//! - `/healthz`: `{"status":"ok"}`, for load balancers; it says nothing else and needs no token;
//! - `/` and below: the web page (berth-web), for a browser signed in with a token (`/login`
//!   sets a cookie; `/pair#token=…`, the link `--pair` prints, does it from a phone's camera).
//!
//! Safe on a network (`guard.rs`): a listener off loopback is refused without a token; every
//! request but `/healthz` must carry it (`Authorization: Bearer …`); `Host` must be a name
//! this server answers to and a browser's `Origin` one it allows (403 otherwise), so a web page
//! cannot reach a local server through DNS rebinding; connections are capped; a WebSocket
//! frame or message over the limit closes its connection; a peer that answers no ping is
//! dropped.

#![forbid(unsafe_code)]

mod acp_http;
mod guard;
pub mod pairing;
mod rate;
pub mod tls;
pub mod tokens;
mod websocket;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use berth_agent::Agent;
use berth_mcp::BerthMcp;
use berth_ops::Ops;
use tokio_util::sync::CancellationToken;

pub use guard::{Access, Principal};
use tokens::new_token;
pub use tokens::{Role, TokenError, TokenRecord, TokenStore};

/// How `berth serve` listens.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: SocketAddr,
    /// The token every request (but `/healthz`) must carry; required off loopback. On
    /// loopback without one (and without `open`), [`serve`] makes one for the run.
    pub token: Option<String>,
    /// On loopback, take requests without a token, each as the admin: any user or process of
    /// the machine can then drive the agent. Refused off loopback.
    pub open: bool,
    /// Host names (or `host:port`) besides loopback that requests may be addressed to.
    pub allowed_hosts: Vec<String>,
    /// Browser origins besides loopback pages (`https://app.example.com`, `:*` for any port)
    /// that may call the server.
    pub allowed_origins: Vec<String>,
    /// Open WebSocket connections at once; more are answered 503.
    pub max_connections: usize,
    /// The largest WebSocket message (and HTTP request body) accepted, in bytes.
    pub max_message_bytes: usize,
    /// How often a WebSocket peer is pinged; one silent for three times this is dropped.
    pub ping_every: Duration,
    /// Prompts each token may send a minute, across its connections; 0 for no limit.
    pub max_prompts_per_minute: usize,
    /// MCP sessions kept at once, and how long an unused one lives (as `berth mcp`).
    pub max_mcp_sessions: usize,
    pub mcp_session_idle: Duration,
    /// How long a client of `/acp` over plain HTTP may be silent, no prompt of its running,
    /// before its connection ends (it may have vanished without saying so).
    pub acp_http_idle: Duration,
    /// A PEM certificate chain and private key: serve `wss://` and `https://` instead.
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

/// Unless told otherwise: as many connections as a small team's editors and phones use.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Unless told otherwise: a prompt with a few images fits; far from straining memory.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Unless told otherwise: more than a person types, fewer than a runaway loop sends.
pub const DEFAULT_MAX_PROMPTS_PER_MINUTE: usize = 60;
/// Unless told otherwise: an editor left open over lunch keeps its connection.
pub const DEFAULT_ACP_HTTP_IDLE: Duration = Duration::from_secs(30 * 60);
/// Unless told otherwise: a dead peer is found within a minute and a half.
pub const DEFAULT_PING_EVERY: Duration = Duration::from_secs(30);

/// Why serving stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to listen on {addr} without a token: anyone who can reach that address could use this server. Give one (--token or {token_env}, or `berth token create --admin NAME`), or listen on 127.0.0.1"
    )]
    PublicWithoutToken {
        addr: SocketAddr,
        /// The variable the command reads its token from, to name in the message.
        token_env: &'static str,
    },
    #[error("serving without a token (--open) is for loopback only; {0} is not loopback")]
    OpenOffLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the server failed: {0}")]
    Server(std::io::Error),
    #[error(transparent)]
    Tokens(#[from] TokenError),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

impl ServeError {
    /// A listener refused for want of a token is a usage error; the rest are I/O.
    pub fn kind(&self) -> berth_ops::ErrorKind {
        match self {
            ServeError::PublicWithoutToken { .. } | ServeError::OpenOffLoopback(_) => {
                berth_ops::ErrorKind::Invalid
            }
            ServeError::Listen { .. } | ServeError::Server(_) => berth_ops::ErrorKind::Io,
            ServeError::Tokens(e) => e.kind(),
            ServeError::Tls(e) => berth_ops::Kinded::kind(e),
        }
    }
}

/// What the server says once it listens.
pub struct Listening {
    /// The bound address (useful with port 0).
    pub addr: SocketAddr,
    /// The token made for this run, when none was given on loopback: to show the person.
    pub made_token: Option<String>,
}

/// Serves until SIGINT or SIGTERM. `on_listening` is called once requests can be accepted.
///
/// A token on every request but `/healthz`, on loopback too: loopback is every user and
/// process of the machine, and a request without a token would act as the admin (Jupyter
/// requires one for the same reason). With none given, one is made for the run on loopback
/// (unless `open`); off loopback, one must be given, or devices' tokens made.
pub async fn serve(
    ops: Ops,
    agent: Agent,
    mcp: BerthMcp,
    runs: berth_run::Runs,
    mut options: ServeOptions,
    on_listening: impl FnOnce(Listening),
) -> Result<(), ServeError> {
    let tokens = TokenStore::new(ops.home());
    let loopback = options.listen.ip().is_loopback();
    if options.open && !loopback {
        return Err(ServeError::OpenOffLoopback(options.listen));
    }
    if !loopback && options.token.is_none() && tokens.list()?.is_empty() {
        return Err(ServeError::PublicWithoutToken {
            addr: options.listen,
            token_env: "BERTH_SERVE_TOKEN",
        });
    }
    let made_token = (loopback && options.token.is_none() && !options.open).then(new_token);
    if made_token.is_some() {
        options.token = made_token.clone();
    }
    let access = Arc::new(Access::new(&options, tokens.clone()));
    let (mcp_routes, mcp_done) = mcp_router(mcp, &options);
    let web = berth_web::Web::new(ops.clone(), agent.clone(), runs);
    let prompts = Arc::new(rate::PromptRate::new(options.max_prompts_per_minute));
    let acp = websocket::AcpEndpoint::new(ops, agent, tokens, prompts.clone(), &options);
    let app = Router::new()
        .merge(acp_http::router(acp.clone()))
        .merge(mcp_routes)
        .merge(
            berth_web::router(web.clone()).layer(axum::middleware::from_fn_with_state(
                prompts,
                rate::web_prompts,
            )),
        )
        .merge(berth_web::public_router())
        .route(
            "/login",
            get(guard::login_form)
                .post(guard::login)
                .with_state(access.clone()),
        );
    let shutdown = async move {
        shutdown_signal().await;
        // Open MCP and page event streams would keep a graceful shutdown waiting forever.
        mcp_done.cancel();
        web.close();
        acp.close();
    };
    let listening = Listening {
        addr: options.listen,
        made_token,
    };
    listen(
        guarded(app, access),
        &options,
        shutdown,
        listening,
        on_listening,
    )
    .await
}

/// Serves berth's MCP server alone, `/mcp` (and `/healthz`), behind the same guard as
/// [`serve`]: `berth mcp --transport http`. Until SIGINT or SIGTERM.
///
/// Unlike [`serve`], a loopback listener without a token takes requests without one (as
/// `--open`), as `berth mcp` always has: an MCP client configured with a URL and nothing
/// else must keep working. Off loopback, an admin token is needed: the server's own or one
/// of `berth token create --admin` (a device's token cannot reach `/mcp`). The options of
/// the agent and the web page (connections, pings, prompts) are unused.
pub async fn serve_mcp(
    ops: &Ops,
    mcp: BerthMcp,
    mut options: ServeOptions,
    on_listening: impl FnOnce(Listening),
) -> Result<(), ServeError> {
    let tokens = TokenStore::new(ops.home());
    let loopback = options.listen.ip().is_loopback();
    let admin_tokens = || -> Result<bool, TokenError> {
        Ok(tokens.list()?.iter().any(|t| matches!(t.role, Role::Admin)))
    };
    if !loopback && options.token.is_none() && !admin_tokens()? {
        return Err(ServeError::PublicWithoutToken {
            addr: options.listen,
            token_env: "BERTH_MCP_TOKEN",
        });
    }
    options.open = loopback && options.token.is_none();
    let access = Arc::new(Access::new(&options, tokens).protocols_only());
    let (app, mcp_done) = mcp_router(mcp, &options);
    let shutdown = async move {
        shutdown_signal().await;
        // Open SSE streams would keep a graceful shutdown waiting forever; end them.
        mcp_done.cancel();
    };
    let listening = Listening {
        addr: options.listen,
        made_token: None,
    };
    listen(
        guarded(app, access),
        &options,
        shutdown,
        listening,
        on_listening,
    )
    .await
}

/// berth-mcp's `/mcp`, with the server's hosts, origins, body limit and session bounds.
fn mcp_router(mcp: BerthMcp, options: &ServeOptions) -> (Router, CancellationToken) {
    berth_mcp::http_router(
        mcp,
        &berth_mcp::HttpOptions {
            listen: options.listen,
            allowed_hosts: options.allowed_hosts.clone(),
            allowed_origins: options.allowed_origins.clone(),
            max_request_bytes: options.max_message_bytes,
            max_sessions: options.max_mcp_sessions,
            session_idle: options.mcp_session_idle,
        },
    )
}

/// `app` behind the guard, and `/healthz` beside it.
fn guarded(app: Router, access: Arc<Access>) -> Router {
    app.layer(axum::middleware::from_fn_with_state(access, guard::check))
        // After the guard: a health check needs no token and says nothing.
        .route("/healthz", get(healthz))
}

/// Binds the listener (TLS when asked), tells `on_listening`, and serves `app` until
/// `shutdown` ends.
async fn listen(
    app: Router,
    options: &ServeOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    mut listening: Listening,
    on_listening: impl FnOnce(Listening),
) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| ServeError::Listen {
            addr: options.listen,
            source,
        })?;
    listening.addr = listener.local_addr().map_err(|source| ServeError::Listen {
        addr: options.listen,
        source,
    })?;
    if let Some((cert, key)) = &options.tls {
        let listener =
            tls::TlsListener::new(listener, tls::acceptor(cert, key)?).map_err(|source| {
                ServeError::Listen {
                    addr: options.listen,
                    source,
                }
            })?;
        on_listening(listening);
        return axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(ServeError::Server);
    }
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        // Small messages (a chunk of an answer) go out at once, not after a delayed ACK.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY could not be set on a connection: {e}");
        }
    });
    on_listening(listening);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServeError::Server)
}

async fn healthz() -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        "{\"status\":\"ok\"}\n",
    )
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return tokio::signal::ctrl_c().await.unwrap_or(()),
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

impl berth_ops::Kinded for ServeError {
    fn kind(&self) -> berth_ops::ErrorKind {
        ServeError::kind(self)
    }
}
