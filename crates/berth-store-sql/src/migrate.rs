//! The schema, embedded in the binary, and the runner that brings a database up to it.
//!
//! The version lives in `berth_schema`. A database at this binary's version costs one read; an
//! older one is migrated in one transaction under a lock (Postgres: an advisory lock; SQLite:
//! the write lock `BEGIN IMMEDIATE` takes), which re-reads the version, so two processes
//! starting together apply each migration once. DDL is transactional in both, so a crash leaves
//! the old version whole. A database newer than the binary is refused: this berth does not
//! know its tables.

use crate::db::{Arg, Conn, Dialect, Tx};
use crate::{Failure, Result};

struct Migration {
    version: i64,
    sqlite: &'static str,
    postgres: &'static str,
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sqlite: include_str!("../migrations/sqlite/0001_init.sql"),
        postgres: include_str!("../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        sqlite: include_str!("../migrations/sqlite/0002_ports.sql"),
        postgres: include_str!("../migrations/postgres/0002_ports.sql"),
    },
    Migration {
        version: 3,
        sqlite: include_str!("../migrations/sqlite/0003_usage.sql"),
        postgres: include_str!("../migrations/postgres/0003_usage.sql"),
    },
    Migration {
        version: 4,
        sqlite: include_str!("../migrations/sqlite/0004_turns.sql"),
        postgres: include_str!("../migrations/postgres/0004_turns.sql"),
    },
    Migration {
        version: 5,
        sqlite: include_str!("../migrations/sqlite/0005_runs.sql"),
        postgres: include_str!("../migrations/postgres/0005_runs.sql"),
    },
    Migration {
        version: 6,
        sqlite: include_str!("../migrations/sqlite/0006_archived.sql"),
        postgres: include_str!("../migrations/postgres/0006_archived.sql"),
    },
    Migration {
        version: 7,
        sqlite: include_str!("../migrations/sqlite/0007_session_agent.sql"),
        postgres: include_str!("../migrations/postgres/0007_session_agent.sql"),
    },
    Migration {
        version: 8,
        sqlite: include_str!("../migrations/sqlite/0008_lands.sql"),
        postgres: include_str!("../migrations/postgres/0008_lands.sql"),
    },
];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].version;

/// Any constant of berth's own, so the advisory lock is not another program's.
const PG_LOCK_KEY: i64 = 0x6265_7274_685f_7631; // "berth_v1"

/// Brings the database up to [`SCHEMA_VERSION`], or refuses a newer one.
pub(crate) async fn migrate(conn: &mut Conn) -> Result<()> {
    if current(conn).await? == Some(SCHEMA_VERSION) {
        return Ok(());
    }
    let mut tx = conn.begin().await?;
    if tx.dialect() == Dialect::Postgres {
        tx.exec("SELECT pg_advisory_xact_lock($1)", &[Arg::Int(PG_LOCK_KEY)])
            .await?;
    }
    tx.exec(
        "CREATE TABLE IF NOT EXISTS berth_schema (version BIGINT NOT NULL)",
        &[],
    )
    .await?;
    let version = version_in(&mut tx).await?;
    refuse_newer(version)?;
    for m in MIGRATIONS.iter().filter(|m| m.version > version) {
        tx.script(match tx.dialect() {
            Dialect::Sqlite => m.sqlite,
            Dialect::Postgres => m.postgres,
        })
        .await?;
    }
    if version < SCHEMA_VERSION {
        tx.exec("DELETE FROM berth_schema", &[]).await?;
        tx.exec(
            "INSERT INTO berth_schema (version) VALUES ($1)",
            &[Arg::Int(SCHEMA_VERSION)],
        )
        .await?;
    }
    tx.commit().await
}

/// The database's version, `None` before berth first ran on it; refuses a newer one.
pub(crate) async fn current(conn: &mut Conn) -> Result<Option<i64>> {
    let mut tx = conn.begin_read().await?;
    let exists = match tx.dialect() {
        Dialect::Sqlite => {
            tx.opt(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'berth_schema'",
                &[],
            )
            .await?
        }
        Dialect::Postgres => {
            tx.opt(
                "SELECT 1 WHERE to_regclass('berth_schema') IS NOT NULL",
                &[],
            )
            .await?
        }
    };
    if exists.is_none() {
        return Ok(None);
    }
    let version = version_in(&mut tx).await?;
    refuse_newer(version)?;
    Ok(Some(version))
}

async fn version_in(tx: &mut Tx<'_>) -> Result<i64> {
    let row = tx.opt("SELECT MAX(version) FROM berth_schema", &[]).await?;
    Ok(match row {
        Some(r) => r.opt_int(0)?.unwrap_or(0),
        None => 0,
    })
}

fn refuse_newer(version: i64) -> Result<()> {
    if version > SCHEMA_VERSION {
        return Err(Failure::Newer(version));
    }
    Ok(())
}
