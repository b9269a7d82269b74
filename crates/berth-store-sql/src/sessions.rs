//! `SessionStore` on `sessions` and `messages`. A message is a row keyed by (session, seq): an
//! append is one insert whatever the transcript's length, and the transcript is read back in
//! one query. The frontmatter comes from the session row, as the filesystem store writes it
//! from the session at creation.

use async_trait::async_trait;
use berth_core::transcript::{Frontmatter, Message, Role, Transcript};
use berth_core::{
    Error, NewSession, Session, SessionId, SessionStatus, SessionStore, TokenUsage,
    TranscriptStamp, TurnHold, WorkspaceId,
};
use chrono::{DateTime, Utc};

use crate::db::{Arg, Dialect, Row, Tx};
use crate::workspaces::missing as missing_workspace;
use crate::{Failure, Result, SqlStore, from_ns, parse, to_ns};

/// The columns a new session's row is written with; its token counts start at the
/// database's 0.
macro_rules! new_cols {
    () => {
        "id, workspace_id, title, provider, model, cwd, status, created_ns, updated_ns, agent"
    };
}

/// The columns a session is read from: [`new_cols`] and its token counts.
macro_rules! cols {
    () => {
        concat!(new_cols!(), ", input_tokens, output_tokens")
    };
}

const TABLE: &str = "sessions";

fn session(row: &Row) -> Result<Session> {
    let key = row.text(0)?;
    Ok(Session {
        id: parse(TABLE, &key, SessionId::new(key.clone()))?,
        workspace_id: parse(TABLE, &key, WorkspaceId::new(row.text(1)?))?,
        title: row.text(2)?,
        provider: parse(TABLE, &key, row.text(3)?.parse())?,
        model: row.text(4)?,
        cwd: row.opt_text(5)?,
        status: parse(TABLE, &key, row.text(6)?.parse())?,
        created_at: from_ns(row.int(7)?),
        updated_at: from_ns(row.int(8)?),
        agent: row.opt_text(9)?,
        usage: TokenUsage {
            input_tokens: row.int(10)?.max(0) as u64,
            output_tokens: row.int(11)?.max(0) as u64,
        },
    })
}

/// How long a held turn stays held without renewal: a server that dies mid-turn gives the
/// session back after this.
const TURN_LEASE: chrono::Duration = chrono::Duration::seconds(30);

/// The task renewing a turn's lease; it stops with the hold.
struct Renewing(tokio::task::JoinHandle<()>);

impl Drop for Renewing {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn missing(id: &SessionId) -> Failure {
    Failure::Core(Error::not_found(format!("session '{id}'")))
}

/// Provider and model end up in the frontmatter; they must be single-line names (the
/// filesystem store's rule).
/// Locks a workspace row against deletion for the rest of the transaction (Postgres; SQLite's
/// write transaction holds the whole database). Workspace rows are always locked before
/// session rows, so a session change and a workspace delete cannot deadlock.
pub(crate) async fn hold_workspace(tx: &mut Tx<'_>, id: &WorkspaceId) -> Result<bool> {
    let sql = match tx.dialect() {
        Dialect::Sqlite => "SELECT 1 FROM workspaces WHERE id = $1",
        Dialect::Postgres => "SELECT 1 FROM workspaces WHERE id = $1 FOR KEY SHARE",
    };
    Ok(tx.opt(sql, &[Arg::Text(id.as_str())]).await?.is_some())
}

/// The session, its row locked for the rest of the transaction.
async fn lock_session(tx: &mut Tx<'_>, id: &SessionId) -> Result<Session> {
    let sql = match tx.dialect() {
        Dialect::Sqlite => concat!("SELECT ", cols!(), " FROM sessions WHERE id = $1"),
        Dialect::Postgres => concat!(
            "SELECT ",
            cols!(),
            " FROM sessions WHERE id = $1 FOR UPDATE"
        ),
    };
    let row = tx
        .opt(sql, &[Arg::Text(id.as_str())])
        .await?
        .ok_or_else(|| missing(id))?;
    session(&row)
}

/// A changed transcript moves its session's `updated_at`, as the files store's does.
async fn touch_session(tx: &mut Tx<'_>, id: &SessionId) -> Result<()> {
    tx.exec(
        "UPDATE sessions SET updated_ns = $2 WHERE id = $1",
        &[Arg::Text(id.as_str()), Arg::Int(to_ns(Utc::now()))],
    )
    .await?;
    Ok(())
}

async fn insert_messages(tx: &mut Tx<'_>, id: &SessionId, messages: &[Message]) -> Result<()> {
    for (i, m) in messages.iter().enumerate() {
        tx.exec(
            "INSERT INTO messages (session_id, seq, role, content) VALUES ($1, $2, $3, $4)",
            &[
                Arg::Text(id.as_str()),
                Arg::Int(i as i64 + 1),
                Arg::Text(m.role.as_str()),
                Arg::Blob(m.content.as_bytes()),
            ],
        )
        .await?;
    }
    Ok(())
}

impl SqlStore {
    async fn create_session(&self, new: NewSession, now: DateTime<Utc>) -> Result<Session> {
        new.check().map_err(Failure::Core)?;
        let id = new.id.unwrap_or_else(SessionId::generate);
        let mut tx = self.pool().begin().await?;
        if !hold_workspace(&mut tx, &new.workspace).await? {
            return Err(missing_workspace(&new.workspace));
        }
        let s = Session {
            id,
            workspace_id: new.workspace,
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
        let inserted = tx
            .exec(
                concat!(
                    "INSERT INTO sessions (",
                    new_cols!(),
                    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING"
                ),
                &[
                    Arg::Text(s.id.as_str()),
                    Arg::Text(s.workspace_id.as_str()),
                    Arg::Text(&s.title),
                    Arg::Text(s.provider.as_str()),
                    Arg::Text(&s.model),
                    Arg::OptText(s.cwd.as_deref()),
                    Arg::Text(s.status.as_str()),
                    Arg::Int(to_ns(now)),
                    Arg::Int(to_ns(now)),
                    Arg::OptText(s.agent.as_deref()),
                ],
            )
            .await?;
        if inserted == 0 {
            return Err(Failure::Core(Error::AlreadyExists {
                what: format!("session '{}'", s.id),
            }));
        }
        tx.commit().await?;
        Ok(s)
    }

    pub(crate) async fn load_session(&self, id: &SessionId) -> Result<Session> {
        let row = self
            .pool()
            .opt(
                concat!("SELECT ", cols!(), " FROM sessions WHERE id = $1"),
                &[Arg::Text(id.as_str())],
            )
            .await?
            .ok_or_else(|| missing(id))?;
        session(&row)
    }

    async fn list_sessions(&self, ws: Option<&WorkspaceId>) -> Result<Vec<Session>> {
        let rows = match ws {
            Some(ws) => {
                // One statement, so a workspace deleted meanwhile is "not found", never "no
                // sessions".
                let rows = self
                    .pool()
                    .all(
                        concat!(
                            "SELECT s.id, s.workspace_id, s.title, s.provider, s.model, s.cwd, s.status, s.created_ns, s.updated_ns, s.agent, s.input_tokens, s.output_tokens",
                            " FROM workspaces w LEFT JOIN sessions s ON s.workspace_id = w.id",
                            " WHERE w.id = $1 ORDER BY s.created_ns, s.id"
                        ),
                        &[Arg::Text(ws.as_str())],
                    )
                    .await?;
                if rows.is_empty() {
                    return Err(missing_workspace(ws));
                }
                if rows.len() == 1 && rows[0].opt_text(0)?.is_none() {
                    return Ok(Vec::new());
                }
                rows
            }
            None => {
                self.pool()
                    .all(
                        concat!("SELECT ", cols!(), " FROM sessions ORDER BY created_ns, id"),
                        &[],
                    )
                    .await?
            }
        };
        rows.iter().map(session).collect()
    }

    async fn transcript(&self, id: &SessionId) -> Result<Transcript> {
        // One statement: the session's frontmatter and every message, in order.
        let rows = self
            .pool()
            .all(
                concat!(
                    "SELECT s.provider, s.model, s.created_ns, m.role, m.content",
                    " FROM sessions s LEFT JOIN messages m ON m.session_id = s.id",
                    " WHERE s.id = $1 ORDER BY m.seq"
                ),
                &[Arg::Text(id.as_str())],
            )
            .await?;
        let first = rows.first().ok_or_else(|| missing(id))?;
        let frontmatter = Frontmatter {
            provider: first.text(0)?,
            model: first.text(1)?,
            created_at: from_ns(first.int(2)?).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        };
        let mut messages = Vec::with_capacity(rows.len());
        for row in &rows {
            let Some(role) = row.opt_text(3)? else {
                continue; // the one row of a session without messages
            };
            let key = format!("{id}");
            let role: Role = parse("messages", &key, role.parse())?;
            let content = parse(
                "messages",
                &key,
                String::from_utf8(row.opt_blob(4)?.unwrap_or_default()),
            )?;
            messages.push(Message { role, content });
        }
        Ok(Transcript {
            frontmatter,
            messages,
            complete_len: 0,
            torn_tail: 0,
            recovery_file: None,
        })
    }

    /// How many messages, and the last one's number: an append raises both, a replacement
    /// starts the numbers again.
    async fn stamp(&self, id: &SessionId) -> Result<TranscriptStamp> {
        let row = self
            .pool()
            .opt(
                concat!(
                    "SELECT COUNT(m.seq), COALESCE(MAX(m.seq), 0)",
                    " FROM sessions s LEFT JOIN messages m ON m.session_id = s.id",
                    " WHERE s.id = $1 GROUP BY s.id"
                ),
                &[Arg::Text(id.as_str())],
            )
            .await?
            .ok_or_else(|| missing(id))?;
        Ok(TranscriptStamp::new([
            row.int(0)? as u64,
            row.int(1)? as u64,
            0,
            0,
        ]))
    }

    async fn append_message(&self, id: &SessionId, message: &Message) -> Result<()> {
        let mut tx = self.pool().begin().await?;
        self.append_in(&mut tx, id, message).await?;
        tx.commit().await
    }

    /// Appends `message` within `tx` (see [`SqlStore::append_grouped`]).
    pub(crate) async fn append_in(
        &self,
        tx: &mut Tx<'_>,
        id: &SessionId,
        message: &Message,
    ) -> Result<()> {
        // Checked under the session's lock: a session closed a moment ago is closed.
        lock_session(tx, id)
            .await?
            .check_open()
            .map_err(Failure::Core)?;
        tx.exec(
            concat!(
                "INSERT INTO messages (session_id, seq, role, content)",
                " SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3 FROM messages WHERE session_id = $1"
            ),
            &[
                Arg::Text(id.as_str()),
                Arg::Text(message.role.as_str()),
                Arg::Blob(message.content.as_bytes()),
            ],
        )
        .await?;
        touch_session(tx, id).await
    }

    async fn replace_transcript(&self, id: &SessionId, messages: &[Message]) -> Result<()> {
        let mut tx = self.pool().begin().await?;
        lock_session(&mut tx, id).await?;
        tx.exec(
            "DELETE FROM messages WHERE session_id = $1",
            &[Arg::Text(id.as_str())],
        )
        .await?;
        insert_messages(&mut tx, id, messages).await?;
        touch_session(&mut tx, id).await?;
        tx.commit().await
    }

    async fn delete_session(&self, id: &SessionId) -> Result<()> {
        let owner = self.load_session(id).await?.workspace_id;
        let mut tx = self.pool().begin().await?;
        hold_workspace(&mut tx, &owner).await?;
        lock_session(&mut tx, id).await?;
        tx.exec(
            "DELETE FROM files WHERE workspace_id = $1 AND session_id = $2",
            &[Arg::Text(owner.as_str()), Arg::Text(id.as_str())],
        )
        .await?;
        // Its messages go with it (ON DELETE CASCADE).
        tx.exec(
            "DELETE FROM sessions WHERE id = $1",
            &[Arg::Text(id.as_str())],
        )
        .await?;
        tx.commit().await
    }

    /// Takes the session's turn for a fresh owner id, if nobody holds it or the holder's lease
    /// ran out; a task renews the lease while the hold lives.
    async fn hold_session_turn(&self, id: &SessionId) -> Result<TurnHold> {
        let owner = uuid::Uuid::new_v4().to_string();
        let now = Utc::now();
        let taken = self
            .pool()
            .exec(
                "UPDATE sessions SET turn_owner = $2, turn_until = $3 WHERE id = $1 AND (turn_owner IS NULL OR turn_until < $4)",
                &[
                    Arg::Text(id.as_str()),
                    Arg::Text(&owner),
                    Arg::Int(to_ns(now + TURN_LEASE)),
                    Arg::Int(to_ns(now)),
                ],
            )
            .await?;
        if taken == 0 {
            // Held, or not there at all: say which.
            self.load_session(id).await?;
            return Err(Failure::Core(berth_core::turn_held(id)));
        }
        let renew = {
            let (store, id, owner) = (self.clone(), id.clone(), owner.clone());
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep((TURN_LEASE / 3).to_std().expect("a positive lease")).await;
                    let until = to_ns(Utc::now() + TURN_LEASE);
                    let _ = store
                        .pool()
                        .exec(
                            "UPDATE sessions SET turn_until = $3 WHERE id = $1 AND turn_owner = $2",
                            &[Arg::Text(id.as_str()), Arg::Text(&owner), Arg::Int(until)],
                        )
                        .await;
                }
            })
        };
        let release = {
            let (store, id) = (self.clone(), id.clone());
            move || -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
                Box::pin(async move {
                    let _ = store
                        .pool()
                        .exec(
                            "UPDATE sessions SET turn_owner = NULL, turn_until = NULL WHERE id = $1 AND turn_owner = $2",
                            &[Arg::Text(id.as_str()), Arg::Text(&owner)],
                        )
                        .await;
                })
            }
        };
        Ok(TurnHold::with_release(Renewing(renew), release))
    }

    /// One UPDATE adds to the counts where they are, so concurrent adds cannot lose one; a
    /// `title` (with its time) is given in the same transaction, only to a session without
    /// one.
    async fn add_session_usage(
        &self,
        id: &SessionId,
        usage: TokenUsage,
        title: Option<(&str, DateTime<Utc>)>,
    ) -> Result<Session> {
        let as_int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let mut tx = self.pool().begin().await?;
        let changed = tx
            .exec(
                "UPDATE sessions SET input_tokens = input_tokens + $2, output_tokens = output_tokens + $3 WHERE id = $1",
                &[
                    Arg::Text(id.as_str()),
                    Arg::Int(as_int(usage.input_tokens)),
                    Arg::Int(as_int(usage.output_tokens)),
                ],
            )
            .await?;
        if changed == 0 {
            return Err(missing(id));
        }
        if let Some((title, now)) = title {
            tx.exec(
                "UPDATE sessions SET title = $2, updated_ns = $3 WHERE id = $1 AND title = ''",
                &[
                    Arg::Text(id.as_str()),
                    Arg::Text(title),
                    Arg::Int(to_ns(now)),
                ],
            )
            .await?;
        }
        let s = lock_session(&mut tx, id).await?;
        tx.commit().await?;
        Ok(s)
    }

    async fn update_session(
        &self,
        id: &SessionId,
        change: impl FnOnce(&mut Session) -> Result<()>,
    ) -> Result<Session> {
        let mut tx = self.pool().begin().await?;
        let mut s = lock_session(&mut tx, id).await?;
        change(&mut s)?;
        tx.exec(
            "UPDATE sessions SET title = $2, status = $3, updated_ns = $4 WHERE id = $1",
            &[
                Arg::Text(id.as_str()),
                Arg::Text(&s.title),
                Arg::Text(s.status.as_str()),
                Arg::Int(to_ns(s.updated_at)),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(s)
    }
}

#[async_trait]
impl SessionStore for SqlStore {
    async fn create(&self, new: NewSession, now: DateTime<Utc>) -> berth_core::Result<Session> {
        self.create_session(new, now).await.map_err(|e| self.err(e))
    }

    async fn load(&self, id: &SessionId) -> berth_core::Result<Session> {
        self.load_session(id).await.map_err(|e| self.err(e))
    }

    async fn list(&self, ws: Option<&WorkspaceId>) -> berth_core::Result<Vec<Session>> {
        self.list_sessions(ws).await.map_err(|e| self.err(e))
    }

    async fn page(
        &self,
        after: Option<&SessionId>,
        limit: usize,
    ) -> berth_core::Result<Vec<Session>> {
        async {
            self.pool()
                .page(
                    concat!(
                        "SELECT ",
                        cols!(),
                        " FROM sessions WHERE id > $1 ORDER BY id LIMIT $2"
                    ),
                    after.map(|a| a.as_str()),
                    limit,
                )
                .await?
                .iter()
                .map(session)
                .collect::<Result<Vec<_>>>()
        }
        .await
        .map_err(|e| self.err(e))
    }

    async fn list_ids(&self) -> berth_core::Result<Vec<SessionId>> {
        async {
            self.pool()
                .all("SELECT id FROM sessions ORDER BY id", &[])
                .await?
                .iter()
                .map(|r| {
                    let key = r.text(0)?;
                    parse(TABLE, &key, SessionId::new(key.clone()))
                })
                .collect::<Result<Vec<_>>>()
        }
        .await
        .map_err(|e| self.err(e))
    }

    async fn read_transcript(&self, id: &SessionId) -> berth_core::Result<Transcript> {
        self.transcript(id).await.map_err(|e| self.err(e))
    }

    async fn transcript_stamp(&self, id: &SessionId) -> berth_core::Result<TranscriptStamp> {
        self.stamp(id).await.map_err(|e| self.err(e))
    }

    async fn append(&self, id: &SessionId, message: &Message) -> berth_core::Result<()> {
        // SQLite has one writer, and a sync per commit: appends made together commit
        // together. Postgres commits concurrent transactions in parallel.
        if self.pool().is_sqlite() {
            return self.append_grouped(id, message).await;
        }
        self.append_message(id, message)
            .await
            .map_err(|e| self.err(e))
    }

    async fn write_transcript(
        &self,
        id: &SessionId,
        messages: &[Message],
    ) -> berth_core::Result<()> {
        self.replace_transcript(id, messages)
            .await
            .map_err(|e| self.err(e))
    }

    async fn clear(&self, id: &SessionId) -> berth_core::Result<()> {
        self.replace_transcript(id, &[])
            .await
            .map_err(|e| self.err(e))
    }

    async fn delete(&self, id: &SessionId) -> berth_core::Result<()> {
        self.delete_session(id).await.map_err(|e| self.err(e))
    }

    async fn set_status(
        &self,
        id: &SessionId,
        status: SessionStatus,
        now: DateTime<Utc>,
    ) -> berth_core::Result<Session> {
        self.update_session(id, |s| {
            s.check_can_become(status).map_err(Failure::Core)?;
            s.status = status;
            s.updated_at = now;
            Ok(())
        })
        .await
        .map_err(|e| self.err(e))
    }

    async fn hold_turn(&self, id: &SessionId) -> berth_core::Result<TurnHold> {
        self.hold_session_turn(id).await.map_err(|e| self.err(e))
    }

    async fn count_turn(
        &self,
        id: &SessionId,
        usage: TokenUsage,
        title: Option<&str>,
        now: DateTime<Utc>,
    ) -> berth_core::Result<Session> {
        self.add_session_usage(id, usage, title.map(|t| (t, now)))
            .await
            .map_err(|e| self.err(e))
    }

    async fn set_title(
        &self,
        id: &SessionId,
        title: &str,
        now: DateTime<Utc>,
    ) -> berth_core::Result<Session> {
        self.update_session(id, |s| {
            s.title = title.to_owned();
            s.updated_at = now;
            Ok(())
        })
        .await
        .map_err(|e| self.err(e))
    }
}
