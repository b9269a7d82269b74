//! The pages, by what they show. Each handler finds what the viewer may see through the
//! functions here, which apply berth-ops' rule of reach (`Ops::held_to`): a device sees its
//! own workspace and its sessions, anything else is "not found".

pub mod land;
pub mod review;
pub mod runs;
pub mod sessions;
pub mod workspaces;

use axum::http::{HeaderMap, StatusCode};
use berth_ops::{HeldTo, Session, Workspace};

use crate::error::{PageError, PageResult};
use crate::{Viewer, Web};

impl Web {
    /// What the viewer is held to (berth-ops' rule of reach), resolved once per request.
    async fn held(&self, viewer: &Viewer) -> PageResult<HeldTo> {
        Ok(self.inner.ops.held_to(&viewer.reach).await?)
    }

    /// The workspace `identifier` names, if within reach.
    async fn visible_workspace(&self, held: &HeldTo, identifier: &str) -> PageResult<Workspace> {
        // A device names only its own workspace, and is never told of another: resolving its
        // identifier among all of them would name every workspace an ambiguous prefix
        // matches.
        if let Some(own) = held.workspace() {
            let id = own.id.as_str();
            let names_it = identifier == id
                || own.name.as_ref().is_some_and(|n| n.as_str() == identifier)
                || berth_ops::is_id_prefix(identifier, id);
            if !names_it {
                return Err(PageError::not_found("workspace"));
            }
            return match self.inner.ops.resolve_workspace(id).await {
                Ok(ws) => Ok(ws),
                Err(e) if e.is_not_found() => Err(PageError::not_found("workspace")),
                Err(e) => Err(e.into()),
            };
        }
        match self.inner.ops.resolve_workspace(identifier).await {
            Ok(ws) if held.reaches(&ws.id) => Ok(ws),
            Ok(_) => Err(PageError::not_found("workspace")),
            Err(e) if e.is_not_found() => Err(PageError::not_found("workspace")),
            Err(e) => Err(e.into()),
        }
    }

    /// The session with id `id`, if within reach.
    async fn visible_session(&self, held: &HeldTo, id: &str) -> PageResult<Session> {
        match self.inner.ops.session(id).await {
            Ok(s) if held.reaches(&s.workspace_id) => Ok(s),
            Ok(_) => Err(PageError::not_found("session")),
            Err(e) if e.is_not_found() => Err(PageError::not_found("session")),
            Err(e) => Err(e.into()),
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
