//! Linked worktrees found on disk: adopting one made by `git worktree add`, telling whether
//! a worktree is this repository's, and finding and repairing the ones a moved repository
//! stranded.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::command::{git_output, run};
use crate::{DETACHED_HEAD, GitError, Repo, Result};

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

/// A worktree as `git worktree list` shows it ([`Repo::listed_worktrees`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedWorktree {
    pub path: PathBuf,
    /// The branch checked out there, or [`DETACHED_HEAD`].
    pub branch: String,
    /// Its folder is gone; git still has its record.
    pub gone: bool,
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

impl Repo {
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

    /// The linked worktrees git lists for this repository (`git worktree list`), the main
    /// checkout left out: each with its branch ([`DETACHED_HEAD`] when detached) and whether
    /// its folder is gone (git's record of it is then stale, for `git worktree prune`).
    pub fn listed_worktrees(&self) -> Result<Vec<ListedWorktree>> {
        let listed = self.git(["worktree", "list", "--porcelain", "-z"])?;
        let mut out: Vec<ListedWorktree> = Vec::new();
        // Records are separated by an empty field; the first is the main checkout (or a bare
        // repository's folder).
        for (i, record) in listed.split("\0\0").enumerate() {
            let mut path = None;
            let mut branch = DETACHED_HEAD.to_owned();
            let mut bare = false;
            for field in record.split('\0') {
                if let Some(p) = field.strip_prefix("worktree ") {
                    path = Some(PathBuf::from(p));
                } else if let Some(b) = field.strip_prefix("branch refs/heads/") {
                    branch = b.to_owned();
                } else if field == "bare" {
                    bare = true;
                }
            }
            let Some(path) = path else { continue };
            if i == 0 || bare {
                continue;
            }
            let gone = !path.exists();
            out.push(ListedWorktree { path, branch, gone });
        }
        Ok(out)
    }

    /// `git worktree prune`: git forgets the worktrees whose folder is gone.
    pub fn prune_worktrees(&self) -> Result<()> {
        self.git(["worktree", "prune"]).map(drop)
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
}

/// Where a linked worktree's `.git` file points (`gitdir: <repository>/.git/worktrees/<name>`),
/// made absolute; `None` when there is no such file.
fn worktree_link(worktree: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(worktree.join(".git")).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    Some(worktree.join(target))
}
