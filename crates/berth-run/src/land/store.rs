//! Where lands are kept: beside the runs, in the home's database when its store is one
//! (SQLite, or Postgres shared by a pool), else in files (`<home>/lands/<id>/land.json`,
//! written atomically and durably).
//!
//! A land is driven by one process at a time, on the machine whose repository it moves: that
//! process holds `<home>/lands/<id>/lock` (an exclusive `flock` the kernel drops when it
//! dies, however it dies), whichever store keeps the record. A reader asks the kernel's table
//! of locks whether it is held, so `land list` never gets in a driver's way. On a database
//! every write names the version it read, so two writers never overwrite each other unseen.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use berth_ops::{ErrorKind, Ops};
use berth_store_sql::SqlLands;

use super::record::{LandId, LandRecord, LandState};

fn store_error(kind: ErrorKind, message: String) -> berth_ops::Error {
    berth_ops::Error::rule(kind, message)
}

fn io_error(path: &Path, e: std::io::Error) -> berth_ops::Error {
    store_error(ErrorKind::Io, format!("{}: {e}", path.display()))
}

/// The kept lands of one home.
#[derive(Clone)]
pub struct LandStore {
    home: PathBuf,
    db: Option<SqlLands>,
    /// This machine's node: only a land driven here has a lock here to look at.
    node: String,
}

impl std::fmt::Debug for LandStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LandStore")
            .field("home", &self.home)
            .field("db", &self.db.is_some())
            .finish()
    }
}

/// A land as a reader sees it: its record, and whether a process drives it now.
#[derive(Debug, Clone)]
pub struct SeenLand {
    pub record: LandRecord,
    pub driven: bool,
}

impl SeenLand {
    /// Its state as a reader says it: `cut off` for one landing that no process drives
    /// (its driver died; `berth land --resume` goes on), else the record's.
    pub fn state(&self) -> &'static str {
        match self.record.state {
            LandState::Landing if !self.driven => "cut off",
            s => s.as_str(),
        }
    }

    /// Whether nothing more happens to it without a resume.
    pub fn finished(&self) -> bool {
        self.record.state != LandState::Landing || !self.driven
    }
}

/// A land held by this process: its lock, and the version of its record last written.
pub struct HeldLand {
    pub record: LandRecord,
    version: i64,
    _lock: File,
}

impl LandStore {
    /// The lands of `ops`'s home, kept where its records are.
    pub fn open(ops: &Ops) -> LandStore {
        LandStore {
            home: ops.home().to_owned(),
            db: ops.database().map(|d| d.lands()),
            node: berth_ops::notices::node_name(),
        }
    }

    /// The same lands, this process named `node` (a worker's `--node`).
    pub fn with_node(mut self, node: &str) -> LandStore {
        self.node = node.to_owned();
        self
    }

    /// The land's folder on this machine: its lock, and what its checks printed.
    pub fn dir(&self, id: &LandId) -> PathBuf {
        self.home.join("lands").join(id.as_str())
    }

    fn record_path(&self, id: &LandId) -> PathBuf {
        self.dir(id).join("land.json")
    }

    fn parse(&self, id: &LandId, text: &[u8]) -> berth_ops::Result<LandRecord> {
        serde_json::from_slice(text).map_err(|e| {
            store_error(
                ErrorKind::Corrupt,
                format!(
                    "the record of land {id} ({}) is corrupt: {e}; it was left as it is",
                    match &self.db {
                        Some(_) => "in the database".to_owned(),
                        None => self.record_path(id).display().to_string(),
                    }
                ),
            )
        })
    }

    fn text(record: &LandRecord) -> String {
        serde_json::to_string_pretty(record).expect("a land record serializes")
    }

    /// Files a new land and takes it for this process.
    pub async fn create(&self, mut record: LandRecord) -> berth_ops::Result<HeldLand> {
        loop {
            std::fs::create_dir_all(self.dir(&record.id))
                .map_err(|e| io_error(&self.dir(&record.id), e))?;
            let lock = self.lock(&record.id)?;
            let created = match &self.db {
                Some(db) => {
                    let ns = record.created_at.timestamp_nanos_opt().unwrap_or(i64::MAX);
                    db.insert(record.id.as_str(), ns, &Self::text(&record))
                        .await?
                }
                None => {
                    let path = self.record_path(&record.id);
                    match path.exists() {
                        true => false,
                        false => {
                            berth_confined::write_atomic(&path, Self::text(&record).as_bytes())
                                .map_err(|e| io_error(&path, e))?;
                            true
                        }
                    }
                }
            };
            if created {
                return Ok(HeldLand {
                    record,
                    version: 1,
                    _lock: lock,
                });
            }
            record.id = LandId::generate();
        }
    }

    /// Takes land `id` for this process, refused while another drives it.
    pub async fn take(&self, id: &LandId) -> berth_ops::Result<HeldLand> {
        let lock = self.lock(id)?;
        let (record, version) = self.read(id).await?;
        Ok(HeldLand {
            record,
            version,
            _lock: lock,
        })
    }

    fn lock(&self, id: &LandId) -> berth_ops::Result<File> {
        let dir = self.dir(id);
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        let path = dir.join("lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| io_error(&path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => Err(store_error(
                ErrorKind::Conflict,
                format!(
                    "land {id} is being driven by another process: `berth land show {id}` follows it"
                ),
            )),
            Err(std::fs::TryLockError::Error(e)) => Err(io_error(&path, e)),
        }
    }

    /// Whether a process on this machine drives land `id` now.
    pub fn driven(&self, id: &LandId) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(self.dir(id).join("lock")) else {
            return false;
        };
        crate::kept::lock_holders(meta.dev(), meta.ino()).is_some_and(|h| !h.is_empty())
    }

    /// `record` as a reader sees it now ([`SeenLand`]); a land another node drives is as its
    /// record says. One landing that nobody here drives is read again first: its driver may have written its end and let go between the read
    /// and the look at its lock, and a land just over is not cut off.
    pub async fn look(&self, record: LandRecord) -> SeenLand {
        if record.state != LandState::Landing {
            return SeenLand {
                record,
                driven: false,
            };
        }
        // Driven on another node, whose lock no process here can see: as its record says.
        if record.node != self.node || self.driven(&record.id) {
            return SeenLand {
                record,
                driven: true,
            };
        }
        let record = match self.load(&record.id).await {
            Ok(again) => again,
            Err(_) => record,
        };
        let driven = record.state == LandState::Landing && self.driven(&record.id);
        SeenLand { record, driven }
    }

    /// The newest land not over that no process drives: what a bare `berth land --resume`
    /// goes on with.
    pub async fn newest_open(&self) -> berth_ops::Result<LandId> {
        for land in self.list().await?.into_iter().flatten() {
            let seen = self.look(land).await;
            if seen.record.state != LandState::Over && !seen.driven {
                return Ok(seen.record.id);
            }
        }
        Err(store_error(
            ErrorKind::NotFound,
            "no land is waiting to be resumed: `berth land list` shows the lands there are"
                .to_owned(),
        ))
    }

    /// Land `id` as a reader sees it now.
    pub async fn seen(&self, id: &LandId) -> berth_ops::Result<SeenLand> {
        Ok(self.look(self.load(id).await?).await)
    }

    /// Writes the held land's record.
    pub async fn save(&self, held: &mut HeldLand) -> berth_ops::Result<()> {
        let text = Self::text(&held.record);
        match &self.db {
            Some(db) => {
                if !db
                    .write(held.record.id.as_str(), held.version, &text)
                    .await?
                {
                    return Err(store_error(
                        ErrorKind::Conflict,
                        format!(
                            "the record of land {} was written by someone else meanwhile; this process writes nothing more to it",
                            held.record.id
                        ),
                    ));
                }
                held.version += 1;
            }
            None => {
                let path = self.record_path(&held.record.id);
                berth_confined::write_atomic(&path, text.as_bytes())
                    .map_err(|e| io_error(&path, e))?;
            }
        }
        Ok(())
    }

    async fn read(&self, id: &LandId) -> berth_ops::Result<(LandRecord, i64)> {
        let not_found = || {
            store_error(
                ErrorKind::NotFound,
                format!("land {id} not found: `berth land list` shows the lands there are"),
            )
        };
        match &self.db {
            Some(db) => {
                let row = db.get(id.as_str()).await?.ok_or_else(not_found)?;
                Ok((self.parse(id, row.record.as_bytes())?, row.version))
            }
            None => {
                let path = self.record_path(id);
                match std::fs::read(&path) {
                    Ok(bytes) => Ok((self.parse(id, &bytes)?, 0)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(not_found()),
                    Err(e) => Err(io_error(&path, e)),
                }
            }
        }
    }

    /// Land `id`.
    pub async fn load(&self, id: &LandId) -> berth_ops::Result<LandRecord> {
        Ok(self.read(id).await?.0)
    }

    /// Every land, newest first; one that cannot be read is an error in its place.
    pub async fn list(&self) -> berth_ops::Result<Vec<berth_ops::Result<LandRecord>>> {
        let mut lands = Vec::new();
        match &self.db {
            Some(db) => {
                for row in db.list().await? {
                    let id = LandId::try_from(row.id.clone())
                        .map_err(|e| store_error(ErrorKind::Corrupt, e.to_string()))?;
                    lands.push(self.parse(&id, row.record.as_bytes()));
                }
            }
            None => {
                let root = self.home.join("lands");
                let entries = match std::fs::read_dir(&root) {
                    Ok(e) => e,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(lands),
                    Err(e) => return Err(io_error(&root, e)),
                };
                for entry in entries.flatten() {
                    let Some(id) = entry
                        .file_name()
                        .to_str()
                        .and_then(|n| LandId::try_from(n.to_owned()).ok())
                    else {
                        continue;
                    };
                    if self.record_path(&id).exists() {
                        lands.push(self.load(&id).await);
                    }
                }
                lands.sort_by(|a, b| match (a, b) {
                    (Ok(a), Ok(b)) => b.created_at.cmp(&a.created_at),
                    (Ok(_), Err(_)) => std::cmp::Ordering::Less,
                    (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
                    (Err(_), Err(_)) => std::cmp::Ordering::Equal,
                });
            }
        }
        Ok(lands)
    }

    /// The land an id or a prefix of one names.
    pub async fn resolve(&self, identifier: &str) -> berth_ops::Result<LandId> {
        let id = LandId::try_from(identifier.to_ascii_lowercase())
            .map_err(|e| store_error(ErrorKind::Invalid, e.to_string()))?;
        if self.read(&id).await.is_ok() {
            return Ok(id);
        }
        let lands = self.list().await?.into_iter().flatten().map(|l| l.id);
        match berth_ops::named_by_id(id.as_str(), lands, |i| i.as_str()) {
            berth_ops::Named::One(one) => Ok(one),
            berth_ops::Named::Nothing => Err(store_error(
                ErrorKind::NotFound,
                format!("land {identifier} not found: `berth land list` shows the lands there are"),
            )),
            berth_ops::Named::Several(found) => Err(store_error(
                ErrorKind::Invalid,
                format!(
                    "land id prefix {identifier:?} matches {} lands; give more of it",
                    found.len()
                ),
            )),
        }
    }
}
