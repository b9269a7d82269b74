//! What every resource, prompt and tool of one server needs, and nothing of the protocol.

use std::path::PathBuf;

use berth_ops::Ops;

pub struct Context {
    pub ops: Ops,
    /// The repository `workspace_create` makes worktrees of; `None` makes plain workspaces.
    pub repo: Option<PathBuf>,
    /// Worktree files larger than this are refused by the `files` resource.
    pub max_file_bytes: u64,
}
