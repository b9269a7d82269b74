//! The workspace listing index, `<home>/workspaces.index`: every workspace record in one file,
//! so listing thousands of workspaces reads one file instead of one per workspace.
//!
//! The records (`workspaces/<id>/workspace.toml`) stay the truth; the index is a cache that
//! every write keeps current, and that a reader checks before trusting:
//! - It is a log of JSON lines: a `header`, then `put` (a whole record), `del` (an id),
//!   `dirty` (an id whose record is about to change) and `folder` (the modification time of
//!   `workspaces/` after berth's own change there). Writers append under `index.lock`; an
//!   append that finds the log much longer than its last snapshot rewrites it (atomically).
//! - A writer appends `dirty` before it rewrites a record and `put` after, both while it holds
//!   the record's lock. A writer that dies in between leaves a `dirty` with nothing after it,
//!   and readers load that one record from disk. If the `dirty` cannot be appended, the record
//!   is not touched; a `put` that cannot be appended leaves the `dirty`, which is still right.
//! - Creating and deleting a workspace changes `workspaces/` itself; the writer records the
//!   folder's modification time before and after (under `workspaces.lock`). A folder whose time
//!   is not the last one recorded, or a "before" that is not the previous "after", means
//!   something else changed the folder (a crash mid-create, a sweep of its debris, a person's
//!   `rm -r`), and the reader rebuilds the index from the records, saying so.
//! - The appends are not fsynced: what a process wrote survives its death in the page cache.
//!   Only a power loss can drop them, and that means a reboot: the header names the boot that
//!   wrote the file (Linux's boot id), and an index from an earlier boot is rebuilt once. Where
//!   there is no boot id, every append is fsynced instead.
//!
//! A record edited by hand is not noticed until the index is rebuilt; deleting
//! `workspaces.index` forces that.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::UNIX_EPOCH;

use berth_core::{Result, Workspace, WorkspaceId};
use serde::{Deserialize, Serialize};

use crate::durable::{FileLock, write_atomic};
use crate::{Layout, io_err};

pub(crate) const VERSION: u32 = 1;
/// A log shorter than this is never compacted: rewriting costs more than replaying it.
const COMPACT_FLOOR: u64 = 1 << 20;

// A `Put` is most of every log, each read and moved once on its way into a `Replay`: boxing it
// would cost an allocation per record for no saving.
#[allow(clippy::large_enum_variant)]
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Entry {
    Header {
        version: u32,
        boot: String,
        /// Length of the snapshot the log started from; compaction compares against it.
        base: u64,
    },
    Put(Workspace),
    Del(WorkspaceId),
    Dirty(WorkspaceId),
    /// The modification time of `workspaces/` (nanoseconds since the epoch) went from `from`
    /// to `to` by berth's own change; `from` is `None` in a snapshot.
    Folder {
        from: Option<u64>,
        to: u64,
    },
}

/// What replaying the log gives: the records (`None`: re-read it), the folder's last known
/// time, and whether the chain of folder times broke (something else changed the folder
/// between two of berth's changes).
#[derive(Default)]
struct Replay {
    records: BTreeMap<WorkspaceId, Option<Workspace>>,
    folder: Option<u64>,
    broken: bool,
}

impl Replay {
    fn apply(&mut self, entry: Entry) {
        match entry {
            Entry::Header { .. } => {}
            Entry::Put(ws) => {
                self.records.insert(ws.id.clone(), Some(ws));
            }
            Entry::Del(id) => {
                self.records.remove(&id);
            }
            Entry::Dirty(id) => {
                self.records.insert(id, None);
            }
            Entry::Folder { from, to } => {
                if from.is_some() && from != self.folder {
                    self.broken = true;
                }
                self.folder = Some(to);
            }
        }
    }
}

/// Why an index is rebuilt when there is none.
const NO_INDEX: &str = "it does not exist yet";

impl Layout {
    pub(crate) fn index_file(&self) -> PathBuf {
        self.home.join("workspaces.index")
    }

    /// Every workspace, in id order, from the index; rebuilt first if it cannot be trusted.
    pub(crate) fn list_indexed(&self) -> Result<Vec<Workspace>> {
        match self.read_index()? {
            Ok(list) => Ok(list),
            Err(reason) => {
                // A fresh home has no index and nothing to index: it is made without a word.
                if reason != NO_INDEX || !self.list_ids()?.is_empty() {
                    tracing::warn!("rebuilding the workspace index: {reason}");
                }
                self.rebuild_index()
            }
        }
    }

    /// The index's workspaces, or why the index must be rebuilt.
    pub(crate) fn read_index(&self) -> Result<std::result::Result<Vec<Workspace>, String>> {
        let path = self.index_file();
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Err(NO_INDEX.to_owned()));
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Ok(Err("it is not valid UTF-8".to_owned()));
            }
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        let (head, body) = text.split_once('\n').unwrap_or((&text, ""));
        match (!text.is_empty()).then(|| serde_json::from_str::<Entry>(head)) {
            Some(Ok(Entry::Header { version, boot, .. })) if version == VERSION => {
                if boot_id().is_some_and(|b| b != boot) {
                    return Ok(Err(
                        "it was written before the machine last restarted".to_owned()
                    ));
                }
            }
            _ => {
                return Ok(Err(
                    "it does not start with a header this version of berth reads".to_owned(),
                ));
            }
        }
        let Some(parts) = parse_log(body) else {
            return Ok(Err("it has a line this berth cannot read".to_owned()));
        };
        let mut replay = Replay::default();
        for entry in parts.into_iter().flatten() {
            replay.apply(entry);
        }
        if replay.broken || replay.folder != Some(self.folder_time()?) {
            return Ok(Err(
                "workspaces were added or removed without it (a crash, or by hand)".to_owned(),
            ));
        }
        let mut out = Vec::with_capacity(replay.records.len());
        for (id, record) in replay.records {
            match record {
                Some(ws) => out.push(ws),
                // Being rewritten, or its writer died: the record on disk says which.
                None => match self.load_workspace(&id) {
                    Ok(ws) => out.push(ws),
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e),
                },
            }
        }
        Ok(Ok(out))
    }

    /// Writes a new index from the records. Holds `workspaces.lock` (no create or delete
    /// meanwhile) and `index.lock` (every append waits, then lands in the new file); carries
    /// over the `dirty` marks of the old file, whose writers may still be at work.
    fn rebuild_index(&self) -> Result<Vec<Workspace>> {
        let _workspaces = self.lock_workspaces()?;
        let _index = self.lock_index()?;
        let mut pending = Vec::new();
        if let Ok(old) = fs::read_to_string(self.index_file()) {
            let mut replay = Replay::default();
            for line in old.lines() {
                if let Ok(entry) = serde_json::from_str::<Entry>(line) {
                    replay.apply(entry);
                }
            }
            pending.extend(
                replay
                    .records
                    .into_iter()
                    .filter_map(|(id, r)| r.is_none().then_some(id)),
            );
        }
        self.snapshot(pending)
    }

    /// Writes the index from the records, with `pending` marked dirty. The caller holds
    /// `index.lock`, and `workspaces.lock` so that the folder's time matches the records.
    fn snapshot(&self, pending: Vec<WorkspaceId>) -> Result<Vec<Workspace>> {
        let list = self.list_records()?;
        let folder = self.folder_time()?;
        let mut entries: Vec<Entry> = list.iter().cloned().map(Entry::Put).collect();
        entries.extend(pending.into_iter().map(Entry::Dirty));
        entries.push(Entry::Folder {
            from: None,
            to: folder,
        });
        self.write_snapshot(entries)?;
        Ok(list)
    }

    fn write_snapshot(&self, entries: Vec<Entry>) -> Result<()> {
        let body = encode(&entries);
        // The header records the snapshot's length, and its own length depends on that
        // number's digits: settled by iteration, as a transcript trailer is.
        let mut base = body.len() as u64;
        let text = loop {
            let header = encode(&[Entry::Header {
                version: VERSION,
                boot: boot_id().unwrap_or_default().to_owned(),
                base,
            }]);
            let total = (header.len() + body.len()) as u64;
            if total == base {
                break header + &body;
            }
            base = total;
        };
        let path = self.index_file();
        write_atomic(&path, text.as_bytes()).map_err(io_err("write", &path))
    }

    /// Says that `id`'s record is about to change. Must succeed before the record is touched.
    pub(crate) fn index_dirty(&self, id: &WorkspaceId) -> Result<()> {
        self.append_index(&[Entry::Dirty(id.clone())])
    }

    /// Records `ws` as written. Failing is harmless (the `dirty` before it stays), so the
    /// error is dropped: the record, which is the truth, was written.
    pub(crate) fn index_put(&self, ws: &Workspace) {
        let _ = self.append_index(&[Entry::Put(ws.clone())]);
    }

    /// The time to pass to [`Layout::index_folder_changed`]: read under `workspaces.lock`,
    /// before berth changes the folder. A home without an index (a new one) gets one here,
    /// from its records, so that its first listing reads the index instead of rebuilding it.
    pub(crate) fn folder_time_before(&self) -> Option<u64> {
        if !self.index_file().exists()
            && let Ok(_index) = self.lock_index()
            && !self.index_file().exists()
        {
            // Failing only leaves the index to the next reader, as before.
            let _ = self.snapshot(Vec::new());
        }
        self.folder_time().ok()
    }

    /// Records a create or a delete in `workspaces/`, and the folder's time before and after
    /// it. Failing leaves a time that no longer matches, and the next reader rebuilds.
    pub(crate) fn index_folder_changed(
        &self,
        before: Option<u64>,
        put: Option<&Workspace>,
        del: Option<&WorkspaceId>,
    ) {
        let (Some(from), Ok(to)) = (before, self.folder_time()) else {
            return;
        };
        let mut entries = Vec::new();
        entries.extend(put.cloned().map(Entry::Put));
        entries.extend(del.cloned().map(Entry::Del));
        entries.push(Entry::Folder {
            from: Some(from),
            to,
        });
        let _ = self.append_index(&entries);
    }

    fn append_index(&self, entries: &[Entry]) -> Result<()> {
        let _lock = self.lock_index()?;
        let path = self.index_file();
        // Created if missing: a file without a header is rebuilt by the next reader, which
        // keeps the `dirty` marks found in it. Readable too: the compaction below reads the
        // header through this handle (an append-only one refuses reads with EBADF).
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        file.write_all(encode(entries).as_bytes())
            .map_err(io_err("append to", &path))?;
        if boot_id().is_none() {
            file.sync_data().map_err(io_err("sync", &path))?;
        }
        // The entries are appended whatever the compaction does: one that fails leaves the
        // log long, and the next append tries again, so it never fails the write it follows.
        let _ = self.compact_if_long(&file);
        Ok(())
    }

    /// Rewrites the log as a snapshot once it is three times the length it started at.
    fn compact_if_long(&self, file: &File) -> Result<()> {
        let path = self.index_file();
        let len = file.metadata().map_err(io_err("read", &path))?.len();
        if len < COMPACT_FLOOR {
            return Ok(());
        }
        let mut head = vec![0; 512];
        let n = file.read_at(&mut head, 0).map_err(io_err("read", &path))?;
        let base = head[..n]
            .split(|&b| b == b'\n')
            .next()
            .and_then(|l| serde_json::from_slice::<Entry>(l).ok())
            .and_then(|e| match e {
                Entry::Header { base, .. } => Some(base),
                _ => None,
            });
        if base.is_some_and(|base| len < base.saturating_mul(3)) {
            return Ok(());
        }
        let text = fs::read_to_string(&path).map_err(io_err("read", &path))?;
        let mut replay = Replay::default();
        for line in text.lines() {
            match serde_json::from_str::<Entry>(line) {
                Ok(entry) => replay.apply(entry),
                // Not ours to judge here: the next reader rebuilds from the records.
                Err(_) => return Ok(()),
            }
        }
        let mut entries = Vec::with_capacity(replay.records.len() + 1);
        for (id, record) in replay.records {
            entries.push(match record {
                Some(ws) => Entry::Put(ws),
                None => Entry::Dirty(id),
            });
        }
        // A broken chain stays broken: the snapshot keeps no folder time, so readers rebuild.
        if !replay.broken {
            entries.extend(replay.folder.map(|to| Entry::Folder { from: None, to }));
        }
        self.write_snapshot(entries)
    }

    fn lock_index(&self) -> Result<FileLock> {
        let path = self.lock("index.lock");
        FileLock::acquire(&path).map_err(io_err("lock", &path))
    }

    pub(crate) fn folder_time(&self) -> Result<u64> {
        let dir = self.workspaces();
        let modified = fs::metadata(&dir)
            .and_then(|m| m.modified())
            .map_err(io_err("read", &dir))?;
        Ok(modified
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64))
    }
}

/// A log shorter than this is parsed on one thread: a thread's start costs more than the
/// parse of its half (about 1,000 records).
const PARALLEL_PARSE_FROM: usize = 256 << 10;

/// The log's entries after its header, in order, parsed on one thread per core (at most four)
/// for a long log: parsing is most of a listing's time, and each thread's share is a run of
/// whole lines, applied afterwards in the order they were written. `None` when a line is not
/// an entry this berth reads.
fn parse_log(body: &str) -> Option<Vec<Vec<Entry>>> {
    let threads = match body.len() < PARALLEL_PARSE_FROM {
        true => 1,
        false => std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
    };
    if threads == 1 {
        return parse_lines(body).map(|entries| vec![entries]);
    }
    // Cut at line ends near each share's end, so no line is split.
    let mut parts = Vec::with_capacity(threads);
    let mut rest = body;
    for left in (1..=threads).rev() {
        let want = rest.len() / left;
        let cut = match rest.as_bytes()[want..].iter().position(|&b| b == b'\n') {
            Some(at) if left > 1 => want + at + 1,
            _ => rest.len(),
        };
        let (part, after) = rest.split_at(cut);
        parts.push(part);
        rest = after;
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .into_iter()
            .map(|part| scope.spawn(move || parse_lines(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("parsing the index never panics"))
            .collect()
    })
}

/// The entries of whole lines. A last line without its newline is still being appended by
/// another writer: what it says has not happened yet (a `dirty` is appended before its record
/// changes, a `put` after the `dirty`), so it is left out.
fn parse_lines(text: &str) -> Option<Vec<Entry>> {
    let mut entries = Vec::with_capacity(text.len() / 200);
    for line in text.split_inclusive('\n') {
        if !line.ends_with('\n') {
            break;
        }
        entries.push(serde_json::from_str::<Entry>(line).ok()?);
    }
    Some(entries)
}

fn encode(entries: &[Entry]) -> String {
    let mut out = String::new();
    for e in entries {
        out.push_str(&serde_json::to_string(e).expect("index entries serialize"));
        out.push('\n');
    }
    out
}

/// This boot of the machine, where the system says (Linux).
pub(crate) fn boot_id() -> Option<&'static str> {
    static BOOT: OnceLock<Option<String>> = OnceLock::new();
    BOOT.get_or_init(|| {
        fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    })
    .as_deref()
}

#[cfg(test)]
mod tests {
    use berth_core::{NewWorkspace, WorkspaceId, WorkspaceStore};
    use chrono::{Duration, Utc};

    use crate::FsStore;

    /// A log past `PARALLEL_PARSE_FROM` is parsed in runs of lines on several threads; the
    /// replay must still see every entry once and in order: records rewritten, deleted and
    /// marked dirty anywhere in the log (across the cuts) come out as one pass would give
    /// them, a torn last line is left out, and an unreadable line in the middle of the log
    /// still makes the index untrusted rather than cutting the list short.
    #[tokio::test]
    async fn a_long_log_parsed_in_runs_is_the_log_read_in_order() {
        let home = tempfile::tempdir().unwrap();
        let store = FsStore::open(home.path()).unwrap();
        // Long descriptions, so that 120 workspaces make a log past the parallel threshold.
        let mut ids = Vec::new();
        for i in 0..120 {
            let new = NewWorkspace {
                id: Some(WorkspaceId::new(format!("w-{i:03}")).unwrap()),
                description: format!("{i} {}", "d".repeat(3_000)),
                ..NewWorkspace::default()
            };
            ids.push(store.create(new, Utc::now()).await.unwrap().id);
        }
        // Every tenth deleted, every seventh used later: entries for one id at both ends.
        let later = Utc::now() + Duration::hours(1);
        for (i, id) in ids.iter().enumerate() {
            if i % 7 == 0 {
                store.update_accessed(id, later).await.unwrap();
            }
        }
        for id in ids.iter().step_by(10) {
            store
                .delete(id, berth_core::DeleteCondition::Always)
                .await
                .unwrap();
        }
        let index = home.path().join("workspaces.index");
        let len = std::fs::metadata(&index).unwrap().len() as usize;
        assert!(len > super::PARALLEL_PARSE_FROM, "{len} bytes");
        let from_index = store.layout.read_index().unwrap().expect("trusted");
        let from_records = store.layout.list_records().unwrap();
        let show = |l: &[berth_core::Workspace]| {
            l.iter()
                .map(|w| format!("{} {} {}", w.id, w.last_accessed, w.description.len()))
                .collect::<Vec<_>>()
        };
        assert_eq!(show(&from_index), show(&from_records));
        assert_eq!(from_index.len(), 108);

        // A writer's line not yet ended: left out, the rest read.
        let text = std::fs::read_to_string(&index).unwrap();
        std::fs::write(&index, format!("{text}{{\"del\":\"w-001")).unwrap();
        assert_eq!(
            show(&store.layout.read_index().unwrap().unwrap()),
            show(&from_records)
        );

        // A broken line in the middle of the long log: not trusted, rebuilt by a listing.
        let middle = text.len() / 2;
        let cut = middle + text[middle..].find('\n').unwrap() + 1;
        let broken = format!("{}{{\"put\":{{broken\n{}", &text[..cut], &text[cut..]);
        std::fs::write(&index, broken).unwrap();
        let why = store.layout.read_index().unwrap().unwrap_err();
        assert!(why.contains("cannot read"), "{why}");
        assert_eq!(show(&store.list().await.unwrap()), show(&from_records));
        assert!(store.layout.read_index().unwrap().is_ok(), "rebuilt");
    }

    /// A log that outgrows `COMPACT_FLOOR` (and three times its snapshot) is rewritten as a
    /// snapshot by the append that finds it so, and that append, and every write after it,
    /// succeeds: a home whose records are rewritten often (a workspace used every minute,
    /// ten thousand workspaces created) must not stop writing once its log is long.
    #[tokio::test]
    async fn a_long_log_is_compacted_and_writes_go_on() {
        let home = tempfile::tempdir().unwrap();
        let store = FsStore::open(home.path()).unwrap();
        let id = WorkspaceId::new("busy").unwrap();
        // A big record, so that a few rewrites make a log of over a megabyte.
        let new = NewWorkspace {
            id: Some(id.clone()),
            description: "x".repeat(64 << 10),
            ..NewWorkspace::default()
        };
        let made = store.create(new, Utc::now()).await.unwrap();
        let index = home.path().join("workspaces.index");
        // Each rewrite appends the record (with a `dirty` before it): 40 of them are 2.5 MiB.
        let (mut len, mut compactions) = (0, 0);
        let mut last = made.last_accessed;
        for i in 1..=40 {
            last = made.last_accessed + Duration::seconds(i);
            store.update_accessed(&id, last).await.unwrap();
            let now = std::fs::metadata(&index).unwrap().len();
            compactions += usize::from(now < len);
            len = now;
        }
        assert!(compactions >= 2, "compacted {compactions} times");
        assert!(len < super::COMPACT_FLOOR, "{len} bytes");
        // The compacted index is read as it is (no rebuild), by this store and another.
        assert!(store.layout.read_index().unwrap().is_ok());
        for reader in [&store, &FsStore::open(home.path()).unwrap()] {
            let listed = reader.list().await.unwrap();
            assert_eq!(listed.len(), 1);
            assert_eq!(listed[0].last_accessed, last);
        }
    }
}
