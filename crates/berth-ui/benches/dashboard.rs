//! Benchmark: the dashboard on a home of 10,000 workspaces, 1,000 runs and a run whose agent
//! answered 50,000 lines.
//!
//! `cargo bench -p berth-ui --bench dashboard` (`BENCH_WORKSPACES`, `BENCH_RUNS`,
//! `BENCH_LINES` change the counts).
//!
//! The home is made by this process, then measured by a fresh one (this program again), so
//! the memory figure is the dashboard's alone. Each frame is drawn on ratatui's test backend
//! at 160x48, as `berth ui` draws one, without the terminal's own time to show it.
//!
//! - **first frame**: from opening the home to the first frame that shows the runs and the
//!   newest run's 50,000-line transcript, beside the baseline of reading the same page of
//!   runs and the same events with no model and no frame (the ratio is the dashboard's own
//!   cost). The Workspaces tab's first frame (10,000 rows read) is said too. Bar: 150 ms.
//! - **key to frame**: 3,000 keys a person presses (moves in the runs, the agents, the
//!   transcript scrolled, the tabs, a filter typed over 10,000 workspaces), each to its
//!   frame: median, p99 and worst. Bar: 16 ms at p99.
//! - **memory**: the measuring process's peak resident set. Bar: 100 MB.

#![allow(clippy::unwrap_used)] // a benchmark: a panic is the failure it reports

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use berth_ops::{CreateWorkspace, Repository};
use berth_run::RunStore;
use berth_ui::{Action, Model, Update};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Some(home) = std::env::var_os("BENCH_UI_HOME") {
        return rt.block_on(measure(std::path::Path::new(&home)));
    }
    let (workspaces, runs, lines) = (
        count("BENCH_WORKSPACES", 10_000),
        count("BENCH_RUNS", 1_000),
        count("BENCH_LINES", 50_000),
    );
    let home = tempfile::tempdir().unwrap();
    let started = Instant::now();
    rt.block_on(populate(home.path(), workspaces, runs, lines));
    eprintln!(
        "made {workspaces} workspaces, {runs} runs and a {lines}-line transcript in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .env("BENCH_UI_HOME", home.path())
        .status()
        .unwrap();
    assert!(status.success());
}

async fn populate(home: &std::path::Path, workspaces: usize, runs: usize, lines: usize) {
    let ops = berth_ops::open(home, &[]).unwrap();
    for i in 0..workspaces {
        let mut create = CreateWorkspace::new(Repository::None);
        create.name = (i % 2 == 0).then(|| format!("ws-{i}"));
        create.description = format!("workspace number {i}");
        ops.create_workspace(create).await.unwrap();
    }
    let store = RunStore::open(&ops).await.unwrap();
    for i in 0..runs.saturating_sub(1) {
        common::finished_run(&store, &format!("Task number {i}"), 3).await;
    }
    common::finished_run(&store, "The long one", lines).await;
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn draw(terminal: &mut Terminal<TestBackend>, model: &Model) {
    terminal.draw(|f| berth_ui::draw(f, model)).unwrap();
}

/// What the app does for the actions a key or an update asks for, read here at once; the
/// time spent reading, which the app spends beside its loop (taking the result in is the
/// loop's, and counted).
async fn serve(
    model: &mut Model,
    ops: &berth_ops::Ops,
    store: &RunStore,
    actions: Vec<Action>,
) -> Duration {
    let mut reading = Duration::ZERO;
    for action in actions {
        let t = Instant::now();
        match action {
            Action::Follow(Some(id)) => {
                let (events, _) = store.events(&id, 0).await.unwrap();
                reading += t.elapsed();
                model.apply(Update::Events {
                    run: id,
                    events,
                    from_start: true,
                });
            }
            Action::LoadWorkspaces => {
                let list = ops.list_workspaces().await.unwrap();
                reading += t.elapsed();
                model.apply(Update::Workspaces(list));
            }
            Action::MoreRuns(cursor) => {
                let page = store
                    .page(berth_ui::RUNS_PAGE, Some(&cursor))
                    .await
                    .unwrap();
                reading += t.elapsed();
                model.apply(Update::MoreRuns {
                    runs: page.runs.into_iter().map(Result::unwrap).collect(),
                    next: page.next,
                });
            }
            _ => {}
        }
    }
    reading
}

async fn measure(home: &std::path::Path) {
    // The baseline: the same page and the same events, read and thrown away; once first, so
    // that both it and the dashboard read from a warm page cache.
    let read_plainly = || async {
        let t = Instant::now();
        let ops = berth_ops::open(home, &[]).unwrap();
        let store = RunStore::open(&ops).await.unwrap();
        let page = store.page(berth_ui::RUNS_PAGE, None).await.unwrap();
        let newest = page.runs[0].as_ref().unwrap().id.clone();
        let (events, _) = store.events(&newest, 0).await.unwrap();
        assert!(!events.is_empty());
        t.elapsed()
    };
    read_plainly().await;
    let baseline = read_plainly().await;

    let t = Instant::now();
    let ops = berth_ops::open(home, &[]).unwrap();
    let store = RunStore::open(&ops).await.unwrap();
    let mut model = Model::new(home.display().to_string(), true);
    let page = store.page(berth_ui::RUNS_PAGE, None).await.unwrap();
    let actions = model.apply(Update::Runs {
        runs: page.runs.into_iter().map(Result::unwrap).collect(),
        next: page.next,
    });
    serve(&mut model, &ops, &store, actions).await;
    let mut terminal = Terminal::new(TestBackend::new(160, 48)).unwrap();
    draw(&mut terminal, &model);
    let first = t.elapsed();
    let transcript = model.followed.agents.get(&0).map_or(0, |l| l.len());
    assert!(transcript > count("BENCH_LINES", 50_000), "{transcript}");
    println!(
        "first frame: {:.1} ms (runs and a {transcript}-line transcript); baseline (the same reads, no frame) {:.1} ms; ratio {:.2}; bar 150 ms",
        ms(first),
        ms(baseline),
        first.as_secs_f64() / baseline.as_secs_f64()
    );

    let t = Instant::now();
    let actions = berth_ui::key(&mut model, key(KeyCode::Char('2')));
    serve(&mut model, &ops, &store, actions).await;
    draw(&mut terminal, &model);
    println!(
        "workspaces tab, first frame: {:.1} ms ({} workspaces read)",
        ms(t.elapsed()),
        model.workspaces.len()
    );
    berth_ui::key(&mut model, key(KeyCode::Char('1')));

    // A day's keys: the runs, into the transcript and back, the tabs, a filter typed.
    let mut script: Vec<KeyCode> = Vec::new();
    for _ in 0..5 {
        script.extend(std::iter::repeat_n(KeyCode::Char('j'), 150));
        script.extend(std::iter::repeat_n(KeyCode::Char('k'), 150));
        script.extend([KeyCode::Char('g'), KeyCode::Enter, KeyCode::Enter]);
        script.extend(std::iter::repeat_n(KeyCode::PageUp, 40));
        script.extend(std::iter::repeat_n(KeyCode::Char('k'), 40));
        script.extend([KeyCode::Char('G'), KeyCode::Esc, KeyCode::Esc]);
        script.push(KeyCode::Char('2'));
        script.extend(std::iter::repeat_n(KeyCode::Down, 100));
        script.push(KeyCode::Char('/'));
        script.extend("ws-12".chars().map(KeyCode::Char));
        script.extend([KeyCode::Enter, KeyCode::Char('j'), KeyCode::Char('/')]);
        script.extend(std::iter::repeat_n(KeyCode::Backspace, 5));
        script.extend([KeyCode::Enter, KeyCode::Char('3'), KeyCode::Char('1')]);
        script.extend(std::iter::repeat_n(KeyCode::Char('j'), 40));
    }
    let mut times = Vec::with_capacity(script.len());
    for code in script {
        let t = Instant::now();
        let actions = berth_ui::key(&mut model, key(code));
        let reading = serve(&mut model, &ops, &store, actions).await;
        draw(&mut terminal, &model);
        times.push(t.elapsed() - reading);
    }
    times.sort();
    let at = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    println!(
        "key to frame over {} keys: median {:.2} ms, p99 {:.2} ms, worst {:.2} ms; p99 / bar (16 ms) {:.2}",
        times.len(),
        ms(at(0.5)),
        ms(at(0.99)),
        ms(times[times.len() - 1]),
        at(0.99).as_secs_f64() / 0.016
    );
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let peak = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap()
        .trim()
        .to_owned();
    println!("memory: peak resident {peak}; bar 100 MB");
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}
