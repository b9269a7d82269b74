//! `StorageStore` on the filesystem: files under `workspaces/<id>/storage/` (and, for sessions,
//! `workspaces/<id>/sessions/<sid>/storage/`).
//!
//! Every path is resolved by `cap-std` relative to an open handle on the storage root, which
//! refuses `..`, absolute paths and symlinks that lead outside the root — checked by the
//! kernel (`openat2(RESOLVE_BENEATH)` where available) at the moment of use, so a symlink
//! swapped in between a check and an open cannot win a race. `StoragePath` already refused the
//! lexical escapes; this is the second wall.

use std::collections::HashMap;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use berth_core::storage_path::TEMP_PREFIX;
use berth_core::{EntryKind, Error, Result, StorageEntry, StoragePath, StorageScope, StorageStore};
use cap_std::fs::{Dir, File, MetadataExt as _};

use crate::{FsStore, Layout};

impl Layout {
    fn storage_root(&self, scope: &StorageScope) -> PathBuf {
        match scope {
            StorageScope::Workspace(w) => self.workspace_dir(w).join("storage"),
            StorageScope::Session { workspace, session } => self
                .workspace_dir(workspace)
                .join("sessions")
                .join(session.as_str())
                .join("storage"),
        }
    }

    /// Opens the storage root of `scope`, creating it if its owner exists but it does not.
    /// The handle is kept (`Roots`) and used again while the root's path names the same
    /// folder: the owner's record and the root are looked at every time, the folder opened once.
    fn open_storage(&self, scope: &StorageScope) -> Result<Arc<Dir>> {
        let root = self.storage_root(scope);
        let owner = root.parent().expect("storage root has a parent");
        let owner_file = match scope {
            StorageScope::Workspace(_) => owner.join("workspace.toml"),
            StorageScope::Session { .. } => owner.join("session.toml"),
        };
        if !owner_file.is_file() {
            self.roots.forget(scope);
            return Err(Error::not_found(scope.to_string()));
        }
        match root.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() || !m.is_dir() => {
                return Err(Error::Refused(format!(
                    "the storage root {} is not a plain folder; berth will not follow it",
                    root.display()
                )));
            }
            Ok(m) => {
                if let Some(dir) = self.roots.get(scope, (m.dev(), m.ino())) {
                    return Ok(dir);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir(&root)
                    .or_else(|e| match e.kind() {
                        io::ErrorKind::AlreadyExists => Ok(()),
                        _ => Err(e),
                    })
                    .map_err(|e| Error::io(format!("cannot create {}", root.display()), e))?;
            }
            Err(e) => return Err(Error::io(format!("cannot open {}", root.display()), e)),
        }
        let cannot_open = |e| Error::io(format!("cannot open {}", root.display()), e);
        let dir =
            Dir::open_ambient_dir(&root, cap_std::ambient_authority()).map_err(cannot_open)?;
        // The identity of the folder opened, which the path is compared with next time.
        let meta = dir.dir_metadata().map_err(cannot_open)?;
        Ok(self.roots.keep(scope, (meta.dev(), meta.ino()), dir))
    }
}

/// Open handles on storage roots, each with its folder's device and inode. A handle held
/// open keeps its folder's inode, so the number cannot pass to another folder while it is
/// kept: the same pair at the root's path is the same folder.
#[derive(Default)]
pub(crate) struct Roots {
    open: Mutex<OpenRoots>,
}

/// Each scope's root handle, with the device and inode of the folder it is open on.
type OpenRoots = HashMap<StorageScope, ((u64, u64), Arc<Dir>)>;

/// Handles kept at most; past it they are all let go (a server uses a handful at a time).
const MAX_ROOTS: usize = 64;

impl Roots {
    fn get(&self, scope: &StorageScope, identity: (u64, u64)) -> Option<Arc<Dir>> {
        let open = self.lock();
        let (kept, dir) = open.get(scope)?;
        (*kept == identity).then(|| dir.clone())
    }

    fn keep(&self, scope: &StorageScope, identity: (u64, u64), dir: Dir) -> Arc<Dir> {
        let dir = Arc::new(dir);
        let mut open = self.lock();
        if open.len() >= MAX_ROOTS {
            open.clear();
        }
        open.insert(scope.clone(), (identity, dir.clone()));
        dir
    }

    /// Lets go of the handle of a scope whose owner is gone, and of its folder with it.
    fn forget(&self, scope: &StorageScope) {
        self.lock().remove(scope);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OpenRoots> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Turns an I/O error on `path` into an error a person or model can act on.
fn storage_err<'a>(scope: &'a StorageScope, path: &'a str) -> impl FnOnce(io::Error) -> Error + 'a {
    move |e| match e.kind() {
        io::ErrorKind::NotFound => Error::not_found(format!("'{path}' in {scope} storage")),
        _ if berth_confined::is_escape(&e) => Error::Refused(format!(
            "'{path}' leads outside {scope} storage (through a symlink); refused"
        )),
        io::ErrorKind::IsADirectory => Error::IsFolder(format!(
            "'{path}' in {scope} storage is a folder, not a file; list it instead"
        )),
        io::ErrorKind::NotADirectory => Error::Refused(format!(
            "a parent of '{path}' in {scope} storage is a file, not a folder"
        )),
        io::ErrorKind::DirectoryNotEmpty => Error::Refused(format!(
            "'{path}' in {scope} storage is a folder that is not empty; remove it recursively"
        )),
        _ => Error::io(format!("'{path}' in {scope} storage"), e),
    }
}

/// Files up to this size are read on the calling thread; larger ones on the blocking pool.
const INLINE_READ_MAX: u64 = 256 * 1024;

/// Opens `path` for reading; its size says where to read it.
fn open_for_read(root: &Dir, scope: &StorageScope, path: &StoragePath) -> Result<(File, u64)> {
    let err = storage_err(scope, path.as_str());
    let file = root.open(path.as_path()).map_err(err)?;
    let len = file
        .metadata()
        .map_err(storage_err(scope, path.as_str()))?
        .len();
    Ok((file, len))
}

fn read_all(mut file: File, len: u64, scope: &StorageScope, path: &StoragePath) -> Result<Vec<u8>> {
    // A folder needs no check of its own: opening one succeeds, reading it fails with EISDIR,
    // which maps to a clear "is a folder" refusal, and the common case pays no extra syscall.
    // The length is known: a buffer one byte longer takes the file in one read and sees its
    // end in the next, without std's `read_to_end` asking the file for its size and position
    // again (two syscalls more). A file that grew meanwhile is still read whole.
    let mut bytes = vec![0; len as usize + 1];
    let mut filled = 0;
    loop {
        if filled == bytes.len() {
            bytes.resize(filled * 2, 0);
        }
        match file.read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(storage_err(scope, path.as_str())(e)),
        }
    }
    bytes.truncate(filled);
    Ok(bytes)
}

fn write(root: &Dir, scope: &StorageScope, path: &StoragePath, contents: &[u8]) -> Result<()> {
    berth_confined::write(root, path.as_path(), contents).map_err(storage_err(scope, path.as_str()))
}

fn list(root: &Dir, scope: &StorageScope, dir: Option<&StoragePath>) -> Result<Vec<StorageEntry>> {
    let shown = dir.map_or(".", |d| d.as_str());
    let err = || storage_err(scope, shown);
    let entries = match dir {
        None => root.entries().map_err(err())?,
        Some(d) => {
            if root
                .symlink_metadata(d.as_path())
                .is_ok_and(|m| !m.is_dir())
            {
                return Err(Error::Refused(format!(
                    "'{d}' in {scope} storage is a file, not a folder; read it instead"
                )));
            }
            root.read_dir(d.as_path()).map_err(err())?
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(err())?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(TEMP_PREFIX) {
            continue;
        }
        let meta = entry.metadata().map_err(err())?;
        let kind = EntryKind::classify(meta.file_type().is_symlink(), meta.is_dir());
        let path = match dir {
            None => name.clone(),
            Some(d) => format!("{d}/{name}"),
        };
        let size = if kind == EntryKind::File {
            meta.len()
        } else {
            0
        };
        out.push(StorageEntry {
            name,
            path,
            kind,
            size,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn remove(root: &Dir, scope: &StorageScope, path: &StoragePath, recursive: bool) -> Result<()> {
    let err = || storage_err(scope, path.as_str());
    let meta = root.symlink_metadata(path.as_path()).map_err(err())?;
    if meta.is_dir() {
        if recursive {
            root.remove_dir_all(path.as_path())
        } else {
            root.remove_dir(path.as_path())
        }
        .map_err(err())?;
    } else {
        // A symlink is removed itself; its target is never touched.
        root.remove_file(path.as_path()).map_err(err())?;
    }
    let parent = path.parent();
    let dir = match &parent {
        Some(p) => root.open_dir(p.as_path()),
        None => root.try_clone(),
    };
    dir.and_then(|d| berth_confined::sync_dir(&d))
        .map_err(err())
}

#[async_trait]
impl StorageStore for FsStore {
    async fn read(&self, scope: &StorageScope, path: &StoragePath) -> Result<Vec<u8>> {
        let (file, len) = self.inline(|l| open_for_read(&*l.open_storage(scope)?, scope, path))?;
        if len <= INLINE_READ_MAX {
            return read_all(file, len, scope, path);
        }
        let (scope, path) = (scope.clone(), path.clone());
        self.blocking(move |_| read_all(file, len, &scope, &path))
            .await
    }

    async fn write(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        contents: Vec<u8>,
    ) -> Result<()> {
        scope.check_size(path, contents.len())?;
        let (scope, path) = (scope.clone(), path.clone());
        self.blocking(move |l| write(&*l.open_storage(&scope)?, &scope, &path, &contents))
            .await
    }

    async fn write_unsynced(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        contents: Vec<u8>,
    ) -> Result<()> {
        scope.check_size(path, contents.len())?;
        let (scope, path) = (scope.clone(), path.clone());
        self.blocking(move |l| {
            berth_confined::write_unsynced(&*l.open_storage(&scope)?, path.as_path(), &contents)
                .map_err(storage_err(&scope, path.as_str()))
        })
        .await
    }

    async fn append_unsynced(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        more: Vec<u8>,
    ) -> Result<()> {
        let (scope, path) = (scope.clone(), path.clone());
        self.blocking(move |l| {
            let root = l.open_storage(&scope)?;
            let mut too_big = None;
            let appended = berth_confined::append(&root, path.as_path(), &more, |len| {
                scope.check_size(&path, len as usize).map_err(|e| {
                    too_big = Some(e);
                    io::Error::other("over the size limit")
                })
            });
            match (appended, too_big) {
                (_, Some(refused)) => Err(refused),
                (done, None) => done.map_err(storage_err(&scope, path.as_str())),
            }
        })
        .await
    }

    async fn list(
        &self,
        scope: &StorageScope,
        dir: Option<&StoragePath>,
    ) -> Result<Vec<StorageEntry>> {
        let (scope, dir) = (scope.clone(), dir.cloned());
        self.blocking(move |l| list(&*l.open_storage(&scope)?, &scope, dir.as_ref()))
            .await
    }

    async fn remove(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        recursive: bool,
    ) -> Result<()> {
        let (scope, path) = (scope.clone(), path.clone());
        self.blocking(move |l| remove(&*l.open_storage(&scope)?, &scope, &path, recursive))
            .await
    }
}
