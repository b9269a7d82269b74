//! Finishing a run that is over: `pick` merges the winner and drops the others (`--undo`
//! takes it back), `discard` and `clean` drop work on purpose, `restore` brings dropped work
//! back, `delete` removes a run's record.

use anyhow::Context;
use berth_ops::Ops;
use berth_run::{AgentNumber, RunStore};

use crate::commands::confirm;
use crate::render;

/// How to pick: the merge's style, and what the person said to override.
pub(super) struct How {
    pub mode: berth_ops::MergeMode,
    pub keep_others: bool,
    pub force: bool,
    pub also: bool,
}

pub(super) async fn pick(
    ops: &Ops,
    store: &RunStore,
    id: &str,
    choice: berth_run::Choice,
    how: How,
    json: bool,
) -> anyhow::Result<()> {
    let run = store.resolve(id).await?;
    let here = std::env::current_dir().context("cannot read the current folder")?;
    let picked = berth_run::pick(
        ops,
        store,
        berth_run::Pick {
            run,
            choice,
            mode: how.mode,
            keep_others: how.keep_others,
            force: how.force,
            also: how.also,
        },
        &here,
    )
    .await?;
    if json {
        return Ok(render::json(&picked)?);
    }
    if let Some(why) = &picked.why {
        render::line(format!("best: {why}"))?;
    }
    if let Some(forced) = &picked.forced {
        eprintln!("warning: forced: {forced}");
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
    render::line(format!(
        "undo with `berth run pick {} --undo` while nothing is committed on top",
        picked.run
    ))?;
    Ok(())
}

pub(super) async fn undo(ops: &Ops, store: &RunStore, id: &str, json: bool) -> anyhow::Result<()> {
    let run = store.resolve(id).await?;
    let undone = berth_run::undo_pick(ops, store, &run).await?;
    if json {
        return Ok(render::json(&undone)?);
    }
    render::line(format!(
        "undid the pick of agent {} of run {}: {} is back at {} (was {})",
        undone.agent,
        undone.run,
        undone.branch,
        &undone.to[..undone.to.len().min(12)],
        &undone.from[..undone.from.len().min(12)]
    ))?;
    if let Some(r) = &undone.lost_ref {
        render::line(format!(
            "its work is kept on {r}: `berth run restore {} {}` brings it back as a workspace",
            undone.run, undone.agent
        ))?;
    }
    Ok(())
}

pub(super) async fn restore(
    ops: &Ops,
    store: &RunStore,
    id: &str,
    agent: AgentNumber,
    json: bool,
) -> anyhow::Result<()> {
    let run = store.resolve(id).await?;
    let restored = berth_run::restore(ops, store, &run, agent.index()).await?;
    if json {
        return Ok(render::json(&restored)?);
    }
    let ws = &restored.workspace;
    render::line(format!(
        "restored agent {} of run {} from {}: workspace {}{}",
        restored.agent,
        restored.run,
        restored.from,
        ws.label,
        ws.path
            .as_ref()
            .map(|p| format!(" at {}", p.display()))
            .unwrap_or_default()
    ))?;
    Ok(())
}

pub(super) async fn delete(
    ops: &Ops,
    store: &RunStore,
    id: &str,
    with_sessions: bool,
    yes: bool,
    json: bool,
) -> anyhow::Result<()> {
    let run = store.resolve(id).await?;
    let question = match with_sessions {
        true => format!("Delete run {run}'s record and its agents' sessions?"),
        false => format!("Delete run {run}'s record (its sessions stay)?"),
    };
    confirm(yes, &question)?;
    let deleted = berth_run::delete_run(ops, store, &run, with_sessions).await?;
    if json {
        return Ok(render::json(&deleted)?);
    }
    render::line(format!("deleted run {}", deleted.run))?;
    for ws in &deleted.workspaces {
        render::line(format!("deleted its archived workspace {ws}"))?;
    }
    if !deleted.sessions.is_empty() {
        render::line(format!("deleted {} session(s)", deleted.sessions.len()))?;
    }
    Ok(())
}

fn print_dropped(dropped: &[berth_run::Dropped]) -> std::io::Result<()> {
    for d in dropped {
        render::line(format!(
            "dropped agent {}'s workspace {}",
            d.agent, d.workspace
        ))?;
        if let Some(r) = &d.lost_ref {
            render::line(format!("  its work is kept on {r}"))?;
        }
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
    older_than: Option<std::time::Duration>,
    dry_run: bool,
    yes: bool,
    json: bool,
) -> anyhow::Result<()> {
    let runs = berth_run::cleanable(ops, store, older_than).await?;
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
