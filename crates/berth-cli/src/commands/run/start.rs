//! Starting a run: the task read (and checked for a misspelt subcommand), the agents chosen,
//! and the run started here, handed to a supervisor process, or queued for the pool; a file
//! of tasks goes to `batch.rs`.

use std::io::Read;
use std::time::Duration;

use anyhow::{Context, bail};
use berth_ops::{Ops, Repository};
use berth_run::{How, Policy, Queue, RunId, RunRequest, Runs, Started};

use super::supervise::{interrupts, started};
use crate::cli::NewRunArgs;
use crate::render;

pub(super) async fn new_run(ops: &Ops, runs: &Runs, args: NewRunArgs) -> anyhow::Result<()> {
    if let Some(file) = args.tasks.clone() {
        return super::batch::new_batch(ops, runs, args, &file).await;
    }
    let task = read_task(
        task_words(&args.task)?.as_deref(),
        args.task_file.as_deref(),
    )?;
    let config = ops.config(None).await?.config;
    let agents = agents_of(&args, &config)?;
    if args.queue {
        return queue(runs, task, agents, &args, &config).await;
    }
    // A repository by URL: berth's clone of it, fetched now, and the work given back by
    // pushing each agent's branch there.
    let named = match &args.repo {
        Some(repo) => Some(ops.named_repository(repo).await?),
        None => None,
    };
    let push = named.as_ref().is_some_and(|n| n.url.is_some());
    let repository = match named {
        Some(named) => Repository::Named(named.path),
        None => {
            Repository::Around(std::env::current_dir().context("cannot read the current folder")?)
        }
    };
    let request = RunRequest {
        push,
        ..request_of(&args, &config, task, repository, agents)
    };
    let how = match args.detach {
        true => How::Detached,
        false => How::Here,
    };
    // Listened for before the run starts: a Ctrl-C while it starts is not lost.
    let interrupts = interrupts()?;
    started(runs.start(request, how).await?, interrupts, args.json).await
}

/// The agents `args` name (`--agent`, `--agents`, `--model`, `--agent-cmd`), by the config's
/// defaults where they name none.
pub(super) fn agents_of(
    args: &NewRunArgs,
    config: &berth_ops::Config,
) -> anyhow::Result<Vec<berth_run::AgentSpec>> {
    Ok(berth_run::choose_agents(
        berth_run::AgentChoice {
            agents: args.agents.as_deref(),
            agent: &args.agent,
            model: args.model.as_deref(),
            agent_cmd: args.agent_cmd.as_deref(),
        },
        config,
    )?)
}

/// The run `args` ask for: `task` for `agents` in `repository`, with the options given.
pub(super) fn request_of(
    args: &NewRunArgs,
    config: &berth_ops::Config,
    task: String,
    repository: Repository,
    agents: Vec<berth_run::AgentSpec>,
) -> RunRequest {
    RunRequest {
        name: args.name.clone(),
        policy: Policy::new(&args.allow, args.allow_all),
        check: args.check.clone(),
        check_timeout: Duration::from_secs(args.check_timeout),
        agent_writable: args.agent_writable.clone(),
        budget: berth_run::Budget {
            max_tokens: args.max_tokens,
            max_cost: args.max_cost,
        },
        ask: berth_run::ask_wait(args.ask, args.ask_timeout, config),
        ..RunRequest::new(task, repository, agents)
    }
}

/// `berth run --queue`: the run recorded queued, for a worker of the pool to take; its id
/// printed at once. What needs the node that works it (a key for the model, the agent's
/// program) is checked there, when it is taken.
async fn queue(
    runs: &Runs,
    task: String,
    agents: Vec<berth_run::AgentSpec>,
    args: &NewRunArgs,
    config: &berth_ops::Config,
) -> anyhow::Result<()> {
    let here = std::env::current_dir().context("cannot read the current folder")?;
    let request = RunRequest {
        push: true,
        ..request_of(args, config, task, Repository::None, agents)
    };
    let how = How::Queued(Queue {
        repo: args.repo.clone(),
        from: here,
        node: args.node.clone(),
    });
    let Started::Queued(record) = runs.start(request, how).await? else {
        unreachable!("a run queued is queued");
    };
    let id = &record.id;
    if args.json {
        render::json(&serde_json::json!({ "run": id, "queued": true, "node": args.node }))?;
    } else {
        render::line(id)?;
        eprintln!(
            "run {id} is queued for {}: `berth run show {id}` says who took it, `berth run wait {id}` waits for it",
            match &args.node {
                Some(node) => format!("the worker of node {node}"),
                None => "the first free worker".to_owned(),
            }
        );
    }
    Ok(())
}

/// A task (or what `tell` says): the argument, standard input for `-`, or the file.
/// The task given as words (`berth run fix the parser`, or one quoted argument), joined;
/// refused when it looks like a misspelt subcommand (`lsit`, `shwo ID`), which would
/// otherwise start a real, paid run.
fn task_words(words: &[String]) -> anyhow::Result<Option<String>> {
    let Some(first) = words.first() else {
        return Ok(None);
    };
    // A one-word task, or the first of several arguments: a quoted task of several words
    // ("lint the code") is a task whatever its first word.
    let single_word = !first.contains(char::is_whitespace);
    if single_word && let Some(meant) = close_subcommand(first) {
        let how = match words.len() {
            1 => "a task of one word is read with --task-file or `-`".to_owned(),
            _ => format!("a task that starts with {first:?} is given quoted, as one argument"),
        };
        return Err(berth_ops::Error::invalid(format!(
            "did you mean `berth run {meant}`? ({how})"
        ))
        .into());
    }
    Ok(Some(words.join(" ")))
}

/// The subcommand of `berth run` that `word` is, or is a likely typo of.
pub(super) fn close_subcommand(word: &str) -> Option<String> {
    use clap::CommandFactory;
    let word = word.to_ascii_lowercase();
    let command = crate::cli::Cli::command();
    let run = command.find_subcommand("run")?;
    run.get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_owned())
        .map(|name| (strsim::damerau_levenshtein(&word, &name), name))
        .filter(|(distance, name)| *distance <= if name.len() > 4 { 2 } else { 1 } || word == *name)
        .min()
        .map(|(_, name)| name)
}

pub(super) fn read_task(
    arg: Option<&str>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<String> {
    Ok(match (arg, file) {
        (Some("-"), _) => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the task from standard input")?;
            text
        }
        (Some(t), _) => t.to_owned(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the task from {}", path.display()))?,
        (None, None) => bail!("give the task as an argument, - for standard input, or --task-file"),
    })
}

/// The id of a run handed to supervisor `pid`, and how to follow it.
pub(super) fn said_detached(id: &RunId, pid: u32, json: bool) -> anyhow::Result<()> {
    if json {
        render::json(&serde_json::json!({ "run": id, "supervisor": pid }))?;
    } else {
        render::line(id)?;
        eprintln!(
            "run {id} goes on in process {pid}: `berth run logs {id} -f` follows it, `berth run wait {id}` waits for it"
        );
    }
    Ok(())
}
