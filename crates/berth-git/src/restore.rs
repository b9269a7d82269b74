//! Putting a worktree away and bringing it back: `keep_for_restore` keeps, before an archive
//! removes a worktree, what it holds on a ref (what a forced removal would lose, as
//! `keep_lost_work` keeps it, else the HEAD itself); `restore_worktree` makes the worktree again
//! from such a ref, on its branch, with the files it had uncommitted back as uncommitted
//! changes.
//!
//! A ref that `keep_lost_work` made points either at a commit of the work itself (nothing was
//! uncommitted and one tip was kept), or at berth's own commit whose first parent is the HEAD
//! the worktree had, whose second parent (if any) is its branch's tip, and whose tree is the
//! worktree as it was (untracked files included, ignored ones not). That commit is known by
//! its committer and subject, which only berth writes.

use std::ffi::OsStr;
use std::path::Path;

use serde::Serialize;

use crate::command::run;
use crate::create::CHECKOUT_WORKERS;
use crate::remove::{KEPT_COMMITTER, KEPT_SUBJECT};
use crate::status::head_state;
use crate::{DETACHED_HEAD, GitError, Repo, Result, WorktreeRef};

/// What `restore_worktree` brought back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoredWork {
    /// The commit the worktree's HEAD is on.
    pub head: String,
    /// Whether the branch was made again (it was gone); otherwise it was there, at the commit
    /// the work was on.
    pub branch_recreated: bool,
    /// Files back as uncommitted changes (untracked ones included).
    pub uncommitted: usize,
}

/// What a kept ref holds, read back.
struct Kept {
    /// The worktree's HEAD.
    head: String,
    /// Its branch's tip: the HEAD, unless the worktree was on another commit.
    branch_tip: String,
    /// The worktree's files, where they differ from the HEAD's.
    snapshot: Option<String>,
}

impl Repo {
    /// Before an archive removes the worktree: keeps what the removal would lose, as
    /// [`Repo::keep_lost_work`] does, on `refname` (or `refname-2`…); when nothing would be
    /// lost, the HEAD (else the branch's tip) goes on that ref instead, so the worktree can
    /// always be made again from it. Returns the ref, or `None` when the worktree has no HEAD
    /// and its branch is gone (there is nothing to keep).
    pub fn keep_for_restore(&self, wt: WorktreeRef<'_>, refname: &str) -> Result<Option<String>> {
        if let Some(kept) = self.keep_lost_work(wt, refname)? {
            return Ok(Some(kept.refname));
        }
        let head = match wt.path.exists() {
            true => head_state(wt.path).ok().and_then(|s| s.sha),
            false => None,
        };
        let tip = match head {
            Some(head) => Some(head),
            None if wt.branch != DETACHED_HEAD && self.has_branch(wt.branch) => {
                Some(self.rev(&format!("refs/heads/{}", wt.branch))?)
            }
            None => None,
        };
        tip.map(|tip| self.create_lost_ref(refname, &tip))
            .transpose()
    }

    /// Makes the worktree `wt` again from `from` (a ref `keep_for_restore` or a forced
    /// removal made, or any commit): at `wt.path`, which must not exist or be an empty
    /// folder; on `wt.branch`, made again at the commit the work was on when it is gone, and
    /// refused when it exists at another commit (or detached, for [`DETACHED_HEAD`]); with the
    /// files that were uncommitted back in the worktree as uncommitted changes (the index is
    /// the HEAD's: what was staged comes back unstaged). On failure nothing is left: no
    /// worktree, and no branch this call made. `from` stays.
    pub fn restore_worktree(&self, wt: WorktreeRef<'_>, from: &str) -> Result<RestoredWork> {
        let commit = self
            .rev(&format!("{from}^{{commit}}"))
            .map_err(|_| GitError::RestoreFromMissing(from.to_owned()))?;
        let kept = self.read_kept(&commit)?;
        if let Some(what) = occupied(wt.path) {
            return Err(GitError::RestoreRefused(format!(
                "{} {what}; move it away to restore the worktree there",
                wt.path.display()
            )));
        }
        // A stale record of a worktree at this path would make git refuse the add.
        self.git(["worktree", "prune"])?;
        let detached = wt.branch == DETACHED_HEAD;
        let mut branch_recreated = false;
        if !detached {
            if self.has_branch(wt.branch) {
                let at = self.rev(&format!("refs/heads/{}", wt.branch))?;
                if at != kept.branch_tip {
                    return Err(GitError::RestoreRefused(format!(
                        "branch '{}' exists at {}, not at {} where the work was; rename or delete that branch to restore the work on it (the work stays on {from})",
                        wt.branch,
                        short(&at),
                        short(&kept.branch_tip)
                    )));
                }
            } else {
                self.git(["branch", "--no-track", "--", wt.branch, &kept.branch_tip])?;
                branch_recreated = true;
            }
        }
        let start = match detached {
            true => kept.head.as_str(),
            false => wt.branch,
        };
        let mut args: Vec<&OsStr> = ["-c", CHECKOUT_WORKERS, "worktree", "add", "--quiet"]
            .map(OsStr::new)
            .to_vec();
        if detached {
            args.push(OsStr::new("--detach"));
        }
        args.extend([OsStr::new("--"), wt.path.as_os_str(), OsStr::new(start)]);
        let existed = wt.path.exists();
        let undo = || self.roll_back(wt.path, existed, branch_recreated.then_some(wt.branch));
        self.change_worktrees(&args, undo)
            .and_then(|_| match &kept.snapshot {
                Some(tree) => put_back_uncommitted(wt.path, tree),
                None => Ok(()),
            })
            .inspect_err(|_| undo())?;
        let uncommitted = head_state(wt.path)?.changed;
        Ok(RestoredWork {
            head: self.rev_in(wt.path)?,
            branch_recreated,
            uncommitted,
        })
    }

    /// What the kept commit `commit` holds: berth's own commit of the work (see the module's
    /// comment), or any other commit, which is the work's HEAD with nothing uncommitted.
    fn read_kept(&self, commit: &str) -> Result<Kept> {
        let out = self.git(["log", "-1", "--format=%ce%n%P%n%s", commit, "--"])?;
        let mut lines = out.lines();
        let committer = lines.next().unwrap_or_default();
        let parents: Vec<String> = lines
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let subject = lines.next().unwrap_or_default();
        if committer != KEPT_COMMITTER || !subject.starts_with(KEPT_SUBJECT) || parents.is_empty() {
            return Ok(Kept {
                head: commit.to_owned(),
                branch_tip: commit.to_owned(),
                snapshot: None,
            });
        }
        let head = parents[0].clone();
        let tree = self.rev(&format!("{commit}^{{tree}}"))?;
        let head_tree = self.rev(&format!("{head}^{{tree}}"))?;
        Ok(Kept {
            branch_tip: parents.get(1).unwrap_or(&head).clone(),
            head,
            snapshot: (tree != head_tree).then_some(tree),
        })
    }

    /// The commit the worktree at `path` has checked out.
    fn rev_in(&self, path: &Path) -> Result<String> {
        Ok(run(path, ["rev-parse", "--verify", "HEAD^{commit}"])?
            .trim()
            .to_owned())
    }
}

/// Makes the files of the fresh worktree at `path` those of `tree`, and its index the HEAD's
/// again: what differs is uncommitted, as it was. `read-tree -u --reset` writes the tree's
/// files and removes those of the HEAD it lacks; `reset` (mixed) puts the index back.
fn put_back_uncommitted(path: &Path, tree: &str) -> Result<()> {
    run(path, ["read-tree", "-u", "--reset", tree])?;
    run(path, ["reset", "--quiet"]).map(drop)
}

/// Why a worktree cannot be made at `path`: something is there that is not an empty folder.
fn occupied(path: &Path) -> Option<&'static str> {
    match std::fs::symlink_metadata(path) {
        Err(_) => None,
        Ok(meta) if !meta.is_dir() => Some("exists and is not a folder"),
        Ok(_) => match std::fs::read_dir(path).map(|mut entries| entries.next().is_none()) {
            Ok(true) => None,
            _ => Some("is a folder with something in it"),
        },
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

    use std::path::Path;

    use crate::{BranchSpec, GitError, Repo, WorktreeRef};

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    /// A repository on `main` with a worktree on `berth/a` (made by berth) holding a commit,
    /// an edit, a deleted file and a new untracked one.
    fn worked_on() -> (tempfile::TempDir, Repo, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("project");
        std::fs::create_dir(&root).unwrap();
        git(&root, &["init", "--quiet", "-b", "main"]);
        std::fs::write(root.join("README.md"), "hello\n").unwrap();
        std::fs::write(root.join("gone.txt"), "to be deleted\n").unwrap();
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        git(&root, &["add", "."]);
        git(&root, &["commit", "--quiet", "-m", "first"]);
        let repo = Repo::open(&root).unwrap();
        let wt = tmp.path().join("wt");
        repo.add_worktree(&wt, &BranchSpec::New("berth/a".into()), None)
            .unwrap();
        std::fs::write(wt.join("lib.rs"), "pub fn a() {}\n").unwrap();
        git(&wt, &["add", "lib.rs"]);
        git(&wt, &["commit", "--quiet", "-m", "the agent's commit"]);
        std::fs::write(wt.join("README.md"), "hello, edited\n").unwrap();
        std::fs::remove_file(wt.join("gone.txt")).unwrap();
        std::fs::write(wt.join("new.txt"), "brand new\n").unwrap();
        (tmp, repo, wt)
    }

    fn wt_ref(path: &Path) -> WorktreeRef<'_> {
        WorktreeRef {
            path,
            branch: "berth/a",
            base_branch: "main",
            branch_created: true,
        }
    }

    #[test]
    fn archived_worktree_comes_back_as_it_was() {
        let (_tmp, repo, wt) = worked_on();
        let status_before = git(&wt, &["status", "--porcelain=v1", "--untracked-files=all"]);
        let head_before = git(&wt, &["rev-parse", "HEAD"]);
        assert_eq!(status_before, " M README.md\n D gone.txt\n?? new.txt\n");

        let refname = repo
            .keep_for_restore(wt_ref(&wt), "refs/berth/lost/a")
            .unwrap()
            .expect("work was kept");
        assert_eq!(refname, "refs/berth/lost/a");
        repo.remove_worktree(wt_ref(&wt), true).unwrap();
        assert!(!wt.exists());
        assert!(!repo.has_branch("berth/a"), "the branch berth made went");

        let restored = repo.restore_worktree(wt_ref(&wt), &refname).unwrap();
        assert!(restored.branch_recreated);
        assert_eq!(restored.uncommitted, 3);
        assert_eq!(format!("{}\n", restored.head), head_before);
        assert_eq!(git(&wt, &["rev-parse", "HEAD"]), head_before);
        assert_eq!(
            git(&wt, &["symbolic-ref", "HEAD"]).trim(),
            "refs/heads/berth/a"
        );
        assert_eq!(
            git(&wt, &["status", "--porcelain=v1", "--untracked-files=all"]),
            status_before
        );
        assert_eq!(read(&wt.join("README.md")), "hello, edited\n");
        assert_eq!(read(&wt.join("new.txt")), "brand new\n");
        assert_eq!(read(&wt.join("lib.rs")), "pub fn a() {}\n");
        assert!(!wt.join("gone.txt").exists());
        // The ref stays: the work is never in one place only.
        assert!(repo.is_commit(&refname));
    }

    #[test]
    fn a_clean_worktree_is_kept_at_its_head_and_comes_back() {
        let (_tmp, repo, wt) = worked_on();
        git(&wt, &["add", "--all"]);
        git(&wt, &["commit", "--quiet", "-m", "all of it"]);
        // Merged into main: nothing a removal would lose, yet the archive keeps the HEAD.
        git(repo.root(), &["merge", "--quiet", "--ff-only", "berth/a"]);
        let head = git(&wt, &["rev-parse", "HEAD"]);
        let refname = repo
            .keep_for_restore(wt_ref(&wt), "refs/berth/lost/a")
            .unwrap()
            .unwrap();
        assert_eq!(git(repo.root(), &["rev-parse", &refname]), head);
        repo.remove_worktree(wt_ref(&wt), true).unwrap();
        let restored = repo.restore_worktree(wt_ref(&wt), &refname).unwrap();
        assert_eq!(restored.uncommitted, 0);
        assert_eq!(git(&wt, &["rev-parse", "HEAD"]), head);
        assert_eq!(git(&wt, &["status", "--porcelain"]), "");
    }

    #[test]
    fn restore_refuses_what_it_cannot_do_and_leaves_nothing() {
        let (_tmp, repo, wt) = worked_on();
        let refname = repo
            .keep_for_restore(wt_ref(&wt), "refs/berth/lost/a")
            .unwrap()
            .unwrap();
        repo.remove_worktree(wt_ref(&wt), true).unwrap();

        let missing = repo.restore_worktree(wt_ref(&wt), "refs/berth/lost/nope");
        assert!(
            matches!(missing, Err(GitError::RestoreFromMissing(_))),
            "{missing:?}"
        );

        std::fs::create_dir(&wt).unwrap();
        std::fs::write(wt.join("someone's"), "x").unwrap();
        let taken = repo.restore_worktree(wt_ref(&wt), &refname).unwrap_err();
        assert!(matches!(taken, GitError::RestoreRefused(_)), "{taken}");
        assert!(taken.to_string().contains("something in it"), "{taken}");
        assert!(!repo.has_branch("berth/a"), "no branch made for a refusal");
        std::fs::remove_dir_all(&wt).unwrap();

        // The branch made again elsewhere (from main) by someone else.
        git(repo.root(), &["branch", "berth/a", "main"]);
        let elsewhere = repo.restore_worktree(wt_ref(&wt), &refname).unwrap_err();
        assert!(
            elsewhere.to_string().contains("branch 'berth/a' exists at"),
            "{elsewhere}"
        );
        assert!(!wt.exists());
    }
}
