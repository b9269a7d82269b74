//! The client's side of a turn, as the runtime's hooks: permissions asked with
//! `session/request_permission`, files through `fs/read_text_file` and `fs/write_text_file`
//! (the editor's buffers, unsaved changes included), and commands in `terminal/*`.
//!
//! Each runs on the turn's own task, never in the connection's dispatch loop, so awaiting the
//! client's answer cannot stall the messages that carry it.

use std::collections::HashMap;
use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, CreateTerminalRequest, Diff, EnvVariable, KillTerminalRequest, PermissionOption,
    PermissionOptionKind, ReadTextFileRequest, ReleaseTerminalRequest, RequestPermissionOutcome,
    RequestPermissionRequest, SessionId, SessionNotification, SessionUpdate, Terminal,
    TerminalOutputRequest, TextContent, ToolCallContent, ToolCallUpdate, ToolCallUpdateFields,
    WaitForTerminalExitRequest, WriteTextFileRequest,
};
use async_trait::async_trait;
use berth_agent::{
    CancellationToken, CommandRequest, CommandResult, Commands, Decision, FileChange, Files,
    PermissionRequest, Permissions,
};
use tokio::sync::Notify;

/// Which calls' tool-call updates the relay has sent: a permission request waits for its
/// call's, so the client always knows the call it is asked about.
#[derive(Default)]
pub struct Relayed {
    calls: Mutex<HashSet<String>>,
    notify: Notify,
}

impl Relayed {
    /// The relay sent the updates of `call_id` up to its permission question.
    pub fn mark(&self, call_id: &str) {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(call_id.to_owned());
        self.notify.notify_waiters();
    }

    async fn wait(&self, call_id: &str) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self
                .calls
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(call_id)
            {
                return;
            }
            notified.await;
        }
    }
}

/// The option ids berth offers in a permission request.
const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT: &str = "reject_once";

/// Permissions answered by the client's person.
pub struct ClientPermissions {
    pub cx: ConnectionTo<Client>,
    pub session_id: SessionId,
    pub relayed: Arc<Relayed>,
    /// Whether this client's person may run a command once without the sandbox: a client on
    /// this machine or with the admin token, never a device (its token must not lift the
    /// sandbox the server's owner set).
    pub may_lift_sandbox: bool,
    /// Whose `[[notify]]` entries hear that a request waits (only those that say `always`:
    /// the editor shows it), and for which session.
    pub ops: berth_ops::Ops,
    pub session: berth_ops::Session,
}

#[async_trait]
impl Permissions for ClientPermissions {
    async fn decide(&self, request: &PermissionRequest) -> Decision {
        self.relayed.wait(&request.call_id).await;
        self.ops
            .notify(request.needs_input(&self.session, &request.call_id, true));
        let fields = ToolCallUpdateFields::new()
            .title(
                request
                    .description
                    .lines()
                    .next()
                    .unwrap_or(&request.tool)
                    .to_owned(),
            )
            .content(permission_content(request));
        let ask = RequestPermissionRequest::new(
            self.session_id.clone(),
            ToolCallUpdate::new(request.call_id.clone(), fields),
            vec![
                PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
                PermissionOption::new(
                    ALLOW_ALWAYS,
                    format!("Always allow {} in this session", request.tool),
                    PermissionOptionKind::AllowAlways,
                ),
                PermissionOption::new(REJECT, "Reject", PermissionOptionKind::RejectOnce),
            ],
        );
        match self.cx.send_request(ask).block_task().await {
            Ok(answer) => match answer.outcome {
                RequestPermissionOutcome::Selected(s) => match &*s.option_id.0 {
                    ALLOW_ONCE => Decision::AllowOnce,
                    ALLOW_ALWAYS => Decision::AllowAlways,
                    _ => Decision::Reject,
                },
                _ => Decision::Reject,
            },
            // No answer (the client failed or went away): nothing runs.
            Err(_) => Decision::Reject,
        }
    }

    /// Asked as a question of its own, with no "always": the sandbox is lifted for this one
    /// run only.
    async fn allow_unconfined(&self, request: &PermissionRequest) -> bool {
        if !self.may_lift_sandbox {
            return false;
        }
        let fields = ToolCallUpdateFields::new()
            .title(format!("Run `{}` without the sandbox?", request.tool))
            .content(vec![text(&request.description)]);
        let ask = RequestPermissionRequest::new(
            self.session_id.clone(),
            ToolCallUpdate::new(request.call_id.clone(), fields),
            vec![
                PermissionOption::new(
                    ALLOW_ONCE,
                    "Run once without the sandbox",
                    PermissionOptionKind::AllowOnce,
                ),
                PermissionOption::new(REJECT, "Keep it confined", PermissionOptionKind::RejectOnce),
            ],
        );
        match self.cx.send_request(ask).block_task().await {
            Ok(answer) => matches!(
                answer.outcome,
                RequestPermissionOutcome::Selected(s) if &*s.option_id.0 == ALLOW_ONCE
            ),
            Err(_) => false,
        }
    }
}

/// What a permission question shows: the diff of a file change, else the description (the
/// command line).
fn permission_content(request: &PermissionRequest) -> Vec<ToolCallContent> {
    match &request.change {
        Some(change) => vec![diff(change)],
        None => vec![text(&request.description)],
    }
}

pub fn diff(change: &FileChange) -> ToolCallContent {
    ToolCallContent::Diff(
        Diff::new(change.path.clone(), change.new.clone()).old_text(change.old.clone()),
    )
}

pub fn text(s: &str) -> ToolCallContent {
    ToolCallContent::from(ContentBlock::Text(TextContent::new(s.to_owned())))
}

/// Files through the client, for what it offers; the disk (already confined by the tools)
/// for what it does not.
pub struct ClientFiles {
    pub cx: ConnectionTo<Client>,
    pub session_id: SessionId,
    pub read: bool,
    pub write: bool,
}

#[async_trait]
impl Files for ClientFiles {
    async fn read(&self, path: &Path) -> Result<Option<String>, String> {
        if !self.read {
            return disk_read(path).await;
        }
        let ask = ReadTextFileRequest::new(self.session_id.clone(), path.to_path_buf());
        match self.cx.send_request(ask).block_task().await {
            Ok(answer) => Ok(Some(answer.content)),
            // Clients answer a missing file with an error; the disk says whether it was that.
            Err(e) => match tokio::fs::symlink_metadata(path).await {
                Err(m) if m.kind() == std::io::ErrorKind::NotFound => Ok(None),
                _ => Err(format!(
                    "the editor could not read '{}': {}",
                    path.display(),
                    e.message
                )),
            },
        }
    }

    async fn write(&self, path: &Path, text: &str) -> Result<(), String> {
        if !self.write {
            return disk_write(path, text).await;
        }
        let ask = WriteTextFileRequest::new(self.session_id.clone(), path.to_path_buf(), text);
        self.cx
            .send_request(ask)
            .block_task()
            .await
            .map(|_| ())
            .map_err(|e| {
                format!(
                    "the editor could not write '{}': {}",
                    path.display(),
                    e.message
                )
            })
    }
}

async fn disk_read(path: &Path) -> Result<Option<String>, String> {
    match tokio::fs::read(path).await {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| format!("'{}' is not UTF-8 text", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read '{}': {e}", path.display())),
    }
}

async fn disk_write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| format!("cannot create '{}': {e}", parent.display()))?;
    }
    tokio::fs::write(path, text)
        .await
        .map_err(|e| format!("cannot write '{}': {e}", path.display()))
}

/// The most output a terminal keeps for the model.
const OUTPUT_BYTE_LIMIT: u64 = 64 * 1024;

/// Commands in the client's terminals, shown live under their tool call.
pub struct ClientTerminals {
    pub cx: ConnectionTo<Client>,
    pub session_id: SessionId,
    /// The terminal each call ran in, so its final update keeps showing it.
    pub by_call: Arc<Mutex<HashMap<String, String>>>,
}

#[async_trait]
impl Commands for ClientTerminals {
    async fn run(
        &self,
        request: CommandRequest,
        cancel: CancellationToken,
    ) -> Result<CommandResult, String> {
        let env = request
            .hidden_env
            .iter()
            .map(|name| EnvVariable::new(name.clone(), String::new()))
            .chain(
                request
                    .env
                    .iter()
                    .map(|(name, value)| EnvVariable::new(name.clone(), value.clone())),
            )
            .collect();
        let create = CreateTerminalRequest::new(self.session_id.clone(), "sh")
            .args(vec!["-c".to_owned(), request.command.clone()])
            .env(env)
            .cwd(request.cwd.clone())
            .output_byte_limit(OUTPUT_BYTE_LIMIT);
        let created = self
            .cx
            .send_request(create)
            .block_task()
            .await
            .map_err(|e| format!("the editor could not start a terminal: {}", e.message))?;
        let id = created.terminal_id;
        self.by_call
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(request.call_id.clone(), id.0.to_string());
        // Shown under the call while it runs.
        let _ = self.cx.send_notification(SessionNotification::new(
            self.session_id.clone(),
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                request.call_id.clone(),
                ToolCallUpdateFields::new()
                    .content(vec![ToolCallContent::Terminal(Terminal::new(id.clone()))]),
            )),
        ));
        let wait = self
            .cx
            .send_request(WaitForTerminalExitRequest::new(
                self.session_id.clone(),
                id.clone(),
            ))
            .block_task();
        let stopped = tokio::select! {
            exited = wait => {
                exited.map_err(|e| format!("the editor's terminal failed: {}", e.message))?;
                None
            }
            _ = tokio::time::sleep(request.timeout) => Some(format!(
                "timed out after {} s; the command was killed",
                request.timeout.as_secs()
            )),
            _ = cancel.cancelled() => Some("cancelled; the command was killed".to_owned()),
        };
        if stopped.is_some() {
            let _ = self
                .cx
                .send_request(KillTerminalRequest::new(
                    self.session_id.clone(),
                    id.clone(),
                ))
                .block_task()
                .await;
        }
        let output = self
            .cx
            .send_request(TerminalOutputRequest::new(
                self.session_id.clone(),
                id.clone(),
            ))
            .block_task()
            .await;
        let _ = self
            .cx
            .send_request(ReleaseTerminalRequest::new(self.session_id.clone(), id))
            .detach();
        let output =
            output.map_err(|e| format!("the editor's terminal lost the output: {}", e.message))?;
        if let Some(why) = stopped {
            return Err(format!("{why}. Output so far:\n{}", output.output));
        }
        let status = output.exit_status.unwrap_or_default();
        Ok(CommandResult {
            output: output.output,
            exit_code: status.exit_code,
            signal: status.signal,
            truncated: output.truncated,
        })
    }
}
