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
//! A create that finds no spare ready but one being filled (or a filler just started) waits
//! for it: the fill started before the create did, so it ends sooner than a fresh checkout
//! started now would (which would also compete with the fill for the disk). It stops waiting when the filler is gone
//! (its lock released) or the fill runs far over the time the last one took, and then makes
//! a fresh checkout.
//!
//! Invariants: a spare is only ever seen complete (it is built under `.tmp-*` and renamed to
//! `ready-*` by `git worktree move`); one process takes a given spare (the pool lock); one
//! process fills a pool at a time (the fill lock, taken without waiting).

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::{GitError, Repo, Result, WorktreePlan};

/// The spare worktrees of one repository.
#[derive(Debug, Clone)]
pub struct SparePool {
    dir: PathBuf,
}

const READY: &str = "ready-";
const BUILDING: &str = ".tmp-";
/// While a fill runs: when the spare being built now was started (milliseconds since the
/// epoch) and the filler's pid.
const STARTED: &str = ".fill-started";
/// How long building the last spare took (milliseconds).
const TOOK: &str = ".fill-took";
/// How long a create waits for a spare being filled when the pool has never timed one.
const UNTIMED_WAIT: Duration = Duration::from_secs(600);

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
        let mut deadline = None;
        {
            let spare = loop {
                let lock = self.lock(".lock", true)?;
                if let Some(spare) = self.ready().into_iter().next() {
                    break (spare, lock);
                }
                drop(lock);
                // None ready: wait for one being filled, while that is still the sooner way.
                let until = *deadline.get_or_insert_with(|| self.fill_ends_by());
                match until {
                    Some(until) if Instant::now() < until && self.being_filled() => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    _ => return Ok(false),
                }
            };
            let (spare, _lock) = spare;
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

    /// Whether a spare is being built, or about to be: the fill hint names a process that is
    /// alive. Read without touching the fill lock, which a filler takes without waiting and
    /// would give up on if a reader held it for an instant.
    fn being_filled(&self) -> bool {
        self.started().is_some_and(|(_, pid)| alive(pid))
    }

    /// Says that process `pid`, just started, is about to fill this pool, so that a create
    /// arriving before it has begun already waits for it. A live filler's hint is left alone:
    /// the new process will find that filler's lock and leave the work to it.
    pub fn announce_fill(&self, pid: u32) {
        if self.started().is_some_and(|(_, p)| p != pid && alive(p)) {
            return;
        }
        let _ = std::fs::create_dir_all(&self.dir);
        let _ = std::fs::write(self.dir.join(STARTED), format!("{} {pid}", now_ms()));
    }

    /// When the spare being built was started (ms since the epoch), and by which process.
    fn started(&self) -> Option<(u64, u32)> {
        let text = std::fs::read_to_string(self.dir.join(STARTED)).ok()?;
        let mut parts = text.split_whitespace();
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    }

    /// When a create stops waiting for the spare being filled: twice the time the last spare
    /// took, counted from when this one was started (a filler that slow has stalled, or shares
    /// the machine with more than one create); `None` when no spare is being filled.
    fn fill_ends_by(&self) -> Option<Instant> {
        if !self.being_filled() {
            return None;
        }
        let took: Option<u64> = std::fs::read_to_string(self.dir.join(TOOK))
            .ok()
            .and_then(|t| t.trim().parse().ok());
        let Some(took) = took else {
            return Some(Instant::now() + UNTIMED_WAIT);
        };
        let elapsed = self
            .started()
            .map_or(0, |(started, _)| now_ms().saturating_sub(started));
        let left = (2 * took).saturating_sub(elapsed);
        Some(Instant::now() + Duration::from_millis(left))
    }

    /// Tops the pool up to `want` spares at `start` (a commit-ish, usually the default base).
    /// Returns at once if another process is filling this pool.
    pub fn fill(&self, repo: &Repo, start: &str, want: usize) -> Result<()> {
        let Some(_fill) = self.lock(".fill.lock", false)? else {
            return Ok(());
        };
        // The hint that a fill is under way lasts as long as this call, however it ends.
        struct Hint<'a>(&'a Path);
        impl Drop for Hint<'_> {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(self.0.join(STARTED));
            }
        }
        let _hint = Hint(&self.dir);

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
            let started = Instant::now();
            // Hints for a create deciding whether to wait for this spare; losing them only
            // costs that decision its estimate.
            let _ = std::fs::write(
                self.dir.join(STARTED),
                format!("{} {}", now_ms(), std::process::id()),
            );
            // The files are written after, as for a create (`Repo::check_out`).
            let mut add = vec![
                OsStr::new("worktree"),
                OsStr::new("add"),
                OsStr::new("--quiet"),
                OsStr::new("--detach"),
                OsStr::new("--no-checkout"),
            ];
            add.extend([OsStr::new("--"), building.as_os_str(), OsStr::new(start)]);
            let undo = || {
                let _ = std::fs::remove_dir_all(&building);
                let _ = repo.git(["worktree", "prune"]);
            };
            repo.change_worktrees(&add, || {
                let _ = std::fs::remove_dir_all(&building);
            })?;
            repo.check_out(&building).inspect_err(|_| undo())?;
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
            let took = started.elapsed().as_millis().to_string();
            let _ = std::fs::write(self.dir.join(TOOK), took);
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
pub(crate) fn fnv1a(bytes: &OsStr) -> u64 {
    bytes
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// Whether process `pid` exists (a signal 0 reaches it, or it exists but is not ours).
fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn random() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announced_filler_is_waited_for_while_it_lives_and_keeps_a_live_fillers_hint() {
        let tmp = tempfile::tempdir().unwrap();
        let pool = SparePool {
            dir: tmp.path().join("pool"),
        };
        assert!(!pool.being_filled(), "nothing announced");

        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        pool.announce_fill(child.id());
        assert!(pool.being_filled(), "a live announced filler is waited for");
        // Another process announcing now leaves the live filler's hint alone.
        pool.announce_fill(std::process::id());
        assert_eq!(pool.started().unwrap().1, child.id());

        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            !pool.being_filled(),
            "a filler that is gone is not waited for"
        );
        assert!(pool.fill_ends_by().is_none());
        // Its stale hint gives way to the next announcement.
        pool.announce_fill(std::process::id());
        assert_eq!(pool.started().unwrap().1, std::process::id());
    }
}
