//! `berth run`: starts a run (berth-run) and shows it: a live table on a terminal, a line per
//! event otherwise, or one JSON object per event with `--json`; then the summary. Every run
//! is kept under the home (berth-run's `RunStore`): this process supervises it, or, with
//! `--detach`, a `berth run supervise` process of its own does; `list`, `show`, `logs`,
//! `wait`, `stop` and `resume` read and steer kept runs; `--tasks` starts a batch of them.

mod batch;
mod finish;
mod kept;
mod start;
mod summary;
mod supervise;
mod view;

use berth_ops::Ops;
use berth_run::{RunStore, Runs};

use crate::cli::{RunArgs, RunCommand};

pub async fn run(ops: Ops, args: RunArgs) -> anyhow::Result<()> {
    let runs = Runs::open(ops.clone()).await?;
    let store = runs.store();
    match args.command {
        None => start::new_run(&ops, &runs, args.new).await,
        Some(RunCommand::List {
            batch: Some(batch),
            json,
            ..
        }) => kept::list_batch(store, &batch, json).await,
        Some(RunCommand::List {
            review,
            limit,
            cursor,
            json,
            ..
        }) => kept::list(store, review, limit, cursor.as_deref(), json).await,
        Some(RunCommand::Show { id, json }) => kept::show(store, &id, json).await,
        Some(RunCommand::Logs {
            id,
            agent,
            stderr: true,
            ..
        }) => kept::agent_file(store, &id, agent, kept::AgentFile::Stderr).await,
        Some(RunCommand::Logs {
            id,
            agent,
            check: true,
            ..
        }) => kept::agent_file(store, &id, agent, kept::AgentFile::Check).await,
        Some(RunCommand::Logs {
            id,
            follow,
            agent,
            json,
            ..
        }) => kept::logs(&runs, &id, follow, agent, json).await,
        Some(RunCommand::Stop { id, agent, json }) => kept::stop(store, &id, agent, json).await,
        Some(RunCommand::Wait { id, json }) => kept::wait(store, &id, json).await,
        Some(RunCommand::Compare { id, json }) => summary::compare(&ops, store, &id, json).await,
        Some(RunCommand::Tell {
            id,
            agent,
            text,
            task_file,
            allow,
            detach: detach_it,
            now,
            json,
        }) => {
            let text = start::read_task(text.as_deref(), task_file.as_deref())?;
            let telling = berth_run::Telling {
                agent,
                text: &text,
                allow: &allow,
                now,
            };
            supervise::tell(&runs, &id, telling, detach_it, json).await
        }
        Some(RunCommand::Answer {
            id,
            agent,
            answer,
            always,
            json,
        }) => kept::answer(store, &id, agent, answer, always, json).await,
        Some(RunCommand::Resume { id, detach, json }) => {
            supervise::resume(&runs, &id, detach, json).await
        }
        Some(
            command @ (RunCommand::Pick { .. }
            | RunCommand::Discard { .. }
            | RunCommand::Restore { .. }
            | RunCommand::Clean { .. }
            | RunCommand::Delete { .. }),
        ) => finish_command(&ops, store, command).await,
        Some(RunCommand::Attach { id, agent }) => super::ui::attach(ops, &id, agent).await,
        Some(RunCommand::Supervise { id, resume, tell }) => {
            let args = crate::cli::supervise_args(ops.home(), &id, resume, tell)?;
            supervise::supervise(&runs, &args).await
        }
    }
}

/// The commands that finish a run's work: pick, discard, restore, clean and delete.
async fn finish_command(ops: &Ops, store: &RunStore, command: RunCommand) -> anyhow::Result<()> {
    match command {
        RunCommand::Pick {
            id,
            undo: true,
            json,
            ..
        } => finish::undo(ops, store, &id, json).await,
        RunCommand::Pick {
            id,
            agent,
            squash,
            rebase,
            keep_others,
            force,
            also,
            json,
            ..
        } => {
            let mode = match (squash, rebase) {
                (true, _) => berth_ops::MergeMode::Squash,
                (_, true) => berth_ops::MergeMode::Rebase,
                _ => berth_ops::MergeMode::Merge,
            };
            let Some(choice) = agent else {
                return Err(berth_ops::Error::invalid(
                    "name the agent to pick (its number, or `best`), or --undo",
                )
                .into());
            };
            let how = finish::How {
                mode,
                keep_others,
                force,
                also,
            };
            finish::pick(ops, store, &id, choice, how, json).await
        }
        RunCommand::Discard {
            id,
            agent,
            confirm,
            json,
        } => finish::discard(ops, store, &id, agent, confirm.yes, json).await,
        RunCommand::Restore { id, agent, json } => {
            finish::restore(ops, store, &id, agent, json).await
        }
        RunCommand::Clean {
            older_than,
            dry_run,
            confirm,
            json,
        } => finish::clean(ops, store, older_than, dry_run, confirm.yes, json).await,
        RunCommand::Delete {
            id,
            with_sessions,
            confirm,
            json,
        } => finish::delete(ops, store, &id, with_sessions, confirm.yes, json).await,
        _ => unreachable!("run sends only the commands that finish a run's work here"),
    }
}
