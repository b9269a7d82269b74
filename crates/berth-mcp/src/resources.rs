//! What each resource URI reads as. The bridge tools render the same [`Body`] as tool results,
//! so a client without resource support sees exactly what `resources/read` returns.

use base64::Engine;
use berth_core::{Session, StoragePath, StorageScope, Workspace, WorkspaceId, transcript};
use serde_json::{Value, json};

use crate::uri::{self, Owner, Target};
use crate::worktree::{self, Node};
use crate::{BerthMcp, text_of};

/// A resource's contents before they become MCP resource contents or a tool result.
pub enum Body {
    Json(Value),
    Text { text: String, mime: String },
    Blob { bytes: Vec<u8>, mime: String },
}

impl Body {
    /// A file's bytes: text when they are UTF-8 without NUL bytes, else a blob, typed by name.
    pub fn file(path: &str, bytes: Vec<u8>) -> Body {
        let mime = worktree::mime_of(path);
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

    /// Structured data and its text rendering, for a tool result. `path` names a file body.
    pub fn into_tool_output(self, path: &str) -> (Value, String) {
        match self {
            Body::Json(value) => {
                let text = serde_json::to_string_pretty(&value).unwrap_or_default();
                (value, text)
            }
            Body::Text { text, mime } => (
                json!({"path": path, "mime_type": mime, "encoding": "utf-8", "size": text.len(), "content": text}),
                text,
            ),
            Body::Blob { bytes, mime } => {
                let size = bytes.len();
                let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                (
                    json!({"path": path, "mime_type": mime, "encoding": "base64", "size": size, "content": b64}),
                    format!(
                        "{path} is binary ({mime}, {size} bytes); its base64 content is in structuredContent"
                    ),
                )
            }
        }
    }
}

/// What a workspace's `context` resource reads as before anything was written.
const NO_CONTEXT: &str = "# Context\n\nNo context has been written for this workspace yet. \
Keep the task, decisions and progress here with `workspace_storage_write` \
(path `context.md`), so the next session can pick up where this one stopped.\n";

impl BerthMcp {
    pub(crate) async fn read_target(&self, target: Target) -> Result<Body, String> {
        match target {
            Target::Workspaces => self.workspaces_json().await.map(Body::Json),
            Target::Workspace(id) => self.workspace_json(&id).await.map(Body::Json),
            Target::Files(id, path) => self.worktree_body(&id, path.as_deref()).await,
            Target::Context(id) => self.context_body(&id).await,
            Target::Sessions => self.sessions_json().await.map(Body::Json),
            Target::Session(id) => self.session_json(&id).await.map(Body::Json),
            Target::Transcript(id) => {
                let s = self.session(&id).await?;
                let t = self.manager.read_transcript(&s).await.map_err(text_of)?;
                Ok(Body::Text {
                    text: transcript::encode(&t.frontmatter, &t.messages),
                    mime: "text/markdown".to_owned(),
                })
            }
            Target::Storage(owner, id, path) => {
                let (scope, base) = self.storage_owner(owner, &id).await?;
                self.storage_body(scope, &base, path.as_deref()).await
            }
        }
    }

    /// Every workspace, each with the URI of its details.
    pub(crate) async fn workspaces_json(&self) -> Result<Value, String> {
        let all = self.manager.list().await.map_err(text_of)?;
        let items: Vec<Value> = all
            .iter()
            .map(|ws| {
                let mut v = serde_json::to_value(ws).unwrap_or(Value::Null);
                v["uri"] = json!(uri::workspace(&ws.id));
                v
            })
            .collect();
        Ok(json!({ "workspaces": items }))
    }

    /// One workspace: the record, its folder, the URIs of its files, context, storage and
    /// sessions, and for git the worktree's state.
    pub(crate) async fn workspace_json(&self, identifier: &str) -> Result<Value, String> {
        let ws = self.manager.resolve(identifier).await.map_err(text_of)?;
        let status = match ws.git.clone() {
            Some(git) => Some(
                tokio::task::spawn_blocking(move || berth_git::workspace::status(&git))
                    .await
                    .map_err(text_of)?,
            ),
            None => None,
        };
        let sessions = self.sessions_of(Some(&ws.id)).await?;
        let base = uri::workspace(&ws.id);
        let mut v = serde_json::to_value(&ws).map_err(text_of)?;
        v["uri"] = json!(base);
        v["path"] = json!(self.manager.workspaces().workspace_dir(&ws.id));
        v["git_status"] = json!(status);
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

    /// The sessions of one workspace, or of all.
    pub(crate) async fn sessions_of(
        &self,
        workspace: Option<&WorkspaceId>,
    ) -> Result<Vec<Session>, String> {
        self.manager
            .sessions()
            .list(workspace)
            .await
            .map_err(text_of)
    }

    async fn session(&self, identifier: &str) -> Result<Session, String> {
        self.manager
            .resolve_session(identifier)
            .await
            .map_err(text_of)
    }

    pub(crate) async fn sessions_json(&self) -> Result<Value, String> {
        let all = self.sessions_of(None).await?;
        let items: Vec<Value> = all
            .iter()
            .map(|s| {
                let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
                v["uri"] = json!(uri::session(&s.id));
                v["workspace_uri"] = json!(uri::workspace(&s.workspace_id));
                v
            })
            .collect();
        Ok(json!({ "sessions": items }))
    }

    pub(crate) async fn session_json(&self, identifier: &str) -> Result<Value, String> {
        let s = self.session(identifier).await?;
        let base = uri::session(&s.id);
        let mut v = serde_json::to_value(&s).map_err(text_of)?;
        v["uri"] = json!(base);
        v["workspace_uri"] = json!(uri::workspace(&s.workspace_id));
        v["transcript_uri"] = json!(uri::child(&base, "transcript", None));
        v["storage_uri"] = json!(uri::child(&base, "storage", None));
        Ok(v)
    }

    /// A git workspace's worktree; a plain workspace has none.
    async fn worktree_of(&self, identifier: &str) -> Result<(Workspace, String), String> {
        let ws = self.manager.resolve(identifier).await.map_err(text_of)?;
        match ws.git.as_ref().map(|g| g.worktree.clone()) {
            Some(worktree) => Ok((ws, worktree)),
            None => Err(format!(
                "workspace {} is a plain workspace: it has no worktree to browse. Its files are in its storage: read {} or use workspace_storage_list",
                ws.id,
                uri::child(&uri::workspace(&ws.id), "storage", None)
            )),
        }
    }

    pub(crate) async fn worktree_body(
        &self,
        identifier: &str,
        path: Option<&str>,
    ) -> Result<Body, String> {
        let (ws, worktree) = self.worktree_of(identifier).await?;
        let path = path.map(StoragePath::new).transpose().map_err(text_of)?;
        let max = self.max_file_bytes;
        let shown = path.clone();
        let node = tokio::task::spawn_blocking(move || {
            worktree::read(worktree.as_ref(), shown.as_ref(), max)
        })
        .await
        .map_err(text_of)??;
        Ok(node_body(
            node,
            &uri::workspace(&ws.id),
            "files",
            path.as_ref(),
        ))
    }

    async fn context_body(&self, identifier: &str) -> Result<Body, String> {
        let ws = self.manager.resolve(identifier).await.map_err(text_of)?;
        let text = match self
            .manager
            .read_storage(&StorageScope::Workspace(ws.id), &context_path())
            .await
        {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.is_not_found() => NO_CONTEXT.to_owned(),
            Err(e) => return Err(e.to_string()),
        };
        Ok(Body::Text {
            text,
            mime: "text/markdown".to_owned(),
        })
    }

    /// The storage scope a storage URI names, and the URI of its owner.
    pub(crate) async fn storage_owner(
        &self,
        owner: Owner,
        identifier: &str,
    ) -> Result<(StorageScope, String), String> {
        Ok(match owner {
            Owner::Workspace => {
                let ws = self.manager.resolve(identifier).await.map_err(text_of)?;
                let base = uri::workspace(&ws.id);
                (StorageScope::Workspace(ws.id), base)
            }
            Owner::Session => {
                let s = self.session(identifier).await?;
                let base = uri::session(&s.id);
                (
                    StorageScope::Session {
                        workspace: s.workspace_id,
                        session: s.id,
                    },
                    base,
                )
            }
        })
    }

    /// A storage file or folder. A path is tried as a file first, the common case; a refusal
    /// there (it is a folder) is followed by a listing, and if that fails too the file's
    /// error is the one reported.
    async fn storage_body(
        &self,
        scope: StorageScope,
        owner_uri: &str,
        path: Option<&str>,
    ) -> Result<Body, String> {
        let path = path.map(StoragePath::new).transpose().map_err(text_of)?;
        let node = match &path {
            None => Node::Folder(
                self.manager
                    .list_storage(&scope, None)
                    .await
                    .map_err(text_of)?,
            ),
            Some(p) => match self.manager.read_storage(&scope, p).await {
                Ok(bytes) => Node::File(bytes),
                Err(berth_core::Error::Refused(reason)) => {
                    match self.manager.list_storage(&scope, Some(p)).await {
                        Ok(entries) => Node::Folder(entries),
                        Err(_) => return Err(reason),
                    }
                }
                Err(e) => return Err(e.to_string()),
            },
        };
        Ok(node_body(node, owner_uri, "storage", path.as_ref()))
    }
}

pub(crate) fn context_path() -> StoragePath {
    StoragePath::new("context.md").expect("a valid storage path")
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
