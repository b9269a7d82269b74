//! berth on a database: several homes (standing in for several machines) on one SQLite file
//! or one Postgres database see each other's writes at once, racing processes on both homes
//! agree on one workspace per device, a writer SIGKILLed at random moments loses no write it
//! acknowledged, and hostile input gets the same refusals as on the filesystem store.
//!
//! Postgres comes from `TEST_BERTH_POSTGRES_URL` (`./test.sh` starts a throwaway server); each
//! test makes a database of its own. Without it these tests fail, saying how to get one.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::process::Stdio;

use berth_core::transcript::{Message, Role};
use berth_core::{
    NewSession, NewWorkspace, SessionId, StoragePath, StorageScope, WorkspaceId,
    config::ProviderKind,
};
use berth_store_sql::SqlStore;
use berth_testkit::{Jitter, child, child_role, kill_after_first_ack, postgres, wait_ok};
use support::Home;

/// A home whose records are in the database `url` names.
fn home_on(url: &str) -> Home {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        format!("[store]\nurl = {}\n", toml_string(url)),
    )
    .unwrap();
    home
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A new SQLite file's URL, in a folder that lives as long as the guard.
fn sqlite() -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("berth.db").display());
    (url, dir)
}

fn shared_database_is_seen_from_both_homes(url: &str) {
    let a = home_on(url);
    let b = home_on(url);
    assert_eq!(a.ok(&["store", "show"]).trim(), url);
    let id = a
        .ok(&["workspace", "create", "alpha", "-d", "made on a"])
        .trim()
        .to_owned();
    // Listed and shown by the other home at once.
    let listed = b.json(&["workspace", "list", "--json"]);
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["description"], "made on a");
    let shown = b.json(&["workspace", "show", "alpha", "--json"]);
    assert_eq!(shown["id"], id.as_str());
    // Each home keeps the workspace's folder on its own machine.
    let path_b = b.ok(&["workspace", "path", "alpha"]);
    assert!(
        path_b.trim().starts_with(&b.path().display().to_string()),
        "{path_b}"
    );
    // Sessions and transcripts.
    let sid = b
        .ok(&["session", "new", "-w", "alpha", "--title", "plan"])
        .trim()
        .to_owned();
    a.ok(&["session", "append", &sid, "hello from a"]);
    b.ok(&[
        "session",
        "append",
        &sid,
        "--role",
        "assistant",
        "hi from b",
    ]);
    let session = a.json(&["session", "show", &sid, "--json"]);
    let texts: Vec<_> = session["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, vec!["hello from a", "hi from b"]);
    // Storage of both scopes.
    a.ok(&[
        "workspace",
        "storage",
        "write",
        "alpha",
        "notes/a.md",
        "from a",
    ]);
    assert_eq!(
        b.ok(&["workspace", "storage", "read", "alpha", "notes/a.md"]),
        "from a"
    );
    b.ok(&["session", "storage", "write", &sid, "s.md", "from b"]);
    assert_eq!(
        a.ok(&["session", "storage", "read", &sid, "s.md"]),
        "from b"
    );
    // Bindings.
    a.ok(&["binding", "set", "laptop", "alpha"]);
    let bindings = b.json(&["binding", "list", "--json"]);
    assert_eq!(bindings[0]["device"], "laptop");
    assert_eq!(bindings[0]["workspace"], id.as_str());
    // A delete on one is a delete on the other.
    b.ok(&["workspace", "delete", "alpha", "--yes"]);
    let r = a.run(&["workspace", "show", "alpha"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert_eq!(a.run(&["session", "show", &sid]).code, 3);
    assert!(
        a.json(&["binding", "list", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn two_homes_on_one_sqlite_file_see_each_others_writes() {
    let (url, _dir) = sqlite();
    shared_database_is_seen_from_both_homes(&url);
}

#[test]
fn two_homes_on_one_postgres_database_see_each_others_writes() {
    shared_database_is_seen_from_both_homes(&postgres::fresh_database_blocking());
}

const RACERS: usize = 8;

/// Eight `berth binding resolve` of one new device, four on each home: one workspace.
fn racing_resolves(url: &str) {
    let homes = [home_on(url), home_on(url)];
    for round in 0..3 {
        let device = format!("phone-{round}");
        let children: Vec<_> = (0..RACERS)
            .map(|i| {
                let mut cmd = homes[i % 2].cmd(&["binding", "resolve", &device]);
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                cmd.spawn().unwrap()
            })
            .collect();
        let mut ids: Vec<String> = children
            .into_iter()
            .map(|c| wait_ok(c).trim().to_owned())
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 1, "round {round}: processes disagree: {ids:?}");
        for home in &homes {
            let all = home.json(&["workspace", "list", "--json"]);
            assert_eq!(
                all.as_array().unwrap().len(),
                round + 1,
                "round {round}: extra workspaces left behind"
            );
            let bindings = home.json(&["binding", "list", "--json"]);
            let bound = bindings
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["device"] == device.as_str())
                .unwrap();
            assert_eq!(bound["workspace"], ids[0].as_str());
        }
    }
}

#[test]
fn racing_resolves_across_two_homes_on_sqlite_make_one_workspace() {
    let (url, _dir) = sqlite();
    racing_resolves(&url);
}

#[test]
fn racing_resolves_across_two_homes_on_postgres_make_one_workspace() {
    racing_resolves(&postgres::fresh_database_blocking());
}

/// Child role: appends messages to the session named in the environment, writes a storage
/// file every fifth message and creates a workspace every seventh, printing `DONE <what>`
/// after each one is acknowledged, until it is killed.
#[test]
#[ignore = "a child role: run by its parent test"]
fn sql_writer_child() {
    child_role();
    let url = std::env::var("CRASH_STORE_URL").unwrap();
    let home = std::env::var("CRASH_HOME").unwrap();
    let sid = SessionId::new(std::env::var("CRASH_SESSION").unwrap()).unwrap();
    let ws = WorkspaceId::new(std::env::var("CRASH_WORKSPACE").unwrap()).unwrap();
    let round = std::env::var("CRASH_ROUND").unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use berth_core::{SessionStore, StorageStore, WorkspaceStore};
        let store = SqlStore::open(&url, std::path::Path::new(&home)).unwrap();
        let scope = StorageScope::Workspace(ws);
        for i in 0.. {
            let text = format!("r{round}-m{i}");
            store
                .append(&sid, &Message::new(Role::User, text.clone()))
                .await
                .unwrap();
            println!("DONE {text}");
            if i % 5 == 0 {
                let path = format!("r{round}/f{i}");
                store
                    .write(
                        &scope,
                        &StoragePath::new(&path).unwrap(),
                        path.as_bytes().to_vec(),
                    )
                    .await
                    .unwrap();
                println!("DONE file {path}");
            }
            if i % 7 == 0 {
                let id = format!("r{round}-w{i}");
                let new = NewWorkspace {
                    id: Some(WorkspaceId::new(&id).unwrap()),
                    ..NewWorkspace::default()
                };
                WorkspaceStore::create(&store, new, chrono::Utc::now())
                    .await
                    .unwrap();
                println!("DONE workspace {id}");
            }
        }
    });
}

/// SIGKILLs a writer at random moments, ten times; every acknowledged message, file and
/// workspace is there afterwards, the transcript holds exactly the messages in order (an
/// unacknowledged last one at most), and the database takes the next writer.
fn crash_loses_no_acknowledged_write(url: &str) {
    let home = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = SqlStore::open(url, home.path()).unwrap();
    let (ws, sid) = rt.block_on(async {
        use berth_core::{SessionStore, WorkspaceStore};
        let ws = WorkspaceStore::create(&store, NewWorkspace::default(), chrono::Utc::now())
            .await
            .unwrap();
        let s = SessionStore::create(
            &store,
            NewSession {
                id: None,
                workspace: ws.id.clone(),
                title: "crash".into(),
                provider: ProviderKind::Claude,
                model: "m".into(),
                cwd: None,
                agent: None,
            },
            chrono::Utc::now(),
        )
        .await
        .unwrap();
        (ws.id, s.id)
    });
    let mut jitter = Jitter::from_clock();
    let mut acked_per_round = Vec::new();
    for round in 0..10 {
        let mut cmd = child("sql_writer_child", "writer");
        cmd.env("CRASH_STORE_URL", url)
            .env("CRASH_HOME", home.path())
            .env("CRASH_SESSION", sid.as_str())
            .env("CRASH_WORKSPACE", ws.as_str())
            .env("CRASH_ROUND", round.to_string());
        let acked = kill_after_first_ack(cmd, &mut jitter, 300_000);
        rt.block_on(async {
            use berth_core::{SessionStore, StorageStore, WorkspaceStore};
            let messages: Vec<String> = store
                .read_transcript(&sid)
                .await
                .unwrap()
                .messages
                .into_iter()
                .map(|m| m.content)
                .collect();
            let acked_messages = acked.iter().filter(|a| !a.contains(' ')).count();
            // A write in flight when its client died may still commit a moment later (the
            // server had its COMMIT): at most one message more than acknowledged, checked at
            // the end; every acknowledged one is there now.
            let prefix = format!("r{round}-");
            let this_round: Vec<&String> =
                messages.iter().filter(|m| m.starts_with(&prefix)).collect();
            assert!(
                this_round.len() >= acked_messages,
                "round {round}: {acked_messages} acknowledged, {} stored",
                this_round.len()
            );
            acked_per_round.push(acked_messages);
            let scope = StorageScope::Workspace(ws.clone());
            for a in &acked {
                if let Some(path) = a.strip_prefix("file ") {
                    let bytes = store
                        .read(&scope, &StoragePath::new(path).unwrap())
                        .await
                        .unwrap_or_else(|e| panic!("acknowledged {path} lost: {e}"));
                    assert_eq!(bytes, path.as_bytes());
                }
                if let Some(id) = a.strip_prefix("workspace ") {
                    WorkspaceStore::load(&store, &WorkspaceId::new(id).unwrap())
                        .await
                        .unwrap_or_else(|e| panic!("acknowledged {id} lost: {e}"));
                }
            }
        });
    }
    // In the end: each round's messages in order, its acknowledged ones and at most one more,
    // and the rounds one after another.
    let messages: Vec<String> = rt.block_on(async {
        use berth_core::SessionStore;
        let t = store.read_transcript(&sid).await.unwrap();
        t.messages.into_iter().map(|m| m.content).collect()
    });
    let mut at = 0;
    for (round, acked) in acked_per_round.iter().enumerate() {
        let prefix = format!("r{round}-");
        let n = messages[at..]
            .iter()
            .take_while(|m| m.starts_with(&prefix))
            .count();
        assert!(
            n == *acked || n == acked + 1,
            "round {round}: {acked} acknowledged, {n} stored"
        );
        for (i, m) in messages[at..at + n].iter().enumerate() {
            assert_eq!(m, &format!("r{round}-m{i}"), "round {round}: out of order");
        }
        at += n;
    }
    assert_eq!(at, messages.len(), "nothing but the rounds' messages");
    assert!(acked_per_round.iter().all(|&n| n >= 1));
}

#[test]
fn a_killed_writer_loses_no_acknowledged_write_on_postgres() {
    crash_loses_no_acknowledged_write(&postgres::fresh_database_blocking());
}

#[test]
fn a_killed_writer_loses_no_acknowledged_write_on_sqlite() {
    let (url, _dir) = sqlite();
    crash_loses_no_acknowledged_write(&url);
}

/// What a command said, with what differs between homes and stores taken out.
fn outcome(home: &Home, args: &[&str]) -> (i32, String, String) {
    let r = home.run(args);
    let clean = |s: &str| s.replace(&home.path().display().to_string(), "<HOME>");
    (r.code, clean(&r.stdout), clean(&r.stderr))
}

/// The same hostile input on the filesystem store, SQLite and Postgres: the same exit status
/// and the same message, and every store still whole afterwards.
#[test]
fn hostile_input_gets_the_same_refusals_on_every_store() {
    let (sqlite_url, _dir) = sqlite();
    let homes = [
        ("fs", Home::new()),
        ("sqlite", home_on(&sqlite_url)),
        ("postgres", home_on(&postgres::fresh_database_blocking())),
    ];
    let injection = "x'); DROP TABLE workspaces; --";
    let mut cases: Vec<Vec<&str>> = vec![
        vec![
            "workspace",
            "create",
            "alpha",
            "--id",
            "alpha-1",
            "-d",
            injection,
        ],
        vec!["workspace", "create", injection],
        vec!["workspace", "create", "--id", injection],
        vec!["workspace", "create", "a%"],
        vec!["workspace", "create", "alpha"],
        vec!["workspace", "create", "beta", "--id", "alpha-1"],
        vec!["workspace", "show", injection],
        vec!["workspace", "show", "alph%"],
        vec!["workspace", "show", "alpha-%"],
        vec!["workspace", "show", "alpha_1"],
        vec![
            "workspace",
            "storage",
            "write",
            "alpha",
            "it's'; DROP TABLE files; --",
            "x",
        ],
        vec![
            "workspace",
            "storage",
            "read",
            "alpha",
            "it's'; DROP TABLE files; --",
        ],
        vec!["workspace", "storage", "read", "alpha", "%"],
        vec!["workspace", "storage", "write", "alpha", "dir/f", "x"],
        vec!["workspace", "storage", "read", "alpha", "dir"],
        vec!["workspace", "storage", "write", "alpha", "dir", "x"],
        vec!["workspace", "storage", "write", "alpha", "dir/f/g", "x"],
        vec!["workspace", "storage", "list", "alpha", "dir/f"],
        vec!["workspace", "storage", "list", "alpha", "nope"],
        vec!["workspace", "storage", "rm", "alpha", "dir"],
        vec!["workspace", "storage", "rm", "alpha", "nope"],
        vec!["binding", "set", injection, "alpha"],
        vec!["binding", "set", "dev", injection],
        vec!["binding", "resolve", "dev\u{7}"],
        vec!["session", "show", injection],
        vec!["session", "new", "-w", injection],
        vec!["workspace", "storage", "list", "alpha"],
        vec!["binding", "list"],
    ];
    for bad in [
        "..",
        "../x",
        "a/../../x",
        "/etc/passwd",
        "",
        ".",
        "C:\\x",
        "x/.berth-tmp-1",
    ] {
        cases.push(vec!["workspace", "storage", "read", "alpha", bad]);
        cases.push(vec!["workspace", "storage", "write", "alpha", bad, "x"]);
        cases.push(vec!["workspace", "show", bad]);
    }
    for args in &cases {
        let (_, fs_home) = &homes[0];
        let want = outcome(fs_home, args);
        for (name, home) in &homes[1..] {
            let got = outcome(home, args);
            assert_eq!(got, want, "{name}: berth {args:?}");
        }
    }
    for (name, home) in &homes {
        let listed = home.json(&["workspace", "list", "--json"]);
        let names: Vec<_> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["name"].as_str().unwrap_or("").to_owned())
            .collect();
        assert_eq!(names, vec!["alpha"], "{name}: the store is whole");
        let ws = home.json(&["workspace", "show", "alpha", "--json"]);
        assert_eq!(ws["description"], injection, "{name}");
    }
}

/// A home on the files with a bit of everything: workspaces (one with a config of its own),
/// files in folders, sessions in three states with transcripts and storage, a binding.
fn populated_fs_home() -> (Home, String) {
    let home = Home::new();
    let id = home
        .ok(&["workspace", "create", "alpha", "-d", "the first"])
        .trim()
        .to_owned();
    home.ok(&["workspace", "create", "beta"]);
    // alpha holds a block of ports, beta none yet: a migration keeps both as they are.
    home.ok(&["workspace", "ports", "alpha"]);
    std::fs::write(
        home.workspace_dir(&id).join("config.toml"),
        "# mine\nmodel = \"m\"\n",
    )
    .unwrap();
    home.ok(&[
        "workspace",
        "storage",
        "write",
        "alpha",
        "context.md",
        "# ctx",
    ]);
    home.ok(&[
        "workspace",
        "storage",
        "write",
        "alpha",
        "a/b/c.bin",
        "deep",
    ]);
    let sid = home
        .ok(&["session", "new", "-w", "alpha", "--title", "plan"])
        .trim()
        .to_owned();
    home.ok(&["session", "append", &sid, "hello"]);
    home.ok(&["session", "append", &sid, "--role", "assistant", "hi"]);
    home.ok(&["session", "storage", "write", &sid, "n.md", "note"]);
    // Sessions in states a turn leaves them in, set through the store.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        use berth_core::{SessionStatus, SessionStore};
        let store = berth_store_fs::FsStore::open(home.path()).unwrap();
        for (title, path) in [
            (
                "failed",
                &[SessionStatus::Running, SessionStatus::Failed][..],
            ),
            ("closed", &[SessionStatus::Closed][..]),
        ] {
            let s = SessionStore::create(
                &store,
                NewSession {
                    id: Some(SessionId::new(title).unwrap()),
                    workspace: WorkspaceId::new(&id).unwrap(),
                    title: title.into(),
                    provider: ProviderKind::Gemini,
                    model: "g".into(),
                    cwd: Some("/x".into()),
                    // One an ACP agent worked in: the migration carries its name.
                    agent: (title == "closed").then(|| "claude-code".to_owned()),
                },
                chrono::Utc::now(),
            )
            .await
            .unwrap();
            store
                .append(&s.id, &Message::new(Role::User, title))
                .await
                .unwrap();
            for step in path {
                store
                    .set_status(&s.id, *step, chrono::Utc::now())
                    .await
                    .unwrap();
            }
        }
    });
    home.ok(&["binding", "set", "laptop", "alpha"]);
    (home, sid)
}

/// Everything a person can see of a home, for "the same records" comparisons.
fn everything(home: &Home, sids: &[&str], homes: &[&Home]) -> Vec<serde_json::Value> {
    let mut all = vec![
        home.json(&["workspace", "list", "--json"]),
        home.json(&["session", "list", "--json"]),
        home.json(&["binding", "list", "--json"]),
        home.json(&["workspace", "storage", "list", "alpha", "a/b", "--json"]),
        serde_json::json!(home.ok(&["workspace", "storage", "read", "alpha", "context.md"])),
    ];
    for sid in sids {
        let mut s = home.json(&["session", "show", sid, "--json"]);
        s.as_object_mut().unwrap().remove("recovery_file");
        all.push(s);
    }
    // Workspace folders are each home's own (and a session records the folder it began in).
    let mut text = serde_json::to_string(&all).unwrap();
    for h in homes {
        text = text.replace(&h.path().display().to_string(), "<HOME>");
    }
    serde_json::from_str(&text).unwrap()
}

/// Asserts two homes show the same, item by item (so a failure names the item).
fn assert_same(a: &[serde_json::Value], b: &[serde_json::Value]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x, y);
    }
}

fn migrate_round_trip(url: &str) {
    let (fs, sid) = populated_fs_home();
    let sids = [sid.as_str(), "failed", "closed"];
    // A dry run writes nothing, and makes no database.
    let dry = fs.run(&["store", "migrate", "--to", url, "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(dry.stdout.contains("would copy"), "{}", dry.stdout);
    if let Some(file) = url.strip_prefix("sqlite://") {
        assert!(
            !std::path::Path::new(file).exists(),
            "a dry run made {file}"
        );
    }
    let first = fs.run(&["store", "migrate", "--to", url]);
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    assert!(first.stderr.contains("verified"), "{}", first.stderr);
    let db = home_on(url);
    let homes = [&fs, &db];
    assert_same(
        &everything(&db, &sids, &homes),
        &everything(&fs, &sids, &homes),
    );
    let closed = db.json(&["session", "show", "closed", "--json"]);
    assert_eq!(closed["session"]["agent"], "claude-code", "{closed}");
    let config = db.json(&["config", "show", "--workspace", "alpha", "--json"]);
    assert_eq!(config["config"]["model"], "m", "{config}");
    // Again: nothing to copy.
    let again = fs.run(&["store", "migrate", "--to", url]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(!again.stdout.contains("copied"), "{}", again.stdout);
    assert!(again.stderr.contains("already there"), "{}", again.stderr);
    // Newer messages come over; a file the target holds differently is a conflict, kept.
    fs.ok(&["session", "append", &sid, "later"]);
    db.ok(&[
        "workspace",
        "storage",
        "write",
        "alpha",
        "context.md",
        "changed in db",
    ]);
    let third = fs.run(&["store", "migrate", "--to", url]);
    assert_eq!(third.code, 6, "{}\n{}", third.stdout, third.stderr);
    assert!(third.stdout.contains("updated"), "{}", third.stdout);
    assert!(third.stdout.contains("conflict"), "{}", third.stdout);
    assert_eq!(
        db.json(&["session", "show", &sid, "--json"])["messages"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        db.ok(&["workspace", "storage", "read", "alpha", "context.md"]),
        "changed in db"
    );
    // And back: the database into a new home's files.
    let back = Home::new();
    std::fs::copy(
        db.path().join("config.toml"),
        back.path().join("config.toml"),
    )
    .unwrap();
    let out = back.run(&["store", "migrate", "--to", "fs"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    std::fs::remove_file(back.path().join("config.toml")).unwrap();
    assert_eq!(
        back.ok(&["store", "show"]).trim(),
        format!("the files under {}", back.path().display())
    );
    let homes = [&fs, &db, &back];
    assert_same(
        &everything(&back, &sids, &homes),
        &everything(&db, &sids, &homes),
    );
}

#[test]
fn store_migrate_to_sqlite_and_back_is_verified_and_idempotent() {
    let (url, _dir) = sqlite();
    migrate_round_trip(&url);
}

#[test]
fn store_migrate_to_postgres_and_back_is_verified_and_idempotent() {
    migrate_round_trip(&postgres::fresh_database_blocking());
}
