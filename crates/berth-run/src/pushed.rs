//! A workspace a pool's node made, seen from another machine: its worktree is that node's,
//! and its work is the branch the node pushed to the run's repository URL. `berth workspace
//! diff` and `merge` come here first, since only a kept run knows where a workspace's branch
//! went; a workspace whose worktree is on this machine is read as always.

use std::path::Path;

use berth_ops::{MergeReport, MergeWorkspace, Ops, Workspace, WorktreeDiff};

use crate::kept::{KeptError, RunStore};

/// The URL a queued run pushed workspace `id`'s branch to, when a run of the pool made it.
pub async fn pushed_url(store: &RunStore, id: &str) -> Result<Option<String>, KeptError> {
    for run in store.list().await?.into_iter().flatten() {
        if let Some(pool) = &run.request.pool
            && run
                .agents
                .iter()
                .any(|a| a.workspace.as_deref() == Some(id))
        {
            return Ok(Some(pool.repo_url.clone()));
        }
    }
    Ok(None)
}

/// Where `ws`'s work is when its worktree is not on this machine: the URL its branch was
/// pushed to.
async fn elsewhere(store: &RunStore, ws: &Workspace) -> berth_ops::Result<Option<String>> {
    match &ws.git {
        Some(git) if !git.worktree.is_dir() => pushed_url(store, ws.id.as_str())
            .await
            .map_err(|e| berth_ops::Error::rule(e.kind(), e.to_string())),
        _ => Ok(None),
    }
}

/// The changes of a git workspace against its base ([`Ops::workspace_diff`]); for one a
/// pool's node made elsewhere, its pushed branch, fetched first.
pub async fn workspace_diff(
    ops: &Ops,
    store: &RunStore,
    identifier: &str,
    patch: bool,
) -> berth_ops::Result<WorktreeDiff> {
    let ws = ops.resolve_workspace(identifier).await?;
    Ok(match elsewhere(store, &ws).await? {
        Some(url) => {
            ops.workspace_diff_pushed(ws.id.as_str(), &url, patch)
                .await?
        }
        None => ops.workspace_diff(ws.id.as_str(), patch).await?,
    })
}

/// Merges a git workspace's work ([`Ops::merge_workspace`]); for one a pool's node made
/// elsewhere, its pushed branch, fetched into the repository holding `dir` and merged there.
/// A run's agent's workspace is merged with a message naming the task and the agent (unless
/// the request has one), and that agent is recorded merged.
pub async fn merge_workspace(
    ops: &Ops,
    store: &RunStore,
    mut request: MergeWorkspace,
    dir: &Path,
) -> berth_ops::Result<MergeReport> {
    let ws = ops.resolve_workspace(&request.workspace).await?;
    // The run its agent worked for, read once: its message, where its branch went, and its
    // record of the merge.
    let run = store
        .find_workspace(ws.id.as_str())
        .await
        .map_err(|e| berth_ops::Error::rule(e.kind(), e.to_string()))?;
    if request.message.is_none()
        && let Some((record, i)) = &run
    {
        request.message = Some(crate::merged::merge_message(record, *i));
    }
    let pushed_to = match (&ws.git, &run) {
        (Some(git), Some((record, _))) if !git.worktree.is_dir() => {
            record.request.pool.as_ref().map(|p| p.repo_url.clone())
        }
        _ => None,
    };
    let mut report = match &pushed_to {
        Some(url) => ops.merge_pushed(request, url, dir).await?,
        None => ops.merge_workspace(request).await?,
    };
    if let Some((record, i)) = &run {
        // Where it went, for `run pick --undo`: a local workspace's repository only.
        let merge = match (&ws.git, pushed_to.is_some()) {
            (Some(git), false) => Some(crate::kept::MergeRecord {
                into: report.merged.into.clone(),
                before: report.merged.before.clone(),
                after: report.merged.after.clone(),
                repo: git.repo.clone(),
            }),
            _ => None,
        };
        if let Err(why) = crate::merged::record_merged(store, record, *i, merge).await {
            report.warning = Some(why);
        }
    }
    Ok(report)
}
