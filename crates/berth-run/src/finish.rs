//! Finishing a run: the picked agent's work merged into the run's base, the others' dropped,
//! the workspaces of finished runs cleaned away, a pick undone, a dropped agent restored, a
//! run's record deleted; and each agent's outcome (merged, discarded, kept) written into
//! the run's record whichever front end did it: `berth run pick`, `discard`, `clean`,
//! `restore` and `delete`, `berth workspace merge` and `delete`, the review page.
//!
//! The rules, here once:
//! - only a run that is over is finished (its supervisor writes the record while it runs);
//! - a pick is on evidence ([`crate::evidence`]): a refusal names why and `--force`;
//! - nothing is lost: an agent's work that is dropped is kept on berth's lost-work ref
//!   (`refs/berth/lost/<id>`, recorded as the agent's `lost_ref`), and its workspace is
//!   archived, not deleted: its record and its sessions stay, only its worktree goes, so
//!   its transcript is still read and `run restore` brings it back under the same id;
//! - a merge's commit message names the task once, the run, the agent and its check;
//! - recording an outcome never touches another agent's state.

use std::path::Path;

use berth_ops::{Archived, DeletePlan, Deleted, MergeMode, MergeReport, MergeWorkspace, Ops};
use serde::Serialize;

use crate::evidence::{Choice, best, merged, pick_refusal};
use crate::kept::{AgentOutcome, KeptError, MergeRecord, RunId, RunRecord, RunStore};

/// A [`KeptError`] as the front ends' error, its kind kept.
fn kept(e: KeptError) -> berth_ops::Error {
    berth_ops::Error::rule(e.kind(), e.to_string())
}

/// An agent's workspace dropped.
#[derive(Debug, Clone, Serialize)]
pub struct Dropped {
    /// Counted from 1.
    pub agent: usize,
    pub workspace: String,
    /// Where its commits and uncommitted files were kept (`berth run restore` brings them
    /// back from there), when it had any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_ref: Option<String>,
    /// What else to know.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What `pick` did.
#[derive(Debug, Serialize)]
pub struct Picked {
    pub run: String,
    /// The agent merged, counted from 1.
    pub agent: usize,
    /// Why this agent, when `best` chose it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// What forcing it overrode, when it was forced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forced: Option<String>,
    pub merge: MergeReport,
    pub dropped: Vec<Dropped>,
    /// The others' agents whose workspaces were kept (`--keep-others`), counted from 1.
    pub kept: Vec<usize>,
}

/// What to pick, and how.
#[derive(Debug, Clone)]
pub struct Pick {
    pub run: RunId,
    pub choice: Choice,
    pub mode: MergeMode,
    /// Keep the other agents' workspaces (their outcome `kept`) instead of dropping them.
    pub keep_others: bool,
    /// Merge it though the evidence is against it ([`pick_refusal`]).
    pub force: bool,
    /// Merge it though another agent of the run was merged already.
    pub also: bool,
}

/// The run `run`, over.
async fn over(store: &RunStore, run: &RunId) -> berth_ops::Result<RunRecord> {
    let record = store.load(run).await.map_err(kept)?;
    if !record.state.is_over() {
        return Err(kept(KeptError::StillRunning {
            id: run.clone(),
            state: record.state,
        }));
    }
    Ok(record)
}

/// Agent `agent` of `record`, not merged or discarded yet, and its workspace.
fn open_agent(record: &RunRecord, agent: usize) -> berth_ops::Result<String> {
    let run = &record.id;
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
    a.workspace.clone().ok_or_else(|| {
        berth_ops::Error::refused(format!(
            "agent {} of run {run} never got a workspace: it has no work to pick",
            agent + 1
        ))
    })
}

/// Merges the chosen agent's work into the run's base (the repository holding `dir` for a
/// workspace a pool's node made elsewhere), with a message naming the task, and archives its
/// workspace; then drops the others' workspaces, or keeps them with `keep_others`. Refused,
/// before anything moves, when the evidence is against the agent and it is not forced, or
/// when the run has a winner already and `also` is not set.
#[tracing::instrument(name = "run.pick", skip_all, fields(run = %pick.run))]
pub async fn pick(
    ops: &Ops,
    store: &RunStore,
    pick: Pick,
    dir: &Path,
) -> berth_ops::Result<Picked> {
    let record = over(store, &pick.run).await?;
    let id = &record.id;
    let (agent, why) = match pick.choice {
        Choice::Agent(i) => (i, None),
        Choice::Best => {
            let (i, why) = best(&record).map_err(berth_ops::Error::refused)?;
            (i, Some(why))
        }
    };
    let ws = open_agent(&record, agent)?;
    let n = agent + 1;
    if !pick.also
        && let Some(winner) = merged(&record).into_iter().find(|w| *w != agent)
    {
        return Err(berth_ops::Error::refused(format!(
            "run {id} has its winner already: agent {} was merged; `berth run pick {id} {n} --also` merges agent {n} as well, combining their work on purpose",
            winner + 1
        )));
    }
    let refusal = pick_refusal(&record, agent);
    if let Some(refusal) = &refusal
        && !pick.force
    {
        let look = match record.agents[agent].check() {
            Some(c) if !c.passed && !c.not_run => {
                format!("; `berth run logs {id} --agent {n} --check` shows the check's output")
            }
            _ => String::new(),
        };
        return Err(berth_ops::Error::refused(format!(
            "{refusal}, so it is not picked without --force (`berth run pick {id} {n} --force` merges it anyway){look}"
        )));
    }
    let here = ops.resolve_workspace(&ws).await?;
    let elsewhere = here.git.as_ref().is_some_and(|g| !g.worktree.is_dir());
    let merge = crate::pushed::merge_workspace(
        ops,
        store,
        MergeWorkspace {
            workspace: ws.clone(),
            into: None,
            mode: pick.mode,
            // Archived below, not deleted: its sessions stay.
            delete: false,
            message: Some(crate::merged::merge_message(&record, agent)),
        },
        dir,
    )
    .await?;
    let mut merge = merge;
    // A workspace on another node is that node's to remove.
    if !elsewhere {
        match ops.archive_workspace(&ws).await {
            Ok(_) => {}
            Err(e) => {
                merge.warning = Some(format!(
                    "its work is merged, but its workspace could not be archived: {e}"
                ))
            }
        }
    }
    let mut dropped = Vec::new();
    let mut kept_others = Vec::new();
    for (i, a) in record.agents.iter().enumerate() {
        if i == agent || a.outcome.is_some() {
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
        agent: n,
        why,
        forced: refusal.filter(|_| pick.force),
        merge,
        dropped,
        kept: kept_others,
    })
}

/// What `pick --undo` did.
#[derive(Debug, Serialize)]
pub struct Undone {
    pub run: String,
    /// The agent whose merge was undone, counted from 1.
    pub agent: usize,
    pub branch: String,
    /// The branch's tip before the undo (the merge) and after it (as before the pick).
    pub from: String,
    pub to: String,
    /// Where the agent's work is kept now: `berth run restore` brings it back.
    pub lost_ref: Option<String>,
}

/// Puts the base back where it was before the run's pick, when nothing was committed on top
/// of the merge since; otherwise refuses, naming the `git revert` that would undo it. The
/// agent is no longer merged: its work is kept on a lost ref, for `run restore`.
pub async fn undo_pick(ops: &Ops, store: &RunStore, run: &RunId) -> berth_ops::Result<Undone> {
    let record = over(store, run).await?;
    let winners = merged(&record);
    let (agent, m) = match winners.as_slice() {
        [] => {
            return Err(berth_ops::Error::refused(format!(
                "run {run} has no agent picked: there is nothing to undo"
            )));
        }
        [one] => (*one, record.agents[*one].merge.clone()),
        // Several (`--also`): the last merged, the one whose merge no other came after.
        several => {
            let merges: Vec<(usize, &MergeRecord)> = several
                .iter()
                .filter_map(|i| record.agents[*i].merge.as_ref().map(|m| (*i, m)))
                .collect();
            let last = merges
                .iter()
                .find(|(_, m)| !merges.iter().any(|(_, other)| other.before == m.after))
                .map_or(several[0], |(i, _)| *i);
            (last, record.agents[last].merge.clone())
        }
    };
    let Some(m) = m else {
        return Err(berth_ops::Error::refused(format!(
            "agent {} of run {run} was merged without berth keeping where (by hand, or by an older berth): undo it with git",
            agent + 1
        )));
    };
    let ws = record.agents[agent].workspace.clone().unwrap_or_default();
    let lost = ops
        .undo_merge(&m.repo, &m.into, &m.before, &m.after, &ws)
        .await?;
    let lost_ref = lost.clone();
    store
        .change_agent(run, agent, move |a| {
            a.outcome = None;
            a.merge = None;
            if lost_ref.is_some() {
                a.lost_ref = lost_ref.clone();
            }
        })
        .await
        .map_err(kept)?;
    Ok(Undone {
        run: run.to_string(),
        agent: agent + 1,
        branch: m.into,
        from: m.after,
        to: m.before,
        lost_ref: lost,
    })
}

/// Drops the work of agent `agent` of the run `run` that is over (every agent with `None`)
/// on purpose: its workspace archived, what it held kept on berth's lost-work ref.
/// A merged agent is refused by name; one already discarded is skipped.
pub async fn discard(
    ops: &Ops,
    store: &RunStore,
    run: &RunId,
    agent: Option<usize>,
) -> berth_ops::Result<Vec<Dropped>> {
    let record = over(store, run).await?;
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

/// Archives agent `i`'s workspace (when it still exists): its worktree removed, what it held
/// kept on berth's lost-work ref, its record and sessions kept; and records it discarded,
/// with that ref.
pub(crate) async fn drop_agent(
    ops: &Ops,
    store: &RunStore,
    run: &RunId,
    i: usize,
    workspace: Option<&str>,
) -> berth_ops::Result<Option<Dropped>> {
    let mut result = None;
    let mut lost_ref = None;
    if let Some(ws) = workspace {
        match ops.archive_workspace(ws).await {
            Ok(Archived {
                label,
                lost_ref: kept_on,
                warning,
                ..
            }) => {
                lost_ref = kept_on.clone();
                result = Some(Dropped {
                    agent: i + 1,
                    workspace: label,
                    lost_ref: kept_on,
                    note: warning,
                });
            }
            // Deleted already, by hand: only the record is left to say so.
            Err(e) if e.kind() == berth_ops::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    store
        .change_agent(run, i, move |a| {
            a.outcome = Some(AgentOutcome::Discarded);
            if lost_ref.is_some() {
                a.lost_ref = lost_ref.clone();
            }
        })
        .await
        .map_err(kept)?;
    Ok(result)
}

/// What `restore` did.
#[derive(Debug, Serialize)]
pub struct Restored {
    pub run: String,
    /// Counted from 1.
    pub agent: usize,
    pub workspace: berth_ops::WorkspaceView,
    /// The ref its work came back from.
    pub from: String,
}

/// Brings a dropped agent's work back (dropped by a pick, a discard, a clean, or a pick
/// undone): its archived workspace made again (the same id, its worktree on its branch
/// against its original base) from its lost ref, and the agent recorded `kept`, so its
/// diff, `tell` and `pick` work again.
pub async fn restore(
    ops: &Ops,
    store: &RunStore,
    run: &RunId,
    agent: usize,
) -> berth_ops::Result<Restored> {
    let record = over(store, run).await?;
    let Some(a) = record.agents.get(agent) else {
        return Err(kept(KeptError::NoSuchAgent {
            id: run.clone(),
            agent: agent + 1,
            count: record.agents.len(),
        }));
    };
    let n = agent + 1;
    if a.outcome == Some(AgentOutcome::Merged) {
        return Err(berth_ops::Error::refused(format!(
            "agent {n} of run {run} was merged: its work is on the base already (`berth run pick {run} --undo` takes it back off)"
        )));
    }
    let Some(ws) = a.workspace.clone() else {
        return Err(berth_ops::Error::refused(format!(
            "agent {n} of run {run} never got a workspace: it has no work to bring back"
        )));
    };
    if ops.resolve_workspace(&ws).await?.archived_at.is_none() {
        return Err(berth_ops::Error::refused(format!(
            "agent {n} of run {run} was not dropped: its workspace is still there"
        )));
    }
    let Some(from) = a.lost_ref.clone() else {
        return Err(berth_ops::Error::rule(
            berth_ops::ErrorKind::NotFound,
            format!(
                "agent {n} of run {run} was dropped without berth recording where its work went (by an older berth): nothing to bring back from here; `git for-each-ref refs/berth/lost` lists what berth kept"
            ),
        ));
    };
    let workspace = ops.restore_workspace(&ws, &from).await?;
    store
        .change_agent(run, agent, |a| {
            a.outcome = Some(AgentOutcome::Kept);
            a.lost_ref = None;
        })
        .await
        .map_err(kept)?;
    Ok(Restored {
        run: run.to_string(),
        agent: n,
        workspace,
        from,
    })
}

/// What `clean` did to one run.
#[derive(Debug, Clone, Serialize)]
pub struct Cleaned {
    pub run: String,
    pub dropped: Vec<Dropped>,
}

/// The runs `clean` would finish, each with the agents whose workspaces it would drop: runs
/// over, with an agent merged or every agent discarded, and a workspace left that was not
/// kept on purpose (a merged agent's too, when it was merged without removing it); and with
/// `unreviewed_for`, runs over that long that nobody reviewed (no agent's work merged,
/// discarded or kept), counted from their end.
pub async fn cleanable(
    ops: &Ops,
    store: &RunStore,
    unreviewed_for: Option<std::time::Duration>,
) -> berth_ops::Result<Vec<(RunRecord, Vec<usize>)>> {
    let now = chrono::Utc::now();
    let mut runs = Vec::new();
    for run in store.list().await.map_err(kept)?.into_iter().flatten() {
        if !run.state.is_over() {
            continue;
        }
        let picked = run
            .agents
            .iter()
            .any(|a| a.outcome == Some(AgentOutcome::Merged));
        let discarded = run
            .agents
            .iter()
            .all(|a| a.outcome == Some(AgentOutcome::Discarded));
        let unreviewed = run.agents.iter().all(|a| a.outcome.is_none());
        let old_enough = match (unreviewed_for, run.ended_at.or(run.started_at)) {
            (Some(age), Some(ended)) => (now - ended).to_std().is_ok_and(|since| since >= age),
            _ => false,
        };
        if !(picked || discarded || (unreviewed && old_enough)) {
            continue;
        }
        let mut left = Vec::new();
        for (i, a) in run.agents.iter().enumerate() {
            let droppable = matches!(a.outcome, None | Some(AgentOutcome::Merged));
            if let Some(ws) = &a.workspace
                && droppable
                && ops
                    .resolve_workspace(ws)
                    .await
                    .is_ok_and(|w| w.archived_at.is_none())
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

/// Drops the workspaces [`cleanable`] found: archived, their work on lost refs, their
/// sessions kept. An agent not yet decided is recorded discarded; a merged one stays merged.
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
                    let archived = ops.archive_workspace(ws).await?;
                    dropped.push(Dropped {
                        agent: i + 1,
                        workspace: archived.label,
                        lost_ref: archived.lost_ref,
                        note: archived.warning,
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

/// What `delete` did.
#[derive(Debug, Serialize)]
pub struct DeletedRun {
    pub run: String,
    /// The sessions deleted with it (`--with-sessions`).
    pub sessions: Vec<String>,
    /// The archived workspaces deleted with their sessions.
    pub workspaces: Vec<String>,
}

/// Removes the record of run `run`, which must be over, and its folder on this machine
/// (events, kept output). Its agents' sessions stay unless `with_sessions`: then each is
/// deleted, and an archived workspace of the run goes with its sessions. A workspace still
/// in use (kept, restored, or never dropped) stays as it is.
pub async fn delete_run(
    ops: &Ops,
    store: &RunStore,
    run: &RunId,
    with_sessions: bool,
) -> berth_ops::Result<DeletedRun> {
    let record = over(store, run).await?;
    let mut deleted = DeletedRun {
        run: run.to_string(),
        sessions: Vec::new(),
        workspaces: Vec::new(),
    };
    if with_sessions {
        for a in &record.agents {
            let archived = match &a.workspace {
                Some(ws) => ops
                    .resolve_workspace(ws)
                    .await
                    .ok()
                    .filter(|w| w.archived_at.is_some()),
                None => None,
            };
            if let Some(ws) = archived {
                let plan = ops.plan_delete(ws.id.as_str(), true).await?;
                let gone = ops.delete_workspace(plan).await?;
                deleted.workspaces.push(gone.label);
                deleted.sessions.extend(a.session.clone());
                continue;
            }
            if let Some(session) = &a.session {
                match ops.resolve_session(session).await {
                    Ok(s) => {
                        ops.delete_session(&s).await?;
                        deleted.sessions.push(session.clone());
                    }
                    Err(e) if e.kind() == berth_ops::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    store.delete(run).await.map_err(kept)?;
    Ok(deleted)
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
