//! What a front end acting for someone may reach: everything (this machine, an admin's
//! token), or one device's workspace and its sessions (a device's token over `berth serve`).
//! ACP and the web page both hold a caller to this one rule, so that no front end can let a
//! device see another's session or run a turn in a folder the device named.

use std::path::PathBuf;

use berth_core::config::McpServerSettings;
use berth_core::{DeviceId, Session, Workspace, WorkspaceId};

use crate::error::Result;
use crate::{Error, ErrorKind, Ops};

/// Whom a front end acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Everything.
    All,
    /// One device: its workspace (bound on first use) and that workspace's sessions.
    Device(DeviceId),
}

impl Reach {
    /// Whether the person acting with this reach may run a command the sandbox refused once
    /// without it: the machine's own or an admin's, never a device's, whose token must not
    /// lift the sandbox the server's owner set.
    pub fn may_lift_sandbox(&self) -> bool {
        matches!(self, Reach::All)
    }
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
    /// The MCP servers a client acting for `reach` asked for, as they will run. Everything's
    /// run as asked (they are its person's, as an editor's config is). A device's run only
    /// where they are `[[mcp_servers]]` entries the admin named in `[serve]
    /// device_mcp_servers`, matched by command and arguments (or URL), and then as configured:
    /// a device's token starts no program of its own choosing on the server and sends it to no
    /// host of its choosing.
    pub async fn client_mcp_servers(
        &self,
        reach: &Reach,
        asked: Vec<McpServerSettings>,
    ) -> Result<Vec<McpServerSettings>> {
        let Reach::Device(device) = reach else {
            return Ok(asked);
        };
        if asked.is_empty() {
            return Ok(asked);
        }
        let config = self.config(None).await?.config;
        let allowed: Vec<&McpServerSettings> = config
            .mcp_servers
            .iter()
            .filter(|e| config.serve.device_mcp_servers.contains(&e.name))
            .collect();
        asked
            .iter()
            .map(|server| {
                let found = allowed
                    .iter()
                    .find(|e| match (&server.command, &server.url) {
                        (Some(command), _) => {
                            e.command.as_deref() == Some(command.as_str()) && e.args == server.args
                        }
                        (None, Some(url)) => e.url.as_deref() == Some(url.as_str()),
                        (None, None) => false,
                    });
                let shown = match (&server.command, &server.url) {
                    (Some(command), _) => format!("`{command} {}`", server.args.join(" ")),
                    (None, url) => url.clone().unwrap_or_default(),
                };
                found.map(|e| (*e).clone()).ok_or_else(|| {
                    device_mcp_refused(
                        device,
                        &format!("the MCP server {:?} ({shown})", server.name),
                    )
                })
            })
            .collect()
    }

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

/// A device's MCP server refused, saying how the admin may allow one.
pub fn device_mcp_refused(device: &DeviceId, what: &str) -> Error {
    Error::rule(
        ErrorKind::Refused,
        format!(
            "this connection acts for device {device}, which cannot start {what} on the server; the server's admin can allow an [[mcp_servers]] entry of the same command and arguments (or URL) by naming it in [serve] device_mcp_servers"
        ),
    )
}
