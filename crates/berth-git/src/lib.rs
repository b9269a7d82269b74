//! berth-git: git worktrees for workspaces, driving the real `git` binary.
//!
//! A git workspace is a worktree of a project's repository on its own branch, so several agents
//! work on one repository without touching each other's files. This crate creates such
//! worktrees (with git's parallel checkout), removes them without losing work, and reports
//! their state cheaply. It knows nothing of berth's stores: `berth-ops` keeps a workspace record
//! and its worktree in step.
//!
//! Every git call runs with a clean git environment (no inherited `GIT_DIR`, `GIT_WORK_TREE`
//! or `GIT_INDEX_FILE`, which a hook or an outer git would otherwise leak in), never prompts,
//! and reports failures with the command and git's own message.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde::Serialize;

mod setup;
pub mod spares;
mod submodules;
pub use setup::{Copied, SetupError, copy_files, run_setup};

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

/// Commits named in a refusal at most; the count says how many there are in all.
const NAMED_COMMITS: usize = 5;

/// `abc1234 subject, def5678 subject and 3 more`.
fn listed(commits: &[String], count: usize) -> String {
    let mut text = commits.join(", ");
    if count > commits.len() {
        text += &format!(" and {} more", count - commits.len());
    }
    text
}

/// Tries after the first when `git worktree add` or `move` lost a race with another add.
const WORKTREE_RACE_RETRIES: u32 = 5;

/// Whether git failed only because another worktree's record was half-written when it read it.
fn lost_race(e: &GitError) -> bool {
    matches!(e, GitError::Command { message, .. }
        if message.contains("failed to read") && message.contains("worktrees/"))
}

/// Parallel checkout instead of one file at a time. Writing files is bound by the kernel and
/// the disk more than by the CPU, so more workers than cores still helps: on a 2-core machine
/// 8 workers beat one per core (`checkout.workers=0`) by about 10% (benches/git_worktrees.rs).
const CHECKOUT_WORKERS: &str = "checkout.workers=8";

/// Which branch a new worktree gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchSpec {
    /// Create this branch from the base; fails if it exists.
    New(String),
    /// Check out this existing local branch, or `origin/<name>` tracked as a new local branch.
    Existing(String),
}

/// What `Repo::create` will do, decided up front so the caller can record it first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreePlan {
    pub branch: String,
    pub base_branch: String,
    /// True if `create` makes the branch; only then may removal delete it.
    pub branch_created: bool,
    /// The commit-ish the worktree starts from.
    start: String,
    /// Track `origin/<branch>` as upstream of the new local branch.
    track: bool,
}

impl WorktreePlan {
    /// The revision the worktree starts from: the base for a new branch, the branch itself
    /// for an existing one, `origin/<branch>` for a branch taken from origin.
    pub fn start(&self) -> &str {
        &self.start
    }
}

/// A main checkout's branch that a new worktree's base lags behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseBehind {
    /// The branch checked out in the main worktree.
    pub branch: String,
    /// Commits on it that the base lacks.
    pub commits: usize,
}

/// What `add_worktree` made, for the caller to record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddedWorktree {
    pub path: PathBuf,
    pub branch: String,
    pub base_branch: String,
    /// True only if this call created the branch; only then may removal delete it.
    pub branch_created: bool,
}

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

/// A linked worktree found on disk (made by `git worktree add`, by berth or by anyone), as
/// [`linked_worktree`] reads it.
#[derive(Debug, Clone)]
pub struct LinkedWorktree {
    /// The worktree's top folder, as git names it (absolute, symlinks resolved).
    pub path: PathBuf,
    /// The repository it belongs to, by its main checkout (or bare folder).
    pub repo: Repo,
    /// The branch checked out there, or [`DETACHED_HEAD`].
    pub branch: String,
}

/// The linked worktree holding `path` (its top folder, or any folder inside it), of a
/// repository with a main checkout or of a bare one. Refuses a folder outside git and a
/// repository's main checkout.
pub fn linked_worktree(path: &Path) -> Result<LinkedWorktree> {
    if !path.is_dir() {
        return Err(GitError::NotALinkedWorktree {
            path: path.to_owned(),
            reason: "there is no folder there".to_owned(),
        });
    }
    let out = git_output(
        path,
        [
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-dir",
            "--git-common-dir",
        ],
    )?;
    let not_linked = |reason: &str| GitError::NotALinkedWorktree {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    if !out.status.success() {
        return Err(not_linked(
            "it is not inside a git checkout (berth adopts folders made by `git worktree add`)",
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().map(PathBuf::from);
    let (Some(top), Some(git_dir), Some(common)) = (lines.next(), lines.next(), lines.next())
    else {
        // No top folder: inside a .git folder, or a bare repository.
        return Err(not_linked("it has no working tree"));
    };
    if git_dir == common {
        return Err(not_linked(&format!(
            "{} is the repository's main checkout; berth adopts the worktrees made from it with `git worktree add`",
            top.display()
        )));
    }
    let repo = Repo::discover(&top)?;
    let branch = match run(&top, ["symbolic-ref", "--quiet", "--short", "HEAD"]) {
        Ok(b) if !b.trim().is_empty() => b.trim().to_owned(),
        _ => DETACHED_HEAD.to_owned(),
    };
    Ok(LinkedWorktree {
        path: top,
        repo,
        branch,
    })
}

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

/// What a forced removal kept of the work it would otherwise have lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeptWork {
    /// The ref that holds it: `git branch NAME <ref>` brings it back.
    pub refname: String,
    /// Commits no other branch, tag or remote has (the worktree's HEAD and the branch removal
    /// deletes).
    pub commits: usize,
    /// Uncommitted files (untracked included), kept as one commit on top of the HEAD.
    pub uncommitted: usize,
}

/// The HEAD of a worktree and its uncommitted files, as one `git status` reads them.
struct HeadState {
    /// `None` on an unborn branch.
    sha: Option<String>,
    /// `None` when detached.
    branch: Option<String>,
    changed: usize,
}

/// A repository: one with a main checkout, or a bare one (whose worktrees are all linked).
#[derive(Debug, Clone)]
pub struct Repo {
    /// The main checkout, or the bare repository's own folder.
    root: PathBuf,
    bare: bool,
}

impl Repo {
    /// The repository containing `start`; from inside a linked worktree this is still the
    /// main checkout (or the bare repository), so a workspace made from within a workspace
    /// branches off the project.
    pub fn discover(start: &Path) -> Result<Repo> {
        let out = git_output(
            start,
            [
                "rev-parse",
                "--path-format=absolute",
                "--git-common-dir",
                "--is-bare-repository",
            ],
        )?;
        if !out.status.success() {
            return Err(GitError::NotARepository(start.to_owned()));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let common = PathBuf::from(lines.next().unwrap_or_default());
        let bare = lines.next() == Some("true")
            // From inside a linked worktree of a bare repository, git answers for the worktree;
            // the repository's own config knows. (A `.git` folder is a main checkout's.)
            || (common.file_name() != Some(OsStr::new(".git"))
                && run(&common, ["config", "--bool", "core.bare"]).is_ok_and(|b| b.trim() == "true"));
        if bare {
            return Ok(Repo { root: common, bare });
        }
        if common.file_name() != Some(OsStr::new(".git")) {
            return Err(GitError::SeparateGitDir(common));
        }
        let root = common.parent().expect(".git has a parent").to_owned();
        Ok(Repo { root, bare })
    }

    /// Whether the repository is bare: no main checkout, only linked worktrees.
    pub fn is_bare(&self) -> bool {
        self.bare
    }

    /// The repository whose main checkout is exactly `root`. Unlike `discover`, this never
    /// settles for an enclosing repository: a recorded repository that was moved away must not
    /// be mistaken for whatever repository now contains its old path.
    pub fn open(root: &Path) -> Result<Repo> {
        let repo = Repo::discover(root)?;
        let same = match (root.canonicalize(), repo.root.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if same {
            Ok(repo)
        } else {
            Err(GitError::NotARepository(root.to_owned()))
        }
    }

    /// The main checkout's absolute path; for a bare repository, its folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder that holds the repository's refs and objects, and git's records of its
    /// linked worktrees (`worktrees/<name>/`).
    fn common_dir(&self) -> PathBuf {
        match self.bare {
            true => self.root.clone(),
            false => self.root.join(".git"),
        }
    }

    /// Whether the linked worktree found at `at` is one of this repository's, and is the one
    /// that was at `recorded` (the same path, unless it moved): git's record of it here names
    /// `recorded`, or `at` once repaired, and its `.git` file names that record (by its
    /// `worktrees/<name>` folder, wherever the repository was when it was written).
    pub fn owns_worktree(&self, recorded: &Path, at: &Path) -> bool {
        let Some(name) = worktree_link(at)
            .as_deref()
            .and_then(Path::file_name)
            .map(ToOwned::to_owned)
        else {
            return false;
        };
        let admin = self.common_dir().join("worktrees").join(name);
        let Ok(gitdir) = std::fs::read_to_string(admin.join("gitdir")) else {
            return false;
        };
        let listed = PathBuf::from(gitdir.trim());
        let canonical = |p: &Path| p.canonicalize().ok();
        listed == recorded.join(".git")
            || listed == at.join(".git")
            || canonical(&listed).is_some_and(|l| Some(&l) == canonical(&at.join(".git")).as_ref())
    }

    /// The linked worktrees whose `.git` file does not lead back to this repository: it was
    /// moved (or copied) since they were made, and `git worktree repair` run here reattaches
    /// them. Each as its folder and the repository folder its `.git` file still names.
    pub fn stranded_worktrees(&self) -> Vec<(PathBuf, PathBuf)> {
        let admin = self.common_dir().join("worktrees");
        let Ok(entries) = std::fs::read_dir(&admin) else {
            return Vec::new();
        };
        let mut stranded = Vec::new();
        for entry in entries.filter_map(|e| e.ok()) {
            let Ok(gitdir) = std::fs::read_to_string(entry.path().join("gitdir")) else {
                continue;
            };
            let Some(worktree) = Path::new(gitdir.trim()).parent() else {
                continue;
            };
            // A worktree that is gone is git's to prune, not to repair.
            let Some(link) = worktree_link(worktree) else {
                continue;
            };
            let here = entry.path();
            let same = link == here
                || matches!((link.canonicalize(), here.canonicalize()), (Ok(a), Ok(b)) if a == b);
            if !same {
                // <old repository>/.git/worktrees/<name> → <old repository>
                let old = link
                    .ancestors()
                    .nth(3)
                    .map_or_else(|| link.clone(), Path::to_owned);
                stranded.push((worktree.to_owned(), old));
            }
        }
        stranded.sort();
        stranded
    }

    /// `git worktree repair`: every linked worktree's `.git` file leads back to this repository
    /// again (after the repository moved), and the worktrees at `moved` (which moved too) are
    /// recorded where they are now.
    pub fn repair_worktrees(&self, moved: &[&Path]) -> Result<()> {
        let mut args = vec![OsStr::new("worktree"), OsStr::new("repair")];
        if !moved.is_empty() {
            args.push(OsStr::new("--"));
            args.extend(moved.iter().map(|p| p.as_os_str()));
        }
        self.git(args).map(drop)
    }

    fn git<I, S>(&self, args: I) -> Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run(&self.root, args)
    }

    /// Runs `git worktree add` or `move`, retrying briefly when it lost a race. Each reads
    /// every other worktree's record as it starts and fails ("failed to read
    /// .git/worktrees/<x>/commondir") when another add is writing one at that moment. A lock
    /// around the whole command would avoid that too, but it would make a create wait for a
    /// spare checkout being filled in the background, a whole checkout long. `undo` cleans up
    /// after a lost race, before the next try.
    fn change_worktrees(&self, args: &[&OsStr], undo: impl Fn()) -> Result<String> {
        let mut attempt = 0;
        loop {
            match self.git(args.iter().copied()) {
                Err(e) if lost_race(&e) && attempt < WORKTREE_RACE_RETRIES => {
                    undo();
                    attempt += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10 << attempt));
                }
                done => return done,
            }
        }
    }

    fn succeeds<I, S>(&self, args: I) -> bool
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        git_output(&self.root, args).is_ok_and(|o| o.status.success())
    }

    pub fn has_branch(&self, name: &str) -> bool {
        self.succeeds([
            "show-ref",
            "--verify",
            "--quiet",
            &format!("refs/heads/{name}"),
        ])
    }

    fn has_remote_branch(&self, name: &str) -> bool {
        self.succeeds([
            "show-ref",
            "--verify",
            "--quiet",
            &format!("refs/remotes/origin/{name}"),
        ])
    }

    fn is_commit(&self, rev: &str) -> bool {
        self.succeeds([
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ])
    }

    /// The abbreviated object name of a revision's commit.
    pub fn short_sha(&self, rev: &str) -> Result<String> {
        Ok(self
            .git([
                "rev-parse",
                "--verify",
                "--short",
                "--end-of-options",
                &format!("{rev}^{{commit}}"),
            ])?
            .trim()
            .to_owned())
    }

    /// Whether `base` lags behind the branch checked out in the main worktree: that branch
    /// and how many of its commits `base` lacks. `None` when it does not (or the main worktree
    /// is detached, or is on `base` itself).
    pub fn base_behind_checkout(&self, base: &str) -> Option<BaseBehind> {
        if self.bare {
            return None;
        }
        let branch = self
            .git(["symbolic-ref", "--quiet", "--short", "HEAD"])
            .ok()?
            .trim()
            .to_owned();
        if branch.is_empty() || branch == base || !self.has_branch(&branch) {
            return None;
        }
        let range = [
            format!("refs/heads/{branch}"),
            "--not".to_owned(),
            base.to_owned(),
        ];
        match self.count(&range) {
            Ok(commits @ 1..) => Some(BaseBehind { branch, commits }),
            _ => None,
        }
    }

    /// The base new branches start from: `origin/HEAD`'s target, else `main`, else `master`,
    /// else the current `HEAD`'s branch (or `HEAD` itself when detached). A bare repository's
    /// `HEAD` branch comes first.
    pub fn default_base(&self) -> Result<String> {
        // A bare repository has no checkout to follow but its HEAD, which names its main
        // branch.
        if self.bare
            && let Ok(b) = self.git(["symbolic-ref", "--quiet", "--short", "HEAD"])
            && !b.trim().is_empty()
            && self.is_commit(b.trim())
        {
            return Ok(b.trim().to_owned());
        }
        if let Ok(target) = self.git([
            "symbolic-ref",
            "--quiet",
            "--short",
            "refs/remotes/origin/HEAD",
        ]) {
            let target = target.trim();
            if !target.is_empty() && self.is_commit(target) {
                return Ok(target.to_owned());
            }
        }
        for candidate in ["main", "master"] {
            if self.has_branch(candidate) {
                return Ok(candidate.to_owned());
            }
        }
        match self.git(["symbolic-ref", "--quiet", "--short", "HEAD"]) {
            Ok(b) if !b.trim().is_empty() && self.is_commit(b.trim()) => Ok(b.trim().to_owned()),
            _ if self.is_commit("HEAD") => Ok("HEAD".to_owned()),
            _ => Err(GitError::BadBase("HEAD".to_owned())),
        }
    }

    /// Decides, without changing anything, what `create` will do: which branch, from which
    /// base, and whether berth creates the branch. Refuses bad names, existing or missing
    /// branches and bad bases up front.
    pub fn plan(&self, spec: &BranchSpec, base: Option<&str>) -> Result<WorktreePlan> {
        let resolve_base = |base: Option<&str>| match base {
            Some(b) if self.is_commit(b) => Ok(b.to_owned()),
            Some(b) => Err(GitError::BadBase(b.to_owned())),
            None => self.default_base(),
        };
        match spec {
            BranchSpec::New(branch) => {
                check_branch_name(self, branch)?;
                if self.has_branch(branch) {
                    return Err(GitError::BranchExists(branch.clone()));
                }
                let base_branch = resolve_base(base)?;
                Ok(WorktreePlan {
                    start: base_branch.clone(),
                    branch: branch.clone(),
                    base_branch,
                    branch_created: true,
                    track: false,
                })
            }
            BranchSpec::Existing(branch) => {
                // `origin/feat` (as `git branch -a` shows it) means the remote branch `feat`,
                // unless a local branch has that very name.
                let branch: &str = match branch.strip_prefix("origin/") {
                    Some(short) if !self.has_branch(branch) && self.has_remote_branch(short) => {
                        short
                    }
                    _ => branch,
                };
                check_branch_name(self, branch)?;
                let base_branch = resolve_base(base)?;
                if self.has_branch(branch) {
                    Ok(WorktreePlan {
                        start: branch.to_owned(),
                        branch: branch.to_owned(),
                        base_branch,
                        branch_created: false,
                        track: false,
                    })
                } else if self.has_remote_branch(branch) {
                    Ok(WorktreePlan {
                        start: format!("origin/{branch}"),
                        branch: branch.to_owned(),
                        base_branch,
                        branch_created: true,
                        track: true,
                    })
                } else {
                    Err(GitError::BranchMissing(branch.to_owned()))
                }
            }
        }
    }

    /// Carries out a plan: creates the worktree at `path` (which must not exist, or be an
    /// empty folder). On any failure nothing is left: no folder this call made, no worktree
    /// record, no branch this call created.
    pub fn create(&self, path: &Path, plan: &WorktreePlan) -> Result<()> {
        let mut args: Vec<&OsStr> = ["-c", CHECKOUT_WORKERS, "worktree", "add", "--quiet"]
            .map(OsStr::new)
            .to_vec();
        // A new branch never tracks its base (git would otherwise make `origin/main` its
        // upstream); a branch taken from origin tracks it.
        if plan.branch_created {
            args.push(OsStr::new(if plan.track {
                "--track"
            } else {
                "--no-track"
            }));
        }
        if plan.branch_created {
            args.extend([OsStr::new("-b"), OsStr::new(&plan.branch)]);
        }
        args.extend([OsStr::new("--"), path.as_os_str(), OsStr::new(&plan.start)]);
        let existed = path.exists();
        let undo = || {
            self.roll_back(
                path,
                existed,
                plan.branch_created.then_some(plan.branch.as_str()),
            )
        };
        self.change_worktrees(&args, undo)
            .map(drop)
            .inspect_err(|_| undo())
    }

    /// Carries out a plan's branch part in an existing, clean worktree at `dir` (a spare):
    /// the same branch, start and tracking that `create` would give a new worktree.
    fn checkout_plan(&self, dir: &Path, plan: &WorktreePlan) -> Result<()> {
        let head = run(dir, ["rev-parse", "--verify", "HEAD^{commit}"])?;
        let start = self.git([
            "rev-parse",
            "--verify",
            "--end-of-options",
            &format!("{}^{{commit}}", plan.start),
        ])?;
        if plan.branch_created && head.trim() == start.trim() {
            // The spare already holds the start commit: its files and index are what a
            // checkout would write, so only the branch and HEAD change. This skips a refresh
            // and rewrite of the whole index.
            let track = if plan.track { "--track" } else { "--no-track" };
            self.git(["branch", track, "--", &plan.branch, &plan.start])?;
            return run(
                dir,
                [
                    "symbolic-ref",
                    "HEAD",
                    &format!("refs/heads/{}", plan.branch),
                ],
            )
            .map(drop);
        }
        let mut args = vec!["-c", CHECKOUT_WORKERS, "checkout", "--quiet"];
        if plan.branch_created {
            args.push(if plan.track { "--track" } else { "--no-track" });
            args.extend(["-b", &plan.branch, &plan.start]);
        } else {
            // Git itself refuses a branch checked out in another worktree.
            args.push(&plan.branch);
        }
        // `--` ends the revisions: a branch named like a file is never read as a path.
        args.push("--");
        run(dir, args).map(drop)
    }

    /// `plan` and `create` in one step.
    pub fn add_worktree(
        &self,
        path: &Path,
        spec: &BranchSpec,
        base: Option<&str>,
    ) -> Result<AddedWorktree> {
        let plan = self.plan(spec, base)?;
        self.create(path, &plan)?;
        Ok(AddedWorktree {
            path: path.to_owned(),
            branch: plan.branch,
            base_branch: plan.base_branch,
            branch_created: plan.branch_created,
        })
    }

    /// Undoes a failed `add_worktree`: the folder (if this call made it), git's record of the
    /// worktree, and the branch (only if this call created it).
    fn roll_back(&self, path: &Path, existed: bool, created_branch: Option<&str>) {
        if !existed {
            let _ = std::fs::remove_dir_all(path);
        }
        let _ = self.git(["worktree", "prune"]);
        if let Some(b) = created_branch {
            let _ = self.git(["branch", "-D", "--", b]);
        }
    }

    /// Removes a worktree. Refuses, unless `force`, when it has uncommitted changes or when a
    /// branch berth created has commits on neither its base nor its upstream. Deletes the
    /// branch only if berth created it. A worktree folder deleted by hand is pruned from git's
    /// records and removal carries on.
    pub fn remove_worktree(&self, wt: WorktreeRef<'_>, force: bool) -> Result<()> {
        if !force {
            self.check_removable(wt)?;
        }
        if wt.path.exists() {
            // Our checks are the policy; --force only stops git from second-guessing ignored
            // build output and the like.
            match self.force_remove_worktree(wt.path) {
                Ok(_) => {}
                // A folder git does not know as a worktree (a create that crashed midway):
                // forced, it goes like any folder.
                Err(_) if force => {
                    std::fs::remove_dir_all(wt.path).map_err(|source| GitError::Io {
                        context: format!("cannot remove {}", wt.path.display()),
                        source,
                    })?;
                    self.git(["worktree", "prune"])?;
                }
                Err(e) => return Err(e),
            }
        } else {
            self.git(["worktree", "prune"])?;
        }
        if wt.branch_created && self.has_branch(wt.branch) {
            self.git(["branch", "-D", "--", wt.branch])?;
        }
        Ok(())
    }

    /// `git worktree remove --force`: the folder and git's record of it, whatever is inside.
    fn force_remove_worktree(&self, path: &Path) -> Result<()> {
        self.git([
            OsStr::new("worktree"),
            OsStr::new("remove"),
            OsStr::new("--force"),
            OsStr::new("--"),
            path.as_os_str(),
        ])
        .map(drop)
    }

    /// Why removing this worktree would lose work, if it would, looking at the worktree as it
    /// is (not as it was recorded): uncommitted changes (untracked files included), commits
    /// on a branch berth created that are on neither its base nor its upstream, and commits
    /// its HEAD holds (detached, or on another branch) that no branch, tag or remote has.
    pub fn check_removable(&self, wt: WorktreeRef<'_>) -> Result<()> {
        let state = if wt.path.exists() {
            Some(head_state(wt.path).map_err(|e| GitError::NotAWorktree {
                path: wt.path.to_owned(),
                message: match e {
                    GitError::Command { message, .. } => message,
                    other => other.to_string(),
                },
            })?)
        } else {
            None
        };
        if let Some(state) = &state
            && state.changed > 0
        {
            return Err(GitError::Dirty {
                path: wt.path.to_owned(),
                count: state.changed,
            });
        }
        if wt.branch_created && wt.branch != DETACHED_HEAD && self.has_branch(wt.branch) {
            let (count, commits) =
                self.commits_in(&self.unmerged_range(wt.branch, wt.base_branch))?;
            if count > 0 {
                return Err(GitError::Unmerged {
                    branch: wt.branch.to_owned(),
                    base: wt.base_branch.to_owned(),
                    count,
                    commits,
                });
            }
        }
        if let Some(HeadState {
            sha: Some(head), ..
        }) = &state
        {
            let (count, commits) = self.commits_in(&self.unreferenced_range(head, wt))?;
            if count > 0 {
                return Err(GitError::Unreferenced {
                    path: wt.path.to_owned(),
                    count,
                    commits,
                });
            }
        }
        Ok(())
    }

    /// Before a forced removal: keeps on a new ref everything the removal would lose, so that
    /// even a forced removal can be undone. That is the commits only the worktree's HEAD holds,
    /// the commits only the branch removal deletes holds, and uncommitted changes (untracked
    /// files included, ignored ones not), as one commit on top of the HEAD. The ref is
    /// `refname`, or `refname-2`, `-3`… when that is taken. `None` when nothing would be lost,
    /// or the worktree cannot be read (a create that died midway has nothing to keep).
    pub fn keep_lost_work(&self, wt: WorktreeRef<'_>, refname: &str) -> Result<Option<KeptWork>> {
        let state = match wt.path.exists() {
            true => head_state(wt.path).ok(),
            false => None,
        };
        let head = state.as_ref().and_then(|s| s.sha.clone());
        let mut tips = Vec::new();
        let mut commits = 0;
        if let Some(head) = &head {
            let only_head = self.count(&self.unreferenced_range(head, wt))?;
            if only_head > 0 {
                commits += only_head;
                tips.push(head.clone());
            }
        }
        if wt.branch_created && wt.branch != DETACHED_HEAD && self.has_branch(wt.branch) {
            // What only the branch holds, beyond what the HEAD kept above.
            let mut range = vec![
                format!("refs/heads/{}", wt.branch),
                "--not".to_owned(),
                format!("--exclude={}", wt.branch),
                "--branches".to_owned(),
                "--tags".to_owned(),
                "--remotes".to_owned(),
            ];
            range.extend(head.iter().cloned());
            if self.is_commit(wt.base_branch) {
                range.push(wt.base_branch.to_owned());
            }
            let only_branch = self.count(&range)?;
            if only_branch > 0 {
                commits += only_branch;
                tips.push(self.rev(&format!("refs/heads/{}", wt.branch))?);
            }
        }
        let uncommitted = state.as_ref().map_or(0, |s| s.changed);
        if commits == 0 && uncommitted == 0 {
            return Ok(None);
        }
        let target = if uncommitted == 0 && tips.len() == 1 {
            tips.remove(0)
        } else {
            // One commit whose parents are the HEAD (first, so `git diff REF^ REF` shows the
            // uncommitted changes) and the branch's tip, and whose tree is the worktree as it
            // is (or the HEAD's, when only commits are kept).
            let mut parents: Vec<String> = head.iter().cloned().collect();
            parents.extend(tips.into_iter().filter(|t| Some(t) != head.as_ref()));
            let tree = if uncommitted > 0 {
                snapshot_tree(wt.path)?
            } else {
                self.rev(&format!("{}^{{tree}}", parents[0]))?
            };
            let mut args = vec![
                "-c".to_owned(),
                "user.name=berth".to_owned(),
                "-c".to_owned(),
                "user.email=berth@localhost".to_owned(),
                "-c".to_owned(),
                "commit.gpgsign=false".to_owned(),
                "commit-tree".to_owned(),
                tree,
                "-m".to_owned(),
                format!(
                    "berth: the work of {} kept by a forced removal ({commits} commit(s), {uncommitted} uncommitted file(s))",
                    wt.path.display()
                ),
            ];
            for p in parents {
                args.extend(["-p".to_owned(), p]);
            }
            self.git(&args)?.trim().to_owned()
        };
        let refname = self.create_ref(refname, &target)?;
        Ok(Some(KeptWork {
            refname,
            commits,
            uncommitted,
        }))
    }

    /// Creates `name` (or `name-2`, `-3`…, the first that does not exist) at `target`.
    fn create_ref(&self, name: &str, target: &str) -> Result<String> {
        let mut last = None;
        for n in 1..=100 {
            let candidate = match n {
                1 => name.to_owned(),
                n => format!("{name}-{n}"),
            };
            // The empty old value: only if the ref does not exist yet.
            match self.git([
                "update-ref",
                "-m",
                "berth: kept by a forced removal",
                &candidate,
                target,
                "",
            ]) {
                Ok(_) => return Ok(candidate),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("tried at least once"))
    }

    /// The full object name of a revision.
    fn rev(&self, rev: &str) -> Result<String> {
        Ok(self
            .git(["rev-parse", "--verify", "--end-of-options", rev])?
            .trim()
            .to_owned())
    }

    /// The revision range of commits the worktree's HEAD holds that nothing else keeps: no
    /// branch (but the one removal would delete), tag or remote-tracking branch, nor the base.
    /// The recorded branch is not enough to look at: the worktree may be on a detached HEAD or
    /// another branch.
    fn unreferenced_range(&self, head: &str, wt: WorktreeRef<'_>) -> Vec<String> {
        let mut range = vec![head.to_owned(), "--not".to_owned()];
        if self.is_commit(wt.base_branch) {
            range.push(wt.base_branch.to_owned());
        }
        if wt.branch_created && wt.branch != DETACHED_HEAD {
            // That branch goes with the worktree, so it keeps nothing. (`--exclude` before
            // `--branches` takes the name without `refs/heads/`.)
            range.push(format!("--exclude={}", wt.branch));
        }
        range.extend(["--branches", "--tags", "--remotes"].map(str::to_owned));
        range
    }

    /// The revision range of commits on `branch` reachable from neither `base` nor the
    /// branch's upstream.
    fn unmerged_range(&self, branch: &str, base: &str) -> Vec<String> {
        let mut range = vec![format!("refs/heads/{branch}"), "--not".to_owned()];
        if self.is_commit(base) {
            range.push(base.to_owned());
        }
        let upstream = format!("{branch}@{{upstream}}");
        if self.is_commit(&upstream) {
            range.push(upstream);
        }
        range
    }

    /// How many commits a revision range holds.
    fn count(&self, range: &[String]) -> Result<usize> {
        let mut args = vec!["rev-list".to_owned(), "--count".to_owned()];
        args.extend(range.iter().cloned());
        args.push("--".to_owned());
        Ok(self.git(&args)?.trim().parse().unwrap_or(0))
    }

    /// How many commits a revision range holds, and the newest few as `<short sha> <subject>`.
    fn commits_in(&self, range: &[String]) -> Result<(usize, Vec<String>)> {
        let count = self.count(range)?;
        if count == 0 {
            return Ok((0, Vec::new()));
        }
        let mut args = vec![
            "log".to_owned(),
            "--format=%h %s".to_owned(),
            format!("--max-count={NAMED_COMMITS}"),
        ];
        args.extend(range.iter().cloned());
        args.push("--".to_owned());
        let named = self.git(&args)?.lines().map(str::to_owned).collect();
        Ok((count, named))
    }

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

/// Refuses branch names git would not accept, before anything is created.
fn check_branch_name(repo: &Repo, name: &str) -> Result<()> {
    if name.starts_with('-') || !repo.succeeds(["check-ref-format", "--branch", name]) {
        return Err(GitError::Command {
            command: format!("check-ref-format --branch {name}"),
            message: format!("'{name}' is not a valid branch name"),
        });
    }
    Ok(())
}

/// Where a linked worktree's `.git` file points (`gitdir: <repository>/.git/worktrees/<name>`),
/// made absolute; `None` when there is no such file.
fn worktree_link(worktree: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(worktree.join(".git")).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    Some(worktree.join(target))
}

/// The worktree's HEAD (commit and branch) and how many files have uncommitted changes
/// (untracked included), from one `git status`.
fn head_state(worktree: &Path) -> Result<HeadState> {
    let out = run(
        worktree,
        [
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=normal",
        ],
    )?;
    let mut state = HeadState {
        sha: None,
        branch: None,
        changed: 0,
    };
    let mut fields = out.split('\0').filter(|f| !f.is_empty());
    while let Some(field) = fields.next() {
        if let Some(oid) = field.strip_prefix("# branch.oid ") {
            state.sha = (oid != "(initial)").then(|| oid.to_owned());
        } else if let Some(head) = field.strip_prefix("# branch.head ") {
            state.branch = (head != "(detached)").then(|| head.to_owned());
        } else if field.starts_with('#') {
        } else {
            // A rename or copy carries its source path as a second field.
            if field.starts_with("2 ") {
                fields.next();
            }
            state.changed += 1;
        }
    }
    Ok(state)
}

/// The tree of the worktree as it is, untracked files included (ignored ones not), written
/// through a copy of its index so the worktree's own index is left as it was.
fn snapshot_tree(worktree: &Path) -> Result<String> {
    let index = run(
        worktree,
        ["rev-parse", "--path-format=absolute", "--git-path", "index"],
    )?;
    let index = PathBuf::from(index.trim());
    let copy = index.with_file_name("berth-keep-index");
    let io = |context: String| move |source| GitError::Io { context, source };
    if index.exists() {
        std::fs::copy(&index, &copy)
            .map_err(io(format!("cannot copy the index {}", index.display())))?;
    }
    let with_copy = |args: &[&str]| -> Result<String> {
        let out = command(worktree)
            .env("GIT_INDEX_FILE", &copy)
            .args(args)
            .output()
            .map_err(GitError::Spawn)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(GitError::Command {
                command: args.join(" "),
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    };
    let tree = with_copy(&["add", "--all"]).and_then(|_| with_copy(&["write-tree"]));
    let _ = std::fs::remove_file(&copy);
    tree
}

/// Files with uncommitted changes in `worktree`, untracked included, each as git's two-letter
/// status and the path (`" M src/lib.rs"`, `"?? notes.txt"`), in git's order.
pub fn changed_paths(worktree: &Path) -> Result<Vec<String>> {
    let out = run(
        worktree,
        ["status", "--porcelain=v1", "-z", "--untracked-files=normal"],
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
    Ok(paths)
}

fn command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .stdin(Stdio::null());
    cmd
}

fn git_output<I, S>(dir: &Path, args: I) -> Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    if !dir.exists() {
        return Err(GitError::NotARepository(dir.to_owned()));
    }
    command(dir).args(args).output().map_err(GitError::Spawn)
}

/// Runs git in `dir`; stdout on success, the command and git's message on failure.
fn run<I, S>(dir: &Path, args: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<S> = args.into_iter().collect();
    let out = git_output(dir, &args)?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    Err(GitError::Command {
        command: shown.join(" "),
        message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}
