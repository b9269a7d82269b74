//! The terminals berth runs for an ACP agent in a run (`terminal/*`): each a command in its
//! own process group, in the agent's worktree or a folder beneath it, its output kept up to
//! the agent's byte limit (the oldest bytes dropped first, as the protocol says), at most
//! [`MAX_OUTPUT_LIMIT`] whatever it names, and at most [`MAX_OPEN`] terminals at once.
//!
//! **The worktree is the reach.** A `cwd` is resolved (symlinks and `..` followed, as the
//! kernel would) and refused unless it is the worktree or beneath it; a `cwd` that does not
//! exist is refused too. Once started, the command is confined (berth-sandbox): it writes only
//! in the worktree and a private `/tmp`, reads nothing on the deny list, has no network and
//! signals nothing outside its own tree, whatever it runs; what the sandbox refused is added
//! to its output as a note. It runs with the workspace's ports in its environment. Every
//! terminal still running when the turn ends is killed with its group.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use berth_sandbox::{Sandbox, Subject};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

/// How a terminal's command ended: its exit code, or the signal that killed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exit {
    pub code: Option<u32>,
    pub signal: Option<String>,
}

/// Output kept when the agent names no limit.
const DEFAULT_OUTPUT_LIMIT: usize = 1 << 20;

/// The most output kept of one terminal, whatever limit the agent names: the agent's
/// number is its own to choose, and berth holds the output.
const MAX_OUTPUT_LIMIT: usize = 16 << 20;

/// Terminals an agent may have at once (not yet released): each holds its output.
const MAX_OPEN: usize = 32;

/// Why a terminal request was not done.
#[derive(Debug)]
pub(crate) enum TerminalError {
    /// A way out of the worktree: shown and recorded.
    Outside(String),
    /// No such terminal (released, or never made).
    Unknown(String),
    Failed(String),
}

struct Terminal {
    output: Mutex<Output>,
    exit: watch::Receiver<Option<Exit>>,
    /// The process group (its leader's pid), to kill it with what it started.
    group: i32,
}

#[derive(Default)]
struct Output {
    bytes: Vec<u8>,
    limit: usize,
    truncated: bool,
}

impl Output {
    /// Adds `more`, dropping the oldest bytes beyond the limit (then at a character
    /// boundary, so the text stays UTF-8 where the command's was).
    fn push(&mut self, more: &[u8]) {
        self.bytes.extend_from_slice(more);
        if self.bytes.len() > self.limit {
            let mut cut = self.bytes.len() - self.limit;
            while cut < self.bytes.len() && (self.bytes[cut] & 0xC0) == 0x80 {
                cut += 1;
            }
            self.bytes.drain(..cut);
            self.truncated = true;
        }
    }
}

/// One turn's terminals.
pub(crate) struct Terminals {
    /// The worktree, resolved.
    root: PathBuf,
    /// What confines each command.
    sandbox: Sandbox,
    env: Vec<(String, String)>,
    next: AtomicU64,
    open: Mutex<HashMap<String, Arc<Terminal>>>,
}

impl Terminals {
    pub fn new(
        worktree: &Path,
        env: &[(String, String)],
        sandbox: Sandbox,
    ) -> std::io::Result<Terminals> {
        Ok(Terminals {
            root: worktree.canonicalize()?,
            sandbox,
            env: env.to_vec(),
            next: AtomicU64::new(1),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// The folder a command runs in: `cwd` resolved, if it is the worktree or beneath it.
    fn folder(&self, cwd: Option<&Path>) -> Result<PathBuf, TerminalError> {
        let Some(cwd) = cwd else {
            return Ok(self.root.clone());
        };
        let shown = cwd.display();
        let joined = self.root.join(cwd);
        let resolved = joined.canonicalize().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                TerminalError::Outside(format!("the folder {shown} does not exist"))
            }
            _ => TerminalError::Failed(format!("{shown}: {e}")),
        })?;
        if !resolved.starts_with(&self.root) {
            return Err(TerminalError::Outside(format!(
                "{shown} is outside the worktree {} (it resolves to {})",
                self.root.display(),
                resolved.display()
            )));
        }
        if !resolved.is_dir() {
            return Err(TerminalError::Outside(format!("{shown} is not a folder")));
        }
        Ok(resolved)
    }

    /// Starts `command` with `args`; its id.
    pub fn create(
        &self,
        command: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: Option<&Path>,
        limit: Option<u64>,
    ) -> Result<String, TerminalError> {
        if lock(&self.open).len() >= MAX_OPEN {
            return Err(TerminalError::Failed(format!(
                "{MAX_OPEN} terminals are open: release one (terminal/release) first"
            )));
        }
        let folder = self.folder(cwd)?;
        let confinement = self
            .sandbox
            .confine(Some(&folder), &Subject::Command)
            .map_err(|e| TerminalError::Failed(e.to_string()))?;
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(args)
            .current_dir(&folder)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(c) = &confinement {
            c.apply_tokio(&mut cmd);
        }
        let mut child = cmd.spawn().map_err(|e| {
            TerminalError::Failed(match &confinement {
                Some(c) => c.spawn_error(command, &e),
                None => format!("cannot start `{command}`: {e}"),
            })
        })?;
        let group = child.id().map_or(0, |pid| pid as i32);
        let (exit_tx, exit) = watch::channel(None);
        let terminal = Arc::new(Terminal {
            output: Mutex::new(Output {
                limit: limit.map_or(DEFAULT_OUTPUT_LIMIT, |l| {
                    usize::try_from(l).map_or(MAX_OUTPUT_LIMIT, |l| l.min(MAX_OUTPUT_LIMIT))
                }),
                ..Output::default()
            }),
            exit,
            group,
        });
        let readers: Vec<_> = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        .map(|mut stream| {
            let terminal = terminal.clone();
            tokio::spawn(async move {
                let mut buf = vec![0; 8192];
                while let Ok(n @ 1..) = stream.read(&mut buf).await {
                    lock(&terminal.output).push(&buf[..n]);
                }
            })
        })
        .collect();
        let terminal_out = terminal.clone();
        tokio::spawn(async move {
            let status = child.wait().await;
            // The output is whole before the exit is told.
            for reader in readers {
                let _ = reader.await;
            }
            if let Some(c) = &confinement {
                let mut output = lock(&terminal_out.output);
                let text = String::from_utf8_lossy(&output.bytes).into_owned();
                if let Some(note) = berth_sandbox::explain(&text, c) {
                    output.push(format!("\n{note}\n").as_bytes());
                }
            }
            let _ = exit_tx.send(Some(exit_of(status)));
        });
        let id = format!("term-{}", self.next.fetch_add(1, Ordering::Relaxed));
        lock(&self.open).insert(id.clone(), terminal);
        Ok(id)
    }

    fn get(&self, id: &str) -> Result<Arc<Terminal>, TerminalError> {
        lock(&self.open)
            .get(id)
            .cloned()
            .ok_or_else(|| TerminalError::Unknown(format!("no terminal {id}")))
    }

    /// The output so far, whether it was cut, and the exit once there is one.
    pub fn output(&self, id: &str) -> Result<(String, bool, Option<Exit>), TerminalError> {
        let terminal = self.get(id)?;
        let exit = terminal.exit.borrow().clone();
        let output = lock(&terminal.output);
        Ok((
            String::from_utf8_lossy(&output.bytes).into_owned(),
            output.truncated,
            exit,
        ))
    }

    /// Waits for the command to end.
    pub async fn wait(&self, id: &str) -> Result<Exit, TerminalError> {
        let mut exit = self.get(id)?.exit.clone();
        let ended = exit
            .wait_for(Option::is_some)
            .await
            .map_err(|_| TerminalError::Failed(format!("terminal {id} was lost")))?;
        Ok(ended.clone().expect("waited for an exit"))
    }

    /// Kills the command and what it started; the terminal stays to be read.
    pub fn kill(&self, id: &str) -> Result<(), TerminalError> {
        kill_group(&*self.get(id)?);
        Ok(())
    }

    /// Kills the command if it runs, and forgets the terminal.
    pub fn release(&self, id: &str) -> Result<(), TerminalError> {
        let terminal = lock(&self.open)
            .remove(id)
            .ok_or_else(|| TerminalError::Unknown(format!("no terminal {id}")))?;
        kill_group(&terminal);
        Ok(())
    }

    /// Kills every terminal's command and what it started: the turn is over. The terminals
    /// stay to be read (an agent's late `terminal/output` still gets an answer).
    pub fn kill_all(&self) {
        for terminal in lock(&self.open).values() {
            kill_group(terminal);
        }
    }
}

impl Drop for Terminals {
    fn drop(&mut self) {
        self.kill_all();
    }
}

fn kill_group(terminal: &Terminal) {
    if terminal.exit.borrow().is_none() && terminal.group > 0 {
        // SAFETY: kill(2) on a process group this terminal started; no memory effects.
        unsafe {
            libc::kill(-terminal.group, libc::SIGKILL);
        }
    }
}

/// How a terminal's process ended, as ACP says it: its exit code or the signal that killed it;
/// neither when it could not be waited for.
fn exit_of(status: std::io::Result<std::process::ExitStatus>) -> Exit {
    match status {
        Ok(s) => {
            use std::os::unix::process::ExitStatusExt;
            Exit {
                code: s.code().map(|c| c as u32),
                signal: s.signal().map(signal_name),
            }
        }
        Err(_) => Exit {
            code: None,
            signal: None,
        },
    }
}

fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGKILL => "SIGKILL".to_owned(),
        libc::SIGTERM => "SIGTERM".to_owned(),
        libc::SIGINT => "SIGINT".to_owned(),
        n => format!("signal {n}"),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_keeps_the_newest_bytes_at_a_character_boundary() {
        let mut o = Output {
            limit: 4,
            ..Output::default()
        };
        o.push(b"abc");
        assert!(!o.truncated);
        // Nine bytes: the cut at four from the end falls inside `é`, so `é` goes whole.
        o.push("dé fg".as_bytes());
        assert!(o.truncated);
        assert_eq!(String::from_utf8(o.bytes.clone()).unwrap(), " fg");
    }

    /// The sandbox a run's terminals get, with berth's default policy.
    fn sandbox(work: &Path) -> Sandbox {
        let home = work.parent().unwrap().join("berth-home");
        let policy =
            berth_sandbox::Policy::from_settings(&Default::default(), None, &home).unwrap();
        Sandbox::new(
            policy,
            berth_sandbox::Place {
                work: work.to_owned(),
                cwd: work.to_owned(),
                workspace_dir: None,
                ports: vec![],
                protect: vec![],
                readable: vec![],
                hidden: vec![],
            },
        )
    }

    /// What an agent names does not make berth hold more: a terminal keeps at most
    /// `MAX_OUTPUT_LIMIT` of its output, and at most `MAX_OPEN` are open at once.
    #[tokio::test]
    async fn an_agents_limits_are_bounded_by_berths() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("wt");
        std::fs::create_dir_all(&root).unwrap();
        let t = Terminals::new(&root, &[], sandbox(&root)).unwrap();
        let big = t
            .create(
                "head",
                &[
                    "-c".into(),
                    (MAX_OUTPUT_LIMIT + 4096).to_string(),
                    "/dev/zero".into(),
                ],
                &[],
                None,
                Some(u64::MAX),
            )
            .unwrap();
        t.wait(&big).await.unwrap();
        let (out, truncated, _) = t.output(&big).unwrap();
        assert!(truncated);
        assert_eq!(out.len(), MAX_OUTPUT_LIMIT);
        for _ in 1..MAX_OPEN {
            t.create("sleep", &["5".into()], &[], None, None).unwrap();
        }
        let refused = t.create("true", &[], &[], None, None).unwrap_err();
        assert!(
            matches!(&refused, TerminalError::Failed(why) if why.contains("release one")),
            "{refused:?}"
        );
        t.kill_all();
    }

    #[tokio::test]
    async fn a_cwd_outside_the_worktree_is_refused_and_one_inside_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("wt");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), root.join("out")).unwrap();
        let t = Terminals::new(
            &root,
            &[("BERTH_PORT".into(), "20000".into())],
            sandbox(&root),
        )
        .unwrap();
        for bad in [
            tmp.path().to_path_buf(),
            root.join("out"),
            root.join("sub/../.."),
        ] {
            assert!(
                matches!(
                    t.create("true", &[], &[], Some(&bad), None),
                    Err(TerminalError::Outside(_))
                ),
                "{bad:?}"
            );
        }
        let id = t
            .create(
                "sh",
                &["-c".into(), "pwd; echo $BERTH_PORT; exit 3".into()],
                &[],
                Some(Path::new("sub")),
                None,
            )
            .unwrap();
        let exit = t.wait(&id).await.unwrap();
        assert_eq!(exit.code, Some(3));
        let (out, truncated, _) = t.output(&id).unwrap();
        assert!(!truncated);
        let want = format!(
            "{}\n20000\n",
            root.join("sub").canonicalize().unwrap().display()
        );
        assert_eq!(out, want);
    }

    /// Whether no host process runs with `marker` in its command line (a confined
    /// command's pids are its own PID namespace's).
    fn gone(marker: &str) -> bool {
        berth_testkit::processes_with(marker).is_empty()
    }

    #[tokio::test]
    async fn the_turns_end_kills_every_terminal_with_what_it_started() {
        let tmp = tempfile::tempdir().unwrap();
        let t = Terminals::new(tmp.path(), &[], sandbox(tmp.path())).unwrap();
        // The command starts a process of its own in the background, then waits: killing
        // the command alone would leave that one running.
        let id = t
            .create(
                "sh",
                &["-c".into(), "sleep 300.0401 & echo started; wait".into()],
                &[],
                None,
                None,
            )
            .unwrap();
        let started = std::time::Instant::now();
        let background = "300.0401";
        loop {
            let (out, _, _) = t.output(&id).unwrap();
            if out.contains("started") && !gone(background) {
                break;
            }
            assert!(started.elapsed().as_secs() < 10, "not started: {out:?}");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        t.kill_all();
        let exit = tokio::time::timeout(std::time::Duration::from_secs(10), t.wait(&id))
            .await
            .expect("the command was killed")
            .unwrap();
        assert_eq!(exit.signal.as_deref(), Some("SIGKILL"));
        let killed = std::time::Instant::now();
        while !gone(background) {
            assert!(killed.elapsed().as_secs() < 10, "{background} still runs");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn output_beyond_the_agents_limit_keeps_the_newest_bytes_and_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let t = Terminals::new(tmp.path(), &[], sandbox(tmp.path())).unwrap();
        let id = t
            .create(
                "sh",
                &["-c".into(), "printf 'héllo wörld'".into()],
                &[],
                None,
                Some(4),
            )
            .unwrap();
        t.wait(&id).await.unwrap();
        let (out, truncated, exit) = t.output(&id).unwrap();
        // Four bytes from the end fall inside `ö`, which goes whole rather than leave half a
        // character.
        assert!(truncated);
        assert_eq!(out, "rld");
        assert_eq!(exit.unwrap().code, Some(0));
    }
}
