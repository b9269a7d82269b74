//! berth-ops: the operations every front end calls. The CLI, the MCP server, and the ACP agent
//! and `berth chat` to come parse their input, call an [`Ops`] method, and render what comes
//! back; every rule lives here once.
//!
//! - [`Ops`] comes from [`open`], the store factory: the config picks the store, front ends
//!   never build one.
//! - Workspaces (`workspaces`): create (the plain or git decision and the branch rules),
//!   show, list, delete, garbage collection, spare checkouts; archive and restore
//!   (`archive`). The record and its worktree move
//!   together (`git_workspace`); the manager's record-only removals are reachable only from
//!   here, so no front end can leave a worktree without its record or the other way round.
//! - Sessions (`sessions`), storage of either scope (`storage`), device bindings
//!   (`bindings`), configuration (`config`).
//! - What prompts and agents learn of a project (`review`, `toolchain`, `worktree`).
//! - [`Error`] with its [`ErrorKind`], which each front end maps once.
//! - Views (`view`): the one JSON shape of a workspace or a session at the edge.
//! - [`doctor`]: what works and what does not in a home, each finding with what to do;
//!   [`disk`]: the disk use of a folder.

#![forbid(unsafe_code)]

mod archive;
pub mod background;
mod bindings;
pub mod config;
pub mod disk;
pub mod doctor;
mod error;
mod git_workspace;
mod interrupted;
mod list_json;
mod lost;
pub mod memory;
mod merge;
mod models;
pub mod notices;
mod page;
mod prune;
mod reach;
pub mod review;
mod sandbox;
pub mod send_on;
mod sessions;
pub mod skills;
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
use berth_store_sql::SqlStore;

pub use archive::Archived;
pub use background::{BackgroundId, BackgroundProcess};
/// Progress of checkouts and of the operations' loops, for a front end on a terminal.
pub use berth_git::progress;
pub use berth_git::{FileDiff, MergeMode, Merged, WorktreeDiff, WorktreeStatus};
pub use berth_git::{GitError, SetupError as GitSetupError};
pub use berth_sandbox::{SandboxError, take_handed_network};
pub use berth_skills::SkillError;
pub use error::{Error, ErrorKind, Result, blocking};
pub use git_workspace::{DEFAULT_SETUP_TIMEOUT, adoption};
pub use lost::LostRefView;
pub use merge::{MergeReport, MergeWorkspace, local_base};
pub use models::{ModelChoice, SessionModel};
pub use page::{Listed, PAGE_DEFAULT, PAGE_MAX, Page, page_limit};
pub use prune::{OrphanWorktree, PruneKept, PrunePlan, PruneReport};
pub use reach::{HeldTo, Reach, device_mcp_refused};
pub use sandbox::{
    AgentDeclared, AgentProcess, network_forwards, network_forwards_said, user_home,
};
pub use sessions::title_of;
pub use sessions::{ClientSession, ClientSessionOutcome, CreateSession, SessionChoice};
pub use storage::{Node, Owner, StorageRef, context_path};
pub use view::{GitView, KeptView, PortsView, SessionView, WorkspaceView, session_label};
pub use workspaces::{
    AdoptWorkspace, CreateWarning, CreateWorkspace, Created, DeletePlan, Deleted, GcPlan, GcReport,
    HERE, NamedRepository, Reattached, RepairReport, Repository, SparesReport, StartPoint,
    WorkspacePorts,
};

/// The platform's default berth home: `~/.local/share/berth` on Linux,
/// `~/Library/Application Support/berth` on macOS, `%LOCALAPPDATA%\berth` on Windows.
pub use berth_store_fs::default_home;

/// The types of berth's domain that front ends name.
pub use berth_core::config::{
    AgentEntry, Config, LoadedConfig, PoolSettings, ProviderKind, RunSettings,
};
/// The shortest id prefix that names a workspace or a session.
pub use berth_core::manager::{MIN_PREFIX, Named, is_id_prefix, named_by_id};
pub use berth_core::shown;
pub use berth_core::{
    Binding, DeviceId, EntryKind, Kinded, Message, Role, Session, SessionId, SessionStatus,
    StorageEntry, StoragePath, TokenUsage, Transcript, TurnHold, Workspace, WorkspaceId,
    WorkspaceName, kind_as, tool_record,
};
pub use interrupted::INTERRUPTED;
pub use worktree::DEFAULT_MAX_FILE_BYTES;

/// berth's operations over one home and its store. Cheap to clone; holds no state beyond the
/// store handles, so several processes on one home agree by construction.
#[derive(Clone)]
pub struct Ops {
    manager: WorkspaceManager,
    /// The store `manager` was opened on.
    store: Arc<StoreChoice>,
    /// The database, when the store is one: where runs are kept too (berth-run).
    sql: Option<SqlStore>,
    home: Arc<PathBuf>,
    /// The environment layer of the config, as it was when the home was opened.
    env: Arc<Vec<(String, String)>>,
    refill: Arc<Refill>,
    /// The home's `[[notify]]` entries, and their notifier once a notice is sent.
    notices: Arc<notices::Notices>,
}

/// How spare checkouts are topped up after a git workspace took one.
#[derive(Debug, Clone)]
pub enum Refill {
    /// On tokio's blocking pool in this process: for a server that keeps running.
    InProcess,
    /// In a detached process of this very program, `berth args… --repo <repo>`, in its own
    /// process group: for a command that exits right away and should not wait for a checkout
    /// nobody asked for yet. The program's file is looked up when a refill starts, not when
    /// the command does: most commands never refill, and the lookup is a `readlink` of
    /// `/proc/self/exe` that every command would pay for.
    Detached { args: Vec<OsString> },
}

/// Opens the berth home at `home` with the store its config chooses: the global config file
/// and the environment are read first (without any store), then the store is opened.
///
/// `[store] url` (or `BERTH_STORE_URL`) names a database: `sqlite:///path/berth.db` or
/// `postgres://user:password@host:port/db` ([`SqlStore`]); without one, the filesystem store
/// under `home`. Either way workspace folders (git worktrees) stay under `home` on this
/// machine.
pub fn open(home: &Path, env: &[(String, String)]) -> Result<Ops> {
    let home = std::path::absolute(home)
        .map_err(|e| berth_core::Error::io(format!("cannot use home {}", home.display()), e))?;
    let global = config::global_text(&home)?;
    let loaded = berth_core::config::layer(global.as_ref(), None, env.iter().cloned())?;
    let store = StoreChoice::of(&home, loaded.config.store.url.as_ref().map(|u| u.expose()))?;
    let (manager, sql) = match &store {
        StoreChoice::Files => (FsStore::open(&home)?.manager(), None),
        StoreChoice::Database { url } => {
            let sql = SqlStore::open(url.expose(), &home)?;
            (sql.manager(), Some(sql))
        }
    };
    Ok(Ops {
        manager,
        sql,
        store: Arc::new(store),
        notices: Arc::new(notices::Notices::new(&home, &loaded.config)),
        home: Arc::new(home),
        env: Arc::new(env.to_vec()),
        refill: Arc::new(Refill::InProcess),
    })
}

/// Which store a home uses: its files, or a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    Files,
    Database { url: berth_core::config::Secret },
}

impl StoreChoice {
    /// The store `url` names (`None`: the files under the home), refused when it names none.
    pub fn of(home: &Path, url: Option<&str>) -> Result<StoreChoice> {
        match url {
            None => Ok(StoreChoice::Files),
            Some(u) if berth_store_sql::Kind::of(u).is_some() => Ok(StoreChoice::Database {
                url: berth_core::config::Secret::new(u),
            }),
            Some(u) => Err(Error::rule(
                ErrorKind::Invalid,
                format!(
                    "the store url {} is neither sqlite://… nor postgres://… (set in {} or BERTH_STORE_URL); remove it to keep the files under {}",
                    berth_store_sql::redact(u),
                    config::global_path(home).display(),
                    home.display()
                ),
            )),
        }
    }

    pub fn open(&self, home: &Path) -> Result<WorkspaceManager> {
        Ok(match self {
            StoreChoice::Files => FsStore::open(home)?.manager(),
            StoreChoice::Database { url } => SqlStore::open(url.expose(), home)?.manager(),
        })
    }

    /// How messages name it: the home's files, or the URL without its password.
    pub fn describe(&self, home: &Path) -> String {
        match self {
            StoreChoice::Files => format!("the files under {}", home.display()),
            StoreChoice::Database { url } => berth_store_sql::redact(url.expose()),
        }
    }
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

    /// Where this home's records are: "the files under <home>", or the database's URL without
    /// its password.
    pub fn store_description(&self) -> String {
        self.store.describe(&self.home)
    }

    /// The store this home uses. For `berth store migrate` (berth-import), which copies it
    /// into another.
    pub fn store_choice(&self) -> &StoreChoice {
        &self.store
    }

    /// The database this home's records are in, when they are in one: berth-run keeps its
    /// runs there, so that every node on it sees every run.
    pub fn database(&self) -> Option<&SqlStore> {
        self.sql.as_ref()
    }

    /// The store itself, beneath every rule of `Ops`: for berth-import, which writes records
    /// with the ids and times they had elsewhere. A front end never calls it: a workspace
    /// removed through it would leave its worktree behind.
    pub fn manager(&self) -> &WorkspaceManager {
        &self.manager
    }
}

/// The process environment as the config layer sees it (non-UTF-8 variables are skipped: no
/// config key can use them).
pub fn environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}
