//! Submodules of a new worktree, checked out from what the main repository already has.
//!
//! In a linked worktree git keeps a submodule's repository under the worktree's own git folder
//! (`<common>/worktrees/<wt>/modules/<name>`), so `git submodule update --init` would clone it
//! again from its URL, over the network. The main repository usually has it already, in
//! `<common>/modules/<name>`: each submodule is cloned from there instead (a local clone,
//! hard-linked objects), and its `origin` is then set to the submodule's real URL, so the
//! result is what `git submodule update --init` makes, without the network. A submodule the
//! main repository does not have is cloned from its URL as git would (and git's own rules
//! apply, such as refusing `file://` URLs from `.gitmodules`). Nested submodules are done the
//! same way, from the module store of the submodule that holds them.

use std::path::{Path, PathBuf};

use crate::command::{run, run_with_git_dir};
use crate::{GitError, Repo, Result};

impl Repo {
    /// Checks out every submodule of the new worktree at `worktree`, recursively. Returns the
    /// paths checked out (nested ones as `outer/inner`). Fails on the first submodule git
    /// cannot check out, naming it; the caller rolls the worktree back.
    pub fn init_submodules(&self, worktree: &Path) -> Result<Vec<String>> {
        let mut done = Vec::new();
        init_in(worktree, Some(&self.common_dir()), "", &mut done)?;
        Ok(done)
    }
}

/// The submodules `.gitmodules` in `dir` declares, as (name, path); read with the git folder
/// `git_dir` when given (see [`run_with_git_dir`]).
pub(crate) fn declared(dir: &Path, git_dir: Option<&Path>) -> Result<Vec<(String, String)>> {
    if !dir.join(".gitmodules").is_file() {
        return Ok(Vec::new());
    }
    let out = match run_with_git_dir(
        dir,
        git_dir,
        [
            "config",
            "--file",
            ".gitmodules",
            "--null",
            "--get-regexp",
            r"^submodule\..*\.path$",
        ],
    ) {
        Ok(out) => out,
        // No entries at all: git exits 1 with nothing to say.
        Err(GitError::Command { message, .. }) if message.is_empty() => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    // -z: `key\nvalue\0` per entry.
    Ok(out
        .split('\0')
        .filter_map(|entry| {
            let (key, path) = entry.split_once('\n')?;
            let name = key.strip_prefix("submodule.")?.strip_suffix(".path")?;
            Some((name.to_owned(), path.to_owned()))
        })
        .collect())
}

/// Checks out the submodules of the checkout at `dir`; `store` is the git folder whose
/// `modules/` holds the main repository's copies of them, where it has them.
fn init_in(dir: &Path, store: Option<&Path>, prefix: &str, done: &mut Vec<String>) -> Result<()> {
    for (name, path) in declared(dir, None)? {
        // A submodule the superproject does not record (a stale `.gitmodules` entry) is
        // nothing to check out.
        let recorded = run(dir, ["ls-files", "--stage", "--", &path])?;
        if !recorded.starts_with("160000 ") {
            continue;
        }
        let failed = |message: String| GitError::Submodule {
            path: format!("{prefix}{path}"),
            message,
        };
        // Its URL into this repository's config (relative URLs resolved, as git does).
        run(dir, ["submodule", "init", "--", &path]).map_err(|e| failed(e.to_string()))?;
        let local: Option<PathBuf> = store
            .map(|s| s.join("modules").join(&name))
            .filter(|m| m.join("HEAD").is_file());
        let mut checked_out = false;
        if let Some(local) = &local {
            // Our own path, never a URL from the repository: safe to allow the file
            // transport for this one clone.
            let url = format!("submodule.{name}.url={}", local.display());
            let from_store = run(
                dir,
                [
                    "-c",
                    "protocol.file.allow=always",
                    "-c",
                    &url,
                    "submodule",
                    "update",
                    "--",
                    &path,
                ],
            );
            if from_store.is_ok() {
                // The clone's origin is the store; make it the submodule's real URL, as a
                // clone from there would have it.
                if let Ok(real) = run(dir, ["config", "--get", &format!("submodule.{name}.url")]) {
                    let _ = run(
                        &dir.join(&path),
                        ["remote", "set-url", "origin", real.trim()],
                    );
                }
                checked_out = true;
            }
        }
        if !checked_out {
            // Not in the main repository (or it lacks the commit): from its URL.
            run(dir, ["submodule", "update", "--", &path]).map_err(|e| failed(e.to_string()))?;
        }
        done.push(format!("{prefix}{path}"));
        init_in(
            &dir.join(&path),
            local.as_deref(),
            &format!("{prefix}{path}/"),
            done,
        )?;
    }
    Ok(())
}
