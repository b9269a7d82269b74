//! What a prompt or an agent learns about a project and a workspace before advising on it: the
//! repository's default base, the project's own check commands, and a workspace's branch,
//! uncommitted files, commits, context and sessions. Gathered here so the MCP prompts, and
//! chat and ACP after them, tell the same story.

use std::path::{Path, PathBuf};

use berth_core::Workspace;
use berth_git::Repo;

pub use crate::git_workspace::{REVIEW_MAX_COMMITS, Review};
pub use berth_git::{Health, LastCommit, WorktreeStatus};

use crate::Ops;
use crate::error::{Result, blocking};
use crate::git_workspace;
use crate::toolchain::{self, Check};

/// A repository as a new piece of work starts in it.
#[derive(Debug, Clone)]
pub struct Project {
    pub repo: PathBuf,
    /// Where new branches start by default; `None` when git cannot tell.
    pub default_base: Option<String>,
    pub checks: Vec<Check>,
}

/// A workspace as a reviewer sees it.
#[derive(Debug, Clone)]
pub struct WorkspaceReview {
    pub workspace: Workspace,
    /// For a git workspace: its branch and worktree state, and the project's checks.
    pub git: Option<(Review, Vec<Check>)>,
    /// Its `context.md`, if one was written.
    pub context: Option<String>,
    pub sessions: usize,
}

impl Ops {
    /// The repository at `repo`: its default base and its check commands.
    pub async fn project(&self, repo: &Path) -> Result<Project> {
        let repo = repo.to_owned();
        blocking(move || {
            let default_base = Repo::open(&repo).and_then(|r| r.default_base()).ok();
            let checks = toolchain::detect(&repo);
            Ok(Project {
                repo,
                default_base,
                checks,
            })
        })
        .await
    }

    /// Everything a review of the workspace `identifier` names needs. Looking is not using:
    /// the workspace's last use stays as it was.
    pub async fn review_workspace(&self, identifier: &str) -> Result<WorkspaceReview> {
        let ws = self.manager.resolve(identifier).await?;
        let git = match ws.git.clone() {
            Some(git) => Some(
                blocking(move || {
                    let review = git_workspace::review(&git);
                    let checks = toolchain::detect(&git.worktree);
                    Ok((review, checks))
                })
                .await?,
            ),
            None => None,
        };
        let context = self.context(&ws).await?;
        let sessions = self.session_records(Some(&ws.id)).await?.len();
        Ok(WorkspaceReview {
            workspace: ws,
            git,
            context,
            sessions,
        })
    }
}
