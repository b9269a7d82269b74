//! `berth mcp`: the MCP server, over stdio or Streamable HTTP. Over HTTP it is berth-serve's
//! server with `/mcp` alone, behind the guard `berth serve` has (`serve_mcp`).

use anyhow::Context;
use berth_mcp::BerthMcp;
use berth_ops::{Ops, Refill};
use berth_serve::ServeOptions;

use crate::cli::{McpArgs, Transport};

/// The repository a server's `workspace_create` makes worktrees of: `--repo`, which must be
/// one, else the one around this folder, if any.
pub async fn served_repository(
    ops: &Ops,
    repo: Option<&std::path::Path>,
) -> anyhow::Result<Option<std::path::PathBuf>> {
    Ok(match repo {
        Some(path) => ops.repository_root(path, true).await?,
        None => {
            let here = std::env::current_dir().context("cannot read the current folder")?;
            ops.repository_root(&here, false).await?
        }
    })
}

pub async fn run(ops: Ops, args: McpArgs) -> anyhow::Result<()> {
    let repo = served_repository(&ops, args.repo.as_deref()).await?;
    let loaded = ops.config(None).await?;
    for unknown in &loaded.unknown_keys {
        eprintln!("berth mcp: warning: {unknown}");
    }
    let mcp = &loaded.config.mcp;
    // A flag wins over the config file; both refuse 0 (a server that keeps no session, or
    // closes each at once, serves nobody).
    let max_sessions = args
        .max_sessions
        .or(mcp.max_sessions)
        .map_or(berth_mcp::DEFAULT_MAX_SESSIONS, |n| n.get());
    let session_idle = args
        .session_idle_timeout
        .or(mcp.session_idle_timeout_secs)
        .map_or(berth_mcp::DEFAULT_IDLE, |s| {
            std::time::Duration::from_secs(s.get())
        });
    // A server keeps running: it refills spare checkouts itself.
    let ops = ops.with_refill(Refill::InProcess);
    let server = BerthMcp::new(ops.clone(), repo, args.max_file_bytes);
    match args.transport {
        Transport::Stdio => berth_mcp::serve_stdio(server).await?,
        Transport::Http => {
            let options = ServeOptions {
                listen: args.listen,
                token: args.token.filter(|t| !t.is_empty()),
                // serve_mcp decides: open on loopback without a token, as berth mcp was.
                open: false,
                allowed_hosts: args.reach.allow_hosts,
                allowed_origins: args.reach.allow_origins,
                max_message_bytes: args.max_request_bytes,
                max_mcp_sessions: max_sessions,
                mcp_session_idle: session_idle,
                // The agent's and the web page's: nothing of them is served here.
                max_connections: berth_serve::DEFAULT_MAX_CONNECTIONS,
                ping_every: berth_serve::DEFAULT_PING_EVERY,
                max_prompts_per_minute: 0,
                acp_http_idle: berth_serve::DEFAULT_ACP_HTTP_IDLE,
                tls: None,
            };
            berth_serve::serve_mcp(&ops, server, options, |listening| {
                eprintln!("berth mcp: serving MCP at http://{}/mcp", listening.addr);
            })
            .await?;
        }
    }
    Ok(())
}
