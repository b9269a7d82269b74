//! Runs kept as files under the home, for a home whose store is its files.
//!
//! Each run has a folder `<home>/runs/<id>/`:
//! - `run.json`: the [`RunRecord`], written only by the run's supervisor, atomically and
//!   durably;
//! - `events.jsonl`: every [`RunEvent`] as it came, one JSON object per line; appended
//!   without an fsync each: a log to watch, not the record;
//! - `lock`: held (an exclusive `flock`) by the supervisor for as long as it lives. The kernel
//!   drops it when the process dies, however it dies, so "is the run still running?" is "is
//!   its lock held?", which a reused pid or a reboot cannot fool. Only a supervisor ever
//!   takes it: a reader asks the kernel's table of locks whether someone holds it, so that
//!   readers polling a run (`run wait`, a page) never make a new supervisor wait or give up;
//! - `record.lock`: held for a moment by whoever writes `run.json` on the run's behalf when
//!   its supervisor is gone, and by a supervisor taking the run: the two never write over
//!   each other;
//! - `stop`, `stop-<N>`, `tell-<N>-<stamp>`, `answer-<N>-<question>`: requests of other processes, which the
//!   supervisor takes when `SIGUSR1` (or its next poll) tells it to look.
//!
//! The index `<home>/run-sessions/<session>` (the run's id) finds a session's run.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;

use super::{
    Decide, Hold, KeptError, PageCursor, Request, RunBackend, RunId, RunRecord, StopRequest,
};
use crate::event::RunEvent;

/// How long [`FileRuns::hold`] waits for the lock of a supervisor that is ending.
const LOCK_PATIENCE: Duration = Duration::from_secs(3);

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> KeptError + '_ {
    move |source| KeptError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The runs under one home's `runs/`.
#[derive(Debug, Clone)]
pub(crate) struct FileRuns {
    root: PathBuf,
}

impl FileRuns {
    pub(crate) fn new(home: &Path) -> FileRuns {
        FileRuns {
            root: home.join("runs"),
        }
    }

    pub(crate) fn dir(&self, id: &RunId) -> PathBuf {
        self.root.join(id.as_str())
    }

    fn record_path(&self, id: &RunId) -> PathBuf {
        self.dir(id).join("run.json")
    }

    fn events_path(&self, id: &RunId) -> PathBuf {
        self.dir(id).join("events.jsonl")
    }

    pub(crate) fn read_sync(&self, id: &RunId) -> Result<RunRecord, KeptError> {
        let path = self.record_path(id);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(KeptError::NotFound(id.to_string()));
            }
            Err(e) => return Err(io_at(&path)(e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| KeptError::Corrupt {
            path,
            reason: e.to_string(),
        })
    }

    fn write(&self, record: &RunRecord) -> Result<(), KeptError> {
        let path = self.record_path(&record.id);
        let mut bytes = serde_json::to_vec_pretty(record).expect("a run record serializes");
        bytes.push(b'\n');
        berth_confined::write_atomic(&path, &bytes).map_err(io_at(&path))
    }

    pub(crate) fn ids_sync(&self) -> Result<Vec<RunId>, KeptError> {
        let entries = match fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_at(&self.root)(e)),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_at(&self.root))?;
            // Anything else in the folder (a person's notes) is not a run.
            if let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|n| RunId::try_from(n.to_owned()).ok())
                && entry.path().join("run.json").exists()
            {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// Whether a process holds the run's lock (its supervisor lives), from the kernel's table
    /// of locks. When that table cannot be read, the run counts as supervised: a run is never
    /// recorded failed on a guess.
    pub(crate) fn supervised_sync(&self, id: &RunId) -> Result<bool, KeptError> {
        use std::os::unix::fs::MetadataExt;
        let path = self.dir(id).join("lock");
        let meta = match fs::metadata(&path) {
            Ok(meta) => meta,
            // No lock file: no supervisor ever took the run.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_at(&path)(e)),
        };
        Ok(lock_holders(meta.dev(), meta.ino()).is_none_or(|holders| !holders.is_empty()))
    }

    /// The lock of `run.json`'s writes made on the run's behalf, taken (waiting for the
    /// moment another holds it).
    fn record_lock(&self, id: &RunId) -> Result<File, KeptError> {
        let path = self.dir(id).join("record.lock");
        let file = lock_file(&path)?;
        file.lock().map_err(io_at(&path))?;
        Ok(file)
    }

    /// The run's lock if no one holds it; `None` while its supervisor lives.
    pub(crate) fn try_lock(&self, id: &RunId) -> Result<Option<File>, KeptError> {
        let path = self.dir(id).join("lock");
        let file = lock_file(&path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(io_at(&path)(e)),
        }
    }

    /// Sends `SIGUSR1` to `pid` only when it is the process holding the run's lock. The
    /// process is pinned first (a pidfd), then the kernel's table of locks must name it as
    /// the lock's holder; so a pid the supervisor left and another process took is never
    /// signalled (`SIGUSR1`'s default action would kill it). Whether it was sent.
    fn signal_supervisor(&self, id: &RunId, pid: u32) -> Result<bool, KeptError> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::fs::MetadataExt;
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return Ok(false);
        };
        // SAFETY: pidfd_open takes a pid and no flags, and returns a new descriptor we own.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if raw < 0 {
            return Ok(false);
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let pidfd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
        let path = self.dir(id).join("lock");
        let meta = fs::metadata(&path).map_err(io_at(&path))?;
        if !lock_holders(meta.dev(), meta.ino()).is_some_and(|h| h.contains(&pid)) {
            return Ok(false);
        }
        // SAFETY: a signal to the pinned process; no siginfo, no flags.
        let sent = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                libc::SIGUSR1,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        Ok(sent == 0)
    }

    /// The index of sessions to runs: beside `runs/`, which holds one folder per run only.
    fn sessions_dir(&self) -> PathBuf {
        self.root.with_file_name("run-sessions")
    }

    /// Where the index names the run of `session`; `None` for a session id that cannot be a
    /// file's name.
    fn session_index(&self, session: &str) -> Option<PathBuf> {
        berth_ops::SessionId::new(session).ok()?;
        Some(self.sessions_dir().join(session))
    }
}

#[async_trait]
impl RunBackend for FileRuns {
    async fn insert(&self, record: &RunRecord) -> Result<bool, KeptError> {
        fs::create_dir_all(&self.root).map_err(io_at(&self.root))?;
        match fs::create_dir(self.dir(&record.id)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(io_at(&self.root)(e)),
        }
        self.write(record)?;
        Ok(true)
    }

    async fn read(&self, id: &RunId) -> Result<RunRecord, KeptError> {
        self.read_sync(id)
    }

    async fn ids(&self) -> Result<Vec<RunId>, KeptError> {
        self.ids_sync()
    }

    async fn list(&self) -> Result<Vec<Result<RunRecord, KeptError>>, KeptError> {
        // Every record read: on the blocking pool, since a page asks every second.
        let runs = self.clone();
        tokio::task::spawn_blocking(move || {
            Ok(runs
                .ids_sync()?
                .iter()
                .map(|id| runs.read_sync(id))
                .collect())
        })
        .await
        .map_err(|e| KeptError::Io {
            path: self.root.clone(),
            source: io::Error::other(e.to_string()),
        })?
    }

    async fn page(
        &self,
        limit: usize,
        after: Option<&PageCursor>,
    ) -> Result<Vec<Result<RunRecord, KeptError>>, KeptError> {
        // Files hold no order: every record is read, and the page cut from them. One that
        // cannot be read has no time to place it by: it leads the first page, never lost.
        let (mut runs, unreadable): (Vec<_>, Vec<_>) =
            self.list().await?.into_iter().partition(Result::is_ok);
        let mut runs: Vec<RunRecord> = runs.drain(..).flatten().collect();
        runs.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.as_str().cmp(b.id.as_str()))
        });
        let page = runs
            .into_iter()
            .filter(|r| after.is_none_or(|c| c.before(r)))
            .take(limit)
            .map(Ok);
        Ok(match after {
            None => unreadable.into_iter().chain(page).collect(),
            Some(_) => page.collect(),
        })
    }

    async fn supervised(&self, id: &RunId) -> Result<bool, KeptError> {
        self.supervised_sync(id)
    }

    async fn write_unsupervised(
        &self,
        id: &RunId,
        decide: &Decide,
    ) -> Result<RunRecord, KeptError> {
        let _writing = self.record_lock(id)?;
        // Looked at again under the record's lock: a supervisor taking the run now writes
        // after this, and one that took it already is seen.
        let mut record = self.read_sync(id)?;
        if self.supervised_sync(id)? || !decide(&mut record) {
            return Ok(record);
        }
        self.write(&record)?;
        Ok(record)
    }

    async fn delete_unsupervised(&self, id: &RunId) -> Result<bool, KeptError> {
        let runs = self.clone();
        let id = id.clone();
        tokio::task::spawn_blocking(move || {
            let _writing = runs.record_lock(&id)?;
            // Under the record's lock, as a supervisor taking the run takes it too.
            if runs.supervised_sync(&id)? {
                return Ok(false);
            }
            // Out of the listing at once (a rename), then removed: a crash between the two
            // leaves a trash folder no listing reads.
            let dir = runs.dir(&id);
            let trash = dir.with_file_name(format!(".trash-{id}"));
            std::fs::rename(&dir, &trash).map_err(io_at(&dir))?;
            if let Some(parent) = dir.parent() {
                File::open(parent)
                    .and_then(|d| d.sync_all())
                    .map_err(io_at(parent))?;
            }
            std::fs::remove_dir_all(&trash).map_err(io_at(&trash))?;
            Ok(true)
        })
        .await
        .map_err(|e| KeptError::Io {
            path: self.root.clone(),
            source: io::Error::other(e.to_string()),
        })?
    }

    async fn hold(&self, id: &RunId) -> Result<Box<dyn Hold>, KeptError> {
        let waited = std::time::Instant::now();
        // Only a supervisor that is ending (a resume right after a run ended) holds it: no
        // reader ever does.
        let lock = loop {
            if let Some(lock) = self.try_lock(id)? {
                break lock;
            }
            if waited.elapsed() > LOCK_PATIENCE {
                let pid = self
                    .read_sync(id)?
                    .supervisor
                    .map_or_else(|| "unknown".to_owned(), |p| p.to_string());
                return Err(KeptError::Busy {
                    id: id.clone(),
                    pid,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let path = self.events_path(id);
        let events = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io_at(&path))?;
        Ok(Box::new(FileHold {
            runs: self.clone(),
            id: id.clone(),
            _lock: lock,
            events,
        }))
    }

    async fn request(
        &self,
        record: &RunRecord,
        request: &Request,
        pid: u32,
    ) -> Result<(), KeptError> {
        let id = &record.id;
        let (name, text) = match request {
            Request::Stop(StopRequest::All) => ("stop".to_owned(), ""),
            Request::Stop(StopRequest::Agent(i)) => (format!("stop-{i}"), ""),
            Request::Tell { agent, text, now } => {
                // Named so that the supervisor takes them in the order they came.
                let stamp = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                // `--now` is the name's end, so the order they came in still holds.
                let now = if *now { "-now" } else { "" };
                (format!("tell-{agent}-{stamp:032}{now}"), text.as_str())
            }
            Request::Answer {
                agent,
                question,
                answer,
            } => (format!("answer-{agent}-{question}"), answer.as_str()),
        };
        let path = self.dir(id).join(name);
        berth_confined::write_atomic(&path, text.as_bytes()).map_err(io_at(&path))?;
        // A signal not sent (the supervisor just ended, or the pid is not its) is no loss:
        // the supervisor's poll finds the request file.
        self.signal_supervisor(id, pid)?;
        Ok(())
    }

    async fn events(&self, id: &RunId, cursor: u64) -> Result<(Vec<RunEvent>, u64), KeptError> {
        read_events(&self.events_path(id), cursor)
    }

    async fn run_of_session(&self, session: &str) -> Result<Option<RunId>, KeptError> {
        let Some(path) = self.session_index(session) else {
            return Ok(None);
        };
        Ok(fs::read_to_string(&path)
            .ok()
            .and_then(|text| RunId::try_from(text.trim().to_owned()).ok()))
    }

    async fn index_session(&self, session: &str, id: &RunId) {
        // An index that cannot be written is only slower to find.
        if let Some(path) = self.session_index(session) {
            let _ = fs::create_dir_all(self.sessions_dir());
            let _ = berth_confined::write_atomic(&path, id.as_str().as_bytes());
        }
    }
}

/// A supervisor's hold on a run kept in files: its lock, and its event log open to append.
struct FileHold {
    runs: FileRuns,
    id: RunId,
    _lock: File,
    events: File,
}

#[async_trait]
impl Hold for FileHold {
    fn lost(&self) -> bool {
        // The kernel holds the lock for as long as this process lives.
        false
    }

    async fn write(&mut self, record: &RunRecord) -> Result<(), KeptError> {
        self.runs.write(record)
    }

    async fn append(&mut self, event: &RunEvent, durable: bool) -> Result<(), KeptError> {
        let mut line = serde_json::to_vec(event).expect("a run event serializes");
        line.push(b'\n');
        let path = self.runs.events_path(&self.id);
        self.events.write_all(&line).map_err(io_at(&path))?;
        if durable {
            self.events.sync_data().map_err(io_at(&path))?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), KeptError> {
        Ok(())
    }

    async fn requests(&mut self) -> Vec<Request> {
        let dir = self.runs.dir(&self.id);
        let Ok(entries) = fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut found: Vec<(String, PathBuf)> = entries
            .flatten()
            .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
            .filter(|(name, _)| {
                name == "stop"
                    || name.starts_with("stop-")
                    || name.starts_with("tell-")
                    || name.starts_with("answer-")
            })
            .collect();
        // Stops first; tells in the order they came (their names hold the time).
        found.sort();
        let mut requests = Vec::new();
        for (name, path) in found {
            let request = if name == "stop" {
                Request::Stop(StopRequest::All)
            } else if let Some(i) = name.strip_prefix("stop-").and_then(|n| n.parse().ok()) {
                Request::Stop(StopRequest::Agent(i))
            } else if let Some((agent, stamp)) = name
                .strip_prefix("tell-")
                .and_then(|rest| rest.split_once('-'))
                && let Ok(agent) = agent.parse()
                && let Ok(text) = fs::read_to_string(&path)
            {
                let now = stamp.ends_with("-now");
                Request::Tell { agent, text, now }
            } else if let Some((agent, question)) = name
                .strip_prefix("answer-")
                .and_then(|rest| rest.split_once('-'))
                && let Ok(agent) = agent.parse()
                && let Ok(answer) = fs::read_to_string(&path)
                && let Ok(answer) = answer.parse()
            {
                Request::Answer {
                    agent,
                    question: question.to_owned(),
                    answer,
                }
            } else {
                continue;
            };
            if fs::remove_file(&path).is_ok() {
                requests.push(request);
            }
        }
        requests
    }

    async fn release(self: Box<Self>) {}
}

/// A lock file of a run, opened (made when missing), not yet locked.
fn lock_file(path: &Path) -> Result<File, KeptError> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io_at(path))
}

/// The processes holding a `flock` on the file of device `dev` and inode `ino`, from
/// `/proc/locks` (`1: FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF`; a waiter's
/// line has `->` and holds nothing); `None` when the table cannot be read.
///
/// The kernel writes the table in pieces, and a lock taken or let go elsewhere meanwhile can
/// make a piece skip an entry or repeat one; so an empty answer is asked again, a few times,
/// before it is believed (a repeated entry names the same holder).
pub(crate) fn lock_holders(dev: u64, ino: u64) -> Option<Vec<libc::pid_t>> {
    let file = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    let mut holders = Vec::new();
    for _ in 0..5 {
        let table = fs::read_to_string("/proc/locks").ok()?;
        holders = table
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                match fields.as_slice() {
                    [_, "FLOCK", _, _, pid, at, ..] if *at == file => pid.parse().ok(),
                    _ => None,
                }
            })
            .collect();
        if !holders.is_empty() {
            break;
        }
    }
    Some(holders)
}

/// Reads a run's event log from `offset`: the whole events after it, and the offset after
/// the last whole line (a line being written is read next time).
pub(crate) fn read_events(path: &Path, offset: u64) -> Result<(Vec<RunEvent>, u64), KeptError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), offset)),
        Err(e) => return Err(io_at(path)(e)),
    };
    file.seek(SeekFrom::Start(offset)).map_err(io_at(path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io_at(path))?;
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut events = Vec::new();
    for (n, line) in bytes[..whole].split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let event = serde_json::from_slice(line).map_err(|e| KeptError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("event {} after byte {offset}: {e}", n + 1),
        })?;
        events.push(event);
    }
    Ok((events, offset + whole as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kept::{RunState, RunStore, StoredRequest};

    async fn new_run(store: &RunStore) -> RunRecord {
        store.create(StoredRequest::one_agent("t")).await.unwrap()
    }

    /// `load` took the supervisor's lock to see whether a supervisor lived: readers polling
    /// a run held it much of the time, so a supervisor taking the run waited, or gave up
    /// "busy". Readers now ask the kernel's table of locks.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readers_never_take_the_supervisors_lock() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let store = RunStore::files(tmp.path());
        let files = FileRuns::new(tmp.path());
        // Just made, not yet taken: a reader looks for its supervisor on every load.
        let record = new_run(&store).await;
        std::fs::File::create(files.dir(&record.id).join("lock")).unwrap();
        let meta = std::fs::metadata(files.dir(&record.id).join("lock")).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (store, id, stop) = (store.clone(), record.id.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut loads = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        // Never recorded failed under a supervisor taking it.
                        let state = store.load(&id).await.unwrap().state;
                        assert!(matches!(state, RunState::Starting | RunState::Running));
                        loads += 1;
                    }
                    loads
                })
            })
            .collect();
        let started = std::time::Instant::now();
        let mut looks = 0;
        while started.elapsed() < Duration::from_millis(700) {
            let holders = lock_holders(meta.dev(), meta.ino()).unwrap();
            assert!(holders.is_empty(), "a reader held the run's lock");
            looks += 1;
        }
        // A supervisor takes the run at once, however busy its readers are.
        let taking = std::time::Instant::now();
        let supervision = store.supervise(&record.id).await.unwrap();
        assert!(taking.elapsed() < Duration::from_millis(500));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut loads = 0;
        for reader in readers {
            loads += reader.await.unwrap();
        }
        assert!(loads > 100 && looks > 100, "{loads} loads, {looks} looks");
        assert_eq!(
            store.load(&record.id).await.unwrap().state,
            RunState::Running
        );
        drop(supervision);
        // Its supervisor gone, the next reader records the run failed.
        assert_eq!(
            store.load(&record.id).await.unwrap().state,
            RunState::Failed
        );
    }

    /// `run stop` read the supervisor's pid and sent it SIGUSR1, whose default action kills:
    /// a process that took the pid of a supervisor gone (here, one that never held the lock)
    /// was killed. Only the lock's holder is signalled now.
    #[tokio::test]
    async fn stop_signals_no_process_but_the_locks_holder() {
        let tmp = tempfile::tempdir().unwrap();
        let store = RunStore::files(tmp.path());
        let files = FileRuns::new(tmp.path());
        let record = new_run(&store).await;
        let mut bystander = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // The run's lock is held (as a live supervisor holds it), by this process.
        let _held = files
            .try_lock(&record.id)
            .unwrap()
            .expect("the lock is free");
        let mut running = files.read_sync(&record.id).unwrap();
        running.state = RunState::Running;
        running.supervisor = Some(bystander.id());
        files.write(&running).unwrap();

        store
            .request_stop(&record.id, StopRequest::All)
            .await
            .expect("the request is written");
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            bystander.try_wait().unwrap().is_none(),
            "a process that does not hold the run's lock was signalled"
        );
        assert!(files.dir(&record.id).join("stop").exists());
        // The holder is found where the kernel keeps it.
        let meta = std::fs::metadata(files.dir(&record.id).join("lock")).unwrap();
        use std::os::unix::fs::MetadataExt;
        // (Under CI the table once listed this process twice for the one lock; every entry
        // must be this process.)
        let holders = lock_holders(meta.dev(), meta.ino()).unwrap();
        assert!(
            !holders.is_empty()
                && holders
                    .iter()
                    .all(|p| *p == std::process::id() as libc::pid_t),
            "{holders:?}"
        );
        bystander.kill().unwrap();
        bystander.wait().unwrap();
    }
}
