//! `workspaces.index` read as the list it is: the records' JSON text, each `put` line's record
//! kept as the bytes it was written as, for `WorkspaceStore::list_json` (`berth workspace list
//! --json`). Building a `Workspace` of each of 10,000 records, and then formatting each again,
//! was most of a listing's time (docs/benchmarks.md, "workspaces").
//!
//! The same log is read with the same checks as [`Layout::read_index`] (`listing.rs`): a
//! header of this version and this boot, every line an entry (each `put` a JSON object whose
//! first key is its id, as berth writes it), the folder's time unchanged. An index that fails
//! any of them is not read here: the listing falls back to [`Layout::list_indexed`], which
//! rebuilds it from the records, saying so on standard error (a warning), as every other
//! reader of a corrupt index does; it is never taken as empty.

use std::fs;
use std::io;
use std::ops::Range;

use berth_core::{Result, WorkspaceId, WorkspacesJson};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::listing::{VERSION, boot_id};
use crate::{Layout, io_err};

/// An entry of the log, a `put`'s record left as its text.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum RawEntry<'a> {
    Header {
        version: u32,
        boot: String,
    },
    #[serde(borrow)]
    Put(&'a RawValue),
    Del(&'a str),
    Dirty(&'a str),
    Folder {
        from: Option<u64>,
        to: u64,
    },
}

impl Layout {
    /// Every workspace's record as JSON text, in id order, from the index as it is; through
    /// [`Layout::list_indexed`] (which rebuilds the index, with a warning) when it cannot be
    /// trusted.
    pub(crate) fn list_json(&self) -> Result<WorkspacesJson> {
        match self.read_index_json()? {
            Some(list) => Ok(list),
            None => Ok(WorkspacesJson::of(&self.list_indexed()?)),
        }
    }

    /// The index's records as their text; `None` when the index cannot be trusted as it is.
    fn read_index_json(&self) -> Result<Option<WorkspacesJson>> {
        let path = self.index_file();
        let mut text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e)
                if e.kind() == io::ErrorKind::NotFound
                    || e.kind() == io::ErrorKind::InvalidData =>
            {
                return Ok(None);
            }
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        let Some((records, folder)) = replay(&text) else {
            return Ok(None);
        };
        if folder != Some(self.folder_time()?) {
            return Ok(None);
        }
        // Being rewritten, or its writer died: the record on disk says which, and its text
        // goes after the log's.
        let mut ranges = Vec::with_capacity(records.len());
        for record in records {
            match record {
                Ok(range) => ranges.push(range),
                Err(id) => match self.load_workspace(&id) {
                    Ok(ws) => {
                        let start = text.len();
                        let json = serde_json::to_string(&ws).expect("a workspace serializes");
                        text.push_str(&json);
                        ranges.push(start..text.len());
                    }
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e),
                },
            }
        }
        Ok(Some(WorkspacesJson::new(text, ranges)))
    }
}

/// Each record in id order: its range of the log, or its id where it must be read from disk
/// (marked dirty).
type Records = Vec<std::result::Result<Range<usize>, WorkspaceId>>;

/// The log replayed: its records, and the folder's last recorded time; `None` when the log
/// cannot be trusted (no header of this version and boot, a line that is not an entry, an id
/// that is not one, a broken chain of folder times).
fn replay(text: &str) -> Option<(Records, Option<u64>)> {
    let mut lines = text.split_inclusive('\n');
    match serde_json::from_str::<RawEntry>(lines.next()?).ok()? {
        RawEntry::Header { version, boot } if version == VERSION => {
            if boot_id().is_some_and(|b| b != boot) {
                return None;
            }
        }
        _ => return None,
    }
    // Every entry that names a record, in the log's order; sorted by id (stably, so each id's
    // entries keep that order), the last of each id is what the log says of it now. The log
    // is a sorted snapshot and the appends after it: two runs, which the sort merges, in less
    // time than a map's thousands of insertions. Ids are compared by their first eight bytes
    // first, which settle nearly every comparison of two UUIDs without a call to `memcmp`.
    let mut named: Vec<Named> = Vec::with_capacity(text.len() / 200);
    let (mut folder, mut broken) = (None, false);
    for line in lines {
        // A last line without its newline is still being appended: it has not happened yet.
        if !line.ends_with('\n') {
            break;
        }
        match serde_json::from_str::<RawEntry>(line).ok()? {
            RawEntry::Header { .. } => {}
            RawEntry::Put(raw) => {
                let record = raw.get();
                let start = record.as_ptr() as usize - text.as_ptr() as usize;
                named.push(Named::new(
                    record_id(record)?,
                    Some(Some(start..start + record.len())),
                ));
            }
            RawEntry::Del(id) => {
                WorkspaceId::check(id).ok()?;
                named.push(Named::new(id, None));
            }
            RawEntry::Dirty(id) => named.push(Named::new(id, Some(None))),
            RawEntry::Folder { from, to } => {
                broken |= from.is_some() && from != folder;
                folder = Some(to);
            }
        }
    }
    if broken {
        return None;
    }
    named.sort_by(|a, b| a.head.cmp(&b.head).then_with(|| a.id.cmp(b.id)));
    let mut out = Vec::with_capacity(named.len());
    for (i, Named { head, id, state }) in named.iter().enumerate() {
        if named
            .get(i + 1)
            .is_some_and(|next| next.head == *head && next.id == *id)
        {
            continue;
        }
        // Deleted last: gone. Else checked as an id before it is listed, or named as a path.
        let Some(state) = state else { continue };
        match state {
            Some(range) => {
                WorkspaceId::check(id).ok()?;
                out.push(Ok(range.clone()));
            }
            None => out.push(Err(WorkspaceId::new(*id).ok()?)),
        }
    }
    Some((out, folder))
}

/// An entry that names a record: `None` deleted, `Some(None)` marked dirty, else its text's
/// range; `head`, the id's first eight bytes as a number that sorts as they do.
struct Named<'a> {
    head: u64,
    id: &'a str,
    state: Option<Option<Range<usize>>>,
}

impl<'a> Named<'a> {
    fn new(id: &'a str, state: Option<Option<Range<usize>>>) -> Named<'a> {
        let mut head = [0; 8];
        let n = id.len().min(8);
        head[..n].copy_from_slice(&id.as_bytes()[..n]);
        Named {
            head: u64::from_be_bytes(head),
            id,
            state,
        }
    }
}

/// The id of a record's text, as berth writes it: `{"id":"<id>",…` (an id has no character
/// that JSON escapes). `None` for anything else.
fn record_id(record: &str) -> Option<&str> {
    let rest = record.strip_prefix(r#"{"id":""#)?;
    let end = rest.find('"')?;
    let id = &rest[..end];
    (!id.contains('\\')).then_some(id)
}
