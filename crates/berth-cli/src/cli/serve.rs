//! The grammar of berth as a server: `berth serve`, `berth mcp`, who may reach them on the
//! network, and the tokens `berth serve` takes.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::JsonFlag;

#[derive(Subcommand)]
pub enum TokenCmd {
    /// Make a token and print it (once).
    ///
    /// --device NAME: a phone's or another machine's token. Its ACP sessions land in the
    /// device's workspace (bound on first use, or to --workspace now), it lists and loads
    /// only that workspace's sessions, and it cannot name another device or reach /mcp.
    /// --admin NAME: a token that sees everything, as BERTH_SERVE_TOKEN does.
    #[command(verbatim_doc_comment)]
    Create {
        /// The device the token acts as; also the token's name.
        #[arg(
            long,
            value_name = "NAME",
            conflicts_with = "admin",
            required_unless_present = "admin"
        )]
        device: Option<String>,
        /// An admin token of this name.
        #[arg(long, value_name = "NAME")]
        admin: Option<String>,
        /// Bind the device to this workspace (id, name or prefix) now.
        #[arg(long, value_name = "WORKSPACE", requires = "device")]
        workspace: Option<String>,
        /// The token stops working after this many days.
        #[arg(long, value_name = "DAYS")]
        expires: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// The tokens: name, kind, device, made, expires (never the tokens themselves).
    List(JsonFlag),
    /// Revoke a token: refused from now on, its open connections closed.
    Revoke {
        #[arg(value_name = "NAME")]
        name: String,
    },
}

/// Who may reach a server on the network besides this machine: the names it answers to and
/// the pages that may call it (the `Host` and `Origin` rules of `berth mcp` and `berth serve`).
#[derive(Args)]
pub struct ReachArgs {
    /// Another host name (or host:port) requests may be addressed to; repeatable.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Another browser origin allowed to call the server, with scheme and port
    /// (`https://app.example.com:443`, `:*` for any port); repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
}

#[derive(Args)]
pub struct ServeArgs {
    /// The address to listen on; port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8765")]
    pub listen: std::net::SocketAddr,
    /// The bearer token clients must send.
    #[arg(
        long,
        env = "BERTH_SERVE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// On loopback, take requests without a token, each as the admin: any user or process
    /// of this machine can then drive the agent as you. Without it (and without a token), a
    /// token is made for this run and printed.
    #[arg(long, conflicts_with = "token")]
    pub open: bool,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// ACP connections open at once; more are answered 503.
    #[arg(long, value_name = "N", default_value_t = berth_serve::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// The largest WebSocket message and HTTP request body, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = berth_serve::DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Prompts each token may send a minute (the admin's together), across its connections;
    /// more are answered with an error at once. 0: no limit.
    #[arg(long, value_name = "N", default_value_t = berth_serve::DEFAULT_MAX_PROMPTS_PER_MINUTE)]
    pub max_prompts_per_minute: usize,
    /// Seconds between pings of a WebSocket peer; one silent for three is dropped.
    #[arg(long, value_name = "SECS", default_value_t = berth_serve::DEFAULT_PING_EVERY.as_secs())]
    pub ping_every: u64,
    /// Seconds a client of /acp over plain HTTP (POST and server-sent events) may be silent,
    /// no prompt of its running, before its connection ends.
    #[arg(long, value_name = "SECS", default_value_t = berth_serve::DEFAULT_ACP_HTTP_IDLE.as_secs())]
    pub acp_http_idle: u64,
    /// The repository MCP's `workspace_create` makes worktrees of (default: the one
    /// containing this folder).
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// Serve TLS (wss://, https://) with this PEM certificate chain (with --tls-key).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Pair a device: make its token (as `berth token create --device NAME`) and print a
    /// pairing link, with its QR code, for its app, and a link that signs the web page in.
    /// The links name the first --allow-host, else the address listened on: a phone needs
    /// --listen on an address it reaches (0.0.0.0:8765) and --allow-host with this machine's
    /// name. A device paired before gets a new token in place of its old one, after asking
    /// (or with --rotate).
    #[arg(long, value_name = "NAME")]
    pub pair: Option<String>,
    /// With --pair, replace the token of a device paired before without asking; the old
    /// token stops working.
    #[arg(long, requires = "pair")]
    pub rotate: bool,
    /// Also work queued runs (`berth run --queue`) from the store every node shares, woken
    /// by the database when one is queued; a node that dies has its runs taken over by
    /// another once its hold lapses (`[pool] lease_secs`). Needs a database store.
    #[arg(long)]
    pub worker: bool,
    /// This node's name in the runs it works (default: the host name); `run --queue --node`
    /// pins a run to it.
    #[arg(long, value_name = "NAME", requires = "worker")]
    pub node: Option<String>,
    /// Agents this worker runs at once, over all its runs (default: the number of cores).
    #[arg(long, value_name = "N", requires = "worker")]
    pub max_agents: Option<std::num::NonZeroUsize>,
}

#[derive(Args)]
pub struct McpArgs {
    /// The repository `workspace_create` makes worktrees of (default: the one containing
    /// this folder; outside a repository, workspaces are plain folders).
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// How clients connect: over this process's stdin/stdout, or over HTTP.
    #[arg(long, value_enum, default_value_t = Transport::Stdio)]
    pub transport: Transport,
    /// The address the HTTP transport listens on; port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8765")]
    pub listen: std::net::SocketAddr,
    /// The bearer token HTTP clients must send.
    #[arg(
        long,
        env = "BERTH_MCP_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    #[command(flatten)]
    pub reach: ReachArgs,
    /// HTTP request bodies larger than this get 413.
    #[arg(long, value_name = "BYTES", default_value_t = berth_mcp::DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,
    /// HTTP sessions kept at once; beyond it the least recently used is closed (its client
    /// gets 404 and initializes again). Default: `[mcp] max_sessions`, else 1000.
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<std::num::NonZeroUsize>,
    /// Seconds an HTTP session may go unused (no request, no open stream) before it is
    /// closed. Default: `[mcp] session_idle_timeout_secs`, else 1800.
    #[arg(long, value_name = "SECS")]
    pub session_idle_timeout: Option<std::num::NonZeroU64>,
    /// Worktree files larger than this are refused by the files resource.
    #[arg(long, value_name = "BYTES", default_value_t = berth_mcp::DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    Stdio,
    Http,
}
