//! Finishing a run that is over: `pick` merges the winner and drops the others, `discard` and
//! `clean` drop work on purpose.

use anyhow::Context;
use berth_ops::Ops;
use berth_run::{AgentNumber, RunStore};

use crate::commands::confirm;
use crate::render;

pub(super) async fn pick(
    ops: &Ops,
    store: &RunStore,
    id: &str,
    agent: AgentNumber,
    mode: berth_ops::MergeMode,
    keep_others: bool,
    json: bool,
) -> anyhow::Result<()> {
    let run = store.resolve(id).await?;
    let here = std::env::current_dir().context("cannot read the current folder")?;
    let picked = berth_run::pick(
        ops,
        store,
        berth_run::Pick {
            run,
            agent: agent.index(),
            mode,
            keep_others,
        },
        &here,
    )
    .await?;
    if json {
        return Ok(render::json(&picked)?);
    }
    let m = &picked.merge;
    render::line(format!(
        "picked agent {} of run {}: {} commit(s) of {} into {}, {} -> {}",
        picked.agent,
        picked.run,
        m.merged.commits,
        m.branch,
        m.merged.into,
        &m.merged.before[..m.merged.before.len().min(12)],
        &m.merged.after[..m.merged.after.len().min(12)]
    ))?;
    if let Some(deleted) = &m.deleted {
        render::line(format!("removed its workspace {}", deleted.label))?;
    }
    if let Some(w) = &m.warning {
        eprintln!("warning: {w}");
    }
    print_dropped(&picked.dropped)?;
    if !picked.kept.is_empty() {
        let kept: Vec<String> = picked.kept.iter().map(|n| n.to_string()).collect();
        render::line(format!(
            "kept the workspaces of agent(s) {}",
            kept.join(", ")
        ))?;
    }
    Ok(())
}

fn print_dropped(dropped: &[berth_run::Dropped]) -> std::io::Result<()> {
    for d in dropped {
        render::line(format!(
            "dropped agent {}'s workspace {}",
            d.agent, d.workspace
        ))?;
        if let Some(note) = &d.note {
            render::line(format!("  {note}"))?;
        }
    }
    Ok(())
}

pub(super) async fn discard(
    ops: &Ops,
    store: &RunStore,
    id: &str,
    agent: Option<AgentNumber>,
    yes: bool,
    json: bool,
) -> anyhow::Result<()> {
    let run = store.resolve(id).await?;
    let agent = agent.map(AgentNumber::index);
    let question = match agent {
        Some(i) => format!("Drop the work of agent {} of run {run}?", i + 1),
        None => format!("Drop the work of every agent of run {run} not merged?"),
    };
    confirm(yes, &question)?;
    let dropped = berth_run::discard(ops, store, &run, agent).await?;
    if json {
        return Ok(render::json(&dropped)?);
    }
    if dropped.is_empty() {
        eprintln!("no workspace was left to drop; the agents are recorded discarded");
    }
    Ok(print_dropped(&dropped)?)
}

pub(super) async fn clean(
    ops: &Ops,
    store: &RunStore,
    dry_run: bool,
    yes: bool,
    json: bool,
) -> anyhow::Result<()> {
    let runs = berth_run::cleanable(ops, store).await?;
    let left: usize = runs.iter().map(|(_, agents)| agents.len()).sum();
    if dry_run || runs.is_empty() {
        if json {
            let planned: Vec<serde_json::Value> = runs
                .iter()
                .map(|(r, agents)| {
                    let agents: Vec<usize> = agents.iter().map(|i| i + 1).collect();
                    serde_json::json!({"run": r.id.to_string(), "agents": agents})
                })
                .collect();
            return Ok(render::json(&planned)?);
        }
        if runs.is_empty() {
            eprintln!("nothing to clean: no finished run has a workspace left");
        }
        for (r, agents) in &runs {
            render::line(format!(
                "would drop {} workspace(s) of run {}: {}",
                agents.len(),
                r.id,
                render::cell(&berth_ops::title_of(&r.request.task))
            ))?;
        }
        return Ok(());
    }
    confirm(
        yes,
        &format!(
            "Drop {left} workspace(s) left by {} finished run(s)?",
            runs.len()
        ),
    )?;
    let cleaned = berth_run::clean(ops, store, &runs).await?;
    if json {
        return Ok(render::json(&cleaned)?);
    }
    for c in &cleaned {
        render::line(format!("cleaned run {}", c.run))?;
        print_dropped(&c.dropped)?;
    }
    Ok(())
}
