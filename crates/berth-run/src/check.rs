//! The run's check command (`--check "cargo test"`), in each worktree as soon as its agent
//! ends done having changed something: `sh -c`, in its own process group, killed with
//! everything it started when it times out or is stopped (berth-git's `run_command`, which
//! `[git] setup` commands run through too). It runs what the agent left, so it
//! is confined as the agent's commands are (berth-sandbox), without the API keys in berth's
//! environment. Its output, both streams as one in the order written, is kept bounded
//! (`output.rs`) in the run's folder on the machine that ran it, `agent-N.check`, which
//! `berth run logs RUN --agent N --check` prints; the record quotes its last lines.

mod output;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_git::Ended;
use berth_sandbox::{Confinement, Sandbox, Subject};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use output::{HEAD as KEPT_HEAD, KeptOutput, QUOTED_LINES, TAIL as KEPT_TAIL};

/// How a check went.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CheckResult {
    pub command: String,
    pub passed: bool,
    /// It did not run (its agent did not finish, or changed nothing), or was cut short by a
    /// stop: neither passed nor failed, and shown as `not run`, with why in `outcome`.
    #[serde(default)]
    pub not_run: bool,
    /// How it failed (`exit 101`, `killed by signal 9`, `timed out after 600 s`), or why it
    /// did not run.
    pub outcome: Option<String>,
    /// The last lines of its output (at most [`QUOTED_LINES`]), when it failed; the whole of
    /// it is kept beside the run's record.
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

    /// How it went, in a few words: `passed`, `failed (exit 1)`, `not run (the agent
    /// changed nothing)`.
    pub fn described(&self) -> String {
        match (self.passed, self.outcome.as_deref()) {
            (true, _) | (false, None) => self.verdict().to_owned(),
            (false, Some(why)) => {
                let why = why.strip_prefix("not run: ").unwrap_or(why);
                format!("{} ({why})", self.verdict())
            }
        }
    }

    /// A check that was not run, and why (`the agent failed`).
    pub fn not_run(command: &str, why: impl Into<String>) -> CheckResult {
        CheckResult {
            command: command.to_owned(),
            passed: false,
            not_run: true,
            outcome: Some(why.into()),
            output: None,
            elapsed_ms: 0,
        }
    }

    fn failed(command: String, why: String, elapsed_ms: u64) -> CheckResult {
        CheckResult {
            command,
            passed: false,
            not_run: false,
            outcome: Some(why),
            output: None,
            elapsed_ms,
        }
    }
}

/// An exit status in a few words: `exit 1`, `killed by signal 9`.
fn status_words(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// Runs `command` in `dir`, with the workspace's `env` (its ports); `stop` cuts it short (a
/// stopped run does not wait for its checks). Its output is kept in `keep` when given.
#[tracing::instrument(name = "run.check", skip_all, fields(dir = %dir.display()))]
pub async fn run(
    dir: PathBuf,
    command: String,
    env: Vec<(String, String)>,
    timeout: Duration,
    sandbox: berth_ops::Result<Sandbox>,
    stop: CancellationToken,
    keep: Option<PathBuf>,
) -> CheckResult {
    let started = Instant::now();
    if stop.is_cancelled() {
        return CheckResult::not_run(&command, "the agent was stopped");
    }
    let confinement = sandbox.map_err(|e| e.to_string()).and_then(|s| {
        s.confine(None, &Subject::Command)
            .map_err(|e| e.to_string())
    });
    let confinement = match confinement {
        Ok(c) => c,
        Err(e) => return CheckResult::failed(command, e, 0),
    };
    let shown = command.clone();
    let stopped = stop.clone();
    let done = tokio::task::spawn_blocking(move || {
        let kept = Arc::new(Mutex::new(KeptOutput::default()));
        let writing = kept.clone();
        let sink = Box::new(move |bytes: &[u8]| {
            writing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(bytes)
        });
        let prepare = |cmd: &mut std::process::Command| prepare(cmd, confinement.as_ref());
        let ran = berth_git::run_command(
            &dir,
            &command,
            &env,
            timeout,
            &prepare,
            &|| stop.is_cancelled(),
            sink,
        )
        .map(|ended| {
            let kept = std::mem::take(&mut *kept.lock().unwrap_or_else(|e| e.into_inner()));
            (ended, kept)
        });
        (ran, confinement)
    })
    .await;
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let (ran, confinement) = match done {
        Ok(done) => done,
        Err(e) => return CheckResult::failed(shown, format!("its task failed: {e}"), elapsed_ms),
    };
    let (ended, kept) = match ran {
        Ok(ran) => ran,
        Err(e) => {
            let why = match &confinement {
                Some(c) => c.spawn_error("sh", &e),
                None => format!("cannot start sh: {e}"),
            };
            return CheckResult::failed(shown, why, elapsed_ms);
        }
    };
    if let Some(path) = &keep {
        keep_output(path, &kept);
    }
    let why = match ended {
        Ended::Exited(status) if status.success() => {
            return CheckResult {
                command: shown,
                passed: true,
                not_run: false,
                outcome: None,
                output: None,
                elapsed_ms,
            };
        }
        // Cut short by a stop: it did not finish, so it neither passed nor failed.
        _ if stopped.is_cancelled() => {
            return CheckResult::not_run(&shown, "stopped before it finished");
        }
        Ended::Exited(status) => status_words(status),
        Ended::TimedOut => format!("timed out after {} s", timeout.as_secs()),
        Ended::Stopped => "stopped before it finished".to_owned(),
    };
    CheckResult {
        command: shown,
        passed: false,
        not_run: false,
        outcome: Some(why),
        output: Some(quoted_output(&kept, confinement.as_ref())),
        elapsed_ms,
    }
}

/// The check's process as berth starts it: without berth's secrets in its environment, and
/// confined when the sandbox is on.
fn prepare(cmd: &mut std::process::Command, confinement: Option<&Confinement>) {
    for (name, _) in std::env::vars_os() {
        if name
            .to_str()
            .is_some_and(berth_agent::tools::command::is_secret_name)
        {
            cmd.env_remove(name);
        }
    }
    if let Some(c) = confinement {
        c.apply_std(cmd);
    }
}

/// The last lines of a failed check's output, with what the sandbox may have had to do with
/// its failure.
fn quoted_output(kept: &KeptOutput, confinement: Option<&Confinement>) -> String {
    let mut output = kept.last_lines(QUOTED_LINES);
    if let Some(note) = confinement.and_then(|c| berth_sandbox::explain(&output, c)) {
        output.push('\n');
        output.push_str(&note);
    }
    output
}

/// A check's kept output (`agent-N.check`), as written: its head, the line saying what was
/// cut, its tail; `None` when there is none. A file grown past what berth writes is read to
/// that size only. The bytes as the check wrote them: a front end shows them through
/// berth-core's `shown`.
pub fn read_kept(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read as _;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take((KEPT_HEAD + KEPT_TAIL + 4096) as u64)
        .read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// Writes a check's output where the run keeps it, atomically; a failure to is said in the
/// supervisor's log and costs the check nothing.
fn keep_output(path: &Path, kept: &KeptOutput) {
    if let Some(dir) = path.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        tracing::warn!("cannot keep the check's output in {}: {e}", dir.display());
        return;
    }
    if let Err(e) = berth_confined::write_atomic(path, &kept.bytes()) {
        tracing::warn!("cannot keep the check's output in {}: {e}", path.display());
    }
}
