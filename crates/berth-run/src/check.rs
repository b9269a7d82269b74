//! The run's check command (`--check "cargo test"`), in each worktree once its agent is done:
//! `sh -c`, in its own process group, killed with everything it started when it times out
//! (berth-git's setup runner, which `[git] setup` commands use too).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

/// How a check went.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CheckResult {
    pub command: String,
    pub passed: bool,
    /// How it failed (`exited with status 101`, `timed out after 600 s`), when it did.
    pub outcome: Option<String>,
    /// The end of its output, when it failed.
    pub output: Option<String>,
    pub elapsed_ms: u64,
}

/// Runs `command` in `dir`, with the workspace's `env` (its ports).
pub async fn run(
    dir: PathBuf,
    command: String,
    env: Vec<(String, String)>,
    timeout: Duration,
) -> CheckResult {
    let started = Instant::now();
    let shown = command.clone();
    let done = tokio::task::spawn_blocking(move || {
        berth_git::run_setup(&dir, std::slice::from_ref(&command), &env, timeout)
    })
    .await;
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let (passed, outcome, output) = match done {
        Ok(Ok(())) => (true, None, None),
        Ok(Err(berth_git::SetupError::Failed {
            outcome, output, ..
        })) => (false, Some(outcome), Some(output)),
        Ok(Err(e)) => (false, Some(e.to_string()), None),
        Err(e) => (false, Some(format!("its task failed: {e}")), None),
    };
    CheckResult {
        command: shown,
        passed,
        outcome,
        output,
        elapsed_ms,
    }
}
