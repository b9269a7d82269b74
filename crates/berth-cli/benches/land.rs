//! Benchmark: `berth land` of five runs' agents on a 20,000-file repository, against plain git
//! doing the same merges in the same run: berth's time per agent landed, and the ratio.
//!
//! `cargo bench -p berth-cli --bench land` (`BENCH_FILES`, `BENCH_AGENTS` change the sizes).
//!
//! Each agent (berth's own, on berth-testkit's provider stand-in) writes a file of its own and
//! leaves it uncommitted. The baseline is what a person would type for the same result: in
//! each agent's worktree `git add -A` and `git commit`, then `git merge --no-edit` of its
//! branch in the main checkout, one agent after another. Then `main` is put back, and `berth
//! land` lands the same agents, in the same order, onto the same `main`: each agent's work
//! committed (nothing left, the baseline committed it), brought up to date (a merge on
//! objects), checked on the combined tree (`--check true`, confined), the base moved by
//! compare-and-swap with the checkout's files following, the land's record written after
//! every step, the run recorded merged and the agent's workspace archived (its worktree of
//! 20,000 files removed, which the baseline does not do).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use common::{env_or, generated_repository, git_cmd};

fn main() {
    let files = env_or("BENCH_FILES", 20_000);
    let agents = env_or("BENCH_AGENTS", 5);
    let tmp = tempfile::tempdir().unwrap();
    let (repo, _) = generated_repository(tmp.path(), files);
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let server = ProviderServer::start_in_background();
    let mut runs = Vec::new();
    for n in 0..agents {
        let args = serde_json::json!({"path": format!("agent-{n}.txt"), "content": "work\n"});
        server.push(Reply::anthropic(&Turn::new().tool_call(
            "w1",
            "write_file",
            [args.to_string()],
        )));
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
        let status = berth(&home, &server)
            .current_dir(&repo)
            .args([
                "run",
                &format!("Write agent-{n}.txt"),
                "--allow",
                "write_file",
            ])
            .args(["--check", "true", "--json"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "berth run {n} failed");
        let listed = berth(&home, &server)
            .args(["run", "list", "--json"])
            .output()
            .unwrap();
        let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
        let id = listed[0]["id"].as_str().unwrap().to_owned();
        let shown = berth(&home, &server)
            .args(["run", "show", &id, "--json"])
            .output()
            .unwrap();
        let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
        let wt = PathBuf::from(shown["agents"][0]["worktree"].as_str().unwrap());
        let branch = git(&wt, &["rev-parse", "--abbrev-ref", "HEAD"]);
        runs.push((id, wt, branch));
    }
    let main_before = git(&repo, &["rev-parse", "main"]);

    let started = Instant::now();
    for (n, (_, wt, branch)) in runs.iter().enumerate() {
        git(wt, &["add", "-A"]);
        git(wt, &["commit", "--quiet", "-m", &format!("agent {n}")]);
        git(&repo, &["merge", "--quiet", "--no-edit", branch]);
    }
    let baseline = started.elapsed();
    git(&repo, &["reset", "--quiet", "--hard", &main_before]);

    let started = Instant::now();
    let ids: Vec<&str> = runs.iter().map(|(id, _, _)| id.as_str()).collect();
    let out = berth(&home, &server)
        .current_dir(&repo)
        .arg("land")
        .args(&ids)
        .arg("--json")
        .output()
        .unwrap();
    let landed = started.elapsed();
    assert!(
        out.status.success(),
        "berth land failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in 0..agents {
        git(&repo, &["cat-file", "-e", &format!("main:agent-{n}.txt")]);
    }
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / agents as f64;
    println!(
        "{agents} agents on {files} files: git commit + merge {:.0} ms ({:.1} ms an agent); berth land {:.0} ms ({:.1} ms an agent); ratio {:.2}",
        baseline.as_secs_f64() * 1000.0,
        per(baseline),
        landed.as_secs_f64() * 1000.0,
        per(landed),
        landed.as_secs_f64() / baseline.as_secs_f64()
    );
}

fn berth(home: &Path, server: &ProviderServer) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_berth"));
    cmd.env("BERTH_HOME", home)
        .env("BERTH_PROVIDER", "claude")
        .env("BERTH_PROVIDERS__CLAUDE__BASE_URL", server.url())
        .env("BERTH_PROVIDERS__CLAUDE__MODEL", "bench-model")
        .env("ANTHROPIC_API_KEY", "bench-key")
        .stdin(Stdio::null());
    cmd
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
