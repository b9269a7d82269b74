//! The conformance suite of kept runs: every rule of [`RunStore`] held on each backend
//! (files, SQLite, Postgres). The Postgres tests need the server `test.sh` starts, and fail
//! without it.

use super::*;
use berth_ops::ErrorKind;

use crate::event::AgentState;

impl StoredRequest {
    /// A run of one berth agent in a workspace `w`, for tests.
    pub(crate) fn one_agent(task: &str) -> StoredRequest {
        StoredRequest {
            task: task.into(),
            repository: None,
            workspace: Some("w".into()),
            agents: vec![crate::agents::AgentSpec::Berth { model: None }],
            name: None,
            allow: vec![],
            allow_all: false,
            check: None,
            check_timeout_secs: 1,
            agent_writable: vec![],
            push: false,
            budget: Default::default(),
            pool: None,
            ask_timeout_secs: None,
            batch: None,
        }
    }
}

/// A lease short enough for a test to see it lapse.
const LEASE_SECS: &str = "1";

struct Place {
    _home: tempfile::TempDir,
    ops: Ops,
}

fn place(url: Option<String>) -> Place {
    let home = tempfile::tempdir().unwrap();
    let mut env = vec![("BERTH_POOL__LEASE_SECS".to_owned(), LEASE_SECS.to_owned())];
    if let Some(url) = url {
        env.push(("BERTH_STORE_URL".to_owned(), url));
    }
    let ops = berth_ops::open(home.path(), &env).unwrap();
    Place { _home: home, ops }
}

fn sqlite(home: &Path) -> String {
    format!("sqlite://{}", home.join("berth.db").display())
}

async fn each_backend(test: impl AsyncFn(RunStore, &'static str)) {
    let files = place(None);
    test(RunStore::open(&files.ops).await.unwrap(), "files").await;
    let dir = tempfile::tempdir().unwrap();
    let lite = place(Some(sqlite(dir.path())));
    test(RunStore::open(&lite.ops).await.unwrap(), "sqlite").await;
    let pg = place(Some(berth_testkit::postgres::fresh_database().await));
    test(RunStore::open(&pg.ops).await.unwrap(), "postgres").await;
}

fn started(session: &str) -> RunEvent {
    RunEvent::Started {
        agent: 0,
        label: "berth".into(),
        workspace: "ws-1".into(),
        workspace_name: "w-1".into(),
        session: session.into(),
        worktree: "/nowhere".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_found_listed_and_resolved() {
    each_backend(async |store, name| {
        let a = store
            .create(StoredRequest::one_agent("first"))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let b = store
            .create(StoredRequest::one_agent("second"))
            .await
            .unwrap();
        assert_eq!(a.state, RunState::Starting, "{name}");
        let listed: Vec<String> = store
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.unwrap().request.task)
            .collect();
        assert_eq!(listed, ["second", "first"], "{name}: newest first");
        assert_eq!(store.resolve(a.id.as_str()).await.unwrap(), a.id, "{name}");
        assert_eq!(store.resolve(&b.id.as_str()[..8]).await.unwrap(), b.id);
        assert!(matches!(
            store.resolve("abcdef012345").await,
            Err(KeptError::NotFound(_))
        ));
        assert!(matches!(
            store.resolve("../etc").await,
            Err(KeptError::BadId(_))
        ));
        // Just made: starting, not failed, though no supervisor holds it yet.
        assert_eq!(store.load(&a.id).await.unwrap().state, RunState::Starting);

        // Pages, newest first: each cut where the one before ended, none twice.
        let c = store
            .create(StoredRequest::one_agent("third"))
            .await
            .unwrap();
        let first = store.page(2, None).await.unwrap();
        let tasks = |p: &RunPage| -> Vec<String> {
            p.runs
                .iter()
                .map(|r| r.as_ref().unwrap().request.task.clone())
                .collect()
        };
        assert_eq!(tasks(&first), ["third", "second"], "{name}");
        let second = store.page(2, first.next.as_deref()).await.unwrap();
        assert_eq!(tasks(&second), ["first"], "{name}");
        assert_eq!(second.next, None, "{name}: the last page says so");
        assert_eq!(store.page(5, None).await.unwrap().runs.len(), 3);
        assert_eq!(first.runs[0].as_ref().unwrap().id, c.id);
        assert!(matches!(
            store.page(2, Some("nonsense")).await,
            Err(KeptError::BadCursor(_))
        ));
    })
    .await;
}

/// Takes a start and a hundred texts as a supervisor does: they read back in order, and
/// nothing more from the cursor the read ended at.
async fn writes_and_reads_a_hundred_texts(
    store: &RunStore,
    held: &mut Supervision,
    run: &RunId,
    name: &str,
) {
    held.take(&started("s-1")).await.unwrap();
    for n in 0..100 {
        held.take(&RunEvent::Text {
            agent: 0,
            text: format!("{n} "),
        })
        .await
        .unwrap();
    }
    held.flush().await.unwrap();
    let (events, cursor) = store.events(run, 0).await.unwrap();
    assert_eq!(events.len(), 101, "{name}");
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        text.starts_with("0 1 2 ") && text.ends_with("98 99 "),
        "{name}"
    );
    let (more, again) = store.events(run, cursor).await.unwrap();
    assert!(
        more.is_empty() && again == cursor,
        "{name}: read on from the cursor"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_supervisor_keeps_events_in_order_and_takes_requests() {
    // This process supervises: a request on files signals it, as it would a supervisor.
    let _listening =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1()).unwrap();
    each_backend(async |store, name| {
        let run = store.create(StoredRequest::one_agent("t")).await.unwrap();
        let mut held = store.supervise(&run.id).await.unwrap();
        assert_eq!(store.load(&run.id).await.unwrap().state, RunState::Running);
        // A second supervisor is refused while the first holds the run.
        assert!(
            matches!(store.supervise(&run.id).await, Err(KeptError::Busy { .. })),
            "{name}"
        );
        writes_and_reads_a_hundred_texts(&store, &mut held, &run.id, name).await;
        // The node and session are kept, and the session finds its run.
        let kept = store.load(&run.id).await.unwrap();
        assert_eq!(kept.agents[0].session.as_deref(), Some("s-1"));
        assert_eq!(kept.agents[0].node.as_deref(), Some(store.node()));
        let (found, agent) = store.find_session("s-1").await.unwrap().unwrap();
        assert_eq!((found.id, agent), (run.id.clone(), 0), "{name}");
        // A tell and a stop reach the supervisor, in the order they came.
        for (agent, text, now) in [
            (None, "one", false),
            (Some(0), "two", false),
            (None, "three", true),
        ] {
            let queued = store.queue_tell_if_running(&run.id, agent, text, now).await;
            assert_eq!(queued.unwrap(), Some(0), "{name}");
        }
        store
            .request_stop(&run.id, StopRequest::Agent(0))
            .await
            .unwrap();
        // A question waits (`--ask`): an answer finds it, and nothing else is answered.
        assert!(matches!(
            store
                .queue_answer(&run.id, None, crate::ask::Answer::Allow)
                .await,
            Err(KeptError::NothingAsked { .. })
        ));
        held.take(&RunEvent::Asked {
            agent: 0,
            question: "q1".into(),
            tool: "write_file".into(),
            description: "write out.txt".into(),
        })
        .await
        .unwrap();
        let (agent, tool) = store
            .queue_answer(&run.id, None, crate::ask::Answer::AllowAlways)
            .await
            .unwrap();
        assert_eq!((agent, tool.as_str()), (0, "write_file"), "{name}");
        let taken = held.requests().await;
        assert_eq!(taken.stops, [StopRequest::Agent(0)], "{name}");
        let tell = |text: &str, now| crate::kept::Tell {
            agent: 0,
            text: text.to_owned(),
            now,
        };
        assert_eq!(
            taken.tells,
            [tell("one", false), tell("two", false), tell("three", true)],
            "{name}"
        );
        assert_eq!(
            taken.answers,
            [(0, "q1".to_owned(), crate::ask::Answer::AllowAlways)],
            "{name}"
        );
        let again = held.requests().await;
        assert!(
            again.stops.is_empty() && again.tells.is_empty() && again.answers.is_empty(),
            "{name}: taken once"
        );
        // Over: the summary kept, a resume refused with nothing to resume.
        held.take(&RunEvent::Summary { agents: vec![] })
            .await
            .unwrap();
        held.release().await;
        assert_eq!(store.load(&run.id).await.unwrap().state, RunState::Ended);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_supervisor_is_gone_is_found_failed() {
    each_backend(async |store, name| {
        let run = store.create(StoredRequest::one_agent("t")).await.unwrap();
        let mut held = store.supervise(&run.id).await.unwrap();
        held.take(&started("s-2")).await.unwrap();
        // Dropped without a word, as a killed process drops it.
        drop(held);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let record = loop {
            let record = store.load(&run.id).await.unwrap();
            if record.state.is_over() || std::time::Instant::now() > deadline {
                break record;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(record.state, RunState::Failed, "{name}");
        assert_eq!(record.agents[0].status.state, AgentState::Failed, "{name}");
        // `run resume` continues it in the session it had.
        let again = store.resumable(&run.id).await.unwrap();
        assert_eq!(again[&0].session, "s-2", "{name}");
        // And a supervisor takes it again.
        let held = store.supervise(&run.id).await.unwrap();
        assert_eq!(held.record().state, RunState::Running, "{name}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_record_is_an_error_never_missing() {
    // Files only: a database row's record is written by berth alone; the files'
    // are a person's to break.
    let files = place(None);
    let store = RunStore::open(&files.ops).await.unwrap();
    let run = store.create(StoredRequest::one_agent("t")).await.unwrap();
    let path = files
        .ops
        .home()
        .join("runs")
        .join(run.id.as_str())
        .join("run.json");
    std::fs::write(&path, b"{ not json").unwrap();
    assert!(matches!(
        store.load(&run.id).await,
        Err(KeptError::Corrupt { .. })
    ));
    assert_eq!(store.resolve(run.id.as_str()).await.unwrap(), run.id);
    let listed = store.list().await.unwrap();
    assert!(matches!(listed[..], [Err(KeptError::Corrupt { .. })]));
    // Left as it was.
    assert_eq!(std::fs::read(&path).unwrap(), b"{ not json");

    // A batch one of whose runs cannot be read is not read short of it.
    let first = store
        .create(in_batch("first", "cccc00000001", 0, 2))
        .await
        .unwrap();
    let id = first.request.batch.unwrap().id;
    let second = store
        .create(in_batch("second", "cccc00000001", 1, 2))
        .await
        .unwrap();
    let dir = files.ops.home().join("runs").join(second.id.as_str());
    std::fs::write(dir.join("run.json"), b"{ not json").unwrap();
    assert!(matches!(
        batch_runs(&store, &id).await,
        Err(KeptError::Corrupt { .. })
    ));
}

/// A run of batch `id` (`aaaa…` made by hand: two such share a prefix), `index` of `count`.
fn in_batch(task: &str, id: &str, index: usize, count: usize) -> StoredRequest {
    StoredRequest {
        batch: Some(BatchPlace {
            id: BatchId::try_from(id.to_owned()).unwrap(),
            index,
            count,
        }),
        ..StoredRequest::one_agent(task)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_read_back_in_the_files_order() {
    each_backend(async |store, name| {
        let (one, other) = ("aaaa00000001", "aaaa00000002");
        // Made out of order, with a run alone and a run of another batch among them.
        for request in [
            in_batch("third", one, 2, 3),
            StoredRequest::one_agent("alone"),
            in_batch("first", one, 0, 3),
            in_batch("elsewhere", other, 0, 1),
            in_batch("second", one, 1, 3),
        ] {
            store.create(request).await.unwrap();
        }
        let id = resolve_batch(&store, "AAAA00000001").await.unwrap();
        let runs = batch_runs(&store, &id).await.unwrap();
        let tasks: Vec<&str> = runs.iter().map(|r| r.request.task.as_str()).collect();
        assert_eq!(tasks, ["first", "second", "third"], "{name}");
        let kept = runs[1].request.batch.as_ref().unwrap();
        assert_eq!((kept.index, kept.count), (1, 3), "{name}");
        // A run started alone keeps no batch, as runs kept before batches existed.
        let alone = store.list().await.unwrap().into_iter().flatten();
        let alone: Vec<_> = alone.filter(|r| r.request.task == "alone").collect();
        assert_eq!(alone[0].request.batch, None, "{name}");
        assert_eq!(
            resolve_batch(&store, other).await.unwrap().as_str(),
            other,
            "{name}"
        );

        assert!(matches!(
            resolve_batch(&store, "aaaa0000").await,
            Err(KeptError::AmbiguousBatch { ids, .. }) if ids.len() == 2
        ));
        for (nobody, kind) in [
            ("bbbb", ErrorKind::NotFound),
            ("aaa", ErrorKind::NotFound),
            ("../etc", ErrorKind::Invalid),
            ("aaaa000000010", ErrorKind::Invalid),
        ] {
            let e = resolve_batch(&store, nobody).await.unwrap_err();
            assert_eq!(e.kind(), kind, "{name}: {nobody}: {e}");
        }
        let nobody = BatchId::try_from("bbbb00000000".to_owned()).unwrap();
        let e = batch_runs(&store, &nobody).await.unwrap_err();
        assert!(matches!(e, KeptError::BatchNotFound(_)), "{name}: {e}");
        assert!(e.to_string().contains("berth run list --batch"), "{e}");
        assert!(BatchId::try_from("aaaa".to_owned()).is_err());

        // A run of it deleted (over first) is no longer read; the others are.
        let mut held = store.supervise(&runs[1].id).await.unwrap();
        held.take(&RunEvent::Summary { agents: vec![] })
            .await
            .unwrap();
        held.release().await;
        store.delete(&runs[1].id).await.unwrap();
        let left = batch_runs(&store, &id).await.unwrap();
        let tasks: Vec<&str> = left.iter().map(|r| r.request.task.as_str()).collect();
        assert_eq!(tasks, ["first", "third"], "{name}");
    })
    .await;
}

fn pooled(task: &str, node: Option<&str>) -> StoredRequest {
    StoredRequest {
        pool: Some(PoolPlace {
            node: node.map(str::to_owned),
            repo_url: "file:///nowhere.git".into(),
        }),
        ..StoredRequest::one_agent(task)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_runs_are_claimed_once_each_by_node() {
    let files = place(None);
    let store = RunStore::open(&files.ops).await.unwrap();
    assert!(matches!(
        store.create(pooled("t", None)).await,
        Err(KeptError::NeedsDatabase)
    ));
    let dir = tempfile::tempdir().unwrap();
    let lite = place(Some(sqlite(dir.path())));
    let pg = place(Some(berth_testkit::postgres::fresh_database().await));
    for (ops, name) in [(&lite.ops, "sqlite"), (&pg.ops, "postgres")] {
        let a = RunStore::open(ops).await.unwrap().with_node("a");
        let b = RunStore::open(ops).await.unwrap().with_node("b");
        let any = a.create(pooled("any", None)).await.unwrap();
        assert_eq!(any.state, RunState::Queued, "{name}");
        let for_b = a.create(pooled("for b", Some("b"))).await.unwrap();
        // Queued is not failed, however long nobody holds it.
        assert_eq!(a.load(&any.id).await.unwrap().state, RunState::Queued);
        // `a` may take only the unpinned one; `b` then the one pinned to it.
        let got = a.claim(4).await.unwrap().expect("a claims");
        assert_eq!(got.record().id, any.id, "{name}");
        assert!(a.claim(4).await.unwrap().is_none(), "{name}");
        let got_b = b.claim(4).await.unwrap().expect("b claims");
        assert_eq!(got_b.record().id, for_b.id, "{name}");
        assert!(
            b.claim(4).await.unwrap().is_none(),
            "{name}: each taken once"
        );
        // A run larger than the room left waits.
        let mut wide = pooled("wide", None);
        wide.agents = vec![crate::agents::AgentSpec::Berth { model: None }; 3];
        let wide = a.create(wide).await.unwrap();
        assert!(b.claim(2).await.unwrap().is_none(), "{name}");
        assert_eq!(b.claim(3).await.unwrap().unwrap().record().id, wide.id);
        drop((got, got_b));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_lease_lapsed_is_fenced_out() {
    let pg = place(Some(berth_testkit::postgres::fresh_database().await));
    let a = RunStore::open(&pg.ops).await.unwrap().with_node("a");
    let b = RunStore::open(&pg.ops).await.unwrap().with_node("b");
    let run = a.create(pooled("t", None)).await.unwrap();
    let mut first = a.claim(1).await.unwrap().unwrap();
    first.take(&started("s-3")).await.unwrap();
    // `a` stops renewing (a frozen or cut-off node): its lease lapses, `b` takes over.
    drop(first.hold.take());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut second = loop {
        if let Some(s) = b.claim(1).await.unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "never taken over");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // A queued run's lapsed hold is not a failure: it stays for the next worker.
    assert_eq!(second.record().state, RunState::Running);
    assert_eq!(second.record().agents[0].session.as_deref(), Some("s-3"));
    second.take(&started("s-4")).await.unwrap();
    // The old holder, back, writes nothing: every write of its fence (the first) is
    // refused, and its supervision says it lost the run.
    assert!(first.lost());
    assert!(matches!(
        first.take(&started("s-x")).await,
        Err(KeptError::Fenced { .. })
    ));
    let db = a.db.clone().unwrap();
    let stale = db
        .runs
        .write(run.id.as_str(), 1, "failed", "{}")
        .await
        .unwrap();
    assert!(!stale, "a write of the old fence landed");
    let appended = db
        .runs
        .append(run.id.as_str(), 1, &["{}".to_owned()])
        .await
        .unwrap();
    assert!(!appended, "an event of the old fence landed");
    let now = a.load(&run.id).await.unwrap();
    assert_eq!(now.agents[0].session.as_deref(), Some("s-4"));
    assert_eq!(now.agents[0].node.as_deref(), Some("b"));
}

/// A follower of a run (`Runs::follow`) is given each event soon after it is kept, and ends
/// once the run is over: woken by Postgres's `NOTIFY` there, well before its slow look
/// (2 s), and reading again every 200 ms on files and SQLite.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_is_given_each_event_as_it_is_kept_and_ends_with_the_run() {
    each_backend(async |store, name| {
        let record = store
            .create(StoredRequest::one_agent("followed"))
            .await
            .unwrap();
        let mut held = store.supervise(&record.id).await.unwrap();
        let mut follow = crate::follow::Follow::new(store.clone(), record.id.clone(), 0);
        let keeper = tokio::spawn(async move {
            for n in 0..3 {
                // Kept while the follower waits, not before it first read.
                tokio::time::sleep(Duration::from_millis(300)).await;
                held.take(&started(&format!("s{n}"))).await.unwrap();
                held.flush().await.unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
                if n == 2 {
                    held.fail("over").await.unwrap();
                    held.release().await;
                }
            }
        });
        let mut given = Vec::new();
        let began = std::time::Instant::now();
        while let Some(events) = follow.next().await {
            let events = events.unwrap();
            let at = began.elapsed();
            for e in &events {
                if let RunEvent::Started { session, .. } = e {
                    given.push((session.clone(), at));
                }
            }
        }
        keeper.await.unwrap();
        let sessions: Vec<&str> = given.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(sessions, ["s0", "s1", "s2"], "{name}");
        // Each given within a second of being kept (at 300, 650 and 1000 ms and a little).
        for (n, (_, at)) in given.iter().enumerate() {
            let kept_about = Duration::from_millis(300 + 350 * n as u64);
            assert!(
                *at < kept_about + Duration::from_millis(1000),
                "{name}: event {n} given at {at:?}"
            );
        }
        assert_eq!(follow.woken_by_database(), name == "postgres", "{name}");
        assert!(follow.next().await.is_none(), "{name}: over, it stays over");
    })
    .await;
}
