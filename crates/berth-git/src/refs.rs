//! Questions about branches and revisions: whether a branch or commit exists, object
//! names, and how many commits a revision range holds.

use crate::command::git_output;
use crate::{Repo, Result};

/// Whether a branch's work is in its base (`Repo::branch_merged`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchMerged {
    /// Its tip is in the base's history, and it had commits of its own.
    Merged,
    /// It holds commits the base does not.
    NotMerged,
    /// Not one commit since it was made (its reflog's first entry is its tip): nothing was
    /// merged, it was never used.
    Unused,
    /// git cannot tell; why.
    Unknown(String),
}

impl Repo {
    /// Whether `branch` is merged into `base`: its tip is in `base`'s history (a fast-forward
    /// or a merge commit; a squash or rebase merge is not seen) and it moved since it was made,
    /// which its reflog says (git keeps one for every branch of a repository with a work
    /// tree; without one, it cannot be told from a branch never used).
    pub fn branch_merged(&self, branch: &str, base: &str) -> BranchMerged {
        let tip_ref = format!("refs/heads/{branch}");
        if !self.has_branch(branch) {
            return BranchMerged::Unknown(format!("the branch {branch} does not exist"));
        }
        if !self.is_commit(base) {
            return BranchMerged::Unknown(format!("the base {base} does not name a commit"));
        }
        let ancestor = git_output(
            &self.root,
            ["merge-base", "--is-ancestor", tip_ref.as_str(), base],
        );
        match ancestor.map(|o| o.status.code()) {
            Ok(Some(0)) => {}
            Ok(Some(1)) => return BranchMerged::NotMerged,
            Ok(_) => return BranchMerged::Unknown("git merge-base failed".to_owned()),
            Err(e) => return BranchMerged::Unknown(e.to_string()),
        }
        let tip = match self.git(["rev-parse", "--verify", tip_ref.as_str()]) {
            Ok(t) => t.trim().to_owned(),
            Err(e) => return BranchMerged::Unknown(e.to_string()),
        };
        let reflog = self
            .git(["reflog", "show", "--format=%H", tip_ref.as_str(), "--"])
            .unwrap_or_default();
        match reflog.lines().last() {
            None => BranchMerged::Unknown(format!(
                "the branch {branch} has no reflog to tell a merged branch from one never used"
            )),
            Some(first) if first.trim() == tip => BranchMerged::Unused,
            Some(_) => BranchMerged::Merged,
        }
    }

    pub fn has_branch(&self, name: &str) -> bool {
        self.succeeds([
            "show-ref",
            "--verify",
            "--quiet",
            &format!("refs/heads/{name}"),
        ])
    }

    /// Whether `origin/<name>` is here (as fetched).
    pub fn has_remote_branch(&self, name: &str) -> bool {
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
