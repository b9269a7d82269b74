//! Every tab of the dashboard drawn on ratatui's test backend, at 80x24 and 160x48, from a
//! model loaded out of a real home: runs kept through berth-run's store, workspaces and
//! sessions made through berth-ops. Keys are pressed as a person would.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use berth_ops::{CreateSession, CreateWorkspace, Message, Ops, Repository, Role};
use berth_run::RunStore;
use berth_ui::{Action, Model, Update};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Color;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

struct Home {
    _dir: tempfile::TempDir,
    ops: Ops,
    store: RunStore,
}

async fn home() -> Home {
    let dir = tempfile::tempdir().unwrap();
    let ops = berth_ops::open(dir.path(), &[]).unwrap();
    let store = RunStore::open(&ops).await.unwrap();
    for name in ["api-server", "docs-site"] {
        let mut create = CreateWorkspace::new(Repository::None);
        create.name = Some(name.to_owned());
        create.description = format!("the {name}");
        ops.create_workspace(create).await.unwrap();
    }
    let session = ops
        .create_session(CreateSession {
            workspace: "api-server".to_owned(),
            title: "Why does the build fail".to_owned(),
            provider: None,
            model: Some("claude-sonnet-4-5".to_owned()),
            id: None,
            cwd: None,
            agent: None,
        })
        .await
        .unwrap();
    for (role, text) in [
        (Role::User, "Why does the build fail?"),
        (Role::Assistant, "A missing semicolon in main.rs, line 12."),
    ] {
        ops.append_message(&session, &Message::new(role, text))
            .await
            .unwrap();
    }
    common::finished_run(&store, "Fix the parser bug in parse.rs", 30).await;
    Home {
        _dir: dir,
        ops,
        store,
    }
}

use common::{press, screen, typed};

#[tokio::test(flavor = "multi_thread")]
async fn runs_tab_lists_runs_and_shows_agents_and_a_transcript_at_both_sizes() {
    let h = home().await;
    let (_waiting, _held) = common::waiting_run(&h.store, "Write notes.txt").await;
    for size in SIZES {
        let mut model = common::loaded(&h.ops, &h.store, true).await;
        // The question is put aside here; its dialog has a test of its own.
        press(&mut model, KeyCode::Esc);
        let (text, _) = screen(&model, size);
        assert!(text.contains("1 Runs"), "{text}");
        assert!(text.contains("Fix the parser bug"), "{text}");
        assert!(text.contains("Write notes.txt"), "{text}");
        assert!(
            text.contains("waiting"),
            "a run whose agent waits says so:\n{text}"
        );
        assert!(text.contains("1?"), "{text}");
        // The newest run is first and selected: the waiting one; then the finished one.
        press(&mut model, KeyCode::Char('j'));
        let actions = model.follow_selected();
        assert!(actions.is_empty(), "moving follows at once: {actions:?}");
        let id = model.selected_run().unwrap().id.clone();
        common::follow(&mut model, &h.store, Action::Follow(Some(id))).await;
        let (text, _) = screen(&model, size);
        assert!(text.contains("1✓ 1✗"), "{text}");
        assert!(text.contains("done"), "{text}");
        assert!(text.contains("failed"), "{text}");
        assert!(text.contains("pass"), "{text}");
        assert!(text.contains("fail"), "{text}");
        assert!(text.contains("15.4k"), "tokens: {text}");
        assert!(text.contains("$0.12"), "cost: {text}");
        // Enter: the agents; Enter: agent 1's transcript, following its end.
        press(&mut model, KeyCode::Enter);
        press(&mut model, KeyCode::Enter);
        let (text, _) = screen(&model, size);
        assert!(text.contains("transcript · following"), "{text}");
        assert!(
            text.contains("Fixed: the parser now skips blank lines."),
            "{text}"
        );
        assert!(
            text.contains("▸ write_file"),
            "a tool call is one line: {text}"
        );
        assert!(text.contains("check pass"), "{text}");
        if size.0 < 120 {
            assert!(
                !text.contains("RUN      STATE"),
                "the detail fills a small screen: {text}"
            );
        }
        // Scrolled back to the top: the first line of the answer.
        press(&mut model, KeyCode::Char('g'));
        let (text, _) = screen(&model, size);
        assert!(text.contains("I found the bug in parse.rs."), "{text}");
        assert!(text.contains("G follows"), "{text}");
        // A pool's runs name the node each ran on.
        model.pooled = true;
        press(&mut model, KeyCode::Esc);
        press(&mut model, KeyCode::Esc);
        let (text, _) = screen(&model, size);
        assert!(
            text.contains("NODE") && text.contains(h.store.node()),
            "{text}"
        );
        model.pooled = false;
        // Agent 2: its failed tool and why it failed.
        press(&mut model, KeyCode::Enter);
        press(&mut model, KeyCode::Char('j'));
        press(&mut model, KeyCode::Char('l'));
        let (text, _) = screen(&model, size);
        assert!(text.contains("▸ run_command  failed"), "{text}");
        assert!(text.contains("529: overloaded"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_diff_is_coloured_and_an_agent_without_a_workspace_says_why() {
    let h = home().await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    press(&mut model, KeyCode::Enter);
    let actions = press(&mut model, KeyCode::Char('d'));
    let Some(Action::LoadDiff { run, agent, .. }) = actions.first().cloned() else {
        panic!("d asks for the diff: {actions:?}");
    };
    let diff = berth_ops::WorktreeDiff {
        base: "main".to_owned(),
        merge_base: "0".repeat(40),
        files: vec![berth_ops::FileDiff {
            path: "src/parse.rs".to_owned(),
            status: "modified",
            added: Some(1),
            removed: Some(1),
        }],
        patch: Some(
            "diff --git a/src/parse.rs b/src/parse.rs\n--- a/src/parse.rs\n+++ b/src/parse.rs\n@@ -1,2 +1,2 @@\n fn parse() {\n-    let x = 1\n+    let x = 1;\n"
                .to_owned(),
        ),
    };
    model.apply(Update::Diff {
        run,
        agent,
        diff: Ok(diff),
    });
    for size in SIZES {
        let (text, buffer) = screen(&model, size);
        assert!(
            text.contains("1 file(s) changed against main, +1 -1"),
            "{text}"
        );
        assert!(text.contains("src/parse.rs"), "{text}");
        let added = text
            .lines()
            .position(|l| l.contains("+    let x = 1;"))
            .unwrap();
        let removed = text
            .lines()
            .position(|l| l.contains("-    let x = 1 "))
            .unwrap();
        let colour_of = |row: usize, needle: &str| {
            let line = text.lines().nth(row).unwrap();
            let at = line.find(needle).unwrap();
            let x = line[..at].chars().count() as u16;
            buffer[(x, row as u16)].fg
        };
        assert_eq!(colour_of(added, "+    let"), Color::Green);
        assert_eq!(colour_of(removed, "-    let"), Color::Red);
    }
    // Once picked, the agent has no workspace: the pane says so instead of failing.
    model.apply(Update::Diff {
        run: model.selected_run().unwrap().id.clone(),
        agent: 0,
        diff: Err("workspace ws-1 not found".to_owned()),
    });
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("workspace ws-1 not found"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_question_is_a_dialog_and_y_answers_it() {
    let h = home().await;
    let (id, _held) = common::waiting_run(&h.store, "Write notes.txt").await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(text.contains("An agent waits for you"), "{text}");
        assert!(text.contains("may it write_file?"), "{text}");
        assert!(text.contains("write notes.txt (12 bytes)"), "{text}");
        assert!(text.contains("y allow once · a always · n deny"), "{text}");
    }
    // Keys go to the dialog, not to the list below it.
    assert!(press(&mut model, KeyCode::Char('j')).is_empty());
    let actions = press(&mut model, KeyCode::Char('y'));
    assert_eq!(
        actions,
        vec![Action::Answer {
            run: id,
            agent: 0,
            question: "q-1".to_owned(),
            answer: berth_run::Answer::Allow,
        }]
    );
    let (text, _) = screen(&model, (80, 24));
    assert!(!text.contains("An agent waits for you"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn workspaces_and_sessions_tabs_list_filter_and_open() {
    let h = home().await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    assert_eq!(press(&mut model, KeyCode::Char('2')), Vec::<Action>::new());
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(text.contains("Workspaces (2)"), "{text}");
        assert!(text.contains("api-server"), "{text}");
        assert!(text.contains("docs-site"), "{text}");
        assert!(text.contains("plain"), "{text}");
    }
    press(&mut model, KeyCode::Char('/'));
    typed(&mut model, "docs");
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("Workspaces (1) /docs"), "{text}");
    assert!(!text.contains("api-server"), "{text}");
    press(&mut model, KeyCode::Enter);
    assert_eq!(
        model.selected_workspace().unwrap().name.as_deref(),
        Some("docs-site")
    );

    press(&mut model, KeyCode::Char('3'));
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(text.contains("Sessions (1)"), "{text}");
        assert!(text.contains("Why does the build fail"), "{text}");
        assert!(text.contains("claude-sonnet-4-5"), "{text}");
        assert!(text.contains("api-server"), "{text}");
    }
    let actions = press(&mut model, KeyCode::Enter);
    let Some(Action::LoadSessionTranscript(id)) = actions.first().cloned() else {
        panic!("Enter opens the transcript: {actions:?}");
    };
    let session = h.ops.resolve_session(&id).await.unwrap();
    let messages = h.ops.transcript(&session).await.unwrap().messages;
    model.apply(Update::SessionTranscript {
        id,
        messages: Ok(messages),
    });
    for size in SIZES {
        let (text, _) = screen(&model, size);
        assert!(
            text.contains("A missing semicolon in main.rs, line 12."),
            "{text}"
        );
        assert!(text.contains("assistant"), "{text}");
    }
    press(&mut model, KeyCode::Esc);
    let (text, _) = screen(&model, (80, 24));
    assert!(
        text.contains("Sessions (1)"),
        "Esc goes back to the list: {text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn help_lists_every_key_and_no_color_draws_no_colour() {
    let h = home().await;
    let mut model = common::loaded(&h.ops, &h.store, false).await;
    press(&mut model, KeyCode::Char('?'));
    let (text, buffer) = screen(&model, (160, 48));
    for (key, what) in berth_ui::KEYS {
        assert!(
            text.contains(key) && text.contains(what),
            "{key} {what}:\n{text}"
        );
    }
    for cell in buffer.content() {
        assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset), "{text}");
    }
    // At 80x24, too short for a key a row, every key still shows, two a row.
    let (small, _) = screen(&model, (80, 24));
    for (key, _) in berth_ui::KEYS {
        assert!(small.contains(&format!("{key}  ")), "{key}:\n{small}");
    }
    assert!(small.contains("q  quit"), "{small}");
    // Any key closes the help; the footer names the keys at 80 columns.
    press(&mut model, KeyCode::Char('x'));
    let (text, _) = screen(&model, (80, 24));
    assert!(!text.contains("Keys (any key closes)"), "{text}");
    let footer = text.lines().nth(23).unwrap();
    assert!(footer.contains("Enter open"), "{footer}");
    assert!(footer.contains("q quit"), "{footer}");
}

#[tokio::test(flavor = "multi_thread")]
async fn pick_and_discard_ask_first_and_tell_and_a_new_run_are_typed() {
    let h = home().await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    let id = model.selected_run().unwrap().id.clone();
    press(&mut model, KeyCode::Enter);
    assert!(
        press(&mut model, KeyCode::Char('p')).is_empty(),
        "p asks first"
    );
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("Merge agent 1 (berth)"), "{text}");
    assert_eq!(
        press(&mut model, KeyCode::Char('y')),
        vec![Action::Pick {
            run: id.clone(),
            agent: 0,
            force: false,
            also: false,
        }]
    );
    press(&mut model, KeyCode::Char('x'));
    assert!(
        press(&mut model, KeyCode::Char('n')).is_empty(),
        "n leaves it"
    );
    assert!(model.overlay.is_none());

    press(&mut model, KeyCode::Char('t'));
    typed(&mut model, "add a test");
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("Tell agent 1 of run"), "{text}");
    assert!(text.contains("add a test"), "{text}");
    assert_eq!(
        press(&mut model, KeyCode::Enter),
        vec![Action::Tell {
            run: id,
            agent: 0,
            text: "add a test".to_owned()
        }]
    );

    press(&mut model, KeyCode::Char('c'));
    typed(&mut model, "Add a README");
    press(&mut model, KeyCode::Tab);
    press(&mut model, KeyCode::Backspace);
    typed(&mut model, "berth,berth");
    press(&mut model, KeyCode::Tab);
    typed(&mut model, "test -f README.md");
    let (text, _) = screen(&model, (80, 24));
    assert!(text.contains("Task: Add a README"), "{text}");
    assert!(text.contains("Agents: berth,berth"), "{text}");
    let actions = press(&mut model, KeyCode::Enter);
    assert_eq!(
        actions,
        vec![Action::Start(berth_ui::NewRun {
            task: "Add a README".to_owned(),
            agents: "berth,berth".to_owned(),
            check: "test -f README.md".to_owned(),
            allow: String::new(),
        })]
    );
}

/// With `BERTH_UI_SCREENS=DIR`, the screens docs/ui.md shows, written there as text (the
/// test passes either way: what it draws is checked above).
#[tokio::test(flavor = "multi_thread")]
async fn screens_for_the_docs() {
    let Some(dir) = std::env::var_os("BERTH_UI_SCREENS") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let h = home().await;
    let (_id, _held) = common::waiting_run(&h.store, "Write notes.txt").await;
    let mut model = common::loaded(&h.ops, &h.store, false).await;
    model.now = chrono::Utc::now() + chrono::Duration::minutes(3);
    let save = |name: &str, model: &Model, size| {
        let (text, _) = screen(model, size);
        std::fs::write(dir.join(format!("{name}.txt")), text).unwrap();
    };
    save("question", &model, (80, 24));
    press(&mut model, KeyCode::Esc);
    press(&mut model, KeyCode::Char('j'));
    let id = model.selected_run().unwrap().id.clone();
    common::follow(&mut model, &h.store, Action::Follow(Some(id))).await;
    save("runs-wide", &model, (160, 48));
    press(&mut model, KeyCode::Enter);
    save("agents", &model, (80, 24));
    press(&mut model, KeyCode::Char('j'));
    press(&mut model, KeyCode::Char('p'));
    save("pick", &model, (80, 24));
    press(&mut model, KeyCode::Esc);
    press(&mut model, KeyCode::Char('v'));
    save("check", &model, (80, 24));
    press(&mut model, KeyCode::Esc);
    press(&mut model, KeyCode::Char('k'));
    press(&mut model, KeyCode::Enter);
    save("transcript", &model, (80, 24));
    press(&mut model, KeyCode::Char('2'));
    save("workspaces", &model, (80, 24));
    press(&mut model, KeyCode::Char('3'));
    save("sessions", &model, (80, 24));
}

/// Esc and a key typed right after it reach the dashboard as one Alt-key (`ESC j`): it does
/// both, so a quick `Esc j` moves in the list it went back to.
#[tokio::test(flavor = "multi_thread")]
async fn esc_then_a_key_sent_as_one_alt_key_does_both() {
    let h = home().await;
    common::finished_run(&h.store, "A second run", 3).await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    press(&mut model, KeyCode::Enter);
    assert_eq!(model.pane, berth_ui::Pane::Agents);
    berth_ui::key(
        &mut model,
        KeyEvent::new(KeyCode::Char('j'), KeyModifiers::ALT),
    );
    assert_eq!(model.pane, berth_ui::Pane::Runs);
    assert_eq!(model.run_sel, 1, "j moved in the runs");
    // Two Escs at once: back twice.
    press(&mut model, KeyCode::Enter);
    press(&mut model, KeyCode::Enter);
    berth_ui::key(&mut model, KeyEvent::new(KeyCode::Esc, KeyModifiers::ALT));
    assert_eq!(model.pane, berth_ui::Pane::Runs);
}

/// What an agent chooses (a tool's name, its failure's words from its standard error, its
/// answer) and what a device or a page names (a session's title, a workspace's description)
/// never reaches the terminal as a control sequence: an escape could retitle the window, set
/// the clipboard (OSC 52) or clear the screen. Every cell of every tab is checked.
#[tokio::test(flavor = "multi_thread")]
async fn what_an_agent_or_a_device_names_reaches_no_terminal_as_control_sequences() {
    const EVIL: &str = "\x1b]52;c;ZXZpbA==\x07\x1b]0;owned\x07\x1b[2J\u{9b}31m\u{202e}";
    let h = home().await;
    let mut create = CreateWorkspace::new(Repository::None);
    create.name = Some("hostile".to_owned());
    create.description = format!("described {EVIL}");
    h.ops.create_workspace(create).await.unwrap();
    h.ops
        .create_session(CreateSession {
            workspace: "hostile".to_owned(),
            title: format!("titled {EVIL}"),
            provider: None,
            // A model's name is refused with control characters at the edge already.
            model: Some("claude-sonnet-4-5".to_owned()),
            id: None,
            cwd: None,
            agent: None,
        })
        .await
        .unwrap();
    let record = h
        .store
        .create(berth_run::StoredRequest::of(&common::request(
            &format!("task {EVIL}"),
            1,
        )))
        .await
        .unwrap();
    let mut s = h.store.supervise(&record.id).await.unwrap();
    for event in [
        common::started(0, record.id.as_str()),
        berth_run::RunEvent::Text {
            agent: 0,
            text: format!("answer {EVIL}\n"),
        },
        common::tool(0, &format!("tool{EVIL}")),
    ] {
        s.take(&event).await.unwrap();
    }
    s.flush().await.unwrap();
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    let mut screens = Vec::new();
    for keys in ["", "\n\n", "2/hostile\n", "3"] {
        for c in keys.chars() {
            press(
                &mut model,
                match c {
                    '\n' => KeyCode::Enter,
                    c => KeyCode::Char(c),
                },
            );
        }
        for size in SIZES {
            screens.push(screen(&model, size));
        }
    }
    let shown: String = screens.iter().map(|(t, _)| t.as_str()).collect();
    for name in ["task", "answer", "tool", "described", "titled"] {
        assert!(shown.contains(name), "{name} is on a screen:\n{shown}");
    }
    no_control_reaches_the_terminal(&screens);
    // Shown, not dropped: a person sees that the text held an escape and a bidi override.
    assert!(shown.contains("\\x1b]52;c;ZXZpbA=="), "{shown}");
    assert!(shown.contains("\\u{202e}"), "{shown}");
}

/// No cell of any screen holds a control character or a bidi control: each would drive the
/// terminal or reorder what it shows.
fn no_control_reaches_the_terminal(screens: &[(String, ratatui::buffer::Buffer)]) {
    for (text, buffer) in screens {
        for cell in buffer.content() {
            assert!(
                !cell
                    .symbol()
                    .chars()
                    .any(berth_ops::shown::drives_the_terminal),
                "a control character reached the terminal: {:?}\n{text}",
                cell.symbol()
            );
        }
    }
}

/// An agent's file names in a diff's list are quoted as git quotes them, and the escape
/// sequences of its files' lines (OSC 52, a screen clear, cursor moves, a C1 CSI, a bidi
/// override) are shown as escapes, the diff's colours kept.
#[tokio::test(flavor = "multi_thread")]
async fn a_diff_quotes_an_agents_file_names_and_shows_its_escapes() {
    let h = home().await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    press(&mut model, KeyCode::Enter);
    let actions = press(&mut model, KeyCode::Char('d'));
    let Some(Action::LoadDiff { run, agent, .. }) = actions.first().cloned() else {
        panic!("d asks for the diff: {actions:?}");
    };
    let name = "evil\x1b[31mname\u{9b}2J\u{202e}txt";
    let quoted = "\"evil\\033[31mname\\302\\2332J\\342\\200\\256txt\"";
    let diff = berth_ops::WorktreeDiff {
        base: "main".to_owned(),
        merge_base: "0".repeat(40),
        files: vec![berth_ops::FileDiff {
            path: name.to_owned(),
            status: "added",
            added: Some(1),
            removed: None,
        }],
        patch: Some(format!(
            "diff --git {q} {q}\n+++ {q}\n@@ -0,0 +1 @@\n+ok\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[1A\x1b[2Kgone\u{9b}2J\u{202e}\n",
            q = quoted
        )),
    };
    model.apply(Update::Diff {
        run,
        agent,
        diff: Ok(diff),
    });
    let mut screens = Vec::new();
    for size in SIZES {
        screens.push(screen(&model, size));
    }
    let (text, buffer) = &screens[1];
    assert!(text.contains(quoted), "the name as git quotes it:\n{text}");
    let added = text
        .lines()
        .position(|l| {
            l.contains("+ok\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\x1b[1A\\x1b[2Kgone\\u{9b}2J\\u{202e}")
        })
        .unwrap_or_else(|| panic!("the added line, its escapes shown:\n{text}"));
    let line = text.lines().nth(added).unwrap();
    let x = line[..line.find("+ok").unwrap()].chars().count() as u16;
    assert_eq!(buffer[(x, added as u16)].fg, Color::Green);
    no_control_reaches_the_terminal(&screens);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failure_shows_its_reason_past_a_long_command_and_a_key_clears_it() {
    let h = home().await;
    let mut model = common::loaded(&h.ops, &h.store, true).await;
    // What a pick says when git has no identity: the command is long, git's words follow.
    let failure = "cannot pick agent 1: `git -C /home/a-person/src/project merge --no-ff \
        --no-edit -m berth: Fix the parser bug in parse.rs (run 7f3a, agent 1) \
        berth/run-7f3a-1` failed: Committer identity unknown\n\n*** Please tell me who you \
        are.\n\nRun\n\n  git config --global user.email \"you@example.com\"";
    model.apply(Update::Failed(failure.to_owned()));
    for size in SIZES {
        let (text, buffer) = screen(&model, size);
        assert!(text.contains("Committer identity unknown"), "{text}");
        assert!(text.contains("Please tell me who you"), "{text}");
        // The keys' line is still the last row.
        let last = text.lines().last().unwrap();
        assert!(last.contains("quit"), "{text}");
        let failed_cell = (0..size.0)
            .flat_map(|x| (0..size.1).map(move |y| (x, y)))
            .find(|&(x, y)| buffer[(x, y)].symbol() == "C" && buffer[(x, y)].fg == Color::Red);
        assert!(failed_cell.is_some(), "the failure is red:\n{text}");
    }
    // Any key clears it.
    press(&mut model, KeyCode::Char('j'));
    let (text, _) = screen(&model, (80, 24));
    assert!(!text.contains("Committer identity"), "{text}");
}
