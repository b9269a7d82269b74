//! Kept runs in the database: berth-run's run records (JSON, which this crate does not read),
//! their events, the stops and tells for their supervisors, and the leases that say who works
//! each one. berth-run keeps every rule of a run; this file only stores and hands out.
//!
//! - **A lease and a fence.** Whoever works a run (a CLI's supervisor, a worker) holds it until
//!   `lease_until` and renews it while it works. Taking a run adds one to its `fence`, and
//!   every write names the fence its writer was given: a writer whose lease ran out and whose
//!   run was taken writes nothing more (the write finds another fence and changes no row).
//! - **A queue on the database's own locks.** A worker claims the oldest waiting run with
//!   `FOR UPDATE SKIP LOCKED` on Postgres (racing workers each get a different one, none
//!   waits), under SQLite's write lock there; Postgres wakes idle workers with `NOTIFY`.

use chrono::Utc;

use crate::db::{Arg, Dialect, Row, Tx};
use crate::notices::RunsListener;
use crate::{Failure, Result, SqlStore, to_ns};

/// The channel Postgres notifies when a run is queued.
pub const RUNS_CHANNEL: &str = "berth_runs";

/// The channel Postgres notifies, with the run's id, when a run's record or events change:
/// what a follower of the run waits on instead of reading again on a timer.
pub const RUN_CHANGES_CHANNEL: &str = "berth_run_changes";

/// A kept run as the database holds it.
#[derive(Debug, Clone)]
pub struct RunRow {
    pub id: String,
    /// berth-run's record, as it wrote it.
    pub record: String,
    /// Whether its lease is held now (its worker lives).
    pub leased: bool,
    /// The node holding (or last holding) its lease.
    pub owner: Option<String>,
    pub fence: i64,
}

/// What a run is filed under, beside its record.
#[derive(Debug, Clone)]
pub struct RunColumns<'a> {
    pub id: &'a str,
    pub created_ns: i64,
    pub state: &'a str,
    /// Queued for a worker, rather than worked by the process that made it.
    pub pooled: bool,
    /// The node a pooled run is pinned to.
    pub node: Option<&'a str>,
    pub agents: usize,
}

/// A stop or a tell for a run's supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequestRow {
    pub kind: String,
    pub agent: Option<i64>,
    pub body: String,
}

/// The runs of a database store.
#[derive(Clone)]
pub struct SqlRuns {
    store: SqlStore,
}

impl SqlStore {
    /// This store's kept runs.
    pub fn runs(&self) -> SqlRuns {
        SqlRuns {
            store: self.clone(),
        }
    }
}

fn lease_end(lease: std::time::Duration) -> i64 {
    to_ns(Utc::now() + chrono::Duration::from_std(lease).unwrap_or(chrono::TimeDelta::MAX))
}

fn run_row(row: &Row) -> Result<RunRow> {
    let until = row.opt_int(3)?;
    Ok(RunRow {
        id: row.text(0)?,
        record: row.text(1)?,
        owner: row.opt_text(2)?,
        leased: until.is_some_and(|u| u >= to_ns(Utc::now())),
        fence: row.int(4)?,
    })
}

/// Whether `fence` is still run `id`'s, its row locked for the rest of `tx` (SQLite's write
/// transaction holds the whole database already): a write of a holder whose run was taken
/// is refused here.
async fn holds(tx: &mut Tx<'_>, id: &str, fence: i64) -> Result<bool> {
    let lock = match tx.dialect() {
        Dialect::Postgres => "SELECT fence FROM runs WHERE id = $1 FOR UPDATE",
        Dialect::Sqlite => "SELECT fence FROM runs WHERE id = $1",
    };
    let held = tx.opt(lock, &[Arg::Text(id)]).await?;
    Ok(held.map(|r| r.int(0)).transpose()? == Some(fence))
}

impl SqlRuns {
    fn wrap<T>(&self, r: Result<T>) -> berth_core::Result<T> {
        r.map_err(|f| self.store.err(f))
    }

    /// Files a new run; `false` when its id is taken. A pooled run wakes the workers.
    pub async fn insert(&self, run: &RunColumns<'_>, record: &str) -> berth_core::Result<bool> {
        self.wrap(self.file(run, record, &[]).await)
    }

    /// Files `run` with its record and `events`, in one transaction, unless its id is taken;
    /// whether it was filed. A pooled run's workers are woken at commit.
    async fn file(&self, run: &RunColumns<'_>, record: &str, events: &[String]) -> Result<bool> {
        let mut tx = self.store.pool().begin().await?;
        let added = tx
            .exec(
                "INSERT INTO runs (id, created_ns, state, pooled, node, agents, record) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                &[
                    Arg::Text(run.id),
                    Arg::Int(run.created_ns),
                    Arg::Text(run.state),
                    Arg::Int(i64::from(run.pooled)),
                    Arg::OptText(run.node),
                    Arg::Int(i64::try_from(run.agents).unwrap_or(i64::MAX)),
                    Arg::Text(record),
                ],
            )
            .await?;
        if added == 0 {
            return Ok(false);
        }
        for (n, event) in events.iter().enumerate() {
            tx.exec(
                "INSERT INTO run_events (run_id, seq, event) VALUES ($1, $2, $3)",
                &[Arg::Text(run.id), Arg::Int(n as i64 + 1), Arg::Text(event)],
            )
            .await?;
        }
        if run.pooled && tx.dialect() == Dialect::Postgres {
            // Sent at commit, so no worker looks before the run is there.
            tx.exec(
                "SELECT pg_notify($1, $2)",
                &[Arg::Text(RUNS_CHANNEL), Arg::Text(run.id)],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// The run `id`, if there is one.
    pub async fn get(&self, id: &str) -> berth_core::Result<Option<RunRow>> {
        self.wrap(
            async {
                let row = self
                    .store
                    .pool()
                    .opt(
                        "SELECT id, record, owner, lease_until, fence FROM runs WHERE id = $1",
                        &[Arg::Text(id)],
                    )
                    .await?;
                row.as_ref().map(run_row).transpose()
            }
            .await,
        )
    }

    /// The ids of every run.
    pub async fn ids(&self) -> berth_core::Result<Vec<String>> {
        self.wrap(
            async {
                let rows = self.store.pool().all("SELECT id FROM runs", &[]).await?;
                rows.iter().map(|r| r.text(0)).collect()
            }
            .await,
        )
    }

    /// Every run, newest first.
    pub async fn list(&self) -> berth_core::Result<Vec<RunRow>> {
        self.wrap(async {
            let rows = self
                .store
                .pool()
                .all(
                    "SELECT id, record, owner, lease_until, fence FROM runs ORDER BY created_ns DESC, id",
                    &[],
                )
                .await?;
            rows.iter().map(run_row).collect()
        }
        .await)
    }

    /// At most `limit` runs, newest first (by creation, then id), after the run `after`
    /// names by its creation time and id (`None`: from the newest). One query, whatever the
    /// number of runs.
    pub async fn page(
        &self,
        limit: usize,
        after: Option<(i64, &str)>,
    ) -> berth_core::Result<Vec<RunRow>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.wrap(
            async {
                let rows = match after {
                    None => {
                        self.store
                            .pool()
                            .all(
                                "SELECT id, record, owner, lease_until, fence FROM runs \
                                 ORDER BY created_ns DESC, id LIMIT $1",
                                &[Arg::Int(limit)],
                            )
                            .await?
                    }
                    Some((ns, id)) => {
                        self.store
                            .pool()
                            .all(
                                "SELECT id, record, owner, lease_until, fence FROM runs \
                                 WHERE created_ns < $1 OR (created_ns = $1 AND id > $2) \
                                 ORDER BY created_ns DESC, id LIMIT $3",
                                &[Arg::Int(ns), Arg::Text(id), Arg::Int(limit)],
                            )
                            .await?
                    }
                };
                rows.iter().map(run_row).collect()
            }
            .await,
        )
    }

    /// Takes the run `id` for `owner` when nobody holds its lease: its new fence, or `None`
    /// while another holds it.
    pub async fn take(
        &self,
        id: &str,
        owner: &str,
        lease: std::time::Duration,
    ) -> berth_core::Result<Option<i64>> {
        self.wrap(async {
            let now = to_ns(Utc::now());
            let row = self
                .store
                .pool()
                .opt(
                    "UPDATE runs SET owner = $2, lease_until = $3, fence = fence + 1 WHERE id = $1 AND (lease_until IS NULL OR lease_until < $4) RETURNING fence",
                    &[
                        Arg::Text(id),
                        Arg::Text(owner),
                        Arg::Int(lease_end(lease)),
                        Arg::Int(now),
                    ],
                )
                .await?;
            row.map(|r| r.int(0)).transpose()
        }
        .await)
    }

    /// Claims the oldest pooled run this node may work: one queued (pinned to `node` or to
    /// none) of at most `room` agents, or one whose worker's lease lapsed. Its id and new
    /// fence. Racing workers each claim a different run.
    pub async fn claim(
        &self,
        node: &str,
        room: usize,
        lease: std::time::Duration,
    ) -> berth_core::Result<Option<(String, i64)>> {
        self.wrap(self.claim_in(node, room, lease).await)
    }

    async fn claim_in(
        &self,
        node: &str,
        room: usize,
        lease: std::time::Duration,
    ) -> Result<Option<(String, i64)>> {
        let now = to_ns(Utc::now());
        let room = i64::try_from(room).unwrap_or(i64::MAX);
        let mut tx = self.store.pool().begin().await?;
        let pick = match tx.dialect() {
            Dialect::Postgres => {
                "SELECT id FROM runs WHERE pooled = 1 AND (node IS NULL OR node = $1) AND agents <= $2 AND state IN ('queued', 'starting', 'running') AND (lease_until IS NULL OR lease_until < $3) ORDER BY created_ns LIMIT 1 FOR UPDATE SKIP LOCKED"
            }
            Dialect::Sqlite => {
                "SELECT id FROM runs WHERE pooled = 1 AND (node IS NULL OR node = $1) AND agents <= $2 AND state IN ('queued', 'starting', 'running') AND (lease_until IS NULL OR lease_until < $3) ORDER BY created_ns LIMIT 1"
            }
        };
        let Some(row) = tx
            .opt(pick, &[Arg::Text(node), Arg::Int(room), Arg::Int(now)])
            .await?
        else {
            return Ok(None);
        };
        let id = row.text(0)?;
        let fence = tx
            .opt(
                "UPDATE runs SET owner = $2, lease_until = $3, fence = fence + 1 WHERE id = $1 RETURNING fence",
                &[Arg::Text(&id), Arg::Text(node), Arg::Int(lease_end(lease))],
            )
            .await?
            .ok_or_else(|| Failure::Invalid(format!("run {id} vanished while it was claimed")))?
            .int(0)?;
        tx.commit().await?;
        Ok(Some((id, fence)))
    }

    /// Renews the lease of the holder of `fence`; `false` once another took the run.
    pub async fn renew(
        &self,
        id: &str,
        fence: i64,
        lease: std::time::Duration,
    ) -> berth_core::Result<bool> {
        self.wrap(
            async {
                let n = self
                    .store
                    .pool()
                    .exec(
                        "UPDATE runs SET lease_until = $3 WHERE id = $1 AND fence = $2",
                        &[Arg::Text(id), Arg::Int(fence), Arg::Int(lease_end(lease))],
                    )
                    .await?;
                Ok(n == 1)
            }
            .await,
        )
    }

    /// Gives the lease back (the run ended, or its worker stops): the run is free at once.
    pub async fn release(&self, id: &str, fence: i64) -> berth_core::Result<()> {
        self.wrap(
            async {
                self.store
                    .pool()
                    .exec(
                        "UPDATE runs SET lease_until = NULL WHERE id = $1 AND fence = $2",
                        &[Arg::Text(id), Arg::Int(fence)],
                    )
                    .await?;
                Ok(())
            }
            .await,
        )
    }

    /// Writes the run's record as the holder of `fence`; `false` (nothing written) once
    /// another took the run.
    pub async fn write(
        &self,
        id: &str,
        fence: i64,
        state: &str,
        record: &str,
    ) -> berth_core::Result<bool> {
        self.wrap(
            async {
                let n = self
                    .store
                    .pool()
                    .exec(
                        "UPDATE runs SET state = $3, record = $4 WHERE id = $1 AND fence = $2",
                        &[
                            Arg::Text(id),
                            Arg::Int(fence),
                            Arg::Text(state),
                            Arg::Text(record),
                        ],
                    )
                    .await?;
                if n == 1 && !self.store.pool().is_sqlite() {
                    self.store
                        .pool()
                        .exec(
                            "SELECT pg_notify($1, $2)",
                            &[Arg::Text(RUN_CHANGES_CHANNEL), Arg::Text(id)],
                        )
                        .await?;
                }
                Ok(n == 1)
            }
            .await,
        )
    }

    /// Writes the record of a run nobody holds, when its fence is still `fence` (what the
    /// writer read): recording a run failed whose worker died. `false` when someone took it
    /// meanwhile.
    pub async fn write_unheld(
        &self,
        id: &str,
        fence: i64,
        state: &str,
        record: &str,
    ) -> berth_core::Result<bool> {
        self.wrap(async {
            let n = self
                .store
                .pool()
                .exec(
                    "UPDATE runs SET state = $3, record = $4 WHERE id = $1 AND fence = $2 AND (lease_until IS NULL OR lease_until < $5)",
                    &[
                        Arg::Text(id),
                        Arg::Int(fence),
                        Arg::Text(state),
                        Arg::Text(record),
                        Arg::Int(to_ns(Utc::now())),
                    ],
                )
                .await?;
            Ok(n == 1)
        }
        .await)
    }

    /// Deletes run `id` with its events, requests and session index, unless a lease holds it
    /// now; whether it was deleted.
    pub async fn delete_unheld(&self, id: &str) -> berth_core::Result<bool> {
        self.wrap(
            async {
                let n = self
                .store
                .pool()
                .exec(
                    "DELETE FROM runs WHERE id = $1 AND (lease_until IS NULL OR lease_until < $2)",
                    &[Arg::Text(id), Arg::Int(to_ns(Utc::now()))],
                )
                .await?;
                Ok(n == 1)
            }
            .await,
        )
    }

    /// Appends events as the holder of `fence`, in order; `false` (nothing appended) once
    /// another took the run.
    pub async fn append(
        &self,
        id: &str,
        fence: i64,
        events: &[String],
    ) -> berth_core::Result<bool> {
        self.wrap(
            async {
                let mut tx = self.store.pool().begin().await?;
                if !holds(&mut tx, id, fence).await? {
                    return Ok(false);
                }
                let next = tx
                    .opt(
                        "SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = $1",
                        &[Arg::Text(id)],
                    )
                    .await?
                    .map(|r| r.int(0))
                    .transpose()?
                    .unwrap_or(0);
                for (n, event) in events.iter().enumerate() {
                    tx.exec(
                        "INSERT INTO run_events (run_id, seq, event) VALUES ($1, $2, $3)",
                        &[
                            Arg::Text(id),
                            Arg::Int(next + 1 + n as i64),
                            Arg::Text(event),
                        ],
                    )
                    .await?;
                }
                if tx.dialect() == Dialect::Postgres {
                    // Sent at commit: a follower woken reads the events.
                    tx.exec(
                        "SELECT pg_notify($1, $2)",
                        &[Arg::Text(RUN_CHANGES_CHANNEL), Arg::Text(id)],
                    )
                    .await?;
                }
                tx.commit().await?;
                Ok(true)
            }
            .await,
        )
    }

    /// Copies a run kept elsewhere (its record and events), unless one of its id is here:
    /// whether it was copied. For a home's runs on files, brought into its database store.
    pub async fn adopt(
        &self,
        run: &RunColumns<'_>,
        record: &str,
        events: &[String],
    ) -> berth_core::Result<bool> {
        self.wrap(self.file(run, record, events).await)
    }

    /// The run's events after `after` (a sequence number; 0 for all), each with its own.
    pub async fn events(&self, id: &str, after: i64) -> berth_core::Result<Vec<(i64, String)>> {
        self.wrap(
            async {
                let rows = self
                .store
                .pool()
                .all(
                    "SELECT seq, event FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq",
                    &[Arg::Text(id), Arg::Int(after)],
                )
                .await?;
                rows.iter().map(|r| Ok((r.int(0)?, r.text(1)?))).collect()
            }
            .await,
        )
    }

    /// Leaves a stop or a tell for the run's supervisor.
    pub async fn request(&self, id: &str, request: &RunRequestRow) -> berth_core::Result<()> {
        self.wrap(
            async {
                self.store
                .pool()
                .exec(
                    "INSERT INTO run_requests (run_id, kind, agent, body) VALUES ($1, $2, $3, $4)",
                    &[
                        Arg::Text(id),
                        Arg::Text(&request.kind),
                        Arg::OptInt(request.agent),
                        Arg::Text(&request.body),
                    ],
                )
                .await?;
                Ok(())
            }
            .await,
        )
    }

    /// Takes the requests left for the run, as the holder of `fence`, in the order they came.
    /// Nothing for a writer whose run was taken (the new holder takes them).
    pub async fn take_requests(
        &self,
        id: &str,
        fence: i64,
    ) -> berth_core::Result<Vec<RunRequestRow>> {
        self.wrap(
            async {
                let mut tx = self.store.pool().begin().await?;
                if !holds(&mut tx, id, fence).await? {
                    return Ok(Vec::new());
                }
                let rows = tx
                .all(
                    "DELETE FROM run_requests WHERE run_id = $1 RETURNING id, kind, agent, body",
                    &[Arg::Text(id)],
                )
                .await?;
                tx.commit().await?;
                let mut taken: Vec<(i64, RunRequestRow)> = rows
                    .iter()
                    .map(|r| {
                        Ok((
                            r.int(0)?,
                            RunRequestRow {
                                kind: r.text(1)?,
                                agent: r.opt_int(2)?,
                                body: r.text(3)?,
                            },
                        ))
                    })
                    .collect::<Result<_>>()?;
                taken.sort_by_key(|(n, _)| *n);
                Ok(taken.into_iter().map(|(_, r)| r).collect())
            }
            .await,
        )
    }

    /// Keeps `run` as the run session `session` works for.
    pub async fn index_session(&self, session: &str, run: &str) -> berth_core::Result<()> {
        self.wrap(async {
            let sql = match self.store.pool().is_sqlite() {
                true => "INSERT INTO run_sessions (session_id, run_id) VALUES ($1, $2) ON CONFLICT (session_id) DO UPDATE SET run_id = excluded.run_id",
                false => "INSERT INTO run_sessions (session_id, run_id) VALUES ($1, $2) ON CONFLICT (session_id) DO UPDATE SET run_id = EXCLUDED.run_id",
            };
            self.store
                .pool()
                .exec(sql, &[Arg::Text(session), Arg::Text(run)])
                .await?;
            Ok(())
        }
        .await)
    }

    /// The run session `session` works for, if any.
    pub async fn run_of_session(&self, session: &str) -> berth_core::Result<Option<String>> {
        self.wrap(
            async {
                let row = self
                    .store
                    .pool()
                    .opt(
                        "SELECT run_id FROM run_sessions WHERE session_id = $1",
                        &[Arg::Text(session)],
                    )
                    .await?;
                row.map(|r| r.text(0)).transpose()
            }
            .await,
        )
    }

    /// Whether this database can wake a worker (Postgres's `LISTEN`); SQLite's workers look
    /// again after a while.
    pub fn notifies(&self) -> bool {
        !self.store.pool().is_sqlite()
    }

    /// A listener woken when a run is queued (Postgres only; `None` on SQLite).
    pub async fn listen(&self) -> berth_core::Result<Option<RunsListener>> {
        self.listen_to(&[RUNS_CHANNEL]).await
    }

    /// A listener woken when a run is queued or changes (its id), for a follower of runs
    /// (Postgres only; `None` on SQLite).
    pub async fn listen_changes(&self) -> berth_core::Result<Option<RunsListener>> {
        self.listen_to(&[RUNS_CHANNEL, RUN_CHANGES_CHANNEL]).await
    }

    async fn listen_to(
        &self,
        channels: &'static [&'static str],
    ) -> berth_core::Result<Option<RunsListener>> {
        let crate::db::Pool::Postgres(pool) = self.store.pool() else {
            return Ok(None);
        };
        self.wrap(self.store.notices().listen(pool, channels).await.map(Some))
    }
}
