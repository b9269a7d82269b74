//! Session operations: create (with the provider and model the workspace's config would call),
//! find, list, read and append to transcripts, clear and remove.

use berth_core::config::ProviderKind;
use berth_core::{Message, NewSession, Session, SessionId, Transcript, WorkspaceId};

use crate::Ops;
use crate::error::Result;
use crate::view::SessionView;
use crate::workspaces::Page;

/// A request to create a session.
#[derive(Debug, Clone, Default)]
pub struct CreateSession {
    /// The workspace: id, name or id prefix.
    pub workspace: String,
    pub title: String,
    /// `None`: the provider the workspace's merged config calls.
    pub provider: Option<ProviderKind>,
    /// `None`: the model the merged config names for the provider.
    pub model: Option<String>,
    /// A client-chosen id (an ACP session id); a fresh UUID when `None`.
    pub id: Option<String>,
}

impl Ops {
    /// Creates a session in a workspace. Its provider and model are what the workspace's
    /// merged config would call, unless the request names them, so the transcript records
    /// what is actually called. Its working folder is the workspace's worktree (a git
    /// workspace) or folder.
    pub async fn create_session(&self, request: CreateSession) -> Result<Session> {
        let ws = self.manager.resolve(&request.workspace).await?;
        let id = request.id.map(SessionId::new).transpose()?;
        let (provider, model) = match (request.provider, request.model) {
            (Some(p), Some(m)) => (p, m),
            (provider, model) => {
                let config = self.config(Some(&ws.id)).await?.config;
                match provider {
                    // A provider other than the configured one gets its own model, not the
                    // configured provider's.
                    Some(p) if p != config.provider() => {
                        let model = model.unwrap_or_else(|| {
                            config
                                .provider_settings(p)
                                .model
                                .clone()
                                .unwrap_or_else(|| p.default_model().to_owned())
                        });
                        (p, model)
                    }
                    _ => (
                        config.provider(),
                        model.unwrap_or_else(|| config.model().to_owned()),
                    ),
                }
            }
        };
        let cwd = self
            .view(&ws, None)
            .work_dir()
            .map(|p| p.display().to_string());
        let new = NewSession {
            id,
            workspace: ws.id,
            title: request.title,
            provider,
            model,
            cwd,
        };
        Ok(self.manager.create_session(new).await?)
    }

    /// The session an identifier names: its id or an unambiguous id prefix.
    pub async fn resolve_session(&self, identifier: &str) -> Result<Session> {
        Ok(self.manager.resolve_session(identifier).await?)
    }

    /// The sessions of one workspace (by id, name or prefix), or of all; oldest first.
    pub async fn list_sessions(&self, workspace: Option<&str>) -> Result<Vec<SessionView>> {
        let ws = match workspace {
            Some(w) => Some(self.manager.resolve(w).await?.id),
            None => None,
        };
        Ok(self
            .session_records(ws.as_ref())
            .await?
            .iter()
            .map(SessionView::of)
            .collect())
    }

    /// Session records of one workspace, or of all; oldest first.
    pub async fn session_records(&self, workspace: Option<&WorkspaceId>) -> Result<Vec<Session>> {
        Ok(self.manager.sessions().list(workspace).await?)
    }

    /// Up to `limit` sessions after the cursor `after`, in id order, loading only their own
    /// records.
    pub async fn session_page(&self, after: Option<&str>, limit: usize) -> Result<Page<Session>> {
        let ids = self.manager.sessions().list_ids().await?;
        let rest = crate::workspaces::after(&ids, after)?;
        let mut items = Vec::new();
        let mut last = None;
        for id in rest {
            if items.len() == limit.max(1) {
                break;
            }
            last = Some(id);
            match self.manager.sessions().load(id).await {
                Ok(s) => items.push(s),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        let more = last.is_some_and(|l| rest.last() != Some(l));
        Ok(Page {
            items,
            next: if more {
                last.map(|l| l.to_string())
            } else {
                None
            },
        })
    }

    /// Every session id (possibly a few just deleted): cheap, for completions.
    pub async fn session_ids(&self) -> Result<Vec<SessionId>> {
        Ok(self.manager.sessions().list_ids().await?)
    }

    pub async fn transcript(&self, session: &Session) -> Result<Transcript> {
        Ok(self.manager.read_transcript(session).await?)
    }

    /// Appends one message to the session's transcript.
    pub async fn append_message(&self, session: &Session, message: &Message) -> Result<()> {
        Ok(self.manager.append_message(session, message).await?)
    }

    /// Empties the transcript, keeping its frontmatter.
    pub async fn clear_session(&self, session: &Session) -> Result<()> {
        Ok(self.manager.clear_session(session).await?)
    }

    /// Removes the session with its transcript and storage.
    pub async fn delete_session(&self, session: &Session) -> Result<()> {
        Ok(self.manager.delete_session(session).await?)
    }
}
