//! Which skills a workspace's agent is offered: the roots of [`berth_skills`] for one
//! workspace, in the order a later one replaces an earlier. The rules of a skill itself (its
//! `SKILL.md`, its files, the bound of a listing) are `berth_skills`'s.

use std::path::PathBuf;

use berth_core::Workspace;
pub use berth_skills::{
    LISTING_CHARS, Listing, Root, SKILL_MD, Skill, SkillError, Skills, Source, Warning,
};

use crate::Ops;
use crate::error::{Error, ErrorKind, Result, blocking};

impl Ops {
    /// The roots of a workspace's skills: the person's, the workspace's `skills/` folder (in
    /// a store that keeps folders), then its worktree's `.agents/skills/` and `.claude/skills/`.
    /// With no workspace, the person's alone.
    pub fn skill_roots(&self, ws: Option<&Workspace>) -> Vec<Root> {
        let mut roots = Vec::new();
        if let Some(config) = user_config_dir() {
            roots.push(Root {
                source: Source::User,
                path: config.join("berth").join("skills"),
            });
        }
        let Some(ws) = ws else { return roots };
        if let Some(dir) = self.manager.workspaces().workspace_dir(&ws.id) {
            roots.push(Root {
                source: Source::Workspace,
                path: dir.join("skills"),
            });
        }
        if let Some(git) = &ws.git {
            for folder in [".agents/skills", ".claude/skills"] {
                roots.push(Root {
                    source: Source::Worktree,
                    path: git.worktree.join(folder),
                });
            }
        }
        roots
    }

    /// The skills a workspace's agent is offered, read now (a changed skill is seen at once).
    pub async fn skills(&self, ws: Option<&Workspace>) -> Result<Skills> {
        let roots = self.skill_roots(ws);
        // Most turns have no skill: their folders are missing or empty (every workspace has a
        // `skills/` folder). A look at each, on this thread, says there is nothing to gather,
        // where the blocking pool would cost every turn two thread switches. Anything in one,
        // and the whole gathering reads them all.
        if roots.iter().all(|root| nothing_in(&root.path)) {
            return Ok(Skills::default());
        }
        blocking(move || Ok(berth_skills::gather(&roots))).await
    }
}

/// Whether a root of skills holds nothing `gather` would read or warn of: it is missing, or a
/// folder (not a link to one) with no entry.
fn nothing_in(root: &std::path::Path) -> bool {
    match std::fs::symlink_metadata(root) {
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        Ok(meta) if meta.is_dir() => {
            std::fs::read_dir(root).is_ok_and(|mut entries| entries.next().is_none())
        }
        Ok(_) => false,
    }
}

impl From<SkillError> for Error {
    fn from(e: SkillError) -> Self {
        let kind = match &e {
            SkillError::NotFound { .. } | SkillError::NoSuchFile { .. } => ErrorKind::NotFound,
            SkillError::Malformed { .. } => ErrorKind::Invalid,
            SkillError::Io { .. } => ErrorKind::Io,
        };
        Error::rule(kind, e.to_string())
    }
}

/// `$XDG_CONFIG_HOME`, else `~/.config`: where the person's own berth files are (their memory,
/// their skills); `None` with neither set.
pub fn user_config_dir() -> Option<PathBuf> {
    let set = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    set("XDG_CONFIG_HOME").or_else(|| set("HOME").map(|h| h.join(".config")))
}

#[cfg(test)]
mod tests {
    use super::nothing_in;

    #[test]
    fn only_a_missing_root_or_an_empty_folder_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = |name: &str| dir.path().join(name);
        assert!(nothing_in(&root("missing")));
        std::fs::create_dir(root("empty")).unwrap();
        assert!(nothing_in(&root("empty")));
        // Anything else is for the gathering to read, or to warn of.
        std::fs::create_dir_all(root("one").join("review")).unwrap();
        assert!(!nothing_in(&root("one")));
        std::os::unix::fs::symlink(root("empty"), root("link")).unwrap();
        assert!(!nothing_in(&root("link")));
        std::fs::write(root("file"), "").unwrap();
        assert!(!nothing_in(&root("file")));
    }
}
