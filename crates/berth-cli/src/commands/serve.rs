//! `berth serve`: berth on the network (berth-serve). This builds the agent and the MCP
//! server as `berth acp` and `berth mcp` do, and hands them to berth-serve with the flags.

use std::time::Duration;

use berth_mcp::BerthMcp;
use berth_ops::{Ops, Refill};
use berth_serve::ServeOptions;

use crate::cli::ServeArgs;

pub async fn run(ops: Ops, args: ServeArgs) -> anyhow::Result<()> {
    let repo = super::mcp::served_repository(&ops, args.repo.as_deref()).await?;
    let loaded = ops.config(None).await?;
    for unknown in &loaded.unknown_keys {
        eprintln!("berth serve: warning: {unknown}");
    }
    let mcp_config = &loaded.config.mcp;
    // A server keeps running: it refills spare checkouts itself.
    let ops = ops.with_refill(Refill::InProcess);
    let agent = berth_agent::AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
    let mcp = BerthMcp::new(ops.clone(), repo, berth_mcp::DEFAULT_MAX_FILE_BYTES);
    let options = ServeOptions {
        listen: args.listen,
        token: args.token.filter(|t| !t.is_empty()),
        allowed_hosts: args.reach.allow_hosts,
        allowed_origins: args.reach.allow_origins,
        max_connections: args.max_connections,
        max_message_bytes: args.max_message_bytes,
        ping_every: Duration::from_secs(args.ping_every.max(1)),
        max_prompts_per_minute: args.max_prompts_per_minute,
        max_mcp_sessions: mcp_config
            .max_sessions
            .map_or(berth_mcp::DEFAULT_MAX_SESSIONS, |n| n.get()),
        mcp_session_idle: mcp_config
            .session_idle_timeout_secs
            .map_or(berth_mcp::DEFAULT_IDLE, |s| Duration::from_secs(s.get())),
    };
    berth_serve::serve(ops, agent, mcp, options, |addr| {
        eprintln!("berth serve: ACP at ws://{addr}/acp, MCP at http://{addr}/mcp, health at http://{addr}/healthz");
    })
    .await?;
    Ok(())
}
