//! Removing worktrees without losing work: the check for uncommitted changes, unmerged and
//! unreferenced commits that refuses a removal, and, before a forced one, keeping what it
//! would lose on a ref (`keep_lost_work`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::command::{command, run};
use crate::error::NAMED_COMMITS;
use crate::status::{HeadState, head_state};
use crate::{DETACHED_HEAD, GitError, Repo, Result, WorktreeRef};

/// Who commits the work a forced removal keeps, and how its subject starts: what tells that
/// commit apart from the work's own (`restore.rs` reads it back).
pub(crate) const KEPT_COMMITTER: &str = "berth@localhost";
pub(crate) const KEPT_SUBJECT: &str = "berth: the work of ";

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

impl Repo {
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
    pub(crate) fn force_remove_worktree(&self, path: &Path) -> Result<()> {
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
                snapshot_tree(wt.path, Embedded::LeaveOut)?
            } else {
                self.rev(&format!("{}^{{tree}}", parents[0]))?
            };
            let mut args = vec![
                "-c".to_owned(),
                "user.name=berth".to_owned(),
                "-c".to_owned(),
                format!("user.email={KEPT_COMMITTER}"),
                "-c".to_owned(),
                "commit.gpgsign=false".to_owned(),
                "commit-tree".to_owned(),
                tree,
                "-m".to_owned(),
                format!(
                    "{KEPT_SUBJECT}{} kept by a forced removal ({commits} commit(s), {uncommitted} uncommitted file(s))",
                    wt.path.display()
                ),
            ];
            for p in parents {
                args.extend(["-p".to_owned(), p]);
            }
            self.git(&args)?.trim().to_owned()
        };
        let refname = self.create_lost_ref(refname, &target)?;
        Ok(Some(KeptWork {
            refname,
            commits,
            uncommitted,
        }))
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
}

/// What staging a worktree's work does with an embedded repository: a folder with its own
/// `.git`, which `git add` would record as a gitlink (a link to a commit only that folder
/// has), not as its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Embedded {
    /// Refuse, naming them: the work is about to become a commit.
    Refuse,
    /// Leave them out: the work is only read, or kept.
    LeaveOut,
}

/// Stages everything in `worktree` (into the index file `index`, else the worktree's own) as
/// `git add --all` would, without running anything from a repository inside the worktree:
/// `git add` asks every gitlink's folder whether it is dirty (a `git status` inside it, with
/// the config found there), so it is never given a gitlink's path. A gitlink takes the commit
/// its folder has checked out instead (`update-index` reads that folder's HEAD and runs
/// nothing there), or goes when its folder does. An embedded repository the work would add
/// is refused or left out, as `embedded` says.
pub(crate) fn stage_all(worktree: &Path, index: Option<&Path>, embedded: Embedded) -> Result<()> {
    let git = |args: &[&str]| -> Result<String> {
        let mut cmd = command(worktree);
        if let Some(index) = index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        let out = cmd.args(args).output().map_err(GitError::Spawn)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(GitError::Command {
                command: args.join(" "),
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    };
    // `<mode> <object> <stage>\t<path>`, each ended by NUL.
    let gitlinks: Vec<String> = git(&["ls-files", "--stage", "-z"])?
        .split('\0')
        .filter_map(|entry| {
            let (meta, path) = entry.split_once('\t')?;
            meta.starts_with("160000 ").then(|| path.to_owned())
        })
        .collect();
    // Git lists an untracked repository as its folder, `path/`, never the files inside.
    let repositories: Vec<String> = git(&["ls-files", "--others", "--exclude-standard", "-z"])?
        .split('\0')
        .filter_map(|path| path.strip_suffix('/'))
        .map(str::to_owned)
        .collect();
    if !repositories.is_empty() && embedded == Embedded::Refuse {
        return Err(GitError::EmbeddedRepository {
            worktree: worktree.to_owned(),
            paths: repositories,
        });
    }
    let excluded: Vec<String> = gitlinks
        .iter()
        .chain(&repositories)
        .map(|path| format!(":(exclude,literal){path}"))
        .collect();
    let mut args = vec!["add", "--all", "--", ":/"];
    args.extend(excluded.iter().map(String::as_str));
    git(&args)?;
    for path in &gitlinks {
        let folder = worktree.join(path);
        // A folder without a repository (a submodule never checked out) keeps its entry, as
        // `git add` would leave it.
        let checked_out = match std::fs::symlink_metadata(&folder) {
            Ok(meta) => !meta.is_dir() || folder.join(".git").exists(),
            Err(_) => true,
        };
        // One whose HEAD cannot be read keeps its entry too.
        if checked_out {
            let _ = git(&["update-index", "--remove", "--", path]);
        }
    }
    Ok(())
}

/// Copies the index at `index` to `copy` (nothing, if the worktree has no index yet), with
/// the original's modification time.
///
/// git trusts an entry whose stat data matches its file only when the entry is older than the
/// index file; one as new as the index is "racily clean" and its content is read again. A copy
/// made now would make every entry older than it, so a file rewritten with the same size in
/// the second git last wrote the index (git compares whole seconds) would pass as unchanged,
/// and its change would be missing from the snapshot.
fn copy_index(index: &Path, copy: &Path) -> std::io::Result<()> {
    // One handle for the time and the bytes: git replaces the index by a rename, and both
    // must come from the same file.
    let mut from = match std::fs::File::open(index) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let modified = from.metadata()?.modified()?;
    let mut to = std::fs::File::create_new(copy)?;
    let copied = std::io::copy(&mut from, &mut to).and_then(|_| to.set_modified(modified));
    if copied.is_err() {
        let _ = std::fs::remove_file(copy);
    }
    copied
}

/// Counts the index copies this process made, so no two calls share one.
static INDEX_COPIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The tree of the worktree as it is, untracked files included (ignored ones not), written
/// through a copy of its index so the worktree's own index is left as it was; embedded
/// repositories refused or left out (see [`stage_all`]).
pub(crate) fn snapshot_tree(worktree: &Path, embedded: Embedded) -> Result<String> {
    let index = run(
        worktree,
        ["rev-parse", "--path-format=absolute", "--git-path", "index"],
    )?;
    let index = PathBuf::from(index.trim());
    // A name of its own per call: the dashboard, the web page and a land may all read one
    // worktree at once.
    let copy = index.with_file_name(format!(
        "berth-keep-index-{}-{}",
        std::process::id(),
        INDEX_COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    copy_index(&index, &copy).map_err(|source| GitError::Io {
        context: format!("cannot copy the index {}", index.display()),
        source,
    })?;
    let tree = stage_all(worktree, Some(&copy), embedded).and_then(|()| {
        let out = command(worktree)
            .env("GIT_INDEX_FILE", &copy)
            .arg("write-tree")
            .output()
            .map_err(GitError::Spawn)?;
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned()),
            false => Err(GitError::Command {
                command: "write-tree".to_owned(),
                message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            }),
        }
    });
    let _ = std::fs::remove_file(&copy);
    tree
}
