//! `WorkspaceStore` on the `workspaces` table. Every method is one statement, except where it
//! must tell apart two reasons a statement changed nothing (which constraint an insert hit,
//! whether a conditional delete missed the row or the condition), and where a block of ports
//! is chosen from the blocks held (one transaction under the ports lock).

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use berth_core::config::ConfigText;
use berth_core::{
    DeleteCondition, Error, GitInfo, NewWorkspace, PortBlock, PortRange, Workspace, WorkspaceId,
    WorkspaceName, WorkspaceStore,
};
use chrono::{DateTime, Utc};

use crate::db::{Arg, Dialect, Row, Tx};
use crate::{Failure, Result, SqlStore, from_ns, parse, to_ns};

/// The columns `workspace` reads, in its order.
macro_rules! cols {
    () => {
        "id, name, description, created_ns, accessed_ns, agent_id, git_repo, git_branch, git_base, git_branch_created, git_worktree, port_first, port_count, archived_ns"
    };
}

const TABLE: &str = "workspaces";

/// Any constant of berth's own: held by a transaction while it reads the blocks of ports held
/// and writes one (an assignment, or a create that brings a block), so two never decide from
/// the same picture of the blocks held (Postgres; SQLite's write lock, taken by
/// `BEGIN IMMEDIATE`, already serializes them).
const PG_PORTS_LOCK_KEY: i64 = 0x6265_7274_685f_7032; // "berth_p2"

/// Takes the ports lock for the rest of `tx` (see [`PG_PORTS_LOCK_KEY`]).
async fn lock_ports(tx: &mut Tx<'_>) -> Result<()> {
    if tx.dialect() == Dialect::Postgres {
        tx.exec(
            "SELECT pg_advisory_xact_lock($1)",
            &[Arg::Int(PG_PORTS_LOCK_KEY)],
        )
        .await?;
    }
    Ok(())
}

pub(crate) fn workspace(row: &Row) -> Result<Workspace> {
    let key = row.text(0)?;
    let id = parse(TABLE, &key, WorkspaceId::new(key.clone()))?;
    let name = row
        .opt_text(1)?
        .map(|n| parse(TABLE, &key, WorkspaceName::new(n)))
        .transpose()?;
    let git = match row.opt_text(6)? {
        None => None,
        Some(repo) => {
            let need = |v: Option<String>, col: &str| {
                v.ok_or_else(|| Failure::Corrupt {
                    table: TABLE,
                    key: key.clone(),
                    reason: format!("it has a git repository but no {col}"),
                })
            };
            Some(GitInfo {
                repo: PathBuf::from(repo),
                branch: need(row.opt_text(7)?, "git_branch")?,
                base_branch: need(row.opt_text(8)?, "git_base")?,
                branch_created: row.opt_int(9)?.unwrap_or(0) != 0,
                worktree: PathBuf::from(need(row.opt_text(10)?, "git_worktree")?),
            })
        }
    };
    let ports = match (row.opt_int(11)?, row.opt_int(12)?) {
        (None, None) => None,
        (Some(first), Some(count)) => match (u16::try_from(first), u16::try_from(count)) {
            (Ok(first), Ok(count))
                if count >= 1 && u32::from(first) + u32::from(count) <= 65536 =>
            {
                Some(PortBlock { first, count })
            }
            _ => {
                return Err(Failure::Corrupt {
                    table: TABLE,
                    key,
                    reason: format!(
                        "its ports ({first}, {count} of them) are no block of TCP ports"
                    ),
                });
            }
        },
        _ => {
            return Err(Failure::Corrupt {
                table: TABLE,
                key,
                reason: "it has one of port_first and port_count without the other".to_owned(),
            });
        }
    };
    Ok(Workspace {
        id,
        name,
        description: row.text(2)?,
        created_at: from_ns(row.int(3)?),
        last_accessed: from_ns(row.int(4)?),
        agent_id: row.opt_text(5)?,
        archived_at: row.opt_int(13)?.map(from_ns),
        git,
        ports,
    })
}

/// The blocks held, read inside `tx` once it holds the ports lock.
async fn port_blocks(tx: &mut Tx<'_>) -> Result<Vec<PortBlock>> {
    let rows = tx
        .all(
            "SELECT port_first, port_count FROM workspaces WHERE port_first IS NOT NULL ORDER BY port_first",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| -> Result<Option<PortBlock>> {
            let (first, count) = (r.int(0)?, r.int(1)?);
            Ok(u16::try_from(first)
                .ok()
                .zip(u16::try_from(count).ok())
                .map(|(first, count)| PortBlock { first, count }))
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect())
}

pub(crate) fn missing(id: &WorkspaceId) -> Failure {
    Failure::Core(Error::not_found(format!("workspace '{id}'")))
}

/// A path kept as text; records keep paths as UTF-8, as the filesystem store's TOML does.
fn path_text(p: &Path) -> Result<&str> {
    p.to_str()
        .ok_or_else(|| Failure::Invalid(format!("{} is not valid UTF-8", p.display())))
}

impl SqlStore {
    /// One transaction: with a block the record brings (a migration's), the ports lock, the
    /// blocks held, the block checked against them, then the insert, so no assignment can
    /// give out the same ports between the check and the insert (the unique `port_first`
    /// holds even if one did). A new workspace brings none and takes no lock.
    async fn create_workspace(&self, new: NewWorkspace, now: DateTime<Utc>) -> Result<Workspace> {
        let id = new.id.unwrap_or_else(WorkspaceId::generate);
        let ws = Workspace {
            id,
            name: new.name,
            description: new.description,
            created_at: now,
            last_accessed: now,
            agent_id: new.agent_id,
            archived_at: None,
            git: new.git,
            ports: new.ports,
        };
        let git = ws.git.as_ref();
        let repo = git.map(|g| path_text(&g.repo)).transpose()?;
        let worktree = git.map(|g| path_text(&g.worktree)).transpose()?;
        let mut tx = self.pool().begin().await?;
        let mut ports_taken = None;
        if let Some(block) = ws.ports {
            lock_ports(&mut tx).await?;
            ports_taken = block.check_free(port_blocks(&mut tx).await?).err();
        }
        let inserted = match ports_taken {
            Some(_) => {
                drop(tx);
                0
            }
            None => {
                let inserted = tx
                    .exec(
                        concat!(
                            "INSERT INTO workspaces (",
                            cols!(),
                            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT DO NOTHING"
                        ),
                        &[
                    Arg::Text(ws.id.as_str()),
                    Arg::OptText(ws.name.as_ref().map(|n| n.as_str())),
                    Arg::Text(&ws.description),
                    Arg::Int(to_ns(now)),
                    Arg::Int(to_ns(now)),
                    Arg::OptText(ws.agent_id.as_deref()),
                    Arg::OptText(repo),
                    Arg::OptText(git.map(|g| g.branch.as_str())),
                    Arg::OptText(git.map(|g| g.base_branch.as_str())),
                    Arg::OptInt(git.map(|g| i64::from(g.branch_created))),
                    Arg::OptText(worktree),
                    Arg::OptInt(ws.ports.map(|p| i64::from(p.first))),
                    Arg::OptInt(ws.ports.map(|p| i64::from(p.count))),
                    Arg::OptInt(None),
                ],
            )
            .await?;
                tx.commit().await?;
                inserted
            }
        };
        if inserted == 1 {
            return Ok(ws);
        }
        // Which uniqueness it broke, said as the filesystem store says it.
        let taken = self
            .pool()
            .opt(
                "SELECT 1 FROM workspaces WHERE id = $1",
                &[Arg::Text(ws.id.as_str())],
            )
            .await?;
        if taken.is_some() {
            return Err(Failure::Core(Error::AlreadyExists {
                what: format!("workspace '{}'", ws.id),
            }));
        }
        let owner = match &ws.name {
            Some(name) => self.by_name(name).await?.map(|owner| (name, owner.id)),
            None => None,
        };
        // A taken name is said first, as the filesystem store checks it first; then ports
        // another workspace holds.
        let what = match (owner, &ws.name, ports_taken) {
            (Some((name, owner)), _, _) => format!("a workspace named '{name}' ({owner})"),
            (None, _, Some(refused)) => return Err(Failure::Core(refused)),
            (None, Some(name), None) => format!("a workspace named '{name}'"),
            (None, None, None) => format!("workspace '{}'", ws.id),
        };
        Err(Failure::Core(Error::AlreadyExists { what }))
    }

    pub(crate) async fn load_workspace(&self, id: &WorkspaceId) -> Result<Workspace> {
        let row = self
            .pool()
            .opt(
                concat!("SELECT ", cols!(), " FROM workspaces WHERE id = $1"),
                &[Arg::Text(id.as_str())],
            )
            .await?
            .ok_or_else(|| missing(id))?;
        workspace(&row)
    }

    async fn by_name(&self, name: &WorkspaceName) -> Result<Option<Workspace>> {
        self.pool()
            .opt(
                concat!("SELECT ", cols!(), " FROM workspaces WHERE name = $1"),
                &[Arg::Text(name.as_str())],
            )
            .await?
            .map(|r| workspace(&r))
            .transpose()
    }

    async fn exists(&self, id: &WorkspaceId) -> Result<bool> {
        Ok(self
            .pool()
            .opt(
                "SELECT 1 FROM workspaces WHERE id = $1",
                &[Arg::Text(id.as_str())],
            )
            .await?
            .is_some())
    }

    async fn delete_workspace(&self, id: &WorkspaceId, condition: DeleteCondition) -> Result<bool> {
        // Sessions, their transcripts and all storage go with the row (ON DELETE CASCADE).
        let deleted = match condition {
            DeleteCondition::Always => {
                self.pool()
                    .exec(
                        "DELETE FROM workspaces WHERE id = $1",
                        &[Arg::Text(id.as_str())],
                    )
                    .await?
            }
            DeleteCondition::IdleSince(cutoff) => {
                self.pool()
                    .exec(
                        "DELETE FROM workspaces WHERE id = $1 AND accessed_ns < $2",
                        &[Arg::Text(id.as_str()), Arg::Int(to_ns(cutoff))],
                    )
                    .await?
            }
        };
        if deleted == 0 {
            return match self.exists(id).await? {
                true => Ok(false),
                false => Err(missing(id)),
            };
        }
        // The workspace's folder on this machine, if it has one and nothing is left in it
        // (its worktree was removed first); anything still in it is left alone.
        let _ = std::fs::remove_dir(self.workspace_folder(id));
        Ok(true)
    }

    /// One transaction: the ports lock, the record's block if it has one, else the blocks
    /// held, the lowest free one of `range`, and the update, so no other assignment (or create
    /// with a block) decides between the read and the write.
    async fn assign_workspace_ports(
        &self,
        id: &WorkspaceId,
        range: PortRange,
    ) -> Result<PortBlock> {
        let mut tx = self.pool().begin().await?;
        lock_ports(&mut tx).await?;
        let row = tx
            .opt(
                concat!("SELECT ", cols!(), " FROM workspaces WHERE id = $1"),
                &[Arg::Text(id.as_str())],
            )
            .await?
            .ok_or_else(|| missing(id))?;
        if let Some(held) = workspace(&row)?.ports {
            return Ok(held);
        }
        let block = range
            .lowest_free(port_blocks(&mut tx).await?)
            .map_err(Failure::Core)?;
        // `port_first IS NULL`: a block is written once. A delete does not take the ports
        // lock, so the row may be gone by now; then nothing is written.
        let changed = tx
            .exec(
                "UPDATE workspaces SET port_first = $2, port_count = $3 WHERE id = $1 AND port_first IS NULL",
                &[
                    Arg::Text(id.as_str()),
                    Arg::Int(i64::from(block.first)),
                    Arg::Int(i64::from(block.count)),
                ],
            )
            .await?;
        if changed == 0 {
            return Err(missing(id));
        }
        tx.commit().await?;
        Ok(block)
    }

    async fn all_workspaces(&self) -> Result<Vec<Workspace>> {
        self.pool()
            .all(
                concat!("SELECT ", cols!(), " FROM workspaces ORDER BY id"),
                &[],
            )
            .await?
            .iter()
            .map(workspace)
            .collect()
    }
}

#[async_trait]
impl WorkspaceStore for SqlStore {
    async fn create(&self, new: NewWorkspace, now: DateTime<Utc>) -> berth_core::Result<Workspace> {
        self.create_workspace(new, now)
            .await
            .map_err(|e| self.err(e))
    }

    async fn load(&self, id: &WorkspaceId) -> berth_core::Result<Workspace> {
        self.load_workspace(id).await.map_err(|e| self.err(e))
    }

    async fn load_by_name(&self, name: &WorkspaceName) -> berth_core::Result<Workspace> {
        match self.by_name(name).await {
            Ok(Some(ws)) => Ok(ws),
            Ok(None) => Err(Error::not_found(format!("workspace named '{name}'"))),
            Err(e) => Err(self.err(e)),
        }
    }

    async fn list_ids(&self) -> berth_core::Result<Vec<WorkspaceId>> {
        async {
            self.pool()
                .all("SELECT id FROM workspaces ORDER BY id", &[])
                .await?
                .iter()
                .map(|r| {
                    let key = r.text(0)?;
                    parse(TABLE, &key, WorkspaceId::new(key.clone()))
                })
                .collect::<Result<Vec<_>>>()
        }
        .await
        .map_err(|e| self.err(e))
    }

    async fn list(&self) -> berth_core::Result<Vec<Workspace>> {
        self.all_workspaces().await.map_err(|e| self.err(e))
    }

    async fn page(
        &self,
        after: Option<&WorkspaceId>,
        limit: usize,
    ) -> berth_core::Result<Vec<Workspace>> {
        async {
            self.pool()
                .page(
                    concat!(
                        "SELECT ",
                        cols!(),
                        " FROM workspaces WHERE id > $1 ORDER BY id LIMIT $2"
                    ),
                    after.map(|a| a.as_str()),
                    limit,
                )
                .await?
                .iter()
                .map(workspace)
                .collect::<Result<Vec<_>>>()
        }
        .await
        .map_err(|e| self.err(e))
    }

    async fn delete(
        &self,
        id: &WorkspaceId,
        condition: DeleteCondition,
    ) -> berth_core::Result<bool> {
        self.delete_workspace(id, condition)
            .await
            .map_err(|e| self.err(e))
    }

    async fn update_accessed(&self, id: &WorkspaceId, at: DateTime<Utc>) -> berth_core::Result<()> {
        async {
            // One statement: never moves the time backwards, whoever else writes it.
            let changed = self
                .pool()
                .exec(
                    "UPDATE workspaces SET accessed_ns = $2 WHERE id = $1 AND accessed_ns < $2",
                    &[Arg::Text(id.as_str()), Arg::Int(to_ns(at))],
                )
                .await?;
            if changed == 0 && !self.exists(id).await? {
                return Err(missing(id));
            }
            Ok(())
        }
        .await
        .map_err(|e| self.err(e))
    }

    async fn gc(&self, cutoff: DateTime<Utc>) -> berth_core::Result<Vec<Workspace>> {
        // A database leaves no debris behind an interrupted operation: a transaction that did
        // not commit left nothing.
        async {
            self.pool()
                .all(
                    concat!(
                        "SELECT ",
                        cols!(),
                        " FROM workspaces WHERE id <> $1 AND accessed_ns < $2 ORDER BY id"
                    ),
                    &[
                        Arg::Text(WorkspaceId::default_workspace().as_str()),
                        Arg::Int(to_ns(cutoff)),
                    ],
                )
                .await?
                .iter()
                .map(workspace)
                .collect::<Result<Vec<_>>>()
        }
        .await
        .map_err(|e| self.err(e))
    }

    async fn load_config(&self, id: &WorkspaceId) -> berth_core::Result<Option<ConfigText>> {
        async {
            let row = self
                .pool()
                .opt(
                    "SELECT config FROM workspaces WHERE id = $1",
                    &[Arg::Text(id.as_str())],
                )
                .await?
                .ok_or_else(|| missing(id))?;
            Ok(row.opt_text(0)?.map(|text| ConfigText {
                origin: PathBuf::from(format!("{} (config of workspace {id})", self.url())),
                text,
            }))
        }
        .await
        .map_err(|e| self.err(e))
    }

    async fn save_config(&self, id: &WorkspaceId, text: &str) -> berth_core::Result<()> {
        async {
            let changed = self
                .pool()
                .exec(
                    "UPDATE workspaces SET config = $2 WHERE id = $1",
                    &[Arg::Text(id.as_str()), Arg::Text(text)],
                )
                .await?;
            if changed == 0 {
                return Err(missing(id));
            }
            Ok(())
        }
        .await
        .map_err(|e| self.err(e))
    }

    async fn assign_ports(
        &self,
        id: &WorkspaceId,
        range: PortRange,
    ) -> berth_core::Result<PortBlock> {
        self.assign_workspace_ports(id, range)
            .await
            .map_err(|e| self.err(e))
    }

    async fn set_git(&self, id: &WorkspaceId, git: &GitInfo) -> berth_core::Result<()> {
        async {
            let changed = self
                .pool()
                .exec(
                    "UPDATE workspaces SET git_repo = $2, git_branch = $3, git_base = $4, git_branch_created = $5, git_worktree = $6 WHERE id = $1",
                    &[
                        Arg::Text(id.as_str()),
                        Arg::Text(path_text(&git.repo)?),
                        Arg::Text(&git.branch),
                        Arg::Text(&git.base_branch),
                        Arg::Int(i64::from(git.branch_created)),
                        Arg::Text(path_text(&git.worktree)?),
                    ],
                )
                .await?;
            if changed == 0 {
                return Err(missing(id));
            }
            Ok(())
        }
        .await
        .map_err(|e| self.err(e))
    }

    async fn set_archived(
        &self,
        id: &WorkspaceId,
        at: Option<DateTime<Utc>>,
    ) -> berth_core::Result<Workspace> {
        async {
            let changed = self
                .pool()
                .exec(
                    "UPDATE workspaces SET archived_ns = $2 WHERE id = $1",
                    &[Arg::Text(id.as_str()), Arg::OptInt(at.map(to_ns))],
                )
                .await?;
            if changed == 0 {
                return Err(missing(id));
            }
            self.load_workspace(id).await
        }
        .await
        .map_err(|e| self.err(e))
    }

    fn workspace_dir(&self, id: &WorkspaceId) -> Option<PathBuf> {
        Some(self.workspace_folder(id))
    }
}
