//! What a workspace, a session or a garbage collection looks like at the edge: the JSON of CLI
//! `--json`, MCP structured content, and later ACP and the web.
//!
//! Records are serialized only here, through these types, never as the stored structs: the
//! stored format can change (a new store, a new field) without changing what scripts and
//! models read, and the other way round. Every field is always present (`null` when unknown),
//! so a script can rely on the shape.

use std::path::PathBuf;

use berth_core::config::ProviderKind;
use berth_core::{
    DeviceId, GitInfo, Session, SessionStatus, Workspace, WorkspaceId, WorkspaceName,
};
use berth_git::WorktreeStatus;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// A workspace as front ends show it.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceView {
    pub id: WorkspaceId,
    pub name: Option<String>,
    /// `<id> (<name>)`, or the id: how messages name it.
    pub label: String,
    pub description: String,
    pub created_at: DateTime<Utc>,
    pub last_accessed: DateTime<Utc>,
    pub agent_id: Option<String>,
    /// When its work was put away (`Ops::archive_workspace`): a git workspace's worktree is
    /// gone, its work on a ref; null for a workspace in use.
    pub archived_at: Option<DateTime<Utc>>,
    /// The workspace's folder on this machine (`None` for a store that keeps none).
    pub path: Option<PathBuf>,
    pub git: Option<GitView>,
    /// The workspace's own block of TCP ports; `None` (null) until something of the
    /// workspace first needs ports (a run, a setup command, berth's `run_command`,
    /// `berth workspace ports`), which gives it one.
    pub ports: Option<PortsView>,
    /// The worktree's state, for a git workspace whose state was asked for.
    pub git_status: Option<WorktreeStatus>,
    /// Bytes on disk of its folder and worktree (`disk::usage_of`), where they were measured
    /// (`Ops::measure_workspaces`).
    pub size_bytes: Option<u64>,
    /// Devices bound to it, where they were asked for (`show`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<DeviceId>>,
}

/// A workspace's block of TCP ports: `first` … `last`, `count` of them. Its processes see
/// them as `BERTH_PORT` (the first) and `BERTH_PORT_1` … `BERTH_PORT_<count-1>`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PortsView {
    pub first: u16,
    pub last: u16,
    pub count: u16,
}

impl PortsView {
    pub(crate) fn of(block: berth_core::PortBlock) -> PortsView {
        PortsView {
            first: block.first,
            last: block.last(),
            count: block.count,
        }
    }
}

/// The git part of a workspace.
#[derive(Debug, Clone, Serialize)]
pub struct GitView {
    /// The main checkout.
    pub repo: PathBuf,
    pub worktree: PathBuf,
    pub branch: String,
    pub base_branch: String,
    /// Whether berth made the branch (and so may delete it).
    pub branch_created: bool,
}

impl GitView {
    fn of(git: &GitInfo) -> GitView {
        GitView {
            repo: git.repo.clone(),
            worktree: git.worktree.clone(),
            branch: git.branch.clone(),
            base_branch: git.base_branch.clone(),
            branch_created: git.branch_created,
        }
    }
}

impl WorkspaceView {
    pub(crate) fn new(
        ws: &Workspace,
        path: Option<PathBuf>,
        git_status: Option<WorktreeStatus>,
    ) -> WorkspaceView {
        WorkspaceView::of(ws.clone(), path, git_status)
    }

    /// [`WorkspaceView::new`] of a record the caller is done with: a listing of thousands
    /// moves their strings instead of copying each and freeing the original.
    pub(crate) fn of(
        ws: Workspace,
        path: Option<PathBuf>,
        git_status: Option<WorktreeStatus>,
    ) -> WorkspaceView {
        WorkspaceView {
            label: ws.label(),
            name: ws.name.as_ref().map(|n| n.to_string()),
            id: ws.id,
            description: ws.description,
            created_at: ws.created_at,
            last_accessed: ws.last_accessed,
            agent_id: ws.agent_id,
            archived_at: ws.archived_at,
            path,
            git: ws.git.as_ref().map(GitView::of),
            ports: ws.ports.map(PortsView::of),
            git_status,
            size_bytes: None,
            devices: None,
        }
    }

    /// Where work happens: the worktree of a git workspace, else the workspace's folder.
    pub fn work_dir(&self) -> Option<&std::path::Path> {
        match &self.git {
            Some(git) => Some(&git.worktree),
            None => self.path.as_deref(),
        }
    }
}

/// A session as front ends show it.
#[derive(Debug, Clone, Serialize)]
pub struct SessionView {
    pub id: berth_core::SessionId,
    pub workspace_id: WorkspaceId,
    /// The workspace's name, where it has one and the view was made knowing it
    /// ([`SessionView::in_workspace`]); null otherwise.
    pub workspace_name: Option<String>,
    /// `<id> (<title>)`, or the id.
    pub label: String,
    pub title: String,
    /// The record's provider and model: what answers in it unless `agent` names an ACP agent.
    pub provider: ProviderKind,
    pub model: String,
    /// The ACP agent that works in the session, as a run names it; null for berth's own.
    pub agent: Option<String>,
    pub cwd: Option<String>,
    pub status: SessionStatus,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The tokens its turns used, added up.
    pub usage: berth_core::TokenUsage,
}

impl SessionView {
    pub fn of(s: &Session) -> SessionView {
        SessionView {
            id: s.id.clone(),
            workspace_id: s.workspace_id.clone(),
            workspace_name: None,
            label: session_label(s),
            title: s.title.clone(),
            provider: s.provider,
            model: s.model.clone(),
            agent: s.agent.clone(),
            cwd: s.cwd.clone(),
            status: s.status,
            created_at: s.created_at,
            updated_at: s.updated_at,
            usage: s.usage,
        }
    }

    /// The view of `s`, naming its workspace `name`.
    pub fn in_workspace(s: &Session, name: Option<&WorkspaceName>) -> SessionView {
        SessionView {
            workspace_name: name.map(ToString::to_string),
            ..SessionView::of(s)
        }
    }

    /// What answers in the session, as a person reads it: `agent <name>` for an ACP agent,
    /// else `<provider>/<model>`. The record's model is never shown for an agent's session: no
    /// berth model answers there.
    pub fn answered_by(&self) -> String {
        match &self.agent {
            Some(agent) => format!("agent {agent}"),
            None => format!("{}/{}", self.provider, self.model),
        }
    }

    /// How a person reads the session's workspace: its name, else its id.
    pub fn workspace_label(&self) -> &str {
        self.workspace_name
            .as_deref()
            .unwrap_or(self.workspace_id.as_str())
    }
}

/// How messages name a session: `<id> (<title>)`, or the id alone.
pub fn session_label(s: &Session) -> String {
    match s.title.as_str() {
        "" => s.id.to_string(),
        t => format!("{} ({t})", s.id),
    }
}

/// A workspace garbage collection kept, and why.
#[derive(Debug, Clone, Serialize)]
pub struct KeptView {
    pub id: WorkspaceId,
    pub name: Option<String>,
    pub label: String,
    pub reason: String,
}

impl KeptView {
    pub(crate) fn new(ws: &Workspace, reason: String) -> KeptView {
        KeptView {
            id: ws.id.clone(),
            name: ws.name.as_ref().map(|n| n.to_string()),
            label: ws.label(),
            reason,
        }
    }
}
