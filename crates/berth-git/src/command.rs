//! Running the `git` binary: a clean git environment (no inherited `GIT_DIR`,
//! `GIT_WORK_TREE`, `GIT_INDEX_FILE` or `GIT_COMMON_DIR`), no prompts, no hooks and no
//! fsmonitor, and failures reported with the command and git's own message.
//!
//! **No code from a workspace runs through berth's git.** An agent writes its worktree, and a
//! repository's config may point into it (`core.hooksPath = .husky`, an fsmonitor script), so
//! every command berth runs sets `core.hooksPath` to an empty place and turns `core.fsmonitor`
//! off, through `GIT_CONFIG_COUNT` (the command line's `-c`, for every subcommand alike);
//! diffs are taken without external diff drivers or textconv filters.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::{GitError, Repo, Result};

impl Repo {
    pub(crate) fn git<I, S>(&self, args: I) -> Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run(&self.root, args)
    }

    pub(crate) fn succeeds<I, S>(&self, args: I) -> bool
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        git_output(&self.root, args).is_ok_and(|o| o.status.success())
    }
}

pub(crate) fn command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .stdin(Stdio::null());
    for (i, (key, value)) in NO_WORKSPACE_CODE.iter().enumerate() {
        cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
            .env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }
    cmd.env("GIT_CONFIG_COUNT", NO_WORKSPACE_CODE.len().to_string());
    cmd
}

/// The config every git command berth runs gets, above every config file.
const NO_WORKSPACE_CODE: [(&str, &str); 2] =
    [("core.hooksPath", "/dev/null"), ("core.fsmonitor", "false")];

pub(crate) fn git_output<I, S>(dir: &Path, args: I) -> Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    if !dir.exists() {
        return Err(GitError::NotARepository(dir.to_owned()));
    }
    command(dir).args(args).output().map_err(GitError::Spawn)
}

/// Runs git in `dir`; stdout on success, the command and git's message on failure.
pub(crate) fn run<I, S>(dir: &Path, args: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<S> = args.into_iter().collect();
    let out = git_output(dir, &args)?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    Err(GitError::Command {
        command: shown.join(" "),
        message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hook and an fsmonitor the repository's config points into the worktree (as husky
    /// does), which an agent can write: plain git runs them, berth's git never does.
    #[test]
    fn no_hook_or_fsmonitor_from_the_worktree_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(repo)
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::create_dir(repo.join(".husky")).unwrap();
        let marker = repo.join("ran");
        for (name, what) in [("post-commit", "hook"), ("fsmonitor", "fsmonitor")] {
            let script = repo.join(".husky").join(name);
            std::fs::write(
                &script,
                format!("#!/bin/sh\necho {what} >> {}\n", marker.display()),
            )
            .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        git(&["config", "core.hooksPath", ".husky"]);
        git(&["config", "core.fsmonitor", ".husky/fsmonitor"]);
        run(
            repo,
            [
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "by berth",
            ],
        )
        .unwrap();
        run(repo, ["status", "--porcelain"]).unwrap();
        assert!(
            !marker.exists(),
            "{}",
            std::fs::read_to_string(&marker).unwrap()
        );
        // The same commit by plain git runs the hook: the test would see one.
        git(&["commit", "-q", "--allow-empty", "-m", "by git"]);
        assert!(std::fs::read_to_string(&marker).unwrap().contains("hook"));
    }
}
