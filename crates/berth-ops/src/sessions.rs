//! Session operations: create (with the provider and model the workspace's config would call),
//! find, list, read and append to transcripts, clear and remove.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use berth_core::config::ProviderKind;
use berth_core::{
    DeviceId, ErrorKind, Found, Message, NewSession, Session, SessionId, TokenUsage, Transcript,
    Workspace, WorkspaceId, WorkspaceName,
};

use crate::Ops;
use crate::error::{Error, Result};
use crate::page::{Page, cursor_id, page_limit, page_of};
use crate::view::SessionView;
use crate::workspaces::{CreateWorkspace, Repository};

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
    /// The folder the session works in (an editor's project); `None`: the workspace's
    /// worktree or folder.
    pub cwd: Option<PathBuf>,
    /// The ACP agent that will work in the session, as a run names it (`claude-code`, a
    /// command line); `None`: berth's own agent, on the provider and model above.
    pub agent: Option<String>,
}

/// Where a client's new session goes: an editor working in a folder, or a phone app that
/// names its workspace by an id it keeps (the ACP `session/new` request and its `_meta`).
#[derive(Debug, Clone, Default)]
pub struct ClientSession {
    /// The folder the client works in (the editor's project).
    pub cwd: PathBuf,
    /// The workspace the client names by an id it keeps across restarts (a phone app's
    /// `_meta.sessionId`). The session keeps that id too, so the id the client gets back is
    /// the one it sent.
    pub workspace_key: Option<String>,
    /// The client's device id (`_meta.deviceId`): bound to the workspace, or resolved
    /// through the bindings when no workspace is named.
    pub device: Option<String>,
    /// The title of a new session (its first prompt, when there is one).
    pub title: String,
}

/// The session a client got, and the folder its tools work in.
#[derive(Debug, Clone)]
pub struct ClientSessionOutcome {
    pub session: Session,
    pub workspace: Workspace,
    /// The client's folder for an editor; the workspace's worktree or folder for a phone,
    /// whose own paths mean nothing on this machine.
    pub work_dir: PathBuf,
    /// Whether the session existed before (a phone app's id sent again).
    pub reused: bool,
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
    /// The session a client's `session/new` gets, by these rules:
    ///
    /// - **A workspace key** (a phone's persistent id) must be a valid workspace id (anything
    ///   else, `..` or a path, is refused before it is used). The workspace with that exact id
    ///   is used, or, when there is none but a session has that id (the id a phone was given by
    ///   an earlier `session/new` without one), that session's workspace; otherwise a plain
    ///   workspace with that id is created. The session with the key as its id is continued,
    ///   else created with that id. The device (or, without one, the key itself) is bound to
    ///   the workspace, once: the same key sent again changes no binding.
    /// - **A device id** alone: the workspace bound to it, created and bound on first use.
    /// - **Neither**: the git workspace whose worktree holds `cwd`, else `default`; always a
    ///   new session, recording `cwd`.
    pub async fn client_session(&self, request: ClientSession) -> Result<ClientSessionOutcome> {
        let device = request.device.as_deref().map(DeviceId::new).transpose()?;
        if let Some(key) = &request.workspace_key {
            return self.keyed_session(key, device, request.title).await;
        }
        let (workspace, phone) = match &device {
            Some(device) => (self.manager.resolve_device(device).await?, true),
            None => match self.workspace_containing(&request.cwd).await? {
                Some(ws) => (ws, false),
                None => (self.default_workspace().await?, false),
            },
        };
        let work_dir = if phone {
            self.work_dir(&workspace)?
        } else {
            request.cwd.clone()
        };
        let session = self
            .create_session(CreateSession {
                workspace: workspace.id.to_string(),
                title: request.title,
                cwd: Some(work_dir.clone()),
                ..CreateSession::default()
            })
            .await?;
        Ok(ClientSessionOutcome {
            session,
            workspace,
            work_dir,
            reused: false,
        })
    }

    async fn keyed_session(
        &self,
        key: &str,
        device: Option<DeviceId>,
        title: String,
    ) -> Result<ClientSessionOutcome> {
        let ws_id = WorkspaceId::new(key)?;
        let session_id = SessionId::new(key)?;
        let existing_session = self.manager.sessions().load(&session_id).await.found()?;
        let workspace = match self.manager.workspaces().load(&ws_id).await {
            Ok(ws) => ws,
            Err(e) if e.is_not_found() => match &existing_session {
                Some(s) => self.manager.workspaces().load(&s.workspace_id).await?,
                None => {
                    let mut create = CreateWorkspace::new(Repository::None);
                    create.id = Some(key.to_owned());
                    create.plain = true;
                    create.description = "created for a client that keeps this id".to_owned();
                    match self.create_workspace(create).await {
                        Ok(_) => {}
                        // Another process created it a moment ago.
                        Err(e) if e.kind() == ErrorKind::Conflict => {}
                        Err(e) => return Err(e),
                    }
                    self.manager.workspaces().load(&ws_id).await?
                }
            },
            Err(e) => return Err(e.into()),
        };
        let device = match device {
            Some(d) => d,
            None => DeviceId::new(key)?,
        };
        if self.manager.bindings().resolve(&device).await?.as_ref() != Some(&workspace.id) {
            self.manager.bind(&device, &workspace).await?;
        }
        let work_dir = self.work_dir(&workspace)?;
        let (session, reused) = match existing_session {
            Some(s) if s.workspace_id == workspace.id => (s, true),
            other => {
                // The key names a session elsewhere: this workspace gets a session of its own.
                let id = other.is_none().then(|| key.to_owned());
                let s = self
                    .create_session(CreateSession {
                        workspace: workspace.id.to_string(),
                        title,
                        id,
                        cwd: Some(work_dir.clone()),
                        ..CreateSession::default()
                    })
                    .await?;
                (s, false)
            }
        };
        Ok(ClientSessionOutcome {
            session,
            workspace,
            work_dir,
            reused,
        })
    }

    /// Where a workspace's work happens on this machine: its worktree, else its folder.
    /// Refused for an archived workspace, which takes no new work.
    pub fn work_dir(&self, ws: &Workspace) -> Result<PathBuf> {
        crate::archive::refuse_archived(ws, "no new work can start in it")?;
        self.view(ws, None)
            .work_dir()
            .map(Path::to_path_buf)
            .ok_or_else(|| {
                Error::rule(
                    ErrorKind::Invalid,
                    format!("workspace {} has no folder on this machine", ws.label()),
                )
            })
    }

    /// The session with exactly this id (no prefixes: a client names sessions by the ids it
    /// was given).
    pub async fn session(&self, id: &str) -> Result<Session> {
        let id = SessionId::new(id)?;
        Ok(self.manager.sessions().load(&id).await?)
    }

    /// The workspace a front end working in `dir` talks in: the one `workspace` names, else the
    /// git workspace whose worktree holds `dir`, else `default`. An interactive chat asks this
    /// first and makes its session only with the first prompt.
    pub async fn workspace_for_turn(
        &self,
        workspace: Option<&str>,
        dir: &std::path::Path,
    ) -> Result<Workspace> {
        match self.workspace_for_turn_if_made(workspace, dir).await? {
            Some(ws) => Ok(ws),
            None => self.default_workspace().await,
        }
    }

    /// [`Ops::workspace_for_turn`]'s workspace when it exists: `None` when it would be
    /// `default`, not made yet. For a front end that checks a turn can start before it makes
    /// anything.
    pub async fn workspace_for_turn_if_made(
        &self,
        workspace: Option<&str>,
        dir: &std::path::Path,
    ) -> Result<Option<Workspace>> {
        if let Some(ws) = self.workspace_meant(workspace, dir).await? {
            return Ok(Some(ws));
        }
        match self
            .manager
            .workspaces()
            .load(&WorkspaceId::default_workspace())
            .await
        {
            Ok(ws) => Ok(Some(ws)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The session a turn goes to, for a front end working in `dir`. Its workspace is
    /// [`Ops::workspace_for_turn`]'s. An existing session must belong to the workspace when one
    /// was named.
    pub async fn session_for_turn(
        &self,
        workspace: Option<&str>,
        dir: &std::path::Path,
        choice: SessionChoice,
    ) -> Result<Session> {
        let ws = self.workspace_for_turn(workspace, dir).await?;
        crate::archive::refuse_archived(&ws, "no turn can start in it")?;
        match choice {
            SessionChoice::Existing(id) => {
                let s = self.manager.resolve_session(&id).await?;
                if s.workspace_id != ws.id
                    && let Some(own) = self.workspace_of(&s).await?
                {
                    crate::archive::refuse_archived(&own, "no turn can start in it")?;
                }
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
                        "workspace {} has no session to continue; start a new one instead",
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

    /// Creates a session in a workspace. Its record's provider and model are what the
    /// workspace's merged config would call, unless the request names them, which also keeps
    /// them as the session's model choice (see `models`). Its working folder is the
    /// workspace's worktree (a git workspace) or folder.
    pub async fn create_session(&self, request: CreateSession) -> Result<Session> {
        let ws = self.manager.resolve(&request.workspace).await?;
        crate::archive::refuse_archived(&ws, "no new session can start in it")?;
        let id = request.id.map(SessionId::new).transpose()?;
        // A provider or model named here is the session's choice, kept like `/model`'s.
        let chosen = request.provider.is_some() || request.model.is_some();
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
        let cwd = match request.cwd {
            Some(dir) => Some(dir.display().to_string()),
            None => self
                .view(&ws, None)
                .work_dir()
                .map(|p| p.display().to_string()),
        };
        let new = NewSession {
            id,
            workspace: ws.id,
            title: request.title,
            provider,
            model: model.clone(),
            cwd,
            agent: request.agent,
        };
        let session = self.manager.create_session(new).await?;
        if chosen {
            self.choose_session_model(&session, &crate::ModelChoice { provider, model })
                .await?;
        }
        Ok(session)
    }

    /// A new session whose transcript starts as a copy of `from`'s, calling the model `from`
    /// called: in `workspace` (default: `from`'s), working in `cwd` (default: where `from`
    /// works, in `from`'s workspace; else as [`Ops::create_session`] says), titled `title`
    /// (default: "fork of …"). `from` is left as it was. Refused while `from` answers a
    /// prompt: half a turn is no history to go on from. A fork whose history cannot be
    /// written is removed, not left empty.
    pub async fn fork_session(
        &self,
        from: &Session,
        workspace: Option<&str>,
        cwd: Option<PathBuf>,
        title: Option<String>,
    ) -> Result<Session> {
        let Some(hold) = self.try_hold_turn(from).await? else {
            return Err(Error::refused(format!(
                "session {} is answering a prompt; fork it once the answer is in",
                from.id
            )));
        };
        let forked = async {
            // What a killed process left of its last answer joins the history first.
            self.recover_partial_answer(from, &hold).await?;
            // berth's own agent answers in a fork, on `from`'s model, whatever worked in `from`.
            self.copy_session(from, workspace, cwd, title, None).await
        }
        .await;
        hold.release().await;
        forked
    }

    /// A session taken over from a node that died mid-turn (berth-run's worker): a new
    /// session in `workspace`, working in `cwd`, whose transcript is `from`'s durable one as
    /// it is. `from`'s turn is not asked for: the dead node's lease keeps it a while, and
    /// what that node had not written of its answer is lost with it either way.
    pub async fn carry_session(
        &self,
        from: &Session,
        workspace: &str,
        cwd: PathBuf,
    ) -> Result<Session> {
        let title = match from.title.as_str() {
            "" => None,
            t => Some(t.to_owned()),
        };
        // The same agent goes on in it: a run's ACP agent stays that agent on the new node.
        self.copy_session(from, Some(workspace), Some(cwd), title, from.agent.clone())
            .await
    }

    /// A new session with `from`'s transcript, as [`Ops::fork_session`] describes it, in which
    /// `agent` works (`None`: berth's own).
    async fn copy_session(
        &self,
        from: &Session,
        workspace: Option<&str>,
        cwd: Option<PathBuf>,
        title: Option<String>,
        agent: Option<String>,
    ) -> Result<Session> {
        let transcript = self.transcript(from).await?;
        let title = title.unwrap_or_else(|| match from.title.as_str() {
            "" => format!("fork of {}", from.id),
            t => title_of(&format!("fork of {t}")),
        });
        // In `from`'s workspace, the fork works where `from` did.
        let cwd = match workspace {
            None => cwd.or_else(|| from.cwd.as_ref().map(PathBuf::from)),
            Some(_) => cwd,
        };
        let session = self
            .create_session(CreateSession {
                workspace: workspace.map_or_else(|| from.workspace_id.to_string(), str::to_owned),
                title,
                provider: Some(from.provider),
                model: Some(from.model.clone()),
                id: None,
                cwd,
                agent,
            })
            .await?;
        let sessions = self.manager.sessions();
        if let Err(e) = sessions
            .write_transcript(&session.id, &transcript.messages)
            .await
        {
            let _ = self.delete_session(&session).await;
            return Err(e.into());
        }
        Ok(session)
    }

    /// The session an identifier names: its id or an unambiguous id prefix.
    pub async fn resolve_session(&self, identifier: &str) -> Result<Session> {
        Ok(self.manager.resolve_session(identifier).await?)
    }

    /// The sessions of one workspace (by id, name or prefix), or of all but those of archived
    /// workspaces; oldest first. See [`Ops::list_sessions_including`].
    pub async fn list_sessions(&self, workspace: Option<&str>) -> Result<Vec<SessionView>> {
        self.list_sessions_including(workspace, false).await
    }

    /// The sessions of one workspace (by id, name or prefix: an archived one's too, since it
    /// was named), or of all, those of archived workspaces only when `archived`; oldest first.
    pub async fn list_sessions_including(
        &self,
        workspace: Option<&str>,
        archived: bool,
    ) -> Result<Vec<SessionView>> {
        // Each session's workspace by name, for the person reading the list, and whether it is
        // archived.
        type Known = HashMap<WorkspaceId, (Option<WorkspaceName>, bool)>;
        let (ws, known): (_, Known) = match workspace {
            Some(w) => {
                let ws = self.manager.resolve(w).await?;
                (
                    Some(ws.id.clone()),
                    HashMap::from([(ws.id, (ws.name, false))]),
                )
            }
            None => {
                let all = self.manager.list().await?;
                let known = all
                    .into_iter()
                    .map(|w| {
                        let hidden = !archived && w.is_archived();
                        (w.id, (w.name, hidden))
                    })
                    .collect();
                (None, known)
            }
        };
        Ok(self
            .session_records(ws.as_ref())
            .await?
            .iter()
            .filter(|s| {
                !known
                    .get(&s.workspace_id)
                    .is_some_and(|(_, hidden)| *hidden)
            })
            .map(|s| {
                let name = known.get(&s.workspace_id).and_then(|(n, _)| n.as_ref());
                SessionView::in_workspace(s, name)
            })
            .collect())
    }

    /// Session records of one workspace, or of all; oldest first.
    pub async fn session_records(&self, workspace: Option<&WorkspaceId>) -> Result<Vec<Session>> {
        Ok(self.manager.sessions().list(workspace).await?)
    }

    /// The session of a workspace made last, the one whose work its worktree most likely
    /// holds (what a merge's or a push's commit names); `None` when it has none.
    pub async fn latest_session(&self, ws: &berth_core::Workspace) -> Result<Option<Session>> {
        // Oldest first, as every store lists them.
        Ok(self.session_records(Some(&ws.id)).await?.pop())
    }

    /// A page of sessions after the cursor `after`, in id order, `limit` of them (see
    /// [`page_limit`]), loading only their own records.
    pub async fn session_page(
        &self,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Page<Session>> {
        let limit = page_limit(limit)?;
        let after = after
            .map(|c| cursor_id(c, |c| SessionId::new(c).ok()))
            .transpose()?;
        let items = self
            .manager
            .sessions()
            .page(after.as_ref(), limit + 1)
            .await?;
        Ok(page_of(items, limit, |s| s.id.to_string()))
    }

    /// The folder a session works in: the folder it recorded while that is a folder on this
    /// machine, else its workspace's worktree or folder; `None` when neither exists here. An
    /// ACP client lists sessions by it and a reopened session's tools work in it.
    pub async fn session_folder(&self, session: &Session) -> Result<Option<PathBuf>> {
        let ws = self.workspace_of(session).await?;
        Ok(self.folder_in(session, ws.as_ref()))
    }

    /// The session's workspace record; `None` when it is gone (a session may outlive it in a
    /// store being repaired), never when it cannot be read.
    async fn workspace_of(&self, session: &Session) -> Result<Option<Workspace>> {
        Ok(self
            .manager
            .workspaces()
            .load(&session.workspace_id)
            .await
            .found()?)
    }

    fn folder_in(&self, session: &Session, ws: Option<&Workspace>) -> Option<PathBuf> {
        session
            .cwd
            .as_ref()
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .or_else(|| ws.and_then(|ws| self.work_dir(ws).ok()))
    }

    /// A page of sessions with their folders ([`Ops::session_folder`]), in id order, only
    /// those in `folder` when one is given; sessions with no folder on this machine are left
    /// out. Only the pages looked at are loaded. The cursor is the last id of the page before;
    /// with a folder, a last page may come back empty.
    pub async fn folder_session_page(
        &self,
        after: Option<&str>,
        limit: Option<usize>,
        folder: Option<&Path>,
    ) -> Result<Page<(Session, PathBuf)>> {
        let limit = page_limit(limit)?;
        let mut after = after
            .map(|c| cursor_id(c, |c| SessionId::new(c).ok()))
            .transpose()?;
        let mut items: Vec<(Session, PathBuf)> = Vec::new();
        let mut workspaces: std::collections::HashMap<WorkspaceId, Option<Workspace>> =
            std::collections::HashMap::new();
        loop {
            let batch = self
                .manager
                .sessions()
                .page(after.as_ref(), limit + 1)
                .await?;
            let exhausted = batch.len() <= limit;
            for s in batch {
                if items.len() == limit {
                    // `s` comes after the page: there is more to look at.
                    let next = items.last().map(|(s, _)| s.id.to_string());
                    return Ok(Page { items, next });
                }
                after = Some(s.id.clone());
                if !workspaces.contains_key(&s.workspace_id) {
                    let ws = self.workspace_of(&s).await?;
                    workspaces.insert(s.workspace_id.clone(), ws);
                }
                let ws = workspaces.get(&s.workspace_id).and_then(Option::as_ref);
                let Some(dir) = self.folder_in(&s, ws) else {
                    continue;
                };
                if folder.is_some_and(|want| want != dir) {
                    continue;
                }
                items.push((s, dir));
            }
            if exhausted {
                return Ok(Page { items, next: None });
            }
        }
    }

    /// Every session id (possibly a few just deleted): cheap, for completions.
    pub async fn session_ids(&self) -> Result<Vec<SessionId>> {
        Ok(self.manager.sessions().list_ids().await?)
    }

    /// What the transcript is now, without reading it: for a watcher, which reads it again
    /// only when this changed.
    pub async fn transcript_stamp(&self, session: &Session) -> Result<berth_core::TranscriptStamp> {
        Ok(self.manager.transcript_stamp(session).await?)
    }

    pub async fn transcript(&self, session: &Session) -> Result<Transcript> {
        Ok(self.manager.read_transcript(session).await?)
    }

    /// Takes the session's turn: refused while another process or server sharing the store
    /// answers a prompt in it. Give it back with [`berth_core::TurnHold::release`].
    pub async fn hold_turn(&self, session: &Session) -> Result<berth_core::TurnHold> {
        Ok(self.manager.sessions().hold_turn(&session.id).await?)
    }

    /// Takes the session's turn if it is free: `None` while a turn runs elsewhere (for a
    /// reader that then shows that turn rather than recover or change anything).
    pub async fn try_hold_turn(&self, session: &Session) -> Result<Option<berth_core::TurnHold>> {
        match self.manager.sessions().hold_turn(&session.id).await {
            Ok(hold) => Ok(Some(hold)),
            Err(e) if e.is_turn_held() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Adds a turn's tokens to the session's (atomically, whatever else adds at once).
    pub async fn add_session_usage(&self, session: &Session, usage: TokenUsage) -> Result<Session> {
        Ok(self
            .manager
            .sessions()
            .add_usage(&session.id, usage)
            .await?)
    }

    /// Appends one message to the session's transcript.
    pub async fn append_message(&self, session: &Session, message: &Message) -> Result<()> {
        Ok(self.manager.append_message(session, message).await?)
    }

    /// Appends one message, answering once every reader of the transcript sees it, while it
    /// goes on to the disk: durable once the [`berth_core::Syncing`] is waited for.
    pub async fn append_message_syncing(
        &self,
        session: &Session,
        message: &Message,
    ) -> Result<berth_core::Syncing> {
        Ok(self
            .manager
            .append_message_syncing(session, message)
            .await?)
    }

    /// Ends a turn on the session's record, in one change: the turn's tokens added and, when
    /// `first_prompt` is given, the session titled after it if it has no title yet (a session
    /// made before its first prompt, an editor's over ACP, gets the title one made with it
    /// does; a title a person gave is kept). The record as it is now; `None` when nothing was
    /// written, there being nothing to add: no tokens, and no title to give.
    pub async fn count_turn(
        &self,
        session: &Session,
        usage: TokenUsage,
        first_prompt: Option<&str>,
    ) -> Result<Option<Session>> {
        let title = first_prompt.map(title_of).filter(|t| !t.is_empty());
        if usage.is_zero() && title.is_none() {
            return Ok(None);
        }
        let counted = self
            .manager
            .sessions()
            .count_turn(&session.id, usage, title.as_deref(), chrono::Utc::now())
            .await?;
        Ok(Some(counted))
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
pub fn title_of(prompt: &str) -> String {
    let line = prompt.trim().lines().next().unwrap_or("");
    match line.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}
