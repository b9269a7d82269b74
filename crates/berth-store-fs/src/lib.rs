//! berth-store-fs: the default embedded store, as plain files under the berth home:
//!
//! ```text
//! <home>/config.toml  bindings.toml  names/<name>  .locks/  workspaces.index
//!        session-index/<sid>
//!        workspaces/<id>/{workspace.toml, config.toml, storage/, mcp/, skills/, memory/}
//!        workspaces/<id>/sessions/<sid>/{session.toml, session.md, session.recovered.md,
//!                                        storage/}
//! ```
//!
//! Invariants this crate keeps:
//! - Every file is replaced atomically and durably (`durable::write_atomic`); a workspace
//!   folder appears whole (built as `.staging-<id>` and renamed) and disappears whole
//!   (renamed to `.trash-…` before removal).
//! - Read-modify-write of shared files happens under a cross-process lock and re-reads under
//!   it; there is no in-memory cache to go stale when another process writes. What is
//!   remembered between calls is used only while the files it came from show no change: the
//!   sorted workspace ids a listing page seeks in, while `workspaces.index` (which every create
//!   and delete appends to) and `workspaces/` show none since it was read
//!   (`workspaces::RememberedIds`), the same test the index itself is trusted by; and the
//!   records and name entries of lock-free lookups, while their files' identity, size and
//!   times do (`recent`), and storage roots' open handles while the folder is the same one
//!   (`storage`).
//! - Unparseable files are `Error::Corrupt` naming file and line, and are never rewritten.
//! - Storage paths are resolved inside the root by `cap-std`, which refuses every escape,
//!   symlinks included.
//!
//! All I/O is blocking. Lock-free reads of a record or a small file run on the caller's
//! thread (`inline`: tens of microseconds, less than a trip to another thread); everything that
//! writes, locks, fsyncs or walks many files runs on tokio's blocking pool (`blocking`), so
//! async callers are never stalled by it.
//!
//! The global `config.toml` lives in the home but is not this store's: `berth-ops` reads it
//! before choosing a store.

#![forbid(unsafe_code)]

mod bindings;
pub mod durable;
mod listing;
mod listing_json;
mod recent;
mod sessions;
mod storage;
mod workspaces;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use berth_core::{Error, Result, SessionId, WorkspaceId, WorkspaceManager};

/// What the store keeps in a workspace's folder, beside what a plain workspace's agent puts
/// there (the folder is its working folder too): its record, its config layer, its lock, and
/// the folders every workspace has. The sandbox keeps an agent's hands off them.
pub const WORKSPACE_ENTRIES: [&str; 8] = [
    "workspace.toml",
    "config.toml",
    ".lock",
    "storage",
    "sessions",
    "mcp",
    "skills",
    "memory",
];

/// The platform's default berth home: `~/.local/share/berth` on Linux,
/// `~/Library/Application Support/berth` on macOS, `%LOCALAPPDATA%\berth` on Windows.
pub fn default_home() -> Option<PathBuf> {
    #[cfg(windows)]
    let base = dirs::data_local_dir();
    #[cfg(not(windows))]
    let base = dirs::data_dir();
    base.map(|d| d.join("berth"))
}

/// The filesystem store. Cheap to clone; implements all three store traits.
#[derive(Clone)]
pub struct FsStore {
    layout: Arc<Layout>,
}

/// Where things live under the home. One place, so no path is built ad hoc.
pub(crate) struct Layout {
    home: PathBuf,
    /// The workspace ids of the last listing page, and what they were read under.
    ids: std::sync::Mutex<Option<workspaces::RememberedIds>>,
    /// Records and name entries read by lock-free lookups, kept while their files show no
    /// change (`recent`).
    kept_records: recent::Recent<WorkspaceId, berth_core::Workspace>,
    kept_names: recent::Recent<berth_core::WorkspaceName, WorkspaceId>,
    /// Storage roots' open handles, kept while the folder is the same one (`storage`).
    roots: storage::Roots,
    /// The workspace that owns each session looked up (`sessions`): the session index's
    /// answer, which never changes while the session lives.
    owners: std::sync::Mutex<std::collections::HashMap<SessionId, WorkspaceId>>,
}

impl Layout {
    fn workspaces(&self) -> PathBuf {
        self.home.join("workspaces")
    }
    fn workspace_dir(&self, id: &WorkspaceId) -> PathBuf {
        self.workspaces().join(id.as_str())
    }
    fn workspace_file(&self, id: &WorkspaceId) -> PathBuf {
        self.workspace_dir(id).join("workspace.toml")
    }
    fn names(&self) -> PathBuf {
        self.home.join("names")
    }
    fn bindings_file(&self) -> PathBuf {
        self.home.join("bindings.toml")
    }
    fn lock(&self, name: &str) -> PathBuf {
        self.home.join(".locks").join(name)
    }
}

impl FsStore {
    /// Opens (creating if needed) the home at `home`.
    pub fn open(home: impl AsRef<Path>) -> Result<FsStore> {
        let home = std::path::absolute(home.as_ref())
            .map_err(|e| Error::io(format!("cannot use home {}", home.as_ref().display()), e))?;
        let layout = Layout {
            home,
            ids: Default::default(),
            kept_records: Default::default(),
            kept_names: Default::default(),
            roots: Default::default(),
            owners: Default::default(),
        };
        for dir in [
            layout.workspaces(),
            layout.names(),
            layout.session_index(),
            layout.home.join(".locks"),
        ] {
            // Made once; every later open (each CLI command) only looks: one `statx` where
            // `create_dir_all` makes a `mkdir` that fails and then looks.
            if dir.is_dir() {
                continue;
            }
            std::fs::create_dir_all(&dir)
                .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        }
        Ok(FsStore {
            layout: Arc::new(layout),
        })
    }

    /// Why the listing index (`workspaces.index`) would be rebuilt at the next listing, or
    /// `None` when it can be trusted; nothing is rebuilt or changed. For `berth doctor`.
    pub fn index_problem(&self) -> Result<Option<String>> {
        Ok(self.layout.read_index()?.err())
    }

    pub fn home(&self) -> &Path {
        &self.layout.home
    }

    /// A manager with this store in all three slots.
    pub fn manager(&self) -> WorkspaceManager {
        let s = Arc::new(self.clone());
        WorkspaceManager::new(s.clone(), s.clone(), s.clone(), s)
    }

    /// Runs a short, lock-free read on the calling thread: a record or a small file comes
    /// back in tens of microseconds, while a trip through the blocking pool costs two thread
    /// switches (about 0.1 ms on a 2-core machine), most of an MCP storage read. Whatever
    /// writes, locks, fsyncs or walks many files goes through [`FsStore::blocking`].
    fn inline<T>(&self, f: impl FnOnce(&Layout) -> Result<T>) -> Result<T> {
        f(&self.layout)
    }

    /// Runs blocking I/O off the async executor.
    async fn blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Layout) -> Result<T> + Send + 'static,
    {
        let layout = self.layout.clone();
        tokio::task::spawn_blocking(move || f(&layout))
            .await
            .map_err(task_failed)?
    }
}

/// A store task on the blocking pool that panicked or was cancelled.
pub(crate) fn task_failed(e: tokio::task::JoinError) -> Error {
    Error::io("store task failed", io::Error::other(e.to_string()))
}

/// Builds the I/O error for an operation on `path`.
pub(crate) fn io_err<'a>(action: &'a str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |e| Error::io(format!("cannot {action} {}", path.display()), e)
}

/// Reads a file berth owns; `Ok(None)` only when it does not exist.
///
/// Through [`durable::read_file`]: a FIFO or a device where the file belongs is corrupt, and
/// the read, often made on an async thread, never waits on it.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>> {
    match durable::read_file(path) {
        Ok(Some(bytes)) => utf8(path, bytes).map(Some),
        Ok(None) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(Error::Corrupt {
            file: path.to_owned(),
            line: None,
            reason: e.to_string(),
        }),
        Err(e) => Err(io_err("read", path)(e)),
    }
}

/// Text of a file berth owns; invalid UTF-8 is corruption, not an I/O error.
pub(crate) fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| Error::Corrupt {
        file: path.to_owned(),
        line: None,
        reason: format!("not valid UTF-8 (byte {})", e.utf8_error().valid_up_to()),
    })
}

/// The entries of `dir` whose names parse as `T` (a validated id), sorted. Everything else
/// (staging and trash folders, temp files, strays) fails the id rule and is skipped. A missing
/// folder has no entries.
pub(crate) fn ids_in<T: Ord>(dir: &Path, parse: impl Fn(&str) -> Option<T>) -> Result<Vec<T>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("list", dir)(e)),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err("list", dir))?;
        if let Some(id) = entry.file_name().to_str().and_then(&parse) {
            ids.push(id);
        }
    }
    ids.sort();
    Ok(ids)
}

/// Parses TOML that berth owns, turning a failure into `Corrupt` with the line.
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T> {
    toml::from_str(text).map_err(|e| Error::Corrupt {
        file: path.to_owned(),
        line: e
            .span()
            .map(|s| berth_core::error::line_of_offset(text, s.start)),
        reason: e.message().trim().to_owned(),
    })
}

#[cfg(test)]
mod conformance {
    fn fresh() -> (berth_core::conformance::Backend, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(super::FsStore::open(dir.path()).unwrap());
        let backend = berth_core::conformance::Backend {
            workspaces: store.clone(),
            bindings: store.clone(),
            storage: store.clone(),
            sessions: store,
        };
        (backend, dir)
    }
    berth_core::conformance_tests!(fresh());
}
