//! Session operations: create (with the provider and model the workspace's config would call),
//! find, list, read and append to transcripts, clear and remove.

use berth_core::config::ProviderKind;
use berth_core::{Message, NewSession, Session, SessionId, Transcript, WorkspaceId};

use crate::Ops;
use crate::error::Result;
use crate::page::{Page, Pager};
use crate::view::SessionView;

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

/// Which session a turn of berth's agent goes to, as a front end was told.
#[derive(Debug, Clone)]
pub enum SessionChoice {
    /// This one: an id or a 4+ character prefix.
    Existing(String),
    /// The workspace's latest.
    Latest,
    /// A new one, titled after its first prompt.
    New { first_prompt: String },
}

impl Ops {
    /// The session a turn goes to, for a front end working in `dir`. Its workspace is the one
    /// `workspace` names, else the git workspace whose worktree holds `dir`, else `default`. An
    /// existing session must belong to the workspace when one was named.
    pub async fn session_for_turn(
        &self,
        workspace: Option<&str>,
        dir: &std::path::Path,
        choice: SessionChoice,
    ) -> Result<Session> {
        let ws = match workspace {
            Some(w) => self.manager.resolve(w).await?,
            None => match self.workspace_containing(dir).await? {
                Some(ws) => ws,
                None => self.default_workspace().await?,
            },
        };
        match choice {
            SessionChoice::Existing(id) => {
                let s = self.manager.resolve_session(&id).await?;
                if workspace.is_some() && s.workspace_id != ws.id {
                    return Err(crate::Error::invalid(format!(
                        "session {} belongs to workspace {}, not {}",
                        s.id,
                        s.workspace_id,
                        ws.label()
                    )));
                }
                Ok(s)
            }
            SessionChoice::Latest => match self.session_records(Some(&ws.id)).await?.pop() {
                Some(s) => Ok(s),
                None => Err(crate::Error::rule(
                    crate::ErrorKind::NotFound,
                    format!(
                        "workspace {} has no session to continue; leave out --continue to start one",
                        ws.label()
                    ),
                )),
            },
            SessionChoice::New { first_prompt } => {
                self.create_session(CreateSession {
                    workspace: ws.id.to_string(),
                    title: title_of(&first_prompt),
                    ..CreateSession::default()
                })
                .await
            }
        }
    }

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
        let mut pager = Pager::new(&ids, after, limit)?;
        let mut items = Vec::new();
        while let Some(id) = pager.next(items.len()) {
            match self.manager.sessions().load(id).await {
                Ok(s) => items.push(s),
                // Deleted since the ids were read.
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(pager.finish(items))
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

/// A session's title from its first prompt: the first line, cut at 60 characters.
pub(crate) fn title_of(prompt: &str) -> String {
    let line = prompt.trim().lines().next().unwrap_or("");
    match line.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}
