//! Durable file primitives: atomic whole-file replacement, folder fsync, and cross-process
//! locks. Everything the store writes goes through here, so the crash-safety argument lives in
//! one place: a reader sees either the old file or the new one, never a mix, and once a call
//! returns the new one survives a crash.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use berth_core::storage_path::TEMP_PREFIX;

/// Replaces `path` with `bytes`: a temp file in the same folder, fsync, rename over, fsync the
/// folder (so the rename itself is durable).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent_of(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// Makes a folder's entries (creations, renames, removals) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

pub fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// An exclusive advisory lock on a lock file, held until drop. Lock files are never the data
/// they guard: data is replaced by rename, which would orphan a lock taken on the data file.
pub struct FileLock {
    file: File,
}

impl FileLock {
    pub fn acquire(path: &Path) -> io::Result<FileLock> {
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        file.lock()?;
        Ok(FileLock { file })
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// A random suffix for staging and trash names.
pub fn random_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
