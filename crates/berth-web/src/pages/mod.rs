//! The pages, by what they show. Each handler finds what the viewer may see through the
//! functions here, which hold the one rule of reach: a device sees its own workspace and its
//! sessions, anything else is "not found".

pub mod runs;
pub mod sessions;
pub mod workspaces;

use axum::http::{HeaderMap, StatusCode};
use berth_ops::{Session, Workspace};

use crate::error::{PageError, PageResult};
use crate::{Reach, Viewer, Web};

impl Web {
    /// The device's workspace, for a device's viewer.
    async fn device_workspace(&self, viewer: &Viewer) -> PageResult<Option<Workspace>> {
        match &viewer.reach {
            Reach::All => Ok(None),
            Reach::Device(device) => {
                let (_, ws) = self.inner.ops.resolve_device(device.as_str()).await?;
                Ok(Some(ws))
            }
        }
    }

    /// The workspace `identifier` names, if the viewer may see it.
    async fn visible_workspace(&self, viewer: &Viewer, identifier: &str) -> PageResult<Workspace> {
        let ws = match self.inner.ops.resolve_workspace(identifier).await {
            Ok(ws) => ws,
            Err(e) if e.is_not_found() => return Err(PageError::not_found("workspace")),
            Err(e) => return Err(e.into()),
        };
        match self.device_workspace(viewer).await? {
            Some(mine) if mine.id != ws.id => Err(PageError::not_found("workspace")),
            _ => Ok(ws),
        }
    }

    /// The session with id `id`, if the viewer may see it.
    async fn visible_session(&self, viewer: &Viewer, id: &str) -> PageResult<Session> {
        let session = match self.inner.ops.session(id).await {
            Ok(s) => s,
            Err(e) if e.is_not_found() => return Err(PageError::not_found("session")),
            Err(e) => return Err(e.into()),
        };
        match self.device_workspace(viewer).await? {
            Some(mine) if mine.id != session.workspace_id => Err(PageError::not_found("session")),
            _ => Ok(session),
        }
    }
}

/// A state-changing request must carry the page's CSRF token: a page of another site cannot
/// read it, nor send the header without the server's leave.
fn check_csrf(viewer: &Viewer, headers: &HeaderMap) -> PageResult<()> {
    let sent = headers.get("x-berth-csrf").and_then(|v| v.to_str().ok());
    if sent.is_some_and(|s| s == viewer.csrf) {
        Ok(())
    } else {
        Err(PageError::new(
            StatusCode::FORBIDDEN,
            "this request lacks the page's x-berth-csrf header; send it from berth's own page",
        ))
    }
}

/// The answer to a POST from the page's script: where to go next, if anywhere.
fn done(location: Option<String>) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "ok": true, "location": location }))
}
