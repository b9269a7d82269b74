//! Device bindings: which workspace a device or client works in.

use berth_core::{Binding, DeviceId, Workspace, WorkspaceId};

use crate::Ops;
use crate::error::Result;

impl Ops {
    pub async fn list_bindings(&self) -> Result<Vec<Binding>> {
        Ok(self.manager.list_bindings().await?)
    }

    /// Binds `device` to the workspace `workspace` names, replacing any earlier binding.
    /// Returns the device, the workspace, and the workspace it was bound to before.
    pub async fn bind(
        &self,
        device: &str,
        workspace: &str,
    ) -> Result<(DeviceId, Workspace, Option<WorkspaceId>)> {
        let device = DeviceId::new(device)?;
        let ws = self.manager.resolve(workspace).await?;
        let old = self.manager.bind(&device, &ws).await?;
        Ok((device, ws, old))
    }

    /// Removes the device's binding; returns the device and the workspace it was bound to.
    pub async fn unbind(&self, device: &str) -> Result<(DeviceId, WorkspaceId)> {
        let device = DeviceId::new(device)?;
        let old = self.manager.unbind(&device).await?;
        Ok((device, old))
    }

    /// The workspace bound to `device`, created and bound on first use; two processes racing
    /// on a new device end with one workspace.
    pub async fn resolve_device(&self, device: &str) -> Result<(DeviceId, Workspace)> {
        let device = DeviceId::new(device)?;
        let ws = self.manager.resolve_device(&device).await?;
        Ok((device, ws))
    }
}
