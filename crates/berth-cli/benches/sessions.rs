//! Benchmark: transcript appends are O(1), and reading a long transcript is fast.
//!
//! `cargo bench -p berth-cli --bench sessions`
//!
//! Appends one message to a transcript of 10 messages and to one of 10,000, interleaved so both
//! see the same machine state; the ratio of their medians must stay near 1 (issue 3: at most
//! 1.5). The in-run baseline is the floor any durable append pays: `write` + `fdatasync` of the
//! same bytes on a plain file in the same folder. Then reads of the 10,000-message transcript,
//! through the library and through `berth session show --json`.
//!
//! Then appends made at once, as fifty turns append their prompts (`BENCH_AT_ONCE`, 50): one
//! append to each of that many sessions, all started together, on the filesystem store and on
//! SQLite (whose appends commit in groups); each figure is the wall time until every append
//! is durable, the median of `BENCH_ROUNDS` (20) rounds. The floor is the same number of
//! threads each writing and `fdatasync`ing a plain file of its own.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::fs::OpenOptions;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth_core::transcript::encode_message;
use berth_core::{Message, NewSession, NewWorkspace, Role, SessionStore, WorkspaceStore};
use berth_store_fs::FsStore;

const LONG: usize = 10_000;
const APPENDS: usize = 300;

fn main() {
    let home = tempfile::tempdir().unwrap();
    let store = FsStore::open(home.path()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let now = chrono::Utc::now();
    let ws = rt
        .block_on(WorkspaceStore::create(&store, NewWorkspace::default(), now))
        .unwrap();
    let new = |title: &str| NewSession {
        id: None,
        workspace: ws.id.clone(),
        title: title.to_owned(),
        provider: berth_core::config::ProviderKind::Claude,
        model: "claude-sonnet-4-5".into(),
        cwd: None,
        agent: None,
    };
    let short = rt
        .block_on(SessionStore::create(&store, new("short"), now))
        .unwrap();
    let long = rt
        .block_on(SessionStore::create(&store, new("long"), now))
        .unwrap();
    let msg = |i: usize| {
        let role = if i.is_multiple_of(2) {
            Role::User
        } else {
            Role::Assistant
        };
        Message::new(
            role,
            format!("message {i}: {}", "lorem ipsum dolor sit amet ".repeat(8)),
        )
    };
    rt.block_on(store.write_transcript(&short.id, &(0..10).map(msg).collect::<Vec<_>>()))
        .unwrap();
    rt.block_on(store.write_transcript(&long.id, &(0..LONG).map(msg).collect::<Vec<_>>()))
        .unwrap();
    let md = home
        .path()
        .join("workspaces")
        .join(ws.id.as_str())
        .join("sessions")
        .join(long.id.as_str())
        .join("session.md");
    let long_bytes = std::fs::metadata(&md).unwrap().len();

    let baseline_path = home.path().join("baseline.md");
    let mut baseline = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&baseline_path)
        .unwrap();
    let block = encode_message(&msg(7));

    let (mut t_short, mut t_long, mut t_raw) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..APPENDS {
        let m = msg(i);
        t_short.push(time(|| rt.block_on(store.append(&short.id, &m)).unwrap()));
        t_long.push(time(|| rt.block_on(store.append(&long.id, &m)).unwrap()));
        t_raw.push(time(|| {
            baseline.write_all(block.as_bytes()).unwrap();
            baseline.sync_data().unwrap();
        }));
    }
    let reads: Vec<Duration> = (0..20)
        .map(|_| {
            time(|| {
                let t = rt.block_on(store.read_transcript(&long.id)).unwrap();
                assert!(t.messages.len() >= LONG);
            })
        })
        .collect();
    let berth = env!("CARGO_BIN_EXE_berth");
    let show: Vec<Duration> = (0..10)
        .map(|_| {
            time(|| {
                let ok = Command::new(berth)
                    .args(["session", "show", long.id.as_str(), "--json"])
                    .env("BERTH_HOME", home.path())
                    .stdout(Stdio::null())
                    .status()
                    .unwrap()
                    .success();
                assert!(ok);
            })
        })
        .collect();

    println!(
        "berth session benchmark: {APPENDS} appends each, transcript of {LONG} messages = {:.1} MiB",
        long_bytes as f64 / 1048576.0
    );
    println!("{:<46} {:>10} {:>10}", "operation", "median", "p90");
    report("raw write + fdatasync (baseline)", &mut t_raw);
    let s = report("append to a 10-message transcript", &mut t_short);
    let l = report(
        &format!("append to a {LONG}-message transcript"),
        &mut t_long,
    );
    let r = report(
        &format!("read {LONG} messages (library)"),
        &mut reads.clone(),
    );
    report(
        &format!("berth session show --json ({LONG} messages)"),
        &mut show.clone(),
    );
    println!();
    println!(
        "ratio append(10,000) / append(10) = {:.2}  (target <= 1.5)",
        l / s
    );
    println!(
        "ratio append(10) / raw durable append = {:.2}",
        s / median(&mut t_raw)
    );
    println!(
        "read throughput = {:.0} MiB/s",
        long_bytes as f64 / 1048576.0 / (r / 1000.0)
    );
    at_once();
}

/// Appends made at once: `BENCH_AT_ONCE` sessions, one append each, started together.
fn at_once() {
    let n: usize = env_or("BENCH_AT_ONCE", 50);
    let rounds: usize = env_or("BENCH_ROUNDS", 20);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fs = FsStore::open(dir.path().join("fs")).unwrap();
    let url = format!("sqlite://{}", dir.path().join("berth.db").display());
    let sqlite = berth_store_sql::SqlStore::open(&url, &dir.path().join("sql")).unwrap();
    let mut floor = Vec::new();
    let mut on_fs = Vec::new();
    let mut on_sqlite = Vec::new();
    let fs_sessions = rt.block_on(sessions(&fs, n));
    let sql_sessions = rt.block_on(sessions(&sqlite, n));
    let files: Vec<std::path::PathBuf> = (0..n)
        .map(|i| dir.path().join(format!("floor-{i}.md")))
        .collect();
    let m = Message::new(Role::User, "a prompt of a turn ".repeat(10));
    for _ in 0..rounds {
        floor.push(time(|| {
            std::thread::scope(|scope| {
                for path in &files {
                    let bytes = encode_message(&m);
                    scope.spawn(move || {
                        let mut f = OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(path)
                            .unwrap();
                        f.write_all(bytes.as_bytes()).unwrap();
                        f.sync_data().unwrap();
                    });
                }
            })
        }));
        on_fs.push(time(|| rt.block_on(append_all(&fs, &fs_sessions, &m))));
        on_sqlite.push(time(|| rt.block_on(append_all(&sqlite, &sql_sessions, &m))));
    }
    println!();
    println!("{n} appends at once, one per session, {rounds} rounds: time until all are durable");
    println!("{:<46} {:>10} {:>10}", "store", "median", "p90");
    let f = report(
        &format!("{n} threads: write + fdatasync (floor)"),
        &mut floor,
    );
    let a = report("filesystem store", &mut on_fs);
    let b = report("SQLite", &mut on_sqlite);
    println!("ratio filesystem / floor = {:.2}", a / f);
    println!("ratio SQLite / floor = {:.2}", b / f);
}

async fn sessions<S: SessionStore + WorkspaceStore>(
    store: &S,
    n: usize,
) -> Vec<berth_core::SessionId> {
    let now = chrono::Utc::now();
    let ws = WorkspaceStore::create(store, NewWorkspace::default(), now)
        .await
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..n {
        let new = NewSession {
            id: None,
            workspace: ws.id.clone(),
            title: "at once".into(),
            provider: berth_core::config::ProviderKind::Claude,
            model: "claude-sonnet-4-5".into(),
            cwd: None,
            agent: None,
        };
        ids.push(SessionStore::create(store, new, now).await.unwrap().id);
    }
    ids
}

async fn append_all<S: SessionStore + Clone + 'static>(
    store: &S,
    ids: &[berth_core::SessionId],
    m: &Message,
) {
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (store, id, m) = (store.clone(), id.clone(), m.clone());
            tokio::spawn(async move { store.append(&id, &m).await.unwrap() })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn median(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

/// Prints median and p90 in ms; returns the median.
fn report(label: &str, v: &mut [Duration]) -> f64 {
    v.sort();
    let m = v[v.len() / 2].as_secs_f64() * 1000.0;
    let p90 = v[v.len() * 9 / 10].as_secs_f64() * 1000.0;
    println!("{label:<46} {m:>7.3} ms {p90:>7.3} ms");
    m
}
