//! `berth mcp`: the MCP server over stdio.

use std::path::PathBuf;

use anyhow::Context;
use berth_git::{GitError, Repo};

use super::Ctx;

pub async fn run(ctx: Ctx, repo: Option<PathBuf>) -> anyhow::Result<()> {
    let repo = match repo {
        // Named: it must be a repository.
        Some(path) => Some(Repo::discover(&path)?.root().to_owned()),
        None => {
            let here = std::env::current_dir().context("cannot read the current folder")?;
            match Repo::discover(&here) {
                Ok(r) => Some(r.root().to_owned()),
                Err(GitError::NotARepository(_)) => None,
                Err(e) => return Err(e.into()),
            }
        }
    };
    let loaded = ctx.config(None).await?;
    for unknown in &loaded.unknown_keys {
        eprintln!("berth mcp: warning: {unknown}");
    }
    let server = berth_mcp::BerthMcp::new(ctx.manager, repo, loaded.config.git);
    berth_mcp::serve_stdio(server).await?;
    Ok(())
}
