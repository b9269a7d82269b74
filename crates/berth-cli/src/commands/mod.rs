//! One module per command group. Each takes the parsed arguments, calls the libraries and
//! renders the result.

mod binding;
mod config;
mod mcp;
mod session;
mod storage;
mod workspace;

use std::io::IsTerminal;

use anyhow::{Context, bail};
use berth_core::config::LoadedConfig;
use berth_core::{WorkspaceId, WorkspaceManager};
use berth_store_fs::FsStore;

use crate::cli::{Cli, Command};

/// What every command needs: the store (for paths and the global config) and the manager.
pub struct Ctx {
    pub store: FsStore,
    pub manager: WorkspaceManager,
}

impl Ctx {
    /// The config in force for `workspace` (globally with `None`): the global file, the
    /// workspace's file, then the environment.
    pub async fn config(&self, workspace: Option<&WorkspaceId>) -> anyhow::Result<LoadedConfig> {
        let global = self.store.global_config()?;
        Ok(self
            .manager
            .config(global.as_ref(), workspace, environment())
            .await?)
    }
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let home = match cli.home {
        Some(h) => h,
        None => berth_store_fs::default_home()
            .context("cannot find the platform data folder; pass --home or set BERTH_HOME")?,
    };
    let store = FsStore::open(&home)?;
    let ctx = Ctx {
        manager: store.manager(),
        store,
    };
    match cli.command {
        Command::Workspace(cmd) => workspace::run(&ctx, cmd).await,
        Command::Session(cmd) => session::run(&ctx, cmd).await,
        Command::Binding(cmd) => binding::run(&ctx, cmd).await,
        Command::Config(cmd) => config::run(&ctx, cmd).await,
        Command::Mcp(args) => mcp::run(ctx, args).await,
    }
}

/// Asks before something destructive. On a terminal it prompts; without one it refuses unless
/// `--yes` was given, so a script never deletes by accident and never hangs on a prompt.
pub fn confirm(yes: bool, question: &str) -> anyhow::Result<()> {
    if yes {
        return Ok(());
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        bail!(
            "{question} Refusing without confirmation: standard input is not a terminal; pass --yes"
        );
    }
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    stdin
        .read_line(&mut answer)
        .context("cannot read the answer")?;
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => bail!("cancelled; nothing was changed"),
    }
}

/// The process environment as the config layer sees it (non-UTF-8 variables are skipped: no
/// config key can use them).
fn environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}
