//! `WorkspaceStore` on the filesystem: one folder per workspace, `workspace.toml` inside, and a
//! `names/<name>` index file per named workspace so lookup by name costs one read, not a scan.
//!
//! Creation and deletion of workspaces (and of name index entries), and the giving of port
//! blocks, happen under the home-wide `workspaces.lock`; metadata rewrites of one workspace
//! happen under its own `.lock` (a block's assignment holds both). The name
//! index is written *before* the workspace is committed, so a crash can leave a stale index
//! entry (pointing at a workspace that does not exist or has another name), never a named
//! workspace without one. Readers verify each entry, and creators reclaim stale ones.

use std::fs;
use std::io;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use berth_core::config::ConfigText;
use berth_core::{
    DeleteCondition, Error, GitInfo, NewWorkspace, PortBlock, PortRange, Result, SessionId,
    Workspace, WorkspaceId, WorkspaceName, WorkspaceStore,
};
use chrono::{DateTime, Utc};

use crate::durable::{FileLock, random_suffix, sync_dir, write_atomic};
use cap_std::fs::Dir;

use crate::{FsStore, Layout, ids_in, io_err, parse_toml, read_optional, utf8};

/// Folders every workspace has, as in the seed; `storage` and `sessions` are berth's.
const SUBDIRS: &[&str] = crate::WORKSPACE_ENTRIES.split_at(3).1;
const STAGING: &str = ".staging-";
const TRASH: &str = ".trash-";

/// The sorted workspace ids of a listing page, and what their read was witnessed by.
pub(crate) struct RememberedIds {
    seen: Witness,
    ids: Arc<Vec<WorkspaceId>>,
}

#[derive(PartialEq, Eq)]
struct Witness {
    index: (u64, u64, u64, i64, i64),
    folder: (i64, i64),
}

impl Layout {
    pub(crate) fn load_workspace(&self, id: &WorkspaceId) -> Result<Workspace> {
        let path = self.workspace_file(id);
        let text = read_optional(&path)?.ok_or_else(|| missing(id))?;
        parse_workspace(&path, &text, id)
    }

    /// Like `load_workspace`, reading relative to an open `workspaces/` handle: listing
    /// thousands of workspaces then costs one short path lookup per file, not a full walk.
    fn load_workspace_in(&self, dir: &Dir, id: &WorkspaceId) -> Result<Workspace> {
        match read_small(dir, &format!("{id}/workspace.toml")) {
            Ok(bytes) => {
                let path = self.workspace_file(id);
                parse_workspace(&path, &utf8(&path, bytes)?, id)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(missing(id)),
            Err(e) => Err(io_err("read", &self.workspace_file(id))(e)),
        }
    }

    /// Rewrites a record, telling the listing index before and after (see `listing.rs`).
    /// The caller holds the workspace's lock.
    fn write_workspace(&self, ws: &Workspace) -> Result<()> {
        let path = self.workspace_file(&ws.id);
        let text = toml::to_string(ws).expect("workspace serializes");
        self.index_dirty(&ws.id)?;
        write_atomic(&path, text.as_bytes()).map_err(io_err("write", &path))?;
        self.index_put(ws);
        Ok(())
    }

    /// The id a name index entry points at, if the entry exists; `kept`: through the entries
    /// kept in memory while their files show no change (`recent`), for lock-free lookups.
    fn name_entry(&self, name: &WorkspaceName, kept: bool) -> Result<Option<WorkspaceId>> {
        let path = self.names().join(name.as_str());
        let parse = |text: &str| {
            WorkspaceId::new(text.trim()).map_err(|e| Error::Corrupt {
                file: path.clone(),
                line: Some(1),
                reason: e.to_string(),
            })
        };
        if kept {
            return self.kept_names.read(name, &path, parse);
        }
        read_optional(&path)?.as_deref().map(parse).transpose()
    }

    /// `load_workspace` through the records kept in memory while their files show no change
    /// (`recent`): for lock-free lookups, never before a rewrite.
    fn load_workspace_kept(&self, id: &WorkspaceId) -> Result<Workspace> {
        let path = self.workspace_file(id);
        self.kept_records
            .read(id, &path, |text| parse_workspace(&path, text, id))?
            .ok_or_else(|| missing(id))
    }

    /// The workspace `name` belongs to, verified against its metadata; `kept` as for
    /// `name_entry`.
    fn workspace_named(&self, name: &WorkspaceName, kept: bool) -> Result<Option<Workspace>> {
        let Some(id) = self.name_entry(name, kept)? else {
            return Ok(None);
        };
        let loaded = match kept {
            true => self.load_workspace_kept(&id),
            false => self.load_workspace(&id),
        };
        match loaded {
            Ok(ws) if ws.name.as_ref() == Some(name) => Ok(Some(ws)),
            Ok(_) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn create(&self, new: NewWorkspace, now: DateTime<Utc>) -> Result<Workspace> {
        let _guard = self.lock_workspaces()?;
        let folder_before = self.folder_time_before();
        let id = new.id.unwrap_or_else(WorkspaceId::generate);
        let dir = self.workspace_dir(&id);
        if dir.symlink_metadata().is_ok() {
            return Err(Error::AlreadyExists {
                what: format!("workspace '{id}'"),
            });
        }
        if let Some(name) = &new.name
            && let Some(owner) = self.workspace_named(name, false)?
        {
            return Err(Error::AlreadyExists {
                what: format!("a workspace named '{name}' ({})", owner.id),
            });
        }
        // A block the record brings (a migration's) is checked under `workspaces.lock`, where
        // every block is given out (`assign_ports`), so no other can take its ports meanwhile.
        // A new workspace brings none, and this create reads no other record.
        if let Some(block) = new.ports {
            block.check_free(self.port_blocks()?)?;
        }
        if let Some(name) = &new.name {
            let entry = self.names().join(name.as_str());
            write_atomic(&entry, format!("{id}\n").as_bytes()).map_err(io_err("write", &entry))?;
        }
        let ws = Workspace {
            id: id.clone(),
            name: new.name,
            description: new.description,
            created_at: now,
            last_accessed: now,
            agent_id: new.agent_id,
            archived_at: None,
            git: new.git,
            ports: new.ports,
        };
        let staging = self.workspaces().join(format!("{STAGING}{id}"));
        build_workspace_dir(&staging, &ws)
            .map_err(io_err("create", &staging))
            .inspect_err(|_| {
                let _ = fs::remove_dir_all(&staging);
            })?;
        fs::rename(&staging, &dir).map_err(io_err("create", &dir))?;
        sync_dir(&self.workspaces()).map_err(io_err("sync", &self.workspaces()))?;
        self.index_folder_changed(folder_before, Some(&ws), None);
        Ok(ws)
    }

    /// The workspace's block: its own, or the lowest free one of `range`, written into its
    /// record. Under `workspaces.lock`, which every create and delete and every other
    /// assignment holds, so the blocks read are every block held until the record is written;
    /// and under the workspace's own lock, so no rewrite of the record (`update_accessed`,
    /// `set_git`) that read it before can put it back without its block.
    fn assign_ports(&self, id: &WorkspaceId, range: PortRange) -> Result<PortBlock> {
        let _guard = self.lock_workspaces()?;
        let _ws_guard = self.lock_workspace(id)?;
        let mut ws = self.load_workspace(id)?;
        if let Some(held) = ws.ports {
            return Ok(held);
        }
        let block = range.lowest_free(self.port_blocks()?)?;
        ws.ports = Some(block);
        self.write_workspace(&ws)?;
        Ok(block)
    }

    /// The port blocks every workspace holds. The caller holds `workspaces.lock`, so none is
    /// created, deleted or given a block meanwhile: from the listing index when it can be
    /// trusted (a record being rewritten is read from disk), else from the records themselves
    /// (not `list`, whose rebuild would take the lock again).
    fn port_blocks(&self) -> Result<Vec<PortBlock>> {
        let all = match self.read_index()? {
            Ok(list) => list,
            Err(_) => self.list_records()?,
        };
        Ok(all.into_iter().filter_map(|ws| ws.ports).collect())
    }

    fn delete(&self, id: &WorkspaceId, condition: DeleteCondition) -> Result<bool> {
        let _guard = self.lock_workspaces()?;
        let folder_before = self.folder_time_before();
        let dir = self.workspace_dir(id);
        if !dir.is_dir() {
            return Err(missing(id));
        }
        let _ws_guard = self.lock_workspace(id)?;
        // The metadata may be corrupt; deleting is how a person gets rid of such a workspace.
        let meta = self.load_workspace(id);
        if let DeleteCondition::IdleSince(cutoff) = condition {
            match &meta {
                Ok(ws) if ws.last_accessed < cutoff => {}
                Ok(_) => return Ok(false),
                Err(_) => return meta.map(|_| false),
            }
        }
        let trash = self
            .workspaces()
            .join(format!("{TRASH}{id}-{}", random_suffix()));
        let sessions = ids_in(&self.sessions_dir(id), |n| SessionId::new(n).ok())?;
        fs::rename(&dir, &trash).map_err(io_err("remove", &dir))?;
        sync_dir(&self.workspaces()).map_err(io_err("sync", &self.workspaces()))?;
        self.forget_sessions(id, &sessions)?;
        if let Ok(Workspace {
            name: Some(name), ..
        }) = meta
            && self.name_entry(&name, false).ok().flatten().as_ref() == Some(id)
        {
            let _ = fs::remove_file(self.names().join(name.as_str()));
        }
        // The workspace is gone once renamed; if removal of the trash fails, gc sweeps it.
        let _ = fs::remove_dir_all(&trash);
        self.index_folder_changed(folder_before, None, Some(id));
        Ok(true)
    }

    fn update_accessed(&self, id: &WorkspaceId, at: DateTime<Utc>) -> Result<()> {
        let _guard = self.lock_workspace(id)?;
        let mut ws = self.load_workspace(id)?;
        if at > ws.last_accessed {
            ws.last_accessed = at;
            self.write_workspace(&ws)?;
        }
        Ok(())
    }

    pub(crate) fn list_ids(&self) -> Result<Vec<WorkspaceId>> {
        ids_in(&self.workspaces(), |n| WorkspaceId::new(n).ok())
    }

    /// A page of workspaces in id order: the sorted ids (see [`Layout::sorted_ids`]), then
    /// the page's records; one deleted since its id was read is passed over.
    fn page(&self, after: Option<&WorkspaceId>, limit: usize) -> Result<Vec<Workspace>> {
        let ids = self.sorted_ids()?;
        let start = after.map_or(0, |a| ids.partition_point(|id| id <= a));
        let mut page = Vec::new();
        for id in &ids[start..] {
            if page.len() >= limit {
                break;
            }
            match self.load_workspace(id) {
                Ok(ws) => page.push(ws),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(page)
    }

    /// The workspace ids in order, as the folder's names say, remembered from the last call
    /// while nothing can have changed them. Reading 10,000 names takes about 5 ms, most of a
    /// page's cost, where two `stat`s take microseconds. Every create and delete appends to
    /// `workspaces.index` (and a compaction replaces it), so its length, or its inode, moves
    /// with each; a change made by hand moves the folder's modification time, which is what
    /// the index itself is checked against. Without an index, the names are read each time.
    fn sorted_ids(&self) -> Result<Arc<Vec<WorkspaceId>>> {
        let Some(seen) = self.ids_witness() else {
            return Ok(Arc::new(self.list_ids()?));
        };
        let remembered = |ids: &Option<RememberedIds>| {
            ids.as_ref()
                .filter(|r| r.seen == seen)
                .map(|r| r.ids.clone())
        };
        if let Some(ids) = remembered(&self.ids.lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(ids);
        }
        let ids = Arc::new(self.list_ids()?);
        // What was seen before the read: a change during it moves the witness, so these ids
        // are used again only if nothing changed since before they were read.
        *self.ids.lock().unwrap_or_else(|e| e.into_inner()) = Some(RememberedIds {
            seen,
            ids: ids.clone(),
        });
        Ok(ids)
    }

    /// What moves when the set of workspaces changes: the index file's identity and length,
    /// and the times of it and of `workspaces/`. `None` when either cannot be read.
    fn ids_witness(&self) -> Option<Witness> {
        use std::os::unix::fs::MetadataExt;
        let index = std::fs::metadata(self.home.join("workspaces.index")).ok()?;
        let folder = std::fs::metadata(self.workspaces()).ok()?;
        Some(Witness {
            index: (
                index.dev(),
                index.ino(),
                index.len(),
                index.mtime(),
                index.mtime_nsec(),
            ),
            folder: (folder.mtime(), folder.mtime_nsec()),
        })
    }

    /// Every workspace, in id order, from the listing index.
    fn list(&self) -> Result<Vec<Workspace>> {
        self.list_indexed()
    }

    /// Every workspace, in id order, read from the records themselves (the index's rebuild).
    pub(crate) fn list_records(&self) -> Result<Vec<Workspace>> {
        let ids = self.list_ids()?;
        // Reading thousands of small files is kernel CPU time (open, read, close), so one
        // thread per core, measured: on 2 cores, 2 threads take 0.66 of 1 thread's time and
        // 4-16 threads are no faster than 2.
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8);
        let chunk = ids.len().div_ceil(threads).max(256);
        let results: Vec<Result<Vec<Workspace>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = ids
                .chunks(chunk)
                .map(|part| scope.spawn(move || self.load_existing(part)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("list thread panicked"))
                .collect()
        });
        let mut all = Vec::with_capacity(ids.len());
        for part in results {
            all.extend(part?);
        }
        Ok(all)
    }

    /// Loads each id, skipping those deleted since they were listed.
    fn load_existing(&self, ids: &[WorkspaceId]) -> Result<Vec<Workspace>> {
        let root = self.workspaces();
        let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority())
            .map_err(io_err("open", &root))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.load_workspace_in(&dir, id) {
                Ok(ws) => out.push(ws),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    fn gc(&self, cutoff: DateTime<Utc>) -> Result<Vec<Workspace>> {
        self.sweep_debris()?;
        self.sweep_session_index()?;
        Ok(self
            .list()?
            .into_iter()
            .filter(|ws| !ws.id.is_default() && ws.last_accessed < cutoff)
            .collect())
    }

    /// Removes what interrupted creates and deletes left behind: staging and trash folders,
    /// and name entries that no longer point at a workspace of that name.
    fn sweep_debris(&self) -> Result<()> {
        let _guard = self.lock_workspaces()?;
        let dir = self.workspaces();
        for entry in fs::read_dir(&dir).map_err(io_err("list", &dir))? {
            let entry = entry.map_err(io_err("list", &dir))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(STAGING) || name.starts_with(TRASH) {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
        let names = self.names();
        for entry in fs::read_dir(&names).map_err(io_err("list", &names))? {
            let entry = entry.map_err(io_err("list", &names))?;
            let Some(name) = entry
                .file_name()
                .to_str()
                .and_then(|n| WorkspaceName::new(n).ok())
            else {
                continue;
            };
            if let Ok(None) = self.workspace_named(&name, false) {
                let _ = fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    /// Drops the session index entries of a removed workspace's sessions.
    fn forget_sessions(&self, ws: &WorkspaceId, sessions: &[SessionId]) -> Result<()> {
        if sessions.is_empty() {
            return Ok(());
        }
        let _guard = self.lock_sessions()?;
        for sid in sessions {
            let entry = self.session_index().join(sid.as_str());
            if read_optional(&entry)?.is_some_and(|owner| owner.trim() == ws.as_str()) {
                let _ = fs::remove_file(entry);
            }
        }
        Ok(())
    }

    pub(crate) fn lock_workspaces(&self) -> Result<FileLock> {
        let path = self.lock("workspaces.lock");
        FileLock::acquire(&path).map_err(io_err("lock", &path))
    }

    pub(crate) fn lock_workspace(&self, id: &WorkspaceId) -> Result<FileLock> {
        let path = self.workspace_dir(id).join(".lock");
        FileLock::acquire(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => missing(id),
            _ => io_err("lock", &path)(e),
        })
    }
}

/// Reads a small file whole. Unlike `read_to_end` it asks for no size hint, which would cost a
/// `statx` and an `lseek` per file: a third of the syscalls when listing thousands.
fn read_small(dir: &Dir, rel: &str) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = dir.open(rel)?;
    let mut buf = vec![0; 2048];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(len * 2, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    Ok(buf)
}

fn parse_workspace(path: &Path, text: &str, id: &WorkspaceId) -> Result<Workspace> {
    let ws: Workspace = parse_toml(path, text)?;
    if &ws.id != id {
        return Err(Error::Corrupt {
            file: path.to_owned(),
            line: None,
            reason: format!(
                "its id {:?} does not match its folder {:?}",
                ws.id.as_str(),
                id.as_str()
            ),
        });
    }
    Ok(ws)
}

fn missing(id: &WorkspaceId) -> Error {
    Error::not_found(format!("workspace '{id}'"))
}

/// Builds a complete workspace folder at `dir` (not yet visible under its id).
fn build_workspace_dir(dir: &Path, ws: &Workspace) -> io::Result<()> {
    if dir.exists() {
        fs::remove_dir_all(dir)?; // debris of an interrupted create; we hold the lock
    }
    fs::create_dir(dir)?;
    for sub in SUBDIRS {
        fs::create_dir(dir.join(sub))?;
    }
    let text = toml::to_string(ws).expect("workspace serializes");
    let file = dir.join("workspace.toml");
    fs::write(&file, text)?;
    fs::File::open(&file)?.sync_all()?;
    sync_dir(dir)
}

#[async_trait]
impl WorkspaceStore for FsStore {
    async fn create(&self, new: NewWorkspace, now: DateTime<Utc>) -> Result<Workspace> {
        self.blocking(move |l| l.create(new, now)).await
    }

    async fn load(&self, id: &WorkspaceId) -> Result<Workspace> {
        self.inline(|l| l.load_workspace_kept(id))
    }

    async fn load_by_name(&self, name: &WorkspaceName) -> Result<Workspace> {
        self.inline(|l| {
            l.workspace_named(name, true)?
                .ok_or_else(|| Error::not_found(format!("workspace named '{name}'")))
        })
    }

    async fn list_ids(&self) -> Result<Vec<WorkspaceId>> {
        self.blocking(|l| l.list_ids()).await
    }

    async fn list(&self) -> Result<Vec<Workspace>> {
        self.blocking(|l| l.list()).await
    }

    async fn list_json(&self) -> Result<berth_core::WorkspacesJson> {
        self.blocking(|l| l.list_json()).await
    }

    async fn page(&self, after: Option<&WorkspaceId>, limit: usize) -> Result<Vec<Workspace>> {
        let after = after.cloned();
        self.blocking(move |l| l.page(after.as_ref(), limit)).await
    }

    async fn delete(&self, id: &WorkspaceId, condition: DeleteCondition) -> Result<bool> {
        let id = id.clone();
        self.blocking(move |l| l.delete(&id, condition)).await
    }

    async fn update_accessed(&self, id: &WorkspaceId, at: DateTime<Utc>) -> Result<()> {
        let id = id.clone();
        self.blocking(move |l| l.update_accessed(&id, at)).await
    }

    async fn gc(&self, cutoff: DateTime<Utc>) -> Result<Vec<Workspace>> {
        self.blocking(move |l| l.gc(cutoff)).await
    }

    async fn load_config(&self, id: &WorkspaceId) -> Result<Option<ConfigText>> {
        // A small file every turn reads: on the caller's thread.
        self.inline(|l| {
            if !l.workspace_dir(id).is_dir() {
                return Err(missing(id));
            }
            let origin = l.workspace_dir(id).join("config.toml");
            Ok(read_optional(&origin)?.map(|text| ConfigText { origin, text }))
        })
    }

    async fn save_config(&self, id: &WorkspaceId, text: &str) -> Result<()> {
        let (id, text) = (id.clone(), text.to_owned());
        self.blocking(move |l| {
            // Under the workspace's lock, so a delete cannot run between the check and the
            // write and leave a config file in a folder on its way to the trash.
            let _guard = l.lock_workspace(&id)?;
            if !l.workspace_file(&id).is_file() {
                return Err(missing(&id));
            }
            let path = l.workspace_dir(&id).join("config.toml");
            write_atomic(&path, text.as_bytes()).map_err(io_err("write", &path))
        })
        .await
    }

    async fn assign_ports(&self, id: &WorkspaceId, range: PortRange) -> Result<PortBlock> {
        let id = id.clone();
        self.blocking(move |l| l.assign_ports(&id, range)).await
    }

    async fn set_git(&self, id: &WorkspaceId, git: &GitInfo) -> Result<()> {
        let (id, git) = (id.clone(), git.clone());
        self.blocking(move |l| {
            let _guard = l.lock_workspace(&id)?;
            let mut ws = l.load_workspace(&id)?;
            ws.git = Some(git);
            l.write_workspace(&ws)
        })
        .await
    }

    async fn set_archived(&self, id: &WorkspaceId, at: Option<DateTime<Utc>>) -> Result<Workspace> {
        let id = id.clone();
        self.blocking(move |l| {
            let _guard = l.lock_workspace(&id)?;
            let mut ws = l.load_workspace(&id)?;
            ws.archived_at = at;
            l.write_workspace(&ws)?;
            Ok(ws)
        })
        .await
    }

    fn workspace_dir(&self, id: &WorkspaceId) -> Option<std::path::PathBuf> {
        Some(self.layout.workspace_dir(id))
    }
}

#[cfg(test)]
mod tests {
    use berth_core::{DeleteCondition, NewWorkspace, WorkspaceId, WorkspaceStore};
    use chrono::Utc;

    use crate::FsStore;

    fn ids(page: Vec<berth_core::Workspace>) -> Vec<String> {
        page.into_iter().map(|w| w.id.to_string()).collect()
    }

    async fn create(store: &FsStore, id: &str) {
        let new = NewWorkspace {
            id: Some(WorkspaceId::new(id).unwrap()),
            ..NewWorkspace::default()
        };
        store.create(new, Utc::now()).await.unwrap();
    }

    /// Two stores on one home are two processes: what one creates or deletes, or a person
    /// changes by hand, is on the other's next page although it remembers its ids.
    #[tokio::test]
    async fn remembered_ids_follow_every_change() {
        let home = tempfile::tempdir().unwrap();
        let server = FsStore::open(home.path()).unwrap();
        let cli = FsStore::open(home.path()).unwrap();
        create(&server, "w-1").await;
        create(&server, "w-2").await;
        server.list().await.unwrap(); // the index exists from here on
        assert_eq!(ids(server.page(None, 10).await.unwrap()), ["w-1", "w-2"]);
        let first = server.layout.sorted_ids().unwrap();
        let again = server.layout.sorted_ids().unwrap();
        assert!(
            std::sync::Arc::ptr_eq(&first, &again),
            "nothing changed: remembered"
        );

        create(&cli, "w-3").await;
        assert_eq!(
            ids(server.page(None, 10).await.unwrap()),
            ["w-1", "w-2", "w-3"]
        );
        cli.delete(&WorkspaceId::new("w-1").unwrap(), DeleteCondition::Always)
            .await
            .unwrap();
        assert_eq!(ids(server.page(None, 10).await.unwrap()), ["w-2", "w-3"]);
        assert!(server.layout.ids.lock().unwrap().is_some());

        // By hand: a workspace folder copied in under a new id. The folder's time is what
        // moves (after the coarse clock's tick, as for any change that is not berth's).
        std::thread::sleep(std::time::Duration::from_millis(20));
        let from = home.path().join("workspaces/w-2");
        let to = home.path().join("workspaces/w-4");
        std::fs::create_dir(&to).unwrap();
        let record = std::fs::read_to_string(from.join("workspace.toml")).unwrap();
        std::fs::write(to.join("workspace.toml"), record.replace("w-2", "w-4")).unwrap();
        assert_eq!(
            ids(server.page(None, 10).await.unwrap()),
            ["w-2", "w-3", "w-4"]
        );
    }
}
