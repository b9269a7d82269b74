//! The kept runs, read and steered from any process: `list`, `show`, `logs`, `wait`, `stop`
//! and `answer`.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
use berth_run::{AgentNumber, RunRecord, RunState, RunStore, StopRequest};

use super::summary::print_summary;
use super::view::{Json, Lines, View};
use crate::render;

/// How long `berth run stop` waits to see the agents stop (an ACP agent has 5 seconds to
/// answer its cancel before its process is killed).
const STOP_WAIT: Duration = Duration::from_secs(15);

pub(super) async fn list(
    store: &RunStore,
    review: bool,
    limit: usize,
    cursor: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    if limit == 0 {
        return Err(berth_ops::Error::invalid("--limit takes 1 to 1000 runs, not 0").into());
    }
    let page = match review {
        true => store.review_page(limit, cursor).await?,
        false => store.page(limit, cursor).await?,
    };
    let first = cursor.is_none();
    let next = page.next;
    let mut records = Vec::new();
    let mut problems = Vec::new();
    for run in page.runs {
        match run {
            Ok(r) => records.push(r),
            Err(e) => problems.push(e),
        }
    }
    if json {
        let listed: Vec<serde_json::Value> = records.iter().map(with_review).collect();
        render::json(&listed)?;
    } else if records.is_empty() && problems.is_empty() && first {
        // A note for a person, on standard error: a script reading the table sees no rows.
        match review {
            true => eprintln!("no run waits for review"),
            false => eprintln!("no runs yet: `berth run TASK` starts one"),
        }
    } else {
        runs_table(&records)?;
    }
    if let Some(next) = &next {
        let flag = if review { " --review" } else { "" };
        eprintln!("more runs: `berth run list{flag} --cursor {next}`");
    }
    // A run whose record cannot be read is said, and fails the command: never left out.
    match problems.into_iter().reduce(|first, other| {
        eprintln!("berth: {other}");
        first
    }) {
        Some(first) => Err(first.into()),
        None => Ok(()),
    }
}

/// `run list --batch ID`: every run of the batch, in its file's order.
pub(super) async fn list_batch(store: &RunStore, batch: &str, json: bool) -> anyhow::Result<()> {
    let id = berth_run::resolve_batch(store, batch).await?;
    let records = berth_run::batch_runs(store, &id).await?;
    if json {
        let listed: Vec<serde_json::Value> = records.iter().map(with_review).collect();
        return Ok(render::json(&listed)?);
    }
    Ok(runs_table(&records)?)
}

/// The runs, one row each: id, review, agents, when, task.
fn runs_table(records: &[RunRecord]) -> std::io::Result<()> {
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            vec![
                r.id.to_string(),
                r.review().to_string(),
                agent_counts(r),
                render::time(r.created_at),
                render::cell(&berth_ops::title_of(&r.request.task)),
            ]
        })
        .collect();
    render::table(&["RUN", "STATE", "AGENTS", "STARTED", "TASK"], &rows)
}

/// A run's record as JSON, with where its review stands (`"review"`), which the record does
/// not keep: it follows from the agents.
pub(super) fn with_review(r: &RunRecord) -> serde_json::Value {
    let mut value = serde_json::to_value(r).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert(
            "review".to_owned(),
            serde_json::to_value(r.review()).unwrap_or_default(),
        );
    }
    value
}

/// `3: 2 done, 1 failed`.
fn agent_counts(r: &RunRecord) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for a in &r.agents {
        let shown = match (a.outcome, &a.status.waiting) {
            (Some(outcome), _) => outcome.as_str(),
            (None, Some(_)) => "waiting",
            (None, None) => a.status.state.as_str(),
        };
        *counts.entry(shown).or_default() += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    format!("{}: {}", r.agents.len(), parts.join(", "))
}

pub(super) async fn show(store: &RunStore, id: &str, json: bool) -> anyhow::Result<()> {
    let record = store.load(&store.resolve(id).await?).await?;
    if json {
        return Ok(render::json(&with_review(&record))?);
    }
    let pinned = record.request.pool.as_ref().and_then(|p| p.node.as_deref());
    let state = match (record.state, record.supervisor, pinned) {
        (RunState::Running, Some(pid), _) => format!("running (process {pid})"),
        (RunState::Queued, _, Some(node)) => format!("queued for node {node}"),
        (RunState::Queued, _, None) => "queued for the first free worker".to_owned(),
        (RunState::Failed, _, _) => format!("{}, its supervisor failed", record.review()),
        _ => record.review().to_string(),
    };
    render::line(format!("run {}  {state}", record.id))?;
    render::line(format!(
        "task: {}",
        render::cell(&berth_ops::title_of(&record.request.task))
    ))?;
    render::line(format!("started {}", render::time(record.created_at)))?;
    if let Some(batch) = &record.request.batch {
        render::line(format!(
            "batch: {} (task {} of {}; `berth run list --batch {}`)",
            batch.id,
            batch.index + 1,
            batch.count,
            batch.id
        ))?;
    }
    // Where each agent ran: one machine named once, several per agent.
    let mut nodes: Vec<&str> = record
        .agents
        .iter()
        .filter_map(|a| a.node.as_deref())
        .collect();
    nodes.dedup();
    match nodes.as_slice() {
        [] => {}
        [one] => render::line(format!("node: {one}"))?,
        _ => render::line(format!(
            "nodes: {}",
            record
                .agents
                .iter()
                .enumerate()
                .map(|(i, a)| format!("{} on {}", i + 1, a.node.as_deref().unwrap_or("-")))
                .collect::<Vec<_>>()
                .join(", ")
        ))?,
    }
    if let Some(m) = &record.message {
        render::line(format!("why: {}", render::cell(m)))?;
    }
    render::line("")?;
    Ok(print_summary(&record)?)
}

pub(super) async fn wait(store: &RunStore, id: &str, json: bool) -> anyhow::Result<()> {
    let id = store.resolve(id).await?;
    let record = store.wait(&id).await?;
    if json {
        render::json(&record)?;
    } else {
        print_summary(&record)?;
    }
    if !record.succeeded() {
        bail!(
            "run {id} {}: not every agent finished its answer and passed the check",
            record.state.as_str()
        );
    }
    Ok(())
}

pub(super) async fn stop(
    store: &RunStore,
    id: &str,
    agent: Option<AgentNumber>,
    json: bool,
) -> anyhow::Result<()> {
    let id = store.resolve(id).await?;
    let what = match agent {
        None => StopRequest::All,
        Some(n) => StopRequest::Agent(n.index()),
    };
    let record = store.stop_and_wait(&id, what, STOP_WAIT).await?;
    if json {
        return Ok(render::json(&record)?);
    }
    for (i, a) in record.agents.iter().enumerate() {
        if agent.is_none_or(|n| n.index() == i) {
            render::line(format!("[{}] {}", i + 1, a.status.state.as_str()))?;
        }
    }
    Ok(())
}

/// A file kept of an agent on the machine that ran it.
#[derive(Debug, Clone, Copy)]
pub(super) enum AgentFile {
    /// Its process's standard error (`run logs --stderr`).
    Stderr,
    /// Its check's output (`run logs --check`).
    Check,
}

/// `run logs RUN --agent N --stderr|--check`: what agent N's process wrote to its standard
/// error, or what its check printed.
pub(super) async fn agent_file(
    store: &RunStore,
    id: &str,
    agent: Option<AgentNumber>,
    which: AgentFile,
) -> anyhow::Result<()> {
    let id = store.resolve(id).await?;
    let record = store.load(&id).await?;
    let i = match agent {
        Some(n) => n.index(),
        None if record.agents.len() == 1 => 0,
        None => {
            return Err(berth_run::KeptError::WhichAgent {
                id: id.clone(),
                count: record.agents.len(),
            }
            .into());
        }
    };
    let Some(a) = record.agents.get(i) else {
        return Err(berth_run::KeptError::NoSuchAgent {
            id: id.clone(),
            agent: i + 1,
            count: record.agents.len(),
        }
        .into());
    };
    let path = match which {
        AgentFile::Stderr => store.stderr_path(&id, i),
        AgentFile::Check => store.check_path(&id, i),
    };
    let kept = match which {
        AgentFile::Stderr => berth_run::read_kept_stderr(&path),
        AgentFile::Check => berth_run::read_kept_check(&path),
    };
    match kept.with_context(|| format!("cannot read {}", path.display()))? {
        // Byte for byte into a file or a pipe; on a terminal, every control character of the
        // agent's shown as its escape.
        Some(bytes) => Ok(render::agents_bytes(&bytes)?),
        None => {
            let elsewhere = a.node.as_deref().filter(|node| *node != store.node());
            let why = match (which, &record.request.agents.get(i), elsewhere) {
                (_, _, Some(node)) => format!("it ran on node {node}, which keeps it: run this there"),
                (AgentFile::Stderr, Some(berth_run::AgentSpec::Berth { .. }), _) => {
                    "berth's own agent runs in berth's process, which has no standard error of its own".to_owned()
                }
                (AgentFile::Stderr, _, _) => "it never started a process, or wrote nothing".to_owned(),
                (AgentFile::Check, _, _) if record.request.check.is_none() => {
                    "the run has no --check".to_owned()
                }
                (AgentFile::Check, _, _) => match a.check() {
                    Some(c) if c.not_run => format!("its check was {}", c.described()),
                    Some(_) => "its check's output was not kept (a run of an older berth)".to_owned(),
                    None => "its check has not run yet".to_owned(),
                },
            };
            let what = match which {
                AgentFile::Stderr => "standard error",
                AgentFile::Check => "check output",
            };
            Err(berth_ops::Error::rule(
                berth_ops::ErrorKind::NotFound,
                format!("agent {} of run {id} has no {what} kept here: {why}", i + 1),
            )
            .into())
        }
    }
}

pub(super) async fn logs(
    runs: &berth_run::Runs,
    id: &str,
    follow: bool,
    agent: Option<AgentNumber>,
    json: bool,
) -> anyhow::Result<()> {
    let store = runs.store();
    let id = store.resolve(id).await?;
    // Checked first: a run that is not there is an error, not an empty log.
    store.load(&id).await?;
    let mut view: Box<dyn View> = if json {
        Box::new(Json)
    } else {
        Box::new(Lines::with_text(id.as_str()))
    };
    let mut show = |events: &[berth_run::RunEvent]| -> anyhow::Result<()> {
        for event in events {
            if agent.is_none_or(|n| event.agent().is_none_or(|a| a == n.index())) {
                view.event(event)?;
            }
        }
        Ok(())
    };
    if follow {
        let mut followed = runs.follow(&id, 0);
        while let Some(events) = followed.next().await {
            show(&events?)?;
        }
    } else {
        show(&store.events(&id, 0).await?.0)?;
    }
    view.end()?;
    Ok(())
}

/// `berth run answer`: the question an agent of a running run waits on, answered.
pub(super) async fn answer(
    store: &RunStore,
    id: &str,
    agent: Option<AgentNumber>,
    answer: crate::cli::AnswerArg,
    always: bool,
    json: bool,
) -> anyhow::Result<()> {
    let answer = match (answer, always) {
        (crate::cli::AnswerArg::Allow, false) => berth_run::Answer::Allow,
        (crate::cli::AnswerArg::Allow, true) => berth_run::Answer::AllowAlways,
        (crate::cli::AnswerArg::Deny, false) => berth_run::Answer::Deny,
        (crate::cli::AnswerArg::Deny, true) => {
            return Err(berth_ops::Error::invalid(
                "--always goes with allow: a denial is for this call",
            )
            .into());
        }
    };
    let id = store.resolve(id).await?;
    let (i, tool) = store
        .queue_answer(&id, agent.map(AgentNumber::index), answer)
        .await?;
    if json {
        render::json(&serde_json::json!({
            "run": id, "agent": i + 1, "tool": tool, "answer": answer.as_str()
        }))?;
    } else {
        eprintln!(
            "answered agent {} of run {id}: {tool}: {}",
            i + 1,
            answer.as_str()
        );
    }
    Ok(())
}
