//! `StorageStore` on the `files` table: a workspace's storage is its rows with `session_id`
//! '', a session's its rows with its id. Folders are rows (`is_dir`), made for a file's
//! parents as `create_dir_all` makes them, and kept until removed, so listings, "is a folder"
//! and "a parent is a file" read exactly as on disk. Paths arrive as `StoragePath`s: relative,
//! normalized, never `..`; a database has no symlinks to escape through.
//!
//! Changes to one scope are serialized by a lock on its owner's row (Postgres; SQLite's write
//! transaction holds the database), which also keeps the owner from being deleted halfway.

use async_trait::async_trait;
use berth_core::{
    EntryKind, Error, StorageEntry, StoragePath, StorageScope, StorageStore, WorkspaceId,
};

use crate::db::{Arg, Dialect, Tx};
use crate::sessions::hold_workspace;
use crate::{Failure, Result, SqlStore};

/// The owner's keys: the workspace, and the session ('' for the workspace's own storage).
fn keys(scope: &StorageScope) -> (&WorkspaceId, &str) {
    match scope {
        StorageScope::Workspace(w) => (w, ""),
        StorageScope::Session { workspace, session } => (workspace, session.as_str()),
    }
}

fn gone(scope: &StorageScope) -> Failure {
    Failure::Core(Error::not_found(scope.to_string()))
}

fn refused(msg: String) -> Failure {
    Failure::Core(Error::Refused(msg))
}

/// Locks the scope's owner for the rest of the transaction; `NotFound` if it does not exist.
async fn hold_owner(tx: &mut Tx<'_>, scope: &StorageScope) -> Result<()> {
    let found = match scope {
        StorageScope::Workspace(w) => {
            let sql = match tx.dialect() {
                Dialect::Sqlite => "SELECT 1 FROM workspaces WHERE id = $1",
                Dialect::Postgres => "SELECT 1 FROM workspaces WHERE id = $1 FOR NO KEY UPDATE",
            };
            tx.opt(sql, &[Arg::Text(w.as_str())]).await?.is_some()
        }
        StorageScope::Session { workspace, session } => {
            let sql = match tx.dialect() {
                Dialect::Sqlite => "SELECT 1 FROM sessions WHERE id = $1 AND workspace_id = $2",
                Dialect::Postgres => {
                    "SELECT 1 FROM sessions WHERE id = $1 AND workspace_id = $2 FOR UPDATE"
                }
            };
            hold_workspace(tx, workspace).await?
                && tx
                    .opt(
                        sql,
                        &[Arg::Text(session.as_str()), Arg::Text(workspace.as_str())],
                    )
                    .await?
                    .is_some()
        }
    };
    if found { Ok(()) } else { Err(gone(scope)) }
}

/// What is at `path`: `Some(true)` a folder, `Some(false)` a file, `None` nothing.
async fn kind_at(tx: &mut Tx<'_>, scope: &StorageScope, path: &str) -> Result<Option<bool>> {
    let (w, s) = keys(scope);
    let row = tx
        .opt(
            "SELECT is_dir FROM files WHERE workspace_id = $1 AND session_id = $2 AND path = $3",
            &[Arg::Text(w.as_str()), Arg::Text(s), Arg::Text(path)],
        )
        .await?;
    row.map(|r| r.int(0).map(|d| d != 0)).transpose()
}

/// Why nothing is at `path`: a parent that is a file (refused, as the kernel says
/// ENOTDIR), or it is simply not there.
async fn absent(tx: &mut Tx<'_>, scope: &StorageScope, path: &StoragePath) -> Failure {
    let mut ancestor = path.parent();
    let mut chain = Vec::new();
    while let Some(a) = ancestor {
        ancestor = a.parent();
        chain.push(a);
    }
    for a in chain.iter().rev() {
        match kind_at(tx, scope, a.as_str()).await {
            Ok(Some(true)) => continue,
            Ok(Some(false)) => {
                return refused(format!(
                    "a parent of '{path}' in {scope} storage is a file, not a folder"
                ));
            }
            Ok(None) => break,
            Err(e) => return e,
        }
    }
    Failure::Core(Error::not_found(format!("'{path}' in {scope} storage")))
}

fn parent_text(path: &StoragePath) -> String {
    path.parent()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default()
}

impl SqlStore {
    /// A read takes no lock: one statement says whether the owner, and the file, exist.
    async fn read_file(&self, scope: &StorageScope, path: &StoragePath) -> Result<Vec<u8>> {
        let (w, s) = keys(scope);
        let args = [
            Arg::Text(w.as_str()),
            Arg::Text(s),
            Arg::Text(path.as_str()),
        ];
        let row = match scope {
            StorageScope::Workspace(_) => {
                self.pool()
                    .opt(
                        concat!(
                            "SELECT f.is_dir, f.data FROM workspaces o LEFT JOIN files f",
                            " ON f.workspace_id = o.id AND f.session_id = $2 AND f.path = $3",
                            " WHERE o.id = $1"
                        ),
                        &args,
                    )
                    .await?
            }
            StorageScope::Session { .. } => {
                self.pool()
                    .opt(
                        concat!(
                            "SELECT f.is_dir, f.data FROM sessions o LEFT JOIN files f",
                            " ON f.workspace_id = o.workspace_id AND f.session_id = o.id AND f.path = $3",
                            " WHERE o.workspace_id = $1 AND o.id = $2"
                        ),
                        &args,
                    )
                    .await?
            }
        };
        let row = row.ok_or_else(|| gone(scope))?;
        match row.opt_int(0)? {
            Some(0) => Ok(row.opt_blob(1)?.unwrap_or_default()),
            Some(_) => Err(Failure::Core(Error::IsFolder(format!(
                "'{path}' in {scope} storage is a folder, not a file; list it instead"
            )))),
            None => {
                let mut tx = self.pool().begin_read().await?;
                Err(absent(&mut tx, scope, path).await)
            }
        }
    }

    async fn write_file(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        contents: &[u8],
    ) -> Result<()> {
        scope.check_size(path, contents.len())?;
        let (w, s) = keys(scope);
        let mut tx = self.pool().begin().await?;
        hold_owner(&mut tx, scope).await?;
        // The parents, top down, made where missing; a file on the way is refused.
        let mut chain = Vec::new();
        let mut ancestor = path.parent();
        while let Some(a) = ancestor {
            ancestor = a.parent();
            chain.push(a);
        }
        for dir in chain.iter().rev() {
            match kind_at(&mut tx, scope, dir.as_str()).await? {
                Some(true) => {}
                Some(false) => {
                    return Err(refused(format!(
                        "a parent of '{path}' in {scope} storage is a file, not a folder"
                    )));
                }
                None => {
                    tx.exec(
                        concat!(
                            "INSERT INTO files (workspace_id, session_id, path, parent, name, is_dir, size, data)",
                            " VALUES ($1, $2, $3, $4, $5, 1, 0, NULL)"
                        ),
                        &[
                            Arg::Text(w.as_str()),
                            Arg::Text(s),
                            Arg::Text(dir.as_str()),
                            Arg::Text(&parent_text(dir)),
                            Arg::Text(dir.file_name()),
                        ],
                    )
                    .await?;
                }
            }
        }
        if kind_at(&mut tx, scope, path.as_str()).await? == Some(true) {
            return Err(Failure::Core(Error::IsFolder(format!(
                "'{path}' in {scope} storage is a folder, not a file; list it instead"
            ))));
        }
        tx.exec(
            concat!(
                "INSERT INTO files (workspace_id, session_id, path, parent, name, is_dir, size, data)",
                " VALUES ($1, $2, $3, $4, $5, 0, $6, $7)",
                " ON CONFLICT (workspace_id, session_id, path)",
                " DO UPDATE SET size = excluded.size, data = excluded.data"
            ),
            &[
                Arg::Text(w.as_str()),
                Arg::Text(s),
                Arg::Text(path.as_str()),
                Arg::Text(&parent_text(path)),
                Arg::Text(path.file_name()),
                Arg::Int(contents.len() as i64),
                Arg::Blob(contents),
            ],
        )
        .await?;
        tx.commit().await
    }

    async fn list_files(
        &self,
        scope: &StorageScope,
        dir: Option<&StoragePath>,
    ) -> Result<Vec<StorageEntry>> {
        let (w, s) = keys(scope);
        // A read transaction (SQLite: deferred, so it waits for no writer; Postgres: read
        // committed), so the folder checked is the folder listed.
        let mut tx = self.pool().begin_read().await?;
        let owner_sql = match scope {
            StorageScope::Workspace(_) => "SELECT 1 FROM workspaces WHERE id = $1 AND $2 = ''",
            StorageScope::Session { .. } => {
                "SELECT 1 FROM sessions WHERE workspace_id = $1 AND id = $2"
            }
        };
        if tx
            .opt(owner_sql, &[Arg::Text(w.as_str()), Arg::Text(s)])
            .await?
            .is_none()
        {
            return Err(gone(scope));
        }
        if let Some(d) = dir {
            match kind_at(&mut tx, scope, d.as_str()).await? {
                Some(true) => {}
                Some(false) => {
                    return Err(refused(format!(
                        "'{d}' in {scope} storage is a file, not a folder; read it instead"
                    )));
                }
                None => return Err(absent(&mut tx, scope, d).await),
            }
        }
        let rows = tx
            .all(
                concat!(
                    "SELECT name, is_dir, size FROM files",
                    " WHERE workspace_id = $1 AND session_id = $2 AND parent = $3 ORDER BY name"
                ),
                &[
                    Arg::Text(w.as_str()),
                    Arg::Text(s),
                    Arg::Text(dir.map_or("", |d| d.as_str())),
                ],
            )
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let name = row.text(0)?;
            let is_dir = row.int(1)? != 0;
            out.push(StorageEntry {
                path: match dir {
                    None => name.clone(),
                    Some(d) => format!("{d}/{name}"),
                },
                name,
                kind: EntryKind::classify(false, is_dir),
                size: if is_dir { 0 } else { row.int(2)?.max(0) as u64 },
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn remove_file(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        recursive: bool,
    ) -> Result<()> {
        let (w, s) = keys(scope);
        let mut tx = self.pool().begin().await?;
        hold_owner(&mut tx, scope).await?;
        let args = [
            Arg::Text(w.as_str()),
            Arg::Text(s),
            Arg::Text(path.as_str()),
        ];
        match kind_at(&mut tx, scope, path.as_str()).await? {
            None => return Err(absent(&mut tx, scope, path).await),
            Some(false) => {}
            Some(true) if recursive => {
                // Everything beneath: paths that start with "<path>/", which sort between
                // "<path>/" and "<path>0" ('0' follows '/' bytewise).
                let below = format!("{path}/");
                let after = format!("{path}0");
                tx.exec(
                    concat!(
                        "DELETE FROM files WHERE workspace_id = $1 AND session_id = $2",
                        " AND path >= $3 AND path < $4"
                    ),
                    &[
                        Arg::Text(w.as_str()),
                        Arg::Text(s),
                        Arg::Text(&below),
                        Arg::Text(&after),
                    ],
                )
                .await?;
            }
            Some(true) => {
                let child = tx
                    .opt(
                        "SELECT 1 FROM files WHERE workspace_id = $1 AND session_id = $2 AND parent = $3 LIMIT 1",
                        &args,
                    )
                    .await?;
                if child.is_some() {
                    return Err(refused(format!(
                        "'{path}' in {scope} storage is a folder that is not empty; remove it recursively"
                    )));
                }
            }
        }
        tx.exec(
            "DELETE FROM files WHERE workspace_id = $1 AND session_id = $2 AND path = $3",
            &args,
        )
        .await?;
        tx.commit().await
    }
}

#[async_trait]
impl StorageStore for SqlStore {
    async fn read(&self, scope: &StorageScope, path: &StoragePath) -> berth_core::Result<Vec<u8>> {
        self.read_file(scope, path).await.map_err(|e| self.err(e))
    }

    /// A row is rewritten: durable, as every write of a database is.
    async fn append_unsynced(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        more: Vec<u8>,
    ) -> berth_core::Result<()> {
        let mut contents = StorageStore::read(self, scope, path).await?;
        contents.extend_from_slice(&more);
        self.write_file(scope, path, &contents)
            .await
            .map_err(|e| self.err(e))
    }

    async fn write(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        contents: Vec<u8>,
    ) -> berth_core::Result<()> {
        self.write_file(scope, path, &contents)
            .await
            .map_err(|e| self.err(e))
    }

    async fn list(
        &self,
        scope: &StorageScope,
        dir: Option<&StoragePath>,
    ) -> berth_core::Result<Vec<StorageEntry>> {
        self.list_files(scope, dir).await.map_err(|e| self.err(e))
    }

    async fn remove(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        recursive: bool,
    ) -> berth_core::Result<()> {
        self.remove_file(scope, path, recursive)
            .await
            .map_err(|e| self.err(e))
    }
}
