//! Questions about branches and revisions: whether a branch or commit exists, object
//! names, and how many commits a revision range holds.

use crate::{Repo, Result};

impl Repo {
    pub fn has_branch(&self, name: &str) -> bool {
        self.succeeds([
            "show-ref",
            "--verify",
            "--quiet",
            &format!("refs/heads/{name}"),
        ])
    }

    pub(crate) fn has_remote_branch(&self, name: &str) -> bool {
        self.succeeds([
            "show-ref",
            "--verify",
            "--quiet",
            &format!("refs/remotes/origin/{name}"),
        ])
    }

    pub(crate) fn is_commit(&self, rev: &str) -> bool {
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

    /// The full object name of a revision.
    pub(crate) fn rev(&self, rev: &str) -> Result<String> {
        Ok(self
            .git(["rev-parse", "--verify", "--end-of-options", rev])?
            .trim()
            .to_owned())
    }

    /// How many commits a revision range holds.
    pub(crate) fn count(&self, range: &[String]) -> Result<usize> {
        let mut args = vec!["rev-list".to_owned(), "--count".to_owned()];
        args.extend(range.iter().cloned());
        args.push("--".to_owned());
        Ok(self.git(&args)?.trim().parse().unwrap_or(0))
    }
}
