//! `berth ui`: the terminal dashboard (berth-ui), on this home's runs.

use anyhow::Context;
use berth_ops::Ops;
use berth_run::RunStore;

pub async fn run(ops: Ops) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return Err(berth_ops::Error::invalid(
            "the dashboard needs a terminal: `berth run list` and `berth workspace list` print the same for a script",
        )
        .into());
    }
    let store = RunStore::open(&ops).await?;
    // The dashboard only creates a land; its supervisor process drives it, with its own agent.
    let agent = berth_agent::AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
    let options = berth_ui::Options {
        lander: berth_run::Lander::new(ops.clone(), store.clone(), agent),
        program: std::env::current_exe().context("cannot find the berth program")?,
        here: std::env::current_dir().context("cannot read the current folder")?,
        color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    berth_ui::run(ops, store, options)
        .await
        .context("the terminal failed")
}
