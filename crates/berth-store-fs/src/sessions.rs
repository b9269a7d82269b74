//! `SessionStore` on the filesystem: `workspaces/<wid>/sessions/<sid>/{session.toml,
//! session.md, storage/}` (and `session.recovered.md` once an append cut a torn tail), plus `session-index/<sid>` holding the owning workspace id, so a
//! session is found by its id alone in one read.
//!
//! Locks: creating and deleting sessions (and index entries) happens under the owning
//! workspace's `.lock` and then the home-wide `sessions.lock`; everything that changes one
//! session (append, clear, metadata) under the session's own `.lock`. Like the name index, an
//! index entry is written before its session is committed and verified on every read.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use berth_core::transcript::{self, Frontmatter, Message, Transcript};
use berth_core::{
    Error, NewSession, Result, Session, SessionId, SessionStatus, SessionStore, Syncing,
    TokenUsage, TranscriptStamp, TurnHold, WorkspaceId,
};
use chrono::{DateTime, Utc};

use crate::durable::{FileLock, random_suffix, sync_dir, write_atomic};
use crate::{FsStore, Layout, ids_in, io_err, parse_toml, read_optional, task_failed};

const STAGING: &str = ".staging-";
const TRASH: &str = ".trash-";
/// Beside `session.md`: every torn tail an append cut off, so none is ever lost.
const RECOVERY: &str = "session.recovered.md";
/// The longest transcript read on the caller's thread (see `read_transcript`): a few dozen
/// messages, read and parsed in a fraction of a millisecond.
const INLINE_TRANSCRIPT_MAX: u64 = 64 * 1024;

impl Layout {
    pub(crate) fn session_index(&self) -> PathBuf {
        self.home.join("session-index")
    }

    pub(crate) fn sessions_dir(&self, ws: &WorkspaceId) -> PathBuf {
        self.workspace_dir(ws).join("sessions")
    }

    /// The workspace the index says owns `id`.
    fn session_owner(&self, id: &SessionId) -> Result<WorkspaceId> {
        let path = self.session_index().join(id.as_str());
        let text = read_optional(&path)?.ok_or_else(|| missing(id))?;
        WorkspaceId::new(text.trim()).map_err(|e| Error::Corrupt {
            file: path,
            line: Some(1),
            reason: e.to_string(),
        })
    }

    /// The folder of a live session. The index is read once per session: its answer is kept
    /// (`owners`) while the folder it names holds the session. When that folder is gone (the
    /// session deleted, here or by another process, or made again elsewhere under the same
    /// id), the index is read again.
    fn session_dir(&self, id: &SessionId) -> Result<(WorkspaceId, PathBuf)> {
        let owners = || self.owners.lock().unwrap_or_else(|e| e.into_inner());
        let known = owners().get(id).cloned();
        if let Some(ws) = known {
            let dir = self.sessions_dir(&ws).join(id.as_str());
            if dir.join("session.toml").is_file() {
                return Ok((ws, dir));
            }
            owners().remove(id);
        }
        let ws = self.session_owner(id)?;
        let dir = self.sessions_dir(&ws).join(id.as_str());
        if !dir.join("session.toml").is_file() {
            return Err(missing(id)); // a stale index entry
        }
        owners().insert(id.clone(), ws.clone());
        Ok((ws, dir))
    }

    fn read_session_file(&self, dir: &Path, id: &SessionId, ws: &WorkspaceId) -> Result<Session> {
        let path = dir.join("session.toml");
        let text = read_optional(&path)?.ok_or_else(|| missing(id))?;
        let session: Session = parse_toml(&path, &text)?;
        if &session.id != id || &session.workspace_id != ws {
            return Err(Error::Corrupt {
                file: path,
                line: None,
                reason: format!(
                    "it names session {:?} of workspace {:?}, but lives at {:?} in {:?}",
                    session.id.as_str(),
                    session.workspace_id.as_str(),
                    id.as_str(),
                    ws.as_str()
                ),
            });
        }
        let mut session = session;
        with_transcript_time(dir, &mut session);
        Ok(session)
    }

    pub(crate) fn load_session(&self, id: &SessionId) -> Result<Session> {
        let (ws, dir) = self.session_dir(id)?;
        self.read_session_file(&dir, id, &ws)
    }

    fn create_session(&self, new: NewSession, now: DateTime<Utc>) -> Result<Session> {
        let _ws_guard = self.lock_workspace(&new.workspace)?;
        if !self.workspace_file(&new.workspace).is_file() {
            return Err(Error::not_found(format!("workspace '{}'", new.workspace)));
        }
        let _guard = self.lock_sessions()?;
        let id = new.id.unwrap_or_else(SessionId::generate);
        match self.load_session(&id) {
            Ok(_) => {
                return Err(Error::AlreadyExists {
                    what: format!("session '{id}'"),
                });
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        let entry = self.session_index().join(id.as_str());
        write_atomic(&entry, format!("{}\n", new.workspace).as_bytes())
            .map_err(io_err("write", &entry))?;
        let session = Session {
            id: id.clone(),
            workspace_id: new.workspace.clone(),
            title: new.title,
            provider: new.provider,
            model: new.model,
            cwd: new.cwd,
            agent: new.agent,
            status: SessionStatus::Idle,
            created_at: now,
            updated_at: now,
            usage: TokenUsage::default(),
        };
        let parent = self.sessions_dir(&new.workspace);
        fs::create_dir_all(&parent).map_err(io_err("create", &parent))?;
        let staging = parent.join(format!("{STAGING}{id}"));
        build_session_dir(&staging, &session)
            .map_err(io_err("create", &staging))
            .inspect_err(|_| {
                let _ = fs::remove_dir_all(&staging);
            })?;
        let dir = parent.join(id.as_str());
        fs::rename(&staging, &dir).map_err(io_err("create", &dir))?;
        sync_dir(&parent).map_err(io_err("sync", &parent))?;
        // Its owner is known: its first prompt does not read the index for it.
        self.owners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, new.workspace);
        let mut session = session;
        with_transcript_time(&dir, &mut session);
        Ok(session)
    }

    fn list_sessions(&self, ws: Option<&WorkspaceId>) -> Result<Vec<Session>> {
        let mut out = Vec::new();
        match ws {
            Some(ws) => {
                if !self.workspace_file(ws).is_file() {
                    return Err(Error::not_found(format!("workspace '{ws}'")));
                }
                let parent = self.sessions_dir(ws);
                for id in ids_in(&parent, |n| SessionId::new(n).ok())? {
                    match self.read_session_file(&parent.join(id.as_str()), &id, ws) {
                        Ok(s) => out.push(s),
                        Err(e) if e.is_not_found() => {} // deleted meanwhile
                        Err(e) => return Err(e),
                    }
                }
            }
            None => {
                for id in self.list_session_ids()? {
                    match self.load_session(&id) {
                        Ok(s) => out.push(s),
                        Err(e) if e.is_not_found() => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        out.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(out)
    }

    fn list_session_ids(&self) -> Result<Vec<SessionId>> {
        ids_in(&self.session_index(), |n| SessionId::new(n).ok())
    }

    /// A page of sessions in id order: the session index's names, then the page's records;
    /// a stale index entry (its session deleted) is passed over.
    fn session_page(&self, after: Option<&SessionId>, limit: usize) -> Result<Vec<Session>> {
        let ids = self.list_session_ids()?;
        let start = after.map_or(0, |a| ids.partition_point(|id| id <= a));
        let mut page = Vec::new();
        for id in &ids[start..] {
            if page.len() >= limit {
                break;
            }
            match self.load_session(id) {
                Ok(s) => page.push(s),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(page)
    }

    /// The session's transcript; `None` when it is longer than `most` bytes (opened and
    /// looked at once, for the caller to read it elsewhere).
    fn read_transcript(&self, id: &SessionId, most: Option<u64>) -> Result<Option<Transcript>> {
        use std::io::Read;
        let (_, dir) = self.session_dir(id)?;
        let path = dir.join("session.md");
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(missing(id)),
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        let len = file.metadata().map_err(io_err("read", &path))?.len();
        if most.is_some_and(|most| len > most) {
            return Ok(None);
        }
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        file.read_to_end(&mut bytes)
            .map_err(io_err("read", &path))?;
        let mut transcript = transcript::parse(&bytes).map_err(|e| corrupt(&path, e))?;
        let recovery = dir.join(RECOVERY);
        if recovery.is_file() {
            transcript.recovery_file = Some(recovery);
        }
        Ok(Some(transcript))
    }

    /// The transcript file's identity and size: an append grows it, a replacement is a new
    /// file (written beside it and renamed).
    fn transcript_stamp(&self, id: &SessionId) -> Result<TranscriptStamp> {
        use std::os::unix::fs::MetadataExt;
        let (_, dir) = self.session_dir(id)?;
        let path = dir.join("session.md");
        let meta = fs::metadata(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => missing(id),
            _ => io_err("look at", &path)(e),
        })?;
        Ok(TranscriptStamp::new([
            meta.dev(),
            meta.ino(),
            meta.len(),
            meta.mtime_nsec() as u64 ^ (meta.mtime() as u64).rotate_left(32),
        ]))
    }

    /// Appends one message: O(1) in the transcript's length. The tail check reads a few bytes
    /// from the end; only when the file does not end with berth's trailer (a crash left a torn
    /// append, or a person added text) does it read the whole file, once.
    fn append(&self, id: &SessionId, message: &Message) -> Result<()> {
        let (file, path) = self.append_waiting(id, message)?;
        sync_appended(&file, &path)
    }

    /// [`Layout::append`] up to its sync: the message is written, under the transcript's lock,
    /// and every reader sees it; the file it is in comes back to be synced. The lock is let go
    /// before the sync: a later append syncs this message with its own, and waits for no disk.
    ///
    /// `wait` false: on an async thread, where nothing may wait. `None` then, with nothing
    /// written, when another writer holds the transcript's lock or its tail needs mending or a
    /// long read ([`ensure_clean_tail`]): the caller does it again where it may wait.
    fn append_unsynced(
        &self,
        id: &SessionId,
        message: &Message,
        wait: bool,
    ) -> Result<Option<(File, PathBuf)>> {
        let (ws, dir) = self.session_dir(id)?;
        let _guard = match wait {
            true => lock_transcript(&dir, id)?,
            false => match try_lock_in(&dir, TRANSCRIPT_LOCK, id)? {
                Some(guard) => guard,
                None => return Ok(None),
            },
        };
        // Checked under the lock: a session closed by another process a moment ago is closed.
        self.read_session_file(&dir, id, &ws)?.check_open()?;
        let path = dir.join("session.md");
        // Opened without waiting, and refused unless a plain file (`ensure_clean_tail`): a
        // FIFO where the transcript belongs never holds up the thread, async or not.
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => missing(id),
                _ => io_err("open", &path)(e),
            })?;
        if !ensure_clean_tail(&file, &path, &dir.join(RECOVERY), wait)? {
            return Ok(None);
        }
        file.write_all(transcript::encode_message(message).as_bytes())
            .map_err(io_err("append to", &path))?;
        Ok(Some((file, path)))
    }

    /// [`Layout::append_unsynced`] where it may wait: it appends, or fails.
    fn append_waiting(&self, id: &SessionId, message: &Message) -> Result<(File, PathBuf)> {
        self.append_unsynced(id, message, true)?.ok_or_else(|| {
            let never = io::Error::other("a waiting append came back without appending");
            Error::io(format!("cannot append to session {id}"), never)
        })
    }

    fn write_transcript(&self, id: &SessionId, messages: &[Message]) -> Result<()> {
        let (ws, dir) = self.session_dir(id)?;
        let _guard = lock_transcript(&dir, id)?;
        let session = self.read_session_file(&dir, id, &ws)?;
        let path = dir.join("session.md");
        let text = transcript::encode(&frontmatter(&session), messages);
        write_atomic(&path, text.as_bytes()).map_err(io_err("write", &path))
    }

    /// Changes the session's record. `with_transcript`: also hold the transcript's lock, for
    /// a change that appends must not cross (a close: no append lands after it).
    fn update_session(
        &self,
        id: &SessionId,
        with_transcript: bool,
        change: impl FnOnce(&mut Session) -> Result<()>,
    ) -> Result<Session> {
        let (ws, dir) = self.session_dir(id)?;
        let _guard = lock_session(&dir, id)?;
        let _transcript = match with_transcript {
            true => Some(lock_transcript(&dir, id)?),
            false => None,
        };
        let mut session = self.read_session_file(&dir, id, &ws)?;
        change(&mut session)?;
        let path = dir.join("session.toml");
        let text = toml::to_string(&session).expect("session serializes");
        write_atomic(&path, text.as_bytes()).map_err(io_err("write", &path))?;
        // The transcript's time is the session's last change (`with_transcript_time`): a
        // change stamped here, at a time its caller chose (a migration keeps the source's),
        // is the last one until the next append.
        let transcript = dir.join("session.md");
        fs::File::options()
            .write(true)
            .open(&transcript)
            .and_then(|f| f.set_modified(session.updated_at.into()))
            .map_err(io_err("stamp", &transcript))?;
        Ok(session)
    }

    fn delete_session(&self, id: &SessionId) -> Result<()> {
        let _guard = self.lock_sessions()?;
        let (ws, dir) = self.session_dir(id)?;
        let _session_guard = lock_session(&dir, id)?;
        let _transcript_guard = lock_transcript(&dir, id)?;
        let parent = self.sessions_dir(&ws);
        let trash = parent.join(format!("{TRASH}{id}-{}", random_suffix()));
        fs::rename(&dir, &trash).map_err(io_err("remove", &dir))?;
        sync_dir(&parent).map_err(io_err("sync", &parent))?;
        let _ = fs::remove_file(self.session_index().join(id.as_str()));
        let _ = fs::remove_dir_all(&trash);
        Ok(())
    }

    /// Drops index entries of sessions that no longer exist (their workspace or folder gone).
    pub(crate) fn sweep_session_index(&self) -> Result<()> {
        let _guard = self.lock_sessions()?;
        for id in self.list_session_ids()? {
            if let Err(e) = self.session_dir(&id)
                && e.is_not_found()
            {
                let _ = fs::remove_file(self.session_index().join(id.as_str()));
            }
        }
        Ok(())
    }

    pub(crate) fn lock_sessions(&self) -> Result<FileLock> {
        let path = self.lock("sessions.lock");
        FileLock::acquire(&path).map_err(io_err("lock", &path))
    }
}

/// The lock on the session's record (`session.toml`). Taken before [`lock_transcript`] by
/// whoever takes both.
/// The lock files of a session's folder: its record's, its transcript's, and its turn's
/// hold. Made with the session, so a first prompt creates no file before its model call
/// (a new inode can cost a millisecond on a filesystem that deleted many lately); made again
/// on use when missing (a session of an older berth, a lost file).
const SESSION_LOCKS: [&str; 3] = [RECORD_LOCK, TRANSCRIPT_LOCK, TURN_LOCK];
/// Moves `session.updated_at` up to its transcript's last write. An append changes the
/// session without rewriting `session.toml`, which would be a second durable write for every
/// message; the transcript's modification time says when it happened.
fn with_transcript_time(dir: &Path, session: &mut Session) {
    if let Ok(written) = fs::metadata(dir.join("session.md")).and_then(|m| m.modified()) {
        session.updated_at = session.updated_at.max(DateTime::<Utc>::from(written));
    }
}

const RECORD_LOCK: &str = ".lock";
const TRANSCRIPT_LOCK: &str = ".transcript.lock";
const TURN_LOCK: &str = ".turn.lock";

fn lock_session(dir: &Path, id: &SessionId) -> Result<FileLock> {
    lock_in(dir, RECORD_LOCK, id)
}

/// The lock on the session's transcript (`session.md`): appends and rewrites take this one
/// only, so a record's change that appends need not wait for (a title written while the
/// answer streams) never holds up the answer's append.
fn lock_transcript(dir: &Path, id: &SessionId) -> Result<FileLock> {
    lock_in(dir, TRANSCRIPT_LOCK, id)
}

/// [`lock_in`] that never waits: `None` while another holds the lock.
fn try_lock_in(dir: &Path, name: &str, id: &SessionId) -> Result<Option<FileLock>> {
    let path = dir.join(name);
    FileLock::try_acquire(&path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => missing(id),
        _ => io_err("lock", &path)(e),
    })
}

fn lock_in(dir: &Path, name: &str, id: &SessionId) -> Result<FileLock> {
    let path = dir.join(name);
    FileLock::acquire(&path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => missing(id),
        _ => io_err("lock", &path)(e),
    })
}

/// Makes sure the file ends at a block boundary before appending to it. A torn tail is copied
/// to `recovery` (durably) before it is cut off: the parser only calls a tail torn when berth's
/// own mark says so, but a copy costs nothing and makes "nothing is ever gone" true whatever
/// wrote the bytes.
///
/// `wait` false (on an async thread): `Ok(false)`, with nothing changed, where the tail needs
/// mending (durable writes) or a whole read of a transcript longer than the reads made there
/// ([`INLINE_TRANSCRIPT_MAX`]).
fn ensure_clean_tail(file: &File, path: &Path, recovery: &Path, wait: bool) -> Result<bool> {
    let meta = file.metadata().map_err(io_err("read", path))?;
    if !meta.is_file() {
        return Err(Error::Corrupt {
            file: path.to_owned(),
            line: None,
            reason: "not a plain file".to_owned(),
        });
    }
    let len = meta.len();
    let tail_len = len.min(64);
    let mut tail = vec![0; tail_len as usize];
    file.read_exact_at(&mut tail, len - tail_len)
        .map_err(io_err("read", path))?;
    if let Some(n) = transcript::last_block_len(&tail) {
        let mut head = [0u8; 4];
        if n as u64 <= len
            && file.read_exact_at(&mut head, len - n as u64).is_ok()
            && &head == b"\n## "
        {
            return Ok(true);
        }
    }
    // Not berth's trailer at the end: a fresh transcript (frontmatter only), blocks a person
    // wrote, a message edited by hand, a torn append, or corruption. Parsing the whole file
    // tells which; only a torn append is cut off, and corruption refuses the append.
    if !wait && len > INLINE_TRANSCRIPT_MAX {
        return Ok(false);
    }
    // From the file the append writes to (its offset is still at the start: appends move
    // only the end), not from the path again.
    let mut bytes = Vec::with_capacity(len as usize);
    io::Read::read_to_end(&mut &*file, &mut bytes).map_err(io_err("read", path))?;
    let parsed = transcript::parse(&bytes).map_err(|e| corrupt(path, e))?;
    if parsed.torn_tail > 0 {
        if !wait {
            return Ok(false);
        }
        preserve_tail(recovery, &bytes[parsed.complete_len..], parsed.complete_len)
            .map_err(io_err("write", recovery))?;
        file.set_len(parsed.complete_len as u64)
            .map_err(io_err("repair", path))?;
        file.sync_all().map_err(io_err("repair", path))?;
    }
    Ok(true)
}

/// Appends a cut tail to the recovery file beside the transcript, with a line saying where it
/// came from, and makes it durable before the caller cuts. A crash between the two leaves the
/// bytes in both files; the next append copies them again, which loses nothing.
fn preserve_tail(recovery: &Path, tail: &[u8], offset: usize) -> io::Result<()> {
    let created = !recovery.exists();
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(recovery)?;
    let note = format!(
        "<!-- {} bytes cut from the end of session.md (offset {offset}) on {}: an append that did not finish -->\n",
        tail.len(),
        Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    file.write_all(note.as_bytes())?;
    file.write_all(tail)?;
    file.write_all(b"\n")?;
    file.sync_all()?;
    if created && let Some(dir) = recovery.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

fn frontmatter(s: &Session) -> Frontmatter {
    Frontmatter {
        provider: s.provider.as_str().to_owned(),
        model: s.model.clone(),
        created_at: s
            .created_at
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    }
}

fn build_session_dir(dir: &Path, session: &Session) -> io::Result<()> {
    if dir.exists() {
        fs::remove_dir_all(dir)?; // debris of an interrupted create; we hold the lock
    }
    fs::create_dir(dir)?;
    fs::create_dir(dir.join("storage"))?;
    for (name, text) in [
        (
            "session.toml",
            toml::to_string(session).expect("session serializes"),
        ),
        (
            "session.md",
            transcript::encode_frontmatter(&frontmatter(session)),
        ),
    ] {
        let mut f = File::create(dir.join(name))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    for name in SESSION_LOCKS {
        File::create(dir.join(name))?;
    }
    sync_dir(dir)
}

fn corrupt(path: &Path, e: transcript::FormatError) -> Error {
    Error::Corrupt {
        file: path.to_owned(),
        line: Some(e.line),
        reason: e.reason,
    }
}

fn missing(id: &SessionId) -> Error {
    Error::not_found(format!("session '{id}'"))
}

/// Provider and model end up in the frontmatter; they must be single-line names.
#[async_trait]
impl SessionStore for FsStore {
    async fn create(&self, new: NewSession, now: DateTime<Utc>) -> Result<Session> {
        new.check()?;
        self.blocking(move |l| l.create_session(new, now)).await
    }

    async fn load(&self, id: &SessionId) -> Result<Session> {
        self.inline(|l| l.load_session(id))
    }

    async fn list(&self, ws: Option<&WorkspaceId>) -> Result<Vec<Session>> {
        let ws = ws.cloned();
        self.blocking(move |l| l.list_sessions(ws.as_ref())).await
    }

    async fn list_ids(&self) -> Result<Vec<SessionId>> {
        self.blocking(|l| l.list_session_ids()).await
    }

    async fn page(&self, after: Option<&SessionId>, limit: usize) -> Result<Vec<Session>> {
        let after = after.cloned();
        self.blocking(move |l| l.session_page(after.as_ref(), limit))
            .await
    }

    async fn read_transcript(&self, id: &SessionId) -> Result<Transcript> {
        // A short transcript (every turn reads its session's) is read on the caller's thread,
        // as a small storage file is; a long one on the blocking pool.
        if let Some(short) = self.inline(|l| l.read_transcript(id, Some(INLINE_TRANSCRIPT_MAX)))? {
            return Ok(short);
        }
        let id = id.clone();
        self.blocking(move |l| l.read_transcript(&id, None)?.ok_or_else(|| missing(&id)))
            .await
    }

    async fn transcript_stamp(&self, id: &SessionId) -> Result<TranscriptStamp> {
        let id = id.clone();
        self.blocking(move |l| l.transcript_stamp(&id)).await
    }

    async fn append(&self, id: &SessionId, message: &Message) -> Result<()> {
        let (id, message) = (id.clone(), message.clone());
        self.blocking(move |l| l.append(&id, &message)).await
    }

    async fn append_syncing(&self, id: &SessionId, message: &Message) -> Result<Syncing> {
        // On the caller's thread when nothing makes it wait (one turn at a time holds a
        // session, so its transcript's lock is free): a trip through the blocking pool cost
        // every prompt two thread switches before its model call. Where another writer holds
        // the lock, or the tail needs mending or a long read, through the pool.
        let (file, path) = match self.inline(|l| l.append_unsynced(id, message, false))? {
            Some(appended) => appended,
            None => {
                let (id, message) = (id.clone(), message.clone());
                self.blocking(move |l| l.append_waiting(&id, &message))
                    .await?
            }
        };
        // Started now: the disk syncs while the caller goes on.
        let sync = tokio::task::spawn_blocking(move || sync_appended(&file, &path));
        Ok(Syncing::after(
            async move { sync.await.map_err(task_failed)? },
        ))
    }

    async fn write_transcript(&self, id: &SessionId, messages: &[Message]) -> Result<()> {
        let (id, messages) = (id.clone(), messages.to_vec());
        self.blocking(move |l| l.write_transcript(&id, &messages))
            .await
    }

    async fn clear(&self, id: &SessionId) -> Result<()> {
        let id = id.clone();
        self.blocking(move |l| l.write_transcript(&id, &[])).await
    }

    async fn delete(&self, id: &SessionId) -> Result<()> {
        let id = id.clone();
        self.blocking(move |l| l.delete_session(&id)).await
    }

    async fn set_status(
        &self,
        id: &SessionId,
        status: SessionStatus,
        now: DateTime<Utc>,
    ) -> Result<Session> {
        let id = id.clone();
        self.blocking(move |l| {
            l.update_session(&id, true, |s| {
                s.check_can_become(status)?;
                s.status = status;
                s.updated_at = now;
                Ok(())
            })
        })
        .await
    }

    async fn hold_turn(&self, id: &SessionId) -> Result<TurnHold> {
        // On the caller's thread: an open and a lock that never waits (`try_lock`), where a
        // trip through the blocking pool cost every prompt two thread switches.
        self.inline(|l| {
            let (_, dir) = l.session_dir(id)?;
            // A lock the kernel drops with the process: a turn killed mid-way holds nothing.
            match try_lock_in(&dir, TURN_LOCK, id)? {
                Some(lock) => Ok(TurnHold::new(lock)),
                None => Err(berth_core::turn_held(id)),
            }
        })
    }

    async fn count_turn(
        &self,
        id: &SessionId,
        usage: TokenUsage,
        title: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Session> {
        let (id, title) = (id.clone(), title.map(str::to_owned));
        self.blocking(move |l| {
            l.update_session(&id, false, |s| {
                s.usage = s.usage.plus(usage);
                if let Some(title) = title.filter(|_| s.title.is_empty()) {
                    s.title = title;
                    s.updated_at = now;
                }
                Ok(())
            })
        })
        .await
    }

    async fn set_title(&self, id: &SessionId, title: &str, now: DateTime<Utc>) -> Result<Session> {
        let (id, title) = (id.clone(), title.to_owned());
        self.blocking(move |l| {
            l.update_session(&id, false, |s| {
                s.title = title;
                s.updated_at = now;
                Ok(())
            })
        })
        .await
    }
}

/// Makes what [`Layout::append_unsynced`] wrote durable.
fn sync_appended(file: &File, path: &Path) -> Result<()> {
    file.sync_data().map_err(io_err("append to", path))
}
