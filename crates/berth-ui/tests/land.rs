//! The land queue in the dashboard, drawn on ratatui's test backend from runs kept through
//! berth-run's own store: `L` queues the selected agent (again takes it out; another agent of
//! the same run takes its place; a running run's agent is refused), tab 4 shows the queue in
//! its order, `K`/`J` move an agent, `x` takes one out, Enter asks and y lands it; the land
//! followed shows each agent's state and last step, is read again on the clock while it
//! lands, and one that nobody drives says how to go on. Lands are read from the home's
//! LandStore as the app reads them.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use berth_run::{LandRecord, LandStore, RunId, RunStore};
use berth_ui::{Action, Model, Overlay, Tab, Update};
use common::{press, screen};
use ratatui::crossterm::event::KeyCode;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

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

/// The run `id` selected, from the runs pane; its agents' pane open when `open`.
fn select(model: &mut Model, id: &RunId, open: bool) {
    press(model, KeyCode::Esc);
    press(model, KeyCode::Esc);
    press(model, KeyCode::Char('g'));
    while &model.selected_run().unwrap().id != id {
        press(model, KeyCode::Char('j'));
    }
    if open {
        press(model, KeyCode::Enter);
    }
}

fn status(model: &Model) -> (String, bool) {
    model.status.clone().unwrap_or_default()
}

fn queued(model: &Model) -> Vec<(RunId, usize)> {
    model.land.targets()
}

#[tokio::test(flavor = "multi_thread")]
async fn l_queues_agents_and_the_land_tab_orders_them_and_asks_before_landing() {
    let h = home().await;
    let first = common::reviewed_run(&h.store, "First task").await;
    let second = common::reviewed_run(&h.store, "Second task").await;
    let (working, _held) = common::working_run(&h.store, "Still working").await;
    let mut model = common::loaded(&h.ops, &h.store, false).await;

    // A run still running: nothing to land yet.
    select(&mut model, &working, true);
    press(&mut model, KeyCode::Char('L'));
    let (said, failed) = status(&model);
    assert!(failed && said.contains("still running"), "{said}");
    assert!(queued(&model).is_empty());

    // Agent 2 of the first run, then agent 1 of it in its place: a run's agents are
    // alternatives.
    select(&mut model, &first, true);
    press(&mut model, KeyCode::Char('j'));
    press(&mut model, KeyCode::Char('L'));
    assert_eq!(queued(&model), [(first.clone(), 1)]);
    assert!(
        status(&model).0.contains("queued to land"),
        "{:?}",
        status(&model)
    );
    press(&mut model, KeyCode::Char('k'));
    press(&mut model, KeyCode::Char('L'));
    assert_eq!(queued(&model), [(first.clone(), 0)]);
    assert!(
        status(&model).0.contains("takes agent 2's place"),
        "{:?}",
        status(&model)
    );
    // L again on a queued agent takes it out; once more puts it back.
    press(&mut model, KeyCode::Char('L'));
    assert!(queued(&model).is_empty());
    press(&mut model, KeyCode::Char('L'));

    // In the runs pane, a run of several agents needs one chosen first.
    select(&mut model, &second, false);
    press(&mut model, KeyCode::Char('L'));
    assert!(status(&model).1, "{:?}", status(&model));
    press(&mut model, KeyCode::Enter);
    press(&mut model, KeyCode::Char('L'));
    assert_eq!(queued(&model), [(first.clone(), 0), (second.clone(), 0)]);

    // Tab 4: the queue in its order, and the newest land asked for.
    let actions = press(&mut model, KeyCode::Char('4'));
    assert_eq!(model.tab, Tab::Land);
    assert_eq!(actions, [Action::LoadLand(None)]);
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(text.contains("Land queue (2)"), "{text}");
        let row = |id: &RunId| {
            text.lines()
                .position(|l| l.contains(&id.as_str()[..8]) && l.contains("task"))
                .unwrap_or_else(|| panic!("{id}:\n{text}"))
        };
        assert!(row(&first) < row(&second), "{text}");
        assert!(text.contains("Enter land"), "the tab's keys: {text}");
    }

    // J moves the first down, K back up; x takes the selected one out.
    press(&mut model, KeyCode::Char('J'));
    assert_eq!(queued(&model), [(second.clone(), 0), (first.clone(), 0)]);
    press(&mut model, KeyCode::Char('K'));
    assert_eq!(queued(&model), [(first.clone(), 0), (second.clone(), 0)]);
    press(&mut model, KeyCode::Char('j'));
    press(&mut model, KeyCode::Char('x'));
    assert_eq!(queued(&model), [(first.clone(), 0)]);
    press(&mut model, KeyCode::Char('1'));
    select(&mut model, &second, true);
    press(&mut model, KeyCode::Char('L'));
    press(&mut model, KeyCode::Char('4'));

    // Enter asks, naming the order and what a land does; n leaves it; y lands it.
    press(&mut model, KeyCode::Enter);
    let Some(Overlay::Confirm { question, .. }) = &model.overlay else {
        panic!("no question: {:?}", model.overlay);
    };
    assert!(question.contains("combined tree"), "{question}");
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("Sure?"), "{text}");
    assert!(press(&mut model, KeyCode::Char('n')).is_empty());
    press(&mut model, KeyCode::Enter);
    let actions = press(&mut model, KeyCode::Char('y'));
    assert_eq!(
        actions,
        [Action::Land(vec![(first.clone(), 0), (second.clone(), 0)])]
    );

    // The engine refuses what cannot land, before anything is recorded: the queue stays.
    let cx = common::context(&h.ops, &h.store);
    let update = berth_ui::act(&cx, Action::Land(vec![(working.clone(), 0)])).await;
    let Update::Failed(why) = &update else {
        panic!("{update:?}");
    };
    assert!(why.contains("still running"), "{why}");
    model.apply(update);
    assert_eq!(queued(&model).len(), 2);
    assert!(LandStore::open(&h.ops).list().await.unwrap().is_empty());
}

/// A land of `first` (landed) and `second` (left, or landing), as the engine keeps one.
fn a_land(first: &RunId, second: &RunId, second_state: &str, over: bool) -> LandRecord {
    let step = |item: usize, run: &RunId, step: &str, text: &str| {
        serde_json::json!({
            "land": "0a1b2c3d4e5f", "at": "2026-01-01T00:00:00Z", "step": step,
            "item": item, "run": run, "agent": 1, "text": text,
        })
    };
    let item = |run: &RunId, state: &str| {
        let mut item = serde_json::json!({
            "run": run, "asked": format!("{run}:1"), "which": {"agent": 0},
            "agent": 0, "state": state, "into": "main",
        });
        if state == "left" {
            item["reason"] =
                serde_json::json!("the check `cargo test` failed on the combined tree");
        }
        item
    };
    serde_json::from_value(serde_json::json!({
        "id": "0a1b2c3d4e5f",
        "created_at": "2026-01-01T00:00:00Z",
        "state": if over { "over" } else { "landing" },
        // This machine: only a land driven here has a lock here to say it is cut off.
        "node": berth_ops::notices::node_name(),
        "dir": "/nowhere",
        "mode": "merge",
        "retries": 2,
        "resolve": true,
        "items": [item(first, "landed"), item(second, second_state)],
        "steps": [
            step(0, first, "landed", "main moved to 1234567"),
            step(1, second, "told", "agent 2 told of the conflict in f.txt"),
        ],
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_land_followed_shows_each_agents_state_and_is_read_again_while_it_lands() {
    let h = home().await;
    let first = common::reviewed_run(&h.store, "First task").await;
    let second = common::reviewed_run(&h.store, "Second task").await;
    let mut model = common::loaded(&h.ops, &h.store, false).await;
    press(&mut model, KeyCode::Char('4'));

    // Under way: each agent's state, and its last step.
    model.apply(Update::LandStarted {
        record: a_land(&first, &second, "landing", false),
        pid: 4242,
    });
    assert!(status(&model).0.contains("started in process 4242"));
    assert!(model.land.queued.is_empty());
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(
            text.contains("Land 0a1b2c3d4e5f · landing · 1 landed, 0 left, 1 to go"),
            "{text}"
        );
        let row = |id: &RunId| {
            text.lines()
                .find(|l| l.contains(&id.as_str()[..8]))
                .unwrap_or_else(|| panic!("{id}:\n{text}"))
                .to_owned()
        };
        assert!(row(&first).contains("landed"), "{text}");
        assert!(row(&first).contains("main moved"), "{text}");
        assert!(row(&second).contains("landing"), "{text}");
        assert!(row(&second).contains("told of the conflict"), "{text}");
    }
    // The clock reads it again, one read at a time, while it lands.
    let id = model.land.land.as_ref().unwrap().record.id.clone();
    let now = chrono::Utc::now();
    assert_eq!(model.tick(now), [Action::LoadLand(Some(id.clone()))]);
    assert!(model.tick(now).is_empty(), "one read at a time");

    // Over: the left agent says why, and nothing more is read.
    model.apply(Update::Land {
        record: Some(a_land(&first, &second, "left", true)),
        driven: false,
    });
    let (text, _) = screen(&model, (160, 48));
    assert!(text.contains("· over ·"), "{text}");
    assert!(
        text.contains("the check `cargo test` failed on the combined tree"),
        "{text}"
    );
    assert!(model.tick(now).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kept_land_is_read_from_the_store_and_one_nobody_drives_says_how_to_go_on() {
    let h = home().await;
    let first = common::reviewed_run(&h.store, "First task").await;
    let second = common::reviewed_run(&h.store, "Second task").await;
    let cx = common::context(&h.ops, &h.store);
    let store = LandStore::open(&h.ops);

    // No land yet: nothing followed, and the pane says how to start one.
    let mut model = common::loaded(&h.ops, &h.store, false).await;
    let actions = press(&mut model, KeyCode::Char('4'));
    for action in actions {
        let update = berth_ui::act(&cx, action).await;
        model.apply(update);
    }
    assert!(model.land.land.is_none());
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("no land yet"), "{text}");

    // Held by this process: it is driven.
    let held = store
        .create(a_land(&first, &second, "landing", false))
        .await
        .unwrap();
    let Update::Land { record, driven } = berth_ui::act(&cx, Action::LoadLand(None)).await else {
        panic!("not a land");
    };
    assert_eq!(record.as_ref().unwrap().id.as_str(), "0a1b2c3d4e5f");
    assert!(driven);

    // Let go while landing (its process died): cut off, and R reads it so.
    drop(held);
    let actions = press(&mut model, KeyCode::Char('R'));
    assert_eq!(actions, [Action::LoadLand(None)]);
    for action in actions {
        let update = berth_ui::act(&cx, action).await;
        model.apply(update);
    }
    let (text, _) = screen(&model, (160, 48));
    assert!(text.contains("· cut off ·"), "{text}");
    assert!(
        text.contains("`berth land --resume 0a1b2c3d4e5f` goes on"),
        "{text}"
    );
}
