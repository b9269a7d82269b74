//! `BindingStore` on the `bindings` table, keyed by device. "Bind if absent" is an insert that
//! does nothing on conflict: the primary key decides the one winner among racing processes,
//! on this host or another.

use async_trait::async_trait;
use berth_core::{Binding, BindingStore, DeviceId, WorkspaceId};

use crate::db::{Arg, Dialect};
use crate::{Result, SqlStore, parse};

const TABLE: &str = "bindings";

fn workspace_of(device: &DeviceId, text: String) -> Result<WorkspaceId> {
    parse(TABLE, device.as_str(), WorkspaceId::new(text))
}

impl SqlStore {
    async fn bound(&self, device: &DeviceId) -> Result<Option<WorkspaceId>> {
        self.pool()
            .opt(
                "SELECT workspace_id FROM bindings WHERE device = $1",
                &[Arg::Text(device.as_str())],
            )
            .await?
            .map(|r| workspace_of(device, r.text(0)?))
            .transpose()
    }

    async fn bind_device(
        &self,
        device: &DeviceId,
        ws: &WorkspaceId,
    ) -> Result<Option<WorkspaceId>> {
        let args = [Arg::Text(device.as_str()), Arg::Text(ws.as_str())];
        loop {
            let mut tx = self.pool().begin().await?;
            let sql = match tx.dialect() {
                Dialect::Sqlite => "SELECT workspace_id FROM bindings WHERE device = $1",
                Dialect::Postgres => {
                    "SELECT workspace_id FROM bindings WHERE device = $1 FOR UPDATE"
                }
            };
            let old = tx.opt(sql, &args[..1]).await?;
            let replaced = match old {
                Some(row) => {
                    let old = workspace_of(device, row.text(0)?)?;
                    tx.exec(
                        "UPDATE bindings SET workspace_id = $2 WHERE device = $1",
                        &args,
                    )
                    .await?;
                    Some(old)
                }
                None => {
                    let inserted = tx
                        .exec(
                            "INSERT INTO bindings (device, workspace_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                            &args,
                        )
                        .await?;
                    if inserted == 0 {
                        // Another process bound it since the read: read what it bound.
                        continue;
                    }
                    None
                }
            };
            tx.commit().await?;
            return Ok(replaced);
        }
    }

    async fn bind_absent(&self, device: &DeviceId, ws: &WorkspaceId) -> Result<WorkspaceId> {
        loop {
            let inserted = self
                .pool()
                .exec(
                    "INSERT INTO bindings (device, workspace_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    &[Arg::Text(device.as_str()), Arg::Text(ws.as_str())],
                )
                .await?;
            if inserted == 1 {
                return Ok(ws.clone());
            }
            // Somebody got there first; an unbind between the two statements means there is
            // no winner any more, and this one tries again.
            if let Some(winner) = self.bound(device).await? {
                return Ok(winner);
            }
        }
    }
}

#[async_trait]
impl BindingStore for SqlStore {
    async fn resolve(&self, device: &DeviceId) -> berth_core::Result<Option<WorkspaceId>> {
        self.bound(device).await.map_err(|e| self.err(e))
    }

    async fn bind(
        &self,
        device: &DeviceId,
        ws: &WorkspaceId,
    ) -> berth_core::Result<Option<WorkspaceId>> {
        self.bind_device(device, ws).await.map_err(|e| self.err(e))
    }

    async fn bind_if_absent(
        &self,
        device: &DeviceId,
        ws: &WorkspaceId,
    ) -> berth_core::Result<WorkspaceId> {
        self.bind_absent(device, ws).await.map_err(|e| self.err(e))
    }

    async fn unbind(&self, device: &DeviceId) -> berth_core::Result<Option<WorkspaceId>> {
        async {
            self.pool()
                .opt(
                    "DELETE FROM bindings WHERE device = $1 RETURNING workspace_id",
                    &[Arg::Text(device.as_str())],
                )
                .await?
                .map(|r| workspace_of(device, r.text(0)?))
                .transpose()
        }
        .await
        .map_err(|e| self.err(e))
    }

    async fn unbind_workspace(&self, ws: &WorkspaceId) -> berth_core::Result<Vec<DeviceId>> {
        async {
            let mut devices = self
                .pool()
                .all(
                    "DELETE FROM bindings WHERE workspace_id = $1 RETURNING device",
                    &[Arg::Text(ws.as_str())],
                )
                .await?
                .iter()
                .map(|r| {
                    let text = r.text(0)?;
                    parse(TABLE, &text, DeviceId::new(text.clone()))
                })
                .collect::<Result<Vec<_>>>()?;
            devices.sort();
            Ok(devices)
        }
        .await
        .map_err(|e| self.err(e))
    }

    async fn list(&self) -> berth_core::Result<Vec<Binding>> {
        async {
            let mut all = self
                .pool()
                .all(
                    "SELECT device, workspace_id FROM bindings ORDER BY device",
                    &[],
                )
                .await?
                .iter()
                .map(|r| {
                    let text = r.text(0)?;
                    let device = parse(TABLE, &text, DeviceId::new(text.clone()))?;
                    let workspace = workspace_of(&device, r.text(1)?)?;
                    Ok(Binding { device, workspace })
                })
                .collect::<Result<Vec<_>>>()?;
            all.sort_by(|a, b| a.device.cmp(&b.device));
            Ok(all)
        }
        .await
        .map_err(|e| self.err(e))
    }
}
