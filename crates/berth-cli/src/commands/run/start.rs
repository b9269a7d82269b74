//! Starting a run: the task read (and checked for a misspelt subcommand), the agents chosen,
//! and the run started here, handed to a supervisor process, or queued for the pool; a file
//! of tasks goes to `batch.rs`.

use std::io::Read;
use std::time::Duration;

use anyhow::{Context, bail};
use berth_agent::AgentBuilder;
use berth_ops::{Ops, Repository};
use berth_run::{Policy, RunId, RunRequest, RunStore, StoredRequest};

use super::supervise::foreground;
use crate::cli::NewRunArgs;
use crate::render;

pub(super) async fn new_run(ops: Ops, store: RunStore, args: NewRunArgs) -> anyhow::Result<()> {
    if let Some(file) = args.tasks.clone() {
        return super::batch::new_batch(ops, store, args, &file).await;
    }
    let task = read_task(
        task_words(&args.task)?.as_deref(),
        args.task_file.as_deref(),
    )?;
    let config = ops.config(None).await?.config;
    let agents = agents_of(&args, &config)?;
    if args.queue {
        return queue(&ops, &store, task, agents, &args, &config).await;
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
    if args.detach {
        let exe = std::env::current_exe().context("cannot find the berth program to start")?;
        let (record, pid) = berth_run::start_detached(&ops, &store, request, &exe).await?;
        return said_detached(&record.id, pid, args.json);
    }
    // Checked before the run is recorded: a run that cannot start makes nothing.
    let checker = AgentBuilder::new(ops.clone()).build();
    let request = berth_run::preflight(&ops, &checker, request).await?;
    let record = store.create(StoredRequest::of(&request)).await?;
    let supervision = store.supervise(&record.id).await?;
    foreground(ops, supervision, request, args.json).await
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
    ops: &Ops,
    store: &RunStore,
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
    let record = berth_run::queue(
        ops,
        store,
        request,
        args.repo.as_deref(),
        &here,
        args.node.clone(),
    )
    .await?;
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

/// Hands the run to a `berth run supervise ID` process of its own (berth-run's `detach`),
/// and prints the run's id.
pub(super) async fn detach(
    ops: &Ops,
    store: &RunStore,
    id: &RunId,
    what: berth_run::Detach,
    json: bool,
) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find the berth program to start")?;
    let pid = berth_run::detach(ops, store, id, what, &exe).await?;
    said_detached(id, pid, json)
}

/// The id of a run handed to supervisor `pid`, and how to follow it.
fn said_detached(id: &RunId, pid: u32, json: bool) -> anyhow::Result<()> {
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
