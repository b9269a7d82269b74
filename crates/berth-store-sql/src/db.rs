//! The few database primitives the store is written against, once for both dialects: a pool,
//! a transaction, a row, and the values bound to a query. Only this file knows that SQLite and
//! Postgres are different types; everything above it is written once.
//!
//! Every value goes in as a bound parameter (`Arg`); SQL text is `&'static str`, so no value
//! can ever become SQL.

use std::time::Duration;

use sqlx::postgres::{PgConnection, PgPool, PgRow};
use sqlx::sqlite::{SqliteConnection, SqlitePool, SqliteRow};
use sqlx::{Connection, Postgres, Row as _, Sqlite, Transaction};

use crate::{Failure, Result};

/// Which SQL the database speaks, where the two differ (DDL, row locks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// A value bound to a `$n` parameter.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Int(i64),
    OptInt(Option<i64>),
    Text(&'a str),
    OptText(Option<&'a str>),
    Blob(&'a [u8]),
}

#[derive(Clone)]
pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

pub(crate) enum Tx<'c> {
    Sqlite(Transaction<'c, Sqlite>),
    Postgres(Transaction<'c, Postgres>),
}

/// One connection of its own, outside any pool: what `open` checks and migrates with, so a
/// database that cannot be reached says why at once instead of after a pool's retries.
pub(crate) enum Conn {
    Sqlite(SqliteConnection),
    Postgres(PgConnection),
}

pub(crate) enum Row {
    Sqlite(SqliteRow),
    Postgres(PgRow),
}

/// Binds `args` to a query of either dialect.
macro_rules! bound {
    ($sql:expr, $args:expr) => {{
        let mut q = sqlx::query($sql);
        for arg in $args {
            q = match *arg {
                Arg::Int(v) => q.bind(v),
                Arg::OptInt(v) => q.bind(v),
                Arg::Text(v) => q.bind(v),
                Arg::OptText(v) => q.bind(v),
                Arg::Blob(v) => q.bind(v),
            };
        }
        q
    }};
}

/// Postgres refuses NUL in text (SQLite and the filesystem store keep it); refused up front
/// with the same kind of error everywhere rather than as a driver failure.
fn check_pg_text(args: &[Arg<'_>]) -> Result<()> {
    let nul = args.iter().any(|a| match a {
        Arg::Text(t) | Arg::OptText(Some(t)) => t.contains('\0'),
        _ => false,
    });
    if nul {
        return Err(Failure::Invalid(
            "text stored in a Postgres store cannot contain a NUL byte".into(),
        ));
    }
    Ok(())
}

impl Pool {
    pub(crate) fn is_sqlite(&self) -> bool {
        matches!(self, Pool::Sqlite(_))
    }

    /// A write transaction. SQLite's takes the write lock at once (`BEGIN IMMEDIATE`), so a
    /// transaction that reads before it writes never fails to upgrade its lock: it waits (up
    /// to the busy timeout) instead. Postgres's is read committed; the store locks the rows it
    /// reads before it changes them.
    pub(crate) async fn begin(&self) -> Result<Tx<'static>> {
        Ok(match self {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?),
            Pool::Postgres(p) => Tx::Postgres(p.begin().await?),
        })
    }

    /// A read-only transaction: several reads that see one state. SQLite's is deferred, so it
    /// waits for no writer.
    pub(crate) async fn begin_read(&self) -> Result<Tx<'static>> {
        Ok(match self {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin().await?),
            Pool::Postgres(p) => Tx::Postgres(p.begin().await?),
        })
    }

    pub(crate) async fn all(&self, sql: &'static str, args: &[Arg<'_>]) -> Result<Vec<Row>> {
        Ok(match self {
            Pool::Sqlite(p) => bound!(sql, args)
                .fetch_all(p)
                .await?
                .into_iter()
                .map(Row::Sqlite)
                .collect(),
            Pool::Postgres(p) => {
                check_pg_text(args)?;
                bound!(sql, args)
                    .fetch_all(p)
                    .await?
                    .into_iter()
                    .map(Row::Postgres)
                    .collect()
            }
        })
    }

    pub(crate) async fn opt(&self, sql: &'static str, args: &[Arg<'_>]) -> Result<Option<Row>> {
        Ok(match self {
            Pool::Sqlite(p) => bound!(sql, args).fetch_optional(p).await?.map(Row::Sqlite),
            Pool::Postgres(p) => {
                check_pg_text(args)?;
                bound!(sql, args)
                    .fetch_optional(p)
                    .await?
                    .map(Row::Postgres)
            }
        })
    }

    /// One page of a listing in id order: `sql` selects `… WHERE id > $1 ORDER BY id LIMIT $2`.
    /// Every id sorts after the empty string, so "after nothing" is the first page.
    pub(crate) async fn page(
        &self,
        sql: &'static str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Row>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.all(sql, &[Arg::Text(after.unwrap_or("")), Arg::Int(limit)])
            .await
    }

    /// Runs one statement on its own (autocommit); returns the rows it affected.
    pub(crate) async fn exec(&self, sql: &'static str, args: &[Arg<'_>]) -> Result<u64> {
        Ok(match self {
            Pool::Sqlite(p) => bound!(sql, args).execute(p).await?.rows_affected(),
            Pool::Postgres(p) => {
                check_pg_text(args)?;
                bound!(sql, args).execute(p).await?.rows_affected()
            }
        })
    }

    pub(crate) async fn close(&self) {
        match self {
            Pool::Sqlite(p) => p.close().await,
            Pool::Postgres(p) => p.close().await,
        }
    }
}

impl Tx<'_> {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Tx::Sqlite(_) => Dialect::Sqlite,
            Tx::Postgres(_) => Dialect::Postgres,
        }
    }

    pub(crate) async fn all(&mut self, sql: &'static str, args: &[Arg<'_>]) -> Result<Vec<Row>> {
        Ok(match self {
            Tx::Sqlite(t) => bound!(sql, args)
                .fetch_all(&mut **t)
                .await?
                .into_iter()
                .map(Row::Sqlite)
                .collect(),
            Tx::Postgres(t) => {
                check_pg_text(args)?;
                bound!(sql, args)
                    .fetch_all(&mut **t)
                    .await?
                    .into_iter()
                    .map(Row::Postgres)
                    .collect()
            }
        })
    }

    pub(crate) async fn opt(&mut self, sql: &'static str, args: &[Arg<'_>]) -> Result<Option<Row>> {
        Ok(match self {
            Tx::Sqlite(t) => bound!(sql, args)
                .fetch_optional(&mut **t)
                .await?
                .map(Row::Sqlite),
            Tx::Postgres(t) => {
                check_pg_text(args)?;
                bound!(sql, args)
                    .fetch_optional(&mut **t)
                    .await?
                    .map(Row::Postgres)
            }
        })
    }

    pub(crate) async fn exec(&mut self, sql: &'static str, args: &[Arg<'_>]) -> Result<u64> {
        Ok(match self {
            Tx::Sqlite(t) => bound!(sql, args).execute(&mut **t).await?.rows_affected(),
            Tx::Postgres(t) => {
                check_pg_text(args)?;
                bound!(sql, args).execute(&mut **t).await?.rows_affected()
            }
        })
    }

    /// Runs a script of several statements (a migration), binding nothing.
    pub(crate) async fn script(&mut self, sql: &'static str) -> Result<()> {
        match self {
            Tx::Sqlite(t) => {
                sqlx::raw_sql(sql).execute(&mut **t).await?;
            }
            Tx::Postgres(t) => {
                sqlx::raw_sql(sql).execute(&mut **t).await?;
            }
        }
        Ok(())
    }

    pub(crate) async fn commit(self) -> Result<()> {
        match self {
            Tx::Sqlite(t) => t.commit().await?,
            Tx::Postgres(t) => t.commit().await?,
        }
        Ok(())
    }
}

impl Conn {
    /// A write transaction, as [`Pool::begin`] makes them.
    pub(crate) async fn begin(&mut self) -> Result<Tx<'_>> {
        Ok(match self {
            Conn::Sqlite(c) => Tx::Sqlite(c.begin_with("BEGIN IMMEDIATE").await?),
            Conn::Postgres(c) => Tx::Postgres(c.begin().await?),
        })
    }

    /// A read transaction, as [`Pool::begin_read`] makes them.
    pub(crate) async fn begin_read(&mut self) -> Result<Tx<'_>> {
        Ok(match self {
            Conn::Sqlite(c) => Tx::Sqlite(c.begin().await?),
            Conn::Postgres(c) => Tx::Postgres(c.begin().await?),
        })
    }

    /// One statement outside a transaction (a SQLite pragma that cannot run inside one).
    pub(crate) async fn opt(&mut self, sql: &'static str, args: &[Arg<'_>]) -> Result<Option<Row>> {
        Ok(match self {
            Conn::Sqlite(c) => bound!(sql, args).fetch_optional(c).await?.map(Row::Sqlite),
            Conn::Postgres(c) => bound!(sql, args)
                .fetch_optional(c)
                .await?
                .map(Row::Postgres),
        })
    }

    pub(crate) async fn close(self) {
        let _ = match self {
            Conn::Sqlite(c) => c.close().await,
            Conn::Postgres(c) => c.close().await,
        };
    }
}

impl Row {
    fn get<T>(&self, i: usize) -> Result<T>
    where
        T: for<'r> sqlx::Decode<'r, Sqlite>
            + sqlx::Type<Sqlite>
            + for<'r> sqlx::Decode<'r, Postgres>
            + sqlx::Type<Postgres>,
    {
        Ok(match self {
            Row::Sqlite(r) => r.try_get(i)?,
            Row::Postgres(r) => r.try_get(i)?,
        })
    }

    pub(crate) fn int(&self, i: usize) -> Result<i64> {
        self.get(i)
    }

    pub(crate) fn text(&self, i: usize) -> Result<String> {
        self.get(i)
    }

    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<String>> {
        self.get(i)
    }

    pub(crate) fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        self.get(i)
    }

    pub(crate) fn opt_blob(&self, i: usize) -> Result<Option<Vec<u8>>> {
        self.get(i)
    }
}

/// How long a SQLite connection waits for another writer before giving up.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(30);
