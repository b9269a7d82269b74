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
    /// When its work was put away: a git workspace's worktree (and the branch berth made)
    /// removed, what it held kept on a ref, and the record kept, with its sessions and
    /// storage, so that they can still be read and the work restored. `None` for a workspace
    /// in use. An archived workspace takes no new session and is neither collected nor
    /// pruned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitInfo>,
    /// The TCP ports that are this workspace's alone, from when something of its own first
    /// needed them (`WorkspaceStore::assign_ports`) until it is deleted; `None` until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<PortBlock>,
}

impl Workspace {
    /// Whether its work was put away ([`Workspace::archived_at`]).
    pub fn is_archived(&self) -> bool {
        self.archived_at.is_some()
    }

    /// How messages name a workspace: `<name> (<id>)`, or the id alone: the name first, as a
    /// person knows it. The one place this is spelled, so every front end says it the same
    /// way.
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("{n} ({})", self.id),
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

/// A block of consecutive TCP ports held by one workspace: `first` … `first + count - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PortBlock {
    pub first: u16,
    pub count: u16,
}

impl PortBlock {
    /// The block's last port.
    pub fn last(&self) -> u16 {
        (u32::from(self.first) + u32::from(self.count).max(1) - 1) as u16
    }

    /// Whether the two blocks share a port.
    pub fn overlaps(&self, other: &PortBlock) -> bool {
        self.first <= other.last() && other.first <= self.last()
    }

    /// `Refused` when a block of `held` shares a port with this one: a record that arrives
    /// with a block of its own (a store migration) may keep it only while no other workspace
    /// holds any of its ports. Every store calls this where it serializes the choice of
    /// blocks (see `WorkspaceStore::assign_ports`).
    pub fn check_free(&self, held: impl IntoIterator<Item = PortBlock>) -> Result<(), Error> {
        match held.into_iter().find(|h| h.overlaps(self)) {
            None => Ok(()),
            Some(h) => Err(Error::Refused(format!(
                "ports {self} are not free: another workspace holds {h}; delete that workspace, \
                 or leave this one without a block (it is given one on first use)"
            ))),
        }
    }

    /// What a process started for the workspace is told: `BERTH_PORT` (the first port) and
    /// `BERTH_PORT_1` … `BERTH_PORT_<count-1>` (the others), in that order.
    pub fn env(&self) -> Vec<(String, String)> {
        (0..self.count)
            .map(|i| {
                let name = match i {
                    0 => "BERTH_PORT".to_owned(),
                    i => format!("BERTH_PORT_{i}"),
                };
                (name, (u32::from(self.first) + u32::from(i)).to_string())
            })
            .collect()
    }
}

impl std::fmt::Display for PortBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.first, self.last())
    }
}

/// Where a workspace's ports come from when it first needs them: the lowest free block of
/// `block` ports within `first` … `last` (both included). The config's `[ports]` (see
/// [`crate::config::PortSettings::range`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
    pub block: u16,
}

impl PortRange {
    /// The lowest block of the range that overlaps none of `taken` (blocks outside the range
    /// are passed over); `Refused`, naming the keys to change, when none is left. Every store
    /// calls this while nothing else can take a block (see `WorkspaceStore::assign_ports`).
    pub fn lowest_free(
        &self,
        taken: impl IntoIterator<Item = PortBlock>,
    ) -> Result<PortBlock, Error> {
        let mut taken: Vec<PortBlock> = taken.into_iter().collect();
        taken.sort_by_key(|b| b.first);
        let size = u32::from(self.block.max(1));
        let mut start = u32::from(self.first);
        for held in &taken {
            if start + size - 1 < u32::from(held.first) {
                break;
            }
            start = start.max(u32::from(held.last()) + 1);
        }
        if start + size - 1 > u32::from(self.last) {
            return Err(Error::Refused(format!(
                "no block of {} free ports is left in {}-{} (a workspace holds its block from \
                 its first use until it is deleted); widen the range with [ports] first and \
                 last, make [ports] block smaller, or delete workspaces you no longer use",
                self.block, self.first, self.last
            )));
        }
        Ok(PortBlock {
            first: start as u16,
            count: self.block,
        })
    }
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
    /// A block of ports the workspace already holds elsewhere: a record copied from another
    /// store keeps its block (`berth store migrate`), refused by the store, atomically with
    /// the create, if another workspace holds any of its ports ([`PortBlock::check_free`]).
    /// `None` for every new workspace: a block is given when something of its own first
    /// needs one (`WorkspaceStore::assign_ports`), so a create never fails for want of ports.
    pub ports: Option<PortBlock>,
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
    /// The ACP agent that works in the session, as a run names it (`claude-code`,
    /// `cmd:python3 agent.py`); `None` for berth's own agent. With one, `provider` and `model`
    /// are only the record's defaults: the agent, not that model, answers in the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    pub status: SessionStatus,
    pub created_at: DateTime<Utc>,
    /// Last change of the metadata (title, status); appends do not rewrite it.
    pub updated_at: DateTime<Utc>,
    /// The tokens its turns used, added up (as the providers reported them). Last, so the
    /// filesystem store's TOML keeps it a table after the plain values.
    #[serde(default, skip_serializing_if = "TokenUsage::is_zero")]
    pub usage: TokenUsage,
}

/// Tokens a model read and wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl TokenUsage {
    pub fn is_zero(&self) -> bool {
        self.input_tokens == 0 && self.output_tokens == 0
    }

    /// Both counts added, saturating (a count never wraps to a small number).
    pub fn plus(self, other: TokenUsage) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
        }
    }
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
    /// The ACP agent that will work in the session (see [`Session::agent`]); `None` for
    /// berth's own.
    pub agent: Option<String>,
}

impl NewSession {
    /// What a store checks before it writes anything: the model name is 1-128 characters
    /// without control characters; an agent's name, if any, is 1-4096 bytes (a command line
    /// may be long, but an empty name would say nothing a `None` does not).
    pub fn check(&self) -> Result<(), Error> {
        if let Some(agent) = &self.agent
            && (agent.trim().is_empty() || agent.len() > 4096)
        {
            return Err(Error::Invalid(crate::id::InvalidInput {
                kind: "agent",
                value: agent.chars().take(80).collect(),
                rule: "must be 1-4096 bytes, not only spaces; leave it out for berth's own agent"
                    .to_owned(),
            }));
        }
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
    use super::{PortBlock, PortRange};

    fn block(first: u16, count: u16) -> PortBlock {
        PortBlock { first, count }
    }

    #[test]
    fn lowest_free_port_block() {
        let range = PortRange {
            first: 100,
            last: 129,
            block: 10,
        };
        assert_eq!(range.lowest_free([]).unwrap(), block(100, 10));
        assert_eq!(range.lowest_free([block(100, 10)]).unwrap(), block(110, 10));
        // A gap too small is passed over; one that fits is taken, lowest first.
        assert_eq!(
            range
                .lowest_free([block(105, 10), block(120, 10)])
                .unwrap_err()
                .kind(),
            crate::ErrorKind::Refused
        );
        assert_eq!(
            range.lowest_free([block(120, 10), block(100, 10)]).unwrap(),
            block(110, 10)
        );
        // Blocks outside the range, or of another size, are respected but not counted.
        assert_eq!(
            range.lowest_free([block(50, 60), block(112, 3)]).unwrap(),
            block(115, 10)
        );
        let full = range
            .lowest_free([block(100, 10), block(110, 10), block(120, 10)])
            .unwrap_err();
        let msg = full.to_string();
        assert!(
            msg.contains("[ports] first") && msg.contains("[ports] block"),
            "{msg}"
        );
        // The top of the port space does not overflow.
        let top = PortRange {
            first: 65530,
            last: 65535,
            block: 6,
        };
        assert_eq!(top.lowest_free([]).unwrap(), block(65530, 6));
        assert!(top.lowest_free([block(65535, 1)]).is_err());
    }

    #[test]
    fn a_kept_block_must_be_free() {
        let mine = block(200, 10);
        assert!(mine.overlaps(&block(209, 1)) && mine.overlaps(&block(190, 11)));
        assert!(!mine.overlaps(&block(210, 5)) && !mine.overlaps(&block(190, 10)));
        assert!(mine.check_free([block(190, 10), block(210, 10)]).is_ok());
        let err = mine.check_free([block(205, 2)]).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Refused);
        assert!(err.to_string().contains("200-209"), "{err}");
    }

    #[test]
    fn port_block_env() {
        assert_eq!(
            block(20010, 3).env(),
            [
                ("BERTH_PORT".to_owned(), "20010".to_owned()),
                ("BERTH_PORT_1".to_owned(), "20011".to_owned()),
                ("BERTH_PORT_2".to_owned(), "20012".to_owned()),
            ]
        );
        assert_eq!(block(20010, 3).to_string(), "20010-20012");
    }

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
