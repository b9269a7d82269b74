//! Kept lands in the database: berth-run's land records (JSON, which this crate does not
//! read), each with a version that every write names, so that two writers never overwrite
//! each other unseen. berth-run keeps every rule of a land; this file only stores.

use crate::db::{Arg, Row};
use crate::{Result, SqlStore};

/// A kept land as the database holds it.
#[derive(Debug, Clone)]
pub struct LandRow {
    pub id: String,
    /// berth-run's record, as it wrote it.
    pub record: String,
    /// What a write of this record must name.
    pub version: i64,
}

/// The lands of a database store.
#[derive(Clone)]
pub struct SqlLands {
    store: SqlStore,
}

impl SqlStore {
    /// This store's kept lands.
    pub fn lands(&self) -> SqlLands {
        SqlLands {
            store: self.clone(),
        }
    }
}

fn land_row(row: &Row) -> Result<LandRow> {
    Ok(LandRow {
        id: row.text(0)?,
        record: row.text(1)?,
        version: row.int(2)?,
    })
}

impl SqlLands {
    fn wrap<T>(&self, r: Result<T>) -> berth_core::Result<T> {
        r.map_err(|f| self.store.err(f))
    }

    /// Files a new land at version 1; `false` when its id is taken.
    pub async fn insert(
        &self,
        id: &str,
        created_ns: i64,
        record: &str,
    ) -> berth_core::Result<bool> {
        self.wrap(
            async {
                let n = self
                    .store
                    .pool()
                    .exec(
                        "INSERT INTO lands (id, created_ns, version, record) VALUES ($1, $2, 1, $3) ON CONFLICT DO NOTHING",
                        &[Arg::Text(id), Arg::Int(created_ns), Arg::Text(record)],
                    )
                    .await?;
                Ok(n == 1)
            }
            .await,
        )
    }

    /// The land `id`, if there is one.
    pub async fn get(&self, id: &str) -> berth_core::Result<Option<LandRow>> {
        self.wrap(
            async {
                let row = self
                    .store
                    .pool()
                    .opt(
                        "SELECT id, record, version FROM lands WHERE id = $1",
                        &[Arg::Text(id)],
                    )
                    .await?;
                row.as_ref().map(land_row).transpose()
            }
            .await,
        )
    }

    /// Every land, newest first.
    pub async fn list(&self) -> berth_core::Result<Vec<LandRow>> {
        self.wrap(
            async {
                let rows = self
                    .store
                    .pool()
                    .all(
                        "SELECT id, record, version FROM lands ORDER BY created_ns DESC, id",
                        &[],
                    )
                    .await?;
                rows.iter().map(land_row).collect()
            }
            .await,
        )
    }

    /// Writes land `id`'s record when its version is still `version`, making it one more;
    /// `false` (nothing written) when another write came first.
    pub async fn write(&self, id: &str, version: i64, record: &str) -> berth_core::Result<bool> {
        self.wrap(
            async {
                let n = self
                    .store
                    .pool()
                    .exec(
                        "UPDATE lands SET record = $3, version = version + 1 WHERE id = $1 AND version = $2",
                        &[Arg::Text(id), Arg::Int(version), Arg::Text(record)],
                    )
                    .await?;
                Ok(n == 1)
            }
            .await,
        )
    }
}
