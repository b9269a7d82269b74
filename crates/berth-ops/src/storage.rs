//! Storage of either scope (a workspace's or a session's), the workspace context, and reading a
//! worktree. Paths arrive as text and are validated here, once, before any store sees them.

use berth_core::{StorageEntry, StoragePath, StorageScope, Workspace};

use crate::Ops;
use crate::error::{Result, blocking};
use crate::worktree;
pub use crate::worktree::Node;

/// Whose storage: a workspace's or a session's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Workspace,
    Session,
}

/// A resolved storage scope. For a workspace it keeps the record it was resolved from, so the
/// use that a read records costs no second load.
#[derive(Debug, Clone)]
pub struct StorageRef {
    scope: StorageScope,
    workspace: Option<Workspace>,
}

impl StorageRef {
    pub fn scope(&self) -> &StorageScope {
        &self.scope
    }
}

/// The workspace context's path in its storage.
pub fn context_path() -> StoragePath {
    StoragePath::new("context.md").expect("a valid storage path")
}

/// The folder of a storage where berth keeps its own state (a session's model, an answer kept
/// aside while it streams), which berth obeys when it reads it back.
const BERTH_STATE: &str = ".berth";

/// Refuses a change under [`BERTH_STATE`] from outside berth: an agent's storage tool, MCP or
/// the CLI. A file planted there would be obeyed (a model to call, an answer recovered into
/// the transcript as the model's); berth changes it through its own operations (`/model`).
fn changeable(path: &StoragePath) -> Result<()> {
    if path.as_path().components().next()
        == Some(std::path::Component::Normal(BERTH_STATE.as_ref()))
    {
        return Err(crate::Error::refused(format!(
            "'{path}' is in {BERTH_STATE}/, where berth keeps its own state; it cannot be changed from outside berth (a session's model changes with /model)"
        )));
    }
    Ok(())
}

/// A folder path where `None` or `""` means the root.
fn folder(path: Option<&str>) -> Result<Option<StoragePath>> {
    Ok(path
        .filter(|p| !p.is_empty())
        .map(StoragePath::new)
        .transpose()?)
}

impl Ops {
    /// The storage of the workspace or session `identifier` names.
    pub async fn storage(&self, owner: Owner, identifier: &str) -> Result<StorageRef> {
        Ok(match owner {
            Owner::Workspace => {
                let ws = self.manager.resolve(identifier).await?;
                StorageRef {
                    scope: StorageScope::Workspace(ws.id.clone()),
                    workspace: Some(ws),
                }
            }
            Owner::Session => {
                let s = self.manager.resolve_session(identifier).await?;
                StorageRef {
                    scope: StorageScope::Session {
                        workspace: s.workspace_id,
                        session: s.id,
                    },
                    workspace: None,
                }
            }
        })
    }

    /// A file's bytes; `IsFolder` when the path names a folder.
    pub async fn read_file(&self, at: &StorageRef, path: &str) -> Result<Vec<u8>> {
        let path = StoragePath::new(path)?;
        self.read_path(at, &path).await
    }

    async fn read_path(&self, at: &StorageRef, path: &StoragePath) -> Result<Vec<u8>> {
        match &at.workspace {
            // The hot path of agents' notes: the record just resolved also records the use.
            Some(ws) => self.manager.read_storage_of(ws, &at.scope, path).await,
            None => self.manager.read_storage(&at.scope, path).await,
        }
        .map_err(|e| named(e, at))
    }

    /// Replaces a file whole and atomically, creating its folders; returns the validated path.
    pub async fn write_file(
        &self,
        at: &StorageRef,
        path: &str,
        contents: Vec<u8>,
    ) -> Result<StoragePath> {
        let path = StoragePath::new(path)?;
        changeable(&path)?;
        self.manager
            .write_storage(&at.scope, &path, contents)
            .await
            .map_err(|e| named(e, at))?;
        Ok(path)
    }

    /// The entries of a folder (`None` or `""`: the root), sorted by name.
    pub async fn list_files(
        &self,
        at: &StorageRef,
        dir: Option<&str>,
    ) -> Result<Vec<StorageEntry>> {
        let dir = folder(dir)?;
        self.manager
            .list_storage(&at.scope, dir.as_ref())
            .await
            .map_err(|e| named(e, at))
    }

    /// Removes a file or an empty folder; a folder with contents only with `recursive`.
    pub async fn remove_file(
        &self,
        at: &StorageRef,
        path: &str,
        recursive: bool,
    ) -> Result<StoragePath> {
        let path = StoragePath::new(path)?;
        changeable(&path)?;
        self.manager
            .remove_storage(&at.scope, &path, recursive)
            .await
            .map_err(|e| named(e, at))?;
        Ok(path)
    }

    /// A file or a folder, whichever the path names (`None` or `""`: the root folder). A path
    /// is tried as a file first, the common case, and listed when it is a folder.
    pub async fn read_node(
        &self,
        at: &StorageRef,
        path: Option<&str>,
    ) -> Result<(Option<StoragePath>, Node)> {
        let path = folder(path)?;
        let node = match &path {
            None => Node::Folder(self.manager.list_storage(&at.scope, None).await?),
            Some(p) => match self.read_path(at, p).await {
                Ok(bytes) => Node::File(bytes),
                Err(e) if e.kind() == crate::ErrorKind::IsFolder => {
                    Node::Folder(self.manager.list_storage(&at.scope, Some(p)).await?)
                }
                Err(e) => return Err(e),
            },
        };
        Ok((path, node))
    }

    /// The workspace's `context.md`, or `None` when none was written. Looking is not using:
    /// the workspace's last use stays as it was.
    pub async fn context(&self, ws: &Workspace) -> Result<Option<String>> {
        let scope = StorageScope::Workspace(ws.id.clone());
        match self.manager.storage().read(&scope, &context_path()).await {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// A file or folder of a git workspace's worktree, beneath a confined handle (see
    /// [`worktree`]); files over `max_bytes` are refused before they are read.
    pub async fn read_worktree(
        &self,
        ws: &Workspace,
        path: Option<&str>,
        max_bytes: u64,
    ) -> Result<(Option<StoragePath>, Node)> {
        let Some(git) = &ws.git else {
            return Err(crate::Error::invalid(format!(
                "workspace {} is a plain workspace: it has no worktree to browse; its files are in its storage",
                ws.label()
            )));
        };
        let path = folder(path)?;
        let root = git.worktree.clone();
        let shown = path.clone();
        let node = blocking(move || worktree::read(&root, shown.as_ref(), max_bytes)).await?;
        Ok((path, node))
    }
}

/// A store's error about the storage `at`, its workspace named as people name it (`name
/// (id)`), not by its id alone: the stores know scopes by id only.
fn named(e: berth_core::Error, at: &StorageRef) -> crate::Error {
    match &at.workspace {
        Some(ws) if ws.name.is_some() => {
            let by_id = format!("workspace '{}'", ws.id);
            let message = e.to_string();
            if !message.contains(&by_id) {
                return e.into();
            }
            crate::Error::rule(
                e.kind(),
                message.replace(&by_id, &format!("workspace {}", ws.label())),
            )
        }
        _ => e.into(),
    }
}
