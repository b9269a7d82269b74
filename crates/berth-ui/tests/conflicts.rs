//! Conflicts seen in the dashboard before a pick: the diff pane of a finished agent says, above
//! its diff, what its work conflicts with (its base as it now stands, another run's agent),
//! naming the files as git quotes them; a clean agent's pane says nothing of it. Real git
//! workspaces, runs kept through berth-run's own store, and the dashboard's own actions.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use berth_ops::{CreateWorkspace, Ops, Repository, WorkspaceView as Workspace};
use berth_run::{AgentState, AgentSummary, RunEvent, RunId, RunStore, StoredRequest};
use berth_testkit::{commit, git};
use berth_ui::{Action, Model, Update};
use common::{press, screen};
use ratatui::crossterm::event::KeyCode;

/// A run of one agent that worked in `ws` and is done, having changed a file.
async fn done_in(store: &RunStore, ws: &Workspace, task: &str) -> RunId {
    let record = store
        .create(StoredRequest::of(&common::request(task, 1)))
        .await
        .unwrap();
    let id = record.id.clone();
    let mut s = store.supervise(&id).await.unwrap();
    let git = ws.git.as_ref().unwrap();
    let summary = AgentSummary {
        agent: 0,
        label: "berth".to_owned(),
        workspace: Some(ws.id.to_string()),
        workspace_name: ws.name.clone(),
        session: None,
        state: AgentState::Done,
        stop: "end_turn".to_owned(),
        message: None,
        files_changed: 1,
        added: 1,
        removed: 1,
        check: None,
        input_tokens: 10,
        output_tokens: 10,
        cost_usd: None,
        elapsed_ms: 1_000,
    };
    for event in [
        RunEvent::Started {
            agent: 0,
            label: "berth".to_owned(),
            workspace: ws.id.to_string(),
            workspace_name: task.to_owned(),
            session: format!("session-{id}"),
            worktree: git.worktree.clone(),
        },
        RunEvent::Ended {
            agent: 0,
            state: AgentState::Done,
            stop: "end_turn".to_owned(),
            message: None,
            input_tokens: 10,
            output_tokens: 10,
            elapsed_ms: 1_000,
        },
        RunEvent::Summary {
            agents: vec![summary],
        },
    ] {
        s.take(&event).await.unwrap();
    }
    s.flush().await.unwrap();
    s.release().await;
    id
}

/// A git workspace of `repo` whose worktree's `f.txt` says `content` (uncommitted).
async fn workspace(ops: &Ops, repo: &std::path::Path, name: &str, content: &str) -> Workspace {
    let ws = ops
        .create_workspace(CreateWorkspace {
            name: Some(name.to_owned()),
            ..CreateWorkspace::new(Repository::Named(repo.to_owned()))
        })
        .await
        .unwrap();
    std::fs::write(ws.git.as_ref().unwrap().worktree.join("f.txt"), content).unwrap();
    ws
}

/// Selects run `id`'s agent, opens the diff pane, and does what the app would: reads the
/// diff, then what the diff's answer asks for.
async fn open_diff(model: &mut Model, cx: &berth_ui::Context, id: &RunId) -> Vec<Action> {
    let mut asked = Vec::new();
    while model.run_sel > 0 {
        asked.extend(press(model, KeyCode::Char('k')));
    }
    while &model.selected_run().unwrap().id != id {
        asked.extend(press(model, KeyCode::Char('j')));
    }
    asked.extend(press(model, KeyCode::Enter));
    asked.extend(press(model, KeyCode::Char('d')));
    let mut done = Vec::new();
    while let Some(action) = asked.pop() {
        done.push(action.clone());
        let update = berth_ui::act(cx, action).await;
        asked.extend(model.apply(update));
    }
    press(model, KeyCode::Esc);
    press(model, KeyCode::Esc);
    done
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finished_agents_diff_pane_says_what_its_work_conflicts_with() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("project");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "--quiet", "-b", "main"]);
    commit(&repo, "f.txt", "one\ntwo\nthree\n");
    let repo = repo.canonicalize().unwrap();
    let ops = berth_ops::open(&tmp.path().join("home"), &[]).unwrap();
    let store = RunStore::open(&ops).await.unwrap();

    let first = workspace(&ops, &repo, "first", "ONE\ntwo\nthree\n").await;
    let second = workspace(&ops, &repo, "second", "UNO\ntwo\nthree\n").await;
    let apart = workspace(&ops, &repo, "apart", "one\ntwo\nTHREE\n").await;
    let first_run = done_in(&store, &first, "first").await;
    let second_run = done_in(&store, &second, "second").await;
    let apart_run = done_in(&store, &apart, "apart").await;
    // main changes line 1 since the workspaces left it.
    commit(&repo, "f.txt", "eins\ntwo\nthree\n");

    let cx = common::context(&ops, &store);
    let mut model = common::loaded(&ops, &store, false).await;
    let done = open_diff(&mut model, &cx, &first_run).await;
    assert!(
        done.iter()
            .any(|a| matches!(a, Action::LoadConflicts { agent: 0, .. })),
        "a finished agent's diff asks for its conflicts: {done:?}"
    );
    for size in [(80, 24), (160, 48)] {
        let (text, _) = screen(&model, size);
        assert!(text.contains("Agent 1 (berth) · conflicts"), "{text}");
        assert!(text.contains("conflicts with main: f.txt"), "{text}");
        assert!(
            text.contains(&format!("conflicts with run {second_run} agent 1: f.txt")),
            "{text}"
        );
        assert!(!text.contains(&format!("run {apart_run}")), "{text}");
        // The diff is still there, below.
        assert!(text.contains("Agent 1 (berth) · diff"), "{text}");
    }
    let first_seen = model.conflicts.clone().unwrap().2;

    // The agent on line 3 merges with main and with both: nothing is said of conflicts.
    open_diff(&mut model, &cx, &apart_run).await;
    let Some((run, 0, seen)) = &model.conflicts else {
        panic!("its conflicts were read");
    };
    assert_eq!(run, &apart_run);
    assert_eq!((seen.with.len(), seen.compared), (0, 2), "{seen:?}");
    let (text, _) = screen(&model, (80, 24));
    assert!(!text.contains("conflicts"), "{text}");
    assert!(text.contains("Agent 1 (berth) · diff"), "{text}");

    // An answer that arrives for an agent no longer selected is not shown against another.
    model.apply(Update::Conflicts {
        run: first_run,
        agent: 0,
        seen: first_seen,
    });
    let (text, _) = screen(&model, (80, 24));
    assert!(!text.contains("conflicts"), "{text}");
}
