//! berth-store-sql: berth's records in a database, SQLite (one file) or Postgres, behind the
//! same store traits as the filesystem store and held to the same conformance suite.
//!
//! ```text
//! sqlite:///path/berth.db                  one file, created on first use; WAL, busy timeout
//! postgres://user:password@host:port/db    any number of berth processes and hosts on one db
//! ```
//!
//! Invariants this crate keeps:
//! - **One statement or one transaction per operation, and no cache.** Every read goes to the
//!   database, so a write by any process on any host is seen by the next read everywhere.
//! - **Uniqueness is the database's.** Ids, names, session ids and device bindings are primary
//!   keys or unique columns; "bind if absent" is an insert that does nothing on conflict, so
//!   racing processes agree on one winner without a lock of berth's own.
//! - **Read, check, write happens in one transaction that holds what it read.** SQLite's write
//!   transactions take the database's write lock first (`BEGIN IMMEDIATE`); Postgres's lock the
//!   rows they read (`FOR UPDATE`, or `FOR KEY SHARE` on a workspace a change hangs under).
//!   Lock order: a workspace row, then a session row, then storage rows.
//! - **An acknowledged write is committed**: SQLite with `synchronous = FULL`, Postgres with its
//!   own durable commit.
//! - **A transcript is rows**: an append is one insert (O(1)); storage files are rows with the
//!   same path rules (`StoragePath`), folders included, as on disk. On SQLite, appends made
//!   at once commit in one transaction (`group_commit.rs`), each still committed before it
//!   returns.
//! - **Values are bound, never spliced.** Query text is `&'static str`; every value from outside
//!   is a parameter.
//! - **Errors keep their kinds**: not found, already exists, refused, is a folder, as the
//!   filesystem store says them; a value the database holds that does not parse is `Corrupt`
//!   naming the database (without its password), the table and the row.
//!
//! Folders on this machine (git worktrees, a plain workspace's working folder) stay under the
//! local berth home, `<home>/workspaces/<id>/`; only their records are in the database.

#![forbid(unsafe_code)]

mod bindings;
mod db;
mod group_commit;
mod lands;
mod migrate;
mod notices;
mod runs;
mod sessions;
mod storage;
mod workspaces;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use berth_core::{Error, InvalidInput, WorkspaceId, WorkspaceManager};
use chrono::{DateTime, Utc};
use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions, SqliteSynchronous};

use crate::db::{BUSY_TIMEOUT, Conn, Pool};

/// How long `open` waits for a Postgres server to answer.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
pub use lands::{LandRow, SqlLands};
pub use migrate::SCHEMA_VERSION;
pub use notices::RunsListener;
pub use runs::{RUN_CHANGES_CHANNEL, RUNS_CHANNEL, RunColumns, RunRequestRow, RunRow, SqlRuns};

/// What went wrong inside the crate, before it becomes a `berth_core::Error` naming the
/// database.
#[derive(Debug)]
pub(crate) enum Failure {
    Core(Error),
    Db(sqlx::Error),
    Invalid(String),
    /// A value in a row does not parse: the table, the row's key, why.
    Corrupt {
        table: &'static str,
        key: String,
        reason: String,
    },
    Newer(i64),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Core(e)
    }
}

impl From<sqlx::Error> for Failure {
    fn from(e: sqlx::Error) -> Failure {
        Failure::Db(e)
    }
}

pub(crate) type Result<T, E = Failure> = std::result::Result<T, E>;

/// A database store. Cheap to clone; implements all four store traits.
#[derive(Clone)]
pub struct SqlStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// SQLite's appends, committed in groups.
    appends: group_commit::Appends,
    /// The URL without its password: what messages name.
    shown: String,
    /// The local home, where workspace folders (worktrees) live.
    home: PathBuf,
    /// Postgres's notices of runs, on one connection for every listener of the process.
    notices: notices::Notices,
}

/// The two kinds of database a URL can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

impl Kind {
    /// The kind of database `url` names, or `None` when it names neither.
    pub fn of(url: &str) -> Option<Kind> {
        let scheme = url.split_once(':')?.0.to_ascii_lowercase();
        match scheme.as_str() {
            "sqlite" => Some(Kind::Sqlite),
            "postgres" | "postgresql" => Some(Kind::Postgres),
            _ => None,
        }
    }
}

/// `url` with any password replaced by `***`, for messages and logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let mut out = format!("{scheme}://");
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            match userinfo.split_once(':') {
                Some((user, _)) => out.push_str(&format!("{user}:***@")),
                None => out.push_str(&format!("{userinfo}@")),
            }
            out.push_str(host);
        }
        None => out.push_str(authority),
    }
    // A password can also travel as a query parameter.
    match tail.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => p.to_owned(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(tail),
    }
    out
}

impl SqlStore {
    /// Opens the database `url` names, creating a SQLite file on first use, and brings its
    /// schema up to this binary's (refusing a newer one). `home` is the local berth home,
    /// where workspace folders live.
    ///
    /// Usable from any thread, inside a tokio runtime or not: the connection check and the
    /// migration run on a thread of their own, and the pool connects on first use in
    /// whichever runtime uses it.
    pub fn open(url: &str, home: &Path) -> berth_core::Result<SqlStore> {
        let shown = redact(url);
        let unreachable = |e: String| {
            Error::io(
                format!("cannot open the berth store at {shown}"),
                std::io::Error::other(e),
            )
        };
        let pool = match Kind::of(url) {
            Some(Kind::Sqlite) => {
                let opts = sqlite_options(url).map_err(|e| invalid_url(&shown, &e))?;
                if let Some(parent) = opts.get_filename().parent()
                    && !parent.as_os_str().is_empty()
                    && !parent.is_dir()
                {
                    return Err(unreachable(format!(
                        "the folder {} does not exist",
                        parent.display()
                    )));
                }
                prepare(Kind::Sqlite, url, &shown, true)?;
                Pool::Sqlite(
                    SqlitePoolOptions::new()
                        .max_connections(8)
                        .idle_timeout(None)
                        .max_lifetime(None)
                        .test_before_acquire(false)
                        .connect_lazy_with(opts),
                )
            }
            Some(Kind::Postgres) => {
                let opts = pg_options(url).map_err(|e| invalid_url(&shown, &e))?;
                prepare(Kind::Postgres, url, &shown, true)?;
                Pool::Postgres(
                    PgPoolOptions::new()
                        .max_connections(16)
                        .idle_timeout(None)
                        .max_lifetime(None)
                        .connect_lazy_with(opts),
                )
            }
            None => {
                return Err(invalid_url(
                    &shown,
                    "it must start with sqlite:// or postgres://",
                ));
            }
        };
        let home = std::path::absolute(home)
            .map_err(|e| Error::io(format!("cannot use home {}", home.display()), e))?;
        Ok(SqlStore {
            inner: Arc::new(Inner {
                pool,
                appends: group_commit::Appends::default(),
                shown,
                home,
                notices: notices::Notices::default(),
            }),
        })
    }

    /// Opens the database only if berth has used it before, creating and changing nothing
    /// first: `None` for a SQLite file that does not exist or a database without berth's
    /// tables (what a dry run reads as empty).
    pub fn probe(url: &str, home: &Path) -> berth_core::Result<Option<SqlStore>> {
        let shown = redact(url);
        let kind = Kind::of(url)
            .ok_or_else(|| invalid_url(&shown, "it must start with sqlite:// or postgres://"))?;
        match prepare(kind, url, &shown, false)? {
            None => Ok(None),
            Some(_) => SqlStore::open(url, home).map(Some),
        }
    }

    /// The schema version of the database `url` names, read without changing anything:
    /// `None` when berth never used it (a SQLite file that does not exist included). An
    /// unreachable database is an I/O error naming the URL without its password; a version
    /// newer than this binary's is refused. For `berth doctor`.
    pub fn schema_version(url: &str) -> berth_core::Result<Option<i64>> {
        let shown = redact(url);
        let kind = Kind::of(url)
            .ok_or_else(|| invalid_url(&shown, "it must start with sqlite:// or postgres://"))?;
        prepare(kind, url, &shown, false)
    }

    /// The URL this store was opened with, without its password.
    pub fn url(&self) -> &str {
        &self.inner.shown
    }

    /// A manager with this store in all four slots.
    pub fn manager(&self) -> WorkspaceManager {
        let s = Arc::new(self.clone());
        WorkspaceManager::new(s.clone(), s.clone(), s.clone(), s)
    }

    /// Closes the pool's connections (a process that exits need not).
    pub async fn close(&self) {
        self.inner.pool.close().await;
    }

    pub(crate) fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    pub(crate) fn notices(&self) -> &notices::Notices {
        &self.inner.notices
    }

    pub(crate) fn appends(&self) -> &group_commit::Appends {
        &self.inner.appends
    }

    /// Turns a failure into the error callers see, naming the database.
    pub(crate) fn err(&self, f: Failure) -> Error {
        fail(&self.inner.shown, f)
    }

    fn workspace_folder(&self, id: &WorkspaceId) -> PathBuf {
        self.inner.home.join("workspaces").join(id.as_str())
    }
}

fn fail(shown: &str, f: Failure) -> Error {
    match f {
        Failure::Core(e) => e,
        Failure::Invalid(rule) => Error::Invalid(InvalidInput {
            kind: "text",
            value: String::new(),
            rule,
        }),
        Failure::Corrupt { table, key, reason } => Error::Corrupt {
            file: PathBuf::from(format!("{shown} (table {table}, row {key})")),
            line: None,
            reason,
        },
        Failure::Newer(v) => Error::Refused(format!(
            "the berth store at {shown} has schema version {v}, newer than this berth's {SCHEMA_VERSION}; use a newer berth"
        )),
        Failure::Db(sqlx::Error::ColumnDecode { index, source }) => Error::Corrupt {
            file: PathBuf::from(shown),
            line: None,
            reason: format!("column {index} does not decode: {source}"),
        },
        Failure::Db(e) => Error::io(
            format!("the berth store at {shown}"),
            std::io::Error::other(e.to_string()),
        ),
    }
}

fn invalid_url(shown: &str, rule: &str) -> Error {
    Error::Invalid(InvalidInput {
        kind: "store url",
        value: shown.to_owned(),
        rule: rule.to_owned(),
    })
}

fn sqlite_options(url: &str) -> Result<SqliteConnectOptions, String> {
    SqliteConnectOptions::from_str(url)
        .map_err(|e| e.to_string())
        .map(|o| {
            o.create_if_missing(true)
                .busy_timeout(BUSY_TIMEOUT)
                .foreign_keys(true)
                // Durable at commit, power loss included, like the filesystem store's fsyncs.
                .synchronous(SqliteSynchronous::Full)
                .disable_statement_logging()
        })
}

fn pg_options(url: &str) -> Result<PgConnectOptions, String> {
    PgConnectOptions::from_str(url)
        .map_err(|e| e.to_string())
        .map(|o| o.disable_statement_logging())
}

/// Checks that the database can be reached and migrates it (`migrate`) or reads its schema
/// version only (`!migrate`: `None` when berth never used it, a SQLite file that does not
/// exist included), on a thread of its own with a runtime of its own, so `open` works
/// wherever it is called from.
fn prepare(kind: Kind, url: &str, shown: &str, migrate: bool) -> berth_core::Result<Option<i64>> {
    let url = url.to_owned();
    let shown_owned = shown.to_owned();
    let outcome = std::thread::spawn(move || -> Result<Option<i64>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::Core(Error::io("cannot start a runtime", e)))?;
        rt.block_on(async move {
            let mut conn = match kind {
                Kind::Sqlite => {
                    let opts = sqlite_options(&url).map_err(Failure::Invalid)?;
                    if !migrate && !opts.get_filename().exists() {
                        return Ok(None);
                    }
                    Conn::Sqlite(opts.create_if_missing(migrate).connect().await?)
                }
                Kind::Postgres => {
                    let opts = pg_options(&url).map_err(Failure::Invalid)?;
                    let connect = opts.connect();
                    match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
                        Ok(conn) => Conn::Postgres(conn?),
                        Err(_) => {
                            return Err(Failure::Db(sqlx::Error::PoolTimedOut));
                        }
                    }
                }
            };
            let done = async {
                if !migrate {
                    return migrate::current(&mut conn).await;
                }
                if kind == Kind::Sqlite {
                    wal(&mut conn).await?;
                }
                migrate::migrate(&mut conn)
                    .await
                    .map(|()| Some(SCHEMA_VERSION))
            }
            .await;
            conn.close().await;
            done
        })
    })
    .join()
    .map_err(|_| Error::io("cannot open the store", std::io::Error::other("panicked")))?;
    outcome.map_err(|f| match f {
        Failure::Db(sqlx::Error::PoolTimedOut) => Error::io(
            format!("cannot open the berth store at {shown_owned}"),
            std::io::Error::other(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())),
        ),
        Failure::Db(e) => Error::io(
            format!("cannot open the berth store at {shown_owned}"),
            std::io::Error::other(e.to_string()),
        ),
        other => fail(&shown_owned, other),
    })
}

/// Puts a SQLite database in WAL mode (readers never wait for the writer). The switch needs
/// a moment of exclusive access that the busy timeout does not wait for, so a database that
/// another process is opening at the same moment is tried again.
async fn wal(conn: &mut Conn) -> Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.opt("PRAGMA journal_mode = WAL", &[]).await {
            Ok(Some(row)) if row.text(0)?.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(_) => {
                return Err(Failure::Invalid(
                    "this SQLite database cannot use WAL mode (an in-memory database?)".into(),
                ));
            }
            Err(Failure::Db(e))
                if std::time::Instant::now() < deadline && e.to_string().contains("locked") =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// A time as stored: nanoseconds since the epoch.
pub(crate) fn to_ns(t: DateTime<Utc>) -> i64 {
    t.timestamp_nanos_opt().unwrap_or(i64::MAX)
}

pub(crate) fn from_ns(ns: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(ns)
}

/// Parses a value read from `table`, naming the row when it does not parse.
pub(crate) fn parse<T, E: std::fmt::Display>(
    table: &'static str,
    key: &str,
    r: std::result::Result<T, E>,
) -> Result<T> {
    r.map_err(|e| Failure::Corrupt {
        table,
        key: key.to_owned(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests;
