//! `berth run --tasks FILE`: the file read into tasks (berth-run's `parse_tasks`), each
//! checked for a misspelt subcommand as a single task is, and one run per task started as
//! one batch (berth-run's `start_batch`); the batch's id printed, and a line per run.

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use berth_ops::{Ops, Repository};
use berth_run::{FileTask, Queue, RunRequest, Runs, StartedBatch};

use super::start::{agents_of, close_subcommand, request_of};
use crate::cli::NewRunArgs;
use crate::render;

pub(super) async fn new_batch(
    ops: &Ops,
    runs: &Runs,
    args: NewRunArgs,
    file: &Path,
) -> anyhow::Result<()> {
    let (source, text) = read_tasks(file)?;
    let tasks = berth_run::parse_tasks(&text)
        .map_err(berth_run::RunError::from)
        .with_context(|| format!("no runs from {source}"))?;
    for task in &tasks {
        misspelt(task, &source)?;
    }
    let config = ops.config(None).await?.config;
    let agents = agents_of(&args, &config)?;
    let here = std::env::current_dir().context("cannot read the current folder")?;
    // As `berth run` does: queued runs name their repository by URL; the others are made
    // in the one around this folder, or in --repo (berth's clone of it, fetched once for
    // the batch, when it is a URL: each agent's branch pushed back there).
    let (repository, push) = match &args.repo {
        _ if args.queue => (Repository::None, true),
        Some(repo) => {
            let named = ops.named_repository(repo).await?;
            (Repository::Named(named.path), named.url.is_some())
        }
        None => (Repository::Around(here.clone()), false),
    };
    let requests: Vec<RunRequest> = tasks
        .iter()
        .enumerate()
        .map(|(i, task)| {
            let request = request_of(
                &args,
                &config,
                task.text.clone(),
                repository.clone(),
                agents.clone(),
            );
            RunRequest {
                // `--name NAME` names each run's workspaces NAME-<task>-<agent>.
                name: args.name.as_ref().map(|name| format!("{name}-{}", i + 1)),
                push,
                ..request
            }
        })
        .collect();
    let queue = args.queue.then(|| Queue {
        repo: args.repo.clone(),
        from: here.clone(),
        node: args.node.clone(),
    });
    let batch = runs.start_batch(requests, queue).await?;
    said(&batch, &source, args.queue, args.json)
}

/// The file's text, or standard input's for `-`, and how to name where it came from.
fn read_tasks(file: &Path) -> anyhow::Result<(String, String)> {
    if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the tasks from standard input")?;
        return Ok(("standard input".to_owned(), text));
    }
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read the tasks from {}", file.display()))?;
    Ok((file.display().to_string(), text))
}

/// Refuses a task of one word that is, or is close to, a subcommand's name, as `berth run
/// lsit` is refused: most likely a slip, and every task is a paid run.
fn misspelt(task: &FileTask, source: &str) -> anyhow::Result<()> {
    let word = task.text.trim();
    if word.contains(char::is_whitespace) {
        return Ok(());
    }
    match close_subcommand(word) {
        Some(meant) => Err(berth_ops::Error::invalid(format!(
            "line {} of {source}: the task {:?} looks like `berth run {meant}` misspelt, so no run was started: say the task in more words",
            task.line,
            render::cell(word),
        ))
        .into()),
        None => Ok(()),
    }
}

/// The batch's id on standard output (a script's to keep), and a line per run on standard
/// error; or one JSON object.
fn said(batch: &StartedBatch, source: &str, queued: bool, json: bool) -> anyhow::Result<()> {
    let id = &batch.id;
    if json {
        let runs: Vec<serde_json::Value> = batch
            .runs
            .iter()
            .map(|r| {
                serde_json::json!({
                    "run": r.record.id,
                    "task": r.record.request.task,
                    "supervisor": r.supervisor,
                })
            })
            .collect();
        return Ok(render::json(
            &serde_json::json!({ "batch": id, "queued": queued, "runs": runs }),
        )?);
    }
    render::line(id)?;
    for run in &batch.runs {
        eprintln!(
            "run {}: {}",
            run.record.id,
            render::cell(&berth_ops::title_of(&run.record.request.task))
        );
    }
    let how = match queued {
        true => "queued for the pool's workers",
        false => "started, each in a process of its own",
    };
    let runs = match batch.runs.len() {
        1 => "1 run".to_owned(),
        n => format!("{n} runs"),
    };
    eprintln!(
        "batch {id}: {runs} from {source}, {how}: `berth run list --batch {id}` follows them"
    );
    Ok(())
}
