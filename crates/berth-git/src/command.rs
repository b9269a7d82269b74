//! Running the `git` binary: a clean git environment (no inherited `GIT_DIR`,
//! `GIT_WORK_TREE`, `GIT_INDEX_FILE` or `GIT_COMMON_DIR`), no prompts, and failures reported
//! with the command and git's own message.

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
    cmd
}

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
