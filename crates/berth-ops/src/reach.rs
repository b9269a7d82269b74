//! What a front end acting for someone may reach: everything (this machine, an admin's
//! token), or one device's workspace and its sessions (a device's token over `berth serve`).
//! ACP and the web page both hold a caller to this one rule, so that no front end can let a
//! device see another's session or run a turn in a folder the device named.

use std::path::PathBuf;

use berth_core::{DeviceId, Session, Workspace, WorkspaceId};

use crate::Ops;
use crate::error::Result;

/// Whom a front end acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Everything.
    All,
    /// One device: its workspace (bound on first use) and that workspace's sessions.
    Device(DeviceId),
}

/// The workspace a reach is held to, once resolved: `None` for [`Reach::All`].
#[derive(Debug, Clone)]
pub struct HeldTo(Option<Workspace>);

impl HeldTo {
    /// Whether the workspace `id` (or a session in it) is within reach.
    pub fn reaches(&self, id: &WorkspaceId) -> bool {
        self.0.as_ref().is_none_or(|ws| ws.id == *id)
    }

    /// The device's workspace, when held to one.
    pub fn workspace(&self) -> Option<&Workspace> {
        self.0.as_ref()
    }
}

impl Ops {
    /// Resolves `reach`: a device's workspace (made and bound on its first use).
    pub async fn held_to(&self, reach: &Reach) -> Result<HeldTo> {
        Ok(HeldTo(match reach {
            Reach::All => None,
            Reach::Device(device) => Some(self.resolve_device(device.as_str()).await?.1),
        }))
    }

    /// Where `session`'s turns work for a front end held to `held`: a device's in its
    /// workspace's folder or worktree (its paths mean nothing on this machine, whatever the
    /// session recorded); otherwise the session's own folder ([`Ops::session_folder`]), `None`
    /// when it has none here.
    pub async fn turn_folder(&self, held: &HeldTo, session: &Session) -> Result<Option<PathBuf>> {
        match held.workspace() {
            Some(ws) => Ok(Some(self.work_dir(ws)?)),
            None => self.session_folder(session).await,
        }
    }
}
