//! What a worktree changed against its base: committed and uncommitted work alike, untracked
//! files included (ignored ones not, nor a repository made inside the worktree, which a merge
//! refuses), read without touching the worktree, its index or any ref. The worktree as it is becomes a tree through a copy of its index
//! (`remove::snapshot_tree`), and git compares that tree with the point where the worktree's
//! HEAD left the base (their merge base), so the base moving on does not show up as changes.

use std::path::Path;

use serde::Serialize;

use crate::command::run;
use crate::remove::{Embedded, snapshot_tree};
use crate::{GitError, Result};

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileDiff {
    pub path: String,
    /// `added`, `modified`, `deleted` or `type-changed`.
    pub status: &'static str,
    /// Lines added and removed; `None` for a binary file.
    pub added: Option<u64>,
    pub removed: Option<u64>,
}

/// A worktree's changes against its base.
#[derive(Debug, Clone, Serialize)]
pub struct WorktreeDiff {
    /// The base as named.
    pub base: String,
    /// Where the worktree's HEAD left the base (full SHA).
    pub merge_base: String,
    pub files: Vec<FileDiff>,
    /// The unified diff, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
}

impl WorktreeDiff {
    /// Lines added and removed in all text files.
    pub fn totals(&self) -> (u64, u64) {
        self.files.iter().fold((0, 0), |(a, r), f| {
            (a + f.added.unwrap_or(0), r + f.removed.unwrap_or(0))
        })
    }
}

/// The changes of the worktree at `worktree` against `base` (a branch or any revision),
/// with the unified diff when `patch` is true.
pub fn diff(worktree: &Path, base: &str, patch: bool) -> Result<WorktreeDiff> {
    let merge_base = run(worktree, ["merge-base", base, "HEAD"])
        .map_err(|_| GitError::BadBase(base.to_owned()))?
        .trim()
        .to_owned();
    let tree = snapshot_tree(worktree, Embedded::LeaveOut)?;
    between(worktree, base, merge_base, &tree, patch)
}

/// The changes of the commit `head` (a branch fetched from where another machine pushed it)
/// against `base`, in the repository at `repo`, bare or not: what [`diff`] says of a
/// worktree, for work that is only commits.
pub fn diff_refs(repo: &Path, base: &str, head: &str, patch: bool) -> Result<WorktreeDiff> {
    let merge_base = run(repo, ["merge-base", base, head])
        .map_err(|_| GitError::BadBase(base.to_owned()))?
        .trim()
        .to_owned();
    let tree = run(repo, ["rev-parse", "--verify", &format!("{head}^{{tree}}")])
        .map_err(|_| GitError::BadBase(head.to_owned()))?
        .trim()
        .to_owned();
    between(repo, base, merge_base, &tree, patch)
}

/// The changes from `merge_base` to `tree`, read in `dir`.
fn between(
    dir: &Path,
    base: &str,
    merge_base: String,
    tree: &str,
    patch: bool,
) -> Result<WorktreeDiff> {
    // One call gives both: `--raw` entries (`:<modes> <shas> <status>` then the path) and
    // `--numstat` ones (`added\tremoved\tpath`, `-\t-\t` for a binary file), NUL-separated.
    let listed = run(
        dir,
        [
            "diff",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            "--raw",
            "--numstat",
            "-z",
            &merge_base,
            tree,
        ],
    )?;
    let mut files: Vec<FileDiff> = Vec::new();
    let mut fields = listed.split('\0').filter(|f| !f.is_empty());
    while let Some(field) = fields.next() {
        if let Some(raw) = field.strip_prefix(':') {
            let Some(path) = fields.next() else { break };
            files.push(FileDiff {
                path: path.to_owned(),
                status: match raw.rsplit(' ').next() {
                    Some("A") => "added",
                    Some("D") => "deleted",
                    Some("T") => "type-changed",
                    _ => "modified",
                },
                added: None,
                removed: None,
            });
            continue;
        }
        let mut parts = field.splitn(3, '\t');
        let (Some(added), Some(removed), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if let Some(f) = files.iter_mut().find(|f| f.path == path) {
            f.added = added.parse().ok();
            f.removed = removed.parse().ok();
        }
    }
    let patch = if patch {
        Some(run(
            dir,
            [
                "diff",
                "--no-renames",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
                &merge_base,
                tree,
            ],
        )?)
    } else {
        None
    };
    Ok(WorktreeDiff {
        base: base.to_owned(),
        merge_base,
        files,
        patch,
    })
}
