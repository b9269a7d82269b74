//! berth-confined: a folder opened so that no path can leave it, and the one way berth writes
//! a file into a folder.
//!
//! [`open`] gives a `cap-std` handle on a folder. Every path is resolved beneath it by
//! the kernel (`openat2(RESOLVE_BENEATH)` where there is one), at the moment of use: `..`, an
//! absolute path, or a symlink that leads out is refused even if it is swapped in between a
//! check and an open. Callers check paths lexically first (`StoragePath`); this is the second
//! wall. The filesystem store's storage, the agent's file tools, the worktree reader and the
//! importers all open their folders through it, and every whole-file write of berth (records
//! included, through [`write_atomic`]) goes through [`write`]:
//!
//! - **Atomic**: a temp file (named with berth's reserved prefix, which no `StoragePath` can
//!   name) in the same folder, renamed over the target: a reader sees the old file or the new
//!   one, never a mix.
//! - **Durable**: the temp file is fsynced before the rename and the folder after it; folders
//!   the write had to create are fsynced in the folders above them, so once a write returns it
//!   survives a crash.
//! - **Mode kept**: a file that existed keeps its permissions (a script stays executable).
//!
//! Scratch that must outlive the process but not the machine (an answer kept aside while it
//! streams) is the one exception: [`write_unsynced`] truncates and writes it in place, and
//! [`append`] adds to it, neither synced; neither follows a symlink out of the folder, and
//! `write_unsynced` follows none at all.
//!
//! Reads are size-limited ([`read`]): the size is checked before the read, and a
//! file that grows meanwhile is cut at the limit and refused, never read whole.

#![forbid(unsafe_code)]

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use berth_core::StoragePath;
use berth_core::storage_path::TEMP_PREFIX;
pub use cap_std::fs::Dir;
use cap_std::fs::{MetadataExt, OpenOptions, OpenOptionsExt, Permissions};

/// Why a size-limited read failed.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    /// The file is larger than the limit (`grew`: it was not when the read began).
    TooLarge {
        size: u64,
        limit: u64,
        grew: bool,
    },
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> ReadError {
        ReadError::Io(e)
    }
}

/// Why a path a client named cannot be used beneath a folder (see [`relative`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unconfined {
    /// It leads outside the folder: an absolute path elsewhere, or through `..`.
    Outside,
    /// It names the folder itself where a file is needed.
    Root,
    /// It is not a usable path; the rule it breaks.
    Unusable(String),
    /// It is inside `.git`, which is git's.
    Git(StoragePath),
}

/// A path a client named (an agent, an editor), made relative to `root` and checked
/// lexically: relative, or absolute inside `root` (also through a symlinked ancestor of
/// `root`, as macOS's `/tmp` is); no `..`, nothing in `.git`. `None` is `root` itself (empty,
/// `.`, or `root` spelled out), allowed only where `root_ok`. The open beneath the handle still
/// decides what exists on disk, symlinks included.
pub fn relative(root: &Path, raw: &str, root_ok: bool) -> Result<Option<StoragePath>, Unconfined> {
    let rel: std::borrow::Cow<str> = if raw.starts_with('/') {
        let absolute = Path::new(raw);
        let rest = match absolute.strip_prefix(root) {
            Ok(rest) => rest.to_path_buf(),
            Err(_) => std::fs::canonicalize(root)
                .ok()
                .and_then(|real| absolute.strip_prefix(real).ok().map(Path::to_path_buf))
                .ok_or(Unconfined::Outside)?,
        };
        std::borrow::Cow::Owned(rest.to_string_lossy().into_owned())
    } else {
        std::borrow::Cow::Borrowed(raw)
    };
    if rel.split('/').all(|c| c.is_empty() || c == ".") {
        return if root_ok {
            Ok(None)
        } else {
            Err(Unconfined::Root)
        };
    }
    let path = StoragePath::new(&rel).map_err(|e| {
        if rel.split('/').any(|c| c == "..") {
            Unconfined::Outside
        } else {
            Unconfined::Unusable(e.rule)
        }
    })?;
    if path.as_str().split('/').any(|c| c == ".git") {
        return Err(Unconfined::Git(path));
    }
    Ok(Some(path))
}

/// Opens the folder at `path` (an ordinary path of this machine: the root itself is the
/// caller's to trust) as a handle no path beneath it can leave.
pub fn open(path: &Path) -> io::Result<Dir> {
    Dir::open_ambient_dir(path, cap_std::ambient_authority())
}

/// Replaces `path` (relative, beneath `root`) with `contents`: atomically, durably, keeping an
/// existing file's mode, creating missing folders on the way (durably too). A parent that is
/// a file is `NotADirectory`; a target that is a folder, `IsADirectory`.
pub fn write(root: &Dir, path: &Path, contents: &[u8]) -> io::Result<()> {
    let (dir, name) = place_for_write(root, path)?;
    write_in(&dir, name, contents, NEW_FILE_MODE)
}

/// Replaces the contents of `path` (beneath `root`) in place: the file (made if missing,
/// with the folders on the way) is cut to nothing and written with one `write(2)`; no
/// temporary file and no sync. For scratch kept as it goes (an answer streaming), which must
/// outlive the process, not the machine: a lost machine may find it empty or cut short,
/// never another file's contents. A symlink at `path` is refused, not followed (as [`write`]
/// replaces one rather than writing through it); so is anything but a plain file, without
/// waiting on it (a FIFO), and a file with another name (a hard link).
pub fn write_unsynced(root: &Dir, path: &Path, contents: &[u8]) -> io::Result<()> {
    let (dir, name) = place_for_write(root, path)?;
    let mut file = dir.open_with(
        name,
        OpenOptions::new()
            .write(true)
            .create(true)
            .mode(NEW_FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK),
    )?;
    // A hard link is the same file under another name, perhaps one berth never meant to
    // write: only a file with this one name is rewritten in place.
    let meta = file.metadata()?;
    if !meta.is_file() || meta.nlink() > 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a plain file with one name",
        ));
    }
    file.set_len(0)?;
    file.write_all(contents)
}

/// Appends `bytes` to the file `path` beneath `root`, which must exist (made by [`write`]):
/// one `write(2)` with `O_APPEND`, not synced, so no new file and no wait for the disk. For
/// scratch kept as it goes (an answer streaming), which must outlive the process, not the
/// machine. Calls `check` with the length the file would have first; an error from it is
/// returned and nothing is written.
pub fn append(
    root: &Dir,
    path: &Path,
    bytes: &[u8],
    check: impl FnOnce(u64) -> io::Result<()>,
) -> io::Result<()> {
    let mut file = root.open_with(path, OpenOptions::new().append(true))?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::from(io::ErrorKind::IsADirectory));
    }
    check(meta.len() + bytes.len() as u64)?;
    file.write_all(bytes)
}

/// The mode of a file [`write`] creates (less the umask), as `open(2)` gives by default.
const NEW_FILE_MODE: u32 = 0o666;

/// The mode of a record [`write_atomic`] creates: berth's own files may hold secrets (API
/// keys in `config.toml`, device ids), so only their owner reads them.
const RECORD_MODE: u32 = 0o600;

/// Reads `path` (beneath `root`) whole when it is at most `limit` bytes long; a folder is
/// `IsADirectory` (found with the one open a file needs).
pub fn read(root: &Dir, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let file = root.open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(ReadError::Io(io::ErrorKind::IsADirectory.into()));
    }
    let size = meta.len();
    if size > limit {
        return Err(ReadError::TooLarge {
            size,
            limit,
            grew: false,
        });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.into_std().take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            size: bytes.len() as u64,
            limit,
            grew: true,
        });
    }
    Ok(bytes)
}

/// The folder that holds `path` (beneath `root`), made if missing ([`folder_for_write`]),
/// and the file's name in it.
fn place_for_write<'a>(root: &Dir, path: &'a Path) -> io::Result<(Dir, &'a OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let dir = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        None => root.try_clone()?,
        Some(parent) => folder_for_write(root, parent)?,
    };
    Ok((dir, name))
}

/// The folder `parent` (beneath `root`) opened for a write, made with its ancestors if
/// missing.
fn folder_for_write(root: &Dir, parent: &Path) -> io::Result<Dir> {
    match root.open_dir(parent) {
        Ok(dir) => return Ok(dir),
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        Err(_) => {}
    }
    root.create_dir_all(parent).map_err(|e| {
        if e.kind() != io::ErrorKind::AlreadyExists {
            return e;
        }
        // Something on the way exists and is not a folder that may be entered: a file, or a
        // symlink that leads out. Its own metadata says which.
        match root.metadata(parent) {
            Err(e) => e,
            Ok(m) if m.is_dir() => e,
            Ok(_) => io::Error::from(io::ErrorKind::NotADirectory),
        }
    })?;
    // Each new folder's entry lives in the folder above it.
    let mut at = Some(parent);
    while let Some(p) = at {
        let above = p.parent().filter(|a| !a.as_os_str().is_empty());
        match above {
            Some(a) => sync_dir(&root.open_dir(a)?)?,
            None => sync_dir(root)?,
        }
        at = above;
    }
    root.open_dir(parent)
}

/// Replaces the file at `path` (an ordinary path: berth's own records under its home) with
/// `bytes`, as [`write`] does, within the folder that holds it (which must exist); a new
/// record is readable by its owner only.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    write_in(&open(dir)?, name, bytes, RECORD_MODE)
}

/// Whether `e` is cap-std's refusal of a path that leads outside the folder (through a
/// symlink, or an absolute link): a permission error that says "outside".
pub fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.to_string().contains("outside")
}

/// fsync of a folder held as a `Dir`. `Dir` handles may be `O_PATH`, which cannot be synced, so
/// the folder is reopened for reading through the same handle.
pub fn sync_dir(dir: &Dir) -> io::Result<()> {
    dir.open_with(".", OpenOptions::new().read(true))?
        .sync_all()
}

/// Atomic, durable replace of `name` inside `dir`, keeping an existing file's mode; a new file
/// gets `mode` (less the umask).
fn write_in(dir: &Dir, name: &OsStr, contents: &[u8], mode: u32) -> io::Result<()> {
    let keep: Option<Permissions> = dir
        .metadata(name)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.permissions());
    let tmp = temp_name();
    let mut file = dir.open_with(
        &tmp,
        OpenOptions::new().write(true).create_new(true).mode(mode),
    )?;
    let mut done = file.write_all(contents);
    if let Some(perms) = keep {
        done = done.and_then(|()| file.set_permissions(perms));
    }
    let done = done.and_then(|()| file.sync_all());
    drop(file);
    // Renaming the temp file over a folder fails with EISDIR: a clear refusal, no extra check.
    let done = done.and_then(|()| dir.rename(&tmp, dir, name));
    if done.is_err() {
        let _ = dir.remove_file(&tmp);
    }
    done?;
    sync_dir(dir)
}

/// A name for a temp file no other writer picks: berth's reserved prefix (which no
/// `StoragePath` can name, and listings skip), this process, the time and a counter.
fn temp_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{TEMP_PREFIX}{}-{nanos}-{n}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn folder() -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().unwrap();
        let c = open(tmp.path()).unwrap();
        (tmp, c)
    }

    #[test]
    fn writes_make_folders_replace_whole_and_leave_no_temp_files() {
        let (tmp, c) = folder();
        write(&c, Path::new("a/b/c.txt"), b"one").unwrap();
        write(&c, Path::new("a/b/c.txt"), b"two").unwrap();
        assert_eq!(std::fs::read(tmp.path().join("a/b/c.txt")).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(tmp.path().join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["c.txt"]);
    }

    /// In place: the same file (inode) rewritten whole, shorter or longer, folders made on
    /// the way; a symlink, a hard link or a FIFO where the file belongs is refused at once,
    /// and what a link names (inside the folder or out) is left as it was.
    #[test]
    fn an_unsynced_write_replaces_in_place_and_never_through_a_link() {
        use std::os::unix::fs::MetadataExt;
        let (tmp, c) = folder();
        write_unsynced(&c, Path::new(".berth/answer"), b"a longer first text").unwrap();
        let path = tmp.path().join(".berth/answer");
        let inode = std::fs::metadata(&path).unwrap().ino();
        write_unsynced(&c, Path::new(".berth/answer"), b"short").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"short");
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "keep").unwrap();
        std::fs::write(tmp.path().join("notes.md"), "mine").unwrap();
        for (name, target) in [("out", secret.clone()), ("in", "notes.md".into())] {
            std::os::unix::fs::symlink(&target, tmp.path().join(name)).unwrap();
            assert!(write_unsynced(&c, Path::new(name), b"over").is_err());
        }
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("notes.md")).unwrap(),
            "mine"
        );
        std::fs::hard_link(tmp.path().join("notes.md"), tmp.path().join("linked")).unwrap();
        assert!(write_unsynced(&c, Path::new("linked"), b"over").is_err());
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("notes.md")).unwrap(),
            "mine"
        );
        let made = std::process::Command::new("mkfifo")
            .arg(tmp.path().join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        assert!(write_unsynced(&c, Path::new("pipe"), b"no").is_err());
    }

    #[test]
    fn a_file_keeps_its_mode() {
        let (tmp, c) = folder();
        let path = tmp.path().join("run.sh");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
        write(&c, Path::new("run.sh"), b"new").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o751);
    }

    #[test]
    fn no_path_leaves_the_folder() {
        let (tmp, c) = folder();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("out")).unwrap();
        for path in ["../x", "out/x", "/etc/x"] {
            let e = write(&c, Path::new(path), b"no").unwrap_err();
            assert!(
                is_escape(&e) || e.kind() == io::ErrorKind::PermissionDenied,
                "{path}: {e}"
            );
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        assert!(matches!(
            read(&c, Path::new("out/secret"), 10),
            Err(ReadError::Io(e)) if is_escape(&e)
        ));
    }

    #[test]
    fn a_parent_that_is_a_file_and_a_target_that_is_a_folder_are_refused() {
        let (tmp, c) = folder();
        std::fs::write(tmp.path().join("f"), "x").unwrap();
        let e = write(&c, Path::new("f/g"), b"no").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotADirectory, "{e}");
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        let e = write(&c, Path::new("d"), b"no").unwrap_err();
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::IsADirectory | io::ErrorKind::DirectoryNotEmpty
            ),
            "{e}"
        );
    }

    #[test]
    fn reads_stop_at_the_limit() {
        let (tmp, c) = folder();
        std::fs::write(tmp.path().join("big"), vec![b'x'; 11]).unwrap();
        assert!(matches!(
            read(&c, Path::new("big"), 10),
            Err(ReadError::TooLarge {
                size: 11,
                limit: 10,
                grew: false
            })
        ));
        assert_eq!(read(&c, Path::new("big"), 11).unwrap().len(), 11);
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        assert!(matches!(
            read(&c, Path::new("d"), 11),
            Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::IsADirectory
        ));
    }

    #[test]
    fn write_atomic_replaces_a_record_by_its_path() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("record.toml");
        write_atomic(&path, b"a = 1\n").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "a new record is its owner's alone");
        write_atomic(&path, b"a = 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a = 2\n");
    }
}
