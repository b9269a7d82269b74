//! The command-line grammar. Everything a person types is described here, with the help text
//! they will read; `commands/` does the work.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "berth",
    version,
    about = "A place for AI agents to work: workspaces, sessions, device bindings, config and storage",
    long_about = "A place for AI agents to work: isolated workspaces (optionally git worktrees), \
the sessions inside them, device bindings, layered config and file storage.\n\n\
State lives under the berth home: --home, else $BERTH_HOME, else the platform data folder \
(~/.local/share/berth on Linux).\n\n\
Workspaces can be named by id, by name, or by an unambiguous id prefix of 4+ characters."
)]
pub struct Cli {
    /// The berth home folder.
    #[arg(long, global = true, env = "BERTH_HOME", value_name = "PATH")]
    pub home: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Create, inspect and remove workspaces, and use their storage.
    #[command(subcommand)]
    Workspace(WorkspaceCmd),
    /// Sessions (conversations and agent runs) inside workspaces, and their storage.
    #[command(subcommand)]
    Session(SessionCmd),
    /// Map device or client identifiers to workspaces.
    #[command(subcommand)]
    Binding(BindingCmd),
    /// Write the config template, or show the merged config (secrets redacted).
    #[command(subcommand)]
    Config(ConfigCmd),
}

#[derive(Args)]
pub struct JsonFlag {
    /// Print JSON for scripts instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ConfirmFlag {
    /// Do not ask for confirmation. Required when standard input is not a terminal.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Subcommand)]
pub enum WorkspaceCmd {
    /// List every workspace.
    #[command(visible_alias = "ls")]
    List(JsonFlag),
    /// Create a workspace and print its id.
    Create {
        /// A unique name (letters, digits, '.', '_', '-'; up to 64).
        name: Option<String>,
        #[arg(long, short, default_value = "")]
        description: String,
        /// Use this id instead of a fresh UUID (e.g. a mobile app's persistent id).
        #[arg(long)]
        id: Option<String>,
        /// Associated agent id.
        #[arg(long)]
        agent_id: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show one workspace: metadata, folder and bound devices.
    Show {
        /// Id, name or id prefix.
        workspace: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Delete a workspace with its storage and sessions, and unbind its devices.
    #[command(visible_alias = "rm")]
    Delete {
        /// Id, name or id prefix.
        workspace: String,
        #[command(flatten)]
        confirm: ConfirmFlag,
    },
    /// Delete workspaces unused for a while (never `default`).
    Gc {
        /// Days without use after which a workspace is removed.
        #[arg(long, default_value_t = 90, value_name = "DAYS")]
        max_age: u32,
        /// Only list what would be removed.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        confirm: ConfirmFlag,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Print the workspace's folder, for `cd "$(berth workspace path NAME)"`.
    Path {
        /// Id, name or id prefix.
        workspace: String,
    },
    /// Read, write, list and remove files in a workspace's storage.
    #[command(subcommand)]
    Storage(StorageCmd),
}

/// Storage commands, shared by `workspace storage` and `session storage`. OWNER is the workspace
/// or the session: an id, a (workspace) name, or an id prefix of 4+ characters.
#[derive(Subcommand)]
pub enum StorageCmd {
    /// Print a file's contents (bytes as stored).
    Read { owner: String, path: String },
    /// Write a file atomically, creating folders; content from the argument or standard input.
    Write {
        owner: String,
        path: String,
        /// The content; omit (or pass -) to read standard input.
        content: Option<String>,
    },
    /// List a folder (the storage root by default).
    #[command(visible_alias = "ls")]
    List {
        owner: String,
        path: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Remove a file or an empty folder; -r for a folder and everything in it.
    Rm {
        owner: String,
        path: String,
        #[arg(short, long)]
        recursive: bool,
    },
}

impl StorageCmd {
    pub fn owner(&self) -> &str {
        match self {
            StorageCmd::Read { owner, .. }
            | StorageCmd::Write { owner, .. }
            | StorageCmd::List { owner, .. }
            | StorageCmd::Rm { owner, .. } => owner,
        }
    }
}

#[derive(Subcommand)]
pub enum SessionCmd {
    /// Create a session in a workspace and print its id.
    New {
        /// Workspace id, name or id prefix.
        #[arg(long, short)]
        workspace: String,
        #[arg(long, short, default_value = "")]
        title: String,
        /// Provider recorded for the session (default: the workspace's merged config).
        #[arg(long)]
        provider: Option<String>,
        /// Model recorded for the session (default: the workspace's merged config).
        #[arg(long)]
        model: Option<String>,
        /// Use this id instead of a fresh UUID.
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// List sessions, of one workspace or of all.
    #[command(visible_alias = "ls")]
    List {
        #[arg(long, short)]
        workspace: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show a session's metadata and transcript.
    Show {
        /// Session id or id prefix.
        session: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Append one message to the transcript; content from the argument or standard input.
    Append {
        session: String,
        /// user, assistant or system.
        #[arg(long, short, default_value = "user")]
        role: String,
        /// The content; omit (or pass -) to read standard input.
        content: Option<String>,
    },
    /// Empty the transcript (its frontmatter stays).
    Clear {
        session: String,
        #[command(flatten)]
        confirm: ConfirmFlag,
    },
    /// Delete a session with its transcript and storage.
    Rm {
        session: String,
        #[command(flatten)]
        confirm: ConfirmFlag,
    },
    /// Read, write, list and remove files in a session's storage.
    #[command(subcommand)]
    Storage(StorageCmd),
}

#[derive(Subcommand)]
pub enum BindingCmd {
    /// List every device binding.
    #[command(visible_alias = "ls")]
    List(JsonFlag),
    /// Bind a device to a workspace (replacing any earlier binding).
    Set { device: String, workspace: String },
    /// Remove a device's binding.
    Rm { device: String },
    /// Print the workspace bound to a device, creating and binding a new one if none is.
    Resolve {
        device: String,
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
        /// Include this workspace's overrides.
        #[arg(long, short)]
        workspace: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
}
