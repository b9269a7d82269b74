//! The grammar of berth's own agent: `berth chat`, and `berth skill` (the skills it is
//! offered).

use clap::{Args, Subcommand};
use clap_complete::ArgValueCompleter;

use super::JsonFlag;
use crate::completion;

#[derive(Args)]
pub struct ChatArgs {
    /// Run one turn with this prompt and exit; `-` reads it from standard input. Without it,
    /// standard input must be a terminal: the chat is interactive.
    #[arg(short = 'p', long = "print", value_name = "PROMPT")]
    pub prompt: Option<String>,
    /// The workspace: id, name or id prefix.
    #[arg(long, short)]
    pub workspace: Option<String>,
    /// Continue this session (id or 4+ character prefix).
    #[arg(long, short, conflicts_with = "continue_latest")]
    pub session: Option<String>,
    /// Continue the workspace's latest session.
    #[arg(long = "continue", short = 'c')]
    pub continue_latest: bool,
    /// Allow these tools to write or run without asking (comma-separated, repeatable).
    #[arg(long, value_delimiter = ',', value_name = "TOOL")]
    pub allow: Vec<String>,
    /// Allow every tool to write and run.
    #[arg(long)]
    pub allow_all: bool,
    /// Call this model in the session, and keep it as the session's choice (as `/model` and
    /// an editor's model option do): a model of the configured provider (`gpt-4.1`), a
    /// provider (`gemini`), or both (`openai/gpt-4.1`).
    #[arg(long, short = 'm', value_name = "MODEL")]
    pub model: Option<String>,
}

#[derive(Subcommand)]
pub enum SkillCmd {
    /// The skills of a workspace (default: the one whose worktree holds this folder; outside
    /// every workspace, the person's own): name, source and description, by name.
    ///
    /// --json prints {"skills": [{"name", "description", "source", "dir", "files", ...}],
    /// "warnings": [{"path", "problem"}], "listed": N}; `listed` is how many fit the list the
    /// agent's instructions carry.
    #[command(verbatim_doc_comment)]
    List {
        /// Id, name or id prefix.
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
    /// A skill's instructions, as the agent's `skill` tool gives them, and its other files.
    Show {
        name: String,
        /// Id, name or id prefix (default: as for `list`).
        #[arg(long, short, add = ArgValueCompleter::new(completion::workspaces))]
        workspace: Option<String>,
        #[command(flatten)]
        json: JsonFlag,
    },
}
