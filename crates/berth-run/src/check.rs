//! The run's check command (`--check "cargo test"`), in each worktree once its agent is done:
//! `sh -c`, in its own process group, killed with everything it started when it times out
//! (berth-git's setup runner, which `[git] setup` commands use too). It runs what the agent
//! left, so it is confined as the agent's commands are (berth-sandbox), without the API keys
//! in berth's environment.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use berth_sandbox::{Sandbox, Subject};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// How a check went.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CheckResult {
    pub command: String,
    pub passed: bool,
    /// It did not run, or was cut short, because its agent or the run was stopped: neither
    /// passed nor failed, and shown as `not run`.
    #[serde(default)]
    pub not_run: bool,
    /// How it failed (`exited with status 101`, `timed out after 600 s`), when it did.
    pub outcome: Option<String>,
    /// The end of its output, when it failed.
    pub output: Option<String>,
    pub elapsed_ms: u64,
}

impl CheckResult {
    /// How it went, in a word: `passed`, `failed` or `not run`.
    pub fn verdict(&self) -> &'static str {
        match (self.passed, self.not_run) {
            (true, _) => "passed",
            (false, true) => "not run",
            (false, false) => "failed",
        }
    }
}

/// Runs `command` in `dir`, with the workspace's `env` (its ports); `stop` cuts it short (a
/// stopped run does not wait for its checks).
pub async fn run(
    dir: PathBuf,
    command: String,
    env: Vec<(String, String)>,
    timeout: Duration,
    sandbox: berth_ops::Result<Sandbox>,
    stop: CancellationToken,
) -> CheckResult {
    let started = Instant::now();
    let shown = command.clone();
    if stop.is_cancelled() {
        return CheckResult {
            command: shown,
            passed: false,
            not_run: true,
            outcome: Some("not run: the agent was stopped".to_owned()),
            output: None,
            elapsed_ms: 0,
        };
    }
    let confinement = sandbox.map_err(|e| e.to_string()).and_then(|s| {
        s.confine(None, &Subject::Command)
            .map_err(|e| e.to_string())
    });
    let confinement = match confinement {
        Ok(c) => c,
        Err(e) => {
            return CheckResult {
                command: shown,
                passed: false,
                not_run: false,
                outcome: Some(e),
                output: None,
                elapsed_ms: 0,
            };
        }
    };
    let stopped = stop.clone();
    let done = tokio::task::spawn_blocking(move || {
        let result = berth_git::run_one(
            &dir,
            &command,
            &env,
            timeout,
            &|cmd| {
                for (name, _) in std::env::vars_os() {
                    if name
                        .to_str()
                        .is_some_and(berth_agent::tools::command::is_secret_name)
                    {
                        cmd.env_remove(name);
                    }
                }
                if let Some(c) = &confinement {
                    c.apply_std(cmd);
                }
            },
            &|| stop.is_cancelled(),
        );
        (result, confinement)
    })
    .await;
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let (passed, outcome, output) = match done {
        Ok((Ok(()), _)) => (true, None, None),
        Ok((
            Err(berth_git::SetupError::Failed {
                outcome,
                mut output,
                ..
            }),
            confinement,
        )) => {
            if let Some(note) = confinement
                .as_ref()
                .and_then(|c| berth_sandbox::explain(&output, c))
            {
                output.push('\n');
                output.push_str(&note);
            }
            (false, Some(outcome), Some(output))
        }
        Ok((Err(berth_git::SetupError::Spawn { source, .. }), Some(c))) => {
            (false, Some(c.spawn_error("sh", &source)), None)
        }
        Ok((Err(e), _)) => (false, Some(e.to_string()), None),
        Err(e) => (false, Some(format!("its task failed: {e}")), None),
    };
    // Cut short by a stop: it did not finish, so it neither passed nor failed.
    let not_run = !passed && stopped.is_cancelled();
    CheckResult {
        command: shown,
        passed,
        not_run,
        outcome: match not_run {
            true => Some("not run: stopped before it finished".to_owned()),
            false => outcome,
        },
        output,
        elapsed_ms,
    }
}
