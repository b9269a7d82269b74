//! Writing a worktree's git index (version 2, no extensions) for files `fill.rs` wrote: each
//! entry with the stat data of the file as written, so git finds them clean without reading
//! them again, exactly as after its own checkout.
//!
//! git accepts an index without the cache-tree extension and builds it at the next commit;
//! it reads a version-2 index whatever `index.version` asks for, and writes that version the
//! next time it writes the index.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sha1::{Digest, Sha1};

use crate::objects::ObjectId;

/// A file's entry: its path in the tree, its mode as git records it (`0o100644`, `0o100755`,
/// `0o120000`), its blob and the stat data of the file written.
pub(crate) struct IndexEntry {
    pub path: Vec<u8>,
    pub mode: u32,
    pub id: ObjectId,
    pub stat: StatData,
}

/// The stat fields git keeps, each cut to 32 bits as git cuts them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StatData {
    ctime: (u32, u32),
    mtime: (u32, u32),
    dev: u32,
    ino: u32,
    uid: u32,
    gid: u32,
    size: u32,
}

impl StatData {
    pub(crate) fn of(meta: &std::fs::Metadata) -> StatData {
        // Truncation is git's own rule for these fields (`fill_stat_data`).
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        StatData {
            ctime: (meta.ctime() as u32, meta.ctime_nsec() as u32),
            mtime: (meta.mtime() as u32, meta.mtime_nsec() as u32),
            dev: meta.dev() as u32,
            ino: meta.ino() as u32,
            uid: meta.uid(),
            gid: meta.gid(),
            size: meta.size() as u32,
        }
    }
}

/// The bytes of an index holding `entries`, which must be sorted by path as bytes.
pub(crate) fn encode(entries: &[IndexEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + entries.len() * 96 + 20);
    out.extend_from_slice(b"DIRC");
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(
        &u32::try_from(entries.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    for e in entries {
        let s = &e.stat;
        for field in [
            s.ctime.0, s.ctime.1, s.mtime.0, s.mtime.1, s.dev, s.ino, e.mode, s.uid, s.gid, s.size,
        ] {
            out.extend_from_slice(&field.to_be_bytes());
        }
        out.extend_from_slice(&e.id);
        // The name's length, or 0xfff for a longer one (git then finds the NUL); stage 0.
        let flags = u16::try_from(e.path.len().min(0xfff)).unwrap_or(0xfff);
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&e.path);
        // 1 to 8 NULs, so each entry is a multiple of 8 bytes long.
        let padded = (62 + e.path.len() + 8) & !7;
        out.resize(out.len() + padded - 62 - e.path.len(), 0);
    }
    let sum = Sha1::digest(&out);
    out.extend_from_slice(&sum);
    out
}

/// Writes `entries` as the index at `index`, as git does: through `index.lock`, made only if
/// no other writer holds it, then renamed over. The lock is removed on failure.
pub(crate) fn write(index: &Path, entries: &[IndexEntry]) -> std::io::Result<()> {
    let lock = index.with_extension("lock");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)?;
    let written = file
        .write_all(&encode(entries))
        .and_then(|()| std::fs::rename(&lock, index));
    if written.is_err() {
        let _ = std::fs::remove_file(&lock);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_padded_to_eight_bytes_and_the_sum_closes_the_file() {
        let entry = |path: &str| IndexEntry {
            path: path.as_bytes().to_vec(),
            mode: 0o100644,
            id: [7; 20],
            stat: StatData::default(),
        };
        // 62 + 1 + 1 NUL = 64; 62 + 2 + 8 NULs = 72 (never zero NULs); 62 + 10 + 8 = 80.
        let bytes = encode(&[entry("a"), entry("ab"), entry("abcdefghij")]);
        assert_eq!(bytes.len(), 12 + 64 + 72 + 80 + 20);
        assert_eq!(&bytes[..4], b"DIRC");
        assert_eq!(bytes[12 + 62 + 1], 0);
        let (body, sum) = bytes.split_at(bytes.len() - 20);
        assert_eq!(&Sha1::digest(body)[..], sum);
    }
}
