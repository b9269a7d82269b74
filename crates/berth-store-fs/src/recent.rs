//! Records read recently, kept while their files show no change: a workspace's record by id
//! and a name's index entry, each with the stamp of the file it was read from. A lock-free
//! lookup (`load`, `load_by_name`: every MCP storage call resolves its workspace through them)
//! then costs one `stat` per file instead of an open, two reads, a close and a TOML parse.
//! Reads under a lock, before a rewrite, never use it: they read the file.
//!
//! A stamp is the file's device, inode, size, and modification and change times. berth
//! replaces these files whole (written beside them and renamed), so a rewrite is a new inode
//! and a new change time, and an edit by hand moves the times. As git does with its index's
//! "racily clean" entries, contents are kept only when the file's change time is older than
//! [`SETTLED`] when it is read: a later change then has a later change time, even on a
//! filesystem whose clock ticks coarsely, and an inode number reused by a later file cannot
//! pass for the kept one.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::hash::Hash;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use berth_core::Result;

use crate::{io_err, utf8};

/// How old a file's change time must be for its contents to be kept: many times the
/// kernel's timestamp granularity (one clock tick, 1–10 ms).
const SETTLED: Duration = Duration::from_millis(100);

/// The same for a change time in whole seconds (see [`Stamp::settled`]).
const SETTLED_COARSE: Duration = Duration::from_secs(2);

/// Entries kept per kind; past it the map starts over (a server uses a handful at a time).
const MAX_KEPT: usize = 256;

/// What a file's contents are kept under: a different file, or a change to it, moves it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Stamp {
    fn of(meta: &Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether the file last changed long enough ago that a change now would show.
    fn settled(&self) -> bool {
        let (secs, nanos) = self.changed;
        let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) else {
            return false;
        };
        let changed = UNIX_EPOCH + Duration::new(secs, nanos);
        // A time in whole seconds may come from a filesystem that keeps no finer ones (ext3,
        // FAT, some NFS): a change within the same second would keep the stamp, so the file
        // must be older than that second's end.
        let settled = if nanos == 0 { SETTLED_COARSE } else { SETTLED };
        SystemTime::now()
            .duration_since(changed)
            .is_ok_and(|age| age >= settled)
    }
}

/// Values parsed from files, each kept with the stamp of the file it came from.
pub(crate) struct Recent<K, V> {
    kept: Mutex<HashMap<K, (Stamp, V)>>,
}

impl<K, V> Default for Recent<K, V> {
    fn default() -> Self {
        Recent {
            kept: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone, V: Clone> Recent<K, V> {
    /// The value of the file at `path` under `key`: the one kept, when the file shows no
    /// change since it was read; else `parse` of its text, read now. `Ok(None)`: no file.
    pub(crate) fn read(
        &self,
        key: &K,
        path: &Path,
        parse: impl FnOnce(&str) -> Result<V>,
    ) -> Result<Option<V>> {
        let seen = match std::fs::metadata(path) {
            Ok(meta) => Stamp::of(&meta),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("read", path)(e)),
        };
        if let Some((stamp, value)) = self.lock().get(key)
            && *stamp == seen
        {
            return Ok(Some(value.clone()));
        }
        // The stamp kept is the opened file's own, so it always describes the bytes read.
        let (stamp, bytes) = match read_stamped(path) {
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("read", path)(e)),
        };
        let value = parse(&utf8(path, bytes)?)?;
        let mut kept = self.lock();
        if stamp.settled() {
            if kept.len() >= MAX_KEPT {
                kept.clear();
            }
            kept.insert(key.clone(), (stamp, value.clone()));
        } else {
            kept.remove(key);
        }
        Ok(Some(value))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, (Stamp, V)>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A file's bytes and the stamp of the file they were read from.
fn read_stamped(path: &Path) -> io::Result<(Stamp, Vec<u8>)> {
    let mut file = File::open(path)?;
    let meta = file.metadata()?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes)?;
    Ok((Stamp::of(&meta), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<String> {
        Ok(text.to_owned())
    }

    /// Waits until a file just written counts as settled, as one written long ago does.
    fn age() {
        std::thread::sleep(SETTLED + Duration::from_millis(20));
    }

    #[test]
    fn a_settled_file_is_read_once_and_a_replacement_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        std::fs::write(&path, "one").unwrap();
        age();
        let recent: Recent<&str, String> = Recent::default();
        assert_eq!(
            recent.read(&"k", &path, parsed).unwrap().as_deref(),
            Some("one")
        );
        // Kept: a parse that would fail is not called while the file shows no change.
        let kept = recent.read(&"k", &path, |_| panic!("read again")).unwrap();
        assert_eq!(kept.as_deref(), Some("one"));
        // Replaced as berth replaces files: written beside and renamed over, same length.
        let beside = dir.path().join("record.new");
        std::fs::write(&beside, "two").unwrap();
        std::fs::rename(&beside, &path).unwrap();
        assert_eq!(
            recent.read(&"k", &path, parsed).unwrap().as_deref(),
            Some("two")
        );
        std::fs::remove_file(&path).unwrap();
        assert_eq!(recent.read(&"k", &path, parsed).unwrap(), None);
    }

    #[test]
    fn a_file_changed_within_the_settling_time_is_read_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        std::fs::write(&path, "one").unwrap();
        let recent: Recent<&str, String> = Recent::default();
        let reads = std::cell::Cell::new(0);
        let counted = |text: &str| {
            reads.set(reads.get() + 1);
            parsed(text)
        };
        recent.read(&"k", &path, counted).unwrap();
        recent.read(&"k", &path, counted).unwrap();
        assert_eq!(reads.get(), 2, "a file just written is not kept");
    }

    #[test]
    fn an_edit_in_place_that_keeps_the_length_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("record");
        std::fs::write(&path, "one").unwrap();
        age();
        let recent: Recent<&str, String> = Recent::default();
        recent.read(&"k", &path, parsed).unwrap();
        // The same inode and length, written by hand: the times move.
        std::fs::write(&path, "uno").unwrap();
        assert_eq!(
            recent.read(&"k", &path, parsed).unwrap().as_deref(),
            Some("uno")
        );
    }
}
