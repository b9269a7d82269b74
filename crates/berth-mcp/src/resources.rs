//! What each resource URI reads as. The bridge tools render the same [`Body`] as tool results,
//! so a client without resource support sees exactly what `resources/read` returns.

use base64::Engine;
use berth_core::{StorageScope, transcript};
use berth_ops::{Node, Result, Session, StoragePath, Workspace};
use rmcp::model::{ContentBlock, ResourceContents};
use serde_json::{Value, json};

use crate::context::Context;
use crate::uri::{self, Target};

/// A resource's contents before they become MCP resource contents or a tool result.
pub enum Body {
    Json(Value),
    Text { text: String, mime: String },
    Blob { bytes: Vec<u8>, mime: String },
}

impl Body {
    /// A file's bytes: text when they are UTF-8 without NUL bytes, else a blob, typed by name.
    pub fn file(path: &str, bytes: Vec<u8>) -> Body {
        let mime = mime_of(path);
        match String::from_utf8(bytes) {
            Ok(text) if !text.contains('\0') => Body::Text {
                text,
                mime: mime.unwrap_or_else(|| "text/plain".to_owned()),
            },
            Ok(text) => Body::Blob {
                bytes: text.into_bytes(),
                mime: mime.unwrap_or_else(|| "application/octet-stream".to_owned()),
            },
            Err(e) => Body::Blob {
                bytes: e.into_bytes(),
                mime: mime.unwrap_or_else(|| "application/octet-stream".to_owned()),
            },
        }
    }

    /// Structured data and the content blocks of a tool result. A file's content travels
    /// once: text as a text block, anything else as an embedded resource (`uri`, base64);
    /// the structured part says what it is (path, MIME type, encoding, size). JSON data is
    /// its own text, compact.
    pub fn into_tool_output(self, path: &str, uri: &str) -> (Value, Vec<ContentBlock>) {
        match self {
            Body::Json(value) => {
                let text = serde_json::to_string(&value).unwrap_or_default();
                (value, vec![ContentBlock::text(text)])
            }
            Body::Text { text, mime } => (
                json!({"path": path, "uri": uri, "mime_type": mime, "encoding": "utf-8", "size": text.len()}),
                vec![ContentBlock::text(text)],
            ),
            Body::Blob { bytes, mime } => {
                let size = bytes.len();
                let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                (
                    json!({"path": path, "uri": uri, "mime_type": mime, "encoding": "base64", "size": size}),
                    vec![ContentBlock::resource(
                        ResourceContents::blob(b64, uri).with_mime_type(mime),
                    )],
                )
            }
        }
    }
}

/// What a workspace's `context` resource reads as before anything was written.
const NO_CONTEXT: &str = "# Context\n\nNo context has been written for this workspace yet. \
Keep the task, decisions and progress here with `workspace_storage_write` \
(path `context.md`), so the next session can pick up where this one stopped.\n";

/// What a workspace's memory reads as before any note is kept.
const NO_MEMORY: &str = "# Memory\n\nNo notes yet. berth's agent keeps notes here with its `remember` tool; \
every new turn in the workspace starts with them.\n";

pub async fn read(cx: &Context, target: Target) -> Result<Body> {
    match target {
        Target::Workspaces => workspaces_json(cx).await.map(Body::Json),
        Target::Workspace(id) => workspace_json(cx, &id).await.map(Body::Json),
        Target::Files(id, path) => worktree_body(cx, &id, path.as_deref()).await,
        Target::Context(id) => {
            let ws = cx.ops.resolve_workspace(&id).await?;
            let text = cx.ops.context(&ws).await?;
            Ok(Body::Text {
                text: text.unwrap_or_else(|| NO_CONTEXT.to_owned()),
                mime: "text/markdown".to_owned(),
            })
        }
        Target::Memory(id) => {
            let ws = cx.ops.resolve_workspace(&id).await?;
            let memory = cx.ops.memory(&ws).await?;
            let text = match memory.text.trim() {
                "" => NO_MEMORY.to_owned(),
                _ => memory.text,
            };
            Ok(Body::Text {
                text,
                mime: "text/markdown".to_owned(),
            })
        }
        Target::Sessions => sessions_json(cx).await.map(Body::Json),
        Target::Session(id) => session_json(cx, &id).await.map(Body::Json),
        Target::Transcript(id) => {
            let s = cx.ops.resolve_session(&id).await?;
            let t = cx.ops.transcript(&s).await?;
            Ok(Body::Text {
                text: transcript::encode(&t.frontmatter, &t.messages),
                mime: "text/markdown".to_owned(),
            })
        }
        Target::Storage(owner, id, path) => {
            let at = cx.ops.storage(owner, &id).await?;
            let (path, node) = cx.ops.read_node(&at, path.as_deref()).await?;
            Ok(node_body(
                node,
                &owner_uri(at.scope()),
                "storage",
                path.as_ref(),
            ))
        }
    }
}

/// The URI of the workspace or session that owns `scope`.
pub fn owner_uri(scope: &StorageScope) -> String {
    match scope {
        StorageScope::Workspace(w) => uri::workspace(w),
        StorageScope::Session { session, .. } => uri::session(session),
    }
}

/// A workspace's view with the URI of its details.
pub fn workspace_item(cx: &Context, ws: &Workspace) -> Value {
    let mut v = serde_json::to_value(cx.ops.view(ws, None)).unwrap_or(Value::Null);
    v["uri"] = json!(uri::workspace(&ws.id));
    v
}

/// A session's view with the URIs of its details and its workspace.
pub fn session_item(s: &Session) -> Value {
    let mut v = serde_json::to_value(berth_ops::SessionView::of(s)).unwrap_or(Value::Null);
    v["uri"] = json!(uri::session(&s.id));
    v["workspace_uri"] = json!(uri::workspace(&s.workspace_id));
    v
}

/// Every workspace, each with the URI of its details.
pub async fn workspaces_json(cx: &Context) -> Result<Value> {
    let all = cx.ops.workspace_records().await?;
    let items: Vec<Value> = all.iter().map(|ws| workspace_item(cx, ws)).collect();
    Ok(json!({ "workspaces": items }))
}

/// One workspace: its view (with the worktree's state), the URIs of its files, context,
/// storage and sessions.
pub async fn workspace_json(cx: &Context, identifier: &str) -> Result<Value> {
    let ws = cx.ops.resolve_workspace(identifier).await?;
    let status = cx.ops.git_status(&ws).await?;
    let sessions = cx.ops.session_records(Some(&ws.id)).await?;
    let base = uri::workspace(&ws.id);
    let mut v = serde_json::to_value(cx.ops.view(&ws, status)).unwrap_or(Value::Null);
    v["uri"] = json!(base);
    if ws.git.is_some() {
        v["files_uri"] = json!(uri::child(&base, "files", None));
    }
    v["context_uri"] = json!(uri::child(&base, "context", None));
    v["storage_uri"] = json!(uri::child(&base, "storage", None));
    v["sessions"] = sessions
        .iter()
        .map(|s| json!({"id": s.id, "title": s.title, "status": s.status, "uri": uri::session(&s.id)}))
        .collect();
    Ok(v)
}

pub async fn sessions_json(cx: &Context) -> Result<Value> {
    let all = cx.ops.session_records(None).await?;
    let items: Vec<Value> = all.iter().map(session_item).collect();
    Ok(json!({ "sessions": items }))
}

pub async fn session_json(cx: &Context, identifier: &str) -> Result<Value> {
    let s = cx.ops.resolve_session(identifier).await?;
    let base = uri::session(&s.id);
    let mut v = session_item(&s);
    v["transcript_uri"] = json!(uri::child(&base, "transcript", None));
    v["storage_uri"] = json!(uri::child(&base, "storage", None));
    // The kept run working in the session (`session_run`, `berth run`), where it is.
    v["run"] = json!(cx.runs.status(&cx.ops, s.id.as_str()).await?);
    Ok(v)
}

/// A file or folder of a git workspace's worktree.
pub async fn worktree_body(cx: &Context, identifier: &str, path: Option<&str>) -> Result<Body> {
    let ws = cx.ops.resolve_workspace(identifier).await?;
    let (path, node) = cx
        .ops
        .read_worktree(&ws, path, cx.max_file_bytes)
        .await
        .map_err(|e| match &ws.git {
            // The ops message knows no URIs; a plain workspace's files are in its storage.
            None => berth_ops::Error::Rule {
                kind: e.kind(),
                message: format!(
                    "{e}: read {} or use workspace_storage_list",
                    uri::child(&uri::workspace(&ws.id), "storage", None)
                ),
            },
            Some(_) => e,
        })?;
    Ok(node_body(
        node,
        &uri::workspace(&ws.id),
        "files",
        path.as_ref(),
    ))
}

/// A folder as JSON whose entries carry their URIs, or a file's contents. `owner_uri` and `sub`
/// (`files` or `storage`) name the tree the path is in.
fn node_body(node: Node, owner_uri: &str, sub: &str, path: Option<&StoragePath>) -> Body {
    let here = path.map(|p| p.as_str());
    match node {
        Node::File(bytes) => Body::file(here.unwrap_or(""), bytes),
        Node::Folder(entries) => {
            let entries: Vec<Value> = entries
                .iter()
                .map(|e| {
                    json!({
                        "name": e.name,
                        "path": e.path,
                        "type": e.kind.as_str(),
                        "size": e.size,
                        "uri": uri::child(owner_uri, sub, Some(&e.path)),
                    })
                })
                .collect();
            Body::Json(json!({
                "uri": uri::child(owner_uri, sub, here),
                "path": here.unwrap_or(""),
                "entries": entries,
            }))
        }
    }
}

/// The MIME type of a file, guessed from its name; `None` when the name says nothing.
pub fn mime_of(path: &str) -> Option<String> {
    mime_guess::from_path(path)
        .first_raw()
        .map(str::to_owned)
        .or_else(|| well_known_text(path).then(|| "text/plain".to_owned()))
}

/// Names of plain-text files that carry no extension.
fn well_known_text(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(
        name,
        "Makefile" | "Dockerfile" | "LICENSE" | "README" | "Cargo.lock" | ".gitignore"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mime_types() {
        assert_eq!(mime_of("a/b.rs").as_deref(), Some("text/x-rust"));
        assert_eq!(mime_of("x.png").as_deref(), Some("image/png"));
        assert_eq!(mime_of("Makefile").as_deref(), Some("text/plain"));
        assert_eq!(mime_of("data.unknownext"), None);
    }
}
