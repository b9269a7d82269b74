//! Benchmark: what confinement costs a command. berth's `run_command` tool, called as the
//! agent loop calls it, confined (the default) and unconfined (the same call with the sandbox
//! lifted, as when a person allows it once), interleaved in one run:
//!
//! 1. `true`: the fixed cost (reading `[sandbox]`, preparing the mounts and the Landlock
//!    ruleset, the namespaces and mounts in the child). Goal: at most 5 ms added at the median.
//! 2. `cargo test` of a small crate in a git worktree, its source touched first so each run
//!    compiles and tests it. Goal: confined at most 1.05 times unconfined.
//!
//! `cargo bench -p berth-agent --bench sandbox` (`BENCH_ROUNDS`, `BENCH_CARGO_ROUNDS`,
//! `BENCH_MEMORY_MIB`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::Path;
use std::time::{Duration, Instant};

use berth_agent::tools::command::RunCommand;
use berth_agent::{CancellationToken, Tool, ToolContext};
use berth_ops::{CreateSession, CreateWorkspace, Repository};
use serde_json::json;

fn main() {
    let rounds: usize = env_or("BENCH_ROUNDS", 200);
    let cargo_rounds: usize = env_or("BENCH_CARGO_ROUNDS", 20);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        // Outside /tmp, as a user's home and projects are.
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-sandbox");
        std::fs::create_dir_all(&base).unwrap();
        let root = tempfile::tempdir_in(&base).unwrap();
        let home = root.path().join("berth");
        let repo = root.path().join("repo");
        make_crate(&repo);
        // `BENCH_MEMORY_MIB`: the tree's memory limit (`[sandbox] memory_mib`; default 0, half
        // the machine's): one at or above the machine's memory makes no cgroup, to measure
        // what the cgroup's move costs (limits.rs).
        if let Ok(mib) = std::env::var("BENCH_MEMORY_MIB") {
            std::fs::create_dir_all(&home).unwrap();
            std::fs::write(
                home.join("config.toml"),
                format!("[sandbox]\nmemory_mib = {}\n", mib.parse::<u64>().unwrap()),
            )
            .unwrap();
        }
        let ops = berth_ops::open(&home, &[]).unwrap();
        let mut create = CreateWorkspace::new(Repository::Named(repo.clone()));
        create.name = Some("bench".into());
        let ws = ops.create_workspace(create).await.unwrap();
        let worktree = ws.git.as_ref().unwrap().worktree.clone();
        let session = ops
            .create_session(CreateSession {
                workspace: ws.id.to_string(),
                ..CreateSession::default()
            })
            .await
            .unwrap();
        let confined = ToolContext::new(
            worktree.clone(),
            ops.clone(),
            session.clone(),
            CancellationToken::new(),
        );
        let unconfined = ToolContext {
            unconfined: true,
            ..confined.clone()
        };
        let tool = RunCommand::new();

        let (mut with, mut without) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            for which in [round % 2, 1 - round % 2] {
                let cx = if which == 0 { &confined } else { &unconfined };
                let (took, _) = time(&tool, cx, "true").await;
                if which == 0 { &mut with } else { &mut without }.push(took);
            }
        }
        let (w, wo) = (median(&mut with), median(&mut without));
        println!("sandbox benchmark: run_command, {rounds} rounds each, 2 cores");
        println!("{:<44} {:>10} {:>10}", "command", "confined", "unconfined");
        println!("{:<44} {:>7.2} ms {:>7.2} ms", "true", ms(w), ms(wo));
        println!(
            "added at the median: {:.2} ms (goal <= 5 ms)",
            ms(w) - ms(wo)
        );

        // Warm the toolchain's own caches, then compile and test per round.
        let test = "touch src/lib.rs && cargo test --offline 2>&1";
        time(&tool, &unconfined, test).await;
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for round in 0..cargo_rounds {
            for which in [round % 2, 1 - round % 2] {
                let cx = if which == 0 { &confined } else { &unconfined };
                let (took, out) = time(&tool, cx, test).await;
                // Each round compiled the crate and ran every test, confined or not.
                assert!(
                    out.contains("Compiling small") && out.contains("20 passed"),
                    "{out}"
                );
                if which == 0 { &mut with } else { &mut without }.push(took);
            }
        }
        let (w, wo) = (median(&mut with), median(&mut without));
        println!(
            "{:<44} {:>7.0} ms {:>7.0} ms",
            "cargo test of a small crate (compiled)",
            ms(w),
            ms(wo)
        );
        println!(
            "ratio confined / unconfined = {:.3} (goal <= 1.05)",
            w.as_secs_f64() / wo.as_secs_f64()
        );
    });
}

/// A crate with a few tests, committed, as an agent's worktree would hold.
fn make_crate(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"small\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    let mut lib =
        String::from("pub fn add(a: u64, b: u64) -> u64 { a + b }\n\n#[cfg(test)]\nmod tests {\n");
    for i in 0..20 {
        lib.push_str(&format!(
            "    #[test]\n    fn adds_{i}() {{ assert_eq!(super::add({i}, 1), {}); }}\n",
            i + 1
        ));
    }
    lib.push_str("}\n");
    std::fs::write(dir.join("src/lib.rs"), lib).unwrap();
    std::fs::write(dir.join(".gitignore"), "/target\n").unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "."],
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-qm",
            "small",
        ],
    ] {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }
}

async fn time(tool: &RunCommand, cx: &ToolContext, command: &str) -> (Duration, String) {
    let start = Instant::now();
    let out = tool.call(json!({ "command": command }), cx).await;
    let took = start.elapsed();
    match out {
        Ok(out) => (took, out),
        Err(e) => panic!("`{command}` failed: {e}"),
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
