//! The grammar of what sets up a home: `berth config`, `berth store` (where its records are
//! kept) and `berth import` (records brought in from Aptove or amux).

use std::path::PathBuf;

use clap::Subcommand;
use clap_complete::ArgValueCompleter;

use super::JsonFlag;
use crate::completion;

#[derive(Subcommand)]
pub enum ImportCmd {
    /// Import Aptove's data folder: workspaces, sessions, config and device bindings.
    ///
    /// Each workspace keeps its uuid as its berth id, its name (when it is a valid berth name
    /// that no other workspace has; else the name goes into the description), and its created
    /// and last-used times. Its session.md becomes a session of it, with the same id. Settings
    /// berth has under the same names (provider, [providers.X] api_key, model and base_url,
    /// [agent] max_tool_iterations) are added to berth's global config or the workspace's,
    /// without rewriting those files; a workspace.toml provider becomes the workspace's
    /// provider. The rest (MCP servers, transports, identity, retry, system prompt, UI state)
    /// is listed as skipped, with why. A setting berth already has with another value is
    /// reported as a conflict and berth's is kept. Bindings come in when their workspace did.
    #[command(verbatim_doc_comment)]
    Aptove {
        /// Aptove's data folder (default: ~/.local/share/Aptove on Linux, ~/Library/Application
        /// Support/Aptove on macOS, %LOCALAPPDATA%\Aptove on Windows).
        dir: Option<PathBuf>,
        /// Print what would be imported, and write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Adopt a repository's amux workspaces as berth git workspaces.
    ///
    /// Each amux workspace (REPO/.amux/workspaces/<id>/) becomes a berth workspace with amux's
    /// id, name, description and creation time, recording its worktree where it is and the
    /// branch checked out there; the files of its storage/ (context.md among them) are copied
    /// into the workspace's storage. berth did not create the branch, so it never deletes it;
    /// `berth workspace delete` removes the worktree only when that loses no work. amux's own
    /// records stay as they are.
    #[command(verbatim_doc_comment)]
    Amux {
        /// The repository amux worked in (default: the one containing this folder).
        repo: Option<PathBuf>,
        /// Print what would be adopted, and write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Subcommand)]
pub enum ConfigCmd {
    /// Write a commented config template to <home>/config.toml.
    Init {
        /// Replace an existing config.toml.
        #[arg(long)]
        force: bool,
    },
    /// Print the merged config (global → workspace → environment), secrets redacted.
    Show {
        /// Include this workspace's overrides (default: the workspace whose worktree holds
        /// this folder).
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
}

#[derive(Subcommand)]
pub enum StoreCmd {
    /// Print the store this home uses (a database's URL without its password).
    Show {
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Copy this home's records into another store, then verify them there.
    ///
    /// Workspaces (with their config), sessions (with their transcripts), storage files of both
    /// scopes and device bindings are copied from the store in use into the one --to names: a
    /// sqlite:// or postgres:// URL, or `fs` for the files under the home (back from a
    /// database). Ids, names and times are kept. Running it again copies only what is new (a
    /// transcript's newer messages, a later last-used time); what the target holds differently
    /// is a conflict, kept and reported, and nothing in the target is deleted. Every item is
    /// then read back from the target and compared; the counts are printed. The exit status is
    /// 0 when the target holds everything the source does, 6 when conflicts kept some of it
    /// out. Then point the home at the target: set [store] url in <home>/config.toml (or remove
    /// it, after `--to fs`).
    #[command(verbatim_doc_comment)]
    Migrate {
        /// The target: sqlite:///path/berth.db, postgres://user:password@host:port/db, or fs.
        #[arg(long, value_name = "URL")]
        to: String,
        /// Print what would be copied, and write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
}
