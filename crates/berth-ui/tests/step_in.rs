//! Stepping into an agent's work, on ratatui's test backend from runs kept through berth-run's
//! own store: `o` and `e` ask the app to step aside only for one agent that has a worktree,
//! `e` chooses among the files of the agent's diff (read first when it is not, and without
//! the files it deletes), `i` tells as `t` does, and `berth run attach`'s agent is opened
//! once its run is read, a page further down too. What the app then runs is the terminal
//! tests' (berth-cli's `ui_step_in.rs`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use std::path::PathBuf;

use berth_run::RunStore;
use berth_ui::{Action, Attach, Detail, Model, Overlay, Pane, StepIn, Update};
use common::{press, screen, typed};
use ratatui::crossterm::event::KeyCode;

struct Home {
    _dir: tempfile::TempDir,
    ops: berth_ops::Ops,
    store: RunStore,
}

async fn home() -> Home {
    let dir = tempfile::tempdir().unwrap();
    let ops = berth_ops::open(dir.path(), &[]).unwrap();
    let store = RunStore::open(&ops).await.unwrap();
    Home {
        _dir: dir,
        ops,
        store,
    }
}

fn file(path: &str, status: &'static str) -> berth_ops::FileDiff {
    berth_ops::FileDiff {
        path: path.to_owned(),
        status,
        added: Some(1),
        removed: Some(0),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn o_and_e_step_in_only_for_one_agent_with_a_worktree() {
    let h = home().await;
    common::finished_run(&h.store, "Fix the parser bug", 3).await;
    let mut model = common::loaded(&h.ops, &h.store, false).await;

    // A run of two agents: one is chosen first.
    assert!(press(&mut model, KeyCode::Char('o')).is_empty());
    let (said, failed) = model.status.clone().unwrap();
    assert!(
        failed && said.contains("Enter, choose one, then o"),
        "{said}"
    );
    press(&mut model, KeyCode::Enter);
    // One that never had a worktree says so, and nothing steps aside.
    model.runs[0].agents[0].worktree = None;
    assert!(press(&mut model, KeyCode::Char('o')).is_empty());
    let (said, _) = model.status.clone().unwrap();
    assert!(said.contains("agent 1 has no worktree yet"), "{said}");

    let worktree = PathBuf::from("/somewhere/worktree");
    model.runs[0].agents[0].worktree = Some(worktree.clone());
    let run = model.runs[0].id.clone();
    let opened = press(&mut model, KeyCode::Char('o'));
    let [
        Action::StepIn(StepIn {
            dir,
            file: None,
            what,
            agent: true,
        }),
    ] = &opened[..]
    else {
        panic!("{opened:?}");
    };
    assert_eq!(dir, &worktree);
    assert!(what.starts_with("agent 1's worktree of run "), "{what}");

    // `e`: the diff is read first, and its files offered when it comes, not the deleted one.
    let asked = press(&mut model, KeyCode::Char('e'));
    assert!(
        asked
            .iter()
            .any(|a| matches!(a, Action::LoadDiff { agent: 0, .. })),
        "{asked:?}"
    );
    assert_eq!((model.pane, model.detail), (Pane::Detail, Detail::Diff));
    model.apply(Update::Diff {
        run: run.clone(),
        agent: 0,
        diff: Ok(berth_ops::WorktreeDiff {
            base: "main".to_owned(),
            merge_base: "0".repeat(40),
            files: vec![
                file("a.txt", "added"),
                file("gone.txt", "deleted"),
                file("src/b.rs", "modified"),
            ],
            patch: None,
        }),
    });
    let Some(Overlay::Edit(choice)) = &model.overlay else {
        panic!("no chooser: {:?}", model.overlay);
    };
    assert_eq!(choice.files, ["a.txt", "src/b.rs"]);
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("Edit a file of its work"), "{text}");
    assert!(
        text.contains("▸ a.txt") && text.contains("  src/b.rs"),
        "{text}"
    );
    press(&mut model, KeyCode::Char('j'));
    let chosen = press(&mut model, KeyCode::Enter);
    let [
        Action::StepIn(StepIn {
            dir, file: Some(f), ..
        }),
    ] = &chosen[..]
    else {
        panic!("{chosen:?}");
    };
    assert_eq!((dir, f.as_str()), (&worktree, "src/b.rs"));
    assert!(model.overlay.is_none());

    // The diff is known now: `e` offers it at once; Esc leaves the chooser, nothing opened.
    assert!(press(&mut model, KeyCode::Char('e')).is_empty());
    assert!(matches!(model.overlay, Some(Overlay::Edit(_))));
    assert!(press(&mut model, KeyCode::Esc).is_empty());
    assert!(model.overlay.is_none());

    // In the land queue, the queued agent's worktree.
    press(&mut model, KeyCode::Char('L'));
    press(&mut model, KeyCode::Char('4'));
    let opened = press(&mut model, KeyCode::Char('o'));
    assert!(
        matches!(&opened[..], [Action::StepIn(StepIn { dir, file: None, .. })] if *dir == worktree),
        "{opened:?}"
    );
    press(&mut model, KeyCode::Char('1'));

    // `i` opens the line `t` does, told on Enter.
    press(&mut model, KeyCode::Char('i'));
    typed(&mut model, "also the empty case");
    let told = press(&mut model, KeyCode::Enter);
    assert_eq!(
        told,
        [Action::Tell {
            run,
            agent: 0,
            text: "also the empty case".to_owned()
        }]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn attach_opens_on_the_agent_once_its_run_is_read_a_page_further_too() {
    let h = home().await;
    let older = common::finished_run(&h.store, "The older run", 2).await;
    common::finished_run(&h.store, "The newer run", 2).await;
    let page = h.store.page(10, None).await.unwrap();
    let runs: Vec<_> = page.runs.into_iter().map(Result::unwrap).collect();
    let (newer, older_record) = (runs[0].clone(), runs[1].clone());
    assert_eq!(older_record.id, older);

    let mut model = Model::new("/home/of/berth", false);
    model.attach = Some(Attach {
        run: older.clone(),
        agent: Some(1),
    });
    // Not on the first page: the next is asked for, once.
    let first = || Update::Runs {
        runs: vec![newer.clone()],
        next: Some("after-newer".to_owned()),
    };
    let asked = model.apply(first());
    assert!(
        asked.contains(&Action::MoreRuns("after-newer".to_owned())),
        "{asked:?}"
    );
    let again = model.apply(first());
    assert!(
        !again.iter().any(|a| matches!(a, Action::MoreRuns(_))),
        "{again:?}"
    );
    let followed = model.apply(Update::MoreRuns {
        runs: vec![older_record],
        next: None,
    });
    assert_eq!(followed, [Action::Follow(Some(older.clone()))]);
    assert_eq!(model.selected_run().unwrap().id, older);
    assert_eq!(
        (model.pane, model.detail, model.agent_sel),
        (Pane::Detail, Detail::Transcript, 1)
    );
    assert!(model.attach.is_none());
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("Agent 2 (berth) · transcript"), "{text}");

    // Without an agent, a run of several opens on its agents; a run not there says so.
    let mut model = Model::new("/home/of/berth", false);
    model.attach = Some(Attach {
        run: newer.id.clone(),
        agent: None,
    });
    model.apply(Update::Runs {
        runs: vec![newer.clone()],
        next: None,
    });
    assert_eq!(model.pane, Pane::Agents);
    let mut model = Model::new("/home/of/berth", false);
    model.attach = Some(Attach {
        run: older,
        agent: None,
    });
    model.apply(Update::Runs {
        runs: vec![newer],
        next: None,
    });
    let (said, failed) = model.status.clone().unwrap();
    assert!(
        failed && said.contains("is not among the runs read"),
        "{said}"
    );
}
