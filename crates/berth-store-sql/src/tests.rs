//! The conformance suite on SQLite (a fresh file per test) and on Postgres (a fresh database
//! per test, in the server `TEST_BERTH_POSTGRES_URL` names; `./test.sh` starts one), and the
//! store's own checks: migrations, refusals, URLs.

use std::sync::Arc;

use berth_core::conformance::Backend;

use super::*;

fn backend(store: SqlStore) -> Backend {
    let store = Arc::new(store);
    Backend {
        workspaces: store.clone(),
        bindings: store.clone(),
        storage: store.clone(),
        sessions: store,
    }
}

fn sqlite() -> (SqlStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("berth.db").display());
    (SqlStore::open(&url, dir.path()).unwrap(), dir)
}

mod on_sqlite {
    fn fresh() -> (berth_core::conformance::Backend, tempfile::TempDir) {
        let (store, dir) = super::sqlite();
        (super::backend(store), dir)
    }
    berth_core::conformance_tests!(fresh());
}

use berth_testkit::postgres::{fresh_database as fresh_postgres, with_database};

mod on_postgres {
    macro_rules! pg_conformance {
        ($($name:ident),*) => {
            $(
                #[tokio::test]
                async fn $name() {
                    let url = super::fresh_postgres().await;
                    let home = tempfile::tempdir().unwrap();
                    let store = super::SqlStore::open(&url, home.path()).unwrap();
                    berth_core::conformance::$name(super::backend(store)).await;
                }
            )*
        };
    }
    pg_conformance!(
        workspace_round_trip,
        workspace_uniqueness,
        missing_things_are_not_found,
        delete_frees_id_and_name,
        workspace_config,
        workspace_set_git,
        workspace_archive,
        access_time_and_gc,
        bindings,
        storage,
        manager_resolution,
        manager_device_and_delete,
        manager_gc_and_default,
        session_lifecycle,
        deleting_a_workspace_deletes_its_sessions,
        manager_sessions,
        paging,
        port_blocks,
        kept_port_blocks,
        racing_port_assignments,
        session_usage,
        session_turn_counts,
        session_turns
    );
}

#[test]
fn passwords_never_show() {
    assert_eq!(
        redact("postgres://berth:s3cret@db.example:5432/berth"),
        "postgres://berth:***@db.example:5432/berth"
    );
    assert_eq!(
        redact("postgres://berth@db/berth?password=s3cret&sslmode=require"),
        "postgres://berth@db/berth?password=***&sslmode=require"
    );
    assert_eq!(
        redact("sqlite:///var/lib/berth.db"),
        "sqlite:///var/lib/berth.db"
    );
    assert_eq!(
        redact("postgres://u:p@w@host/db"),
        "postgres://u:***@host/db",
        "the last @ ends the user info"
    );
}

#[test]
fn urls_name_their_database() {
    assert_eq!(Kind::of("sqlite:///x.db"), Some(Kind::Sqlite));
    assert_eq!(Kind::of("postgres://h/db"), Some(Kind::Postgres));
    assert_eq!(Kind::of("postgresql://h/db"), Some(Kind::Postgres));
    assert_eq!(Kind::of("mysql://h/db"), None);
    assert_eq!(Kind::of("/just/a/path"), None);
    assert_eq!(
        with_database("postgres://u@h:5/postgres?sslmode=disable", "x"),
        "postgres://u@h:5/x?sslmode=disable"
    );
    assert_eq!(with_database("postgres://u@h:5", "x"), "postgres://u@h:5/x");
}

#[tokio::test]
async fn an_unreachable_database_is_a_clear_error_without_the_password() {
    let home = tempfile::tempdir().unwrap();
    // A port nothing listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let url = format!("postgres://berth:hunter2@127.0.0.1:{port}/berth");
    let err = SqlStore::open(&url, home.path()).err().unwrap();
    let msg = err.to_string();
    assert!(!msg.contains("hunter2"), "{msg}");
    assert!(
        msg.contains(&format!("postgres://berth:***@127.0.0.1:{port}/berth")),
        "{msg}"
    );
    assert_eq!(err.kind(), berth_core::ErrorKind::Io);

    let missing_dir = home.path().join("no/such/folder/berth.db");
    let err = SqlStore::open(&format!("sqlite://{}", missing_dir.display()), home.path())
        .err()
        .unwrap();
    assert!(err.to_string().contains("does not exist"), "{err}");

    let err = SqlStore::open("mysql://u:pw@h/db", home.path())
        .err()
        .unwrap();
    assert_eq!(err.kind(), berth_core::ErrorKind::Invalid);
    assert!(!err.to_string().contains("pw@"), "{err}");
}

#[tokio::test]
async fn a_sqlite_file_is_created_in_wal_mode_and_reopened() {
    let (store, dir) = sqlite();
    let m = store.manager();
    m.create(berth_core::NewWorkspace::default()).await.unwrap();
    assert!(dir.path().join("berth.db").is_file());
    let row = store
        .pool()
        .opt("PRAGMA journal_mode", &[])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.text(0).unwrap(), "wal");
    let url = format!("sqlite://{}", dir.path().join("berth.db").display());
    let again = SqlStore::open(&url, dir.path()).unwrap();
    assert_eq!(again.manager().list().await.unwrap().len(), 1);
}

async fn newer_is_refused(url: &str, home: &std::path::Path) {
    let store = SqlStore::open(url, home).unwrap();
    store
        .pool()
        .exec(
            "UPDATE berth_schema SET version = $1",
            &[db::Arg::Int(SCHEMA_VERSION + 1)],
        )
        .await
        .unwrap();
    let err = SqlStore::open(url, home).err().unwrap();
    assert_eq!(err.kind(), berth_core::ErrorKind::Refused, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("newer than this berth"), "{msg}");
}

#[tokio::test]
async fn a_database_newer_than_the_binary_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("berth.db").display());
    newer_is_refused(&url, dir.path()).await;
    newer_is_refused(&fresh_postgres().await, dir.path()).await;
}

/// Eight stores opening one new database at once: every one opens, the schema is made once.
async fn racing_opens(url: &str) {
    let home = tempfile::tempdir().unwrap();
    let opens: Vec<_> = (0..8)
        .map(|_| {
            let (url, home) = (url.to_owned(), home.path().to_owned());
            std::thread::spawn(move || SqlStore::open(&url, &home).map(|_| ()))
        })
        .collect();
    for o in opens {
        o.join().unwrap().unwrap();
    }
    let store = SqlStore::open(url, home.path()).unwrap();
    let rows = store
        .pool()
        .all("SELECT version FROM berth_schema", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].int(0).unwrap(), SCHEMA_VERSION);
}

#[tokio::test]
async fn racing_first_opens_migrate_once() {
    let dir = tempfile::tempdir().unwrap();
    racing_opens(&format!("sqlite://{}", dir.path().join("new.db").display())).await;
    racing_opens(&fresh_postgres().await).await;
}

#[tokio::test]
async fn postgres_refuses_nul_in_text_like_an_invalid_value() {
    let store = SqlStore::open(&fresh_postgres().await, std::path::Path::new("/tmp")).unwrap();
    let err = store
        .manager()
        .create(berth_core::NewWorkspace {
            description: "a\0b".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), berth_core::ErrorKind::Invalid, "{err}");
}

/// Each append was a transaction of its own, each behind SQLite's one write lock and its
/// sync: fifty turns' prompts made fifty commits in a row. Appends made at once now commit
/// together; each is still committed when it returns, in order within its session, and one
/// that fails (a closed session) fails alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_appends_made_at_once_commit_together_and_fail_alone() {
    use berth_core::transcript::{Message, Role};
    use berth_core::{NewSession, NewWorkspace, SessionStatus, SessionStore, WorkspaceStore};
    let (store, _dir) = sqlite();
    let now = chrono::Utc::now();
    let ws = WorkspaceStore::create(
        &store,
        NewWorkspace {
            id: Some(WorkspaceId::new("w1").unwrap()),
            name: Some(berth_core::WorkspaceName::new("one").unwrap()),
            ..NewWorkspace::default()
        },
        now,
    )
    .await
    .unwrap();
    let mut sessions = Vec::new();
    for _ in 0..10 {
        let new = NewSession {
            id: None,
            workspace: ws.id.clone(),
            title: String::new(),
            provider: berth_core::config::ProviderKind::Claude,
            model: "m".into(),
            cwd: None,
            agent: None,
        };
        sessions.push(SessionStore::create(&store, new, now).await.unwrap());
    }
    let closed = sessions[9].id.clone();
    store
        .set_status(&closed, SessionStatus::Closed, now)
        .await
        .unwrap();
    let rounds = 5;
    let mut tasks = Vec::new();
    for s in &sessions {
        let (store, id) = (store.clone(), s.id.clone());
        tasks.push(tokio::spawn(async move {
            let mut results = Vec::new();
            for n in 0..rounds {
                let m = Message::new(Role::User, format!("{id} #{n}"));
                results.push(store.append(&id, &m).await);
            }
            (id, results)
        }));
    }
    for task in tasks {
        let (id, results) = task.await.unwrap();
        let messages = store.read_transcript(&id).await.unwrap().messages;
        if id == closed {
            assert!(results.iter().all(|r| matches!(r, Err(Error::Refused(_)))));
            assert!(messages.is_empty());
        } else {
            assert!(results.iter().all(Result::is_ok), "{results:?}");
            let texts: Vec<String> = messages.into_iter().map(|m| m.content).collect();
            let wanted: Vec<String> = (0..rounds).map(|n| format!("{id} #{n}")).collect();
            assert_eq!(texts, wanted);
        }
    }
    let commits = store
        .appends()
        .commits
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        commits < 10 * rounds,
        "{commits} commits for {} appends",
        10 * rounds
    );
}

/// A database of schema version 6, sessions made before agents were recorded, comes up to 8
/// on opening: its sessions read as berth's own (no agent), and a new one keeps its agent.
#[tokio::test]
async fn a_version_6_database_gets_the_agent_column() {
    use berth_core::{NewSession, NewWorkspace, SessionStore, WorkspaceStore};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("berth.db").display());
    let now = chrono::Utc::now();
    let new = |agent: Option<&str>| NewSession {
        id: None,
        workspace: WorkspaceId::new("w1").unwrap(),
        title: String::new(),
        provider: berth_core::config::ProviderKind::Claude,
        model: "m".into(),
        cwd: None,
        agent: agent.map(str::to_owned),
    };
    let before = {
        let store = SqlStore::open(&url, dir.path()).unwrap();
        let ws = NewWorkspace {
            id: Some(WorkspaceId::new("w1").unwrap()),
            ..NewWorkspace::default()
        };
        WorkspaceStore::create(&store, ws, now).await.unwrap();
        let made = SessionStore::create(&store, new(None), now).await.unwrap();
        // Back to version 6's tables, as a berth before this one left them.
        let pool = store.pool();
        pool.exec("ALTER TABLE sessions DROP COLUMN agent", &[])
            .await
            .unwrap();
        // And before lands (version 8).
        pool.exec("DROP TABLE lands", &[]).await.unwrap();
        pool.exec("UPDATE berth_schema SET version = 6", &[])
            .await
            .unwrap();
        pool.close().await;
        made
    };
    let store = SqlStore::open(&url, dir.path()).unwrap();
    // Brought up through version 8: its lands table is there again, empty.
    assert!(store.lands().list().await.unwrap().is_empty());
    assert!(store.lands().insert("0123456789ab", 1, "{}").await.unwrap());
    let loaded = SessionStore::load(&store, &before.id).await.unwrap();
    assert_eq!(loaded, before);
    assert_eq!(loaded.agent, None);
    let made = SessionStore::create(&store, new(Some("claude-code")), now)
        .await
        .unwrap();
    let loaded = SessionStore::load(&store, &made.id).await.unwrap();
    assert_eq!(loaded.agent.as_deref(), Some("claude-code"));
}

/// Every listener of a process shares one connection, outside the pool: twenty of them
/// (more than the pool's sixteen connections, which each used to keep) leave the pool free,
/// and each hears the run filed, by its id.
#[tokio::test]
async fn listeners_share_one_connection_and_each_hears() {
    use std::time::Duration;
    let url = fresh_postgres().await;
    let home = tempfile::tempdir().unwrap();
    let runs = SqlStore::open(&url, home.path()).unwrap().runs();
    let mut listeners = Vec::new();
    for _ in 0..20 {
        let opened = tokio::time::timeout(Duration::from_secs(10), runs.listen_changes()).await;
        listeners.push(
            opened
                .expect("a listener waited for the pool")
                .unwrap()
                .unwrap(),
        );
    }
    let run = RunColumns {
        id: "r-heard",
        created_ns: 1,
        state: "queued",
        pooled: true,
        node: None,
        agents: 1,
    };
    let filed = tokio::time::timeout(Duration::from_secs(10), runs.insert(&run, "{}")).await;
    assert!(filed.expect("the pool had no connection left").unwrap());
    for listener in &mut listeners {
        let heard = tokio::time::timeout(Duration::from_secs(10), listener.next()).await;
        assert_eq!(
            heard.expect("a listener heard nothing").unwrap().as_deref(),
            Some("r-heard")
        );
    }
}

/// The listening connection cut by the server (`pg_terminate_backend`, as a restart or a
/// network fault would): the listener is told notices may have been missed, and hears the
/// runs filed once it is made again.
#[tokio::test]
async fn a_listener_cut_off_says_so_and_hears_again() {
    use sqlx::Connection;
    use std::time::Duration;
    let url = fresh_postgres().await;
    let home = tempfile::tempdir().unwrap();
    let runs = SqlStore::open(&url, home.path()).unwrap().runs();
    let mut listener = runs.listen_changes().await.unwrap().unwrap();
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    let told = tokio::time::timeout(Duration::from_secs(10), listener.next()).await;
    assert_eq!(told.expect("the cut was never told").unwrap(), None);
    let run = RunColumns {
        id: "r-after",
        created_ns: 1,
        state: "queued",
        pooled: true,
        node: None,
        agents: 1,
    };
    let heard = tokio::time::timeout(Duration::from_secs(20), async {
        // Filed again until heard: a notice sent before the connection is made again is lost,
        // which is what the listener's `None` says.
        let mut n = 0;
        loop {
            let id = format!("r-after-{n}");
            n += 1;
            let filed = runs.insert(&RunColumns { id: &id, ..run }, "{}").await;
            assert!(filed.unwrap());
            let next = tokio::time::timeout(Duration::from_secs(2), async {
                loop {
                    if let Some(run) = listener.next().await.unwrap() {
                        return run;
                    }
                }
            })
            .await;
            if let Ok(run) = next {
                return run;
            }
        }
    })
    .await;
    assert!(
        heard
            .expect("nothing heard after the cut")
            .starts_with("r-after-")
    );
    let _ = admin.close().await;
}
