//! Benchmark: `berth run --agents 3` on a 20,000-file repository with `[git] spare_worktrees =
//! 3`: berth's own time around the agents against the agents' own time, in the same run, and
//! how soon a streamed piece of an answer reaches the run's output.
//!
//! `cargo bench -p berth-cli --bench run` (`BENCH_FILES`, `BENCH_ROUNDS`, `BENCH_THINK_MS`,
//! `BENCH_WORK_MS` change the sizes). Goals (issue 25): at most 0.5 s of berth's own time for
//! the three agents, and the first streamed chunk on the run's output within 50 ms of the
//! agent sending it.
//!
//! The agents are berth's own, against berth-testkit's provider stand-in (Anthropic's real
//! server-sent events), which answers each with a first piece after `THINK` and the rest after
//! `WORK` more: that is the agents' own time, fixed by the bench and timed by the server from
//! each request's arrival. Each round fills the spares first (not timed), then runs the whole
//! `berth run` process with `--json` on a pipe, reading its events as they come:
//!
//! - **agents' own time**: from the first agent's request to the last agent's answer's end
//!   (the union of the three `[arrival, arrival + THINK + WORK]`);
//! - **berth's own time**: the process's wall time minus that: starting, three workspaces
//!   from the spares (with their refill started), three sessions, the agents' setup and
//!   requests, the transcripts, the run's record and log, the diff summary, exiting;
//! - **first chunk**: for each agent, its first `text` event's arrival on the pipe minus the
//!   moment the server sent that piece (its request's arrival + `THINK`), paired in order.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use common::{env_or, generated_repository};

const AGENTS: usize = 3;

fn main() {
    let files = env_or("BENCH_FILES", 20_000);
    let rounds = env_or("BENCH_ROUNDS", 5);
    let think = Duration::from_millis(env_or("BENCH_THINK_MS", 1000) as u64);
    let work = Duration::from_millis(env_or("BENCH_WORK_MS", 1000) as u64);
    let tmp = tempfile::tempdir().unwrap();
    let (repo, _) = generated_repository(tmp.path(), files);
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!("[git]\nspare_worktrees = {AGENTS}\n"),
    )
    .unwrap();
    let server = ProviderServer::start_in_background();
    let mut own = Vec::new();
    let mut chunk = Vec::new();
    println!("round  wall ms  agents ms  berth ms  berth/agents  first chunk ms (max of {AGENTS})");
    for round in 1..=rounds {
        fill_spares(&home, &repo);
        let before = server.request_count();
        for _ in 0..AGENTS {
            server.push(
                Reply::anthropic(&Turn::new().text(["First piece", " and the rest."]))
                    .delay_head(think)
                    .pause_after(4, work),
            );
        }
        let spawned = Instant::now();
        let mut child = berth(&home)
            .args(["run", "Say something", "--json", "--agents"])
            .arg(AGENTS.to_string())
            .arg("--name")
            .arg(format!("bench-{round}"))
            .arg("--repo")
            .arg(&repo)
            .env("BERTH_PROVIDER", "claude")
            .env("BERTH_PROVIDERS__CLAUDE__BASE_URL", server.url())
            .env("BERTH_PROVIDERS__CLAUDE__MODEL", "bench-model")
            .env("ANTHROPIC_API_KEY", "bench-key")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Each agent's first piece, as it arrived on the pipe.
        let mut first_text = Vec::new();
        let mut seen = [false; AGENTS];
        let mut last = String::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let at = Instant::now();
            last = line.unwrap();
            let event: serde_json::Value = serde_json::from_str(&last).unwrap();
            if event["event"] == "text" {
                let agent = event["agent"].as_u64().unwrap() as usize;
                if !seen[agent] {
                    seen[agent] = true;
                    first_text.push(at);
                }
            }
        }
        let status = child.wait().unwrap();
        let wall = spawned.elapsed();
        assert!(status.success(), "berth run failed: {last}");
        let requests = server.requests();
        let arrivals: Vec<Instant> = requests[before..].iter().map(|r| r.received_at).collect();
        assert_eq!(arrivals.len(), AGENTS, "one request per agent");
        assert_eq!(first_text.len(), AGENTS, "every agent streamed");
        let agents_time =
            *arrivals.iter().max().unwrap() + think + work - *arrivals.iter().min().unwrap();
        let berth_time = wall.saturating_sub(agents_time);
        let mut sent: Vec<Instant> = arrivals.iter().map(|a| *a + think).collect();
        sent.sort();
        first_text.sort();
        let latency = first_text
            .iter()
            .zip(&sent)
            .map(|(got, sent)| got.saturating_duration_since(*sent))
            .max()
            .unwrap();
        println!(
            "{round:>5}  {:>7.0}  {:>9.0}  {:>8.0}  {:>12.3}  {:>14.1}",
            ms(wall),
            ms(agents_time),
            ms(berth_time),
            berth_time.as_secs_f64() / agents_time.as_secs_f64(),
            ms(latency)
        );
        own.push(berth_time);
        chunk.push(latency);
    }
    own.sort();
    chunk.sort();
    let median = |v: &[Duration]| v[v.len() / 2];
    println!(
        "median: berth's own time {:.0} ms for {AGENTS} agents (goal ≤ 500 ms), {:.3} of the agents' own {:.0} ms; first chunk {:.1} ms (goal ≤ 50 ms)",
        ms(median(&own)),
        median(&own).as_secs_f64() / (think + work).as_secs_f64(),
        ms(think + work),
        ms(median(&chunk))
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn berth(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_berth"));
    cmd.env("BERTH_HOME", home).stdin(Stdio::null());
    cmd
}

/// Fills the spare checkouts and waits until all are ready, so a round starts from a full
/// pool, as a user's second run does.
fn fill_spares(home: &Path, repo: &Path) {
    let status = berth(home)
        .args(["workspace", "spares", "--fill", "--repo"])
        .arg(repo)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let waited = Instant::now();
    loop {
        let out = berth(home)
            .args(["workspace", "spares", "--json", "--repo"])
            .arg(repo)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if v["ready"].as_u64().unwrap() as usize >= AGENTS {
            // A refill started by the last round may still be writing; let it settle.
            std::thread::sleep(Duration::from_millis(500));
            return;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(300),
            "spares never filled"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
