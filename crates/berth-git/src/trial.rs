//! A merge tried before anyone asks for it: which files two pieces of work would conflict on,
//! found by git's own merge (`git merge-tree --write-tree`) on objects only, so that a run's
//! review can say, before a pick or a land, that an agent's work no longer merges into its
//! base or clashes with another run's agent.
//!
//! The work of a worktree is its HEAD and its uncommitted changes, untracked files included:
//! [`work_commit`] makes it one commit object that no ref names, through a copy of the
//! worktree's index, so nothing in the worktree or its index changes. That commit is made
//! with a fixed author, committer, date and message, so the same work is always the same
//! commit: its id names the work, and a caller can keep what a trial found by the two ids
//! it merged. A worktree without uncommitted changes is its HEAD itself.
//!
//! The index copy (`remove.rs`'s `snapshot_tree`) has a name of its own per call, since the
//! dashboard, the web page and a land may all look at one worktree at once.

use std::path::Path;

use serde::{Serialize, Serializer};

use crate::command::{command, run};
use crate::merge::merge_tree;
use crate::remove::{Embedded, snapshot_tree};
use crate::{GitError, Repo, Result};

/// Who made a commit of a worktree's work for a trial, and when: always the same, so the same
/// work gives the same commit.
const TRIAL_IDENTITY: [(&str, &str); 6] = [
    ("GIT_AUTHOR_NAME", "berth"),
    ("GIT_AUTHOR_EMAIL", "berth@localhost"),
    ("GIT_AUTHOR_DATE", "1970-01-01T00:00:00+0000"),
    ("GIT_COMMITTER_NAME", "berth"),
    ("GIT_COMMITTER_EMAIL", "berth@localhost"),
    ("GIT_COMMITTER_DATE", "1970-01-01T00:00:00+0000"),
];

/// The message of a trial's commit of uncommitted work.
const TRIAL_MESSAGE: &str = "berth: the uncommitted work, for a trial merge";

/// A file's name as git gave it: its exact bytes, which need not be UTF-8. A terminal or a
/// page shows it through [`FileName::shown`] (quoted as git quotes a name); JSON gets it as
/// text (a byte that is not UTF-8 becomes U+FFFD there).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileName(Vec<u8>);

impl FileName {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The name as a person may see it: quoted as git quotes it when it holds a control,
    /// a quote, a byte past ASCII or one that is not UTF-8 (berth-core's `shown`).
    pub fn shown(&self) -> String {
        berth_core::shown::visible(&self.0, berth_core::shown::Form::FileName).into_owned()
    }

    /// The name as text, each byte that is not UTF-8 replaced (for JSON and for comparing
    /// with names read as text).
    pub fn lossy(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

impl From<&str> for FileName {
    fn from(name: &str) -> FileName {
        FileName(name.as_bytes().to_vec())
    }
}

impl Serialize for FileName {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&String::from_utf8_lossy(&self.0))
    }
}

/// The work of the worktree at `worktree` as one commit: its HEAD when nothing is
/// uncommitted, else a commit of everything in it (untracked files included, ignored ones
/// and repositories made inside it left out) on top of its HEAD, made the same way each
/// time, so the same work is the same id. Nothing in the worktree, its index or any ref
/// changes; the commit is an object no ref names (git's gc drops it in time).
pub fn work_commit(worktree: &Path) -> Result<String> {
    let head = run(worktree, ["rev-parse", "--verify", "HEAD^{commit}"])
        .map_err(|_| GitError::BadBase("HEAD (the worktree has no commit)".to_owned()))?
        .trim()
        .to_owned();
    let tree = snapshot_tree(worktree, Embedded::LeaveOut)?;
    let head_tree = run(worktree, ["rev-parse", &format!("{head}^{{tree}}")])?;
    if head_tree.trim() == tree {
        return Ok(head);
    }
    let mut cmd = command(worktree);
    for (key, value) in TRIAL_IDENTITY {
        cmd.env(key, value);
    }
    let out = cmd
        .args(["commit-tree", "--no-gpg-sign", &tree, "-p", &head, "-m"])
        .arg(TRIAL_MESSAGE)
        .output()
        .map_err(GitError::Spawn)?;
    if !out.status.success() {
        return Err(GitError::Command {
            command: "commit-tree".to_owned(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

impl Repo {
    /// The files a merge of the commit `theirs` into the commit `ours` would conflict on, in
    /// git's order; empty when it merges cleanly. Nothing changes but new objects (the merged
    /// tree), which no ref names.
    pub fn trial_merge(&self, ours: &str, theirs: &str) -> Result<Vec<FileName>> {
        let (_, files) = merge_tree(self.root(), ours, theirs)?;
        Ok(files.into_iter().map(FileName).collect())
    }

    /// The local branch a base names, which a pick merges into: the base itself when it is a
    /// local branch, else for `origin/<b>` (a remote branch), `<b>` when that is one.
    pub fn local_base(&self, base: &str) -> Option<String> {
        if self.has_branch(base) {
            return Some(base.to_owned());
        }
        match base.split_once('/') {
            Some((_, local)) if self.has_branch(local) => Some(local.to_owned()),
            _ => None,
        }
    }

    /// The commit a local branch is at now (its full id).
    pub fn branch_tip(&self, branch: &str) -> Result<String> {
        self.rev(&format!("refs/heads/{branch}^{{commit}}"))
            .map_err(|_| GitError::BranchMissing(branch.to_owned()))
    }
}
