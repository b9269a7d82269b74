//! Running the `git` binary: a clean git environment (no inherited `GIT_DIR`,
//! `GIT_WORK_TREE`, `GIT_INDEX_FILE` or `GIT_COMMON_DIR`), no prompts, nothing run from a
//! workspace, and failures reported with the command and git's own message.
//!
//! **No code from a workspace runs through berth's git.** An agent writes its worktree, and a
//! repository's config may point into it (`core.hooksPath = .husky`, an fsmonitor script), so
//! every command berth runs gets [`NO_WORKSPACE_CODE`] through `GIT_CONFIG_COUNT` (the command
//! line's `-c`, above every config file, for every subcommand and every git it starts): no
//! hook, no fsmonitor, no recursion into submodules, submodules shown as commits only, and the
//! file transport only where berth asks for it; and file names in git's output quoted with
//! `core.quotePath` on. Diffs are taken without external diff drivers or textconv filters
//! (`--no-ext-diff --no-textconv`).
//!
//! An agent can also make a repository of its own inside its worktree, whose config (a
//! filter, a textconv driver, an fsmonitor) it writes: git runs that config whenever it looks
//! inside the nested repository, as `git status` does for a gitlink to learn whether it is
//! dirty, and `git add --all` too. `.gitmodules`, which the agent writes as well, can ask for
//! that over any config, so the commands that compare a worktree's files pass
//! [`IGNORE_NESTED`], and `git add` never gets a gitlink's path (`remove::stage_all`). The
//! only repositories berth's git looks inside are submodules whose git folder is the
//! repository's own (`status::dirty_submodules`), which an agent cannot write.

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

/// The config every git command berth runs gets, above every config file (but below a
/// `-c` of its own command line, which is how `submodules.rs` allows the file transport for
/// its own module store).
const NO_WORKSPACE_CODE: [(&str, &str); 8] = [
    // No hook and no fsmonitor, wherever the config points.
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    // No checkout, reset or merge goes on into a submodule (which a gitlink committed from
    // a worktree may be: an agent's own repository).
    ("submodule.recurse", "false"),
    // A comparison of a worktree's files never asks a submodule whether it is dirty (which
    // runs git inside it), where `.gitmodules` does not say otherwise; `IGNORE_NESTED` is
    // the flag that overrides `.gitmodules` too.
    ("diff.ignoreSubmodules", "dirty"),
    ("status.submoduleSummary", "false"),
    // A submodule in a diff is its commit, never a diff run inside it.
    ("diff.submodule", "short"),
    // The file transport for what the person (or berth) asks for, never for a URL git
    // takes from a repository's `.gitmodules` (`GIT_PROTOCOL_FROM_USER=0`), whatever the
    // person's own config allows.
    ("protocol.file.allow", "user"),
    // A file's name in git's own output (a patch's headers, a message) quoted as berth
    // quotes one (berth-core's `shown`): every byte past ASCII in octal too, so a bidi
    // override in an agent's file name reaches no page or terminal whatever the person's
    // config says.
    ("core.quotePath", "true"),
];

/// For a command that compares a worktree's files (`status`): a submodule counts as changed
/// when its commit moved, and is never asked whether it is dirty, which would run git inside
/// it with its own config. Given on the command line, it overrides `.gitmodules`' `ignore`.
pub(crate) const IGNORE_NESTED: &str = "--ignore-submodules=dirty";

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
    run_with_git_dir(dir, None, args)
}

/// [`run`], with the git folder `git_dir` when given (`GIT_DIR`, and `dir` as the work tree)
/// rather than the one `dir/.git` leads to, which may have changed since it was checked.
pub(crate) fn run_with_git_dir<I, S>(dir: &Path, git_dir: Option<&Path>, args: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<S> = args.into_iter().collect();
    if !dir.exists() {
        return Err(GitError::NotARepository(dir.to_owned()));
    }
    let mut cmd = command(dir);
    if let Some(git_dir) = git_dir {
        cmd.env("GIT_DIR", git_dir).env("GIT_WORK_TREE", dir);
    }
    let out = cmd.args(&args).output().map_err(GitError::Spawn)?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    let (command, message) = (
        shown.join(" "),
        String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    );
    // A failure a caller may well expect (a branch that does not exist yet): debug, not more;
    // the caller decides what it means.
    tracing::debug!(dir = %dir.display(), %command, status = %out.status, "git failed: {message}");
    Err(GitError::Command { command, message })
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

    /// A submodule URL from a repository's `.gitmodules` (a local path) never reaches git's
    /// file transport through berth's git, even where the person's own config allows it
    /// everywhere; berth's own `-c protocol.file.allow=always` (its module store) still does.
    #[test]
    fn the_file_transport_is_only_for_what_berth_asks() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let global = dir.join("gitconfig");
        std::fs::write(
            &global,
            "[user]\n\tname = t\n\temail = t@t\n[protocol \"file\"]\n\tallow = always\n",
        )
        .unwrap();
        let git = |at: &Path, args: &[&str]| {
            Command::new("git")
                .env("GIT_CONFIG_GLOBAL", &global)
                .args(args)
                .current_dir(at)
                .output()
                .unwrap()
        };
        let ok = |at: &Path, args: &[&str]| {
            let out = git(at, args);
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        for name in ["lib", "project"] {
            let at = dir.join(name);
            std::fs::create_dir(&at).unwrap();
            ok(&at, &["init", "-q"]);
            ok(&at, &["commit", "-q", "--allow-empty", "-m", name]);
        }
        let project = dir.join("project");
        ok(&project, &["submodule", "add", "-q", "../lib", "lib"]);
        ok(&project, &["commit", "-q", "-m", "lib"]);
        for (clone, berths) in [("plain", false), ("berth", true)] {
            ok(dir, &["clone", "-q", "project", clone]);
            let args = ["submodule", "update", "--init", "--quiet"];
            let cloned = match berths {
                false => git(&dir.join(clone), &args).status.success(),
                true => command(&dir.join(clone))
                    .env("GIT_CONFIG_GLOBAL", &global)
                    .args(args)
                    .output()
                    .unwrap()
                    .status
                    .success(),
            };
            assert_eq!(cloned, !berths, "{clone}");
        }
        // What `submodules.rs` does for the repository's own module store.
        let store = command(&dir.join("berth"))
            .env("GIT_CONFIG_GLOBAL", &global)
            .args(["-c", "protocol.file.allow=always"])
            .args(["submodule", "update", "--init", "--quiet"])
            .output()
            .unwrap();
        assert!(
            store.status.success(),
            "{}",
            String::from_utf8_lossy(&store.stderr)
        );
    }
}
