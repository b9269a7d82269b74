//! `BindingStore` on `bindings.toml`. Every change is a read-modify-write under
//! `.locks/bindings.lock` that re-reads the file under the lock, so two processes binding at
//! once never lose each other's update. Reads take no lock: the file is only ever replaced
//! whole, by rename.

use std::collections::BTreeMap;
use std::path::Path;

use async_trait::async_trait;
use berth_core::{Binding, BindingStore, DeviceId, Error, Result, WorkspaceId};
use serde::{Deserialize, Serialize};

use crate::durable::{FileLock, write_atomic};
use crate::{FsStore, Layout, io_err, parse_toml, read_optional};

#[derive(Default, Serialize, Deserialize)]
struct BindingsFile {
    #[serde(default)]
    bindings: BTreeMap<String, String>,
}

type Map = BTreeMap<DeviceId, WorkspaceId>;

impl Layout {
    fn read_bindings(&self) -> Result<Map> {
        let path = self.bindings_file();
        let Some(text) = read_optional(&path)? else {
            return Ok(Map::new());
        };
        let file: BindingsFile = parse_toml(&path, &text)?;
        file.bindings
            .into_iter()
            .map(|(device, ws)| {
                let entry = |e: berth_core::InvalidInput| corrupt_entry(&path, &text, &device, e);
                Ok((
                    DeviceId::new(device.clone()).map_err(entry)?,
                    WorkspaceId::new(ws).map_err(entry)?,
                ))
            })
            .collect()
    }

    /// Applies `change` to the bindings under the lock; writes only if something changed.
    fn update_bindings<T>(&self, change: impl FnOnce(&mut Map) -> T) -> Result<T> {
        let lock = self.lock("bindings.lock");
        let _guard = FileLock::acquire(&lock).map_err(io_err("lock", &lock))?;
        let mut map = self.read_bindings()?;
        let before = map.clone();
        let out = change(&mut map);
        if map != before {
            let file = BindingsFile {
                bindings: map
                    .iter()
                    .map(|(d, w)| (d.to_string(), w.to_string()))
                    .collect(),
            };
            let text = toml::to_string(&file).expect("bindings serialize");
            let path = self.bindings_file();
            write_atomic(&path, text.as_bytes()).map_err(io_err("write", &path))?;
        }
        Ok(out)
    }
}

fn corrupt_entry(path: &Path, text: &str, device: &str, e: berth_core::InvalidInput) -> Error {
    // Point at the line that holds the offending key, when it can be found.
    let line = text.lines().position(|l| l.contains(device)).map(|i| i + 1);
    Error::Corrupt {
        file: path.to_owned(),
        line,
        reason: e.to_string(),
    }
}

#[async_trait]
impl BindingStore for FsStore {
    async fn resolve(&self, device: &DeviceId) -> Result<Option<WorkspaceId>> {
        let device = device.clone();
        self.blocking(move |l| Ok(l.read_bindings()?.remove(&device)))
            .await
    }

    async fn bind(&self, device: &DeviceId, ws: &WorkspaceId) -> Result<Option<WorkspaceId>> {
        let (device, ws) = (device.clone(), ws.clone());
        self.blocking(move |l| l.update_bindings(|m| m.insert(device, ws)))
            .await
    }

    async fn bind_if_absent(&self, device: &DeviceId, ws: &WorkspaceId) -> Result<WorkspaceId> {
        let (device, ws) = (device.clone(), ws.clone());
        self.blocking(move |l| l.update_bindings(|m| m.entry(device).or_insert(ws).clone()))
            .await
    }

    async fn unbind(&self, device: &DeviceId) -> Result<Option<WorkspaceId>> {
        let device = device.clone();
        self.blocking(move |l| l.update_bindings(|m| m.remove(&device)))
            .await
    }

    async fn unbind_workspace(&self, ws: &WorkspaceId) -> Result<Vec<DeviceId>> {
        let ws = ws.clone();
        self.blocking(move |l| {
            l.update_bindings(|m| {
                let gone: Vec<DeviceId> = m
                    .iter()
                    .filter(|(_, w)| **w == ws)
                    .map(|(d, _)| d.clone())
                    .collect();
                for d in &gone {
                    m.remove(d);
                }
                gone
            })
        })
        .await
    }

    /// On the caller's thread (`inline`): one lock-free read of a small file, which a
    /// `workspace show` makes and which would otherwise cost it a thread of its own.
    async fn list(&self) -> Result<Vec<Binding>> {
        self.inline(|l| {
            Ok(l.read_bindings()?
                .into_iter()
                .map(|(device, workspace)| Binding { device, workspace })
                .collect())
        })
    }
}
