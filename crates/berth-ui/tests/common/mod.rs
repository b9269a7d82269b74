//! Runs kept through berth-run's own store, as a supervisor keeps them (a record, its
//! events), for the render tests and the benchmark; and a model loaded from a home as the
//! dashboard's feed loads it.

#![allow(dead_code)] // each user takes what it needs

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use berth_ops::{Ops, Repository};
use berth_run::{
    AgentSpec, AgentState, AgentSummary, CheckResult, RunEvent, RunId, RunRequest, RunStore,
    StoredRequest,
};
use berth_ui::{Model, Update};

pub fn request(task: &str, agents: usize) -> RunRequest {
    RunRequest {
        task: task.to_owned(),
        repository: Repository::None,
        workspace: None,
        agents: vec![AgentSpec::Berth { model: None }; agents],
        name: None,
        policy: berth_run::Policy::new(&[] as &[String], false),
        check: Some("cargo test".to_owned()),
        check_timeout: Duration::from_secs(600),
        resume: BTreeMap::new(),
        agent_writable: Vec::new(),
        push: false,
        budget: berth_run::Budget::default(),
        max_agents: None,
        stderr_dir: None,
        ask: None,
    }
}

pub fn started(agent: usize, run: &str) -> RunEvent {
    RunEvent::Started {
        agent,
        label: "berth".to_owned(),
        workspace: format!("ws-{run}-{agent}"),
        workspace_name: format!("fix-the-bug-{}", agent + 1),
        session: format!("session-{run}-{agent}"),
        worktree: PathBuf::from(format!("/nowhere/{run}/{agent}")),
    }
}

fn ended(agent: usize, state: AgentState, message: Option<&str>) -> RunEvent {
    RunEvent::Ended {
        agent,
        state,
        stop: match state {
            AgentState::Done => "end_turn".to_owned(),
            _ => "failed".to_owned(),
        },
        message: message.map(str::to_owned),
        input_tokens: 12_000,
        output_tokens: 3_400,
        elapsed_ms: 95_000,
    }
}

fn checked(agent: usize, passed: bool) -> RunEvent {
    RunEvent::Checked {
        agent,
        check: CheckResult {
            command: "cargo test".to_owned(),
            passed,
            not_run: false,
            outcome: (!passed).then(|| "exited with status 101".to_owned()),
            output: None,
            elapsed_ms: 1_200,
        },
    }
}

fn summary(agent: usize, state: AgentState, passed: bool) -> AgentSummary {
    AgentSummary {
        agent,
        label: "berth".to_owned(),
        workspace: None,
        workspace_name: Some(format!("fix-the-bug-{}", agent + 1)),
        session: None,
        state,
        stop: "end_turn".to_owned(),
        message: None,
        files_changed: 1,
        added: 3,
        removed: 1,
        check: Some(CheckResult {
            command: "cargo test".to_owned(),
            passed,
            not_run: false,
            outcome: None,
            output: None,
            elapsed_ms: 1_200,
        }),
        input_tokens: 12_000,
        output_tokens: 3_400,
        cost_usd: Some(0.12),
        elapsed_ms: 95_000,
    }
}

/// A 2-agent run that is over: agent 1 answered, wrote a file and passed its check; agent 2
/// failed. `lines` lines of answer from agent 1.
pub async fn finished_run(store: &RunStore, task: &str, lines: usize) -> RunId {
    let record = store
        .create(StoredRequest::of(&request(task, 2)))
        .await
        .unwrap();
    let id = record.id.clone();
    let mut s = store.supervise(&id).await.unwrap();
    for agent in 0..2 {
        s.take(&started(agent, id.as_str())).await.unwrap();
    }
    s.take(&RunEvent::Text {
        agent: 0,
        text: "I found the bug in parse.rs.\n".to_owned(),
    })
    .await
    .unwrap();
    // Streamed as a model streams: pieces of lines, many lines per piece.
    let mut piece = String::new();
    for i in 0..lines {
        piece.push_str(&format!(
            "line {i} of the long answer, with some words in it\n"
        ));
        if piece.len() > 4_000 {
            let text = std::mem::take(&mut piece);
            s.take(&RunEvent::Text { agent: 0, text }).await.unwrap();
        }
    }
    if !piece.is_empty() {
        s.take(&RunEvent::Text {
            agent: 0,
            text: piece,
        })
        .await
        .unwrap();
    }
    for event in [
        tool(0, "write_file"),
        RunEvent::ToolDone {
            agent: 0,
            name: "write_file".to_owned(),
            is_error: false,
        },
        RunEvent::Text {
            agent: 0,
            text: "Fixed: the parser now skips blank lines.".to_owned(),
        },
        ended(0, AgentState::Done, None),
        checked(0, true),
        tool(1, "run_command"),
        RunEvent::ToolDone {
            agent: 1,
            name: "run_command".to_owned(),
            is_error: true,
        },
        ended(
            1,
            AgentState::Failed,
            Some("the provider said 529: overloaded"),
        ),
        checked(1, false),
        RunEvent::Summary {
            agents: vec![
                summary(0, AgentState::Done, true),
                summary(1, AgentState::Failed, false),
            ],
        },
    ] {
        s.take(&event).await.unwrap();
    }
    s.flush().await.unwrap();
    s.release().await;
    id
}

/// A tool call, as its JSON line reads (the tool's kind is berth-agent's).
pub fn tool(agent: usize, name: &str) -> RunEvent {
    serde_json::from_value(serde_json::json!({
        "event": "tool", "agent": agent, "name": name, "kind": "edit"
    }))
    .unwrap()
}

/// A 1-agent run still running, whose agent waits on a question (`--ask`).
pub async fn waiting_run(store: &RunStore, task: &str) -> (RunId, berth_run::Supervision) {
    let record = store
        .create(StoredRequest::of(&request(task, 1)))
        .await
        .unwrap();
    let id = record.id.clone();
    let mut s = store.supervise(&id).await.unwrap();
    for event in [
        started(0, id.as_str()),
        RunEvent::Text {
            agent: 0,
            text: "I will write the notes now.\n".to_owned(),
        },
        RunEvent::Asked {
            agent: 0,
            question: "q-1".to_owned(),
            tool: "write_file".to_owned(),
            description: "write notes.txt (12 bytes)".to_owned(),
        },
    ] {
        s.take(&event).await.unwrap();
    }
    s.flush().await.unwrap();
    (id, s)
}

/// The model as the dashboard's feed fills it: the first page of runs, the selected run's
/// events, the workspaces and the sessions.
pub async fn loaded(ops: &Ops, store: &RunStore, color: bool) -> Model {
    let mut model = Model::new("/home/of/berth", color);
    let page = store.page(berth_ui::RUNS_PAGE, None).await.unwrap();
    let actions = model.apply(Update::Runs {
        runs: page.runs.into_iter().map(Result::unwrap).collect(),
        next: page.next,
    });
    let cx = context(ops, store);
    for action in actions {
        match action {
            berth_ui::Action::LoadSaid { .. } => {
                let update = berth_ui::act(&cx, action).await;
                model.apply(update);
            }
            action => follow(&mut model, store, action).await,
        }
    }
    model.apply(Update::Workspaces(ops.list_workspaces().await.unwrap()));
    model.apply(Update::Sessions(ops.list_sessions(None).await.unwrap()));
    model
}

/// Does what the app does for a [`berth_ui::Action::Follow`]: reads the run's events.
pub async fn follow(model: &mut Model, store: &RunStore, action: berth_ui::Action) {
    if let berth_ui::Action::Follow(Some(id)) = action {
        let (events, _) = store.events(&id, 0).await.unwrap();
        model.apply(Update::Events {
            run: id,
            events,
            from_start: true,
        });
    }
}

/// What the dashboard's actions run with, over this home.
pub fn context(ops: &Ops, store: &RunStore) -> berth_ui::Context {
    berth_ui::Context {
        ops: ops.clone(),
        runs: berth_run::Runs::with_store(ops.clone(), store.clone())
            .with_program(std::path::Path::new("berth")),
        store: store.clone(),
        program: PathBuf::from("berth"),
        here: ops.home().to_path_buf(),
        lander: berth_run::Lander::new(
            ops.clone(),
            store.clone(),
            berth_agent::AgentBuilder::new(ops.clone()).build(),
        ),
        foresight: berth_run::Foresight::new(),
    }
}

/// The output of agent 2's failing check in [`reviewed_run`]: 60 lines, the last 20 of which
/// the record quotes.
pub fn failing_output() -> String {
    let mut out: String = (1..=59)
        .map(|i| format!("check output line {i}\n"))
        .collect();
    out.push_str("test parse::blank_lines ... FAILED\n");
    out
}

/// A 3-agent run that is over, each agent done: agent 1 changed a line and its check
/// passed; agent 2's check failed (exit 1), its whole output kept beside the run as a
/// check keeps it; agent 3 changed nothing, so its check did not run.
pub async fn reviewed_run(store: &RunStore, task: &str) -> RunId {
    let record = store
        .create(StoredRequest::of(&request(task, 3)))
        .await
        .unwrap();
    let id = record.id.clone();
    let mut s = store.supervise(&id).await.unwrap();
    let output = failing_output();
    let quoted: Vec<&str> = output.lines().collect();
    let quoted = quoted[quoted.len() - 20..].join("\n");
    let checks = [
        CheckResult {
            command: "cargo test".to_owned(),
            passed: true,
            not_run: false,
            outcome: None,
            output: None,
            elapsed_ms: 1_000,
        },
        CheckResult {
            command: "cargo test".to_owned(),
            passed: false,
            not_run: false,
            outcome: Some("exit 1".to_owned()),
            output: Some(quoted),
            elapsed_ms: 1_000,
        },
        CheckResult::not_run("cargo test", "not run: the agent changed nothing"),
    ];
    let mut summaries = Vec::new();
    for (agent, check) in checks.into_iter().enumerate() {
        s.take(&started(agent, id.as_str())).await.unwrap();
        s.take(&ended(agent, AgentState::Done, None)).await.unwrap();
        s.take(&RunEvent::Checked {
            agent,
            check: check.clone(),
        })
        .await
        .unwrap();
        let mut summary = summary(agent, AgentState::Done, check.passed);
        summary.workspace = Some(format!("ws-{id}-{agent}"));
        summary.files_changed = if agent == 2 { 0 } else { 1 };
        summary.check = Some(check);
        summaries.push(summary);
    }
    s.take(&RunEvent::Summary { agents: summaries })
        .await
        .unwrap();
    s.flush().await.unwrap();
    s.release().await;
    let kept = store.check_path(&id, 1);
    std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
    std::fs::write(kept, output).unwrap();
    id
}

/// A 1-agent run whose agent is at work: it started and said a line.
pub async fn working_run(store: &RunStore, task: &str) -> (RunId, berth_run::Supervision) {
    let record = store
        .create(StoredRequest::of(&request(task, 1)))
        .await
        .unwrap();
    let id = record.id.clone();
    let mut s = store.supervise(&id).await.unwrap();
    for event in [
        started(0, id.as_str()),
        RunEvent::Text {
            agent: 0,
            text: "Writing the file now.\n".to_owned(),
        },
    ] {
        s.take(&event).await.unwrap();
    }
    s.flush().await.unwrap();
    (id, s)
}

/// The screen `model` draws at `(w, h)`, as text, and its cells.
pub fn screen(model: &Model, (w, h): (u16, u16)) -> (String, ratatui::buffer::Buffer) {
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| berth_ui::draw(f, model)).unwrap();
    let buffer = terminal.backend().buffer().clone();
    let mut text = String::new();
    for y in 0..h {
        for x in 0..w {
            text.push_str(buffer[(x, y)].symbol());
        }
        text.push('\n');
    }
    (text, buffer)
}

/// A key pressed, as a person presses it.
pub fn press(model: &mut Model, code: ratatui::crossterm::event::KeyCode) -> Vec<berth_ui::Action> {
    use ratatui::crossterm::event::{KeyEvent, KeyModifiers};
    berth_ui::key(model, KeyEvent::new(code, KeyModifiers::NONE))
}

pub fn typed(model: &mut Model, text: &str) {
    for c in text.chars() {
        press(model, ratatui::crossterm::event::KeyCode::Char(c));
    }
}
