//! How a run's agents ended, side by side: the summary a run ends with (and `show` and `wait`
//! print), and `berth run compare`.

use std::io::Write;

use berth_ops::Ops;
use berth_run::{RunRecord, RunStore};

use crate::render;

/// Each agent of the run: how it ended (or where it is), what it changed, its check, tokens,
/// time and session.
pub(super) fn print_summary(record: &RunRecord) -> std::io::Result<()> {
    let sessions: Vec<&str> = record
        .agents
        .iter()
        .filter_map(|a| a.session.as_deref())
        .collect();
    let mut short_sessions = render::short_ids(&sessions).into_iter();
    let rows: Vec<Vec<String>> = record
        .agents
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let s = &a.status;
            let summary = a.summary.as_ref();
            let check = match summary.and_then(|s| s.check.as_ref()) {
                None => "-".to_owned(),
                // Why it did not run is said under the table, in full.
                Some(c) if c.passed || c.not_run => c.verdict().to_owned(),
                Some(c) => c.described(),
            };
            // A short state in the table; why, in full, under it. What was done with the
            // work, once decided, after it.
            let mut ended = ended_as(s.state.as_str(), s.stop.as_deref());
            if let Some(outcome) = a.outcome {
                ended = format!("{ended}, {}", outcome.as_str());
            }
            vec![
                (i + 1).to_string(),
                render::cell(s.workspace_name.as_deref().unwrap_or("-")),
                ended,
                summary.map_or_else(
                    || "-".to_owned(),
                    |x| format!("{} +{} -{}", x.files_changed, x.added, x.removed),
                ),
                check,
                (s.input_tokens + s.output_tokens).to_string(),
                summary
                    .and_then(|x| x.cost_usd)
                    .map_or_else(|| "-".to_owned(), |c| format!("${c:.4}")),
                format!("{:.1}s", s.elapsed_ms as f64 / 1000.0),
                match a.session {
                    Some(_) => short_sessions.next().unwrap_or_default(),
                    None => "-".to_owned(),
                },
            ]
        })
        .collect();
    render::table(
        &[
            "#",
            "WORKSPACE",
            "ENDED",
            "FILES",
            "CHECK",
            "TOKENS",
            "COST",
            "TIME",
            "SESSION",
        ],
        &rows,
    )?;
    if record.agents.iter().any(|a| a.summary.is_some()) {
        render::legend(FILES_LEGEND);
    }
    let mut out = std::io::stdout().lock();
    for (i, a) in record.agents.iter().enumerate() {
        if let Some(w) = &a.status.waiting {
            writeln!(
                out,
                "[{}] waits for you: may it {}? {} (`berth run answer {} --agent {} allow|deny`)",
                i + 1,
                render::cell(&w.tool),
                render::cell(&w.description),
                record.id,
                i + 1
            )?;
        }
        if let Some(message) = &a.status.message {
            // From outside (an agent's standard error): no control character reaches the
            // terminal, and each line goes on indented.
            let mut lines = message.lines().map(render::cell);
            let first = lines.next().unwrap_or_default();
            writeln!(out, "[{}] {}: {first}", i + 1, a.status.state.as_str())?;
            for line in lines {
                writeln!(out, "    {line}")?;
            }
        }
        if let Some(c) = a.check() {
            print_check(&mut out, &record.id.to_string(), i, c)?;
        }
    }
    out.flush()
}

/// A check that failed, in its own words: its last lines, and where the rest is; one that
/// did not run, and why.
pub(super) fn print_check(
    out: &mut impl Write,
    run: &str,
    i: usize,
    c: &berth_run::CheckResult,
) -> std::io::Result<()> {
    let n = i + 1;
    if c.not_run {
        return writeln!(out, "[{n}] check {}", render::cell(&c.described()));
    }
    if c.passed {
        return Ok(());
    }
    writeln!(
        out,
        "[{n}] check `{}` {}:",
        render::cell(&c.command),
        c.described()
    )?;
    for line in c.output.as_deref().unwrap_or("").lines() {
        writeln!(out, "    {}", render::cell(line))?;
    }
    writeln!(
        out,
        "    (all of it: `berth run logs {run} --agent {n} --check`)"
    )
}

/// How an agent ended, short: its state, and why its turn stopped when that says more
/// (`done (max_tokens)`, not `failed (failed)`).
pub(super) fn ended_as(state: &str, stop: Option<&str>) -> String {
    match stop {
        Some(stop) if stop != state => format!("{state} ({stop})"),
        _ => state.to_owned(),
    }
}

/// What an agent's work conflicts with, a line each (nothing when it merges cleanly); why it
/// could not be judged, when there was work to judge.
fn print_conflicts(out: &mut impl Write, seen: &berth_run::AgentForesight) -> std::io::Result<()> {
    let n = seen.agent;
    for c in &seen.with {
        let with = render::cell(&c.against.to_string());
        writeln!(out, "[{n}] conflicts with {with}: {}", c.shown_files())?;
    }
    for u in &seen.unknown {
        let why = render::cell(&u.why);
        writeln!(
            out,
            "[{n}] not compared with run {} agent {}: {why}",
            u.run, u.agent
        )?;
    }
    if let Some(u) = seen.unjudged.as_ref().filter(|u| u.reason.worth_saying()) {
        writeln!(
            out,
            "[{n}] conflicts not looked for: {}",
            render::cell(&u.why)
        )?;
    }
    Ok(())
}

/// What the FILES column's symbols mean.
const FILES_LEGEND: &str = "FILES: files changed  +lines added  -lines removed";

/// The table of `berth run compare`: its headers (an agent a column) and its rows, a measure
/// or a file a row.
fn compare_table(agents: &[berth_run::Compared]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut headers = vec![String::new()];
    headers.extend(agents.iter().map(|a| {
        format!(
            "{} {}",
            a.agent,
            render::cell(&a.workspace_name.clone().unwrap_or_else(|| a.label.clone()))
        )
    }));
    let row = |name: &str, cell: &dyn Fn(&berth_run::Compared) -> String| {
        let mut row = vec![name.to_owned()];
        row.extend(agents.iter().map(cell));
        row
    };
    let mut rows = vec![
        row("state", &|a| a.state.clone()),
        row("outcome", &|a| {
            a.outcome.clone().unwrap_or_else(|| "-".to_owned())
        }),
        row("check", &|a| match (&a.check_verdict, &a.check_outcome) {
            (Some(v), Some(why)) if v == "failed" => format!("{v} ({why})"),
            (Some(v), _) => v.clone(),
            (None, _) => "-".to_owned(),
        }),
        row("changed", &|a| match &a.unreadable {
            Some(_) => "?".to_owned(),
            None => format!("{} file(s) +{} -{}", a.files.len(), a.added, a.removed),
        }),
        row("tokens", &|a| {
            (a.input_tokens + a.output_tokens).to_string()
        }),
        row("cost", &|a| {
            a.cost_usd.map_or("-".to_owned(), |c| format!("${c:.2}"))
        }),
        row("time", &|a| format!("{}s", a.elapsed_ms / 1000)),
    ];
    let mut paths: Vec<&str> = agents
        .iter()
        .flat_map(|a| a.files.iter().map(|f| f.path.as_str()))
        .collect();
    paths.sort();
    paths.dedup();
    for path in paths {
        // A file name is the agent's: quoted as git quotes it, so no byte of it reaches the
        // terminal as a control and it reads as in `git status`.
        rows.push(row(
            &render::file_name(path),
            &|a| match a.files.iter().find(|f| f.path == path) {
                Some(f) => match (f.added, f.removed) {
                    (Some(add), Some(rm)) => format!("+{add} -{rm}"),
                    _ => "binary".to_owned(),
                },
                None => "-".to_owned(),
            },
        ));
    }
    (headers, rows)
}

/// `berth run compare`: the agents as columns, a row per measure, then a row per file.
pub(super) async fn compare(
    ops: &Ops,
    store: &RunStore,
    id: &str,
    json: bool,
) -> anyhow::Result<()> {
    let id = store.resolve(id).await?;
    // A command asks once: what it keeps of the trial merges goes with it.
    let foresight = berth_run::Foresight::new();
    let compared = berth_run::compare_foreseen(ops, store, &id, false, &foresight).await?;
    if json {
        return Ok(render::json(&compared)?);
    }
    render::line(format!(
        "run {}  {}  task: {}",
        compared.run,
        compared.state,
        render::cell(&berth_ops::title_of(&compared.task))
    ))?;
    let agents = &compared.agents;
    let (headers, rows) = compare_table(agents);
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    render::table(&headers, &rows)?;
    for a in agents {
        if let Some(why) = &a.unreadable {
            eprintln!("berth: agent {}'s changes cannot be shown: {why}", a.agent);
        }
    }
    let mut out = std::io::stdout().lock();
    for a in agents {
        if let Some(c) = &a.check {
            print_check(&mut out, &compared.run, a.agent - 1, c)?;
        }
        if let Some(why) = &a.refusal {
            writeln!(
                out,
                "[{}] not picked without --force: {}",
                a.agent,
                render::cell(why)
            )?;
        }
        if let Some(seen) = &a.conflicts {
            print_conflicts(&mut out, seen)?;
        }
    }
    out.flush()?;
    drop(out);
    render::legend(&format!(
        "per file: +lines added -lines removed against the base; `berth workspace diff NAME` shows one agent's diff; `berth run pick {} N` (or `best`) merges the winner",
        compared.run
    ));
    Ok(())
}
