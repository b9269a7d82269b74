//! `run_command`'s background processes through the tools themselves, on a real berth home
//! and real confined processes: an output past its bound is cut from the front and said so,
//! `read_background` pages through it by offset, a session runs at most its cap at once, and
//! `end_session` ends all of a session's processes and no other session's.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::time::{Duration, Instant};

use berth_agent::CancellationToken;
use berth_agent::tools::background::{
    KEPT_BYTES, MAX_PER_SESSION, ReadBackground, StopBackground, end_session,
};
use berth_agent::tools::command::RunCommand;
use berth_agent::tools::{Tool, ToolContext};
use berth_ops::{CreateSession, CreateWorkspace, Repository};
use serde_json::{Value, json};
use tempfile::TempDir;

/// A berth home with one plain workspace and a session in it, working in a folder of its own.
struct Fixture {
    _home: TempDir,
    _work: TempDir,
    cx: ToolContext,
}

impl Fixture {
    async fn new() -> Fixture {
        let home = tempfile::tempdir().unwrap();
        let ops = berth_ops::open(home.path(), &[]).unwrap();
        let mut request = CreateWorkspace::new(Repository::None);
        request.name = Some("bg".into());
        let ws = ops.create_workspace(request).await.unwrap();
        let work = tempfile::tempdir().unwrap();
        let cx = ToolContext::new(
            work.path().to_owned(),
            ops.clone(),
            new_session(&ops, ws.id.as_str()).await,
            CancellationToken::new(),
        );
        Fixture {
            _home: home,
            _work: work,
            cx,
        }
    }

    /// The same workspace, another session.
    async fn other_session(&self) -> ToolContext {
        let session = new_session(&self.cx.ops, self.cx.session.workspace_id.as_str()).await;
        ToolContext {
            session,
            ..self.cx.clone()
        }
    }
}

async fn new_session(ops: &berth_ops::Ops, workspace: &str) -> berth_ops::Session {
    ops.create_session(CreateSession {
        workspace: workspace.to_owned(),
        ..CreateSession::default()
    })
    .await
    .unwrap()
}

async fn start(cx: &ToolContext, command: &str) -> Result<String, String> {
    let args = json!({"command": command, "background": true});
    RunCommand::new().call(args, cx).await
}

fn pid_in(answer: &str) -> u32 {
    let at = answer.find("(pid ").unwrap() + 5;
    answer[at..].split(')').next().unwrap().parse().unwrap()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .starts_with('Z')
    })
}

async fn read(cx: &ToolContext, args: Value) -> String {
    ReadBackground.call(args, cx).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_past_its_bound_is_cut_from_the_front_and_read_by_offset() {
    let f = Fixture::new().await;
    // 3 MiB of output, then a last line, then it stays up.
    let total = 3 * KEPT_BYTES;
    let command =
        format!("head -c {total} /dev/zero | tr '\\0' a; echo; echo the-end; exec sleep 600");
    let started = start(&f.cx, &command).await.unwrap();
    assert!(started.starts_with("started bg-1"), "{started}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let last = loop {
        let last = read(&f.cx, json!({"id": "bg-1", "tail": 100})).await;
        if last.contains("the-end") {
            break last;
        }
        assert!(Instant::now() < deadline, "{last}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(last.starts_with("bg-1 (pid "), "{last}");
    assert!(last.contains("is running"), "{last}");
    let all = total + 1 + "the-end\n".len() as u64;
    assert!(
        last.contains(&format!(
            "[bytes {}..{all} of {all}; next offset {all}]",
            all - 100
        )),
        "{last}"
    );
    // The file holds at most twice the bound, whatever was written.
    let log =
        f.cx.ops
            .background_dir(&f.cx.session.workspace_id)
            .join("bg-1.log");
    assert!(std::fs::metadata(&log).unwrap().len() <= 2 * KEPT_BYTES);
    // From the start: what was cut is said, and the read begins at the first byte kept.
    let first = read(&f.cx, json!({"id": "bg-1", "offset": 0})).await;
    assert!(first.contains("bytes were cut"), "{}", &first[..300]);
    let note = first.lines().nth(1).unwrap();
    let from: u64 = note["[bytes ".len()..]
        .split("..")
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        from >= all - 2 * KEPT_BYTES && from <= all - KEPT_BYTES,
        "{note}"
    );
    // Paging on from an offset gives the bytes from there, at most 64 KiB.
    let next = read(&f.cx, json!({"id": "bg-1", "offset": all - 8})).await;
    assert!(next.ends_with("the-end\n"), "{next}");
    let bad = ReadBackground
        .call(json!({"id": "bg-1", "offset": 0, "tail": 5}), &f.cx)
        .await;
    assert!(bad.unwrap_err().contains("not both"));
    end_session(f.cx.session.id.as_str()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_runs_at_most_its_cap_and_its_end_ends_only_its_own() {
    let f = Fixture::new().await;
    let other = f.other_session().await;
    let theirs = pid_in(&start(&other, "exec sleep 600").await.unwrap());
    let mut mine = Vec::new();
    for _ in 0..MAX_PER_SESSION {
        mine.push(pid_in(&start(&f.cx, "exec sleep 600").await.unwrap()));
    }
    let refused = start(&f.cx, "exec sleep 600").await.unwrap_err();
    assert!(
        refused.contains("stop one with stop_background"),
        "{refused}"
    );
    // The other session's process is its own: not found here, not stopped from here.
    let stop_theirs = StopBackground.call(json!({"id": "bg-1"}), &f.cx).await;
    assert!(
        stop_theirs
            .unwrap_err()
            .contains("no background process bg-1")
    );
    let stopped = StopBackground
        .call(json!({"id": "bg-2"}), &f.cx)
        .await
        .unwrap();
    assert!(stopped.starts_with("stopped bg-2"), "{stopped}");
    assert!(!alive(mine[0]));
    start(&f.cx, "exec sleep 600").await.unwrap();
    end_session(f.cx.session.id.as_str()).await;
    assert!(mine.iter().all(|p| !alive(*p)), "{mine:?}");
    assert!(alive(theirs), "another session's process ended too");
    let listed =
        f.cx.ops
            .background_processes(&f.cx.session.workspace_id)
            .await
            .unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].session, other.session.id.as_str());
    end_session(other.session.id.as_str()).await;
    assert!(!alive(theirs));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_fails_at_once_is_an_error_and_a_timeout_is_refused() {
    let f = Fixture::new().await;
    let failed = start(&f.cx, "echo no such thing >&2; exit 3")
        .await
        .unwrap_err();
    assert!(failed.contains("exited with status 3 at once"), "{failed}");
    assert!(failed.contains("no such thing"), "{failed}");
    let args = json!({"command": "sleep 1", "background": true, "timeout_secs": 5});
    let refused = RunCommand::new().call(args, &f.cx).await.unwrap_err();
    assert!(refused.contains("no timeout"), "{refused}");
    let bad = ReadBackground
        .call(json!({"id": "1"}), &f.cx)
        .await
        .unwrap_err();
    assert!(bad.contains("bg- and a number"), "{bad}");
    end_session(f.cx.session.id.as_str()).await;
}
