//! Finding and opening a repository: the one containing a folder, or the one whose main
//! checkout is exactly a folder; bare or not, and where its git folder is.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::command::{git_output, run};
use crate::{GitError, Repo, Result};

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
    pub(crate) fn common_dir(&self) -> PathBuf {
        match self.bare {
            true => self.root.clone(),
            false => self.root.join(".git"),
        }
    }
}
