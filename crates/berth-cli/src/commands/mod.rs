//! One module per command group. Each parses what clap could not, calls one `berth_ops::Ops`
//! method, and renders the result; the rules live in `berth-ops`.

mod acp;
mod binding;
pub mod chat;
mod config;
mod doctor;
mod import;
mod land;
mod mcp;
mod run;
mod send_on;
mod serve;
mod session;
mod skill;
mod storage;
mod store;
mod token;
mod ui;
mod workspace;
mod workspace_ps;

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use berth_ops::{Error, Refill};

use crate::cli::Command;

pub async fn run(home: Option<PathBuf>, command: Command) -> anyhow::Result<()> {
    let home = self::home(home)
        .context("cannot find the platform data folder; pass --home or set BERTH_HOME")?;
    // The doctor opens the store itself: an unreachable one is one of its findings.
    if let Command::Doctor {
        mcp_timeout,
        json,
        fix,
        dry_run,
    } = command
    {
        if fix {
            return doctor::fix(dry_run);
        }
        return doctor::run(&home, mcp_timeout, json.json).await;
    }
    let ops = berth_ops::open(&home, &berth_ops::environment())?;
    // A command exits as soon as it is done: spare checkouts are filled by a detached
    // `berth workspace spares --fill`, not by this process.
    let ops = ops.clone().with_refill(Refill::Detached {
        args: vec![
            "--home".into(),
            ops.home().as_os_str().to_owned(),
            "workspace".into(),
            "spares".into(),
            "--fill".into(),
        ],
    });
    let notices = ops.clone();
    let done = match command {
        Command::Workspace(cmd) => workspace::run(&ops, cmd).await,
        Command::Session(cmd) => session::run(&ops, cmd).await,
        Command::Binding(cmd) => binding::run(&ops, cmd).await,
        Command::Config(cmd) => config::run(&ops, cmd).await,
        Command::Import(cmd) => import::run(&ops, cmd).await,
        Command::Store(cmd) => store::run(&ops, cmd).await,
        Command::Mcp(args) => mcp::run(ops, args).await,
        Command::Chat(args) => chat::run(ops, args).await,
        Command::Run(args) => run::run(ops, *args).await,
        Command::Land(args) => land::run(ops, args).await,
        Command::Acp => acp::run(ops).await,
        Command::Serve(args) => serve::run(ops, args).await,
        Command::Token(cmd) => token::run(&ops, cmd).await,
        Command::Skill(cmd) => skill::run(&ops, cmd).await,
        Command::Ui => ui::run(ops, None).await,
        // Answered in main, before a home is opened; the doctor above, before a store is.
        Command::Completions { .. } | Command::Man { .. } | Command::Doctor { .. } => Ok(()),
    };
    // What this process told `[[notify]]` (a run's end) reaches it before the process exits,
    // or is given up after a few seconds: a dead sink never holds a command for long.
    notices.flush_notices(NOTICE_FLUSH).await;
    done
}

/// How long a command waits at its end for its notifications to be delivered.
const NOTICE_FLUSH: std::time::Duration = std::time::Duration::from_secs(5);

/// The home a command works in: `--home`, else `$BERTH_HOME` (when set and not empty), else
/// the platform's data folder.
pub fn home(flag: Option<PathBuf>) -> Option<PathBuf> {
    flag.or_else(|| {
        std::env::var_os("BERTH_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
    .or_else(berth_ops::default_home)
}

/// The workspace a command means, as an identifier `Ops` resolves: the one named, else (or
/// for `.`) the one whose worktree holds the current folder. A name is passed on as it is,
/// resolved once, by the call that uses it.
pub async fn meant(ops: &berth_ops::Ops, named: Option<&str>) -> anyhow::Result<String> {
    if let Some(named) = named.filter(|n| *n != berth_ops::HERE) {
        return Ok(named.to_owned());
    }
    let here = std::env::current_dir().context("cannot read the current folder")?;
    Ok(ops.workspace_required(named, &here).await?.id.to_string())
}

/// Asks before something destructive. On a terminal it prompts; without one it refuses unless
/// `--yes` was given, so a script never deletes by accident and never hangs on a prompt.
/// What a person stopped with Ctrl-C (a chat's turn, a run in the foreground), saying what
/// is kept; the exit status is 130, as for any interrupted command.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Interrupted(pub String);

pub fn confirm(yes: bool, question: &str) -> anyhow::Result<()> {
    confirm_or(yes, question, "--yes")
}

/// [`confirm`], where the flag that answers yes is `flag`.
pub fn confirm_or(yes: bool, question: &str, flag: &str) -> anyhow::Result<()> {
    if yes {
        return Ok(());
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(Error::refused(format!(
            "{question} Refusing without confirmation: standard input is not a terminal; pass {flag}"
        ))
        .into());
    }
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    stdin
        .read_line(&mut answer)
        .context("cannot read the answer")?;
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(Error::refused("cancelled; nothing was changed").into()),
    }
}
