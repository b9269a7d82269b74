//! The dashboard on a real terminal: raw mode and the alternate screen, a thread reading
//! keys, a feed reading the store, and actions run through berth-run, all sending into one
//! channel that the loop takes from, applies to the model and draws. The terminal is given
//! back as it was on quit, on an error, and on a panic (ratatui's hook).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use berth_ops::Ops;
use berth_run::{Follow, Lander, RunId, Runs};
use ratatui::crossterm::event::{self, Event};
use tokio::sync::{Notify, mpsc, watch};

use crate::act;
use crate::draw::draw;
use crate::keys::key;
use crate::model::{Action, Model, Update};

/// Runs per page of the list; further pages load as the selection reaches the end.
pub const RUNS_PAGE: usize = 200;

/// What the dashboard needs besides the home.
#[derive(Clone)]
pub struct Options {
    /// The berth program, started as the supervisor of a run started, resumed or told here.
    pub program: PathBuf,
    /// The folder whose repository a pick merges into and a new run starts in.
    pub here: PathBuf,
    /// Colours, unless `NO_COLOR` says not to.
    pub color: bool,
    /// Creates the lands of the queue (tab 4), which a supervisor process then drives.
    pub lander: Lander,
    /// The agent to open on, as `berth run attach` asks (`None`: the runs, as `berth ui`).
    pub attach: Option<crate::step_in::Attach>,
}

/// One message for the loop.
enum Message {
    Term(Event),
    Update(Box<Update>),
}

/// Runs the dashboard until `q`.
pub async fn run(ops: Ops, runs: Runs, options: Options) -> std::io::Result<()> {
    let store = runs.store().clone();
    let place = match store.pooled() {
        true => format!("pool · node {}", store.node()),
        false => ops.home().display().to_string(),
    };
    let mut model = Model::new(place, options.color);
    model.pooled = store.pooled();
    model.attach = options.attach;
    let (tx, mut rx) = mpsc::unbounded_channel();
    // The run to follow, and how many times one was asked for: each ask reads it afresh
    // (`R` asks again for the same run).
    let (follow, followed) = watch::channel((None::<RunId>, 0u64));
    let wake = Arc::new(Notify::new());
    let mut terminal = ratatui::try_init()?;
    // The key thread reads one event at a time, each when the loop has taken in the one
    // before. So nothing is read past the `q` that quits: what a person types next stays
    // in the terminal for the shell, and no reader is left on a terminal given back.
    let read_next = spawn_key_reader(tx.clone())?;
    let _ = read_next.send(());
    tokio::spawn(feed(runs.clone(), tx.clone(), followed, wake.clone()));
    let context = act::Context {
        ops,
        runs,
        store,
        program: options.program,
        here: options.here,
        lander: options.lander,
        foresight: berth_run::Foresight::new(),
    };
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    // Actions under way: a quit waits for them, so a pick is never cut between its merge
    // and its record.
    let mut running = tokio::task::JoinSet::new();
    let result = loop {
        if let Err(e) = terminal.draw(|frame| draw(frame, &model)) {
            break Err(e);
        }
        // Everything waiting is taken in before the next frame.
        let mut actions = Vec::new();
        let first = tokio::select! {
            m = rx.recv() => match m {
                Some(m) => Some(m),
                None => break Ok(()),
            },
            _ = ticks.tick() => {
                // A working agent's diff is read again as time passes.
                actions.extend(model.tick(chrono::Utc::now()));
                None
            }
        };
        take_in(&mut model, first, &mut rx, &read_next, &mut actions);
        if actions.contains(&Action::Quit) {
            break Ok(());
        }
        for action in actions {
            match action {
                Action::Follow(id) => {
                    follow.send_modify(|(run, asked)| {
                        *run = id;
                        *asked += 1;
                    });
                }
                Action::Quit => {}
                Action::StepIn(step) => {
                    let (said, failed) = crate::step_in::suspend(&mut terminal, &step).await;
                    model.status = Some((said, failed));
                    let _ = read_next.send(());
                }
                action => {
                    let (context, tx, wake) = (context.clone(), tx.clone(), wake.clone());
                    running.spawn(act_and_send(context, action, tx, wake));
                }
            }
        }
        // Ended ones are let go of as the loop goes.
        while running.try_join_next().is_some() {}
    };
    if !running.is_empty() {
        model.status = Some((
            format!("finishing {} action(s) before quitting…", running.len()),
            false,
        ));
        let _ = terminal.draw(|frame| draw(frame, &model));
        while running.join_next().await.is_some() {}
    }
    ratatui::try_restore()?;
    result
}

/// The key thread: it reads one terminal event each time it is let (a send on what this
/// returns), so that nothing past the key that quits or steps out is taken from the terminal.
fn spawn_key_reader(
    keys: mpsc::UnboundedSender<Message>,
) -> std::io::Result<std::sync::mpsc::Sender<()>> {
    let (read_next, may_read) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("berth-ui-keys".to_owned())
        .spawn(move || {
            while may_read.recv().is_ok() {
                let Ok(event) = event::read() else { break };
                if keys.send(Message::Term(event)).is_err() {
                    break;
                }
            }
        })?;
    Ok(read_next)
}

/// Takes in `first` and every message waiting behind it, adding what they ask for to
/// `actions`; stops at a quit.
fn take_in(
    model: &mut Model,
    first: Option<Message>,
    rx: &mut mpsc::UnboundedReceiver<Message>,
    read_next: &std::sync::mpsc::Sender<()>,
    actions: &mut Vec<Action>,
) {
    let mut next = first;
    while let Some(message) = next {
        let read = matches!(message, Message::Term(_));
        let taken = match message {
            Message::Term(Event::Key(k)) => key(model, k),
            Message::Term(_) => Vec::new(),
            Message::Update(update) => model.apply(*update),
        };
        // A key that opens the person's shell or editor: the key thread reads its next
        // key only once that exits, so it takes none of theirs.
        let steps_in = taken.iter().any(|a| matches!(a, Action::StepIn(_)));
        actions.extend(taken);
        if actions.contains(&Action::Quit) {
            break;
        }
        if read && !steps_in {
            let _ = read_next.send(());
        }
        next = rx.try_recv().ok();
    }
}

/// Does `action` and sends back what came of it; the feed is woken when it changed the runs,
/// so the list shows it without waiting for the next second.
async fn act_and_send(
    context: act::Context,
    action: Action,
    tx: mpsc::UnboundedSender<Message>,
    wake: Arc<Notify>,
) {
    let changes = action.changes_runs();
    let update = act::act(&context, action).await;
    let _ = tx.send(Message::Update(Box::new(update)));
    if changes {
        wake.notify_one();
    }
}

/// Reads the runs as they change (berth-run's `Runs::changes`: Postgres's notices, or its
/// own looks on files and SQLite), and at once when woken (an action ended): the first page
/// of runs; and the followed run's events as they are kept (`Runs::follow`), from the start
/// each time one is asked for.
async fn feed(
    runs: Runs,
    tx: mpsc::UnboundedSender<Message>,
    mut followed: watch::Receiver<(Option<RunId>, u64)>,
    wake: Arc<Notify>,
) {
    let send = |update| tx.send(Message::Update(Box::new(update))).is_ok();
    let mut changes = runs.changes();
    let mut following: Option<Follow> = None;
    // A followed run that was over, and where its events ended: followed again on the next
    // change, since a tell or a resume makes it run again.
    let mut ended: Option<(RunId, u64)> = None;
    let mut said: Option<String> = None;
    loop {
        tokio::select! {
            _ = changes.next() => {}
            _ = wake.notified() => {}
            asked = followed.changed() => {
                if asked.is_err() {
                    return;
                }
                let (want, _) = followed.borrow_and_update().clone();
                following = want.map(|id| runs.follow(&id, 0));
                ended = None;
                if let Some(f) = &following {
                    // Shown from the start: what was shown of another run goes.
                    let from_start = Update::Events { run: f.run().clone(), events: Vec::new(), from_start: true };
                    if !send(from_start) {
                        return;
                    }
                }
                continue;
            }
            read = next_events(&mut following) => {
                let Some(f) = &following else { continue };
                let update = match read {
                    Some(Ok(events)) => Update::Events { run: f.run().clone(), events, from_start: false },
                    Some(Err(e)) => Update::Failed(e.to_string()),
                    None => {
                        ended = Some((f.run().clone(), f.cursor()));
                        following = None;
                        continue;
                    }
                };
                if matches!(update, Update::Failed(_)) {
                    following = None;
                }
                if !send(update) {
                    return;
                }
                continue;
            }
        }
        if !send(runs_page(&runs, &mut said, &send).await) {
            return;
        }
        if let Some((id, cursor)) = ended.take() {
            following = Some(runs.follow(&id, cursor));
        }
    }
}

/// The followed run's next events; never, when none is followed.
async fn next_events(
    following: &mut Option<Follow>,
) -> Option<Result<Vec<berth_run::RunEvent>, berth_run::KeptError>> {
    match following {
        Some(f) => f.next().await,
        None => std::future::pending().await,
    }
}

/// The first page of runs. A record that cannot be read is said once, never left out
/// quietly.
async fn runs_page(
    runs: &Runs,
    said: &mut Option<String>,
    send: &impl Fn(Update) -> bool,
) -> Update {
    match runs.store().page(RUNS_PAGE, None).await {
        Ok(page) => {
            let mut list = Vec::with_capacity(page.runs.len());
            for r in page.runs {
                match r {
                    Ok(r) => list.push(r),
                    Err(e) if said.as_deref() != Some(&e.to_string()) => {
                        *said = Some(e.to_string());
                        send(Update::Failed(e.to_string()));
                    }
                    Err(_) => {}
                }
            }
            Update::Runs {
                runs: list,
                next: page.next,
            }
        }
        Err(e) => Update::Failed(format!("cannot read the runs: {e}")),
    }
}
