//! Archived workspaces: an agent's work put away without losing its sessions, and brought back.
//!
//! Archiving a git workspace keeps its worktree's work on `refs/berth/lost/<id>` (what a forced
//! removal would lose, else its HEAD: `Repo::keep_for_restore`), then removes the worktree and
//! the branch berth made; the record stays, its git part unchanged (so the base and the branch
//! stay known), with its sessions and storage, marked `archived_at`. A plain workspace is only
//! marked. Restoring makes the worktree again from that ref, on its branch, with what was
//! uncommitted back as uncommitted changes, and clears the mark.
//!
//! The record is marked before the worktree goes, so a crash between the two leaves an archived
//! record whose worktree is still there, which archiving again finishes; a failed removal takes
//! the mark back. An archived workspace takes no new session or turn, and garbage collection,
//! prune, repair and doctor pass it over: it holds only records.

use chrono::{DateTime, Utc};
use serde::Serialize;

use berth_core::{ErrorKind, GitInfo, Workspace, WorkspaceId};
use berth_git::{GitError, Repo, WorktreeRef};

use crate::Ops;
use crate::error::{Error, Result, blocking};
use crate::view::WorkspaceView;

/// What archiving a workspace did.
#[derive(Debug, Clone, Serialize)]
pub struct Archived {
    pub id: WorkspaceId,
    pub label: String,
    /// The ref its worktree's work is kept on (`refs/berth/lost/<id>`, or with `-2`… when
    /// that was taken): what `restore_workspace` takes. `None` for a plain workspace, one whose
    /// worktree and branch were both gone, and one archived before (its ref was named then).
    pub lost_ref: Option<String>,
    /// Something the person should know, though nothing failed.
    pub warning: Option<String>,
    /// When it was archived: now, or when it was first.
    pub archived_at: DateTime<Utc>,
    /// It was archived before this call, which changed nothing.
    pub already: bool,
}

/// Where archiving workspace `id` keeps its worktree's work (and a forced delete what it would
/// lose): one place, so a dropped agent's work is found where a deleted one's is.
pub(crate) fn lost_ref(id: &WorkspaceId) -> String {
    format!("refs/berth/lost/{id}")
}

/// `Refused` for an archived workspace, saying what `doing` needs and where its work is.
pub(crate) fn refuse_archived(ws: &Workspace, doing: &str) -> Result<()> {
    let Some(at) = ws.archived_at else {
        return Ok(());
    };
    let kept = match &ws.git {
        Some(git) => format!(
            "its worktree was removed and its work kept on a ref under refs/berth/lost/{} in {} (a run's restore brings a dropped agent back)",
            ws.id,
            git.repo.display()
        ),
        None => "its folder, sessions and storage are kept but take no new work".to_owned(),
    };
    Err(Error::refused(format!(
        "workspace {} is archived (since {}), so {doing}: {kept}",
        ws.label(),
        at.format("%Y-%m-%d %H:%M UTC")
    )))
}

fn worktree_ref(git: &GitInfo) -> WorktreeRef<'_> {
    WorktreeRef {
        path: &git.worktree,
        branch: &git.branch,
        base_branch: &git.base_branch,
        branch_created: git.branch_created,
    }
}

impl Ops {
    /// Archives the workspace `identifier` names (see the module's comment). Archiving an
    /// archived workspace changes nothing (but finishes one whose worktree is still there).
    /// `default` is refused: it is everyone's.
    pub async fn archive_workspace(&self, identifier: &str) -> Result<Archived> {
        let ws = self.manager.resolve(identifier).await?;
        if ws.id.is_default() {
            return Err(Error::refused(
                "the default workspace cannot be archived: it is where work goes when no workspace is named",
            ));
        }
        let worktree_left = ws.git.as_ref().is_some_and(|g| g.worktree.exists());
        if let Some(at) = ws.archived_at
            && !worktree_left
        {
            return Ok(Archived {
                id: ws.id.clone(),
                label: ws.label(),
                lost_ref: None,
                warning: None,
                archived_at: at,
                already: true,
            });
        }
        // Its processes work in the worktree about to go; their output is kept.
        self.end_background(&ws.id, false).await?;
        let already = ws.archived_at.is_some();
        let at = ws.archived_at.unwrap_or_else(Utc::now);
        let marked = self
            .manager
            .workspaces()
            .set_archived(&ws.id, Some(at))
            .await?;
        let (lost_ref, warning) = match marked.git.clone() {
            None => (None, None),
            Some(git) => {
                let refname = lost_ref(&ws.id);
                match blocking(move || put_away(&git, &refname)).await {
                    Ok(done) => done,
                    Err(e) => {
                        if !already {
                            self.manager.workspaces().set_archived(&ws.id, None).await?;
                        }
                        return Err(e);
                    }
                }
            }
        };
        Ok(Archived {
            id: marked.id.clone(),
            label: marked.label(),
            lost_ref,
            warning,
            archived_at: at,
            already: false,
        })
    }

    /// Brings the archived workspace `identifier` names back: a git workspace's worktree made
    /// again from `from` (the ref its archive named, or any commit) at its recorded path, on its
    /// recorded branch, as it was when archived (its commits, and what was uncommitted back as
    /// uncommitted changes); a plain workspace only loses its mark. Refused for a workspace
    /// that is not archived, a `from` that names no commit, a branch that now exists at
    /// another commit, and a worktree path something else took.
    pub async fn restore_workspace(&self, identifier: &str, from: &str) -> Result<WorkspaceView> {
        let ws = self.manager.resolve(identifier).await?;
        if !ws.is_archived() {
            return Err(Error::refused(format!(
                "workspace {} is not archived, so there is nothing to restore",
                ws.label()
            )));
        }
        if let Some(git) = ws.git.clone() {
            let from = from.to_owned();
            blocking(move || {
                let repo = Repo::open(&git.repo).map_err(|e| {
                    Error::rule(
                        ErrorKind::Refused,
                        format!(
                            "the repository {} of the archived worktree is gone ({e}); if it moved, restore it where it was first",
                            git.repo.display()
                        ),
                    )
                })?;
                repo.restore_worktree(worktree_ref(&git), &from)?;
                Ok(())
            })
            .await?;
        }
        let ws = self.manager.workspaces().set_archived(&ws.id, None).await?;
        let status = self.git_status(&ws).await?;
        Ok(self.view(&ws, status))
    }
}

/// Keeps the worktree's work on `refname` (or `refname-2`…), then removes the worktree and the
/// branch berth made. Returns the ref, and a warning when there was nothing to keep.
fn put_away(git: &GitInfo, refname: &str) -> Result<(Option<String>, Option<String>)> {
    let repo = match Repo::open(&git.repo) {
        Ok(repo) => repo,
        Err(_) if !git.worktree.exists() => {
            return Ok((
                None,
                Some(format!(
                    "the repository {} and the worktree were both gone already",
                    git.repo.display()
                )),
            ));
        }
        Err(e) => {
            return Err(Error::refused(format!(
                "the repository {} is gone ({e}), so the work in the worktree {} cannot be kept on a ref; nothing was archived. If the repository moved, `berth workspace repair --repo NEW-PATH` reattaches it",
                git.repo.display(),
                git.worktree.display()
            )));
        }
    };
    let kept = repo
        .keep_for_restore(worktree_ref(git), refname)
        .map_err(|e| {
            Error::rule(
                ErrorKind::External,
                format!(
                    "cannot keep the worktree's work on {refname} before removing it, so nothing was archived: {e}"
                ),
            )
        })?;
    repo.remove_worktree(worktree_ref(git), true)
        .map_err(|e: GitError| Error::Git(e))?;
    let warning = kept.is_none().then(|| {
        format!(
            "the worktree {} had no commit and its branch {} was gone, so there was nothing to keep",
            git.worktree.display(),
            git.branch
        )
    });
    Ok((kept, warning))
}
