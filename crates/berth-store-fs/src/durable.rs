//! Durable file primitives: folder fsync and cross-process locks; whole-file replacement is
//! berth-confined's `write_atomic` (the one way berth writes a file into a folder), re-exported
//! here for the store's records. A reader sees either the old file or the new one, never a mix,
//! and once a call returns the new one survives a crash.

use std::fs::{self, File};
use std::io;
use std::path::Path;

pub use berth_confined::write_atomic;

/// Makes a folder's entries (creations, renames, removals) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
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
