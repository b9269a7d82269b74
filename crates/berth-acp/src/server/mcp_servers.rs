//! The MCP servers a client sends with a session, in the shape of berth's own
//! `[[mcp_servers]]`, run only as berth-ops' rule of reach lets them.

use std::sync::Arc;

use agent_client_protocol::v1::schema::McpServer;
use berth_agent::McpServers;
use berth_agent::mcp::{McpServerSettings, Secret};
use berth_ops::Reach;

use super::{Result, Server};
use crate::errors;

impl Server {
    /// The MCP servers the client asks for, as berth-ops' rule lets them run (a device's
    /// only where the admin allowed them). A server of a transport berth does not speak is
    /// left out for a trusted client and refused for a device.
    pub(super) async fn client_mcp(
        &self,
        servers: &[McpServer],
    ) -> Result<Option<Arc<McpServers>>> {
        let reach = self.reach();
        if let Reach::Device(me) = &reach
            && servers
                .iter()
                .any(|s| !matches!(s, McpServer::Stdio(_) | McpServer::Http(_)))
        {
            return Err(errors::ops(berth_ops::device_mcp_refused(
                me,
                "an MCP server of another kind",
            )));
        }
        let settings = self
            .ops
            .client_mcp_servers(&reach, client_mcp(servers))
            .await
            .map_err(errors::ops)?;
        Ok((!settings.is_empty()).then(|| Arc::new(McpServers::new(&settings))))
    }
}

/// The client's MCP servers, in the shape of berth's own `[[mcp_servers]]`. SSE servers
/// (a transport the MCP specification has replaced) are left out, with a message.
fn client_mcp(servers: &[McpServer]) -> Vec<McpServerSettings> {
    let mut settings = Vec::new();
    for server in servers {
        match server {
            McpServer::Stdio(s) => settings.push(McpServerSettings {
                name: s.name.clone(),
                command: Some(s.command.to_string_lossy().into_owned()),
                args: s.args.clone(),
                env: s
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), Secret::new(v.value.clone())))
                    .collect(),
                ..McpServerSettings::default()
            }),
            McpServer::Http(h) => settings.push(McpServerSettings {
                name: h.name.clone(),
                url: Some(h.url.clone()),
                headers: h
                    .headers
                    .iter()
                    .map(|v| (v.name.clone(), Secret::new(v.value.clone())))
                    .collect(),
                ..McpServerSettings::default()
            }),
            McpServer::Sse(s) => tracing::warn!(
                "berth acp: MCP server {:?} uses SSE, which berth does not speak; offer it over Streamable HTTP",
                s.name
            ),
            _ => {
                tracing::warn!("berth acp: an MCP server of a kind berth does not know is left out")
            }
        }
    }
    settings
}
