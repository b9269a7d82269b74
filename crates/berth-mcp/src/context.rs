//! What every resource, prompt and tool of one server needs, and nothing of the protocol.

use std::path::PathBuf;
use std::sync::Arc;

use berth_ops::Ops;

use crate::runs::Runs;

pub struct Context {
    pub ops: Ops,
    /// The repository `workspace_create` makes worktrees of; `None` makes plain workspaces.
    pub repo: Option<PathBuf>,
    /// Worktree files larger than this are refused by the `files` resource.
    pub max_file_bytes: u64,
    /// The runs `session_run` started in this process.
    pub runs: Arc<Runs>,
}
