//! Durable file primitives: folder fsync and cross-process locks; whole-file replacement is
//! berth-confined's `write_atomic` (the one way berth writes a file into a folder), re-exported
//! here for the store's records. A reader sees either the old file or the new one, never a mix,
//! and once a call returns the new one survives a crash. Reads of whole small files berth keeps
//! never wait on what is not a file ([`read_file`]).

use std::fs::{self, File};
use std::io;
use std::path::Path;

pub use berth_confined::write_atomic;

/// Makes a folder's entries (creations, renames, removals) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The bytes of the regular file at `path` (symlinks followed); `None` when there is none.
///
/// Opened without waiting, and read only when it is a regular file, else an `InvalidData`
/// error saying so: many of berth's small reads are made on an async thread, and a FIFO put
/// where a config, a record or a memory belongs would hold that thread until something wrote
/// to it (a device could feed it forever).
pub fn read_file(path: &Path) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
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

    /// [`FileLock::acquire`] that never waits, to be taken on an async thread: `None` while
    /// another holds the lock. Opened without waiting too: a FIFO where the lock file belongs
    /// is an error at once (`ENXIO`), where a plain open would wait for a reader.
    pub fn try_acquire(path: &Path) -> io::Result<Option<FileLock>> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(FileLock { file })),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
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
