//! berth-git: git worktrees for workspaces, driving the real `git` binary.
//!
//! A git workspace is a worktree of a project's repository on its own branch, so several agents
//! work on one repository without touching each other's files. This crate creates such
//! worktrees (writing a cold checkout's files itself where it writes what git would, else with
//! git's parallel checkout), removes them without losing work, and reports
//! their state cheaply. It knows nothing of berth's stores: `berth-ops` keeps a workspace record
//! and its worktree in step.
//!
//! Every git call runs with a clean git environment (no inherited `GIT_DIR`, `GIT_WORK_TREE`
//! or `GIT_INDEX_FILE`, which a hook or an outer git would otherwise leak in), never prompts,
//! and reports failures with the command and git's own message.

use std::path::{Path, PathBuf};

mod command;
mod create;
mod diff;
mod discover;
mod error;
mod fill;
mod index_file;
mod land;
mod linked;
mod lost;
mod merge;
mod objects;
pub mod progress;
mod refs;
mod remote;
mod remove;
mod restore;
mod setup;
pub mod spares;
mod status;
mod submodules;
mod trial;
mod undo;
mod version;
pub use create::{AddedWorktree, BaseBehind, BranchSpec, WorktreePlan};
pub use diff::{FileDiff, WorktreeDiff, diff, diff_refs};
pub use error::{GitError, Result};
pub use land::{Brought, has_conflict_markers};
pub use linked::{LinkedWorktree, ListedWorktree, linked_worktree};
pub use lost::{LOST_PREFIX, LostRef};
pub use merge::{MergeMode, MergeRequest, Merged, Work};
pub use refs::BranchMerged;
pub use remote::{
    clone_dir, commit_all, compare_url, has_password, is_url, push_branch, remote_url,
};
pub use remove::KeptWork;
pub use restore::RestoredWork;
pub use setup::{Copied, Ended, OutputSink, SetupError, copy_files, run_command, run_setup};
pub use status::{Health, LastCommit, WorktreeStatus, changed_paths};
pub use trial::{FileName, work_commit};
pub use undo::UndoneMerge;
pub use version::{
    GitVersion, MINIMUM as GIT_MINIMUM, REBASE_MINIMUM as GIT_REBASE_MINIMUM, version,
};

// The topics above each add their part of `impl Repo`; what they all share stays here.

/// A worktree as recorded by the caller.
#[derive(Debug, Clone, Copy)]
pub struct WorktreeRef<'a> {
    pub path: &'a Path,
    pub branch: &'a str,
    pub base_branch: &'a str,
    pub branch_created: bool,
}

/// The branch recorded for a worktree on a detached HEAD. Git refuses `HEAD` as a branch name,
/// so it can never mean a real branch; where a branch's tip is needed, the worktree's own HEAD
/// is used instead.
pub const DETACHED_HEAD: &str = "HEAD";

/// A repository: one with a main checkout, or a bare one (whose worktrees are all linked).
#[derive(Debug, Clone)]
pub struct Repo {
    /// The main checkout, or the bare repository's own folder.
    root: PathBuf,
    bare: bool,
}
