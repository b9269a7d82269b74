//! The store conformance suite: behaviour every backend must show, written once against the
//! traits. A backend crate runs it with [`crate::conformance_tests!`], giving a function that
//! builds a fresh, empty store per test.

// Tests, though compiled into the library for the backend crates to run: a panic is the
// failure they report.
#![allow(clippy::unwrap_used)]

mod bindings;
mod manager;
mod paging;
mod ports;
mod sessions;
mod storage;
mod workspaces;

use std::sync::Arc;

use crate::SessionId;
use crate::id::{WorkspaceId, WorkspaceName};
use crate::manager::WorkspaceManager;
use crate::model::{NewSession, NewWorkspace};
use crate::storage_path::StoragePath;
use crate::store::{BindingStore, SessionStore, StorageStore, WorkspaceStore};

pub use bindings::bindings;
pub use manager::{manager_device_and_delete, manager_gc_and_default, manager_resolution};
pub use paging::paging;
pub use ports::{kept_port_blocks, port_blocks, racing_port_assignments};
pub use sessions::{
    deleting_a_workspace_deletes_its_sessions, manager_sessions, session_agent, session_lifecycle,
    session_turn_counts, session_turns, session_usage,
};
pub use storage::storage;
pub use workspaces::{
    access_time_and_gc, delete_frees_id_and_name, missing_things_are_not_found, workspace_archive,
    workspace_config, workspace_round_trip, workspace_set_git, workspace_uniqueness,
};

/// A fresh, empty backend: the three store slots (often one object behind three `Arc`s).
pub struct Backend {
    pub workspaces: Arc<dyn WorkspaceStore>,
    pub bindings: Arc<dyn BindingStore>,
    pub storage: Arc<dyn StorageStore>,
    pub sessions: Arc<dyn SessionStore>,
}

impl Backend {
    pub fn manager(&self) -> WorkspaceManager {
        WorkspaceManager::new(
            self.workspaces.clone(),
            self.bindings.clone(),
            self.storage.clone(),
            self.sessions.clone(),
        )
    }
}

fn new_session(ws: &str, id: Option<&str>) -> NewSession {
    NewSession {
        id: id.map(|i| SessionId::new(i).unwrap()),
        workspace: wid(ws),
        title: "a session".into(),
        provider: crate::config::ProviderKind::Gemini,
        model: "gemini-2.5-pro".into(),
        cwd: Some("/tmp/x".into()),
        agent: None,
    }
}

fn wid(s: &str) -> WorkspaceId {
    WorkspaceId::new(s).unwrap()
}

fn named(id: &str, name: &str) -> NewWorkspace {
    NewWorkspace {
        id: Some(wid(id)),
        name: Some(WorkspaceName::new(name).unwrap()),
        description: format!("{name} workspace"),
        ..NewWorkspace::default()
    }
}

fn path(s: &str) -> StoragePath {
    StoragePath::new(s).unwrap()
}

/// Generates one `#[tokio::test]` per conformance check. `$make` is an expression that builds
/// a fresh [`Backend`]; it may capture a temp dir guard by returning `(Backend, guard)`.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@each $make;
            workspace_round_trip, workspace_uniqueness, missing_things_are_not_found,
            delete_frees_id_and_name, workspace_config, workspace_set_git, workspace_archive, access_time_and_gc,
            bindings, storage,
            manager_resolution, manager_device_and_delete, manager_gc_and_default,
            session_lifecycle, deleting_a_workspace_deletes_its_sessions, manager_sessions,
            paging, port_blocks, kept_port_blocks, racing_port_assignments, session_usage,
            session_turn_counts,
            session_turns, session_agent);
    };
    (@each $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test]
            async fn $name() {
                let (backend, _guard) = $make;
                $crate::conformance::$name(backend).await;
            }
        )*
    };
}
