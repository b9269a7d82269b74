//! Progress of long work, for a person watching a terminal. A front end that has one (the CLI,
//! when standard error is a terminal and no `--json` was asked) installs a [`Reporter`] once
//! with [`report_to`]; nothing is reported otherwise, and servers never install one.
//!
//! What reports: a worktree checkout that takes over a second (the count of the files written,
//! by berth's own checkout or git's `checkout --progress`, shown after `GIT_PROGRESS_DELAY`), and any loop over
//! items (garbage collection, imports, a store migration, spare
//! checkouts) through [`step`] and [`finish`].

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};

use crate::command::command;
use crate::{GitError, Result};

/// Shows progress: tasks by their label, each moved to `done` of `total` steps (0: unknown),
/// then finished.
pub trait Reporter: Send + Sync {
    fn step(&self, label: &str, done: u64, total: u64);
    fn finish(&self, label: &str);
}

static REPORTER: OnceLock<Arc<dyn Reporter>> = OnceLock::new();

/// Installs the reporter of this process (the first call wins).
pub fn report_to(reporter: Arc<dyn Reporter>) {
    let _ = REPORTER.set(reporter);
}

/// Whether anyone watches.
pub fn reporting() -> bool {
    REPORTER.get().is_some()
}

/// Moves the task `label` to `done` of `total` (0: unknown), when anyone watches.
pub fn step(label: &str, done: u64, total: u64) {
    if let Some(r) = REPORTER.get() {
        r.step(label, done, total);
    }
}

/// Ends the task `label`.
pub fn finish(label: &str) {
    if let Some(r) = REPORTER.get() {
        r.finish(label);
    }
}

/// Seconds a checkout runs before its progress shows (`GIT_PROGRESS_DELAY`).
const CHECKOUT_DELAY_SECS: &str = "1";

/// How long a checkout runs before its progress shows: the person's `GIT_PROGRESS_DELAY`, as
/// git reads it, else [`CHECKOUT_DELAY_SECS`]. For berth's own checkout (`fill.rs`).
pub(crate) fn checkout_delay() -> std::time::Duration {
    let secs = std::env::var("GIT_PROGRESS_DELAY")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(1);
    std::time::Duration::from_secs(secs)
}

/// `git checkout` in `dir` with `args`, its progress (git's "Updating files: n% (x/y)" lines)
/// handed to the reporter as it comes. Fails as `run` does, with git's message.
pub(crate) fn checkout_with_progress(dir: &Path, args: &[&str], label: &str) -> Result<()> {
    let mut cmd = command(dir);
    // A delay of the person's own (`GIT_PROGRESS_DELAY`) is theirs to choose.
    if std::env::var_os("GIT_PROGRESS_DELAY").is_none() {
        cmd.env("GIT_PROGRESS_DELAY", CHECKOUT_DELAY_SECS);
    }
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(GitError::Spawn)?;
    let mut stderr = child.stderr.take().expect("piped");
    let mut shown = false;
    let mut said = Vec::new();
    let mut line = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = match stderr.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b != b'\r' && b != b'\n' {
                line.push(b);
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            match counts(&text) {
                Some((done, total)) => {
                    shown = true;
                    step(label, done, total);
                }
                None if !text.trim().is_empty() => {
                    said.extend_from_slice(&line);
                    said.push(b'\n');
                }
                None => {}
            }
            line.clear();
        }
    }
    said.extend_from_slice(&line);
    let status = child.wait().map_err(GitError::Spawn)?;
    if shown {
        finish(label);
    }
    if status.success() {
        return Ok(());
    }
    Err(GitError::Command {
        command: args.join(" "),
        message: String::from_utf8_lossy(&said).trim().to_owned(),
    })
}

/// The counts in a progress line of git's: `Updating files:  45% (9000/20000)` → (9000, 20000).
fn counts(line: &str) -> Option<(u64, u64)> {
    let inner = line.rsplit_once('(')?.1;
    let inner = inner.split(')').next()?;
    let (done, total) = inner.split_once('/')?;
    Some((done.trim().parse().ok()?, total.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gits_progress_lines_are_read() {
        assert_eq!(
            counts("Updating files:  45% (9000/20000)"),
            Some((9000, 20000))
        );
        assert_eq!(
            counts("Updating files: 100% (20000/20000), done."),
            Some((20000, 20000))
        );
        assert_eq!(counts("fatal: not a git repository"), None);
        assert_eq!(counts("HEAD is now at 1234 (x)"), None);
    }
}
