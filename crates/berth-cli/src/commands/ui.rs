//! `berth ui`: the terminal dashboard (berth-ui), on this home's runs; and `berth run
//! attach`, the same dashboard opened on one agent's live view.

use anyhow::Context;
use berth_ops::Ops;
use berth_run::RunStore;

/// `berth run attach RUN [--agent N]`: the run and the agent checked first (a run that is not
/// there, or an agent it does not have, is an error before any screen), then the dashboard.
pub async fn attach(
    ops: Ops,
    id: &str,
    agent: Option<berth_run::AgentNumber>,
) -> anyhow::Result<()> {
    let store = RunStore::open(&ops).await?;
    let run = store.load(&store.resolve(id).await?).await?;
    let count = run.agents.len();
    if let Some(n) = agent
        && n.index() >= count
    {
        return Err(berth_ops::Error::invalid(format!(
            "run {} has {count} agent(s): --agent takes 1 to {count}",
            run.id
        ))
        .into());
    }
    let attach = berth_ui::Attach {
        run: run.id,
        agent: agent.map(|n| n.index()),
    };
    self::run(ops, Some(attach)).await
}

pub async fn run(ops: Ops, attach: Option<berth_ui::Attach>) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        let instead = match &attach {
            Some(a) => format!(
                "`berth run logs {} -f` follows it for a script, `berth run tell` and `berth run answer` act on it",
                a.run
            ),
            None => {
                "`berth run list` and `berth workspace list` print the same for a script".to_owned()
            }
        };
        return Err(berth_ops::Error::invalid(format!(
            "the dashboard needs a terminal: {instead}"
        ))
        .into());
    }
    let program = std::env::current_exe().context("cannot find the berth program")?;
    let runs = berth_run::Runs::open(ops.clone())
        .await?
        .with_program(&program);
    let options = berth_ui::Options {
        // The dashboard only creates a land; its supervisor process drives it.
        lander: berth_run::Lander::new(ops.clone(), runs.store().clone(), runs.agent().clone()),
        program,
        here: std::env::current_dir().context("cannot read the current folder")?,
        color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        attach,
    };
    berth_ui::run(ops, runs, options)
        .await
        .context("the terminal failed")
}
