//! Making worktrees: choosing the branch and base up front (`plan`), then creating the
//! worktree with git's parallel checkout (`create`), and undoing a create that failed midway.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::command::run;
use crate::{GitError, Repo, Result};

/// Tries after the first when `git worktree add` or `move` lost a race with another add.
const WORKTREE_RACE_RETRIES: u32 = 5;

/// Whether git failed only because another add or its rollback was changing the worktrees'
/// records at the same moment.
fn lost_race(e: &GitError) -> bool {
    // Also "could not open '.git/worktrees/<name>/gitdir' for writing": a `worktree prune`
    // (another add's rollback) took the admin folder this add had just made.
    matches!(e, GitError::Command { message, .. }
        if message.contains("worktrees/")
            && (message.contains("failed to read") || message.contains("could not open")))
}

/// Parallel checkout instead of one file at a time. Writing files is bound by the kernel and
/// the disk more than by the CPU, so more workers than cores still helps: on a 2-core machine
/// 8 workers beat one per core (`checkout.workers=0`) by about 10% (benches/git_worktrees.rs).
pub(crate) const CHECKOUT_WORKERS: &str = "checkout.workers=8";

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

impl Repo {
    /// Runs `git worktree add` or `move`, retrying briefly when it lost a race. Each reads
    /// every other worktree's record as it starts and fails ("failed to read
    /// .git/worktrees/<x>/commondir") when another add is writing one at that moment. A lock
    /// around the whole command would avoid that too, but it would make a create wait for a
    /// spare checkout being filled in the background, a whole checkout long. `undo` cleans up
    /// after a lost race, before the next try.
    pub(crate) fn change_worktrees(&self, args: &[&OsStr], undo: impl Fn()) -> Result<String> {
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
        // The files are written after: by berth (`fill.rs`), or by git's checkout where berth
        // leaves it to git.
        let mut args: Vec<&OsStr> = ["worktree", "add", "--quiet", "--no-checkout"]
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
            .and_then(|_| self.check_out(path))
            .inspect_err(|_| undo())
    }

    /// Writes every file of HEAD, and the index, into `path`, a worktree just added with
    /// `--no-checkout`: berth's own cold checkout (`fill.rs`) where it writes what git would,
    /// else git's checkout (reporting its progress when watched, `progress.rs`).
    pub(crate) fn check_out(&self, path: &Path) -> Result<()> {
        match crate::fill::fill(path, &self.common_dir())? {
            crate::fill::Filled::Written => Ok(()),
            crate::fill::Filled::LeftToGit(why) => {
                tracing::debug!(worktree = %path.display(), %why, "the checkout is left to git");
                match crate::progress::reporting() {
                    true => checkout_all(path),
                    false => run(
                        path,
                        ["-c", CHECKOUT_WORKERS, "checkout", "--quiet", "--force"],
                    )
                    .map(drop),
                }
            }
        }
    }

    /// Carries out a plan's branch part in an existing, clean worktree at `dir` (a spare):
    /// the same branch, start and tracking that `create` would give a new worktree.
    pub(crate) fn checkout_plan(&self, dir: &Path, plan: &WorktreePlan) -> Result<()> {
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
    pub(crate) fn roll_back(&self, path: &Path, existed: bool, created_branch: Option<&str>) {
        if !existed {
            let _ = std::fs::remove_dir_all(path);
        }
        let _ = self.git(["worktree", "prune"]);
        if let Some(b) = created_branch {
            let _ = self.git(["branch", "-D", "--", b]);
        }
    }
}

/// Writes every file of the worktree at `path`, made with `--no-checkout` (its HEAD set, its
/// index empty), as `worktree add` would have, reporting git's progress.
pub(crate) fn checkout_all(path: &Path) -> Result<()> {
    crate::progress::checkout_with_progress(
        path,
        &["-c", CHECKOUT_WORKERS, "checkout", "--progress", "--force"],
        "checking out",
    )
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
