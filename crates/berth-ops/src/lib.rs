//! berth-ops: the operations every front end calls. The CLI, the MCP server, and the ACP agent
//! and `berth chat` to come parse their input, call an [`Ops`] method, and render what comes
//! back; every rule lives here once.
//!
//! - [`Ops`] comes from [`open`], the store factory: the config picks the store, front ends
//!   never build one.
//! - Workspaces (`workspaces`): create (the plain or git decision and the branch rules),
//!   show, list, delete, garbage collection, spare checkouts. The record and its worktree move
//!   together (`git_workspace`); the manager's record-only removals are reachable only from
//!   here, so no front end can leave a worktree without its record or the other way round.
//! - Sessions (`sessions`), storage of either scope (`storage`), device bindings
//!   (`bindings`), configuration (`config`).
//! - What prompts and agents learn of a project (`review`, `toolchain`, `worktree`).
//! - [`Error`] with its [`ErrorKind`], which each front end maps once.
//! - Views (`view`): the one JSON shape of a workspace or a session at the edge.

mod bindings;
mod config;
mod error;
mod git_workspace;
mod import;
mod page;
pub mod review;
mod sessions;
mod storage;
pub mod toolchain;
mod view;
mod workspaces;
pub mod worktree;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use berth_core::WorkspaceManager;
use berth_store_fs::FsStore;

pub use error::{Error, ErrorKind, Result};
pub use import::aptove::default_dir as aptove_default_dir;
pub use import::{ImportItem, ImportReport, ItemKind, Outcome};
pub use page::Page;
pub use sessions::{ClientSession, ClientSessionOutcome, CreateSession, SessionChoice};
pub use storage::{Node, Owner, StorageRef, context_path};
pub use view::{GitView, KeptView, SessionView, WorkspaceView, session_label};
pub use workspaces::{
    AdoptWorkspace, CreateWorkspace, DeletePlan, Deleted, GcPlan, GcReport, Repository,
    SparesReport,
};

/// The platform's default berth home: `~/.local/share/berth` on Linux,
/// `~/Library/Application Support/berth` on macOS, `%LOCALAPPDATA%\berth` on Windows.
pub use berth_store_fs::default_home;

/// The types of berth's domain that front ends name.
pub use berth_core::config::{LoadedConfig, ProviderKind};
pub use berth_core::{
    Binding, DeviceId, EntryKind, Message, Role, Session, SessionId, SessionStatus, StorageEntry,
    StoragePath, Transcript, Workspace, WorkspaceId,
};
pub use worktree::DEFAULT_MAX_FILE_BYTES;

/// berth's operations over one home and its store. Cheap to clone; holds no state beyond the
/// store handles, so several processes on one home agree by construction.
#[derive(Clone)]
pub struct Ops {
    manager: WorkspaceManager,
    home: Arc<PathBuf>,
    /// The environment layer of the config, as it was when the home was opened.
    env: Arc<Vec<(String, String)>>,
    refill: Arc<Refill>,
}

/// How spare checkouts are topped up after a git workspace took one.
#[derive(Debug, Clone)]
pub enum Refill {
    /// On tokio's blocking pool in this process: for a server that keeps running.
    InProcess,
    /// In a detached process, `program args… --repo <repo>`, in its own process group: for a
    /// command that exits right away and should not wait for a checkout nobody asked for yet.
    Detached {
        program: PathBuf,
        args: Vec<OsString>,
    },
}

/// Opens the berth home at `home` with the store its config chooses: the global config file
/// and the environment are read first (without any store), then the store is opened.
///
/// Today that is always the filesystem store under `home`; `[store] url` names a database
/// store, which is refused until one is built in.
pub fn open(home: &Path, env: &[(String, String)]) -> Result<Ops> {
    let home = std::path::absolute(home)
        .map_err(|e| berth_core::Error::io(format!("cannot use home {}", home.display()), e))?;
    let global = config::global_text(&home)?;
    let loaded = berth_core::config::layer(global.as_ref(), None, env.iter().cloned())?;
    if loaded.config.store.url.is_some() {
        return Err(Error::rule(
            ErrorKind::Invalid,
            format!(
                "[store] url is set, but this berth has only the filesystem store; remove the url (from {} or the environment) to use the home {}",
                config::global_path(&home).display(),
                home.display()
            ),
        ));
    }
    let store = FsStore::open(&home)?;
    Ok(Ops {
        manager: store.manager(),
        home: Arc::new(home),
        env: Arc::new(env.to_vec()),
        refill: Arc::new(Refill::InProcess),
    })
}

impl Ops {
    /// How spare checkouts are refilled; [`Refill::InProcess`] unless set.
    pub fn with_refill(mut self, refill: Refill) -> Ops {
        self.refill = Arc::new(refill);
        self
    }

    /// The berth home: global config, and the default place of workspace folders.
    pub fn home(&self) -> &Path {
        &self.home
    }
}

/// The process environment as the config layer sees it (non-UTF-8 variables are skipped: no
/// config key can use them).
pub fn environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}
