//! The grammar of `berth session`: sessions inside workspaces, their transcripts and their
//! storage.

use clap::Subcommand;
use clap_complete::ArgValueCompleter;

use super::{ConfirmFlag, JsonFlag, StorageCmd};
use crate::completion;

#[derive(Subcommand)]
pub enum SessionCmd {
    /// Create a session in a workspace and print its id.
    New {
        /// Workspace id, name or id prefix (default: the workspace whose worktree holds this
        /// folder).
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        #[arg(long, short, default_value = "")]
        title: String,
        /// Provider the session calls: claude, openai or gemini. Naming it (or --model) keeps
        /// the choice with the session, as `/model` does; default: the workspace's merged
        /// config, followed as it changes.
        #[arg(long)]
        provider: Option<berth_ops::ProviderKind>,
        /// Model the session calls (default: the workspace's merged config).
        #[arg(long)]
        model: Option<String>,
        /// Use this id instead of a fresh UUID.
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// List sessions, oldest first: of one workspace (--workspace, else the one whose
    /// worktree holds this folder), or of all (--all, or outside every worktree).
    #[command(visible_alias = "ls")]
    List {
        /// Workspace id, name or id prefix.
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        /// Every workspace's sessions, even inside a worktree.
        #[arg(long, short, conflicts_with = "workspace")]
        all: bool,
        /// Sessions of archived workspaces too (a named workspace's are always listed).
        #[arg(long)]
        archived: bool,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Show a session's metadata and transcript.
    Show {
        /// Session id or id prefix.
        #[arg(add = ArgValueCompleter::new(completion::sessions))]
        session: String,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// Fork a session: a new session whose transcript starts as a copy of this one's, calling
    /// the same model, and goes its own way from the next prompt. The first session is left
    /// as it was. Prints the new session's id.
    ///
    /// The fork is in the same workspace, working where the first one does, unless
    /// --workspace names another. A session answering a prompt is forked once the answer is in
    /// (refused until then).
    #[command(verbatim_doc_comment)]
    Fork {
        /// Session id or id prefix.
        #[arg(add = ArgValueCompleter::new(completion::sessions))]
        session: String,
        /// Workspace id, name or id prefix for the fork (default: the first session's).
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        /// The fork's title (default: "fork of" the first one's).
        #[arg(long, short)]
        title: Option<String>,
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
