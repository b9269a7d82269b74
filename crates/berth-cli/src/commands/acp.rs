//! `berth acp`: berth's agent over the Agent Client Protocol on stdio. The work is in
//! `berth-acp`; this only builds the agent the same way `berth chat` does and serves.

use berth_ops::{Ops, Refill};

pub async fn run(ops: Ops) -> anyhow::Result<()> {
    let loaded = ops.config(None).await?;
    for unknown in &loaded.unknown_keys {
        eprintln!("berth acp: warning: {unknown}");
    }
    // A server keeps running: it refills spare checkouts itself.
    let ops = ops.with_refill(Refill::InProcess);
    let agent = berth_agent::AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
    berth_acp::serve_stdio(ops, agent)
        .await
        .map_err(|e| anyhow::anyhow!("the ACP connection failed: {e}"))
}
