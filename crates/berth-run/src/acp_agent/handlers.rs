//! What berth answers an ACP agent, one handler per message: its session updates (the
//! answer, its tool calls), its permission requests (the policy, or a person), its file
//! reads and writes beneath the worktree, and its terminals. `turn` wires each to the
//! connection; every rule of the agent's reach is here or in `Shared`'s methods.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agent_client_protocol::v1::schema::{
    ContentBlock, CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest,
    KillTerminalResponse, ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest,
    ReleaseTerminalResponse, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionNotification, SessionUpdate,
    TerminalOutputRequest, TerminalOutputResponse, WaitForTerminalExitRequest,
    WaitForTerminalExitResponse, WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Dispatch, Error, HandleDispatchFrom, Handled};
use berth_agent::acp::error_of_kind;
use berth_agent::{Decision, ToolKind};
use berth_ops::ErrorKind;

use super::{Denied, Shared, kind_of, record, status_of, terminal_error};
use crate::event::RunEvent;
use crate::terminals::TerminalError;

/// A permission request's answer: the option chosen, or cancelled when there is none.
fn permission(option: Option<String>) -> RequestPermissionResponse {
    RequestPermissionResponse::new(match option {
        Some(id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id)),
        None => RequestPermissionOutcome::Cancelled,
    })
}

/// The two messages that carry an agent's longest text, taken whole: `session/update` (its
/// answer, its tool calls) and `fs/write_text_file` (a file's content). The SDK's typed
/// handlers copy a message's parameters twice over to read them; here they are moved into
/// the typed request, never copied.
pub(super) struct Owned(pub Arc<Shared>);

impl HandleDispatchFrom<Agent> for Owned {
    async fn handle_dispatch_from(
        &mut self,
        message: Dispatch,
        _cx: agent_client_protocol::ConnectionTo<Agent>,
    ) -> Result<Handled<Dispatch>, Error> {
        let invalid = |e: serde_json::Error| error_of_kind(ErrorKind::Invalid, e.to_string());
        match message {
            Dispatch::Notification(n) if n.method == UPDATE => {
                // An update berth's protocol version cannot read (a kind it does not have, or
                // a field out of shape: claude-agent-acp's `usage_update` with a null `size`):
                // dropped, and said at debug with what it was and whose, rather than failed
                // back at an agent that asked nothing.
                let kind = n
                    .params
                    .get("update")
                    .and_then(|u| u.get("sessionUpdate"))
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("(none)")
                    .to_owned();
                match serde_json::from_value::<SessionNotification>(n.params) {
                    Ok(update) => self.0.on_update(update).await,
                    Err(e) => tracing::debug!(
                        "agent {} sent a `{UPDATE}` berth does not read (`{kind}`, session {}): dropped: {e}",
                        self.0.agent + 1,
                        self.0.session.id
                    ),
                }
                Ok(Handled::Yes)
            }
            Dispatch::Request(r, responder) if r.method == WRITE => {
                let responder = responder
                    .cast::<WriteTextFileResponse>()
                    .into_protocol::<agent_client_protocol::V1>()?;
                match serde_json::from_value::<WriteTextFileRequest>(r.params) {
                    Ok(request) => self.0.on_write(request, responder).await?,
                    Err(e) => responder.respond_with_error(invalid(e))?,
                }
                Ok(Handled::Yes)
            }
            message => Ok(Handled::No {
                message,
                retry: false,
            }),
        }
    }

    fn describe_chain(&self) -> impl std::fmt::Debug {
        (UPDATE, WRITE)
    }
}

/// The method of an agent's session updates.
const UPDATE: &str = "session/update";
/// The method of an agent's file writes.
const WRITE: &str = "fs/write_text_file";

impl Shared {
    /// `session/update`: the answer's text streamed and kept, each tool call reported (and
    /// recorded once it is over). Nothing while a resumed agent replays its session.
    pub(super) async fn on_update(&self, n: SessionNotification) {
        if self.replaying.load(Ordering::Acquire) {
            return;
        }
        match n.update {
            SessionUpdate::AgentMessageChunk(chunk) => {
                if let ContentBlock::Text(text) = chunk.content {
                    let shown = record::event_text(&text.text);
                    self.answered(text.text).await;
                    let _ = self
                        .tx
                        .send(RunEvent::Text {
                            agent: self.agent,
                            text: shown,
                        })
                        .await;
                }
            }
            SessionUpdate::ToolCall(call) => {
                let name = call.name.as_ref().unwrap_or(&call.title);
                let event = RunEvent::Tool {
                    agent: self.agent,
                    name: record::clip(name.clone(), record::CALL_NAME, "of its name"),
                    kind: kind_of(call.kind),
                };
                let _ = self.tx.send(event).await;
                let status = call.status;
                self.tool_reported(
                    call.tool_call_id.0.to_string(),
                    move |c| {
                        c.set_title(call.title);
                        c.set_name(call.name);
                        c.set_input(call.raw_input);
                        c.set_output(call.raw_output);
                        c.set_content(call.content);
                    },
                    Some(status),
                )
                .await;
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let fields = update.fields;
                let status = fields.status;
                self.tool_reported(
                    update.tool_call_id.0.to_string(),
                    move |c| {
                        if let Some(title) = fields.title {
                            c.set_title(title);
                        }
                        c.set_name(fields.name);
                        c.set_input(fields.raw_input);
                        c.set_output(fields.raw_output);
                        if let Some(content) = fields.content {
                            c.set_content(content);
                        }
                    },
                    status,
                )
                .await;
            }
            _ => {}
        }
    }

    /// `session/request_permission`: the run's policy answers; a call it does not cover
    /// waits for a person when the run asks (`asking`), else is refused and shown.
    pub(super) async fn on_permission(
        self: &Arc<Self>,
        request: RequestPermissionRequest,
        responder: Responder<RequestPermissionResponse>,
        asking: Option<crate::ask::Asking>,
    ) -> Result<(), Error> {
        let (option, allowed) = self.decide(&request);
        if let (false, Some(asking)) = (allowed, asking) {
            // A person is asked, on a task of its own: the answer may take minutes, and the
            // agent's other messages must not wait for it.
            let shared = self.clone();
            tokio::spawn(async move {
                let call = &request.tool_call.fields;
                let what = call
                    .title
                    .clone()
                    .unwrap_or_else(|| "a tool call".to_owned());
                let tool = call.name.clone().unwrap_or_else(|| what.clone());
                // Kept with the run and notified while it waits: as much as a name.
                let what = record::clip(what, record::CALL_NAME, "of its title");
                let tool = record::clip(tool, record::CALL_NAME, "of its name");
                let decision = asking.ask(shared.agent, &tool, &what).await;
                let allowed = matches!(decision, Decision::AllowOnce | Decision::AllowAlways);
                let option = shared.option(&request, allowed, decision == Decision::AllowAlways);
                let _ = responder.respond(permission(option));
            });
            return Ok(());
        }
        if !allowed {
            let what = request
                .tool_call
                .fields
                .title
                .clone()
                .unwrap_or_else(|| "a tool call".to_owned());
            self.refused(
                &record::clip(what, record::CALL_NAME, "of its title"),
                "the run's policy does not allow it (--allow, --allow-all)".to_owned(),
            )
            .await;
        }
        responder.respond(permission(option))
    }

    /// `fs/read_text_file`, beneath the worktree; a way out is refused and shown.
    pub(super) async fn on_read(
        self: &Arc<Self>,
        request: ReadTextFileRequest,
        responder: Responder<ReadTextFileResponse>,
    ) -> Result<(), Error> {
        let shared = self.clone();
        let path = request.path.clone();
        let read = tokio::task::spawn_blocking(move || {
            shared.read(&request.path, request.line, request.limit)
        })
        .await
        .unwrap_or_else(|e| Err(Denied::Failed(e.to_string())));
        match read {
            Ok(content) => responder.respond(ReadTextFileResponse::new(content)),
            Err(denied) => {
                if let Denied::Refused(why) = &denied {
                    let what = format!("fs/read_text_file {}", path.display());
                    self.refused(&what, why.clone()).await;
                }
                responder.respond_with_error(denied.error())
            }
        }
    }

    /// `fs/write_text_file`, beneath the worktree; a way out is refused and shown.
    pub(super) async fn on_write(
        self: &Arc<Self>,
        request: WriteTextFileRequest,
        responder: Responder<WriteTextFileResponse>,
    ) -> Result<(), Error> {
        let shared = self.clone();
        let path = request.path.clone();
        let written =
            tokio::task::spawn_blocking(move || shared.write(&request.path, &request.content))
                .await
                .unwrap_or_else(|e| Err(Denied::Failed(e.to_string())));
        match written {
            Ok(()) => responder.respond(WriteTextFileResponse::new()),
            Err(denied) => {
                if let Denied::Refused(why) = &denied {
                    let what = format!("fs/write_text_file {}", path.display());
                    self.refused(&what, why.clone()).await;
                }
                responder.respond_with_error(denied.error())
            }
        }
    }

    /// `terminal/create`: only when the run may run commands, and only in the worktree or
    /// a folder beneath it.
    pub(super) async fn on_create_terminal(
        &self,
        request: CreateTerminalRequest,
        responder: Responder<CreateTerminalResponse>,
    ) -> Result<(), Error> {
        let shown = std::iter::once(request.command.as_str())
            .chain(request.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let what = format!("terminal/create `{shown}`");
        let may_run = self.granted_execute.load(Ordering::Relaxed)
            || self.policy.allows_call("terminal", ToolKind::Execute);
        if !may_run {
            let why =
                "the run's policy does not allow running commands (--allow execute, --allow-all)";
            self.refused(&what, why.to_owned()).await;
            return responder.respond_with_error(error_of_kind(ErrorKind::Refused, why));
        }
        let env: Vec<(String, String)> = request
            .env
            .iter()
            .map(|v| (v.name.clone(), v.value.clone()))
            .collect();
        let created = self.terminals.create(
            &request.command,
            &request.args,
            &env,
            request.cwd.as_deref(),
            request.output_byte_limit,
        );
        match created {
            Ok(id) => responder.respond(CreateTerminalResponse::new(id)),
            Err(e) => {
                if let TerminalError::Outside(why) = &e {
                    self.refused(&what, why.clone()).await;
                }
                responder.respond_with_error(terminal_error(e))
            }
        }
    }

    /// `terminal/output`.
    pub(super) fn on_terminal_output(
        &self,
        request: TerminalOutputRequest,
        responder: Responder<TerminalOutputResponse>,
    ) -> Result<(), Error> {
        match self.terminals.output(&request.terminal_id.0) {
            Ok((output, truncated, exit)) => responder.respond(
                TerminalOutputResponse::new(output, truncated).exit_status(exit.map(status_of)),
            ),
            Err(e) => responder.respond_with_error(terminal_error(e)),
        }
    }

    /// `terminal/wait_for_exit`. Handlers run in the connection's dispatch loop, which waits
    /// for each; a wait lasts as long as the command, so it runs beside the loop, which goes
    /// on answering meanwhile (the agent's text, a `terminal/kill` of this very command when
    /// its own timeout fires). It always answers and ends `Ok`: an `Err` from a spawned task
    /// would close the connection.
    pub(super) fn on_wait_for_exit(
        self: &Arc<Self>,
        request: WaitForTerminalExitRequest,
        responder: Responder<WaitForTerminalExitResponse>,
        cx: ConnectionTo<Agent>,
    ) -> Result<(), Error> {
        let shared = self.clone();
        cx.spawn(async move {
            let _ = match shared.terminals.wait(&request.terminal_id.0).await {
                Ok(exit) => responder.respond(WaitForTerminalExitResponse::new(status_of(exit))),
                Err(e) => responder.respond_with_error(terminal_error(e)),
            };
            Ok(())
        })
    }

    /// `terminal/kill`.
    pub(super) fn on_kill_terminal(
        &self,
        request: KillTerminalRequest,
        responder: Responder<KillTerminalResponse>,
    ) -> Result<(), Error> {
        match self.terminals.kill(&request.terminal_id.0) {
            Ok(()) => responder.respond(KillTerminalResponse::new()),
            Err(e) => responder.respond_with_error(terminal_error(e)),
        }
    }

    /// `terminal/release`.
    pub(super) fn on_release_terminal(
        &self,
        request: ReleaseTerminalRequest,
        responder: Responder<ReleaseTerminalResponse>,
    ) -> Result<(), Error> {
        match self.terminals.release(&request.terminal_id.0) {
            Ok(()) => responder.respond(ReleaseTerminalResponse::new()),
            Err(e) => responder.respond_with_error(terminal_error(e)),
        }
    }
}
