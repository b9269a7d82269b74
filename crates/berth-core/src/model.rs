//! The records berth keeps: workspaces, their optional git part, and storage entries.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::id::{SessionId, WorkspaceId, WorkspaceName};

/// A workspace: an isolated place for one agent, user or device to work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    pub id: WorkspaceId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<WorkspaceName>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub created_at: DateTime<Utc>,
    /// Last real use (storage, sessions, device resolution). Inspection does not count, so
    /// looking at a workspace does not keep it from being collected.
    pub last_accessed: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitInfo>,
}

/// The git part of a workspace that carries a worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitInfo {
    /// Absolute path of the main checkout.
    pub repo: String,
    pub branch: String,
    pub base_branch: String,
    /// True only if berth created the branch, which is what allows berth to delete it.
    pub branch_created: bool,
}

/// What a caller supplies to create a workspace; the store fills in the timestamps.
#[derive(Debug, Clone, Default)]
pub struct NewWorkspace {
    /// `None` generates a UUID v4.
    pub id: Option<WorkspaceId>,
    pub name: Option<WorkspaceName>,
    pub description: String,
    pub agent_id: Option<String>,
    pub git: Option<GitInfo>,
}

/// Whose storage an operation addresses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StorageScope {
    Workspace(WorkspaceId),
    Session {
        workspace: WorkspaceId,
        session: SessionId,
    },
}

impl std::fmt::Display for StorageScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StorageScope::Workspace(w) => write!(f, "workspace '{w}'"),
            StorageScope::Session { session, .. } => write!(f, "session '{session}'"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
}

/// One entry of a storage folder listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageEntry {
    pub name: String,
    /// Path relative to the storage root.
    pub path: String,
    pub kind: EntryKind,
    /// Size in bytes for files; 0 for folders.
    pub size: u64,
}
