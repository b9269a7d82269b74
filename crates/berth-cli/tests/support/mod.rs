//! The `berth` binary on a temporary home, for the integration tests. `Home` stays here rather
//! than in berth-testkit because the binary's path, `CARGO_BIN_EXE_berth`, exists only while
//! compiling berth-cli's own tests; the generic helpers (running processes, the multi-process
//! harness, git) come from berth-testkit.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use berth_testkit::{Run, run};

pub mod git_project;
pub mod pool;
pub mod runs;
pub mod terminal;

/// A temporary `BERTH_HOME`, removed when dropped, and the `berth` binary run on it.
pub struct Home {
    pub dir: tempfile::TempDir,
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

    /// Runs in `dir` (a repository's checkout, say) instead of the home.
    pub fn run_in(&self, dir: &Path, args: &[&str]) -> Run {
        let mut cmd = self.cmd(args);
        cmd.current_dir(dir);
        run(cmd)
    }

    pub fn run_stdin(&self, args: &[&str], input: &[u8]) -> Run {
        use std::io::Write;
        let mut cmd = self.cmd(args);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        Run::from(child.wait_with_output().unwrap())
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

/// Rewrites a workspace's last use by hand, as if it had been idle since `when` (RFC 3339).
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
    // The listing index caches records and does not see hand edits; removing it is the
    // documented way to make berth re-read them.
    match std::fs::remove_file(home.path().join("workspaces.index")) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("cannot remove workspaces.index: {e}"),
    }
}
