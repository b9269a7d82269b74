//! Any ACP agent as a run's agent: berth starts its command in the worktree and drives it as
//! an ACP client over its stdio (the official `agent-client-protocol` crate's client side).
//!
//! - **Its reach is the worktree.** berth offers `fs/read_text_file` and `fs/write_text_file`
//!   and answers them beneath a confined handle on the worktree (berth-confined): a path
//!   outside it, into `.git`, or through a symlink that leads out is refused, the agent gets an
//!   error, and the refusal is an event and a line in the transcript. No terminal is offered,
//!   so an agent runs its commands with its own tools, in the folder it was started in.
//! - **Permissions by policy**, as for berth's own agent: calls of a kind that only reads run,
//!   as do tools the policy names (by the tool's name or by its kind: `edit`, `execute`); every
//!   other request is answered with the agent's own rejection option, and shown.
//! - **The transcript is berth's own record** of what it saw: the task as the turn starts, the
//!   answer's text when it ends (marked interrupted when cut short), and each refusal.
//! - **Stopping** sends `session/cancel`, then, if the agent has not answered within a grace
//!   period, kills its process group.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, FileSystemCapabilities,
    InitializeRequest, NewSessionRequest, PermissionOptionKind, PromptRequest, ReadTextFileRequest,
    ReadTextFileResponse, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionNotification, SessionUpdate,
    StopReason, TextContent, ToolCallStatus, ToolKind as AcpKind, WriteTextFileRequest,
    WriteTextFileResponse,
};
use agent_client_protocol::{Agent, ByteStreams, Client, ErrorCode};
use berth_agent::{CancellationToken, ToolKind, TurnStop, Usage};
use berth_confined::Unconfined;
use berth_ops::{Message, Ops, Role, Session, StoragePath};
use tokio::sync::mpsc;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::{Policy, RunEvent};

/// Files the agent may read through berth at once.
const MAX_READ_BYTES: u64 = 10 << 20;

/// How long a cancelled agent has to answer before its process is killed.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// What one ACP agent's turn needs.
pub(crate) struct AcpTurn<'a> {
    pub command: &'a str,
    pub agent: usize,
    /// What the agent is sent: the task, or, resumed, the task with what happened.
    pub prompt: &'a str,
    /// The agent's own session id from an earlier turn, to load and continue.
    pub resume: Option<String>,
    pub worktree: &'a Path,
    pub session: &'a Session,
    /// The workspace's variables (its ports), for the agent's process.
    pub env: &'a [(String, String)],
    pub ops: &'a Ops,
    pub policy: &'a Policy,
    pub tx: &'a mpsc::Sender<RunEvent>,
    pub cancel: CancellationToken,
}

/// What the handlers share while the turn runs.
struct Shared {
    agent: usize,
    tx: mpsc::Sender<RunEvent>,
    ops: Ops,
    session: Session,
    policy: Policy,
    root: PathBuf,
    /// The worktree, opened once: every file request resolves beneath it.
    dir: berth_confined::Dir,
    answer: Mutex<String>,
}

impl Shared {
    async fn refused(&self, tool: &str, why: String) {
        let _ = self
            .tx
            .send(RunEvent::Refused {
                agent: self.agent,
                tool: tool.to_owned(),
                description: why.clone(),
            })
            .await;
        let _ = self
            .ops
            .append_message(
                &self.session,
                &Message::new(Role::System, format!("berth refused {tool}: {why}")),
            )
            .await;
    }

    /// The worktree-relative path of an absolute `path` the agent named; a refusal, else.
    fn confine(&self, path: &Path) -> Result<StoragePath, Denied> {
        let shown = path.display();
        let raw = path
            .to_str()
            .ok_or_else(|| Denied::Refused(format!("{shown} is not UTF-8")))?;
        berth_confined::relative(&self.root, raw, false)
            .map_err(|why| {
                Denied::Refused(match why {
                    Unconfined::Outside => {
                        format!("{shown} is outside the worktree {}", self.root.display())
                    }
                    Unconfined::Root => format!("{shown} is the worktree itself, not a file"),
                    Unconfined::Unusable(rule) => format!("{shown}: it {rule}"),
                    Unconfined::Git(_) => format!("{shown} is inside .git, which is git's"),
                })
            })?
            .ok_or_else(|| Denied::Refused(format!("{shown} is the worktree itself, not a file")))
    }

    fn read(&self, path: &Path, line: Option<u32>, limit: Option<u32>) -> Result<String, Denied> {
        let rel = self.confine(path)?;
        let bytes = berth_confined::read(&self.dir, rel.as_path(), MAX_READ_BYTES)
            .map_err(|e| describe(path, e))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Denied::Failed(format!("{} is not UTF-8 text", path.display())))?;
        let skip = line.map_or(0, |l| l.saturating_sub(1) as usize);
        Ok(match (skip, limit) {
            (0, None) => text,
            (skip, limit) => text
                .split_inclusive('\n')
                .skip(skip)
                .take(limit.map_or(usize::MAX, |l| l as usize))
                .collect(),
        })
    }

    fn write(&self, path: &Path, content: &str) -> Result<(), Denied> {
        let rel = self.confine(path)?;
        berth_confined::write(&self.dir, rel.as_path(), content.as_bytes())
            .map_err(|e| describe(path, berth_confined::ReadError::Io(e)))
    }

    /// The option answering a permission request by the run's policy, and whether it allows.
    fn decide(&self, request: &RequestPermissionRequest) -> (Option<String>, bool) {
        let call = &request.tool_call.fields;
        let name = call
            .name
            .clone()
            .or_else(|| {
                call.title
                    .as_deref()
                    .and_then(|t| t.split_whitespace().next())
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        let kind = call.kind.map(kind_of).unwrap_or(ToolKind::Other);
        let allowed = self.policy.allows_call(&name, kind);
        let wanted: &[PermissionOptionKind] = if allowed {
            &[
                PermissionOptionKind::AllowOnce,
                PermissionOptionKind::AllowAlways,
            ]
        } else {
            &[
                PermissionOptionKind::RejectOnce,
                PermissionOptionKind::RejectAlways,
            ]
        };
        let option = wanted.iter().find_map(|k| {
            request
                .options
                .iter()
                .find(|o| o.kind == *k)
                .map(|o| o.option_id.0.to_string())
        });
        (option, allowed)
    }
}

/// Why a file request of the agent was not done: a refusal (a way out of the worktree: shown
/// and recorded), a file that does not exist (an answer, not a refusal), or another failure.
enum Denied {
    Refused(String),
    NotFound(String),
    Failed(String),
}

impl Denied {
    fn error(&self) -> agent_client_protocol::Error {
        let (code, message) = match self {
            Denied::Refused(m) => (ErrorCode::INVALID_PARAMS, m),
            Denied::NotFound(m) => (ErrorCode::RESOURCE_NOT_FOUND, m),
            Denied::Failed(m) => (ErrorCode::INTERNAL_ERROR, m),
        };
        agent_client_protocol::Error::new(code, message.clone())
    }
}

fn describe(path: &Path, e: berth_confined::ReadError) -> Denied {
    let shown = path.display();
    match e {
        berth_confined::ReadError::Io(e) if berth_confined::is_escape(&e) => Denied::Refused(
            format!("{shown} leads outside the worktree (through a symlink)"),
        ),
        berth_confined::ReadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Denied::NotFound(format!("{shown} does not exist"))
        }
        berth_confined::ReadError::Io(e) => Denied::Failed(format!("{shown}: {e}")),
        berth_confined::ReadError::TooLarge { size, limit, .. } => Denied::Failed(format!(
            "{shown} is {size} bytes, over the limit of {limit}"
        )),
    }
}

fn kind_of(kind: AcpKind) -> ToolKind {
    match kind {
        AcpKind::Read => ToolKind::Read,
        AcpKind::Search => ToolKind::Search,
        AcpKind::Think => ToolKind::Think,
        AcpKind::Edit | AcpKind::Move => ToolKind::Edit,
        AcpKind::Delete => ToolKind::Delete,
        AcpKind::Execute => ToolKind::Execute,
        _ => ToolKind::Other,
    }
}

/// Runs the agent's turn on the task; how it ended.
pub(crate) async fn turn(t: AcpTurn<'_>) -> (TurnStop, Usage) {
    let failed = |message: String| (TurnStop::Failed { message }, Usage::default());
    if t.resume.is_some() {
        return failed(format!(
            "the ACP agent `{}` cannot be resumed by this berth",
            t.command
        ));
    }
    let mut child = match tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("exec {}", t.command))
        .current_dir(t.worktree)
        .envs(t.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot start `{}`: {e}", t.command)),
    };
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return failed("the agent's stdio could not be opened".to_owned());
    };
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let dir = match berth_confined::open(t.worktree) {
        Ok(d) => d,
        Err(e) => {
            return failed(format!(
                "cannot open the worktree {}: {e}",
                t.worktree.display()
            ));
        }
    };
    let shared = Arc::new(Shared {
        dir,
        agent: t.agent,
        tx: t.tx.clone(),
        ops: t.ops.clone(),
        session: t.session.clone(),
        policy: t.policy.clone(),
        root: t.worktree.to_path_buf(),
        answer: Mutex::new(String::new()),
    });
    if let Err(e) = t
        .ops
        .append_message(t.session, &Message::new(Role::User, t.prompt.to_owned()))
        .await
    {
        return failed(e.to_string());
    }
    let (s1, s2, s3, s4) = (
        shared.clone(),
        shared.clone(),
        shared.clone(),
        shared.clone(),
    );
    let task = t.prompt.to_owned();
    let worktree = t.worktree.to_path_buf();
    let cancel = t.cancel.clone();
    let result: Result<StopReason, agent_client_protocol::Error> = Client
        .v1()
        .name("berth")
        .on_receive_notification(
            async move |n: SessionNotification, _cx: ConnectionTo<Agent>| {
                let event = match n.update {
                    SessionUpdate::AgentMessageChunk(chunk) => match chunk.content {
                        ContentBlock::Text(text) => {
                            s1.answer
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push_str(&text.text);
                            Some(RunEvent::Text {
                                agent: s1.agent,
                                text: text.text,
                            })
                        }
                        _ => None,
                    },
                    SessionUpdate::ToolCall(call) => Some(RunEvent::Tool {
                        agent: s1.agent,
                        name: call.name.clone().unwrap_or(call.title),
                        kind: kind_of(call.kind),
                    }),
                    SessionUpdate::ToolCallUpdate(update) => match update.fields.status {
                        Some(status @ (ToolCallStatus::Completed | ToolCallStatus::Failed)) => {
                            Some(RunEvent::ToolDone {
                                agent: s1.agent,
                                name: update
                                    .fields
                                    .name
                                    .or(update.fields.title)
                                    .unwrap_or_else(|| update.tool_call_id.0.to_string()),
                                is_error: status == ToolCallStatus::Failed,
                            })
                        }
                        _ => None,
                    },
                    _ => None,
                };
                if let Some(event) = event {
                    let _ = s1.tx.send(event).await;
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx: ConnectionTo<Agent>| {
                let (option, allowed) = s2.decide(&request);
                if !allowed {
                    let what = request
                        .tool_call
                        .fields
                        .title
                        .clone()
                        .unwrap_or_else(|| "a tool call".to_owned());
                    s2.refused(
                        &what,
                        "the run's policy does not allow it (--allow, --allow-all)".to_owned(),
                    )
                    .await;
                }
                let outcome = match option {
                    Some(id) => {
                        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id))
                    }
                    None => RequestPermissionOutcome::Cancelled,
                };
                responder.respond(RequestPermissionResponse::new(outcome))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, _cx: ConnectionTo<Agent>| {
                let shared = s3.clone();
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
                            s3.refused(&what, why.clone()).await;
                        }
                        responder.respond_with_error(denied.error())
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WriteTextFileRequest, responder, _cx: ConnectionTo<Agent>| {
                let shared = s4.clone();
                let path = request.path.clone();
                let written = tokio::task::spawn_blocking(move || {
                    shared.write(&request.path, &request.content)
                })
                .await
                .unwrap_or_else(|e| Err(Denied::Failed(e.to_string())));
                match written {
                    Ok(()) => responder.respond(WriteTextFileResponse::new()),
                    Err(denied) => {
                        if let Denied::Refused(why) = &denied {
                            let what = format!("fs/write_text_file {}", path.display());
                            s4.refused(&what, why.clone()).await;
                        }
                        responder.respond_with_error(denied.error())
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            let capabilities = ClientCapabilities::new().fs(FileSystemCapabilities::new()
                .read_text_file(true)
                .write_text_file(true));
            cx.send_request(
                InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities),
            )
            .block_task()
            .await?;
            let session = cx
                .send_request(NewSessionRequest::new(worktree))
                .block_task()
                .await?
                .session_id;
            let prompt = cx.send_request(PromptRequest::new(
                session.clone(),
                vec![ContentBlock::Text(TextContent::new(task))],
            ));
            let answer = prompt.block_task();
            tokio::pin!(answer);
            tokio::select! {
                answer = &mut answer => Ok(answer?.stop_reason),
                () = cancel.cancelled() => {
                    cx.send_notification(CancelNotification::new(session))?;
                    match tokio::time::timeout(CANCEL_GRACE, answer).await {
                        Ok(answer) => Ok(answer?.stop_reason),
                        Err(_) => Ok(StopReason::Cancelled),
                    }
                }
            }
        })
        .await;
    // An agent whose process ended under the turn (killed, crashed) is said as that: the
    // protocol error it leaves ("transport closed") tells a person less.
    let exited = match &result {
        Err(_) => tokio::time::timeout(Duration::from_millis(500), child.wait())
            .await
            .ok()
            .and_then(Result::ok),
        Ok(_) => None,
    };
    let _ = child.start_kill();
    let answer = std::mem::take(&mut *shared.answer.lock().unwrap_or_else(|e| e.into_inner()));
    let stop = match result {
        Ok(StopReason::EndTurn) => TurnStop::EndTurn,
        Ok(StopReason::MaxTokens) => TurnStop::MaxTokens,
        Ok(StopReason::MaxTurnRequests) => TurnStop::MaxToolIterations,
        Ok(StopReason::Refusal) => TurnStop::Refusal,
        Ok(_) => TurnStop::Cancelled,
        Err(e) => TurnStop::Failed {
            message: match exited {
                Some(status) => format!(
                    "the ACP agent `{}` ended in the middle of its turn ({status})",
                    t.command
                ),
                None => format!("the ACP agent `{}` failed: {e}", t.command),
            },
        },
    };
    if !answer.is_empty() {
        let text = match stop {
            TurnStop::EndTurn | TurnStop::MaxTokens | TurnStop::MaxToolIterations => answer,
            _ => format!("{answer}\n\n[interrupted]"),
        };
        let _ = t
            .ops
            .append_message(t.session, &Message::new(Role::Assistant, text))
            .await;
    }
    (stop, Usage::default())
}
