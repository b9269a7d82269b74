//! Bringing a git workspace's work back: its diff against its base, and its merge into a
//! branch (berth-git does the git; the rules of which branch, which messages and what
//! `--delete` may remove are here, for every front end).
//!
//! - **Into**: the branch named, else the workspace's base; a base that is a remote-tracking
//!   branch (`origin/main`) means the local branch of that name.
//! - **Messages**: uncommitted work becomes a commit naming the workspace and its latest
//!   session; a merge or squash commit names the workspace and its branch.
//! - **Delete after merging**: everything the workspace held was just merged, so the removal
//!   is forced past the lost-work check, which a squash or a rebase (whose commits are copies)
//!   or a target other than the base would otherwise trip; the workspace's own commits are
//!   first kept on `refs/berth/lost/<id>`, as every forced removal keeps them.

use berth_core::GitInfo;
use berth_git::{MergeMode, MergeRequest, Merged, Repo, WorktreeDiff};
use serde::Serialize;

use crate::Ops;
use crate::error::{Error, Result, blocking};
use crate::workspaces::Deleted;

/// A request to merge a workspace's work.
#[derive(Debug, Clone)]
pub struct MergeWorkspace {
    /// The workspace: id, name or id prefix.
    pub workspace: String,
    /// The local branch to merge into; `None`: the workspace's base.
    pub into: Option<String>,
    pub mode: MergeMode,
    /// Remove the workspace once its work is merged.
    pub delete: bool,
}

/// What a merge did, and the removal after it.
#[derive(Debug, Serialize)]
pub struct MergeReport {
    pub workspace: String,
    pub branch: String,
    #[serde(flatten)]
    pub merged: Merged,
    pub deleted: Option<Deleted>,
}

impl Ops {
    /// The changes of a git workspace against its base, committed and uncommitted (untracked
    /// files included), with the unified diff when `patch` is true.
    pub async fn workspace_diff(&self, identifier: &str, patch: bool) -> Result<WorktreeDiff> {
        let ws = self.manager.resolve(identifier).await?;
        let git = git_of(&ws)?;
        blocking(move || Ok(berth_git::diff(&git.worktree, &git.base_branch, patch)?)).await
    }

    /// Merges a git workspace's work into a branch (see the module's doc).
    pub async fn merge_workspace(&self, request: MergeWorkspace) -> Result<MergeReport> {
        let ws = self.manager.resolve(&request.workspace).await?;
        let git = git_of(&ws)?;
        let label = ws.label();
        let session = self.latest_session(&ws).await?;
        let uncommitted_message = match &session {
            Some(s) if !s.title.is_empty() => format!(
                "berth: uncommitted work of workspace {label}\n\nSession {} ({:?}).",
                s.id, s.title
            ),
            Some(s) => format!(
                "berth: uncommitted work of workspace {label}\n\nSession {}.",
                s.id
            ),
            None => format!("berth: uncommitted work of workspace {label}"),
        };
        let message = format!("Merge workspace {label} (branch {})", git.branch);
        let mode = request.mode;
        let into = request.into.clone();
        let merged = blocking(move || {
            let repo = Repo::open(&git.repo)?;
            let into = match into {
                Some(b) => b,
                None => local_base(&repo, &git.base_branch)?,
            };
            Ok(repo.merge(&MergeRequest {
                worktree: &git.worktree,
                into: &into,
                mode,
                uncommitted_message: &uncommitted_message,
                message: &message,
            })?)
        })
        .await?;
        let deleted = if request.delete {
            let plan = self.plan_delete(ws.id.as_str(), true).await?;
            Some(self.delete_workspace(plan).await?)
        } else {
            None
        };
        Ok(MergeReport {
            workspace: label,
            branch: ws
                .git
                .as_ref()
                .map(|g| g.branch.clone())
                .unwrap_or_default(),
            merged,
            deleted,
        })
    }
}

fn git_of(ws: &berth_core::Workspace) -> Result<GitInfo> {
    ws.git.clone().ok_or_else(|| {
        Error::invalid(format!(
            "workspace {} is a plain workspace: it has no branch to diff or merge",
            ws.label()
        ))
    })
}

/// The local branch a base names: itself, or for `origin/<b>`, `<b>`.
fn local_base(repo: &Repo, base: &str) -> Result<String> {
    if repo.has_branch(base) {
        return Ok(base.to_owned());
    }
    if let Some((_, local)) = base.split_once('/')
        && repo.has_branch(local)
    {
        return Ok(local.to_owned());
    }
    Err(Error::invalid(format!(
        "the workspace's base {base:?} is not a local branch to merge into; name one"
    )))
}
