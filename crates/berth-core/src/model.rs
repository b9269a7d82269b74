//! The records berth keeps: workspaces, their optional git part, and storage entries.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::ProviderKind;
use crate::error::Error;
use crate::id::{SessionId, WorkspaceId, WorkspaceName};
use crate::storage_path::{MAX_FILE_BYTES, StoragePath};

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

impl Workspace {
    /// How messages name a workspace: `<id> (<name>)`, or the id alone. The one place this is
    /// spelled, so every front end says it the same way.
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("{} ({n})", self.id),
            None => self.id.to_string(),
        }
    }
}

/// The git part of a workspace that carries a worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitInfo {
    /// Absolute path of the main checkout, or of a bare repository's folder (UTF-8: it is
    /// stored as text).
    pub repo: PathBuf,
    pub branch: String,
    pub base_branch: String,
    /// True only if berth created the branch, which is what allows berth to delete it.
    pub branch_created: bool,
    /// Absolute path of the worktree: recorded, not derived, so changing `[git] worktree_dir`
    /// later never loses track of existing worktrees.
    pub worktree: PathBuf,
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

impl StorageScope {
    /// Refuses a file of `len` bytes over [`MAX_FILE_BYTES`], worded the same by every store.
    pub fn check_size(&self, path: &StoragePath, len: usize) -> Result<(), Error> {
        if len as u64 > MAX_FILE_BYTES {
            return Err(Error::Refused(format!(
                "'{path}' in {self} storage would be {len} bytes; a storage file holds at most {MAX_FILE_BYTES} bytes (64 MiB)"
            )));
        }
        Ok(())
    }
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

impl EntryKind {
    /// The kind of an entry from its own metadata (not followed through a symlink).
    pub fn classify(is_symlink: bool, is_dir: bool) -> EntryKind {
        if is_symlink {
            EntryKind::Symlink
        } else if is_dir {
            EntryKind::Dir
        } else {
            EntryKind::File
        }
    }

    /// The name serde uses too: `file`, `dir`, `symlink`.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
        }
    }
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

/// Where a session is in its life. The allowed moves are in [`SessionStatus::can_become`], the
/// one place they are written down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionStatus {
    /// Waiting for a prompt.
    Idle,
    /// An agent turn is in progress.
    Running,
    /// The last turn was cancelled by the client.
    Cancelled,
    /// The last turn failed (provider error, tool crash).
    Failed,
    /// Finished for good; nothing more is appended.
    Closed,
}

impl SessionStatus {
    /// ```text
    /// idle ──► running ──► idle | cancelled | failed
    /// cancelled | failed ──► running | idle
    /// any but closed ──► closed          closed ──► (nothing)
    /// ```
    /// Staying in the same state is always allowed except for `running` (a second turn cannot
    /// start while one runs).
    pub fn can_become(self, next: SessionStatus) -> bool {
        use SessionStatus::*;
        match (self, next) {
            (Closed, _) => next == Closed,
            (_, Closed) => true,
            (Running, Running) => false,
            (Idle, Running | Idle) => true,
            (Running, Idle | Cancelled | Failed) => true,
            (Cancelled | Failed, Running | Idle) => true,
            (s, n) => s == n,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Idle => "idle",
            SessionStatus::Running => "running",
            SessionStatus::Cancelled => "cancelled",
            SessionStatus::Failed => "failed",
            SessionStatus::Closed => "closed",
        }
    }
}

impl std::str::FromStr for SessionStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "idle" => Ok(SessionStatus::Idle),
            "running" => Ok(SessionStatus::Running),
            "cancelled" => Ok(SessionStatus::Cancelled),
            "failed" => Ok(SessionStatus::Failed),
            "closed" => Ok(SessionStatus::Closed),
            _ => Err(format!(
                "unknown status {s:?}; expected idle, running, cancelled, failed or closed"
            )),
        }
    }
}

/// A session: one conversation or agent run inside a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub id: SessionId,
    pub workspace_id: WorkspaceId,
    #[serde(default)]
    pub title: String,
    pub provider: ProviderKind,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    pub status: SessionStatus,
    pub created_at: DateTime<Utc>,
    /// Last change of the metadata (title, status); appends do not rewrite it.
    pub updated_at: DateTime<Utc>,
}

/// The session rules every store enforces the same way (the conformance suite checks each).
impl Session {
    /// A closed session's transcript takes no more messages.
    pub fn check_open(&self) -> Result<(), Error> {
        if self.status == SessionStatus::Closed {
            return Err(Error::Refused(format!(
                "session '{}' is closed; start a new session to continue",
                self.id
            )));
        }
        Ok(())
    }

    /// The move to `next` is one [`SessionStatus::can_become`] allows.
    pub fn check_can_become(&self, next: SessionStatus) -> Result<(), Error> {
        if !self.status.can_become(next) {
            return Err(Error::Refused(format!(
                "session '{}' is {} and cannot become {}",
                self.id,
                self.status.as_str(),
                next.as_str()
            )));
        }
        Ok(())
    }
}

/// What a caller supplies to create a session.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// `None` generates a UUID v4.
    pub id: Option<SessionId>,
    pub workspace: WorkspaceId,
    pub title: String,
    pub provider: ProviderKind,
    pub model: String,
    pub cwd: Option<String>,
}

impl NewSession {
    /// What a store checks before it writes anything: the model name is 1-128 characters
    /// without control characters.
    pub fn check(&self) -> Result<(), Error> {
        let model = &self.model;
        if model.is_empty() || model.len() > 128 || model.chars().any(char::is_control) {
            return Err(Error::Invalid(crate::id::InvalidInput {
                kind: "model",
                value: model.chars().take(80).collect(),
                rule: "must be 1-128 characters without control characters".to_owned(),
            }));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::SessionStatus::{self, *};

    #[test]
    fn status_transitions() {
        let all = [Idle, Running, Cancelled, Failed, Closed];
        let allowed: Vec<(SessionStatus, SessionStatus)> = all
            .iter()
            .flat_map(|a| all.iter().map(move |b| (*a, *b)))
            .filter(|(a, b)| a.can_become(*b))
            .collect();
        assert_eq!(
            allowed,
            vec![
                (Idle, Idle),
                (Idle, Running),
                (Idle, Closed),
                (Running, Idle),
                (Running, Cancelled),
                (Running, Failed),
                (Running, Closed),
                (Cancelled, Idle),
                (Cancelled, Running),
                (Cancelled, Cancelled),
                (Cancelled, Closed),
                (Failed, Idle),
                (Failed, Running),
                (Failed, Failed),
                (Failed, Closed),
                (Closed, Closed),
            ]
        );
    }
}
