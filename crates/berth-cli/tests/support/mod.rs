//! Shared plumbing for the integration tests: run the real `berth` binary on a temporary home,
//! and re-run this test binary as a child process for tests that need several processes.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub struct Home {
    pub dir: tempfile::TempDir,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Home {
    pub fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A `berth` command on this home, with a clean environment for config. It runs in the
    /// home, outside any repository, so `workspace create` makes plain workspaces unless a
    /// test points it at a repository.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_berth"));
        cmd.args(args)
            .current_dir(self.path())
            .env("BERTH_HOME", self.path())
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .env_remove("GEMINI_API_KEY")
            .env_remove("GOOGLE_API_KEY")
            .stdin(Stdio::null());
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("BERTH_") && k != "BERTH_HOME" {
                cmd.env_remove(k);
            }
        }
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Run {
        run(self.cmd(args))
    }

    pub fn run_stdin(&self, args: &[&str], input: &[u8]) -> Run {
        use std::io::Write;
        let mut cmd = self.cmd(args);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        run_output(child.wait_with_output().unwrap())
    }

    /// Runs and insists on success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let r = self.run(args);
        assert_eq!(r.code, 0, "berth {args:?} failed: {}", r.stderr);
        r.stdout
    }

    /// Runs and insists on failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let r = self.run(args);
        assert_ne!(
            r.code, 0,
            "berth {args:?} should fail; stdout: {}",
            r.stdout
        );
        assert!(
            !r.stderr.trim().is_empty(),
            "berth {args:?} failed silently"
        );
        r.stderr
    }

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("berth {args:?}: bad JSON ({e}): {out}"))
    }

    pub fn workspace_dir(&self, id: &str) -> PathBuf {
        self.path().join("workspaces").join(id)
    }
}

pub fn run(mut cmd: Command) -> Run {
    run_output(cmd.output().unwrap())
}

fn run_output(out: Output) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Waits for a spawned child and insists it succeeded; returns its stdout.
pub fn wait_ok(child: std::process::Child) -> String {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Environment variable that tells a re-executed test binary which child role to play.
pub const CHILD_ROLE: &str = "BERTH_TEST_CHILD_ROLE";

/// A command that re-runs this test binary, running only the test `entry`, which plays a
/// child role when `CHILD_ROLE` is set.
pub fn child(entry: &str, role: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([entry, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ROLE, role);
    cmd
}

/// The child role this process should play, if it is a child.
pub fn child_role() -> Option<String> {
    std::env::var(CHILD_ROLE).ok()
}

/// A cheap pseudo-random sequence (xorshift) seeded from the clock: enough to vary kill
/// timing without a dependency; the seed is printed so a failure can be replayed.
pub struct Jitter(u64);

impl Jitter {
    pub fn from_clock() -> Jitter {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        eprintln!("jitter seed {seed}");
        Jitter(seed)
    }

    pub fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

/// Runs `cmd` (a child that prints `DONE <what>` after each acknowledged operation), waits for
/// its first acknowledgement, lets it work for a random `0..max_us` microseconds more, SIGKILLs
/// it, and returns everything it acknowledged, in order.
pub fn kill_after_first_ack(mut cmd: Command, jitter: &mut Jitter, max_us: u64) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    use std::time::Duration;
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut proc = cmd.spawn().unwrap();
    let stdout = proc.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest prints "test name ... " without a newline, so the first DONE may share
            // its line: split at "DONE " rather than matching the start.
            if let Some((_, done)) = line.split_once("DONE ") {
                let _ = tx.send(done.to_owned());
            }
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("child never started");
    std::thread::sleep(Duration::from_micros(jitter.next(max_us)));
    proc.kill().unwrap(); // SIGKILL on unix
    proc.wait().unwrap();
    reader.join().unwrap();
    std::iter::once(first).chain(rx.try_iter()).collect()
}

/// Rewrites a workspace's last use, as if it had been idle since `when` (RFC 3339).
pub fn age_workspace(home: &Home, id: &str, when: &str) {
    let file = home.workspace_dir(id).join("workspace.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let aged: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("last_accessed") {
                format!("last_accessed = \"{when}\"")
            } else {
                l.to_owned()
            }
        })
        .collect();
    std::fs::write(&file, aged.join("\n")).unwrap();
}

/// Every file under `root` with its bytes, for "nothing changed" assertions.
pub fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let ty = entry.file_type().unwrap();
            if ty.is_dir() {
                stack.push(entry.path());
            } else if ty.is_file() {
                out.push((entry.path(), std::fs::read(entry.path()).unwrap()));
            } else {
                out.push((entry.path(), b"<symlink>".to_vec()));
            }
        }
    }
    out.sort();
    out
}
