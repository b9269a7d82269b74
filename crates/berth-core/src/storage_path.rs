//! `StoragePath`: a relative path inside a storage root (or a worktree) that cannot escape it.
//!
//! Lexical safety lives here; the store that resolves the path on disk is still responsible for
//! refusing symlinks that lead outside the root, since no string check can see those.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::id::InvalidInput;

/// Prefix of the temporary files stores write before renaming into place. Names starting with it
/// are reserved, so a caller can neither write nor collide with one.
pub const TEMP_PREFIX: &str = ".berth-tmp-";

/// The largest file a store keeps in storage, in bytes (64 MiB), the same for every backend:
/// storage holds an agent's notes and context, not artifacts, and a database keeps a file in
/// one row. A larger write is refused before anything is written.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

const MAX_LEN: usize = 4096;
const MAX_COMPONENT: usize = 255;

/// A normalized relative path: components joined by `/`, never empty, never `.` or `..`, never
/// absolute. `a//b` and `./a/b` normalize to `a/b`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StoragePath(String);

impl StoragePath {
    pub fn new(raw: &str) -> Result<Self, InvalidInput> {
        let refuse = |rule: &str| Err(InvalidInput::new("storage path", raw, rule));
        if raw.contains('\0') {
            return refuse("must not contain a NUL byte");
        }
        if raw.len() > MAX_LEN {
            return refuse("is longer than 4096 bytes");
        }
        if raw.starts_with('/') || raw.starts_with('\\') || has_drive_prefix(raw) {
            return refuse("must be relative to the storage root, not absolute");
        }
        if raw.contains('\\') {
            return refuse("must use '/' as the separator; '\\' is not allowed");
        }
        if raw.chars().any(char::is_control) {
            return refuse("must not contain control characters");
        }
        let mut parts = Vec::new();
        for part in raw.split('/') {
            match part {
                "" | "." => continue,
                ".." => return refuse("must not contain '..'"),
                p if p.len() > MAX_COMPONENT => {
                    return refuse("has a component longer than 255 bytes");
                }
                p if p.starts_with(TEMP_PREFIX) => {
                    return refuse("uses the reserved prefix '.berth-tmp-'");
                }
                p => parts.push(p),
            }
        }
        if parts.is_empty() {
            return refuse("must name something inside the root (empty and '.' name the root)");
        }
        Ok(StoragePath(parts.join("/")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path as a relative `Path`, for joining onto a root.
    pub fn as_path(&self) -> &Path {
        Path::new(&self.0)
    }

    pub fn to_path_buf(&self) -> PathBuf {
        PathBuf::from(&self.0)
    }

    /// The last component.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The parent folder, or `None` for a top-level entry.
    pub fn parent(&self) -> Option<StoragePath> {
        self.0
            .rsplit_once('/')
            .map(|(p, _)| StoragePath(p.to_owned()))
    }
}

fn has_drive_prefix(raw: &str) -> bool {
    let b = raw.as_bytes();
    b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'
}

impl fmt::Display for StoragePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for StoragePath {
    type Err = InvalidInput;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl Serialize for StoragePath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for StoragePath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::new(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_paths_are_refused() {
        for bad in [
            "",
            ".",
            "./",
            "//",
            "..",
            "../x",
            "a/../../x",
            "a/..",
            "/etc/passwd",
            "\\x",
            "C:x",
            "a\0b",
            "a\\..\\b",
            "x/.berth-tmp-1",
            "a\nb",
        ] {
            assert!(StoragePath::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn paths_normalize() {
        assert_eq!(StoragePath::new("./a//b/").unwrap().as_str(), "a/b");
        assert_eq!(StoragePath::new("notes.md").unwrap().parent(), None);
        let p = StoragePath::new("a/b/c.txt").unwrap();
        assert_eq!(p.parent().unwrap().as_str(), "a/b");
        assert_eq!(p.file_name(), "c.txt");
        // A name that merely starts with dots is a name, not a traversal.
        assert_eq!(StoragePath::new("..a/...").unwrap().as_str(), "..a/...");
    }
}
