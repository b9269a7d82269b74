//! Finishing a run: the picked agent's work merged into the run's base, the others' dropped,
//! the workspaces of finished runs cleaned away, and each agent's outcome (merged,
//! discarded, kept) written into the run's record whichever front end did it: `berth run
//! pick`, `discard` and `clean`, `berth workspace merge` and `delete`, the review page.
//!
//! The rules, here once:
//! - only a run that is over is finished (its supervisor writes the record while it runs);
//! - a merge's commit message names the task, the run and the agent;
//! - dropping is forced (an agent's uncommitted work is its work, not an accident), and what
//!   it would lose is kept on berth's lost-work ref (`refs/berth/lost/<id>`), as every forced
//!   removal keeps it;
//! - recording an outcome never touches another agent's state.

use std::path::Path;

use berth_ops::{DeletePlan, Deleted, MergeMode, MergeReport, MergeWorkspace, Ops};
use serde::Serialize;

use crate::kept::{AgentOutcome, KeptError, RunId, RunRecord, RunStore};

/// A [`KeptError`] as the front ends' error, its kind kept.
fn kept(e: KeptError) -> berth_ops::Error {
    berth_ops::Error::rule(e.kind(), e.to_string())
}

/// The message of the commit that merges agent `agent` (0-based) of `record`.
pub fn merge_message(record: &RunRecord, agent: usize) -> String {
    let label = record
        .agents
        .get(agent)
        .map(|a| a.label.as_str())
        .unwrap_or("agent");
    format!(
        "{}\n\n{}\n\nberth run {}, agent {} ({label}).",
        berth_ops::title_of(&record.request.task),
        record.request.task.trim(),
        record.id,
        agent + 1
    )
}

/// An agent's workspace dropped.
#[derive(Debug, Clone, Serialize)]
pub struct Dropped {
    /// Counted from 1.
    pub agent: usize,
    pub workspace: String,
    /// Where its commits and uncommitted files were kept, or what else to know.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What `pick` did.
#[derive(Debug, Serialize)]
pub struct Picked {
    pub run: String,
    /// The agent merged, counted from 1.
    pub agent: usize,
    pub merge: MergeReport,
    pub dropped: Vec<Dropped>,
    /// The others' agents whose workspaces were kept (`--keep-others`), counted from 1.
    pub kept: Vec<usize>,
}

/// What to pick, and how.
#[derive(Debug, Clone)]
pub struct Pick {
    pub run: RunId,
    /// 0-based.
    pub agent: usize,
    pub mode: MergeMode,
    /// Keep the other agents' workspaces (their outcome `kept`) instead of dropping them.
    pub keep_others: bool,
}

/// The run `run`, over, and its agent `agent`'s workspace.
async fn finished_agent(
    store: &RunStore,
    run: &RunId,
    agent: usize,
) -> berth_ops::Result<(RunRecord, String)> {
    let record = store.load(run).await.map_err(kept)?;
    if !record.state.is_over() {
        return Err(kept(KeptError::StillRunning {
            id: run.clone(),
            state: record.state,
        }));
    }
    let Some(a) = record.agents.get(agent) else {
        return Err(kept(KeptError::NoSuchAgent {
            id: run.clone(),
            agent: agent + 1,
            count: record.agents.len(),
        }));
    };
    if let Some(outcome) = a.outcome.filter(|o| o.is_closed()) {
        return Err(kept(KeptError::AgentClosed {
            id: run.clone(),
            agent: agent + 1,
            outcome,
        }));
    }
    let Some(ws) = a.workspace.clone() else {
        return Err(berth_ops::Error::refused(format!(
            "agent {} of run {run} never got a workspace: it has no work to pick",
            agent + 1
        )));
    };
    Ok((record, ws))
}

/// Merges agent `pick.agent`'s work into the run's base (the repository holding `dir` for a
/// workspace a pool's node made elsewhere), with a message naming the task, and removes its
/// workspace; then drops the others' workspaces, or keeps them with `keep_others`.
pub async fn pick(
    ops: &Ops,
    store: &RunStore,
    pick: Pick,
    dir: &Path,
) -> berth_ops::Result<Picked> {
    let (record, ws) = finished_agent(store, &pick.run, pick.agent).await?;
    let here = ops.resolve_workspace(&ws).await?;
    let elsewhere = here.git.as_ref().is_some_and(|g| !g.worktree.is_dir());
    let merge = crate::pushed::merge_workspace(
        ops,
        store,
        MergeWorkspace {
            workspace: ws.clone(),
            into: None,
            mode: pick.mode,
            // A workspace on another node is that node's to remove.
            delete: !elsewhere,
            message: Some(merge_message(&record, pick.agent)),
        },
        dir,
    )
    .await?;
    let mut dropped = Vec::new();
    let mut kept_others = Vec::new();
    for (i, a) in record.agents.iter().enumerate() {
        if i == pick.agent || a.outcome.is_some_and(|o| o.is_closed()) {
            continue;
        }
        if pick.keep_others {
            store
                .set_outcome(&pick.run, i, AgentOutcome::Kept)
                .await
                .map_err(kept)?;
            kept_others.push(i + 1);
            continue;
        }
        dropped.extend(drop_agent(ops, store, &pick.run, i, a.workspace.as_deref()).await?);
    }
    Ok(Picked {
        run: pick.run.to_string(),
        agent: pick.agent + 1,
        merge,
        dropped,
        kept: kept_others,
    })
}

/// Drops the work of agent `agent` of the run `run` that is over (every agent with `None`)
/// on purpose: its workspace removed, forced, what it held kept on berth's lost-work ref.
/// A merged agent is refused by name; one already discarded is skipped.
pub async fn discard(
    ops: &Ops,
    store: &RunStore,
    run: &RunId,
    agent: Option<usize>,
) -> berth_ops::Result<Vec<Dropped>> {
    let record = store.load(run).await.map_err(kept)?;
    if !record.state.is_over() {
        return Err(kept(KeptError::StillRunning {
            id: run.clone(),
            state: record.state,
        }));
    }
    let which: Vec<usize> = match agent {
        Some(i) if i < record.agents.len() => vec![i],
        Some(i) => {
            return Err(kept(KeptError::NoSuchAgent {
                id: run.clone(),
                agent: i + 1,
                count: record.agents.len(),
            }));
        }
        None => (0..record.agents.len()).collect(),
    };
    let mut dropped = Vec::new();
    for i in which {
        let a = &record.agents[i];
        match a.outcome {
            Some(AgentOutcome::Discarded) => continue,
            Some(AgentOutcome::Merged) if agent.is_some() => {
                return Err(kept(KeptError::AgentClosed {
                    id: run.clone(),
                    agent: i + 1,
                    outcome: AgentOutcome::Merged,
                }));
            }
            Some(AgentOutcome::Merged) => continue,
            _ => {}
        }
        dropped.extend(drop_agent(ops, store, run, i, a.workspace.as_deref()).await?);
    }
    Ok(dropped)
}

/// Removes agent `i`'s workspace (when it still exists), forced, and records it discarded.
async fn drop_agent(
    ops: &Ops,
    store: &RunStore,
    run: &RunId,
    i: usize,
    workspace: Option<&str>,
) -> berth_ops::Result<Option<Dropped>> {
    let mut result = None;
    if let Some(ws) = workspace {
        match ops.plan_delete(ws, true).await {
            Ok(plan) => {
                let deleted = ops.delete_workspace(plan).await?;
                result = Some(Dropped {
                    agent: i + 1,
                    workspace: deleted.label,
                    note: deleted.warning,
                });
            }
            // Deleted already, by hand: only the record is left to say so.
            Err(e) if e.kind() == berth_ops::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    store
        .set_outcome(run, i, AgentOutcome::Discarded)
        .await
        .map_err(kept)?;
    Ok(result)
}

/// What `clean` did to one run.
#[derive(Debug, Clone, Serialize)]
pub struct Cleaned {
    pub run: String,
    pub dropped: Vec<Dropped>,
}

/// The runs `clean` would finish, each with the agents whose workspaces it would drop: runs
/// over, with an agent merged or every agent discarded, and a workspace left that was not
/// kept on purpose (a merged agent's too, when it was merged without removing it).
pub async fn cleanable(
    ops: &Ops,
    store: &RunStore,
) -> berth_ops::Result<Vec<(RunRecord, Vec<usize>)>> {
    let mut runs = Vec::new();
    for run in store.list().await.map_err(kept)?.into_iter().flatten() {
        let picked = run
            .agents
            .iter()
            .any(|a| a.outcome == Some(AgentOutcome::Merged));
        let discarded = run
            .agents
            .iter()
            .all(|a| a.outcome == Some(AgentOutcome::Discarded));
        if !run.state.is_over() || !(picked || discarded) {
            continue;
        }
        let mut left = Vec::new();
        for (i, a) in run.agents.iter().enumerate() {
            let droppable = matches!(a.outcome, None | Some(AgentOutcome::Merged));
            if let Some(ws) = &a.workspace
                && droppable
                && ops.resolve_workspace(ws).await.is_ok()
            {
                left.push(i);
            }
        }
        if !left.is_empty() {
            runs.push((run, left));
        }
    }
    Ok(runs)
}

/// Drops the workspaces [`cleanable`] found. An agent not yet decided is recorded
/// discarded; a merged one stays merged.
pub async fn clean(
    ops: &Ops,
    store: &RunStore,
    runs: &[(RunRecord, Vec<usize>)],
) -> berth_ops::Result<Vec<Cleaned>> {
    let mut cleaned = Vec::new();
    for (run, agents) in runs {
        let mut dropped = Vec::new();
        for &i in agents {
            let a = &run.agents[i];
            if a.outcome == Some(AgentOutcome::Merged) {
                if let Some(ws) = &a.workspace {
                    let deleted = ops
                        .delete_workspace(ops.plan_delete(ws, true).await?)
                        .await?;
                    dropped.push(Dropped {
                        agent: i + 1,
                        workspace: deleted.label,
                        note: None,
                    });
                }
                continue;
            }
            dropped.extend(drop_agent(ops, store, &run.id, i, a.workspace.as_deref()).await?);
        }
        cleaned.push(Cleaned {
            run: run.id.to_string(),
            dropped,
        });
    }
    Ok(cleaned)
}

/// Deletes a workspace ([`Ops::delete_workspace`]), and when an agent of a run that is over
/// worked in it, records that agent's work discarded (unless it was merged).
pub async fn delete_workspace(
    ops: &Ops,
    store: &RunStore,
    plan: DeletePlan,
) -> berth_ops::Result<Deleted> {
    let mut deleted = ops.delete_workspace(plan).await?;
    if let Err(why) = record_outcome(store, deleted.id.as_str(), AgentOutcome::Discarded).await {
        deleted.warning = Some(match deleted.warning.take() {
            Some(w) => format!("{w}; {why}"),
            None => why,
        });
    }
    Ok(deleted)
}

/// Records `outcome` for the agent of a run that worked in workspace `workspace`, where one
/// did. A merged agent stays merged. `Err` says why it could not be recorded: the
/// workspace's own change is done, so that is for a warning, never a failure.
pub(crate) async fn record_outcome(
    store: &RunStore,
    workspace: &str,
    outcome: AgentOutcome,
) -> Result<(), String> {
    let found = store
        .find_workspace(workspace)
        .await
        .map_err(|e| format!("no run's record says so: {e}"))?;
    match found {
        Some((run, i)) => record_outcome_of(store, &run, i, outcome).await,
        None => Ok(()),
    }
}

/// [`record_outcome`] for agent `i` of `run`, found already.
pub(crate) async fn record_outcome_of(
    store: &RunStore,
    run: &RunRecord,
    i: usize,
    outcome: AgentOutcome,
) -> Result<(), String> {
    let current = run.agents.get(i).and_then(|a| a.outcome);
    if current == Some(AgentOutcome::Merged) || current == Some(outcome) {
        return Ok(());
    }
    store
        .set_outcome(&run.id, i, outcome)
        .await
        .map(drop)
        .map_err(|e| {
            format!(
                "agent {} of run {} is not recorded {}: {e}",
                i + 1,
                run.id,
                outcome.as_str()
            )
        })
}
