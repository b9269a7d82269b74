//! Bringing a git workspace's work back: its diff against its base, and its merge into a
//! branch (berth-git does the git; the rules of which branch, which messages and what
//! `--delete` may remove are here, for every front end).
//!
//! - **Into**: the branch named, else the workspace's base; a base that is a remote-tracking
//!   branch (`origin/main`) means the local branch of that name.
//! - **Messages**: uncommitted work becomes a commit naming the workspace and its latest
//!   session; a merge or squash commit has the request's message (a run's names its task and
//!   agent), else one naming the workspace and its branch. With a request's message, the
//!   uncommitted work's commit has it too: a fast-forward makes no merge commit.
//! - **Delete after merging**: everything the workspace held was just merged, so the removal
//!   is forced past the lost-work check, which a squash or a rebase (whose commits are copies)
//!   or a target other than the base would otherwise trip; the workspace's own commits are
//!   first kept on `refs/berth/lost/<id>`, as every forced removal keeps them. That is no
//!   warning here: nothing of the work was lost.

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
    /// The merge or squash commit's message; `None`: one naming the workspace and its branch.
    pub message: Option<String>,
}

/// What a merge did, and the removal after it.
#[derive(Debug, Serialize)]
pub struct MergeReport {
    pub workspace: String,
    pub branch: String,
    #[serde(flatten)]
    pub merged: Merged,
    pub deleted: Option<Deleted>,
    /// Something the person should know that did not stop the merge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl Ops {
    /// The changes of a git workspace against its base, committed and uncommitted (untracked
    /// files included), with the unified diff when `patch` is true.
    pub async fn workspace_diff(&self, identifier: &str, patch: bool) -> Result<WorktreeDiff> {
        let ws = self.manager.resolve(identifier).await?;
        let git = git_of(&ws)?;
        blocking(move || Ok(berth_git::diff(&git.worktree, &git.base_branch, patch)?)).await
    }

    /// Undoes a merge berth made into `branch` of the repository `repo` (a pick's), moving
    /// it from `after` back to `before` when nothing was committed on top since, and keeping
    /// `after` on workspace `workspace`'s lost-work ref first: the ref's name.
    pub async fn undo_merge(
        &self,
        repo: &std::path::Path,
        branch: &str,
        before: &str,
        after: &str,
        workspace: &str,
    ) -> Result<Option<String>> {
        let repo = repo.to_path_buf();
        let (branch, before, after) = (branch.to_owned(), before.to_owned(), after.to_owned());
        let keep = format!("refs/berth/lost/{workspace}");
        blocking(move || {
            let repo = Repo::open(&repo)?;
            Ok(Some(
                repo.undo_merge(&branch, &before, &after, &keep)?.kept_on,
            ))
        })
        .await
    }

    /// Merges a git workspace's work into a branch (see the module's doc).
    pub async fn merge_workspace(&self, request: MergeWorkspace) -> Result<MergeReport> {
        let ws = self.manager.resolve(&request.workspace).await?;
        let git = git_of(&ws)?;
        let label = ws.label();
        let session = self.latest_session(&ws).await?;
        let uncommitted_message = match &session {
            // A run's agent's work: its uncommitted part is the work the message names (and
            // a fast-forward makes no merge commit to carry it).
            _ if request.message.is_some() => request.message.clone().unwrap_or_default(),
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
        let message = request
            .message
            .clone()
            .unwrap_or_else(|| format!("Merge workspace {label} (branch {})", git.branch));
        let mode = request.mode;
        let into = request.into.clone();
        let merged = blocking(move || {
            let repo = Repo::open(&git.repo)?;
            let into = match into {
                Some(b) => b,
                None => local_base(&repo, &git.base_branch)?,
            };
            Ok(repo.merge(&MergeRequest {
                work: berth_git::Work::Worktree(&git.worktree),
                into: &into,
                mode,
                uncommitted_message: &uncommitted_message,
                message: &message,
            })?)
        })
        .await?;
        let deleted = if request.delete {
            let plan = self.plan_delete(ws.id.as_str(), true).await?;
            let mut deleted = self.delete_workspace(plan).await?;
            // The forced removal kept the originals of commits a squash or a rebase copied:
            // nothing was lost, so nothing to warn of.
            deleted.warning = None;
            Some(deleted)
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
            warning: None,
        })
    }
}

/// A git workspace whose worktree is on another machine (a pool's node made it), and whose
/// branch that machine pushed to `url`: its work is read from there.
impl Ops {
    /// [`Ops::workspace_diff`] of a workspace whose worktree is elsewhere: its branch as
    /// pushed to `url`, fetched into this home's clone of `url`, against its base there.
    pub async fn workspace_diff_pushed(
        &self,
        identifier: &str,
        url: &str,
        patch: bool,
    ) -> Result<WorktreeDiff> {
        let ws = self.manager.resolve(identifier).await?;
        let git = git_of(&ws)?;
        let clone = self.named_repository(std::path::Path::new(url)).await?.path;
        let head = format!("origin/{}", git.branch);
        let url = url.to_owned();
        blocking(move || {
            let repo = Repo::open(&clone)?;
            if !repo.has_remote_branch(&git.branch) {
                return Err(Error::rule(
                    berth_core::ErrorKind::NotFound,
                    format!(
                        "the branch {} is not on {url}: its worktree is on another machine, which has not pushed it (yet)",
                        git.branch
                    ),
                ));
            }
            Ok(berth_git::diff_refs(&clone, &git.base_branch, &head, patch)?)
        })
        .await
    }

    /// [`Ops::merge_workspace`] of a workspace whose worktree is elsewhere: its branch,
    /// fetched from `url`, merged into a branch of the repository holding `dir` (the base's
    /// local branch unless the request names one). `--delete` is refused: the workspace's
    /// folder is the other machine's to remove.
    pub async fn merge_pushed(
        &self,
        request: MergeWorkspace,
        url: &str,
        dir: &std::path::Path,
    ) -> Result<MergeReport> {
        let ws = self.manager.resolve(&request.workspace).await?;
        let git = git_of(&ws)?;
        let label = ws.label();
        if request.delete {
            return Err(Error::refused(format!(
                "workspace {label} is on another machine: merge it here without deleting it, and delete it there"
            )));
        }
        let message = request
            .message
            .clone()
            .unwrap_or_else(|| format!("Merge workspace {label} (branch {} of {url})", git.branch));
        let (url, dir) = (url.to_owned(), dir.to_owned());
        let (branch, base, into, mode) = (
            git.branch.clone(),
            git.base_branch.clone(),
            request.into.clone(),
            request.mode,
        );
        let merged = blocking(move || {
            let repo = Repo::discover(&dir)?;
            let fetched = repo.fetch_branch(&url, &branch)?;
            let into = match into {
                Some(b) => b,
                None => local_base(&repo, &base)?,
            };
            Ok(repo.merge(&MergeRequest {
                work: berth_git::Work::Commit(&fetched),
                into: &into,
                mode,
                uncommitted_message: "",
                message: &message,
            })?)
        })
        .await?;
        Ok(MergeReport {
            workspace: label,
            branch: git.branch,
            merged,
            deleted: None,
            warning: None,
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

/// The local branch a base names ([`Repo::local_base`]: itself, or for `origin/<b>`, `<b>`):
/// where a workspace's work is merged (`workspace merge`, a pick, a land) unless a branch is
/// named.
pub fn local_base(repo: &Repo, base: &str) -> Result<String> {
    repo.local_base(base).ok_or_else(|| {
        Error::invalid(format!(
            "the workspace's base {base:?} is not a local branch to merge into; name one"
        ))
    })
}
