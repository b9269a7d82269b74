//! The git of a land (berth-run's merge queue): a worktree's branch brought up to date with
//! the branch it lands on, conflicts written into the worktree for its agent to resolve,
//! the resolution committed, and the target moved by compare-and-swap.
//!
//! Every merge here is computed on objects first (`git merge-tree --write-tree`, which
//! touches no worktree); only its result is written, so a conflict never leaves a
//! half-merged index behind, and the agent (which may not write git's own state) is handed
//! plain files: the combined tree, markers included, as uncommitted work on the new base.
//!
//! Nothing of the work is lost on the way: before a worktree's branch is moved off its own
//! history (to the base, for a resolution), its tip is kept on a ref the caller names, and a
//! resolution commit has both the base and that tip as parents.

use std::path::Path;

use serde::Serialize;

use crate::command::run;
use crate::merge::{MergeMode, commit_tree, is_ancestor, lossy, merge_tree, overwritten_untracked};
use crate::remove::{Embedded, snapshot_tree};
use crate::status::tracked_state;
use crate::{GitError, Repo, Result};

/// Where a worktree's branch stands once brought up to date with a base.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Brought {
    /// The base was in its history already: nothing changed.
    UpToDate { tip: String },
    /// Merged (or replayed) cleanly: the branch and its files moved to `tip`.
    Moved { tip: String },
    /// The base and the work conflict in `files`: the worktree's HEAD is now `base`, and its
    /// files are the two merged, conflict markers included, as uncommitted changes. `work`
    /// is the branch's tip before, kept on the caller's ref.
    Conflicted {
        base: String,
        work: String,
        files: Vec<String>,
    },
}

impl Repo {
    /// Whether `ancestor` is in `of`'s history.
    pub fn contains(&self, of: &str, ancestor: &str) -> Result<bool> {
        is_ancestor(self.root(), ancestor, of)
    }

    /// The commit of `into` since `since` (exclusive) whose message holds `mark`, newest first:
    /// how a land that was cut off finds a squash it made before it could record it.
    pub fn find_marked(&self, into: &str, since: &str, mark: &str) -> Result<Option<String>> {
        let out = self.git([
            "log",
            "--format=%H",
            "--fixed-strings",
            &format!("--grep={mark}"),
            &format!("{since}..refs/heads/{into}"),
        ])?;
        Ok(out.lines().next().map(str::to_owned))
    }

    /// Moves `into` from `before` to `after` (which must descend from it), as a merge's last
    /// step does: where `into` is checked out, only when that checkout is still at `before`
    /// with no change to a tracked file and no untracked file where `after` adds one (its
    /// files follow, by a fast-forward); elsewhere by `update-ref` with the old value. A
    /// target that moved meanwhile is [`GitError::Moved`], and nothing changes.
    pub fn move_branch(&self, into: &str, before: &str, after: &str) -> Result<()> {
        let now = self.branch_tip(into)?;
        if now != before {
            return Err(GitError::Moved {
                branch: into.to_owned(),
                expected: before.to_owned(),
                now,
            });
        }
        match self.checkout_of(into)? {
            Some(path) => {
                let target = tracked_state(&path)?;
                if target.changed > 0 {
                    return Err(GitError::TargetDirty {
                        branch: into.to_owned(),
                        path,
                        count: target.changed,
                    });
                }
                let files = overwritten_untracked(&path, before, after)?;
                if !files.is_empty() {
                    return Err(GitError::TargetUntracked {
                        branch: into.to_owned(),
                        path,
                        files,
                    });
                }
                run(&path, ["merge", "--ff-only", "--quiet", after])?;
            }
            None => {
                self.git(["update-ref", &format!("refs/heads/{into}"), after, before])?;
            }
        }
        Ok(())
    }

    /// The commit that lands `tip` on a base at `before` in `mode`: `tip` itself, which
    /// descends from `before` once brought up to date, or for a squash one new commit on
    /// `before` with `tip`'s files (the files that were checked).
    pub fn landing_commit(
        &self,
        before: &str,
        tip: &str,
        mode: MergeMode,
        message: &str,
    ) -> Result<String> {
        if !is_ancestor(self.root(), before, tip)? {
            return Err(GitError::Command {
                command: "land".to_owned(),
                message: format!("{tip} was not brought up to date with {before}"),
            });
        }
        match mode {
            MergeMode::Merge | MergeMode::Rebase => Ok(tip.to_owned()),
            MergeMode::Squash => {
                let tree = self.git(["rev-parse", &format!("{tip}^{{tree}}")])?;
                commit_tree(self.root(), tree.trim(), &[before], message)
            }
        }
    }

    /// Brings the branch checked out in `wt` (whose work is all committed) up to date with
    /// `base` (a commit of the base branch `base_branch`): nothing when `base` is in its
    /// history; else a merge commit (`base` first, then the work, with `message`) or, with
    /// `MergeMode::Rebase`, the work's commits replayed on `base`, its files following. A
    /// conflict writes the merged files, markers included, into `wt` on `base` (see
    /// [`Brought::Conflicted`]), the work's tip kept on `keep` first.
    pub fn bring_up_to_date(
        &self,
        wt: &Path,
        base_branch: &str,
        base: &str,
        mode: MergeMode,
        message: &str,
        keep: &str,
    ) -> Result<Brought> {
        let work = run(wt, ["rev-parse", "HEAD"])?.trim().to_owned();
        if is_ancestor(wt, base, &work)? {
            return Ok(Brought::UpToDate { tip: work });
        }
        if mode == MergeMode::Rebase
            && let Ok(tip) = self.replay(wt, base_branch, base, &work)
        {
            run(wt, ["reset", "--quiet", "--keep", &tip])?;
            return Ok(Brought::Moved { tip });
        }
        let (tree, files) = merge_tree(wt, base, &work)?;
        let files = lossy(files);
        if files.is_empty() {
            let tip = commit_tree(wt, &tree, &[base, &work], message)?;
            run(wt, ["merge", "--ff-only", "--quiet", &tip])?;
            return Ok(Brought::Moved { tip });
        }
        self.git(["update-ref", keep, &work])?;
        // The branch goes to the base, the files to the merged tree, the index back to the
        // base: the work and its markers are uncommitted changes, as an agent's work is.
        run(wt, ["update-ref", "HEAD", base, &work])?;
        run(wt, ["read-tree", "--reset", "-u", &tree])?;
        run(wt, ["reset", "--quiet"])?;
        Ok(Brought::Conflicted {
            base: base.to_owned(),
            work,
            files,
        })
    }

    /// Commits what `wt` holds after a resolution of [`Brought::Conflicted`] as the merge of
    /// `base` and `work` (in that order), with `message`; the branch moves to it from
    /// `base`. The new tip.
    pub fn commit_resolution(
        &self,
        wt: &Path,
        base: &str,
        work: &str,
        message: &str,
    ) -> Result<String> {
        let tree = snapshot_tree(wt, Embedded::Refuse)?;
        let tip = commit_tree(wt, &tree, &[base, work], message)?;
        run(wt, ["update-ref", "HEAD", &tip, base])?;
        run(wt, ["reset", "--quiet"])?;
        Ok(tip)
    }

    /// Puts `wt` back where it was before a resolution that did not succeed: what it holds
    /// kept as a commit on `attempt` (the merge of `base` and `work`, markers and all), its
    /// branch at `work` again, its files `work`'s (what the attempt added removed, ignored
    /// files left alone). The kept attempt.
    pub fn abandon_resolution(
        &self,
        wt: &Path,
        base: &str,
        work: &str,
        attempt: &str,
    ) -> Result<String> {
        let tree = snapshot_tree(wt, Embedded::Refuse)?;
        let kept = commit_tree(
            wt,
            &tree,
            &[base, work],
            "berth land: an unfinished resolution, kept",
        )?;
        self.git(["update-ref", attempt, &kept])?;
        run(wt, ["update-ref", "HEAD", work, base])?;
        run(wt, ["read-tree", "--reset", "-u", work])?;
        // Files the attempt added are in the kept commit; the worktree had no other
        // untracked file (its work was committed before the land), and ignored ones stay.
        run(wt, ["clean", "--quiet", "--force", "-d"])?;
        Ok(kept)
    }

    /// `work` combined with `base` on objects: the merge commit (`base` first, with
    /// `message`), `work` itself when `base` is in its history, or the conflicted files.
    pub fn combine(
        &self,
        base: &str,
        work: &str,
        message: &str,
    ) -> Result<std::result::Result<String, Vec<String>>> {
        if is_ancestor(self.root(), base, work)? {
            return Ok(Ok(work.to_owned()));
        }
        let (tree, files) = merge_tree(self.root(), base, work)?;
        let files = lossy(files);
        if !files.is_empty() {
            return Ok(Err(files));
        }
        Ok(Ok(commit_tree(self.root(), &tree, &[base, work], message)?))
    }

    /// A checkout of `commit` at `path` (a detached worktree), for a check of work whose own
    /// worktree is on another machine.
    pub fn checkout_detached(&self, path: &Path, commit: &str) -> Result<()> {
        let path = path.to_string_lossy();
        self.git(["worktree", "add", "--quiet", "--detach", &path, commit])?;
        Ok(())
    }

    /// Removes a checkout [`Repo::checkout_detached`] made.
    pub fn drop_checkout(&self, path: &Path) -> Result<()> {
        let shown = path.to_string_lossy();
        self.git(["worktree", "remove", "--force", &shown])?;
        Ok(())
    }

    /// Deletes the ref `name`, if it is there.
    pub fn delete_ref(&self, name: &str) -> Result<()> {
        if self.succeeds(["rev-parse", "--verify", "--quiet", name]) {
            self.git(["update-ref", "-d", name])?;
        }
        Ok(())
    }

    /// A one-line-per-commit account of what `base` gained since it and `work` parted,
    /// touching `files` (all files when empty), at most `limit` lines.
    pub fn base_changes(
        &self,
        work: &str,
        base: &str,
        files: &[String],
        limit: usize,
    ) -> Result<String> {
        let since = self.git(["merge-base", work, base])?;
        let range = format!("{}..{base}", since.trim());
        let limit = format!("--max-count={limit}");
        let mut args = vec![
            "log",
            "--format=%h %s",
            limit.as_str(),
            range.as_str(),
            "--",
        ];
        args.extend(files.iter().map(String::as_str));
        self.git(args)
    }
}

/// Whether `path` under `wt` still holds a conflict marker line (`<<<<<<< `, then
/// `=======` or `>>>>>>> `). The agent had the worktree: only a regular file is read, never
/// through a symlink (which could lead out of it), and opened without blocking (a FIFO in
/// its place is no file, and would hold berth forever); anything else holds no markers.
pub fn has_conflict_markers(wt: &Path, path: &str) -> bool {
    use std::io::BufRead;
    use std::os::unix::fs::OpenOptionsExt;
    // A folder on the way that is a link could lead out too (the last part is O_NOFOLLOW's).
    let mut on_the_way = wt.to_path_buf();
    let parts: Vec<&str> = path.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        on_the_way.push(part);
        if !std::fs::symlink_metadata(&on_the_way).is_ok_and(|m| m.is_dir()) {
            return false;
        }
    }
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(wt.join(path))
    else {
        return false;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut open = false;
    for line in std::io::BufReader::new(file).split(b'\n') {
        let Ok(line) = line else { return false };
        if line.starts_with(b"<<<<<<< ") {
            open = true;
        } else if open && (line.starts_with(b">>>>>>> ") || line == b"=======") {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::has_conflict_markers;

    const MARKED: &str = "<<<<<<< a\nours\n=======\ntheirs\n>>>>>>> b\n";

    /// What an agent left where a conflicted file was is read only as a plain file of its
    /// worktree: a FIFO does not hold berth, and a link (of the file or of a folder on the
    /// way) is not followed out.
    #[test]
    fn only_a_plain_file_of_the_worktree_is_read_for_markers() {
        let tmp = tempfile::tempdir().unwrap();
        let (wt, outside) = (tmp.path().join("wt"), tmp.path().join("outside"));
        std::fs::create_dir_all(wt.join("dir")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("f.txt"), MARKED).unwrap();
        std::fs::write(wt.join("dir/plain.txt"), MARKED).unwrap();
        assert!(has_conflict_markers(&wt, "dir/plain.txt"));
        std::fs::write(wt.join("clean.txt"), "resolved\n=======\n").unwrap();
        assert!(!has_conflict_markers(&wt, "clean.txt"));
        std::os::unix::fs::symlink(outside.join("f.txt"), wt.join("link.txt")).unwrap();
        assert!(!has_conflict_markers(&wt, "link.txt"));
        std::os::unix::fs::symlink(&outside, wt.join("out")).unwrap();
        assert!(!has_conflict_markers(&wt, "out/f.txt"));
        let fifo = std::ffi::CString::new(wt.join("fifo.txt").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path and a mode; mkfifo touches nothing else.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let wt_again = wt.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(has_conflict_markers(&wt_again, "fifo.txt")));
        let read = rx.recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(read, Ok(false), "a FIFO held the read");
        assert!(!has_conflict_markers(&wt, "missing.txt"));
    }
}
