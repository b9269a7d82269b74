//! The store traits every backend implements (filesystem, SQLite, Postgres). Callers only ever
//! see these, so a backend can be swapped without touching them; the shared conformance suite
//! holds each backend to the same behaviour.
//!
//! Contract common to all methods: an acknowledged write is durable (an `append_syncing` once
//! its `Syncing` is waited for, and seen by every reader before); concurrent callers in other
//! processes never lose an update; a record that cannot be parsed is `Error::Corrupt`, never
//! "missing".

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::ConfigText;
use crate::error::Result;
use crate::id::{DeviceId, SessionId, WorkspaceId, WorkspaceName};
use crate::model::{
    GitInfo, NewSession, NewWorkspace, PortBlock, PortRange, Session, SessionStatus, StorageEntry,
    StorageScope, TokenUsage, Workspace,
};
use crate::storage_path::StoragePath;
use crate::transcript::{Message, Transcript};

/// A message appended to a transcript, which every reader already sees, on its way to the disk
/// ([`SessionStore::append_syncing`]): [`Syncing::wait`] returns once it is durable, or says
/// why it cannot be.
#[must_use = "an append is durable only once its sync is waited for"]
pub struct Syncing(Option<Pin<Box<dyn Future<Output = Result<()>> + Send>>>);

impl Syncing {
    /// Durable already.
    pub fn done() -> Syncing {
        Syncing(None)
    }

    /// Durable once `sync` has run; it should be running already (on a thread of its own),
    /// so that the disk works while the caller does.
    pub fn after(sync: impl Future<Output = Result<()>> + Send + 'static) -> Syncing {
        Syncing(Some(Box::pin(sync)))
    }

    pub async fn wait(self) -> Result<()> {
        match self.0 {
            None => Ok(()),
            Some(sync) => sync.await,
        }
    }
}

/// Workspace records as JSON text, in id order: each the serde form of a [`Workspace`] (an
/// object, its `id` first, a valid [`WorkspaceId`] the store checked), kept as ranges of one
/// string so that a listing of thousands is one allocation rather than thousands of records.
#[derive(Debug, Clone, Default)]
pub struct WorkspacesJson {
    text: String,
    records: Vec<std::ops::Range<usize>>,
}

impl WorkspacesJson {
    /// `records` are ranges of `text`, each one record's JSON object, in id order.
    ///
    /// # Panics
    /// If a range is not within `text` or does not fall on character boundaries: a store's
    /// mistake, not its data's.
    pub fn new(text: String, records: Vec<std::ops::Range<usize>>) -> WorkspacesJson {
        assert!(
            records.iter().all(|r| text.get(r.clone()).is_some()),
            "every record's range lies within the text"
        );
        WorkspacesJson { text, records }
    }

    /// The records of `list`, serialized.
    pub fn of(list: &[Workspace]) -> WorkspacesJson {
        let mut text = String::with_capacity(list.len() * 256);
        let mut records = Vec::with_capacity(list.len());
        for ws in list {
            let start = text.len();
            text.push_str(&serde_json::to_string(ws).expect("a workspace serializes"));
            records.push(start..text.len());
        }
        WorkspacesJson { text, records }
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Each record's JSON text, in id order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.records.iter().map(|r| &self.text[r.clone()])
    }
}

/// When `WorkspaceStore::delete` may go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteCondition {
    Always,
    /// Only if the workspace has not been used since this instant, checked atomically with the
    /// removal, so garbage collection never removes a workspace that was just used.
    IdleSince(DateTime<Utc>),
}

#[async_trait]
pub trait WorkspaceStore: Send + Sync {
    /// Creates a workspace; `AlreadyExists` if the id or the name is taken. It holds no ports
    /// unless `new` brings a block it held elsewhere, which is checked against every block
    /// held as [`WorkspaceStore::assign_ports`] chooses one (refused if any port is taken).
    async fn create(&self, new: NewWorkspace, now: DateTime<Utc>) -> Result<Workspace>;
    async fn load(&self, id: &WorkspaceId) -> Result<Workspace>;
    async fn load_by_name(&self, name: &WorkspaceName) -> Result<Workspace>;
    /// Ids only: cheap, for prefix resolution.
    async fn list_ids(&self) -> Result<Vec<WorkspaceId>>;
    /// Every workspace, sorted by id.
    async fn list(&self) -> Result<Vec<Workspace>>;
    /// Every workspace, sorted by id, as the JSON text of its record ([`WorkspacesJson`]): what
    /// a front end writes out as it is (`berth workspace list --json`). A store that keeps its
    /// records as JSON text (the filesystem store's index) hands that text over unparsed; the
    /// others serialize [`WorkspaceStore::list`].
    async fn list_json(&self) -> Result<WorkspacesJson> {
        Ok(WorkspacesJson::of(&self.list().await?))
    }
    /// Up to `limit` workspaces whose ids sort after `after` (from the first without it), in
    /// id order: one page of a listing. Only the page's records are loaded, so a page costs
    /// about the same however many workspaces there are (a database reads them off its
    /// primary key; files read the folder's names, then the page's records).
    async fn page(&self, after: Option<&WorkspaceId>, limit: usize) -> Result<Vec<Workspace>>;
    /// Removes the workspace and everything it holds (storage, sessions). Returns false if the
    /// condition did not hold. Bindings are the `BindingStore`'s; the manager removes them.
    async fn delete(&self, id: &WorkspaceId, condition: DeleteCondition) -> Result<bool>;
    /// Records a use at `at` (never moves the time backwards).
    async fn update_accessed(&self, id: &WorkspaceId, at: DateTime<Utc>) -> Result<()>;
    /// Workspaces last used before `cutoff`, never `default`. Also clears debris that
    /// interrupted operations may have left (half-created or half-deleted workspaces). It
    /// removes no workspace: the manager does that through `delete`, so bindings go too.
    async fn gc(&self, cutoff: DateTime<Utc>) -> Result<Vec<Workspace>>;
    /// The workspace's own config overrides, if it has any.
    async fn load_config(&self, id: &WorkspaceId) -> Result<Option<ConfigText>>;
    /// Replaces the workspace's own config overrides with `text`, atomically; `NotFound` if
    /// the workspace does not exist. The text is stored as given (comments and all): callers
    /// that edit a config change the text they loaded, never a re-serialized copy.
    async fn save_config(&self, id: &WorkspaceId, text: &str) -> Result<()>;
    /// Replaces the git part of a workspace's record (its repository was moved and its
    /// worktrees reattached), keeping every other field; `NotFound` if the workspace does not
    /// exist.
    async fn set_git(&self, id: &WorkspaceId, git: &GitInfo) -> Result<()>;
    /// Marks the workspace archived at `at`, or in use again with `None`, keeping every other
    /// field, and returns the record as written; `NotFound` if the workspace does not exist.
    async fn set_archived(&self, id: &WorkspaceId, at: Option<DateTime<Utc>>) -> Result<Workspace>;
    /// The workspace's block of ports: the one it holds (whatever `range` says now), else the
    /// lowest block of `range` that overlaps no other workspace's ([`PortRange::lowest_free`]),
    /// written into its record before this returns and held until the workspace is deleted.
    /// Atomic across processes and machines sharing the store: the blocks held are read and
    /// the choice written while no other `assign_ports` and no create with a block runs, so
    /// two workspaces never share a port. `NotFound` if the workspace does not exist;
    /// `Refused`, naming the `[ports]` keys, when no block of the range is free.
    async fn assign_ports(&self, id: &WorkspaceId, range: PortRange) -> Result<PortBlock>;
    /// The workspace's folder on this machine, where the backend keeps one: a folder named by
    /// the id, in one folder for all of them (`<folder>/<id>`), which a listing of thousands
    /// relies on to name each folder without asking for it.
    fn workspace_dir(&self, id: &WorkspaceId) -> Option<PathBuf>;
}

/// One device → workspace binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binding {
    pub device: DeviceId,
    pub workspace: WorkspaceId,
}

#[async_trait]
pub trait BindingStore: Send + Sync {
    async fn resolve(&self, device: &DeviceId) -> Result<Option<WorkspaceId>>;
    /// Binds, replacing any earlier binding; returns the one replaced.
    async fn bind(&self, device: &DeviceId, workspace: &WorkspaceId)
    -> Result<Option<WorkspaceId>>;
    /// Binds only if the device has no binding, atomically across processes. Returns the
    /// workspace the device is bound to afterwards: `workspace`, or whichever got there first.
    async fn bind_if_absent(
        &self,
        device: &DeviceId,
        workspace: &WorkspaceId,
    ) -> Result<WorkspaceId>;
    /// Returns the workspace the device was bound to.
    async fn unbind(&self, device: &DeviceId) -> Result<Option<WorkspaceId>>;
    /// Removes every binding to `workspace`; returns the devices that were bound.
    async fn unbind_workspace(&self, workspace: &WorkspaceId) -> Result<Vec<DeviceId>>;
    /// Every binding, sorted by device.
    async fn list(&self) -> Result<Vec<Binding>>;
}

#[async_trait]
pub trait StorageStore: Send + Sync {
    async fn read(&self, scope: &StorageScope, path: &StoragePath) -> Result<Vec<u8>>;
    /// Writes the whole file atomically, creating parent folders.
    async fn write(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        contents: Vec<u8>,
    ) -> Result<()>;
    /// Replaces a file's contents without waiting for the disk, creating parent folders:
    /// for scratch kept as it goes (an answer streaming), which must outlive the process, not
    /// the machine (a lost machine may find it empty or cut short). The scope's size limit
    /// holds. The default writes as `write` does, durably.
    async fn write_unsynced(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        contents: Vec<u8>,
    ) -> Result<()> {
        self.write(scope, path, contents).await
    }
    /// Appends to a file `write` made, without waiting for the disk: for scratch kept as it
    /// goes (an answer streaming), which must outlive the process, not the machine.
    /// `NotFound` when there is no such file; the scope's size limit holds.
    async fn append_unsynced(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        more: Vec<u8>,
    ) -> Result<()>;
    /// The entries of a folder (`None` = the root), sorted by name.
    async fn list(
        &self,
        scope: &StorageScope,
        dir: Option<&StoragePath>,
    ) -> Result<Vec<StorageEntry>>;
    /// Removes a file or an empty folder; a non-empty folder only with `recursive`.
    async fn remove(&self, scope: &StorageScope, path: &StoragePath, recursive: bool)
    -> Result<()>;
}

/// Sessions and their transcripts. A transcript is append-only: `append` adds one message in
/// O(1) (no read or rewrite of what is there); only `write_transcript` and `clear` replace it,
/// atomically.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Creates the session with an empty transcript (frontmatter only). `NotFound` if the
    /// workspace does not exist, `AlreadyExists` if the id is taken anywhere in the home.
    async fn create(&self, new: NewSession, now: DateTime<Utc>) -> Result<Session>;
    async fn load(&self, id: &SessionId) -> Result<Session>;
    /// Sessions of one workspace, or of all; oldest first.
    async fn list(&self, workspace: Option<&WorkspaceId>) -> Result<Vec<Session>>;
    /// Ids only (may include sessions just deleted): cheap, for prefix resolution.
    async fn list_ids(&self) -> Result<Vec<SessionId>>;
    /// Up to `limit` sessions (of all workspaces) whose ids sort after `after`, in id order:
    /// one page of a listing, loading only the page's records.
    async fn page(&self, after: Option<&SessionId>, limit: usize) -> Result<Vec<Session>>;
    async fn read_transcript(&self, id: &SessionId) -> Result<Transcript>;
    /// What the transcript is now, cheaply (no message is read): a watcher reads the
    /// transcript again only when this changed. It changes with every message added and
    /// every replacement by a transcript of another length.
    async fn transcript_stamp(&self, id: &SessionId) -> Result<TranscriptStamp>;
    /// `Refused` if the session is closed, checked atomically with the append.
    async fn append(&self, id: &SessionId, message: &Message) -> Result<()>;
    /// [`append`](Self::append), answered once every reader of the transcript sees the
    /// message, while it goes on to the disk: for a caller with other work to do meanwhile (a
    /// turn asks its model). The message is durable once the [`Syncing`] is waited for. The
    /// default writes durably first.
    async fn append_syncing(&self, id: &SessionId, message: &Message) -> Result<Syncing> {
        self.append(id, message).await?;
        Ok(Syncing::done())
    }
    async fn write_transcript(&self, id: &SessionId, messages: &[Message]) -> Result<()>;
    /// Empties the transcript, keeping its frontmatter.
    async fn clear(&self, id: &SessionId) -> Result<()>;
    /// Removes the session with its transcript and storage.
    async fn delete(&self, id: &SessionId) -> Result<()>;
    /// `Refused` if the move is not allowed by `SessionStatus::can_become`.
    async fn set_status(
        &self,
        id: &SessionId,
        status: SessionStatus,
        now: DateTime<Utc>,
    ) -> Result<Session>;
    async fn set_title(&self, id: &SessionId, title: &str, now: DateTime<Utc>) -> Result<Session>;
    /// Adds a turn's tokens to the session's, atomically: two turns' adds never lose one.
    /// Allowed on a closed session (the turn that used them may have ended as it closed).
    /// [`SessionStore::count_turn`] with no title.
    async fn add_usage(&self, id: &SessionId, usage: TokenUsage) -> Result<Session> {
        self.count_turn(id, usage, None, Utc::now()).await
    }
    /// A turn's end on the session's record, in one change: its tokens added, as
    /// [`SessionStore::add_usage`] says, and, when `title` is given and the session has
    /// none yet, that title (stamped `now`), as [`SessionStore::set_title`] sets it. One
    /// change where a first turn made two: with the file store each is a new file and two
    /// syncs, at the end of every turn a server runs.
    async fn count_turn(
        &self,
        id: &SessionId,
        usage: TokenUsage,
        title: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Session>;
    /// Takes the session's turn: while the hold lives, no other hold on it is given, in this
    /// process or another, on this machine or another sharing the store (refused). Dropping
    /// the hold gives the turn back; a process that dies gives it back too (with the file
    /// store at once, with a database when its lease runs out).
    async fn hold_turn(&self, id: &SessionId) -> Result<TurnHold>;
}

/// One state of a transcript, as [`SessionStore::transcript_stamp`] tells it: equal stamps,
/// the same messages. What it is made of is the store's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranscriptStamp([u64; 4]);

impl TranscriptStamp {
    pub fn new(parts: [u64; 4]) -> TranscriptStamp {
        TranscriptStamp(parts)
    }
}

/// A session's turn, held (see [`SessionStore::hold_turn`]). [`TurnHold::release`] gives it
/// back and returns once it is back; dropping it gives it back too, as soon as it can.
pub struct TurnHold {
    _keep: Box<dyn Send + Sync>,
    release: Option<Release>,
}

type Release = Box<
    dyn FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync,
>;

impl TurnHold {
    /// A hold kept by `inner`, whose drop gives the turn back.
    pub fn new(inner: impl Send + Sync + 'static) -> TurnHold {
        TurnHold {
            _keep: Box::new(inner),
            release: None,
        }
    }

    /// A hold kept by `inner`, given back by `release` (awaited by [`TurnHold::release`]).
    pub fn with_release(
        inner: impl Send + Sync + 'static,
        release: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
        + Send
        + Sync
        + 'static,
    ) -> TurnHold {
        TurnHold {
            _keep: Box::new(inner),
            release: Some(Box::new(release)),
        }
    }

    /// Gives the turn back; once this returns, another hold can be had.
    pub async fn release(mut self) {
        if let Some(release) = self.release.take() {
            release().await;
        }
    }
}

impl std::fmt::Debug for TurnHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnHold")
    }
}

/// The refusal every store gives for a turn held elsewhere.
pub fn turn_held(id: &SessionId) -> crate::Error {
    crate::Error::TurnHeld {
        session: id.to_string(),
    }
}
