//! Reading blobs straight from a repository's object database, for a cold checkout that writes
//! a worktree's files itself (`fill.rs`): version-2 pack indexes and their packs, mapped into
//! memory, with their deltas resolved, and loose objects.
//!
//! Only what a checkout needs is here, and anything it does not know is an answer of "not
//! found" rather than a guess: a SHA-256 repository, an index of another version, an object
//! behind an alternate or a promisor remote. The caller then leaves the whole checkout to git.
//! Nothing is written here.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use libdeflater::{DecompressionError, Decompressor};
use memmap2::Mmap;

/// A SHA-1 object id.
pub(crate) type ObjectId = [u8; 20];

/// Why a blob could not be read where it was found: a damaged pack or loose object.
#[derive(Debug, thiserror::Error)]
#[error("{what} ({})", .at.display())]
pub(crate) struct Damaged {
    pub what: String,
    pub at: PathBuf,
}

/// One pack and its version-2 index.
struct Pack {
    path: PathBuf,
    index: Mmap,
    data: Mmap,
    count: usize,
    /// Every object's offset, ascending: an entry ends where the next one starts, which is
    /// how much compressed input its inflation is given.
    ends: Vec<u64>,
}

/// Where an object is.
#[derive(Debug, Clone)]
pub(crate) enum Location {
    Packed { pack: usize, offset: u64 },
    Loose(PathBuf),
}

/// The packs and loose objects of one `objects` folder.
pub(crate) struct ObjectStore {
    dir: PathBuf,
    packs: Vec<Pack>,
}

const OBJ_BLOB: u8 = 3;
const OBJ_OFS_DELTA: u8 = 6;
const OBJ_REF_DELTA: u8 = 7;
/// Git's own limit: only a cycle in a damaged pack goes deeper, and the recursion that
/// follows a chain stays well within a writer thread's stack. A deeper chain is damage, and
/// the checkout is left to git.
const MAX_DELTA_DEPTH: usize = 4095;

/// How many times its compressed size deflate can make data at most (1,032), for sizes read
/// from damaged headers.
const MAX_INFLATION: usize = 1032;
/// A reader keeps delta bases up to this many bytes, then starts again empty.
const BASE_CACHE_BYTES: usize = 32 << 20;

impl ObjectStore {
    /// The packs in `objects/pack` (an index whose pack is missing, as while git writes one,
    /// is passed over). `None` when a pack cannot be used: an index git would read that this
    /// reader does not (version 1), or a file that will not map.
    pub(crate) fn open(objects: &Path) -> Option<ObjectStore> {
        let mut packs = Vec::new();
        let entries = match std::fs::read_dir(objects.join("pack")) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Some(ObjectStore {
                    dir: objects.to_owned(),
                    packs,
                });
            }
            Err(_) => return None,
        };
        for entry in entries {
            let path = entry.ok()?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("idx") {
                continue;
            }
            let pack_path = path.with_extension("pack");
            let (Ok(index), Ok(data)) = (File::open(&path), File::open(&pack_path)) else {
                continue;
            };
            // SAFETY: git never changes a pack or its index once it is in place: it writes a
            // new one under a temporary name and renames it, and a repack unlinks the old
            // one, which leaves this mapping whole. Nothing truncates them under a reader.
            let (index, data) = unsafe { (Mmap::map(&index).ok()?, Mmap::map(&data).ok()?) };
            packs.push(Pack::new(pack_path, index, data)?);
        }
        Some(ObjectStore {
            dir: objects.to_owned(),
            packs,
        })
    }

    /// Where `id` is, or `None` when it is in neither a pack nor a loose file here.
    pub(crate) fn locate(&self, id: &ObjectId) -> Option<Location> {
        for (n, pack) in self.packs.iter().enumerate() {
            if let Some(offset) = pack.find(id) {
                return Some(Location::Packed { pack: n, offset });
            }
        }
        let hex = hex(id);
        let loose = self.dir.join(&hex[..2]).join(&hex[2..]);
        loose.is_file().then_some(Location::Loose(loose))
    }

    /// A reader: one per thread, each with its own inflater and cache of delta bases.
    pub(crate) fn reader(&self) -> Reader<'_> {
        Reader {
            store: self,
            inflater: Decompressor::new(),
            bases: HashMap::new(),
            cached: 0,
        }
    }
}

impl Pack {
    fn new(path: PathBuf, index: Mmap, data: Mmap) -> Option<Pack> {
        if index.len() < 8 + 1024 || index[..8] != [0xff, b't', b'O', b'c', 0, 0, 0, 2] {
            return None;
        }
        let count = be32(&index, 8 + 255 * 4)? as usize;
        if index.len() < 8 + 1024 + count * 28 + 40 || data.len() < 32 {
            return None;
        }
        let mut pack = Pack {
            path,
            index,
            data,
            count,
            ends: Vec::new(),
        };
        let mut ends = (0..count)
            .map(|i| pack.offset_at(i))
            .collect::<Option<Vec<u64>>>()?;
        ends.sort_unstable();
        pack.ends = ends;
        Some(pack)
    }

    fn offset_at(&self, i: usize) -> Option<u64> {
        let small = be32(&self.index, 8 + 1024 + self.count * 24 + i * 4)?;
        if small & 0x8000_0000 == 0 {
            return Some(u64::from(small));
        }
        let at = 8 + 1024 + self.count * 28 + (small & 0x7fff_ffff) as usize * 8;
        let bytes = self.index.get(at..at + 8)?;
        Some(u64::from_be_bytes(bytes.try_into().ok()?))
    }

    fn find(&self, id: &ObjectId) -> Option<u64> {
        let first = id[0] as usize;
        let lo = match first {
            0 => 0,
            _ => be32(&self.index, 8 + (first - 1) * 4)? as usize,
        };
        let hi = be32(&self.index, 8 + first * 4)? as usize;
        let ids = self.index.get(8 + 1024..8 + 1024 + self.count * 20)?;
        let (mut lo, mut hi) = (lo, hi.min(self.count));
        while lo < hi {
            let mid = (lo + hi) / 2;
            match ids[mid * 20..mid * 20 + 20].cmp(&id[..]) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return self.offset_at(mid),
            }
        }
        None
    }

    /// Where the entry at `offset` ends: the next entry's start, or the pack's checksum.
    fn end_of(&self, offset: u64) -> usize {
        let next = self.ends.partition_point(|&o| o <= offset);
        match self.ends.get(next) {
            Some(&end) => end as usize,
            None => self.data.len() - 20,
        }
    }
}

/// Reads objects for one thread.
pub(crate) struct Reader<'a> {
    store: &'a ObjectStore,
    inflater: Decompressor,
    /// Delta bases already built, by pack and offset.
    bases: HashMap<(usize, u64), Arc<Vec<u8>>>,
    cached: usize,
}

impl Reader<'_> {
    /// The content of the blob at `at`. An object that is not a blob is damage, as git would
    /// find it.
    pub(crate) fn blob(&mut self, at: &Location) -> Result<Vec<u8>, Damaged> {
        match at {
            Location::Loose(path) => self.loose_blob(path),
            Location::Packed { pack, offset } => {
                let (kind, data) = self.packed(*pack, *offset, 0)?;
                match kind {
                    OBJ_BLOB => Ok(Arc::unwrap_or_clone(data)),
                    _ => Err(self.damage(*pack, "an object listed as a blob is not one")),
                }
            }
        }
    }

    fn damage(&self, pack: usize, what: &str) -> Damaged {
        Damaged {
            what: what.to_owned(),
            at: self.store.packs[pack].path.clone(),
        }
    }

    /// The object at `offset` in pack `n`, its deltas applied: its type and content.
    fn packed(
        &mut self,
        n: usize,
        offset: u64,
        depth: usize,
    ) -> Result<(u8, Arc<Vec<u8>>), Damaged> {
        if depth > MAX_DELTA_DEPTH {
            return Err(self.damage(n, "a delta chain with no end"));
        }
        if let Some(base) = self.bases.get(&(n, offset)) {
            return Ok((OBJ_BLOB, Arc::clone(base)));
        }
        let store = self.store;
        let pack = &store.packs[n];
        let data = &pack.data[..];
        let bad = || self.damage(n, "a pack entry out of shape");
        let mut at = usize::try_from(offset).map_err(|_| bad())?;
        let mut byte = *data.get(at).ok_or_else(bad)?;
        at += 1;
        let kind = (byte >> 4) & 7;
        let mut size = (byte & 15) as usize;
        let mut shift = 4;
        while byte & 0x80 != 0 {
            byte = *data.get(at).ok_or_else(bad)?;
            at += 1;
            size |= ((byte & 0x7f) as usize)
                .checked_shl(shift)
                .ok_or_else(bad)?;
            shift += 7;
        }
        let base = match kind {
            OBJ_OFS_DELTA => {
                byte = *data.get(at).ok_or_else(bad)?;
                at += 1;
                let mut back = u64::from(byte & 0x7f);
                while byte & 0x80 != 0 {
                    byte = *data.get(at).ok_or_else(bad)?;
                    at += 1;
                    back = ((back + 1) << 7) | u64::from(byte & 0x7f);
                }
                // A base lies before its delta: a zero distance would be the entry itself.
                let base_offset = offset
                    .checked_sub(back)
                    .filter(|_| back > 0)
                    .ok_or_else(bad)?;
                Some(self.base(n, base_offset, depth)?)
            }
            OBJ_REF_DELTA => {
                let id: ObjectId = data
                    .get(at..at + 20)
                    .ok_or_else(bad)?
                    .try_into()
                    .map_err(|_| bad())?;
                at += 20;
                let base = match store.locate(&id) {
                    Some(Location::Packed { pack, offset }) => self.base(pack, offset, depth)?,
                    Some(Location::Loose(path)) => (OBJ_BLOB, Arc::new(self.loose_blob(&path)?)),
                    None => return Err(self.damage(n, "a delta's base is missing")),
                };
                Some(base)
            }
            1..=4 => None,
            _ => return Err(bad()),
        };
        let end = pack.end_of(offset).max(at);
        // The next entry's offset comes from the index: damaged, it may lie past the pack.
        let input = data
            .get(at..end)
            .ok_or_else(|| self.damage(n, "a pack entry out of shape"))?;
        let inflated = self.inflate(n, input, size)?;
        match base {
            None => Ok((kind, Arc::new(inflated))),
            Some((base_kind, base)) => {
                let built = apply_delta(&base, &inflated)
                    .ok_or_else(|| self.damage(n, "a delta that does not fit its base"))?;
                Ok((base_kind, Arc::new(built)))
            }
        }
    }

    /// A delta's base, kept for the next delta on it.
    fn base(&mut self, n: usize, offset: u64, depth: usize) -> Result<(u8, Arc<Vec<u8>>), Damaged> {
        let (kind, data) = self.packed(n, offset, depth + 1)?;
        if kind == OBJ_BLOB {
            if self.cached + data.len() > BASE_CACHE_BYTES {
                self.bases.clear();
                self.cached = 0;
            }
            self.cached += data.len();
            self.bases.insert((n, offset), Arc::clone(&data));
        }
        Ok((kind, data))
    }

    fn inflate(&mut self, n: usize, input: &[u8], size: usize) -> Result<Vec<u8>, Damaged> {
        // Deflate grows data at most about 1,032 times: a larger size in a damaged header
        // is refused before it is allocated.
        if size > input.len().saturating_mul(MAX_INFLATION).saturating_add(64) {
            return Err(self.damage(n, "a pack entry larger than its data can inflate to"));
        }
        let mut out = vec![0; size];
        match self.inflater.zlib_decompress(input, &mut out) {
            Ok(got) if got == size => Ok(out),
            _ => Err(self.damage(n, "a pack entry that does not inflate to its size")),
        }
    }

    /// A loose object's content, which must be a blob.
    fn loose_blob(&mut self, path: &Path) -> Result<Vec<u8>, Damaged> {
        let damaged = |what: &str| Damaged {
            what: what.to_owned(),
            at: path.to_owned(),
        };
        let compressed = std::fs::read(path).map_err(|e| damaged(&e.to_string()))?;
        let most = compressed
            .len()
            .saturating_mul(MAX_INFLATION)
            .saturating_add(64);
        let mut room = compressed
            .len()
            .saturating_mul(4)
            .saturating_add(64)
            .min(most);
        let whole = loop {
            let mut out = vec![0; room];
            match self.inflater.zlib_decompress(&compressed, &mut out) {
                Ok(got) => {
                    out.truncate(got);
                    break out;
                }
                Err(DecompressionError::InsufficientSpace) if room < most => {
                    room = room.saturating_mul(4).min(most)
                }
                Err(_) => return Err(damaged("a loose object that does not inflate")),
            }
        };
        let nul = whole
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| damaged("a loose object without a header"))?;
        let header =
            std::str::from_utf8(&whole[..nul]).map_err(|_| damaged("a loose object's header"))?;
        match header.split_once(' ') {
            Some(("blob", len)) if len.parse() == Ok(whole.len() - nul - 1) => {
                Ok(whole[nul + 1..].to_vec())
            }
            _ => Err(damaged("a loose object that is not the blob it should be")),
        }
    }
}

/// `base` with `delta` applied (git's delta format: the two sizes, then copies from the base
/// and literal inserts). `None` when the delta does not fit.
fn apply_delta(base: &[u8], delta: &[u8]) -> Option<Vec<u8>> {
    let mut at = 0;
    let varint = |at: &mut usize| -> Option<usize> {
        let (mut value, mut shift) = (0usize, 0u32);
        loop {
            let byte = *delta.get(*at)?;
            *at += 1;
            value |= ((byte & 0x7f) as usize).checked_shl(shift)?;
            shift += 7;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
    };
    if varint(&mut at)? != base.len() {
        return None;
    }
    let size = varint(&mut at)?;
    // A damaged size is not trusted for the allocation; the result is held to it below.
    let mut out = Vec::with_capacity(size.min(64 << 20));
    while at < delta.len() {
        let op = delta[at];
        at += 1;
        if op & 0x80 != 0 {
            let mut field = |bits: u8, shifts: &[u32]| -> Option<usize> {
                let mut value = 0usize;
                for (i, shift) in shifts.iter().enumerate() {
                    if bits & (1 << i) != 0 {
                        value |= (*delta.get(at)? as usize) << shift;
                        at += 1;
                    }
                }
                Some(value)
            };
            let offset = field(op & 0x0f, &[0, 8, 16, 24])?;
            let len = match field((op >> 4) & 0x07, &[0, 8, 16])? {
                0 => 0x10000,
                len => len,
            };
            out.extend_from_slice(base.get(offset..offset.checked_add(len)?)?);
        } else if op != 0 {
            out.extend_from_slice(delta.get(at..at + op as usize)?);
            at += op as usize;
        } else {
            return None;
        }
        if out.len() > size {
            return None;
        }
    }
    (out.len() == size).then_some(out)
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// An id in lowercase hex, as git names a loose object's file.
pub(crate) fn hex(id: &ObjectId) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// An id from its 40 hex digits; `None` for anything else (a SHA-256 id has 64).
pub(crate) fn parse_hex(text: &[u8]) -> Option<ObjectId> {
    if text.len() != 40 {
        return None;
    }
    let mut id = [0; 20];
    for (i, pair) in text.chunks(2).enumerate() {
        let digits = std::str::from_utf8(pair).ok()?;
        id[i] = u8::from_str_radix(digits, 16).ok()?;
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_copies_and_inserts_and_refuses_what_does_not_fit() {
        let base = b"hello, world";
        // Sizes 12 -> 11; copy 5 bytes from 0, insert " you!" ... then copy "!"? No: insert 6.
        let delta = [
            12,
            11,
            0x80 | 0x01 | 0x10,
            0,
            5,
            6,
            b' ',
            b't',
            b'h',
            b'e',
            b'r',
            b'e',
        ];
        assert_eq!(
            apply_delta(base, &delta).as_deref(),
            Some(&b"hello there"[..])
        );
        // The wrong base size, a copy past the base, and a zero opcode are refused.
        assert_eq!(apply_delta(b"short", &delta), None);
        assert_eq!(
            apply_delta(base, &[12, 20, 0x80 | 0x01 | 0x10, 8, 20]),
            None
        );
        assert_eq!(apply_delta(base, &[12, 1, 0]), None);
        // A result past its claimed size is refused as soon as it passes it, and a claimed
        // size of a terabyte is never allocated.
        assert_eq!(apply_delta(base, &[12, 2, 3, b'a', b'b', b'c']), None);
        let huge = [12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 1, b'a'];
        assert_eq!(apply_delta(base, &huge), None);
    }

    #[test]
    fn ids_read_and_written_in_hex() {
        let id = parse_hex(b"00ff10aa00ff10aa00ff10aa00ff10aa00ff10aa").expect("40 digits");
        assert_eq!(hex(&id), "00ff10aa00ff10aa00ff10aa00ff10aa00ff10aa");
        assert_eq!(parse_hex(&[b'a'; 64]), None);
        assert_eq!(parse_hex(&[b'g'; 40]), None);
    }
}
