//! Benchmark: transcript appends are O(1), and reading a long transcript is fast.
//!
//! `cargo bench -p berth-cli --bench sessions`
//!
//! Appends one message to a transcript of 10 messages and to one of 10,000, interleaved so both
//! see the same machine state; the ratio of their medians must stay near 1 (issue 3: at most
//! 1.5). The in-run baseline is the floor any durable append pays: `write` + `fdatasync` of the
//! same bytes on a plain file in the same folder. Then reads of the 10,000-message transcript,
//! through the library and through `berth session show --json`.

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
