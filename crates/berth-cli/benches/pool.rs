//! Benchmark: a pool of workers on one Postgres (`berth serve --worker`, `berth run --queue`).
//!
//! `eval "$(tests/postgres.sh start)" && cargo bench -p berth-cli --bench pool`
//! (`BENCH_ROUNDS`, `BENCH_RUNS`, `BENCH_ANSWER_MS`, `BENCH_SLOTS` change the sizes). Goals
//! (issue 35):
//!
//! - **queue latency**: from the `berth run --queue` process's start to the provider stand-in
//!   receiving the agent's first request, with one idle worker: p50 at most 150 ms. Beside
//!   it, the same for a `berth run` in the foreground on the same home and repository URL
//!   (the latency of a run with no queue at all), in the same rounds.
//! - **throughput**: `BENCH_RUNS` (100) one-agent runs whose answer takes `BENCH_ANSWER_MS`
//!   (200) ms, queued before two nodes of `BENCH_SLOTS` (4) agents each start: the ideal is
//!   runs × answer / (2 × slots); the figure is the ideal over the wall time from the workers'
//!   start to the last run's end (at least 85%).
//! - **queries per run**: the transactions Postgres counted (`pg_stat_database`) over the
//!   throughput part, per run; each statement berth sends outside a transaction is one.
//!
//! Each node is a home of its own, as on two machines; both run on this one.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use common::env_or;

fn main() {
    let rounds = env_or("BENCH_ROUNDS", 20);
    let runs = env_or("BENCH_RUNS", 100);
    let answer = Duration::from_millis(env_or("BENCH_ANSWER_MS", 200) as u64);
    let slots = env_or("BENCH_SLOTS", 4);
    let url = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(berth_testkit::postgres::fresh_database());
    let tmp = tempfile::tempdir().unwrap();
    let remote = berth_testkit::bare_remote(tmp.path());
    let server = ProviderServer::start_in_background();
    let alpha = Node::new(tmp.path(), "alpha", &url, &server);
    let beta = Node::new(tmp.path(), "beta", &url, &server);

    // Queue latency, one idle worker; beside it, a foreground run on the same home.
    let mut worker = alpha.worker(1);
    let (mut queued, mut local) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
        let before = server.request_count();
        let started = Instant::now();
        let out = alpha
            .cmd(&["run", "--queue", "Say done", "--repo", &remote, "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        queued.push(first_request(&server, before, started));
        let id: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        wait_ended(&alpha, id["run"].as_str().unwrap());

        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
        let before = server.request_count();
        let started = Instant::now();
        let out = alpha
            .cmd(&["run", "Say done", "--repo", &remote, "--json", "--name"])
            .arg(format!("local-{round}"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        local.push(first_request(&server, before, started));
    }
    let _ = worker.kill();
    let _ = worker.wait();
    println!("queue latency, {rounds} rounds: run --queue to the provider's first request");
    println!("  queued:          {}", spread(&mut queued));
    println!("  run (no queue):  {}", spread(&mut local));
    println!(
        "  queued / run p50: {:.2}   goal: queued p50 <= 150 ms",
        median(&queued) / median(&local)
    );

    // Throughput: every run queued first, then two nodes of `slots` agents each.
    for _ in 0..runs {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])).delay_head(answer));
    }
    let mut ids = Vec::new();
    for n in 0..runs {
        let out = alpha
            .cmd(&[
                "run", "--queue", "Say done", "--repo", &remote, "--json", "--name",
            ])
            .arg(format!("many-{n}"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        ids.push(id["run"].as_str().unwrap().to_owned());
    }
    std::thread::sleep(Duration::from_millis(1500));
    let transactions_before = transactions(&url);
    let postgres_before = postgres_cpu_ms();
    let started = Instant::now();
    let mut workers = [alpha.worker(slots), beta.worker(slots)];
    loop {
        let ended = psql(
            &url,
            "SELECT count(*) FROM runs WHERE pooled = 1 AND state IN ('ended', 'failed')",
        );
        if ended.parse::<usize>().unwrap() >= runs + rounds {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the runs never ended"
        );
        // Not more often: each look is a psql process on the cores the nodes share.
        std::thread::sleep(Duration::from_millis(100));
    }
    let wall = started.elapsed();
    // The workers' CPU and their reaped children's (git, above all), before they end.
    let (own, children): (Vec<f64>, Vec<f64>) = workers.iter().map(|w| cpu_ms(w.id())).unzip();
    let (own, children): (f64, f64) = (own.iter().sum(), children.iter().sum());
    let workers_cpu = own + children;
    let postgres_cpu = postgres_cpu_ms() - postgres_before;
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    // Postgres flushes its counts a second after they change.
    std::thread::sleep(Duration::from_millis(1500));
    let transactions_after = transactions(&url);
    let failed = psql(&url, "SELECT count(*) FROM runs WHERE state = 'failed'");
    let by_node = psql(
        &url,
        "SELECT string_agg(n || ' ' || c, ', ') FROM (SELECT owner AS n, count(*) AS c FROM runs WHERE record LIKE '%many-%' GROUP BY owner ORDER BY owner) t",
    );
    let ideal = answer.as_secs_f64() * runs as f64 / (2 * slots) as f64;
    // How busy the pool kept its slots: each run's time under its worker (taken to ended),
    // over every slot's whole time. What the queue itself costs shows here; what a run
    // costs (git, the answer) does not.
    let busy: f64 = psql(
        &url,
        "SELECT COALESCE(SUM(EXTRACT(EPOCH FROM ((record::json->>'ended_at')::timestamptz - (record::json->>'started_at')::timestamptz))), 0) FROM runs WHERE record LIKE '%many-%'",
    )
    .parse()
    .unwrap();
    let utilization = busy / ((2 * slots) as f64 * wall.as_secs_f64());
    println!(
        "throughput: {runs} one-agent runs of a {} ms answer over 2 nodes x {slots} agents",
        answer.as_millis()
    );
    println!(
        "  wall {:.2} s, ideal {ideal:.2} s: {:.0}% of the ideal (goal >= 85%); {:.1} runs/s; failed {failed}; by node: {by_node}",
        wall.as_secs_f64(),
        100.0 * ideal / wall.as_secs_f64(),
        runs as f64 / wall.as_secs_f64()
    );
    println!(
        "  slots busy {:.0}% of the time (goal >= 85%): {:.2} s of runs over {} slots x {:.2} s",
        100.0 * utilization,
        busy,
        2 * slots,
        wall.as_secs_f64()
    );
    println!(
        "  Postgres transactions per run: {:.1}",
        (transactions_after - transactions_before) as f64 / runs as f64
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "  CPU per run: workers {:.0} ms, their git and other children {:.0} ms, Postgres {:.0} ms; {cores} cores give a floor of {:.2} s for the CPU alone",
        own / runs as f64,
        children / runs as f64,
        postgres_cpu / runs as f64,
        (workers_cpu + postgres_cpu) / 1000.0 / cores as f64
    );
}

/// A node: a home of its own on the shared database.
struct Node {
    home: std::path::PathBuf,
    name: &'static str,
    url: String,
    provider: String,
}

impl Node {
    fn new(dir: &Path, name: &'static str, url: &str, server: &ProviderServer) -> Node {
        let home = dir.join(name);
        std::fs::create_dir_all(&home).unwrap();
        Node {
            home,
            name,
            url: url.to_owned(),
            provider: server.url().to_owned(),
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_berth"));
        cmd.args(args)
            .current_dir(&self.home)
            .env("BERTH_HOME", &self.home)
            .env("BERTH_STORE_URL", &self.url)
            .env("BERTH_PROVIDER", "claude")
            .env("BERTH_PROVIDERS__CLAUDE__BASE_URL", &self.provider)
            .env("BERTH_PROVIDERS__CLAUDE__MODEL", "bench-model")
            .env("ANTHROPIC_API_KEY", "bench-key")
            .stdin(Stdio::null());
        cmd
    }

    /// Its worker, `slots` agents at once, once it says it listens.
    fn worker(&self, slots: usize) -> Child {
        let log = self.home.join("worker.log");
        let mut child = self
            .cmd(&[
                "serve",
                "--worker",
                "--open",
                "--listen",
                "127.0.0.1:0",
                "--node",
            ])
            .arg(self.name)
            .arg("--max-agents")
            .arg(slots.to_string())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("works queued runs")
        {
            assert!(child.try_wait().unwrap().is_none(), "the worker ended");
            assert!(started.elapsed() < Duration::from_secs(30), "no worker");
            std::thread::sleep(Duration::from_millis(5));
        }
        child
    }
}

/// Milliseconds from `started` to the arrival of the first request after the first `before`.
fn first_request(server: &ProviderServer, before: usize, started: Instant) -> f64 {
    let limit = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(r) = server.requests().get(before) {
            return r.received_at.duration_since(started).as_secs_f64() * 1000.0;
        }
        assert!(Instant::now() < limit, "no request came");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn wait_ended(node: &Node, id: &str) {
    let limit = Instant::now() + Duration::from_secs(60);
    loop {
        let out = node.cmd(&["run", "show", id, "--json"]).output().unwrap();
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if run["state"] == "ended" {
            return;
        }
        assert!(run["state"] != "failed", "{run:#}");
        assert!(Instant::now() < limit, "run {id} never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn spread(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    format!(
        "p50 {:.0} ms, p90 {:.0} ms, min {:.0}, max {:.0}",
        at(0.5),
        at(0.9),
        v[0],
        v[v.len() - 1]
    )
}

/// The CPU time of process `pid`, and of its children it has waited for, in ms.
fn cpu_ms(pid: u32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command's name in parentheses: state is field 3, utime 14 … cstime 17.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ms = |range: std::ops::Range<usize>| -> f64 {
        fields[range]
            .iter()
            .map(|f| f.parse::<f64>().unwrap())
            .sum::<f64>()
            * 1000.0
            / clock_ticks()
    };
    (ms(11..13), ms(13..15))
}

/// The CPU time of every `postgres` process now, in ms.
fn postgres_cpu_ms() -> f64 {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "postgres")
        })
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return 0.0;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let ticks: f64 = fields[11..13]
                .iter()
                .filter_map(|f| f.parse::<f64>().ok())
                .sum();
            ticks * 1000.0 / clock_ticks()
        })
        .sum()
}

/// `/proc`'s clock ticks per second (USER_HZ, 100 on Linux whatever the kernel's own HZ).
fn clock_ticks() -> f64 {
    100.0
}

/// One value from Postgres, by psql.
fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-tAc", sql])
        .output()
        .expect("psql (Debian's postgresql-client) runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The transactions Postgres counted in this database so far.
fn transactions(url: &str) -> i64 {
    psql(
        url,
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()",
    )
    .parse()
    .unwrap()
}
