//! A run supervised by this process and shown as it goes (Ctrl-C stops it), or by a detached
//! `berth run supervise`; and what continues a run: `resume` and `tell`.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::bail;
use berth_run::{How, Next, RunId, Runs, Started, SuperviseArgs, Supervised, Telling, Told};

use super::start::said_detached;
use super::summary::print_summary;
use super::view::{Json, Lines, Table, View};
use crate::commands::Interrupted;
use crate::render;

/// `berth run tell`: one agent of a run told `text`. For a run still running, queued for its
/// supervisor (its current turn cut first with `--now`); for a run that is over, its told
/// turn under this process's supervision, shown as a run is, or (`--detach`) in a
/// supervisor process of its own.
pub(super) async fn tell(
    runs: &Runs,
    id: &str,
    telling: Telling<'_>,
    detach: bool,
    json: bool,
) -> anyhow::Result<()> {
    let id = runs.store().resolve(id).await?;
    // Listened for before the turn starts, so a Ctrl-C while it starts is not lost.
    let interrupts = interrupts()?;
    let how = match detach {
        true => How::Detached,
        false => How::Here,
    };
    match runs.tell(&id, telling, how).await? {
        Told::Here(supervised) => shown(*supervised, interrupts, json).await,
        Told::Queued { agent } => said_queued(&id, agent, json),
        Told::Detached { agent, supervisor } => {
            if json {
                render::json(
                    &serde_json::json!({ "run": id, "agent": agent + 1, "supervisor": supervisor }),
                )?;
            } else {
                render::line(&id)?;
                eprintln!(
                    "agent {} of run {id} is told in process {supervisor}: `berth run logs {id} -f` follows it",
                    agent + 1
                );
            }
            Ok(())
        }
        Told::Hosted { .. } => unreachable!("the CLI hosts no run"),
    }
}

/// What was said of a tell queued for agent `agent` (0-based) of a run still running.
fn said_queued(id: &RunId, agent: usize, json: bool) -> anyhow::Result<()> {
    if json {
        render::json(&serde_json::json!({ "run": id, "agent": agent + 1, "queued": true }))?;
    } else {
        eprintln!(
            "run {id} is running: agent {} is told at its next step, or once its current turn ends (`berth run logs -f {id}` follows it)",
            agent + 1
        );
    }
    Ok(())
}

/// Why a run ended when a second Ctrl-C cut its stop short.
const SECOND_CTRL_C: &str = "stopped at once by a second Ctrl-C, before every agent had ended; what each streamed is in `berth run logs` and its session's transcript";

/// Shows a run started or resumed: supervised here until it ends (Ctrl-C stops every agent,
/// and the run then checks and sums up; a second Ctrl-C ends it at once), or said started
/// elsewhere.
pub(super) async fn started(
    started: Started,
    interrupts: tokio::signal::unix::Signal,
    json: bool,
) -> anyhow::Result<()> {
    match started {
        Started::Here(supervised) => shown(*supervised, interrupts, json).await,
        Started::Detached { record, supervisor } => said_detached(&record.id, supervisor, json),
        Started::Queued(_) | Started::Hosted { .. } => {
            unreachable!("the CLI shows runs started here or detached")
        }
    }
}

/// Ctrl-C, listened for before the run starts, for the whole run: `ctrl_c()` made afresh in
/// each turn of the loop would miss one that lands while an event is shown, and a second one
/// would be lost.
pub(super) fn interrupts() -> std::io::Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
}

/// Shows a run supervised in this process until it ends: a table on a terminal, else a line
/// per event, or JSON. Ctrl-C stops every agent; a second one ends the run at once.
async fn shown(
    mut supervised: Supervised,
    mut interrupts: tokio::signal::unix::Signal,
    json: bool,
) -> anyhow::Result<()> {
    let mut view: Box<dyn View> = if json {
        Box::new(Json)
    } else if std::io::stdout().is_terminal() {
        Box::new(Table::new(supervised.record()))
    } else {
        Box::new(Lines::of(supervised.record().id.as_str()))
    };
    let id = supervised.record().id.clone();
    let mut ticks = tokio::time::interval(Duration::from_millis(500));
    let mut stopping = false;
    loop {
        tokio::select! {
            next = supervised.next() => match next {
                Some(Next::Event(event)) => view.event(&event)?,
                Some(Next::Unkept(e)) => eprintln!("berth: {e} (the run goes on)"),
                None => break,
            },
            _ = interrupts.recv() => {
                if stopping {
                    // A stop that takes too long (an agent that does not answer its cancel):
                    // the run ends here, recorded so; what streamed is in its log and in the
                    // agents' transcripts (an answer cut off is kept aside and recovered).
                    let record = supervised.abandon(SECOND_CTRL_C).await?;
                    if !json {
                        print_summary(&record)?;
                    }
                    return Err(Interrupted(format!(
                        "run {id} stopped at once by a second Ctrl-C; {}: `berth run resume {id}` continues it",
                        record.state.as_str()
                    ))
                    .into());
                }
                stopping = true;
                supervised.stop();
                eprintln!("stopping every agent (what streamed is kept; Ctrl-C again ends at once)…");
            }
            _ = ticks.tick() => view.tick()?,
        }
    }
    let record = supervised.finish().await?;
    if !json {
        print_summary(&record)?;
        let changed = record
            .agents
            .iter()
            .any(|a| a.summary.as_ref().is_some_and(|s| s.files_changed > 0));
        render::line(match changed {
            true => format!(
                "run {id}: compare with `berth run compare {id}`, then `berth run pick {id} N` (or `best`) merges the winner, or `berth run discard {id}` drops them all"
            ),
            false => format!("run {id}: no agent changed a file"),
        })?;
    }
    if stopping {
        return Err(Interrupted(format!(
            "run {id} stopped by Ctrl-C; what the agents did is kept: `berth run resume {id}` continues it"
        ))
        .into());
    }
    if !record.succeeded() {
        bail!("not every agent finished its answer and passed the check; the summary says which");
    }
    Ok(())
}

/// The hidden `berth run supervise`: a detached run's supervisor (berth-run's
/// `supervise_detached`); a told text is read from standard input.
pub(super) async fn supervise(runs: &Runs, args: &SuperviseArgs) -> anyhow::Result<()> {
    runs.supervise_detached(args, std::io::stdin()).await?;
    Ok(())
}

/// `berth run resume`: the run's unfinished agents continued here, or (`--detach`) in a
/// supervisor process of its own.
pub(super) async fn resume(runs: &Runs, id: &str, detach: bool, json: bool) -> anyhow::Result<()> {
    let id = runs.store().resolve(id).await?;
    let interrupts = interrupts()?;
    let how = match detach {
        true => How::Detached,
        false => How::Here,
    };
    started(runs.resume(&id, how).await?, interrupts, json).await
}
