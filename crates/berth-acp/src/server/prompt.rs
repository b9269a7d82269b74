//! `session/prompt` and `session/cancel`: a session marked busy, a prompt run as a turn of
//! berth's agent (or as one of berth's slash commands), and its cancelling.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ConfigOptionUpdate, ContentBlock, ContentChunk, PromptRequest,
    PromptResponse, SessionId, SessionNotification, SessionUpdate, StopReason, TextContent,
};
use berth_agent::slash::{Command, FrontEnd};
use berth_agent::{CancellationToken, ToolContext, TurnOptions, TurnRequest};

use super::{Open, Result, Server, acp_id};
use crate::client::{ClientFiles, ClientPermissions, ClientTerminals, Relayed};
use crate::commands::Typed;
use crate::turn::Relay;
use crate::{commands, content, errors};

impl Server {
    /// Marks the session busy, in the dispatch loop, so a second prompt read after this one is
    /// refused; the turn itself runs on its own task.
    pub(super) fn begin_prompt(&self, id: &SessionId) -> Result<(Arc<Open>, CancellationToken)> {
        let open = self.open(id)?;
        let mut running = open.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.is_some() {
            return Err(errors::refused(format!(
                "session {} is still answering a prompt; wait for its answer or send session/cancel first",
                id.0
            )));
        }
        let cancel = CancellationToken::new();
        *running = Some(cancel.clone());
        drop(running);
        Ok((open, cancel))
    }

    pub(super) async fn prompt(
        &self,
        open: &Open,
        mut request: PromptRequest,
        cancel: CancellationToken,
        cx: &ConnectionTo<Client>,
    ) -> Result<PromptResponse> {
        match commands::typed(&request.prompt) {
            Some(Typed::Command(command)) => return self.command(open, command, cx).await,
            Some(Typed::Usage(message)) => {
                say(cx, open, message);
                return Ok(PromptResponse::new(StopReason::EndTurn));
            }
            None => commands::unescape(&mut request.prompt),
        }
        let caps = self.capabilities();
        let session_id = request.session_id.clone();
        let files = (caps.fs.read_text_file || caps.fs.write_text_file).then(|| {
            Arc::new(ClientFiles {
                cx: cx.clone(),
                session_id: session_id.clone(),
                read: caps.fs.read_text_file,
                write: caps.fs.write_text_file,
            }) as Arc<dyn berth_agent::Files>
        });
        let terminals = Arc::new(Mutex::new(HashMap::new()));
        let commands = caps.terminal.then(|| {
            Arc::new(ClientTerminals {
                cx: cx.clone(),
                session_id: session_id.clone(),
                by_call: terminals.clone(),
            }) as Arc<dyn berth_agent::Commands>
        });
        let mut tool_cx = ToolContext::new(
            open.work_dir.clone(),
            self.ops.clone(),
            open.session.clone(),
            cancel.clone(),
        );
        tool_cx.files = files.clone();
        let prompt = content::prompt(&request.prompt, &tool_cx).await?;
        let relayed = Arc::new(Relayed::default());
        let turn = self
            .agent
            .start_turn(TurnRequest {
                session: open.session.clone(),
                prompt: prompt.text,
                images: prompt.images,
                cwd: open.work_dir.clone(),
                permissions: Arc::new(ClientPermissions {
                    cx: cx.clone(),
                    session_id: session_id.clone(),
                    relayed: relayed.clone(),
                    may_lift_sandbox: self.reach().may_lift_sandbox(),
                    ops: self.ops.clone(),
                    session: open.session.clone(),
                }),
                cancel,
                options: TurnOptions {
                    files,
                    commands,
                    model: None,
                    mcp: open.mcp.clone(),
                    stop_after: None,
                    // An editor says more with a prompt of its own.
                    told: None,
                },
            })
            .await
            .map_err(errors::agent)?;
        let relay = Relay {
            cx: cx.clone(),
            session_id,
            relayed,
            terminals,
        };
        // A session's first prompt titles it: the relay tells the editor, before the answer.
        relay.run(turn, &open.work_dir).await
    }

    /// A prompt that is one of berth's slash commands: run on the session (as `berth chat`
    /// runs it), its answer one message, the model not called. A command that fails says why
    /// in that message, as chat says it.
    async fn command(
        &self,
        open: &Open,
        command: Command,
        cx: &ConnectionTo<Client>,
    ) -> Result<PromptResponse> {
        let done = self
            .agent
            .session_command(&open.session, &open.work_dir, &command, FrontEnd::Editor)
            .await;
        match done {
            Ok(text) => {
                say(cx, open, text);
                // The editor's model picker shows the switch too.
                if matches!(command, Command::Model(Some(_))) {
                    let options = self.config_options(open).await?;
                    let _ = cx.send_notification(SessionNotification::new(
                        acp_id(&open.session),
                        SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options)),
                    ));
                }
            }
            Err(e) => say(cx, open, format!("{}: {e}", command.name())),
        }
        Ok(PromptResponse::new(StopReason::EndTurn))
    }

    pub(super) fn cancel(&self, request: &CancelNotification) {
        let open = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&*request.session_id.0)
            .cloned();
        if let Some(open) = open
            && let Some(cancel) = &*open.running.lock().unwrap_or_else(|e| e.into_inner())
        {
            cancel.cancel();
        }
    }
}

/// One message from berth (not the model) in the session.
fn say(cx: &ConnectionTo<Client>, open: &Open, text: String) {
    let chunk = ContentChunk::new(ContentBlock::Text(TextContent::new(text)));
    let _ = cx.send_notification(SessionNotification::new(
        acp_id(&open.session),
        SessionUpdate::AgentMessageChunk(chunk),
    ));
}
