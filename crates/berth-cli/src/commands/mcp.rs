//! `berth mcp`: the MCP server, over stdio or Streamable HTTP.

use anyhow::Context;
use berth_git::{GitError, Repo};
use berth_mcp::{BerthMcp, HttpOptions};

use super::Ctx;
use crate::cli::{McpArgs, Transport};

pub async fn run(ctx: Ctx, args: McpArgs) -> anyhow::Result<()> {
    let repo = match args.repo {
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
    let server = BerthMcp::new(ctx.manager, repo, loaded.config.git)
        .with_max_file_bytes(args.max_file_bytes);
    match args.transport {
        Transport::Stdio => berth_mcp::serve_stdio(server).await?,
        Transport::Http => {
            let options = HttpOptions {
                listen: args.listen,
                token: args.token.filter(|t| !t.is_empty()),
                allowed_hosts: args.allow_hosts,
                allowed_origins: args.allow_origins,
                max_request_bytes: args.max_request_bytes,
            };
            berth_mcp::serve_http(server, options, |addr| {
                eprintln!("berth mcp: serving MCP at http://{addr}/mcp");
            })
            .await?;
        }
    }
    Ok(())
}
