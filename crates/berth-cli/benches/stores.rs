//! Benchmark: the three stores side by side on 10,000 workspaces: the filesystem store,
//! SQLite and Postgres.
//!
//! `cargo bench -p berth-cli --bench stores`, with `TEST_BERTH_POSTGRES_URL` naming a Postgres
//! server (`eval "$(tests/postgres.sh start)"` starts a throwaway one; `./test.sh` does not run
//! benchmarks). `BENCH_WORKSPACES` changes the count.
//!
//! Two views of each operation, as medians (and the 90th percentile) of repeated runs:
//! - **process**: the wall time of a whole `berth` command, as a person or a script sees it:
//!   start-up, opening the store (for a database: connecting and checking its schema), the
//!   work, exit. `berth --version` is the floor.
//! - **library**: the store call alone, in a process that has the store open (a server).
//!
//! Every write is durable as acknowledged: the filesystem store fsyncs, SQLite commits with
//! `synchronous = FULL`, Postgres with its default synchronous commit.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth_core::transcript::{Message, Role};
use berth_core::{NewSession, NewWorkspace, WorkspaceManager, WorkspaceName, config::ProviderKind};
use berth_store_fs::FsStore;
use berth_store_sql::SqlStore;

struct Backend {
    name: &'static str,
    home: tempfile::TempDir,
    manager: WorkspaceManager,
}

fn main() {
    let count: usize = std::env::var("BENCH_WORKSPACES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut backends = Vec::new();
    let fs_home = tempfile::tempdir().unwrap();
    backends.push(Backend {
        name: "fs",
        manager: FsStore::open(fs_home.path()).unwrap().manager(),
        home: fs_home,
    });
    let sqlite_home = tempfile::tempdir().unwrap();
    let sqlite_url = format!("sqlite://{}", sqlite_home.path().join("berth.db").display());
    backends.push(backend_on("sqlite", sqlite_home, &sqlite_url));
    match std::env::var(berth_testkit::postgres::URL_VAR) {
        Ok(_) => {
            let url = rt.block_on(berth_testkit::postgres::fresh_database());
            backends.push(backend_on("postgres", tempfile::tempdir().unwrap(), &url));
        }
        Err(_) => eprintln!(
            "NOTE: {} is not set, so there is no Postgres column; `eval \"$(tests/postgres.sh start)\"` first",
            berth_testkit::postgres::URL_VAR
        ),
    }
    let session_len = 1_000;
    for b in &backends {
        let start = Instant::now();
        rt.block_on(populate(&b.manager, count, session_len));
        eprintln!(
            "{}: populated {count} workspaces and a session of {session_len} messages in {:.1} s",
            b.name,
            start.elapsed().as_secs_f64()
        );
    }

    let mut rows: Vec<(String, Vec<(Duration, Duration)>)> = Vec::new();
    let mut row = |label: &str, f: &mut dyn FnMut(&Backend) -> (Duration, Duration)| {
        let cells = backends.iter().map(&mut *f).collect();
        rows.push((label.to_owned(), cells));
    };
    let berth = env!("CARGO_BIN_EXE_berth");
    let list_label = format!("process: workspace list ({count})");
    row("process: berth --version (floor)", &mut |b| {
        measure(30, || run(berth, b.home.path(), &["--version"]))
    });
    row(&list_label, &mut |b| {
        measure(10, || run(berth, b.home.path(), &["workspace", "list"]))
    });
    let probe = format!("ws-{}", count / 2 / 2 * 2);
    row("process: workspace show", &mut |b| {
        measure(30, || {
            run(berth, b.home.path(), &["workspace", "show", &probe])
        })
    });
    let mut n = 0;
    row("process: workspace create", &mut |b| {
        measure(30, || {
            n += 1;
            run(
                berth,
                b.home.path(),
                &["workspace", "create", &format!("new-{n}")],
            )
        })
    });
    row("process: session append", &mut |b| {
        measure(30, || {
            run(
                berth,
                b.home.path(),
                &["session", "append", "bench-session", "one more line"],
            )
        })
    });
    let lib_list = format!("library: list {count}");
    row(&lib_list, &mut |b| {
        measure(10, || {
            assert!(rt.block_on(b.manager.list()).unwrap().len() >= count);
        })
    });
    row("library: load one", &mut |b| {
        let name = WorkspaceName::new(&probe).unwrap();
        measure(200, || {
            rt.block_on(b.manager.workspaces().load_by_name(&name))
                .unwrap();
        })
    });
    let mut m = 0;
    row("library: create", &mut |b| {
        measure(100, || {
            m += 1;
            let new = NewWorkspace {
                name: Some(WorkspaceName::new(format!("lib-{m}")).unwrap()),
                ..NewWorkspace::default()
            };
            rt.block_on(b.manager.create(new)).unwrap();
        })
    });
    let sid = berth_core::SessionId::new("bench-session").unwrap();
    let msg = Message::new(Role::Assistant, "a line of an answer");
    row(&format!("library: append (to {session_len}+)"), &mut |b| {
        measure(200, || {
            rt.block_on(b.manager.sessions().append(&sid, &msg))
                .unwrap();
        })
    });
    row("library: read transcript", &mut |b| {
        measure(30, || {
            rt.block_on(b.manager.sessions().read_transcript(&sid))
                .unwrap();
        })
    });

    println!(
        "berth store benchmark: {count} workspaces, {} cores; median (p90) in ms",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    print!("{:<34}", "");
    for b in &backends {
        print!(" {:>17}", b.name);
    }
    println!();
    for (label, cells) in &rows {
        print!("{label:<34}");
        for (median, p90) in cells {
            print!(" {:>17}", format!("{:.2} ({:.2})", ms(*median), ms(*p90)));
        }
        println!();
    }
}

fn backend_on(name: &'static str, home: tempfile::TempDir, url: &str) -> Backend {
    std::fs::write(
        home.path().join("config.toml"),
        format!("[store]\nurl = \"{url}\"\n"),
    )
    .unwrap();
    let manager = SqlStore::open(url, home.path()).unwrap().manager();
    Backend {
        name,
        home,
        manager,
    }
}

/// `count` workspaces (every other one named, as in real use), eight at a time, and a session
/// of `session_len` messages.
async fn populate(m: &WorkspaceManager, count: usize, session_len: usize) {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..count {
        if tasks.len() >= 8 {
            tasks.join_next().await.unwrap().unwrap();
        }
        let m = m.clone();
        tasks.spawn(async move {
            let name = (i % 2 == 0).then(|| WorkspaceName::new(format!("ws-{i}")).unwrap());
            let new = NewWorkspace {
                name,
                description: format!("workspace number {i}"),
                ..NewWorkspace::default()
            };
            m.create(new).await.unwrap();
        });
    }
    while let Some(t) = tasks.join_next().await {
        t.unwrap();
    }
    let ws = m
        .workspaces()
        .load_by_name(&WorkspaceName::new("ws-0").unwrap())
        .await
        .unwrap();
    m.sessions()
        .create(
            NewSession {
                id: Some(berth_core::SessionId::new("bench-session").unwrap()),
                workspace: ws.id,
                title: "bench".into(),
                provider: ProviderKind::Claude,
                model: "m".into(),
                cwd: None,
                agent: None,
            },
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let messages: Vec<Message> = (0..session_len)
        .map(|i| Message::new(Role::User, format!("message {i}: some words of a prompt")))
        .collect();
    m.sessions()
        .write_transcript(
            &berth_core::SessionId::new("bench-session").unwrap(),
            &messages,
        )
        .await
        .unwrap();
}

fn run(berth: &str, home: &Path, args: &[&str]) {
    let out = Command::new(berth)
        .args(args)
        .current_dir(home)
        .env("BERTH_HOME", home)
        .env_remove("BERTH_STORE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "berth {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn measure(runs: usize, f: impl FnMut()) -> (Duration, Duration) {
    let times = common::sorted_times(runs, f);
    (times[runs / 2], times[runs * 9 / 10])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
