//! A worktree's state as it is, read cheaply from git's index and refs: its health, the HEAD
//! checked out, ahead and behind its base, uncommitted files and commits only it holds.

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::command::{IGNORE_NESTED, run, run_with_git_dir};
use crate::submodules::declared;
use crate::{DETACHED_HEAD, Repo, Result, WorktreeRef};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Health {
    Ok,
    WorktreeMissing,
    RepoMissing,
    BranchMissing,
}

impl Health {
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Ok => "ok",
            Health::WorktreeMissing => "worktree-missing",
            Health::RepoMissing => "repo-missing",
            Health::BranchMissing => "branch-missing",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastCommit {
    pub sha: String,
    pub subject: String,
    pub date: String,
}

/// The state of a worktree as it is, from git's index and refs (no walk of the files by
/// berth): the HEAD checked out there, which may not be the recorded branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorktreeStatus {
    pub health: Health,
    /// The branch checked out in the worktree now ([`DETACHED_HEAD`] when detached); the
    /// recorded branch when the worktree cannot be read.
    pub branch: String,
    /// Whether the worktree is on a detached HEAD.
    pub detached: bool,
    /// The commit the worktree has checked out; `None` when it cannot be read (or has none).
    pub head: Option<String>,
    pub base_branch: String,
    /// Commits on the worktree's HEAD (else the recorded branch) that the base lacks, and the
    /// reverse; `None` if unknown.
    pub ahead: Option<u64>,
    pub behind: Option<u64>,
    /// Files with uncommitted changes, untracked included.
    pub changed_files: Option<usize>,
    /// Commits the worktree's HEAD holds that no branch, tag or remote-tracking branch has:
    /// removing the worktree would lose them. `None` if unknown.
    pub unreferenced_commits: Option<u64>,
    pub last_commit: Option<LastCommit>,
}

impl WorktreeStatus {
    /// A status with only the health and the recorded branch and base known.
    pub fn unknown(health: Health, branch: &str, base_branch: &str) -> WorktreeStatus {
        WorktreeStatus {
            health,
            branch: branch.to_owned(),
            detached: branch == DETACHED_HEAD,
            head: None,
            base_branch: base_branch.to_owned(),
            ahead: None,
            behind: None,
            changed_files: None,
            unreferenced_commits: None,
            last_commit: None,
        }
    }
}

/// The HEAD of a worktree and its uncommitted files, as one `git status` reads them.
pub(crate) struct HeadState {
    /// `None` on an unborn branch.
    pub(crate) sha: Option<String>,
    /// `None` when detached.
    pub(crate) branch: Option<String>,
    pub(crate) changed: usize,
}

impl Repo {
    /// What the worktree has checked out, as a revision: its HEAD where the worktree can be
    /// read, else the recorded branch. `None` if neither is there.
    pub fn tip(&self, wt: WorktreeRef<'_>) -> Option<String> {
        if wt.path.exists()
            && let Ok(sha) = run(
                wt.path,
                ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
            )
            && !sha.trim().is_empty()
        {
            return Some(sha.trim().to_owned());
        }
        (wt.branch != DETACHED_HEAD && self.has_branch(wt.branch)).then(|| wt.branch.to_owned())
    }

    /// The commits on `branch` that `base` lacks, newest first, as `<short sha> <subject>`;
    /// at most `limit` of them.
    pub fn commits_ahead(&self, base: &str, branch: &str, limit: usize) -> Result<Vec<String>> {
        let out = self.git([
            "log",
            "--format=%h %s",
            &format!("--max-count={limit}"),
            &format!("{base}..{branch}"),
            "--",
        ])?;
        Ok(out.lines().map(str::to_owned).collect())
    }

    /// The worktree's state as it is: the HEAD checked out there (which may be another branch
    /// than the recorded one, or detached), and ahead, behind and last commit measured from
    /// it; from the recorded branch when the worktree is gone. Never fails: what cannot be
    /// known is `None`, and the health says why.
    pub fn status(&self, wt: WorktreeRef<'_>) -> WorktreeStatus {
        let mut status = WorktreeStatus::unknown(Health::Ok, wt.branch, wt.base_branch);
        if !self.common_dir().exists() {
            status.health = Health::RepoMissing;
            return status;
        }
        let exists = wt.path.exists();
        if exists && let Ok(state) = head_state(wt.path) {
            status.detached = state.branch.is_none();
            status.branch = state.branch.unwrap_or_else(|| DETACHED_HEAD.to_owned());
            status.head = state.sha;
            status.changed_files = Some(state.changed);
        }
        let recorded = (wt.branch != DETACHED_HEAD).then(|| self.has_branch(wt.branch));
        if recorded == Some(false) {
            status.health = Health::BranchMissing;
        } else if !exists {
            status.health = Health::WorktreeMissing;
        }
        let tip = match (&status.head, recorded) {
            (Some(head), _) => head.clone(),
            (None, Some(true)) => wt.branch.to_owned(),
            _ => return status,
        };
        if let Ok(out) = self.git([
            "rev-list",
            "--left-right",
            "--count",
            &format!("{}...{tip}", wt.base_branch),
            "--",
        ]) {
            let mut parts = out.split_whitespace().map(|n| n.parse::<u64>().ok());
            status.behind = parts.next().flatten();
            status.ahead = parts.next().flatten();
        }
        if let Ok(out) = self.git(["log", "-1", "--format=%H%x00%s%x00%cI", &tip, "--"]) {
            let mut parts = out.trim_end_matches('\n').splitn(3, '\0');
            if let (Some(sha), Some(subject), Some(date)) =
                (parts.next(), parts.next(), parts.next())
            {
                status.last_commit = Some(LastCommit {
                    sha: sha.into(),
                    subject: subject.into(),
                    date: date.into(),
                });
            }
        }
        if status.head.is_some() {
            let range = [
                tip,
                "--not".to_owned(),
                "--branches".to_owned(),
                "--tags".to_owned(),
                "--remotes".to_owned(),
            ];
            status.unreferenced_commits = self.count(&range).ok().map(|n| n as u64);
        }
        status
    }
}

/// How deep berth looks into submodules of submodules for uncommitted work.
const SUBMODULE_DEPTH: usize = 8;

/// The worktree's HEAD (commit and branch) and how many files have uncommitted changes
/// (untracked included), from one `git status`, plus each of the repository's own submodules
/// with uncommitted changes of its own ([`dirty_submodules`]).
pub(crate) fn head_state(worktree: &Path) -> Result<HeadState> {
    head_state_in(worktree, None, 0, Untracked::Count)
}

/// [`head_state`] counting only changes to tracked files (modified, staged, deleted), as
/// git's own merge does in a checkout it updates: an untracked file is the merge's business
/// only where the merge would write over it.
pub(crate) fn tracked_state(worktree: &Path) -> Result<HeadState> {
    head_state_in(worktree, None, 0, Untracked::Skip)
}

/// Whether untracked files count as changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Untracked {
    Count,
    Skip,
}

/// [`head_state`] of the checkout at `worktree`, with the git folder `git_dir` when given (a
/// submodule's, checked once); `depth` submodules down.
fn head_state_in(
    worktree: &Path,
    git_dir: Option<&Path>,
    depth: usize,
    untracked: Untracked,
) -> Result<HeadState> {
    let out = run_with_git_dir(
        worktree,
        git_dir,
        [
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            match untracked {
                Untracked::Count => "--untracked-files=normal",
                Untracked::Skip => "--untracked-files=no",
            },
            IGNORE_NESTED,
        ],
    )?;
    let mut state = HeadState {
        sha: None,
        branch: None,
        changed: 0,
    };
    let mut listed = Vec::new();
    let mut fields = out.split('\0').filter(|f| !f.is_empty());
    while let Some(field) = fields.next() {
        if let Some(oid) = field.strip_prefix("# branch.oid ") {
            state.sha = (oid != "(initial)").then(|| oid.to_owned());
        } else if let Some(head) = field.strip_prefix("# branch.head ") {
            state.branch = (head != "(detached)").then(|| head.to_owned());
        } else if field.starts_with('#') {
        } else {
            // The path is the last of a fixed number of fields: 9 for a change, 10 for a
            // rename or copy (whose source path follows as a field of its own), 11 for a
            // conflict, 2 for an untracked file.
            let fixed = match field.as_bytes()[0] {
                b'1' => 9,
                b'2' => 10,
                b'u' => 11,
                _ => 2,
            };
            listed.extend(field.splitn(fixed, ' ').nth(fixed - 1));
            if field.starts_with("2 ") {
                fields.next();
            }
            state.changed += 1;
        }
    }
    state.changed += dirty_submodules(worktree, git_dir, depth, untracked)
        .iter()
        .filter(|path| !listed.contains(&path.as_str()))
        .count();
    Ok(state)
}

/// Files with uncommitted changes in `worktree`, untracked included, each as git's two-letter
/// status and the path (`" M src/lib.rs"`, `"?? notes.txt"`), in git's order; a submodule of
/// the repository's own with uncommitted changes of its own last (`" M vendor/lib"`).
pub fn changed_paths(worktree: &Path) -> Result<Vec<String>> {
    let out = run(
        worktree,
        [
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=normal",
            IGNORE_NESTED,
        ],
    )?;
    // -z: each entry ends with NUL; renames carry a second NUL-terminated path (the source).
    let mut paths = Vec::new();
    let mut fields = out.split('\0').filter(|f| !f.is_empty());
    while let Some(entry) = fields.next() {
        if entry.starts_with('R') || entry.starts_with('C') {
            fields.next();
        }
        paths.push(entry.to_owned());
    }
    for dirty in dirty_submodules(worktree, None, 0, Untracked::Count) {
        if !paths.iter().any(|p| p.get(3..) == Some(dirty.as_str())) {
            paths.push(format!(" M {dirty}"));
        }
    }
    Ok(paths)
}

/// The submodules of the checkout at `dir` (read with the git folder `git_dir` when given)
/// that have uncommitted changes of their own, untracked files included unless `untracked`
/// skips them: what git's own
/// `git status` would find by running `git status` inside each, which berth's never does
/// (`IGNORE_NESTED`), since a nested repository's config is a command git runs. berth looks
/// inside only a submodule `.gitmodules` declares whose git folder is one of the repository's
/// (`modules/<name>` in the git folder the checkout shares), resolved once and named to git:
/// its config is the person's, as the worktree's own is. An agent's own repository, even
/// committed as a gitlink and declared, keeps its git folder in the worktree, and is never
/// looked inside. One that cannot be read counts as changed: removing it could lose work.
fn dirty_submodules(
    dir: &Path,
    git_dir: Option<&Path>,
    depth: usize,
    untracked: Untracked,
) -> Vec<String> {
    if depth >= SUBMODULE_DEPTH || !dir.join(".gitmodules").is_file() {
        return Vec::new();
    }
    let Ok(declared) = declared(dir, git_dir) else {
        return Vec::new();
    };
    let paths: Vec<String> = declared
        .into_iter()
        .map(|(_, path)| path)
        .filter(|path| {
            !path.is_empty()
                && Path::new(path)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
        })
        .collect();
    if paths.is_empty() {
        return Vec::new();
    }
    let mut args = vec!["ls-files".to_owned(), "--stage".to_owned(), "-z".to_owned()];
    args.push("--".to_owned());
    args.extend(paths.iter().map(|p| format!(":(literal){p}")));
    let (Ok(staged), Ok(common)) = (
        run_with_git_dir(dir, git_dir, &args),
        run_with_git_dir(
            dir,
            git_dir,
            ["rev-parse", "--path-format=absolute", "--git-common-dir"],
        ),
    ) else {
        return Vec::new();
    };
    let Ok(common) = Path::new(common.trim()).canonicalize() else {
        return Vec::new();
    };
    staged
        .split('\0')
        .filter_map(|entry| {
            let (meta, path) = entry.split_once('\t')?;
            meta.starts_with("160000 ").then_some(path)
        })
        .filter(|path| {
            let folder = dir.join(path);
            own_git_folder(&folder, &common).is_some_and(|git_dir| {
                head_state_in(&folder, Some(&git_dir), depth + 1, untracked)
                    .map_or(true, |s| s.changed > 0)
            })
        })
        .map(str::to_owned)
        .collect()
}

/// The git folder of the submodule checked out at `folder`, if it is one of the repository's
/// own: in a `modules` folder under `common`, where only git and the person write (never an
/// agent, whose worktree's git folder is read-only to it). `None` for anything else: a
/// repository whose git folder is in the worktree, or a folder with no repository.
fn own_git_folder(folder: &Path, common: &Path) -> Option<PathBuf> {
    let dot_git = folder.join(".git");
    let git_dir = match std::fs::read_to_string(&dot_git) {
        Ok(text) => folder.join(text.trim_end().strip_prefix("gitdir: ")?),
        // A folder (or nothing, which `canonicalize` refuses).
        Err(_) => dot_git,
    };
    let git_dir = git_dir.canonicalize().ok()?;
    let inside = git_dir.strip_prefix(common).ok()?;
    inside
        .components()
        .any(|c| c.as_os_str() == "modules")
        .then_some(git_dir)
}
