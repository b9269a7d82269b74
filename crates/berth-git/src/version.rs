//! Which git berth needs. The newest features it uses, and the git that brought each:
//! `merge-tree --write-tree` (merging a workspace's work, decided before anything moves) 2.38;
//! `worktree list --porcelain -z` 2.36; `rev-parse --path-format=absolute` 2.31. Below
//! [`MINIMUM`] merges fail. `replay --advance` (`workspace merge --rebase` only) came in 2.44,
//! [`REBASE_MINIMUM`].

use std::process::Command;

use crate::{GitError, Result};

/// The oldest git every berth command works with.
pub const MINIMUM: GitVersion = GitVersion(2, 38, 0);

/// The oldest git `berth workspace merge --rebase` works with (`git replay`).
pub const REBASE_MINIMUM: GitVersion = GitVersion(2, 44, 0);

/// A git version: major, minor, patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GitVersion(pub u32, pub u32, pub u32);

impl std::fmt::Display for GitVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl GitVersion {
    /// The version in `git --version`'s answer (`git version 2.39.3 (Apple Git-146)`,
    /// `git version 2.45.1.windows.1`).
    pub fn parse(answer: &str) -> Option<GitVersion> {
        let word = answer.trim().strip_prefix("git version ")?;
        let word = word.split_whitespace().next()?;
        let mut parts = word
            .split('.')
            .map(|p| p.parse::<u32>().ok())
            .take_while(Option::is_some)
            .flatten();
        Some(GitVersion(
            parts.next()?,
            parts.next()?,
            parts.next().unwrap_or(0),
        ))
    }
}

/// The version of the `git` on `PATH`.
pub fn version() -> Result<GitVersion> {
    let out = Command::new("git")
        .arg("--version")
        .env("LC_ALL", "C")
        .output()
        .map_err(GitError::Spawn)?;
    let text = String::from_utf8_lossy(&out.stdout);
    GitVersion::parse(&text).ok_or_else(|| GitError::Command {
        command: "--version".to_owned(),
        message: format!("cannot read a version in {:?}", text.trim()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order() {
        assert_eq!(
            GitVersion::parse("git version 2.47.3\n"),
            Some(GitVersion(2, 47, 3))
        );
        assert_eq!(
            GitVersion::parse("git version 2.39.3 (Apple Git-146)"),
            Some(GitVersion(2, 39, 3))
        );
        assert_eq!(
            GitVersion::parse("git version 2.45.1.windows.1"),
            Some(GitVersion(2, 45, 1))
        );
        assert_eq!(
            GitVersion::parse("git version 3.0"),
            Some(GitVersion(3, 0, 0))
        );
        assert_eq!(GitVersion::parse("hub 1.0"), None);
        assert!(GitVersion(2, 37, 9) < MINIMUM);
        assert!(GitVersion(2, 100, 0) > REBASE_MINIMUM);
    }

    #[test]
    fn the_git_here_is_read() {
        assert!(version().unwrap() >= GitVersion(2, 0, 0));
    }
}
