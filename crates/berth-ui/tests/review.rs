//! Reviewing a run in the dashboard, drawn on ratatui's test backend from runs kept through
//! berth-run's own store: the runs list says what each run needs, a pick names the evidence
//! against it before anything is done and is forced only by a key of its own, `v` shows a
//! check's own words, the diff pane always ends in the selected agent's diff (and follows a
//! working agent), a text told from here stays in the transcript, and a question quotes what
//! the agent said before asking.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use berth_run::{AgentOutcome, RunStore};
use berth_ui::{Action, Detail, Model, Update};
use common::{press, screen, typed};
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

/// The model with the run `id` selected and its agents' pane open.
fn select(model: &mut Model, id: &berth_run::RunId) {
    while &model.selected_run().unwrap().id != id {
        press(model, KeyCode::Char('j'));
    }
    press(model, KeyCode::Enter);
}

/// A diff of one added line, as berth-ops reads it.
fn a_diff(line: &str) -> berth_ops::WorktreeDiff {
    berth_ops::WorktreeDiff {
        base: "main".to_owned(),
        merge_base: "0".repeat(40),
        files: vec![berth_ops::FileDiff {
            path: "notes.txt".to_owned(),
            status: "added",
            added: Some(1),
            removed: Some(0),
        }],
        patch: Some(format!(
            "diff --git a/notes.txt b/notes.txt\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+{line}\n"
        )),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_runs_list_says_what_each_run_needs_done() {
    let h = home().await;
    let (_waiting, _held) = common::waiting_run(&h.store, "Write notes.txt").await;
    let picked = common::reviewed_run(&h.store, "Already picked").await;
    common::reviewed_run(&h.store, "To review").await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    press(&mut model, KeyCode::Esc);
    // Agent 1 of one run merged, as a pick records it.
    let at = model.runs.iter().position(|r| r.id == picked).unwrap();
    model.runs[at].agents[0].outcome = Some(AgentOutcome::Merged);
    model.runs[at].agents[1].outcome = Some(AgentOutcome::Discarded);
    for size in SIZES {
        let (text, _) = screen(&model, size);
        let row = |task: &str| {
            text.lines()
                .find(|l| l.contains(task))
                .unwrap_or_else(|| panic!("{task}:\n{text}"))
                .to_owned()
        };
        assert!(row("To review").contains("review 1✓ 1✗"), "{text}");
        assert!(row("Already picked").contains("picked 1 1✓ 1✗"), "{text}");
        assert!(row("Write notes.txt").contains("waiting"), "{text}");
        assert!(!text.contains("ended"), "no run just `ended`:\n{text}");
    }
    // The agents' pane says it too.
    let (text, _) = screen(&model, (160, 48));
    assert!(text.contains("· review 1✓ 1✗ · To review"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pick_names_the_evidence_against_it_and_forcing_is_a_key_of_its_own() {
    let h = home().await;
    let id = common::reviewed_run(&h.store, "Fix the parser").await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    select(&mut model, &id);
    // Agent 2, whose check failed.
    press(&mut model, KeyCode::Char('j'));
    assert!(
        press(&mut model, KeyCode::Char('p')).is_empty(),
        "p asks first"
    );
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(text.contains("Pick agent 2?"), "{text}");
        assert!(text.contains("agent 2's check failed (exit 1)."), "{text}");
        assert!(text.contains("F picks it anyway · Esc cancels"), "{text}");
        assert!(!text.contains("y pick"), "y is not offered:\n{text}");
    }
    // y does not pick against the evidence; F does, forced.
    assert!(press(&mut model, KeyCode::Char('y')).is_empty());
    assert!(
        press(&mut model, KeyCode::Char('A')).is_empty(),
        "no winner yet"
    );
    assert_eq!(
        press(&mut model, KeyCode::Char('F')),
        vec![Action::Pick {
            run: id.clone(),
            agent: 1,
            force: true,
            also: false,
        }]
    );
    assert!(model.overlay.is_none());

    // Agent 3 changed nothing: said as berth-run says it; Esc leaves it.
    press(&mut model, KeyCode::Char('j'));
    press(&mut model, KeyCode::Char('p'));
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("agent 3 changed nothing."), "{text}");
    assert!(press(&mut model, KeyCode::Esc).is_empty());
    assert!(model.overlay.is_none());
    assert!(screen(&model, (80, 24)).0.contains("left as it was"));

    // Agent 1 passed: nothing against it, y picks.
    press(&mut model, KeyCode::Char('g'));
    press(&mut model, KeyCode::Char('p'));
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("y pick · n or Esc cancels"), "{text}");
    assert!(!text.contains("F picks"), "{text}");
    assert_eq!(
        press(&mut model, KeyCode::Char('y')),
        vec![Action::Pick {
            run: id.clone(),
            agent: 0,
            force: false,
            also: false,
        }]
    );

    // Once agent 1 is merged: agent 2 needs both keys, each said.
    let at = model.runs.iter().position(|r| r.id == id).unwrap();
    model.runs[at].agents[0].outcome = Some(AgentOutcome::Merged);
    press(&mut model, KeyCode::Char('j'));
    press(&mut model, KeyCode::Char('p'));
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(
            text.contains("has its winner already: agent 1 was merged."),
            "{text}"
        );
        assert!(text.contains("F picks it anyway"), "{text}");
        assert!(text.contains("A merges it as well"), "{text}");
    }
    assert!(
        press(&mut model, KeyCode::Char('F')).is_empty(),
        "A still needed"
    );
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("F given"), "{text}");
    assert_eq!(
        press(&mut model, KeyCode::Char('A')),
        vec![Action::Pick {
            run: id.clone(),
            agent: 1,
            force: true,
            also: true,
        }]
    );

    // The merged agent itself cannot be picked again: said, no dialog.
    press(&mut model, KeyCode::Char('k'));
    assert!(press(&mut model, KeyCode::Char('p')).is_empty());
    assert!(model.overlay.is_none());
    let (text, _) = screen(&model, (80, 24));
    assert!(
        text.contains("agent 1 cannot be picked: its work was merged"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn v_shows_a_checks_own_words_scrolled_like_a_transcript() {
    let h = home().await;
    let id = common::reviewed_run(&h.store, "Fix the parser").await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    let cx = common::context(&h.ops, &h.store);
    select(&mut model, &id);
    press(&mut model, KeyCode::Char('j'));
    let actions = press(&mut model, KeyCode::Char('v'));
    assert_eq!(
        actions,
        vec![Action::LoadCheck {
            run: id.clone(),
            agent: 1
        }]
    );
    // At once, the record's words: how it failed and its last lines.
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("Agent 2 (berth) · check"), "{text}");
    assert!(
        text.contains("test parse::blank_lines ... FAILED"),
        "{text}"
    );
    // Then the whole output, as kept beside the run: its first line is there too.
    for action in actions {
        let update = berth_ui::act(&cx, action).await;
        model.apply(update);
    }
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(
            text.contains("test parse::blank_lines ... FAILED"),
            "{text}"
        );
    }
    press(&mut model, KeyCode::Char('g'));
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(text.contains("check failed (exit 1): cargo test"), "{text}");
        assert!(
            text.contains("check output line 1\n") || text.contains("check output line 1 "),
            "{text}"
        );
    }
    assert!(
        model
            .check
            .as_ref()
            .unwrap()
            .lines
            .iter()
            .any(|l| l.text == "check output line 1"),
        "the first line, which the record does not quote"
    );

    // Kept on another machine (a pool): the record's last lines, saying so.
    model.apply(Update::Check {
        run: id.clone(),
        agent: 1,
        kept: Ok(None),
    });
    let (text, _) = screen(&model, (160, 48));
    assert!(
        text.contains("the whole output is kept where the check ran"),
        "{text}"
    );
    assert!(text.contains("check output line 59"), "{text}");
    assert!(!text.contains("check output line 1 "), "{text}");

    // Agent 3's did not run, and says why; agent 1's passed.
    press(&mut model, KeyCode::Esc);
    let actions = press(&mut model, KeyCode::Char('j'));
    assert!(actions.is_empty(), "nothing to read: {actions:?}");
    let (text, _) = screen(&model, (80, 24));
    assert!(
        text.contains("check not run (the agent changed nothing): cargo test"),
        "{text}"
    );
    press(&mut model, KeyCode::Char('g'));
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("Agent 1 (berth) · check"), "{text}");
    assert!(text.contains("check passed: cargo test"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_diff_pane_ends_in_the_selected_agents_diff_whatever_moved() {
    let h = home().await;
    let first = common::reviewed_run(&h.store, "First run").await;
    let second = common::reviewed_run(&h.store, "Second run").await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    select(&mut model, &second);
    let asked = press(&mut model, KeyCode::Char('d'));
    assert!(
        matches!(&asked[..], [Action::LoadDiff { agent: 0, .. }]),
        "{asked:?}"
    );
    // Agent 2 chosen before agent 1's diff came: agent 1's answer is dropped.
    press(&mut model, KeyCode::Esc);
    let asked = press(&mut model, KeyCode::Char('j'));
    assert!(
        matches!(&asked[..], [Action::LoadDiff { agent: 1, .. }]),
        "{asked:?}"
    );
    let late = model.apply(Update::Diff {
        run: second.clone(),
        agent: 0,
        diff: Ok(a_diff("agent one's line")),
    });
    assert!(late.is_empty(), "agent 2's is being read: {late:?}");
    model.apply(Update::Diff {
        run: second.clone(),
        agent: 1,
        diff: Ok(a_diff("agent two's line")),
    });
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("+agent two's line"), "{text}");
    assert!(!text.contains("agent one's line"), "{text}");

    // Esc twice and another run: its agent's diff is asked for, and shows.
    press(&mut model, KeyCode::Esc);
    let asked = press(&mut model, KeyCode::Char('j'));
    assert_eq!(model.selected_run().unwrap().id, first);
    let Some(Action::LoadDiff { run, agent, .. }) = asked.last().cloned() else {
        panic!("the new run's diff is asked for: {asked:?}");
    };
    assert_eq!((run.clone(), agent), (first.clone(), 1));
    // Its answer (through berth-run: the run's workspace is not there) ends the reading.
    let cx = common::context(&h.ops, &h.store);
    let action = asked.last().cloned().unwrap();
    model.apply(berth_ui::act(&cx, action).await);
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(!text.contains("reading the diff…"), "{text}");
        assert!(text.contains("Agent 2 (berth) · diff"), "{text}");
    }
    // A stale answer of the run left arrives: dropped, the pane keeps this run's.
    model.apply(Update::Diff {
        run: second,
        agent: 1,
        diff: Err("the other run's".to_owned()),
    });
    let (text, _) = screen(&model, (80, 24));
    assert!(!text.contains("the other run's"), "{text}");
    assert!(!text.contains("reading the diff…"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_working_agents_diff_is_read_again_at_most_once_a_second() {
    let h = home().await;
    let (id, _held) = common::working_run(&h.store, "Write notes.txt").await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    let start = model.now;
    select(&mut model, &id);
    let asked = press(&mut model, KeyCode::Char('d'));
    assert!(matches!(&asked[..], [Action::LoadDiff { .. }]), "{asked:?}");
    // While the read is under way, time asks nothing more.
    let later = |ms| start + chrono::Duration::milliseconds(ms);
    assert!(model.tick(later(500)).is_empty(), "one read at a time");
    model.apply(Update::Diff {
        run: id.clone(),
        agent: 0,
        diff: Ok(a_diff("the first line")),
    });
    press(&mut model, KeyCode::Char('g'));
    let scrolled = model.diff_scroll.back;
    assert!(scrolled > 0);
    assert!(
        model.tick(later(900)).is_empty(),
        "less than a second since"
    );
    let again = model.tick(later(1_000));
    assert!(
        matches!(&again[..], [Action::LoadDiff { agent: 0, .. }]),
        "{again:?}"
    );
    assert!(model.tick(later(1_500)).is_empty(), "one read at a time");
    model.apply(Update::Diff {
        run: id.clone(),
        agent: 0,
        diff: Ok(a_diff("a line written since")),
    });
    assert_eq!(
        model.diff_scroll.back, scrolled,
        "a refresh keeps the scroll"
    );
    assert!(
        model.tick(later(1_900)).is_empty(),
        "less than a second since"
    );
    press(&mut model, KeyCode::Char('G'));
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("+a line written since"), "{text}");
    assert!(matches!(
        &model.tick(later(2_000))[..],
        [Action::LoadDiff { .. }]
    ));

    // An agent that is over is not read again.
    let done = common::reviewed_run(&h.store, "Over").await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    select(&mut model, &done);
    let asked = press(&mut model, KeyCode::Char('d'));
    assert_eq!(asked.len(), 1);
    model.apply(Update::Diff {
        run: done,
        agent: 0,
        diff: Ok(a_diff("x")),
    });
    assert!(model.tick(start + chrono::Duration::seconds(60)).is_empty());
    assert_eq!(model.detail, Detail::Diff);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_told_text_shows_in_the_transcript_where_it_was_told() {
    let h = home().await;
    let id = common::finished_run(&h.store, "Fix the parser bug", 3).await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    select(&mut model, &id);
    press(&mut model, KeyCode::Char('t'));
    typed(&mut model, "add a test for blank lines");
    let asked = press(&mut model, KeyCode::Enter);
    assert_eq!(
        asked,
        vec![Action::Tell {
            run: id.clone(),
            agent: 0,
            text: "add a test for blank lines".to_owned()
        }]
    );
    press(&mut model, KeyCode::Char('l'));
    // The tell went through (what act.rs says when berth-run told it).
    model.apply(Update::Done("agent 1 is told, in process 4242".to_owned()));
    // The run's events say what it was told, whoever told it, then the told turn.
    let told = [
        berth_run::RunEvent::Told {
            agent: 0,
            text: "add a test for blank lines".to_owned(),
        },
        berth_run::RunEvent::Text {
            agent: 0,
            text: "Added the test.\n".to_owned(),
        },
    ];
    model.apply(Update::Events {
        run: id.clone(),
        events: told.to_vec(),
        from_start: false,
    });
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(
            text.contains("› told: add a test for blank lines"),
            "{text}"
        );
        assert!(text.contains("in process 4242"), "{text}");
    }
    // Read again from the start (R), it stays where it was told, once.
    let (mut all, _) = h.store.events(&id, 0).await.unwrap();
    all.extend(told);
    let actions = press(&mut model, KeyCode::Char('R'));
    assert_eq!(actions, vec![Action::Follow(Some(id.clone()))]);
    model.apply(Update::Events {
        run: id.clone(),
        events: all,
        from_start: true,
    });
    let (text, _) = screen(&model, (160, 48));
    assert_eq!(
        text.matches("› told: add a test for blank lines").count(),
        1,
        "{text}"
    );
    let told = text.find("› told:").unwrap();
    let after = text.find("Added the test.").unwrap();
    assert!(told < after, "in the order it happened:\n{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_quotes_what_the_agent_said_before_asking() {
    let h = home().await;
    let (_id, _held) = common::waiting_run(&h.store, "Write notes.txt").await;
    let model = common::loaded(&h.ops, &h.store, true).await;
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(text.contains("An agent waits for you"), "{text}");
        assert!(text.contains("it said:"), "{text}");
        assert!(text.contains("I will write the notes now."), "{text}");
        assert!(text.contains("y allow once · a always · n deny"), "{text}");
    }
}
