//! What the tests of `berth run` share: a repository to run in, the command with berth's own
//! agents pointed at the provider stand-in, and readers of what a run leaves.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use berth_testkit::provider_server::{ProviderServer, Turn};
use berth_testkit::{commit, git};
use serde_json::Value;

use super::Home;

/// A new repository with one commit on `main`, and the temp folder holding it.
pub fn project() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "-b", "main"]);
    commit(&root, "README.md", "hello\n");
    (tmp, root.canonicalize().unwrap())
}

/// `berth run ARGS` in `dir`, berth's agent (and `berth acp` under it) on the stand-in.
pub fn berth_run(home: &Home, server: &ProviderServer, dir: &Path, args: &[&str]) -> Command {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    on_stand_in(home, server, dir, &all)
}

/// `berth ARGS` in `dir`, berth's agent (and `berth acp` under it) on the stand-in.
pub fn on_stand_in(home: &Home, server: &ProviderServer, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = home.cmd(args);
    cmd.current_dir(dir)
        .env("BERTH_PROVIDER", "claude")
        .env("BERTH_PROVIDERS__CLAUDE__BASE_URL", server.url())
        .env("BERTH_PROVIDERS__CLAUDE__MODEL", "test-model")
        .env("ANTHROPIC_API_KEY", "test-key");
    cmd
}

/// One JSON value per line of `stdout`.
pub fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// A session's messages as `role: text`, as `session show --json` gives them.
pub fn transcript(home: &Home, session: &str) -> Vec<String> {
    messages(&home.json(&["session", "show", session, "--json"]))
}

/// The messages of a `session show --json` as `role: text`.
pub fn messages(shown: &Value) -> Vec<String> {
    shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap()
            )
        })
        .collect()
}

/// A model turn that writes `content` to `out.txt` with berth's `write_file`.
pub fn write_call(content: &str) -> Turn {
    let args = serde_json::json!({"path": "out.txt", "content": content}).to_string();
    Turn::new().tool_call("w1", "write_file", [args])
}

/// Polls `check` until it gives a value, failing the test after `limit`.
pub fn until<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(started.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The processes whose working folder is `dir` (an agent started in its worktree).
pub fn processes_in(dir: &Path) -> Vec<u32> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
        .collect()
}

/// Sends SIGKILL to `pid`.
pub fn kill9(pid: u32) {
    let status = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -9 {pid}");
}
