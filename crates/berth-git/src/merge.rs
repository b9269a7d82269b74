//! Bringing a worktree's work into a branch: a merge, a squash or a rebase, decided in full
//! before anything changes.
//!
//! Everything that can refuse is checked first, on objects only: the worktree's uncommitted
//! changes become a commit object (through a copy of its index) that no ref points to yet,
//! `git merge-tree --write-tree` merges in memory and names the conflicting files, and the
//! target branch's checkout (if it has one) is judged as git's own merge would: it must have
//! no change to a tracked file, and no untracked or ignored file where the merge adds one (an
//! untracked file anywhere else stays, untouched). A refusal therefore leaves both sides
//! exactly as they were. Only then does the target move: with `merge --ff-only` in the
//! checkout where it is checked out (its files follow), else as a compare-and-swap of its ref.
//! Last, the worktree's own branch takes the commit of its uncommitted changes, so the work
//! merged is the work the workspace holds. The workspace's commits are never rewritten or
//! dropped: a merge contains them, and a squash or a rebase copies them and leaves them on the
//! workspace's branch.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::command::{git_output, run};
use crate::remove::{Embedded, snapshot_tree};
use crate::status::{head_state, tracked_state};
use crate::{GitError, Repo, Result};

/// How the work lands on the target branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MergeMode {
    /// A merge commit (or a fast-forward when the target has not moved).
    Merge,
    /// One new commit on the target with the work's changes.
    Squash,
    /// The work's commits replayed on the target, one by one.
    Rebase,
}

/// Where the work to merge is.
#[derive(Debug, Clone, Copy)]
pub enum Work<'a> {
    /// A worktree: its HEAD, and its uncommitted changes.
    Worktree(&'a Path),
    /// A commit of this repository (a branch another machine pushed, fetched here).
    Commit(&'a str),
}

/// What to merge where.
#[derive(Debug, Clone)]
pub struct MergeRequest<'a> {
    pub work: Work<'a>,
    /// The local branch to bring the work into.
    pub into: &'a str,
    pub mode: MergeMode,
    /// The message of the commit that takes the worktree's uncommitted changes.
    pub uncommitted_message: &'a str,
    /// The message of a merge or squash commit.
    pub message: &'a str,
}

/// What a merge did.
#[derive(Debug, Clone, Serialize)]
pub struct Merged {
    pub into: String,
    pub mode: MergeMode,
    /// The target's tip before and after (full SHAs; equal when there was nothing to bring).
    pub before: String,
    pub after: String,
    /// Whether the target only moved forward to the work.
    pub fast_forward: bool,
    /// The commit that took the worktree's uncommitted changes, if it had any.
    pub uncommitted_commit: Option<String>,
    /// How many of the work's commits the target did not have.
    pub commits: usize,
    /// The checkout of the target branch whose files were updated, if it is checked out.
    pub checkout: Option<PathBuf>,
}

impl Repo {
    /// Brings `request.work` into `request.into` (see the module's doc).
    pub fn merge(&self, request: &MergeRequest<'_>) -> Result<Merged> {
        let into_ref = format!("refs/heads/{}", request.into);
        let before = self
            .git(["rev-parse", "--verify", "--quiet", &into_ref])
            .map_err(|_| GitError::BranchMissing(request.into.to_owned()))?
            .trim()
            .to_owned();
        // Where the merge's own git commands run, the work's tip, and the commit of a
        // worktree's uncommitted changes (on top of its HEAD, which no ref names yet).
        let (wt, head, work, uncommitted_commit) = self.work_tip(request)?;
        let commits: usize = run(wt, ["rev-list", "--count", &format!("{before}..{work}")])?
            .trim()
            .parse()
            .unwrap_or(0);
        let checkout = self.checkout_of(request.into)?;
        if let Some(path) = &checkout {
            let target = tracked_state(path)?;
            if target.changed > 0 {
                return Err(GitError::TargetDirty {
                    branch: request.into.to_owned(),
                    path: path.clone(),
                    count: target.changed,
                });
            }
        }
        let already_there = is_ancestor(wt, &work, &before)?;
        let fast_forward = !already_there && is_ancestor(wt, &before, &work)?;
        let after = if already_there {
            before.clone()
        } else {
            self.merged_commit(wt, request, &before, &work, fast_forward)?
        };
        if after != before
            && let Some(path) = &checkout
        {
            let files = overwritten_untracked(path, &before, &after)?;
            if !files.is_empty() {
                return Err(GitError::TargetUntracked {
                    branch: request.into.to_owned(),
                    path: path.clone(),
                    files,
                });
            }
        }
        if after != before {
            match &checkout {
                // The checkout is clean and `after` descends from its HEAD: its files follow.
                Some(path) => {
                    run(path, ["merge", "--ff-only", "--quiet", &after])?;
                }
                None => {
                    self.git(["update-ref", &into_ref, &after, &before])?;
                }
            }
        }
        if let Some(commit) = &uncommitted_commit {
            // The branch takes the commit only if nothing moved it meanwhile; the files are
            // already what the commit holds, so only the index follows.
            run(wt, ["update-ref", "HEAD", commit, &head])?;
            run(wt, ["reset", "--quiet"])?;
        }
        Ok(Merged {
            into: request.into.to_owned(),
            mode: request.mode,
            fast_forward: fast_forward && after == work,
            before,
            after,
            uncommitted_commit,
            commits,
            checkout,
        })
    }

    /// Where the merge's git commands run, the work's HEAD, the work's tip, and the commit of
    /// a worktree's uncommitted changes, if it has any (its tip then).
    fn work_tip<'a>(
        &'a self,
        request: &MergeRequest<'a>,
    ) -> Result<(&'a Path, String, String, Option<String>)> {
        Ok(match request.work {
            Work::Worktree(wt) => {
                let state = head_state(wt)?;
                if state.branch.as_deref() == Some(request.into) {
                    return Err(GitError::MergeIntoItself(request.into.to_owned()));
                }
                let head = state.sha.ok_or_else(|| {
                    GitError::BadBase("HEAD (the worktree has no commit)".to_owned())
                })?;
                if state.changed > 0 {
                    let tree = snapshot_tree(wt, Embedded::Refuse)?;
                    let commit = commit_tree(wt, &tree, &[&head], request.uncommitted_message)?;
                    (wt, head, commit.clone(), Some(commit))
                } else {
                    (wt, head.clone(), head, None)
                }
            }
            Work::Commit(commit) => {
                let sha = self
                    .git([
                        "rev-parse",
                        "--verify",
                        "--quiet",
                        &format!("{commit}^{{commit}}"),
                    ])
                    .map_err(|_| GitError::BadBase(commit.to_owned()))?
                    .trim()
                    .to_owned();
                (self.root(), sha.clone(), sha, None)
            }
        })
    }

    /// The commit `request.into` moves to, made in `request.mode`, when it does not hold
    /// `work` already.
    fn merged_commit(
        &self,
        wt: &Path,
        request: &MergeRequest<'_>,
        before: &str,
        work: &str,
        fast_forward: bool,
    ) -> Result<String> {
        Ok(match request.mode {
            MergeMode::Merge if fast_forward => work.to_owned(),
            MergeMode::Rebase if fast_forward => work.to_owned(),
            MergeMode::Merge => {
                let tree = merged_tree(wt, request.into, before, work)?;
                commit_tree(wt, &tree, &[before, work], request.message)?
            }
            MergeMode::Squash => {
                let tree = if fast_forward {
                    run(wt, ["rev-parse", &format!("{work}^{{tree}}")])?
                        .trim()
                        .to_owned()
                } else {
                    merged_tree(wt, request.into, before, work)?
                };
                commit_tree(wt, &tree, &[before], request.message)?
            }
            MergeMode::Rebase => self.replay(wt, request.into, before, work)?,
        })
    }

    /// The worktree (main checkout or linked) where `branch` is checked out, if any.
    pub(crate) fn checkout_of(&self, branch: &str) -> Result<Option<PathBuf>> {
        let listed = self.git(["worktree", "list", "--porcelain", "-z"])?;
        let wanted = format!("branch refs/heads/{branch}");
        let mut path = None;
        for field in listed.split('\0') {
            if let Some(p) = field.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if field == wanted {
                return Ok(path);
            }
        }
        Ok(None)
    }

    /// `work`'s commits since it left `into`'s history (at `onto`, its tip), replayed on it by
    /// `git replay --advance`, which touches no worktree and moves no ref: it only says where
    /// `into` would go. The new tip.
    pub(crate) fn replay(&self, wt: &Path, into: &str, onto: &str, work: &str) -> Result<String> {
        let base = run(wt, ["merge-base", onto, work])?;
        let out = git_output(
            wt,
            [
                "replay",
                "--advance",
                into,
                &format!("{}..{work}", base.trim()),
            ],
        )?;
        if !out.status.success() {
            // A commit that does not apply: name the files, as a merge would.
            let files = conflicts(wt, onto, work)?;
            if files.is_empty() {
                return Err(GitError::Command {
                    command: "replay --advance".to_owned(),
                    message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                });
            }
            return Err(GitError::MergeConflict {
                into: into.to_owned(),
                files,
            });
        }
        // `update refs/heads/<into> <new> <old>`
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("update ")?.split(' ').nth(1))
            .map(str::to_owned)
            .ok_or_else(|| GitError::Command {
                command: "replay".to_owned(),
                message: "git replay named no new commit".to_owned(),
            })
    }
}

/// `theirs` merged into `ours` on objects (`git merge-tree --write-tree`), the one place
/// berth asks git for a merge: the tree (conflict markers included where they conflict), and
/// the conflicted files' names as git gave them (empty when it merges cleanly).
pub(crate) fn merge_tree(dir: &Path, ours: &str, theirs: &str) -> Result<(String, Vec<Vec<u8>>)> {
    let out = git_output(
        dir,
        [
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            // The names as they are, not quoted: a message quotes them.
            "-z",
            "--end-of-options",
            ours,
            theirs,
        ],
    )?;
    // `<tree> NUL <name> NUL … NUL`: the names after the tree, up to an empty field.
    let mut fields = out.stdout.split(|&b| b == 0);
    let tree = String::from_utf8_lossy(fields.next().unwrap_or_default())
        .trim()
        .to_owned();
    match out.status.code() {
        Some(0) => Ok((tree, Vec::new())),
        Some(1) => Ok((
            tree,
            fields
                .take_while(|f| !f.is_empty())
                .map(<[u8]>::to_vec)
                .collect(),
        )),
        _ => Err(GitError::Command {
            command: format!("merge-tree --write-tree {ours} {theirs}"),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        }),
    }
}

/// Names as text, for a message (a byte that is not UTF-8 shown as U+FFFD).
pub(crate) fn lossy(names: Vec<Vec<u8>>) -> Vec<String> {
    names
        .into_iter()
        .map(|n| String::from_utf8_lossy(&n).into_owned())
        .collect()
}

/// The tree of `ours` and `theirs` merged, or the conflicting files.
fn merged_tree(wt: &Path, into: &str, ours: &str, theirs: &str) -> Result<String> {
    let (tree, files) = merge_tree(wt, ours, theirs)?;
    match files.is_empty() {
        true => Ok(tree),
        false => Err(GitError::MergeConflict {
            into: into.to_owned(),
            files: lossy(files),
        }),
    }
}

/// The files a merge of `theirs` into `ours` would conflict on (empty: none).
fn conflicts(wt: &Path, ours: &str, theirs: &str) -> Result<Vec<String>> {
    Ok(lossy(merge_tree(wt, ours, theirs)?.1))
}

/// The files in `checkout` (on `before`) that git does not track and that moving it to
/// `after` would write over: a path the merge adds that is already there (a file, a folder, a
/// link; untracked or ignored alike), or a file in the way of a folder the merge adds (unless
/// the merge deletes that file itself). Relative to the checkout, in git's order.
pub(crate) fn overwritten_untracked(
    checkout: &Path,
    before: &str,
    after: &str,
) -> Result<Vec<String>> {
    let out = run(
        checkout,
        [
            "diff",
            "--name-status",
            "-z",
            "--no-renames",
            "--diff-filter=AD",
            before,
            after,
            "--",
        ],
    )?;
    let mut added = Vec::new();
    let mut deleted = std::collections::HashSet::new();
    let mut fields = out.split('\0');
    while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
        match status {
            "A" => added.push(path),
            "D" => {
                deleted.insert(path);
            }
            _ => {}
        }
    }
    let mut found: Vec<String> = Vec::new();
    for path in added {
        let mut in_the_way = None;
        // Each folder above the path, from the top: a file there (not one the merge deletes)
        // stands where git must make a folder.
        let parts: Vec<&str> = path.split('/').collect();
        for end in 1..parts.len() {
            let prefix = parts[..end].join("/");
            if let Ok(meta) = std::fs::symlink_metadata(checkout.join(&prefix))
                && !meta.is_dir()
                && !deleted.contains(prefix.as_str())
            {
                in_the_way = Some(prefix);
                break;
            }
        }
        if in_the_way.is_none() && std::fs::symlink_metadata(checkout.join(path)).is_ok() {
            in_the_way = Some(path.to_owned());
        }
        if let Some(p) = in_the_way
            && !found.contains(&p)
        {
            found.push(p);
        }
    }
    Ok(found)
}

pub(crate) fn is_ancestor(wt: &Path, ancestor: &str, of: &str) -> Result<bool> {
    let out = git_output(wt, ["merge-base", "--is-ancestor", ancestor, of])?;
    Ok(out.status.success())
}

/// A commit object of `tree` with `parents`, named by no ref.
pub(crate) fn commit_tree(
    wt: &Path,
    tree: &str,
    parents: &[&str],
    message: &str,
) -> Result<String> {
    let mut args = vec!["commit-tree", tree];
    for p in parents {
        args.push("-p");
        args.push(p);
    }
    args.push("-m");
    args.push(message);
    Ok(run(wt, args)?.trim().to_owned())
}
