//! `berth run`: starts a run (berth-run) and shows it: a live table on a terminal, a line per
//! event otherwise, or one JSON object per event with `--json`; then the summary. Every run
//! is kept under the home (berth-run's `RunStore`): this process supervises it, or, with
//! `--detach`, a `berth run supervise` process of its own does; `list`, `show`, `logs`,
//! `wait`, `stop` and `resume` read and steer kept runs.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use berth_agent::AgentBuilder;
use berth_ops::{Ops, Repository};
use berth_run::{
    AgentStatus, Host, Next, Policy, RunEvent, RunId, RunRecord, RunRequest, RunState, RunStore,
    StopRequest, StoredRequest, Supervised, Supervision,
};

use crate::cli::{NewRunArgs, RunArgs, RunCommand};
use crate::commands::{Interrupted, confirm};
use crate::render;
use berth_run::AgentNumber;

/// How long `berth run stop` waits to see the agents stop (an ACP agent has 5 seconds to
/// answer its cancel before its process is killed).
const STOP_WAIT: Duration = Duration::from_secs(15);

pub async fn run(ops: Ops, args: RunArgs) -> anyhow::Result<()> {
    let store = RunStore::open(&ops).await?;
    match args.command {
        None => new_run(ops, store, args.new).await,
        Some(RunCommand::List {
            limit,
            cursor,
            json,
        }) => list(&store, limit, cursor.as_deref(), json).await,
        Some(RunCommand::Show { id, json }) => show(&store, &id, json).await,
        Some(RunCommand::Logs {
            id,
            agent,
            stderr: true,
            ..
        }) => agent_stderr(&store, &id, agent).await,
        Some(RunCommand::Logs {
            id,
            follow,
            agent,
            json,
            ..
        }) => logs(&store, &id, follow, agent, json).await,
        Some(RunCommand::Stop { id, agent, json }) => stop(&store, &id, agent, json).await,
        Some(RunCommand::Wait { id, json }) => wait(&store, &id, json).await,
        Some(RunCommand::Compare { id, json }) => compare(&ops, &store, &id, json).await,
        Some(RunCommand::Tell {
            id,
            agent,
            text,
            task_file,
            allow,
            detach: detach_it,
            json,
        }) => {
            let text = read_task(text.as_deref(), task_file.as_deref())?;
            match detach_it {
                true => tell_detached(&ops, &store, &id, agent, &text, json).await,
                false => tell(ops, store, &id, agent, &text, &allow, json).await,
            }
        }
        Some(RunCommand::Answer {
            id,
            agent,
            answer,
            always,
            json,
        }) => {
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
            let id = store.resolve(&id).await?;
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
        Some(RunCommand::Resume { id, detach, json }) => {
            resume(ops, store, &id, detach, json).await
        }
        Some(RunCommand::Pick {
            id,
            agent,
            squash,
            rebase,
            keep_others,
            json,
        }) => {
            let mode = match (squash, rebase) {
                (true, _) => berth_ops::MergeMode::Squash,
                (_, true) => berth_ops::MergeMode::Rebase,
                _ => berth_ops::MergeMode::Merge,
            };
            pick(&ops, &store, &id, agent, mode, keep_others, json).await
        }
        Some(RunCommand::Discard {
            id,
            agent,
            confirm,
            json,
        }) => discard(&ops, &store, &id, agent, confirm.yes, json).await,
        Some(RunCommand::Clean {
            dry_run,
            confirm,
            json,
        }) => clean(&ops, &store, dry_run, confirm.yes, json).await,
        Some(RunCommand::Supervise { id, resume, tell }) => {
            supervise(ops, store, &id, resume, tell).await
        }
    }
}

async fn pick(
    ops: &Ops,
    store: &RunStore,
    id: &str,
    agent: AgentNumber,
    mode: berth_ops::MergeMode,
    keep_others: bool,
    json: bool,
) -> anyhow::Result<()> {
    let run = store.resolve(id).await?;
    let here = std::env::current_dir().context("cannot read the current folder")?;
    let picked = berth_run::pick(
        ops,
        store,
        berth_run::Pick {
            run,
            agent: agent.index(),
            mode,
            keep_others,
        },
        &here,
    )
    .await?;
    if json {
        return Ok(render::json(&picked)?);
    }
    let m = &picked.merge;
    render::line(format!(
        "picked agent {} of run {}: {} commit(s) of {} into {}, {} -> {}",
        picked.agent,
        picked.run,
        m.merged.commits,
        m.branch,
        m.merged.into,
        &m.merged.before[..m.merged.before.len().min(12)],
        &m.merged.after[..m.merged.after.len().min(12)]
    ))?;
    if let Some(deleted) = &m.deleted {
        render::line(format!("removed its workspace {}", deleted.label))?;
    }
    if let Some(w) = &m.warning {
        eprintln!("warning: {w}");
    }
    print_dropped(&picked.dropped)?;
    if !picked.kept.is_empty() {
        let kept: Vec<String> = picked.kept.iter().map(|n| n.to_string()).collect();
        render::line(format!(
            "kept the workspaces of agent(s) {}",
            kept.join(", ")
        ))?;
    }
    Ok(())
}

fn print_dropped(dropped: &[berth_run::Dropped]) -> std::io::Result<()> {
    for d in dropped {
        render::line(format!(
            "dropped agent {}'s workspace {}",
            d.agent, d.workspace
        ))?;
        if let Some(note) = &d.note {
            render::line(format!("  {note}"))?;
        }
    }
    Ok(())
}

async fn discard(
    ops: &Ops,
    store: &RunStore,
    id: &str,
    agent: Option<AgentNumber>,
    yes: bool,
    json: bool,
) -> anyhow::Result<()> {
    let run = store.resolve(id).await?;
    let agent = agent.map(AgentNumber::index);
    let question = match agent {
        Some(i) => format!("Drop the work of agent {} of run {run}?", i + 1),
        None => format!("Drop the work of every agent of run {run} not merged?"),
    };
    confirm(yes, &question)?;
    let dropped = berth_run::discard(ops, store, &run, agent).await?;
    if json {
        return Ok(render::json(&dropped)?);
    }
    if dropped.is_empty() {
        eprintln!("no workspace was left to drop; the agents are recorded discarded");
    }
    Ok(print_dropped(&dropped)?)
}

async fn clean(
    ops: &Ops,
    store: &RunStore,
    dry_run: bool,
    yes: bool,
    json: bool,
) -> anyhow::Result<()> {
    let runs = berth_run::cleanable(ops, store).await?;
    let left: usize = runs.iter().map(|(_, agents)| agents.len()).sum();
    if dry_run || runs.is_empty() {
        if json {
            let planned: Vec<serde_json::Value> = runs
                .iter()
                .map(|(r, agents)| {
                    let agents: Vec<usize> = agents.iter().map(|i| i + 1).collect();
                    serde_json::json!({"run": r.id.to_string(), "agents": agents})
                })
                .collect();
            return Ok(render::json(&planned)?);
        }
        if runs.is_empty() {
            eprintln!("nothing to clean: no finished run has a workspace left");
        }
        for (r, agents) in &runs {
            render::line(format!(
                "would drop {} workspace(s) of run {}: {}",
                agents.len(),
                r.id,
                render::cell(&berth_ops::title_of(&r.request.task))
            ))?;
        }
        return Ok(());
    }
    confirm(
        yes,
        &format!(
            "Drop {left} workspace(s) left by {} finished run(s)?",
            runs.len()
        ),
    )?;
    let cleaned = berth_run::clean(ops, store, &runs).await?;
    if json {
        return Ok(render::json(&cleaned)?);
    }
    for c in &cleaned {
        render::line(format!("cleaned run {}", c.run))?;
        print_dropped(&c.dropped)?;
    }
    Ok(())
}

async fn new_run(ops: Ops, store: RunStore, args: NewRunArgs) -> anyhow::Result<()> {
    let task = read_task(
        task_words(&args.task)?.as_deref(),
        args.task_file.as_deref(),
    )?;
    let config = ops.config(None).await?.config;
    let agents = berth_run::choose_agents(
        berth_run::AgentChoice {
            agents: args.agents.as_deref(),
            agent: &args.agent,
            model: args.model.as_deref(),
            agent_cmd: args.agent_cmd.as_deref(),
        },
        &config,
    )?;
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
        task,
        repository,
        workspace: None,
        agents,
        name: args.name.clone(),
        policy: Policy::new(&args.allow, args.allow_all),
        check: args.check.clone(),
        check_timeout: Duration::from_secs(args.check_timeout),
        resume: BTreeMap::new(),
        agent_writable: args.agent_writable.clone(),
        push,
        budget: berth_run::Budget {
            max_tokens: args.max_tokens,
            max_cost: args.max_cost,
        },
        max_agents: None,
        stderr_dir: None,
        ask: asks(&args, &config),
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

/// How long a question of `--ask` (or `[run] ask`) waits; `None`: the run asks nobody.
fn asks(args: &NewRunArgs, config: &berth_ops::Config) -> Option<Duration> {
    let run = &config.run;
    (args.ask || run.ask == Some(true)).then(|| {
        args.ask_timeout
            .or(run.ask_timeout_secs)
            .map_or(berth_run::DEFAULT_ASK_TIMEOUT, Duration::from_secs)
    })
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
        task,
        repository: Repository::None,
        workspace: None,
        agents,
        name: args.name.clone(),
        policy: Policy::new(&args.allow, args.allow_all),
        check: args.check.clone(),
        check_timeout: Duration::from_secs(args.check_timeout),
        resume: BTreeMap::new(),
        agent_writable: args.agent_writable.clone(),
        push: true,
        budget: berth_run::Budget {
            max_tokens: args.max_tokens,
            max_cost: args.max_cost,
        },
        max_agents: None,
        stderr_dir: None,
        ask: asks(args, config),
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
fn close_subcommand(word: &str) -> Option<String> {
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

fn read_task(arg: Option<&str>, file: Option<&std::path::Path>) -> anyhow::Result<String> {
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

/// `berth run tell`: one agent of a run that is over, told `text` in its workspace and
/// session, under this process's supervision, shown as a run is.
async fn tell(
    ops: Ops,
    store: RunStore,
    id: &str,
    agent: Option<AgentNumber>,
    text: &str,
    allow: &[String],
    json: bool,
) -> anyhow::Result<()> {
    let agent = agent.map(AgentNumber::index);
    let id = store.resolve(id).await?;
    let interrupts = interrupts()?;
    let runner = AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
    match Supervised::tell_or_queue(ops, runner, &store, &id, agent, text, allow, Host::Own).await?
    {
        berth_run::Told::Started(supervised) => shown(*supervised, interrupts, json).await,
        berth_run::Told::Queued { agent } => {
            if json {
                render::json(
                    &serde_json::json!({ "run": id, "agent": agent + 1, "queued": true }),
                )?;
            } else {
                eprintln!(
                    "run {id} is running: agent {} is told once its current turn ends (`berth run logs -f {id}` follows it)",
                    agent + 1
                );
            }
            Ok(())
        }
    }
}

/// Hands the run to a `berth run supervise ID` process of its own (berth-run's `detach`),
/// and prints the run's id.
async fn detach(
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

/// `berth run tell --detach`: the told turn of a run that is over in a supervisor process
/// of its own; queued, as without `--detach`, for a run still running.
async fn tell_detached(
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
        berth_run::ToldDetached::Queued { agent } => {
            if json {
                render::json(
                    &serde_json::json!({ "run": id, "agent": agent + 1, "queued": true }),
                )?;
            } else {
                eprintln!(
                    "run {id} is running: agent {} is told once its current turn ends",
                    agent + 1
                );
            }
        }
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
async fn foreground(
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
        Box::new(Lines::default())
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
                "run {id}: review with `berth workspace diff NAME`, bring back with `berth workspace merge NAME`"
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
async fn supervise(
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
    if resume {
        supervision.resuming(&again).await?;
    }
    let request = supervision.record().request.request(again);
    let mut supervised = start_supervised(ops, supervision, request).await?;
    while let Some(next) = supervised.next().await {
        if let Next::Unkept(e) = next {
            eprintln!("berth: {e} (the run goes on)");
        }
    }
    supervised.finish().await?;
    Ok(())
}

async fn resume(
    ops: Ops,
    store: RunStore,
    id: &str,
    detach_it: bool,
    json: bool,
) -> anyhow::Result<()> {
    let id = store.resolve(id).await?;
    let again = store.resumable(&id).await?;
    if detach_it {
        return detach(&ops, &store, &id, berth_run::Detach::Resume, json).await;
    }
    let mut supervision = store.supervise(&id).await?;
    supervision.resuming(&again).await?;
    let request = supervision.record().request.request(again);
    foreground(ops, supervision, request, json).await
}

async fn list(
    store: &RunStore,
    limit: usize,
    cursor: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    if limit == 0 {
        return Err(berth_ops::Error::invalid("--limit takes 1 to 1000 runs, not 0").into());
    }
    let page = store.page(limit, cursor).await?;
    let mut records = Vec::new();
    let mut problems = Vec::new();
    for run in page.runs {
        match run {
            Ok(r) => records.push(r),
            Err(e) => problems.push(e),
        }
    }
    if json {
        render::json(&records)?;
    } else if records.is_empty() && problems.is_empty() && cursor.is_none() {
        // A note for a person, on standard error: a script reading the table sees no rows.
        eprintln!("no runs yet: `berth run TASK` starts one");
    } else {
        let rows: Vec<Vec<String>> = records
            .iter()
            .map(|r| {
                vec![
                    r.id.to_string(),
                    r.state.as_str().to_owned(),
                    agent_counts(r),
                    render::time(r.created_at),
                    render::cell(&berth_ops::title_of(&r.request.task)),
                ]
            })
            .collect();
        render::table(&["RUN", "STATE", "AGENTS", "STARTED", "TASK"], &rows)?;
    }
    if let Some(next) = &page.next {
        eprintln!("more runs: `berth run list --cursor {next}`");
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

/// `3: 2 done, 1 failed`.
fn agent_counts(r: &RunRecord) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for a in &r.agents {
        let shown = match a.outcome {
            Some(outcome) => outcome.as_str(),
            None => a.status.state.as_str(),
        };
        *counts.entry(shown).or_default() += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    format!("{}: {}", r.agents.len(), parts.join(", "))
}

async fn show(store: &RunStore, id: &str, json: bool) -> anyhow::Result<()> {
    let record = store.load(&store.resolve(id).await?).await?;
    if json {
        return Ok(render::json(&record)?);
    }
    let pinned = record.request.pool.as_ref().and_then(|p| p.node.as_deref());
    let state = match (record.state, record.supervisor, pinned) {
        (RunState::Running, Some(pid), _) => format!("running (process {pid})"),
        (RunState::Queued, _, Some(node)) => format!("queued for node {node}"),
        (RunState::Queued, _, None) => "queued for the first free worker".to_owned(),
        _ => record.state.as_str().to_owned(),
    };
    render::line(format!("run {}  {state}", record.id))?;
    render::line(format!(
        "task: {}",
        render::cell(&berth_ops::title_of(&record.request.task))
    ))?;
    render::line(format!("started {}", render::time(record.created_at)))?;
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

async fn wait(store: &RunStore, id: &str, json: bool) -> anyhow::Result<()> {
    let id = store.resolve(id).await?;
    let record = loop {
        let record = store.load(&id).await?;
        if record.state.is_over() {
            break record;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
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

async fn stop(
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
    store.request_stop(&id, what).await?;
    let asked = Instant::now();
    let record = loop {
        let record = store.load(&id).await?;
        let stopped = match what {
            StopRequest::All => record.agents.iter().all(|a| a.status.state.is_final()),
            StopRequest::Agent(i) => record.agents[i].status.state.is_final(),
        };
        if stopped || record.state.is_over() || asked.elapsed() > STOP_WAIT {
            break record;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
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

/// `run logs RUN --agent N --stderr`: what agent N's process wrote to its standard error.
async fn agent_stderr(
    store: &RunStore,
    id: &str,
    agent: Option<AgentNumber>,
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
    let path = store.stderr_path(&id, i);
    match berth_run::read_kept_stderr(&path)
        .with_context(|| format!("cannot read {}", path.display()))?
    {
        Some(text) => {
            // Byte for byte into a file or a pipe; on a terminal, with no control character
            // of the agent's to drive it.
            let mut out = std::io::stdout().lock();
            match out.is_terminal() {
                true => out.write_all(render::lines(&text).as_bytes())?,
                false => out.write_all(text.as_bytes())?,
            }
            out.flush()?;
            Ok(())
        }
        None => {
            let why = match (&record.request.agents.get(i), &a.node) {
                (Some(berth_run::AgentSpec::Berth { .. }), _) => {
                    "berth's own agent runs in berth's process, which has no standard error of its own".to_owned()
                }
                (_, Some(node)) if node != store.node() => format!(
                    "it ran on node {node}, which keeps it: run this there"
                ),
                _ => "it never started a process, or wrote nothing".to_owned(),
            };
            Err(berth_ops::Error::rule(
                berth_ops::ErrorKind::NotFound,
                format!(
                    "agent {} of run {id} has no standard error kept here: {why}",
                    i + 1
                ),
            )
            .into())
        }
    }
}

async fn logs(
    store: &RunStore,
    id: &str,
    follow: bool,
    agent: Option<AgentNumber>,
    json: bool,
) -> anyhow::Result<()> {
    let id = store.resolve(id).await?;
    // Checked first: a run that is not there is an error, not an empty log.
    store.load(&id).await?;
    let mut view: Box<dyn View> = if json {
        Box::new(Json)
    } else {
        Box::new(Lines::with_text())
    };
    let mut offset = 0;
    loop {
        let over = store.load(&id).await?.state.is_over();
        let (events, next) = store.events(&id, offset).await?;
        offset = next;
        for event in &events {
            if agent.is_none_or(|n| event.agent().is_none_or(|a| a == n.index())) {
                view.event(event)?;
            }
        }
        // The state is read before the log: a run over then has all its events in it.
        if !follow || over {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    view.end()?;
    Ok(())
}

/// How a run is shown as it goes.
trait View {
    fn event(&mut self, event: &RunEvent) -> std::io::Result<()>;
    fn tick(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    /// The events are over: say what is still held back.
    fn end(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One JSON object per event, for scripts.
struct Json;

impl View for Json {
    fn event(&mut self, event: &RunEvent) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, event).map_err(std::io::Error::other)?;
        out.write_all(b"\n")?;
        out.flush()
    }
}

/// A line per event; with the answers' text (`run logs`), each agent's text line by line,
/// a line shown once it is whole.
#[derive(Default)]
struct Lines {
    /// Each agent's text since its last whole line, when text is shown.
    text: Option<BTreeMap<usize, String>>,
}

impl Lines {
    fn with_text() -> Lines {
        Lines {
            text: Some(BTreeMap::new()),
        }
    }

    /// Shows agent `agent`'s text up to its last line break; with `all`, the rest too.
    fn flush(&mut self, agent: usize, all: bool) -> std::io::Result<()> {
        let Some(pending) = self.text.as_mut().and_then(|t| t.get_mut(&agent)) else {
            return Ok(());
        };
        let cut = match all {
            true => pending.len(),
            false => pending.rfind('\n').map_or(0, |i| i + 1),
        };
        let whole: String = pending.drain(..cut).collect();
        for line in whole.lines() {
            render::line(format!("[{}] {}", agent + 1, render::cell(line)))?;
        }
        Ok(())
    }
}

impl View for Lines {
    fn end(&mut self) -> std::io::Result<()> {
        let agents: Vec<usize> = self.text.iter().flat_map(|t| t.keys().copied()).collect();
        for agent in agents {
            self.flush(agent, true)?;
        }
        Ok(())
    }

    fn event(&mut self, event: &RunEvent) -> std::io::Result<()> {
        if let (Some(pending), RunEvent::Text { agent, text }) = (self.text.as_mut(), event) {
            pending.entry(*agent).or_default().push_str(text);
            return self.flush(*agent, false);
        }
        // Whatever the agent said before this is shown before it.
        if let Some(agent) = event.agent() {
            self.flush(agent, true)?;
        }
        let line = match event {
            RunEvent::Queued { agent, max_agents } => format!(
                "[{}] queued: {max_agents} agents work at once ([run] max_agents)",
                agent + 1
            ),
            RunEvent::Started {
                agent,
                label,
                workspace_name,
                session,
                ..
            } => format!(
                "[{}] {label} started in workspace {workspace_name}, session {session}",
                agent + 1
            ),
            RunEvent::Tool { agent, name, .. } => format!("[{}] → {name}", agent + 1),
            RunEvent::ToolDone {
                agent,
                name,
                is_error: true,
            } => format!("[{}] ✗ {name} failed", agent + 1),
            RunEvent::Refused { agent, tool, .. } => format!(
                "[{}] refused {tool} (allow it with --allow {tool} or --allow-all)",
                agent + 1
            ),
            RunEvent::Notice { agent, message } => format!("[{}] berth: {message}", agent + 1),
            RunEvent::Ended {
                agent,
                state,
                stop,
                message,
                ..
            } => {
                let ended = ended_as(state.as_str(), Some(stop.as_str()));
                match message {
                    Some(m) => format!("[{}] {ended}: {m}", agent + 1),
                    None => format!("[{}] {ended}", agent + 1),
                }
            }
            RunEvent::Pushed { agent, branch } => {
                format!("[{}] pushed {branch} to origin", agent + 1)
            }
            RunEvent::Asked {
                agent,
                tool,
                description,
                ..
            } => format!(
                "[{}] waits for you: may it {tool}? {description} (`berth run answer RUN --agent {} allow|deny`)",
                agent + 1,
                agent + 1
            ),
            RunEvent::Answered { agent, answer, .. } => {
                format!("[{}] answered: {answer}", agent + 1)
            }
            RunEvent::Checked { agent, check } => format!(
                "[{}] check `{}` {}",
                agent + 1,
                check.command,
                check.verdict()
            ),
            RunEvent::Text { .. }
            | RunEvent::ToolDone { .. }
            | RunEvent::AgentSession { .. }
            | RunEvent::Summary { .. } => {
                return Ok(());
            }
        };
        // A reason of several lines (an agent's standard error) goes on indented.
        for (i, part) in line.lines().enumerate() {
            match i {
                0 => render::line(render::cell(part))?,
                _ => render::line(format!("    {}", render::cell(part)))?,
            }
        }
        Ok(())
    }
}

/// A table redrawn in place: one row per agent.
struct Table {
    rows: Vec<Row>,
    drawn: usize,
}

struct Row {
    label: String,
    /// The agent as berth-run folds its events.
    status: AgentStatus,
    started: Instant,
}

impl Table {
    /// One row per agent of the run, as kept (a resumed run's finished agents as they
    /// ended).
    fn new(record: &RunRecord) -> Table {
        let rows = record
            .agents
            .iter()
            .map(|a| Row {
                label: a.label.clone(),
                status: a.status.clone(),
                started: Instant::now(),
            })
            .collect();
        Table { rows, drawn: 0 }
    }

    fn draw(&mut self) -> std::io::Result<()> {
        let mut lines = vec![format!(
            "{:<4} {:<18} {:<30} {:<9} {:<24} {:>8} {:>7}",
            "#", "AGENT", "WORKSPACE", "STATE", "LAST TOOL", "TOKENS", "TIME"
        )];
        for (i, r) in self.rows.iter().enumerate() {
            let s = &r.status;
            let elapsed = match s.stop {
                Some(_) => Duration::from_millis(s.elapsed_ms),
                None => r.started.elapsed(),
            };
            lines.push(format!(
                "{:<4} {:<18} {:<30} {:<9} {:<24} {:>8} {:>6}s",
                i + 1,
                clip(&r.label, 18),
                clip(
                    &render::cell(s.workspace_name.as_deref().unwrap_or("-")),
                    30
                ),
                s.state.as_str(),
                clip(&render::cell(s.latest.as_deref().unwrap_or("-")), 24),
                s.input_tokens + s.output_tokens,
                elapsed.as_secs()
            ));
        }
        let mut out = std::io::stdout().lock();
        if self.drawn > 0 {
            write!(out, "\x1b[{}A", self.drawn)?;
        }
        for line in &lines {
            writeln!(out, "\x1b[2K{line}")?;
        }
        self.drawn = lines.len();
        out.flush()
    }
}

impl View for Table {
    fn event(&mut self, event: &RunEvent) -> std::io::Result<()> {
        if let Some(agent) = event.agent() {
            self.rows[agent].status.apply(event);
        }
        self.draw()
    }

    fn tick(&mut self) -> std::io::Result<()> {
        self.draw()
    }
}

fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// Each agent of the run: how it ended (or where it is), what it changed, its check, tokens,
/// time and session.
fn print_summary(record: &RunRecord) -> std::io::Result<()> {
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
                Some(c) if c.passed || c.not_run => c.verdict().to_owned(),
                Some(c) => format!("failed ({})", c.outcome.as_deref().unwrap_or("?")),
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
    }
    out.flush()
}

/// How an agent ended, short: its state, and why its turn stopped when that says more
/// (`done (max_tokens)`, not `failed (failed)`).
fn ended_as(state: &str, stop: Option<&str>) -> String {
    match stop {
        Some(stop) if stop != state => format!("{state} ({stop})"),
        _ => state.to_owned(),
    }
}

/// What the FILES column's symbols mean.
const FILES_LEGEND: &str = "FILES: files changed  +lines added  -lines removed";

/// `berth run compare`: the agents as columns, a row per measure, then a row per file.
async fn compare(ops: &Ops, store: &RunStore, id: &str, json: bool) -> anyhow::Result<()> {
    let id = store.resolve(id).await?;
    let compared = berth_run::compare(ops, store, &id, false).await?;
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
    let mut headers = vec![String::new()];
    headers.extend(agents.iter().map(|a| {
        format!(
            "{} {}",
            a.agent,
            a.workspace_name.clone().unwrap_or_else(|| a.label.clone())
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
        row("check", &|a| {
            a.check_verdict.clone().unwrap_or_else(|| "-".to_owned())
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
        rows.push(row(
            path,
            &|a| match a.files.iter().find(|f| f.path == path) {
                Some(f) => match (f.added, f.removed) {
                    (Some(add), Some(rm)) => format!("+{add} -{rm}"),
                    _ => "binary".to_owned(),
                },
                None => "-".to_owned(),
            },
        ));
    }
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    render::table(&headers, &rows)?;
    for a in agents {
        if let Some(why) = &a.unreadable {
            eprintln!("berth: agent {}'s changes cannot be shown: {why}", a.agent);
        }
    }
    render::legend(
        "per file: +lines added -lines removed against the base; `berth workspace diff NAME` shows one agent's diff",
    );
    Ok(())
}
