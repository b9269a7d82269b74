//! Undoing a merge berth made (`berth run pick --undo`): the branch put back where it was,
//! only when nothing was committed on top of the merge since, its checkout's files with it;
//! and the merged work kept on a lost-work ref first, so undoing loses nothing.

use std::path::PathBuf;

use serde::Serialize;

use crate::command::run;
use crate::{GitError, Repo, Result};

/// What [`Repo::undo_merge`] did.
#[derive(Debug, Clone, Serialize)]
pub struct UndoneMerge {
    /// The ref that holds the work the merge brought, now that the branch does not.
    pub kept_on: String,
    /// The checkout of the branch whose files went back with it, if it is checked out.
    pub checkout: Option<PathBuf>,
}

impl Repo {
    /// Moves `branch` from `after` (a merge berth made) back to `before`, keeping `after` on
    /// `keep` (or `keep-2`, …) first. Refused, with nothing changed, when the branch is no
    /// longer at `after` (naming the `git revert` that undoes the merge instead), or when its
    /// checkout has tracked changes.
    pub fn undo_merge(
        &self,
        branch: &str,
        before: &str,
        after: &str,
        keep: &str,
    ) -> Result<UndoneMerge> {
        let full = format!("refs/heads/{branch}");
        let now = self.rev(&full)?;
        if now != after {
            let parents = self
                .git(["rev-list", "--parents", "-n", "1", after])?
                .split_whitespace()
                .count()
                .saturating_sub(1);
            let revert = match parents {
                2 => format!("git revert -m 1 {}", short(after)),
                _ => format!("git revert --no-edit {}..{}", short(before), short(after)),
            };
            return Err(GitError::MovedOnSinceMerge {
                branch: branch.to_owned(),
                merged: short(after).to_owned(),
                now: short(&now).to_owned(),
                revert,
            });
        }
        let checkout = self.checkout_of(branch)?;
        if let Some(dir) = &checkout {
            let changed = run(dir, ["status", "--porcelain", "--untracked-files=no"])?;
            let count = changed.lines().filter(|l| !l.trim().is_empty()).count();
            if count > 0 {
                return Err(GitError::TargetDirty {
                    branch: branch.to_owned(),
                    path: dir.clone(),
                    count,
                });
            }
        }
        let kept_on = self.create_lost_ref(keep, after)?;
        match &checkout {
            // `--keep` moves the branch and the files that differ, and leaves untracked files.
            Some(dir) => {
                run(dir, ["reset", "--quiet", "--keep", before])?;
            }
            None => {
                self.git([
                    "update-ref",
                    "-m",
                    "berth: pick undone",
                    &full,
                    before,
                    after,
                ])?;
            }
        }
        Ok(UndoneMerge { kept_on, checkout })
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}
