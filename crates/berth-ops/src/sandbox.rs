//! What a process berth starts for an agent may reach: `[sandbox]` in force for its
//! workspace, bound to the folder it works in (berth-sandbox does the confining).
//!
//! Every place that starts such a process asks here: berth's own `run_command`, an ACP agent's
//! terminals, a run's `--check` and the agent process of `--agent-cmd`. The user's own
//! `[git] setup` commands and `[[mcp_servers]]` are the user's, and run as they are.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use berth_core::Workspace;
use berth_core::config::Config;
use berth_sandbox::{Place, Policy, Sandbox};

use crate::{Ops, Result};

/// The user's home, for `~/` in `[sandbox]` and the default deny list.
pub fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

impl Ops {
    /// `[sandbox]` of `config`, read.
    pub fn sandbox_policy(&self, config: &Config) -> Result<Policy> {
        Ok(Policy::from_settings(
            &config.sandbox,
            user_home().as_deref(),
            &self.home,
        )?)
    }

    /// The sandbox of processes that work in `work` for `ws` (its config layer, its own
    /// folder in the home, its ports); without a workspace, the global config's.
    pub async fn sandbox(&self, ws: Option<&Workspace>, work: &Path) -> Result<Sandbox> {
        let config = self.config(ws.map(|w| &w.id)).await?.config;
        let policy = self.sandbox_policy(&config)?;
        let workspace_dir = ws.and_then(|w| self.manager.workspaces().workspace_dir(&w.id));
        let protect = match &workspace_dir {
            Some(dir) if policy.is_on() => protected(dir, work)?,
            _ => Vec::new(),
        };
        let place = Place {
            work: work.to_owned(),
            cwd: work.to_owned(),
            workspace_dir,
            ports: ws
                .and_then(|w| w.ports)
                .map(|b| (b.first..=b.last()).collect())
                .unwrap_or_default(),
            protect,
        };
        Ok(Sandbox::new(policy, place))
    }
}

/// berth's own files in the workspace folder `dir`, when an agent works in it (a plain
/// workspace's folder is both): its record, its transcripts and storage stay read-only, and
/// its config layer exists, so that it is hidden rather than made by the agent (a
/// `[sandbox] mode = "off"` or an `[[mcp_servers]]` command of its own choosing).
fn protected(dir: &Path, work: &Path) -> Result<Vec<PathBuf>> {
    let (Ok(dir), Ok(work)) = (dir.canonicalize(), work.canonicalize()) else {
        return Ok(Vec::new());
    };
    if !dir.starts_with(&work) {
        return Ok(Vec::new());
    }
    let config = dir.join("config.toml");
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&config)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(
                berth_core::Error::io(format!("cannot create {}", config.display()), e).into(),
            );
        }
    }
    Ok(berth_store_fs::WORKSPACE_ENTRIES
        .iter()
        .map(|name| dir.join(name))
        .collect())
}
