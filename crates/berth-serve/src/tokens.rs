//! The tokens `berth serve` accepts, kept in the home (`tokens.json`): a device's token acts
//! as that device, an admin's sees everything. A token is shown once, when it is made; only
//! its SHA-256 is kept, so the file gives no token away. Every request looks the token up
//! again, so a revoked or expired token is refused at once (open connections look again
//! every second, see `websocket.rs`). A look costs a `stat` of the file: its tokens are kept
//! in memory, and read again only when the file changed (another `berth token` replaced it).
//!
//! The file is replaced atomically (readable by its owner only) under a lock file, so two
//! `berth token` commands never lose each other's change; a file that cannot be read is an
//! error, never "no tokens".

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use berth_ops::DeviceId;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a token's owner may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Role {
    /// Everything, as a client on this machine.
    Admin,
    /// One device: its own workspace's sessions over ACP.
    Device { device: DeviceId },
}

/// A token as kept: never the token itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenRecord {
    /// How `token list` and `token revoke` name it.
    pub name: String,
    #[serde(flatten)]
    pub role: Role,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    /// SHA-256 of the token, hex.
    #[serde(rename = "sha256")]
    hash: String,
}

impl TokenRecord {
    fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TokenFile {
    tokens: Vec<TokenRecord>,
}

/// Why a token could not be made, found or kept.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "invalid token name {0:?}: 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"
    )]
    BadName(String),
    #[error("a token named {0:?} exists already; revoke it first, or choose another name")]
    Exists(String),
    #[error("no token is named {0:?}; `berth token list` shows them")]
    NotFound(String),
    #[error("the token file {} is corrupt: {reason}; it was left as it is", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl TokenError {
    pub fn kind(&self) -> berth_ops::ErrorKind {
        match self {
            TokenError::BadName(_) => berth_ops::ErrorKind::Invalid,
            TokenError::Exists(_) => berth_ops::ErrorKind::Conflict,
            TokenError::NotFound(_) => berth_ops::ErrorKind::NotFound,
            TokenError::Corrupt { .. } => berth_ops::ErrorKind::Corrupt,
            TokenError::Io { .. } => berth_ops::ErrorKind::Io,
        }
    }
}

/// The tokens of one home.
#[derive(Debug, Clone)]
pub struct TokenStore {
    path: PathBuf,
    lock: PathBuf,
    /// The file's tokens as last read, with the file's identity then.
    cache: Arc<Mutex<Option<Cached>>>,
    /// How many times the file was read for a look, for tests.
    #[cfg(test)]
    reads: Arc<std::sync::atomic::AtomicUsize>,
}

/// What tells one version of the token file from another: it is replaced by a rename, so a
/// new version is a new inode (the size and the time of change say it too). `None`: no file.
type Stamp = Option<(u64, u64, u64, i64, i64)>;

/// The tokens as read, and the stamp of the file they were read from.
type Cached = (Stamp, Arc<TokenFile>);

impl TokenRecord {
    /// A record of a new secret named `name`, and the secret, which is shown this once.
    fn fresh(name: &str, role: Role, expires_in: Option<Duration>) -> (TokenRecord, String) {
        let secret = new_token();
        let now = Utc::now();
        let record = TokenRecord {
            name: name.to_owned(),
            role,
            created_at: now,
            expires_at: expires_in.map(|d| now + d),
            hash: hash(&secret),
        };
        (record, secret)
    }
}

impl TokenStore {
    pub fn new(home: &Path) -> TokenStore {
        TokenStore {
            path: home.join("tokens.json"),
            lock: home.join("tokens.lock"),
            cache: Arc::default(),
            #[cfg(test)]
            reads: Arc::default(),
        }
    }

    /// Makes a token: its record, and the token itself, which is shown this once.
    pub fn create(
        &self,
        name: &str,
        role: Role,
        expires_in: Option<Duration>,
    ) -> Result<(TokenRecord, String), TokenError> {
        check_name(name)?;
        let _lock = self.locked()?;
        let mut file = self.read()?;
        if file.tokens.iter().any(|t| t.name == name) {
            return Err(TokenError::Exists(name.to_owned()));
        }
        let (record, secret) = TokenRecord::fresh(name, role, expires_in);
        file.tokens.push(record.clone());
        self.write(&file)?;
        Ok((record, secret))
    }

    /// Makes a new token for a device paired before, in place of its old one, which stops
    /// working (an open connection with it is closed at its next check). Refused when the
    /// token of that name is not that device's.
    pub fn rotate(
        &self,
        name: &str,
        role: Role,
        expires_in: Option<Duration>,
    ) -> Result<(TokenRecord, String), TokenError> {
        check_name(name)?;
        let _lock = self.locked()?;
        let mut file = self.read()?;
        let at = file
            .tokens
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| TokenError::NotFound(name.to_owned()))?;
        if file.tokens[at].role != role {
            return Err(TokenError::Exists(name.to_owned()));
        }
        let (record, secret) = TokenRecord::fresh(name, role, expires_in);
        file.tokens[at] = record.clone();
        self.write(&file)?;
        Ok((record, secret))
    }

    /// Every token, oldest first.
    pub fn list(&self) -> Result<Vec<TokenRecord>, TokenError> {
        Ok(self.read()?.tokens)
    }

    /// Forgets the token named `name`: it is refused from now on.
    pub fn revoke(&self, name: &str) -> Result<TokenRecord, TokenError> {
        let _lock = self.locked()?;
        let mut file = self.read()?;
        let at = file
            .tokens
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| TokenError::NotFound(name.to_owned()))?;
        let gone = file.tokens.remove(at);
        self.write(&file)?;
        Ok(gone)
    }

    /// The live (neither revoked nor expired) token `presented` is, if any.
    pub fn find(&self, presented: &str) -> Result<Option<TokenRecord>, TokenError> {
        let wanted = hash(presented);
        let now = Utc::now();
        Ok(self
            .current()?
            .tokens
            .iter()
            .find(|t| t.hash == wanted && !t.expired(now))
            .cloned())
    }

    /// Whether the token named `name`, with this hash, is still live.
    pub fn still_live(&self, record: &TokenRecord) -> Result<bool, TokenError> {
        let now = Utc::now();
        Ok(self
            .current()?
            .tokens
            .iter()
            .any(|t| t.name == record.name && t.hash == record.hash && !t.expired(now)))
    }

    /// The tokens as the file has them now: from memory while the file is the one read last.
    fn current(&self) -> Result<Arc<TokenFile>, TokenError> {
        let stamp = self.stamp()?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seen, file)) = &*cache
            && *seen == stamp
        {
            return Ok(file.clone());
        }
        #[cfg(test)]
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file = Arc::new(self.read()?);
        // Stamped as before the read: a change made meanwhile is read at the next look.
        *cache = Some((stamp, file.clone()));
        Ok(file)
    }

    fn stamp(&self) -> Result<Stamp, TokenError> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(&self.path) {
            Ok(m) => Ok(Some((m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(TokenError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    fn read(&self) -> Result<TokenFile, TokenError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(TokenFile::default()),
            Err(source) => {
                return Err(TokenError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        serde_json::from_slice(&bytes).map_err(|e| TokenError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })
    }

    fn write(&self, file: &TokenFile) -> Result<(), TokenError> {
        let mut bytes = serde_json::to_vec_pretty(file).expect("tokens serialize");
        bytes.push(b'\n');
        berth_confined::write_atomic(&self.path, &bytes).map_err(|source| TokenError::Io {
            path: self.path.clone(),
            source,
        })
    }

    fn locked(&self) -> Result<File, TokenError> {
        let io = |source| TokenError::Io {
            path: self.lock.clone(),
            source,
        };
        if let Some(dir) = self.lock.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock)
            .map_err(io)?;
        file.lock().map_err(io)?;
        Ok(file)
    }
}

/// A new token: 244 random bits from the system's generator (two v4 UUIDs).
pub fn new_token() -> String {
    format!(
        "berth_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

fn hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A token's name follows the folder-name rule: it is typed on command lines and shown in
/// tables.
fn check_name(name: &str) -> Result<(), TokenError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(TokenError::BadName(name.chars().take(80).collect()))
    }
}

#[cfg(test)]
mod cache_tests {
    use super::*;

    /// Every request read and parsed tokens.json, with blocking I/O, on the server's threads.
    /// The tokens are kept now, and read again only when the file is replaced.
    #[test]
    fn tokens_are_read_again_only_when_the_file_changes() {
        let home = tempfile::tempdir().unwrap();
        let server = TokenStore::new(home.path());
        // Another process's `berth token`.
        let command = TokenStore::new(home.path());
        let (phone, secret) = command.create("phone", Role::Admin, None).unwrap();
        for _ in 0..100 {
            assert!(server.find(&secret).unwrap().is_some());
            assert!(server.still_live(&phone).unwrap());
        }
        assert_eq!(server.reads.load(std::sync::atomic::Ordering::Relaxed), 1);
        command.revoke("phone").unwrap();
        assert!(server.find(&secret).unwrap().is_none());
        assert!(!server.still_live(&phone).unwrap());
        assert_eq!(server.reads.load(std::sync::atomic::Ordering::Relaxed), 2);
        // A file gone bad is an error, never "no tokens", cached or not.
        std::fs::write(home.path().join("tokens.json"), "{ nope").unwrap();
        assert!(matches!(
            server.find(&secret),
            Err(TokenError::Corrupt { .. })
        ));
    }
}

impl berth_ops::Kinded for TokenError {
    fn kind(&self) -> berth_ops::ErrorKind {
        TokenError::kind(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotated_device_token_replaces_the_old_one_and_an_admin_token_is_not_rotated() {
        let home = tempfile::tempdir().unwrap();
        let store = TokenStore::new(home.path());
        let phone = Role::Device {
            device: DeviceId::new("phone").unwrap(),
        };
        assert!(matches!(
            store.rotate("phone", phone.clone(), None),
            Err(TokenError::NotFound(_))
        ));
        let (old_record, old) = store.create("phone", phone.clone(), None).unwrap();
        let (_, new) = store.rotate("phone", phone.clone(), None).unwrap();
        assert_ne!(old, new);
        assert!(store.find(&old).unwrap().is_none());
        assert!(!store.still_live(&old_record).unwrap());
        assert_eq!(store.find(&new).unwrap().unwrap().role, phone);
        assert_eq!(store.list().unwrap().len(), 1);
        store.create("laptop", Role::Admin, None).unwrap();
        let laptop = Role::Device {
            device: DeviceId::new("laptop").unwrap(),
        };
        assert!(matches!(
            store.rotate("laptop", laptop, None),
            Err(TokenError::Exists(_))
        ));
    }

    #[test]
    fn a_token_is_found_by_itself_until_revoked_or_expired() {
        let home = tempfile::tempdir().unwrap();
        let store = TokenStore::new(home.path());
        let phone = Role::Device {
            device: DeviceId::new("phone").unwrap(),
        };
        let (record, secret) = store.create("phone", phone.clone(), None).unwrap();
        assert!(secret.starts_with("berth_") && secret.len() > 60);
        assert_eq!(store.find(&secret).unwrap().unwrap().role, phone);
        assert!(store.find("berth_not-it").unwrap().is_none());
        // The file keeps no token, and only its owner reads it.
        let text = std::fs::read_to_string(home.path().join("tokens.json")).unwrap();
        assert!(!text.contains(&secret) && text.contains("sha256"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.path().join("tokens.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        assert!(matches!(
            store.create("phone", Role::Admin, None),
            Err(TokenError::Exists(_))
        ));
        assert!(matches!(
            store.create("../x", Role::Admin, None),
            Err(TokenError::BadName(_))
        ));
        assert!(store.still_live(&record).unwrap());
        store.revoke("phone").unwrap();
        assert!(store.find(&secret).unwrap().is_none());
        assert!(!store.still_live(&record).unwrap());
        assert!(matches!(
            store.revoke("phone"),
            Err(TokenError::NotFound(_))
        ));
        // An expired token is refused.
        let (_, old) = store
            .create("old", Role::Admin, Some(Duration::seconds(-1)))
            .unwrap();
        assert!(store.find(&old).unwrap().is_none());
        // A corrupt file is an error, not an empty list.
        std::fs::write(home.path().join("tokens.json"), "{ nope").unwrap();
        assert!(matches!(store.list(), Err(TokenError::Corrupt { .. })));
    }
}
