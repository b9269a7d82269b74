//! A run supervised by this process and shown as it goes (Ctrl-C stops it), or by a detached
//! `berth run supervise`; and what continues a run: `resume` and `tell`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};
use std::time::Duration;

use anyhow::{Context, bail};
use berth_agent::AgentBuilder;
use berth_ops::Ops;
use berth_run::{AgentNumber, Host, Next, RunRequest, RunStore, Supervised, Supervision};

use super::start::detach;
use super::summary::print_summary;
use super::view::{Json, Lines, Table, View};
use crate::commands::Interrupted;
use crate::render;

/// How `berth run tell` tells: tools the told turn may also use (a run that is over), and
/// whether the agent's current turn is cut first (`--now`, a run still running).
pub(in crate::commands) struct Telling<'a> {
    pub allow: &'a [String],
    pub now: bool,
}

/// `berth run tell`: one agent of a run that is over, told `text` in its workspace and
/// session, under this process's supervision, shown as a run is; for a run still running,
/// queued for its supervisor.
pub(super) async fn tell(
    ops: Ops,
    store: RunStore,
    id: &str,
    agent: Option<AgentNumber>,
    text: &str,
    how: Telling<'_>,
    json: bool,
) -> anyhow::Result<()> {
    let agent = agent.map(AgentNumber::index);
    let id = store.resolve(id).await?;
    if how.now && !text.trim().is_empty() {
        match store.queue_tell_now(&id, agent, text).await {
            Ok(agent) => return said_queued(&id, agent, json),
            // Over meanwhile, or before: there is no turn to cut, and it is told as a run
            // that is over is.
            Err(berth_run::KeptError::NotRunning { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let allow = how.allow;
    let interrupts = interrupts()?;
    let runner = AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
    match Supervised::tell_or_queue(ops, runner, &store, &id, agent, text, allow, Host::Own).await?
    {
        berth_run::Told::Started(supervised) => shown(*supervised, interrupts, json).await,
        berth_run::Told::Queued { agent } => said_queued(&id, agent, json),
    }
}

/// What was said of a tell queued for agent `agent` (0-based) of a run still running.
fn said_queued(id: &berth_run::RunId, agent: usize, json: bool) -> anyhow::Result<()> {
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

/// `berth run tell --detach`: the told turn of a run that is over in a supervisor process
/// of its own; queued, as without `--detach`, for a run still running.
pub(super) async fn tell_detached(
    ops: &Ops,
    store: &RunStore,
    id: &str,
    agent: Option<AgentNumber>,
    text: &str,
    json: bool,
) -> anyhow::Result<()> {
    let id = store.resolve(id).await?;
    let exe = std::env::current_exe().context("cannot find the berth program to start")?;
    let agent = agent.map(AgentNumber::index);
    match berth_run::tell_detached(ops, store, &id, agent, text, &exe).await? {
        berth_run::ToldDetached::Queued { agent } => said_queued(&id, agent, json)?,
        berth_run::ToldDetached::Started { agent, supervisor } => {
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
        }
    }
    Ok(())
}

/// Why a run ended when a second Ctrl-C cut its stop short.
const SECOND_CTRL_C: &str = "stopped at once by a second Ctrl-C, before every agent had ended; what each streamed is in `berth run logs` and its session's transcript";

/// Runs `request` under `supervision` in this process, showing it as it goes. Ctrl-C stops
/// every agent, and the run then checks and sums up; a second Ctrl-C ends it at once.
pub(super) async fn foreground(
    ops: Ops,
    supervision: Supervision,
    request: RunRequest,
    json: bool,
) -> anyhow::Result<()> {
    let interrupts = interrupts()?;
    let supervised = start_supervised(ops, supervision, request).await?;
    shown(supervised, interrupts, json).await
}

/// Ctrl-C, listened for before the run starts, for the whole run: `ctrl_c()` made afresh in
/// each turn of the loop would miss one that lands while an event is shown, and a second one
/// would be lost.
fn interrupts() -> std::io::Result<tokio::signal::unix::Signal> {
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

/// The run started and supervised; a run that cannot start is recorded failed, with why.
async fn start_supervised(
    ops: Ops,
    supervision: Supervision,
    request: RunRequest,
) -> anyhow::Result<Supervised> {
    let agent = AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
    Ok(Supervised::start(ops, agent, supervision, request, Host::Own).await?)
}

/// The hidden `berth run supervise ID`: a detached run's supervisor; with `--tell N`, of
/// agent N's told turn, told what standard input holds.
pub(super) async fn supervise(
    ops: Ops,
    store: RunStore,
    id: &str,
    resume: bool,
    tell: Option<AgentNumber>,
) -> anyhow::Result<()> {
    // The terminal that started the run may close; its hangup is not this process's end.
    let _hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    let id = store.resolve(id).await?;
    if let Some(agent) = tell {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read what to tell the agent from standard input")?;
        let runner = AgentBuilder::new(ops.clone())
            .tools(berth_agent::tools::builtin())
            .build();
        let told = Supervised::tell_or_queue(
            ops,
            runner,
            &store,
            &id,
            Some(agent.index()),
            &text,
            &[],
            Host::Own,
        )
        .await?;
        if let berth_run::Told::Started(mut supervised) = told {
            while let Some(next) = supervised.next().await {
                if let Next::Unkept(e) = next {
                    eprintln!("berth: {e} (the run goes on)");
                }
            }
            supervised.finish().await?;
        }
        return Ok(());
    }
    let mut supervision = store.supervise(&id).await?;
    let again = match resume {
        true => supervision.record().unfinished(),
        false => BTreeMap::new(),
    };
    let request = supervision.request_again(again).await?;
    let mut supervised = start_supervised(ops, supervision, request).await?;
    while let Some(next) = supervised.next().await {
        if let Next::Unkept(e) = next {
            eprintln!("berth: {e} (the run goes on)");
        }
    }
    supervised.finish().await?;
    Ok(())
}

pub(super) async fn resume(
    ops: Ops,
    store: RunStore,
    id: &str,
    detach_it: bool,
    json: bool,
) -> anyhow::Result<()> {
    let id = store.resolve(id).await?;
    if detach_it {
        return detach(&ops, &store, &id, berth_run::Detach::Resume, json).await;
    }
    let again = store.resumable(&id).await?;
    let mut supervision = store.supervise(&id).await?;
    let request = supervision.request_again(again).await?;
    foreground(ops, supervision, request, json).await
}
