//! Spare worktrees: checkouts made ahead of time so that creating a git workspace of a large
//! repository does not wait for 20,000 files to be written.
//!
//! A spare is an ordinary worktree with a detached HEAD, kept under a pool folder on the same
//! filesystem as new worktrees. Taking one is `git worktree move` (a rename) followed by
//! `git checkout -b BRANCH START`, which rewrites only the files that differ between the
//! spare's commit and START: the result is the same worktree, index and branch that
//! `git worktree add -b BRANCH PATH START` makes. Filling the pool runs after a create, in the
//! background, while the agent works.
//!
//! Spares are trusted as berth trusts its other files under its home: nothing checks that a
//! spare's files still match its commit, because that check (an lstat of every file) would
//! cost more than the rest of a create. A spare that git no longer knows is dropped and the
//! create falls back to a fresh checkout.
//!
//! Invariants: a spare is only ever seen complete (it is built under `.tmp-*` and renamed to
//! `ready-*` by `git worktree move`); one process takes a given spare (the pool lock); one
//! process fills a pool at a time (the fill lock, taken without waiting).

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::{GitError, Repo, Result, WorktreePlan};

/// The spare worktrees of one repository.
#[derive(Debug, Clone)]
pub struct SparePool {
    dir: PathBuf,
}

const READY: &str = "ready-";
const BUILDING: &str = ".tmp-";

impl SparePool {
    /// The pool of `repo` under `base` (one folder per repository, named by a hash of its path).
    pub fn new(base: &Path, repo: &Repo) -> SparePool {
        SparePool::for_root(base, repo.root())
    }

    /// The pool of the repository whose main checkout is (or was) at `root`: a repository
    /// that moved leaves its spares in the pool of its old path.
    pub fn for_root(base: &Path, root: &Path) -> SparePool {
        SparePool {
            dir: base.join(format!("{:016x}", fnv1a(root.as_os_str()))),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self, name: &str, wait: bool) -> Result<Option<File>> {
        std::fs::create_dir_all(&self.dir).map_err(|e| io(&self.dir, e))?;
        let path = self.dir.join(name);
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        if wait {
            file.lock().map_err(|e| io(&path, e))?;
            return Ok(Some(file));
        }
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(io(&path, e)),
        }
    }

    fn ready(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut ready: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(READY))
            .map(|e| e.path())
            .collect();
        ready.sort();
        ready
    }

    /// How many spares are ready.
    pub fn count(&self) -> usize {
        self.ready().len()
    }

    /// Moves a ready spare to `dest` (which must not exist) and checks out the plan's branch
    /// there. `Ok(false)` when no spare could be used; the caller then makes the worktree the
    /// ordinary way. On a failure after the move, `dest` and any branch this made are removed.
    pub fn take(&self, repo: &Repo, dest: &Path, plan: &WorktreePlan) -> Result<bool> {
        {
            let Some(_lock) = self.lock(".lock", true)? else {
                return Ok(false);
            };
            let Some(spare) = self.ready().into_iter().next() else {
                return Ok(false);
            };
            let moved = repo.change_worktrees(
                &[
                    OsStr::new("worktree"),
                    OsStr::new("move"),
                    spare.as_os_str(),
                    dest.as_os_str(),
                ],
                || {},
            );
            if moved.is_err() {
                // Another filesystem, or a spare someone disturbed: drop it, go the slow way.
                drop_spare(repo, &spare);
                return Ok(false);
            }
        }
        let checked_out = repo.checkout_plan(dest, plan);
        if let Err(e) = checked_out {
            drop_spare(repo, dest);
            if plan.branch_created && repo.has_branch(&plan.branch) {
                let _ = repo.git(["branch", "-D", "--", &plan.branch]);
            }
            return Err(e);
        }
        Ok(true)
    }

    /// Tops the pool up to `want` spares at `start` (a commit-ish, usually the default base).
    /// Returns at once if another process is filling this pool.
    pub fn fill(&self, repo: &Repo, start: &str, want: usize) -> Result<()> {
        let Some(_fill) = self.lock(".fill.lock", false)? else {
            return Ok(());
        };

        // Leftovers of a fill that died midway.
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.filter_map(|e| e.ok()) {
                if e.file_name().to_string_lossy().starts_with(BUILDING) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
            let _ = repo.git(["worktree", "prune"]);
        }
        while self.count() < want {
            let suffix = format!("{:016x}", random());
            let building = self.dir.join(format!("{BUILDING}{suffix}"));
            let ready = self.dir.join(format!("{READY}{suffix}"));
            repo.change_worktrees(
                &[
                    OsStr::new("-c"),
                    OsStr::new(crate::CHECKOUT_WORKERS),
                    OsStr::new("worktree"),
                    OsStr::new("add"),
                    OsStr::new("--quiet"),
                    OsStr::new("--detach"),
                    OsStr::new("--"),
                    building.as_os_str(),
                    OsStr::new(start),
                ],
                || {
                    let _ = std::fs::remove_dir_all(&building);
                },
            )?;
            let _lock = self.lock(".lock", true)?;
            repo.change_worktrees(
                &[
                    OsStr::new("worktree"),
                    OsStr::new("move"),
                    building.as_os_str(),
                    ready.as_os_str(),
                ],
                || {},
            )?;
        }
        Ok(())
    }

    /// Removes every spare of this pool.
    pub fn clear(&self, repo: &Repo) -> Result<usize> {
        let _lock = self.lock(".lock", true)?;
        let ready = self.ready();
        for spare in &ready {
            drop_spare(repo, spare);
        }
        Ok(ready.len())
    }
}

/// Removes a spare whatever state it is in: through git if git knows it, else by hand, and
/// then git's records of worktrees that are gone.
fn drop_spare(repo: &Repo, spare: &Path) {
    if repo.force_remove_worktree(spare).is_err() {
        let _ = std::fs::remove_dir_all(spare);
        let _ = repo.git(["worktree", "prune"]);
    }
}

fn io(path: &Path, source: std::io::Error) -> GitError {
    GitError::Io {
        context: format!("spare worktrees at {}", path.display()),
        source,
    }
}

/// FNV-1a: a stable name for a repository's pool (std's hasher may change between releases).
fn fnv1a(bytes: &OsStr) -> u64 {
    bytes
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        })
}

fn random() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}
