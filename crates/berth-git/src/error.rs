//! The errors of git operations, each saying what failed and what to do about it; the
//! refusals that would lose work name the commits at stake.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{} is not inside a git repository (pass --repo PATH, or --plain for a plain workspace)", .0.display())]
    NotARepository(PathBuf),
    #[error("the repository {} keeps its git folder apart from its checkout (--separate-git-dir); berth needs a repository with its .git in its main checkout, or a bare one", .0.display())]
    SeparateGitDir(PathBuf),
    #[error("branch '{0}' already exists; pick another name, or check it out with --checkout {0}")]
    BranchExists(String),
    #[error("branch '{0}' exists neither locally nor as origin/{0}")]
    BranchMissing(String),
    #[error("base '{0}' does not name a commit in this repository")]
    BadBase(String),
    #[error("the worktree at {} has {count} uncommitted change(s); commit or stash them", .path.display())]
    Dirty { path: PathBuf, count: usize },
    #[error(
        "branch '{branch}' has {count} commit(s) that are on neither '{base}' nor its upstream ({}); merge or push them", listed(.commits, *.count)
    )]
    Unmerged {
        branch: String,
        base: String,
        count: usize,
        /// `<short sha> <subject>` of the newest few.
        commits: Vec<String>,
    },
    #[error(
        "the worktree at {} holds {count} commit(s) that no branch, tag or remote has ({}: a detached HEAD, or a branch deleted by hand); removing it would lose them. Put them on a branch (git -C {} switch -c NAME)", .path.display(), listed(.commits, *.count), .path.display()
    )]
    Unreferenced {
        path: PathBuf,
        count: usize,
        /// `<short sha> <subject>` of the newest few.
        commits: Vec<String>,
    },
    #[error(
        "{} is not a working git worktree (was its creation interrupted?), so berth cannot check it for uncommitted work: {message}", .path.display()
    )]
    NotAWorktree { path: PathBuf, message: String },
    #[error("{} is not a linked git worktree: {reason}", .path.display())]
    NotALinkedWorktree { path: PathBuf, reason: String },
    #[error("cannot check out the submodule {path}: {message}")]
    Submodule { path: String, message: String },
    #[error("the work cannot be merged into '{into}' without conflicts in: {}; nothing was changed. Merge '{into}' into the workspace and resolve them there, then merge again", names(.files))]
    MergeConflict {
        into: String,
        /// As they are (a message quotes them as git does).
        files: Vec<String>,
    },
    #[error(
        "'{branch}' moved while the work was being landed (it was at {expected}, it is at {now} now): nothing was changed"
    )]
    Moved {
        branch: String,
        expected: String,
        now: String,
    },
    #[error("'{branch}' is checked out at {} with {count} uncommitted change(s); commit or stash them there first (nothing was changed)", .path.display())]
    TargetDirty {
        branch: String,
        path: PathBuf,
        count: usize,
    },
    #[error("'{branch}' is checked out at {}, where the merge would overwrite {} untracked or ignored file(s): {}; move or delete them there first (nothing was changed)", .path.display(), .files.len(), names(.files))]
    TargetUntracked {
        branch: String,
        path: PathBuf,
        /// Relative to the checkout, as they are (a message quotes them as git does).
        files: Vec<String>,
    },
    #[error(
        "the worktree at {} holds a git repository of its own at {} (a folder with its own .git): git would record it as a link to a commit only that folder has, not as files, and berth's git never looks inside one. Nothing was committed. Remove it, or only its .git folder to keep its files as part of the work, or add it to .gitignore; then try again", .worktree.display(), names(.paths)
    )]
    EmbeddedRepository {
        worktree: PathBuf,
        /// The folders, relative to the worktree.
        paths: Vec<String>,
    },
    #[error(
        "'{branch}' has moved on since the pick ({merged} was merged, it is at {now} now): putting it back would drop what came after; `{revert}` undoes the pick in a new commit instead"
    )]
    MovedOnSinceMerge {
        branch: String,
        merged: String,
        now: String,
        /// The git command that undoes the merge in a new commit.
        revert: String,
    },
    #[error("the worktree is on '{0}' itself; name another branch to merge into")]
    MergeIntoItself(String),
    #[error("{} is corrupt: {reason}; fix or remove it (berth then counts each lost ref without a reflog as made now)", .path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("'{0}' names no commit in this repository, so there is no work to restore from it")]
    RestoreFromMissing(String),
    /// A worktree cannot be made again as it was recorded; the message says why and what to
    /// do.
    #[error("cannot restore the worktree: {0}")]
    RestoreRefused(String),
    #[error("`git {command}` failed: {message}")]
    Command { command: String, message: String },
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = GitError> = std::result::Result<T, E>;

impl GitError {
    /// Whether this refuses a removal that would lose work (or that berth cannot check for
    /// lost work), which the person may override by forcing it.
    pub fn would_lose_work(&self) -> bool {
        matches!(
            self,
            GitError::Dirty { .. }
                | GitError::Unmerged { .. }
                | GitError::Unreferenced { .. }
                | GitError::NotAWorktree { .. }
        )
    }
}

/// Files named in a message: each quoted as git quotes it (berth-core's `shown`), since an
/// agent chose the names and every front end prints the message.
fn names(files: &[String]) -> String {
    let quoted: Vec<_> = files
        .iter()
        .map(|f| berth_core::shown::visible(f, berth_core::shown::Form::FileName))
        .collect();
    quoted.join(", ")
}

/// Commits named in a refusal at most; the count says how many there are in all.
pub(crate) const NAMED_COMMITS: usize = 5;

/// `abc1234 subject, def5678 subject and 3 more`.
fn listed(commits: &[String], count: usize) -> String {
    let mut text = commits.join(", ");
    if count > commits.len() {
        text += &format!(" and {} more", count - commits.len());
    }
    text
}

use berth_core::ErrorKind;

/// The kind of each git failure, for every front end: a refusal to lose work is refused, a
/// branch in the way a conflict, git's own failure external.
impl berth_core::Kinded for GitError {
    fn kind(&self) -> ErrorKind {
        match self {
            GitError::NotARepository(_)
            | GitError::BadBase(_)
            | GitError::NotALinkedWorktree { .. } => ErrorKind::Invalid,
            GitError::SeparateGitDir(_)
            | GitError::Dirty { .. }
            | GitError::Unmerged { .. }
            | GitError::Unreferenced { .. }
            | GitError::NotAWorktree { .. } => ErrorKind::Refused,
            GitError::BranchExists(_) | GitError::MergeConflict { .. } | GitError::Moved { .. } => {
                ErrorKind::Conflict
            }
            GitError::TargetDirty { .. }
            | GitError::TargetUntracked { .. }
            | GitError::EmbeddedRepository { .. }
            | GitError::MovedOnSinceMerge { .. } => ErrorKind::Refused,
            GitError::MergeIntoItself(_) => ErrorKind::Invalid,
            GitError::BranchMissing(_) | GitError::RestoreFromMissing(_) => ErrorKind::NotFound,
            GitError::RestoreRefused(_) => ErrorKind::Refused,
            GitError::Command { .. } | GitError::Submodule { .. } | GitError::Spawn(_) => {
                ErrorKind::External
            }
            GitError::Io { .. } => ErrorKind::Io,
            GitError::Corrupt { .. } => ErrorKind::Corrupt,
        }
    }
}
