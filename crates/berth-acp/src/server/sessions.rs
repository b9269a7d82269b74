//! The session handlers: `session/new`, `load`, `resume`, `fork`, `close`, `delete` and `list`,
//! each held to what the connection may reach (a device, its own workspace).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CloseSessionRequest, CloseSessionResponse, DeleteSessionRequest, DeleteSessionResponse,
    ForkSessionRequest, ForkSessionResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, McpServer, NewSessionRequest, NewSessionResponse,
    ResumeSessionRequest, ResumeSessionResponse, SessionId, SessionInfo, SessionNotification,
};
use berth_ops::ClientSession;
use serde_json::Value;

use super::{Caller, LIST_PAGE, Open, Reopened, Result, Server};
use crate::client::Relayed;
use crate::turn::Relay;
use crate::{content, errors};

impl Server {
    pub(super) async fn new_session(
        &self,
        request: NewSessionRequest,
    ) -> Result<NewSessionResponse> {
        let meta = request.meta.as_ref();
        let mut key = meta_string(meta, "sessionId")?;
        let mut device = meta_string(meta, "deviceId")?;
        if let Caller::Device(me) = &self.caller {
            // The token says who this is: it lands in its own workspace, whatever it sends.
            if device.as_deref().is_some_and(|d| d != me.as_str()) {
                return Err(errors::of_kind(
                    berth_ops::ErrorKind::Refused,
                    format!("this connection acts for device {me}; it cannot name another"),
                ));
            }
            if key.is_some() {
                return Err(errors::of_kind(
                    berth_ops::ErrorKind::Refused,
                    format!(
                        "this connection acts for device {me}, whose sessions are in its own workspace; _meta.sessionId names a workspace, which only an admin's connection may"
                    ),
                ));
            }
            key = None;
            device = Some(me.to_string());
        }
        if key.is_none() && device.is_none() {
            check_cwd(&request.cwd)?;
        }
        // A session no prompt could be answered in is not made: said now, as `chat` says it,
        // rather than at the first prompt, with a workspace and a session left behind. A
        // device's or a keyed session's workspace may not exist yet: the global config says.
        let checked = match (&key, &device) {
            (None, None) => self.agent.preflight_in(None, &request.cwd, None).await,
            _ => self.agent.preflight(None, None).await,
        };
        checked.map_err(errors::agent)?;
        let mcp = self.client_mcp(&request.mcp_servers).await?;
        let got = self
            .ops
            .client_session(ClientSession {
                cwd: request.cwd.clone(),
                workspace_key: key,
                device,
                title: String::new(),
            })
            .await
            .map_err(errors::ops)?;
        let open = self.register(got.session, got.work_dir, mcp);
        let options = self.config_options(&open).await?;
        Ok(NewSessionResponse::new(open.session.id.to_string()).config_options(options))
    }

    /// Opens a stored session on this connection: its tools work where `Ops::turn_folder`
    /// says (a device's workspace, else the session's folder), else, when it has none on this
    /// machine, in the client's `cwd`. With the session's turn held when it was free (what a
    /// killed process streamed of its last answer is then in the transcript), else the turn
    /// this agent runs there, to follow.
    async fn reopen(
        &self,
        id: &SessionId,
        cwd: &Path,
        mcp: &[McpServer],
    ) -> Result<(Arc<Open>, Reopened)> {
        let mcp = self.client_mcp(mcp).await?;
        let session = self.ops.session(&id.0).await.map_err(errors::ops)?;
        let held = self.held().await?;
        // Another workspace's session is not there, for a device.
        if !held.reaches(&session.workspace_id) {
            return Err(
                agent_client_protocol::v1::schema::Error::session_not_found(id.clone()).into(),
            );
        }
        let work_dir = match self
            .ops
            .turn_folder(&held, &session)
            .await
            .map_err(errors::ops)?
        {
            Some(dir) => dir,
            None => {
                check_cwd(cwd)?;
                cwd.to_path_buf()
            }
        };
        // Held before the history is touched: a turn running now (this server's, another
        // connection's, another process's) is never recovered, nor read half-written.
        let reopened = match self
            .ops
            .try_hold_turn(&session)
            .await
            .map_err(errors::ops)?
        {
            Some(hold) => {
                self.ops
                    .recover_partial_answer(&session, &hold)
                    .await
                    .map_err(errors::ops)?;
                Reopened::Held(hold)
            }
            None => Reopened::Running(self.agent.follow(&session)),
        };
        Ok((self.register(session, work_dir, mcp), reopened))
    }

    pub(super) async fn load_session(
        &self,
        request: LoadSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<LoadSessionResponse> {
        let (open, reopened) = self
            .reopen(&request.session_id, &request.cwd, &request.mcp_servers)
            .await?;
        let mut transcript = self
            .ops
            .transcript(&open.session)
            .await
            .map_err(errors::ops)?;
        // A turn runs there: a run's agent's, maybe, whose questions (`--ask`) this client's
        // person may answer, unless it is a device's.
        if matches!(reopened, Reopened::Running(_)) && matches!(self.caller, Caller::Trusted) {
            crate::run_questions::follow(
                self.ops.clone(),
                open.session.id.to_string(),
                request.session_id.clone(),
                cx.clone(),
            );
        }
        let following = match reopened {
            Reopened::Held(hold) => {
                hold.release().await;
                None
            }
            // A turn runs: what is durable of the session before it, its prompt, then the
            // turn as it goes (what it streamed so far first). Its answer is written once, by
            // the turn itself.
            Reopened::Running(Some(following)) => {
                transcript.messages.truncate(following.before);
                transcript.messages.push(berth_ops::Message::new(
                    berth_ops::Role::User,
                    following.prompt.clone(),
                ));
                Some(following.turn)
            }
            // Another process's turn: what is durable now; the rest is there once it ends.
            Reopened::Running(None) => None,
        };
        for update in content::replay(&transcript) {
            cx.send_notification(SessionNotification::new(request.session_id.clone(), update))?;
        }
        cx.send_notification(SessionNotification::new(
            request.session_id.clone(),
            self.commands_for(&open).await,
        ))?;
        if let Some(turn) = following {
            let relay = Relay {
                cx: cx.clone(),
                session_id: request.session_id.clone(),
                relayed: Arc::new(Relayed::default()),
                terminals: Arc::new(Mutex::new(HashMap::new())),
            };
            let work_dir = open.work_dir.clone();
            // The prompt's answer is its client's; this connection is shown the turn.
            tokio::spawn(async move {
                let _ = relay.run(turn, &work_dir).await;
            });
        }
        let options = self.config_options(&open).await?;
        Ok(LoadSessionResponse::new().config_options(options))
    }

    pub(super) async fn resume_session(
        &self,
        request: ResumeSessionRequest,
    ) -> Result<ResumeSessionResponse> {
        let (open, reopened) = self
            .reopen(&request.session_id, &request.cwd, &request.mcp_servers)
            .await?;
        if let Reopened::Held(hold) = reopened {
            hold.release().await;
        }
        let options = self.config_options(&open).await?;
        Ok(ResumeSessionResponse::new().config_options(options))
    }

    pub(super) fn close_session(
        &self,
        request: &CloseSessionRequest,
    ) -> Result<CloseSessionResponse> {
        let open = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&*request.session_id.0);
        match open {
            Some(open) => {
                if let Some(cancel) = &*open.running.lock().unwrap_or_else(|e| e.into_inner()) {
                    cancel.cancel();
                }
                // The session ends here, and so does what its agent started in the background.
                berth_agent::tools::background::kill_session(open.session.id.as_str());
                Ok(CloseSessionResponse::new())
            }
            None => Err(agent_client_protocol::v1::schema::Error::session_not_found(
                request.session_id.clone(),
            )
            .into()),
        }
    }

    /// `session/fork`: a new session whose history is a copy of the first one's
    /// ([`Ops::fork_session`]), open on this connection; the first is left as it was. The fork
    /// stays in the first one's workspace (a device's, in its own); it works where a reopened
    /// session would, else in the client's `cwd`.
    pub(super) async fn fork_session(
        &self,
        request: ForkSessionRequest,
    ) -> Result<ForkSessionResponse> {
        let not_found = || {
            agent_client_protocol::v1::schema::Error::session_not_found(request.session_id.clone())
        };
        let from = self
            .ops
            .session(&request.session_id.0)
            .await
            .map_err(errors::ops)?;
        let held = self.held().await?;
        if !held.reaches(&from.workspace_id) {
            return Err(not_found().into());
        }
        let mcp = self.client_mcp(&request.mcp_servers).await?;
        let forked = self
            .ops
            .fork_session(&from, None, None, None)
            .await
            .map_err(errors::ops)?;
        let work_dir = match self
            .ops
            .turn_folder(&held, &forked)
            .await
            .map_err(errors::ops)?
        {
            Some(dir) => dir,
            None => {
                check_cwd(&request.cwd)?;
                request.cwd.clone()
            }
        };
        let open = self.register(forked, work_dir, mcp);
        let options = self.config_options(&open).await?;
        Ok(ForkSessionResponse::new(open.session.id.to_string()).config_options(options))
    }

    /// Deletes a berth session, its transcript and storage, as `berth session rm` does (the
    /// editor's own question is the confirmation); never its workspace. A device deletes
    /// only its workspace's sessions; a session answering a prompt is not deleted.
    pub(super) async fn delete_session(
        &self,
        request: DeleteSessionRequest,
    ) -> Result<DeleteSessionResponse> {
        let not_found = || {
            agent_client_protocol::v1::schema::Error::session_not_found(request.session_id.clone())
        };
        let session = self
            .ops
            .session(&request.session_id.0)
            .await
            .map_err(errors::ops)?;
        if !self.held().await?.reaches(&session.workspace_id) {
            return Err(not_found().into());
        }
        let busy = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&*request.session_id.0)
            .is_some_and(|open| {
                open.running
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_some()
            });
        if busy {
            return Err(errors::of_kind(
                berth_ops::ErrorKind::Refused,
                format!(
                    "session {} is answering a prompt; cancel it before deleting it",
                    session.id
                ),
            ));
        }
        // Held while it is deleted: a turn elsewhere (another process, another server) keeps
        // its session.
        let hold = self.ops.hold_turn(&session).await.map_err(errors::ops)?;
        let deleted = self.ops.delete_session(&session).await;
        drop(hold);
        deleted.map_err(errors::ops)?;
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&*request.session_id.0);
        Ok(DeleteSessionResponse::new())
    }

    /// The sessions of the home (those whose folder is `cwd`, when asked), a page at a time
    /// in id order: the paging rules and the session's folder are `Ops`'s.
    pub(super) async fn list_sessions(
        &self,
        request: ListSessionsRequest,
    ) -> Result<ListSessionsResponse> {
        // A device sees the sessions that work in its workspace's folder: its own.
        let folder = match self.held().await?.workspace() {
            Some(ws) => Some(self.ops.work_dir(ws).map_err(errors::ops)?),
            None => request.cwd.clone(),
        };
        let page = self
            .ops
            .folder_session_page(
                request.cursor.as_deref(),
                Some(LIST_PAGE),
                folder.as_deref(),
            )
            .await
            .map_err(errors::ops)?;
        let sessions = page
            .items
            .into_iter()
            .map(|(s, folder)| {
                let info = SessionInfo::new(s.id.to_string(), folder)
                    .updated_at(s.updated_at.to_rfc3339());
                if s.title.is_empty() {
                    info
                } else {
                    info.title(s.title)
                }
            })
            .collect();
        Ok(ListSessionsResponse::new(sessions).next_cursor(page.next))
    }
}

/// A string in the request's `_meta`; anything but a string there is refused.
fn meta_string(meta: Option<&serde_json::Map<String, Value>>, key: &str) -> Result<Option<String>> {
    match meta.and_then(|m| m.get(key)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(errors::invalid(format!(
            "_meta.{key} must be a string, not {other}"
        ))),
    }
}

/// The client's folder must be an absolute path to a folder that exists.
fn check_cwd(cwd: &Path) -> Result<()> {
    if !cwd.is_absolute() {
        return Err(errors::invalid(format!(
            "cwd must be an absolute path, not {:?}",
            cwd.display().to_string()
        )));
    }
    if !cwd.is_dir() {
        return Err(errors::invalid(format!(
            "cwd {} is not a folder on this machine",
            cwd.display()
        )));
    }
    Ok(())
}
