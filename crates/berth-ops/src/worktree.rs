//! Read-only access to a workspace's worktree: the MCP `files` resource, the project's check
//! commands, and (to come) the agent's file tools.
//!
//! Every path is resolved by `cap-std` beneath an open handle on the worktree, so `..`, an
//! absolute path, or a symlink that leads outside the worktree is refused by the kernel at the
//! moment of the open, not by a check a swapped symlink could race. `.git` (the worktree's
//! pointer into the repository) is neither listed nor readable: it is git's, not the project's.

use std::io;
use std::path::Path;

use berth_confined::{Dir, ReadError};
use berth_core::{EntryKind, ErrorKind, StorageEntry, StoragePath};

use crate::error::{Error, Result};

/// A file or a folder.
pub enum Node {
    Folder(Vec<StorageEntry>),
    File(Vec<u8>),
}

/// Files larger than this are refused unless the server is told otherwise.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Reads `path` (the root when `None`) of the worktree at `root`: a folder's entries sorted by
/// name, or a file's bytes when it is at most `max_bytes` long.
pub fn read(root: &Path, path: Option<&StoragePath>, max_bytes: u64) -> Result<Node> {
    let shown = path.map_or(".", |p| p.as_str());
    if let Some(p) = path
        && p.as_str().split('/').any(|c| c == ".git")
    {
        return Err(Error::refused(format!(
            "'{shown}' is inside .git, which berth does not serve; use the workspace's git status instead"
        )));
    }
    let dir = berth_confined::open(root).map_err(|e| {
        let kind = match e.kind() {
            io::ErrorKind::NotFound => ErrorKind::NotFound,
            _ => ErrorKind::Io,
        };
        Error::rule(
            kind,
            format!(
                "cannot open the worktree {}: {e}; `berth workspace show` tells its health",
                root.display()
            ),
        )
    })?;
    let err = |e: io::Error| describe(shown, e);
    let Some(path) = path else {
        return list(&dir, None).map_err(err);
    };
    match berth_confined::read(&dir, path.as_path(), max_bytes) {
        Ok(bytes) => Ok(Node::File(bytes)),
        Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::IsADirectory => {
            list(&dir, Some(path)).map_err(err)
        }
        Err(ReadError::Io(e)) => Err(err(e)),
        Err(ReadError::TooLarge { grew: true, .. }) => Err(Error::refused(format!(
            "'{shown}' grew past the limit of {max_bytes} bytes while being read"
        ))),
        Err(ReadError::TooLarge { size, .. }) => Err(Error::refused(format!(
            "'{shown}' is {size} bytes, over the limit of {max_bytes} bytes for one read; read it in the worktree directly"
        ))),
    }
}

fn list(dir: &Dir, path: Option<&StoragePath>) -> io::Result<Node> {
    let entries = match path {
        None => dir.entries()?,
        Some(p) => dir.read_dir(p.as_path())?,
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == ".git" {
            continue;
        }
        let meta = entry.metadata()?;
        let kind = EntryKind::classify(meta.file_type().is_symlink(), meta.is_dir());
        out.push(StorageEntry {
            path: path.map_or_else(|| name.clone(), |p| format!("{p}/{name}")),
            name,
            size: if kind == EntryKind::File {
                meta.len()
            } else {
                0
            },
            kind,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Node::Folder(out))
}

fn describe(path: &str, e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::NotFound => Error::rule(
            ErrorKind::NotFound,
            format!("'{path}' does not exist in the worktree; list its folder to see what does"),
        ),
        // An escape (`..` through a symlink, an absolute link); ELOOP from a symlink cycle
        // lands in the last arm.
        _ if berth_confined::is_escape(&e) => Error::refused(format!(
            "'{path}' leads outside the worktree (through a symlink); refused"
        )),
        io::ErrorKind::NotADirectory => {
            Error::invalid(format!("a parent of '{path}' is a file, not a folder"))
        }
        _ => Error::rule(
            ErrorKind::Io,
            format!("cannot read '{path}' in the worktree: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> StoragePath {
        StoragePath::new(s).unwrap()
    }

    #[test]
    fn reads_lists_and_refuses_escapes() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::fs::create_dir(root.path().join("src")).unwrap();
        std::fs::write(root.path().join("src/main.rs"), "fn main() {}").unwrap();
        std::fs::write(root.path().join(".git"), "gitdir: /x").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("out")).unwrap();
        std::os::unix::fs::symlink("src/main.rs", root.path().join("inside")).unwrap();

        let Node::Folder(entries) = read(root.path(), None, 100).unwrap() else {
            panic!("root is a folder")
        };
        let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["inside", "out", "src"]);

        let Node::File(bytes) = read(root.path(), Some(&p("src/main.rs")), 100).unwrap() else {
            panic!("a file")
        };
        assert_eq!(bytes, b"fn main() {}");
        // A symlink that stays inside is followed.
        assert!(matches!(
            read(root.path(), Some(&p("inside")), 100),
            Ok(Node::File(_))
        ));
        let escape = read(root.path(), Some(&p("out/secret")), 100)
            .err()
            .unwrap()
            .to_string();
        assert!(escape.contains("outside the worktree"), "{escape}");
        let git = read(root.path(), Some(&p(".git")), 100).err().unwrap();
        assert_eq!(git.kind(), ErrorKind::Refused);
        let git = git.to_string();
        assert!(git.contains(".git"), "{git}");
        let big = read(root.path(), Some(&p("src/main.rs")), 4)
            .err()
            .unwrap()
            .to_string();
        assert!(big.contains("over the limit of 4 bytes"), "{big}");
        let missing = read(root.path(), Some(&p("nope")), 100).err().unwrap();
        assert!(missing.is_not_found());
        assert!(missing.to_string().contains("does not exist"), "{missing}");
    }
}
