//! Preparing a new worktree from berth's own config: copying untracked files (`.env` and the
//! like) from the main checkout, and running setup commands with a timeout. The commands come
//! only from berth's config, never from a file in the repository, so cloning a repository
//! cannot make berth run anything.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Component, Path};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("[git] copy entry {0:?} must be a relative path inside the repository")]
    BadCopyPath(String),
    #[error("cannot copy {path} into the worktree: {source}")]
    Copy {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("setup command `{command}` could not start: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("setup command `{command}` {outcome}; its output ends with:\n{output}")]
    Failed {
        command: String,
        outcome: String,
        output: String,
    },
}

/// What [`copy_files`] did with each entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Copied {
    pub copied: Vec<String>,
    /// Entries the main checkout does not have: skipped, for the caller to warn about.
    pub missing: Vec<String>,
}

/// Copies each listed file or folder that exists in `repo` to the same place in `worktree`.
/// Missing entries are skipped and reported (a `.env` may be optional, or misspelt); entries
/// that escape are refused.
pub fn copy_files(repo: &Path, worktree: &Path, entries: &[String]) -> Result<Copied, SetupError> {
    let mut report = Copied::default();
    for entry in entries {
        let rel = Path::new(entry);
        let safe = !entry.is_empty()
            && rel
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !safe {
            return Err(SetupError::BadCopyPath(entry.clone()));
        }
        let from = repo.join(rel);
        let Ok(meta) = from.symlink_metadata() else {
            report.missing.push(entry.clone());
            continue;
        };
        // Never follow a link out of the repository.
        if meta.file_type().is_symlink() {
            return Err(SetupError::BadCopyPath(entry.clone()));
        }
        let to = worktree.join(rel);
        copy_tree(&from, &to).map_err(|source| SetupError::Copy {
            path: entry.clone(),
            source,
        })?;
        report.copied.push(entry.clone());
    }
    Ok(report)
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if from.is_dir() {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            if entry.file_type()?.is_symlink() {
                continue;
            }
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else {
        std::fs::copy(from, to).map(|_| ())
    }
}

/// Runs each command with `sh -c` in `worktree`, in order, each within `timeout`, with `env`
/// set on top of berth's own environment (the workspace's ports, say). Output is captured,
/// never passed through (berth's stdout may be a protocol stream); on failure the error
/// carries its tail.
pub fn run_setup(
    worktree: &Path,
    commands: &[String],
    env: &[(String, String)],
    timeout: Duration,
) -> Result<(), SetupError> {
    for command in commands {
        run_one(worktree, command, env, timeout)?;
    }
    Ok(())
}

/// How a command [`run_command`] ran ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exited(std::process::ExitStatus),
    /// Killed, with all it started, at its timeout.
    TimedOut,
    /// Killed, with all it started, because `stopped` said so.
    Stopped,
}

/// Where [`run_command`] hands a command's output, piece by piece, on its reading thread.
pub type OutputSink = Box<dyn FnMut(&[u8]) + Send>;

/// How long output is still read after the command ended: what it started in the
/// background may hold the pipe open (confined, it dies with its PID namespace).
const DRAIN: Duration = Duration::from_secs(2);

/// Runs `sh -c command` in `dir` with `env` on top of berth's environment, `prepare` applied
/// just before it starts (a run's check is confined there; the user's own setup commands are
/// not), in its own process group: killed with everything it started at `timeout`, or when
/// `stopped` says so (looked at as often). Its standard output and error are one pipe, handed
/// to `output` in the order written, on a thread of its own; `Err` when it cannot start.
pub fn run_command(
    dir: &Path,
    command: &str,
    env: &[(String, String)],
    timeout: Duration,
    prepare: &dyn Fn(&mut Command),
    stopped: &dyn Fn() -> bool,
    mut output: OutputSink,
) -> std::io::Result<Ended> {
    let (mut reader, writer) = std::io::pipe()?;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        // Its own process group, so a timeout kills what the command started too.
        .process_group(0);
    prepare(&mut cmd);
    let spawned = cmd.spawn();
    // The parent's copies of the pipe's writing end go with the command: the reader sees
    // the end of the output once the command's processes are gone.
    drop(cmd);
    let mut child = spawned?;
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => output(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = done_tx.send(());
    });
    let started = Instant::now();
    let ended = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ended::Exited(status),
            Ok(None) if started.elapsed() >= timeout || stopped() => {
                let why = match stopped() {
                    true => Ended::Stopped,
                    false => Ended::TimedOut,
                };
                if let Ok(pgid) = libc::pid_t::try_from(child.id())
                    && pgid > 1
                {
                    // SAFETY: killpg only sends a signal; the group id is this child's own
                    // pid, made a group leader by process_group(0) above, so nothing else is
                    // hit.
                    unsafe { libc::killpg(pgid, libc::SIGKILL) };
                }
                let _ = child.kill();
                let _ = child.wait();
                break why;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e),
        }
    };
    let _ = done_rx.recv_timeout(DRAIN);
    Ok(ended)
}

/// What a failed setup command's error quotes of its output: the end of it.
const SETUP_TAIL: usize = 64 * 1024;

/// Runs one setup command ([`run_command`], unconfined, never stopped); a failure carries
/// the last 20 lines of its output.
fn run_one(
    worktree: &Path,
    command: &str,
    env: &[(String, String)],
    timeout: Duration,
) -> Result<(), SetupError> {
    let failed = |outcome: String, output: String| SetupError::Failed {
        command: command.to_owned(),
        outcome,
        output,
    };
    let tail = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let writing = tail.clone();
    let sink = Box::new(move |bytes: &[u8]| {
        let mut tail = writing.lock().unwrap_or_else(|e| e.into_inner());
        tail.extend_from_slice(bytes);
        let over = tail.len().saturating_sub(SETUP_TAIL);
        tail.drain(..over);
    });
    let ended = run_command(worktree, command, env, timeout, &|_| {}, &|| false, sink).map_err(
        |source| SetupError::Spawn {
            command: command.to_owned(),
            source,
        },
    )?;
    let tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    let text = String::from_utf8_lossy(&tail);
    let last: String = {
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    };
    match ended {
        Ended::Exited(s) if s.success() => Ok(()),
        Ended::Exited(s) => Err(failed(format!("failed ({s})"), last)),
        Ended::TimedOut => Err(failed(
            format!("timed out after {} s", timeout.as_secs()),
            last,
        )),
        Ended::Stopped => Err(failed("stopped before it finished".to_owned(), last)),
    }
}

impl berth_core::Kinded for SetupError {
    fn kind(&self) -> berth_core::ErrorKind {
        match self {
            SetupError::BadCopyPath(_) => berth_core::ErrorKind::Invalid,
            SetupError::Copy { .. } => berth_core::ErrorKind::Io,
            SetupError::Failed { .. } | SetupError::Spawn { .. } => berth_core::ErrorKind::External,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_refuses_escapes_and_skips_missing() {
        let repo = tempfile::tempdir().unwrap();
        let wt = tempfile::tempdir().unwrap();
        std::fs::write(repo.path().join(".env"), "SECRET=1").unwrap();
        std::fs::create_dir(repo.path().join("conf")).unwrap();
        std::fs::write(repo.path().join("conf/local.toml"), "x").unwrap();
        let copied = copy_files(
            repo.path(),
            wt.path(),
            &[".env".into(), "conf".into(), "absent".into()],
        )
        .unwrap();
        assert_eq!(copied.copied, vec![".env", "conf"]);
        assert_eq!(copied.missing, vec!["absent"]);
        assert_eq!(
            std::fs::read_to_string(wt.path().join(".env")).unwrap(),
            "SECRET=1"
        );
        assert!(wt.path().join("conf/local.toml").exists());
        for bad in ["../x", "/etc/passwd", "", "a/../../b"] {
            assert!(
                matches!(
                    copy_files(repo.path(), wt.path(), &[bad.into()]),
                    Err(SetupError::BadCopyPath(_))
                ),
                "{bad}"
            );
        }
        std::os::unix::fs::symlink("/etc", repo.path().join("link")).unwrap();
        assert!(copy_files(repo.path(), wt.path(), &["link".into()]).is_err());
    }

    #[test]
    fn setup_runs_in_the_worktree_and_reports_failures() {
        let wt = tempfile::tempdir().unwrap();
        let env = [("BERTH_PORT".to_owned(), "20010".to_owned())];
        run_setup(
            wt.path(),
            &["echo hi $BERTH_PORT > made.txt".into()],
            &env,
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(wt.path().join("made.txt")).unwrap(),
            "hi 20010\n"
        );
        let err = run_setup(
            wt.path(),
            &["echo out; echo oops >&2; exit 3".into()],
            &[],
            Duration::from_secs(10),
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("exit status: 3") && msg.contains("oops") && msg.contains("out"),
            "{msg}"
        );
        let started = Instant::now();
        let err = run_setup(
            wt.path(),
            &["sleep 30 & sleep 30".into()],
            &[],
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(err.to_string().contains("timed out"), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the timeout kills the whole command"
        );
    }
}
