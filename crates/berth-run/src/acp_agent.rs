//! Any ACP agent as a run's agent: berth starts its command in the worktree and drives it as
//! an ACP client over its stdio (the official `agent-client-protocol` crate's client side).
//!
//! - **Its reach is the worktree.** berth offers `fs/read_text_file` and `fs/write_text_file`
//!   and answers them beneath a confined handle on the worktree (berth-confined): a path
//!   outside it, into `.git`, or through a symlink that leads out is refused, the agent gets an
//!   error, and the refusal is an event and a line in the transcript. It offers `terminal/*`
//!   too (`terminals.rs`): a command runs in the worktree or a folder beneath it, never a
//!   `cwd` that resolves outside, and only when the run may run commands (the policy allows
//!   `execute`, or allowed the agent's request to run this one). Every terminal still running
//!   is killed with its process group when the turn ends.
//! - **Permissions by policy**, as for berth's own agent: calls of a kind that only reads run,
//!   as do tools the policy names (by the tool's name or by its kind: `edit`, `execute`); every
//!   other request is answered with the agent's own rejection option, and shown.
//! - **The transcript is berth's own record** of what it saw: the prompt as it is sent (once
//!   the agent has a session), the answer's text, each tool call the agent reported with its
//!   result (a `## Tool` record, once the call is over; the text before it is written first),
//!   the text after it, marked interrupted when cut short, and each refusal.
//! - **Its process lives for the run's turns.** What the agent was told while it worked
//!   (`tellings.rs`) is its next prompt once a turn ends, in the same session and process
//!   ([`Between`] says what comes next); a `--now` tell cancels the current turn alone
//!   (`session/cancel` on a per-turn token), and the process is ended once its turns are.
//! - **Resuming** loads the agent's own session (`session/load`, with the id it had, sent
//!   as an `agent_session` event the first time) and sends the "carry on" prompt; what the
//!   agent replays while loading is already in the transcript, so it is neither recorded nor
//!   shown again. An agent that cannot load a session fails the turn, saying so, and is sent
//!   nothing.
//! - **The process itself is confined** (berth-sandbox): it writes only in the worktree, a
//!   private `/tmp` and its own state (`--agent-writable`, or what berth knows the agent
//!   keeps: `~/.claude` for claude-agent-acp, with `CLAUDE_CONFIG_DIR` pointing there, …),
//!   reads nothing on the deny list, connects only to its provider's ports, and signals
//!   nothing outside its own tree. Only berth itself
//!   (`--agent-cmd "berth acp"`, a plain command line whose program is the running berth's
//!   own file, whatever its name: `berth_sandbox::runs_berth`) runs as it is: it confines the
//!   commands it runs itself, and a Landlock domain would forbid it the mounts that takes.
//! - **Stopping** sends `session/cancel`, then, if the agent has not answered within a grace
//!   period, kills its process group (a turn cut by a `--now` tell that goes unanswered
//!   ends the agent's turns the same way: a deaf process is told nothing more).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, CreateTerminalRequest, FileSystemCapabilities, InitializeRequest,
    KillTerminalRequest, LoadSessionRequest, NewSessionRequest, PermissionOptionKind,
    ReadTextFileRequest, ReleaseTerminalRequest, RequestPermissionRequest, SessionId,
    TerminalExitStatus, TerminalOutputRequest, ToolCallStatus, ToolKind as AcpKind,
    WaitForTerminalExitRequest,
};
use agent_client_protocol::{Agent, Client};
use berth_agent::{CancellationToken, ToolKind, TurnStop, Usage};
use berth_confined::Unconfined;
use berth_ops::{ErrorKind, Message, Ops, Role, Session, StoragePath, tool_record};
use tokio::sync::mpsc;

use crate::event::RunEvent;
use crate::terminals::{Exit, TerminalError, Terminals};
use berth_agent::Policy;

mod handlers;
mod prompting;
mod record;
mod wire;

use record::Call;

/// Files the agent may read through berth at once.
const MAX_READ_BYTES: u64 = 10 << 20;

/// How long a cancelled agent has to answer before its process is killed.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// What a run's ACP agent is sent between its turns, in the same process: the run's side of
/// its conversation (`running/between.rs`).
#[async_trait::async_trait]
pub(crate) trait Between: Send + Sync {
    /// The token of its next turn: cancelling it cuts that turn alone (`--now`); a stop of
    /// the agent cancels it too.
    fn turn_cancel(&self) -> CancellationToken;
    /// Its turn ended `stop`, having used `used` (its transcript and its tokens written): the
    /// next prompt, said as told; `None`: its turns are over.
    async fn next(&self, stop: &TurnStop, used: Usage) -> Option<String>;
    /// What it is told while it works, once there is something (said as told): for an agent
    /// that queues prompts itself, sent at once.
    async fn told(&self) -> Vec<String>;
}

/// What one ACP agent's turns need.
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
    /// What the run says of the agent's process beyond its program: its own state
    /// (`--agent-writable`, an `[agents.NAME]` entry's), the variables and hosts it needs.
    pub declared: berth_ops::AgentDeclared,
    /// Where its process's standard error is kept; `None`: only its end, for a failure.
    pub stderr: Option<PathBuf>,
    /// With `--ask`: a permission its policy does not cover is asked of a person.
    pub asking: Option<crate::ask::Asking>,
    /// What follows each turn.
    pub between: &'a dyn Between,
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
    terminals: Terminals,
    /// Whether the policy let the agent run a command this turn (its permission request for
    /// an `execute` call): its terminal then runs.
    granted_execute: AtomicBool,
    /// The answer's text since it was last written to the transcript.
    answer: Mutex<String>,
    /// The tool calls the agent reported and has not finished, by id.
    calls: Mutex<HashMap<String, Call>>,
    /// Set while a resumed agent replays its session (`session/load`): what it replays is
    /// already in the transcript, and is not a new event.
    replaying: AtomicBool,
}

impl Shared {
    /// Writes the answer's text so far to the transcript (before a tool record, so the
    /// transcript keeps the order the agent spoke and acted in); `suffix` marks the end of an
    /// interrupted answer.
    async fn flush_answer(&self, suffix: &str) {
        let mut text = std::mem::take(&mut *self.answer.lock().unwrap_or_else(|e| e.into_inner()));
        if !text.is_empty() {
            text.push_str(suffix);
            self.write_answer(text).await;
        }
    }

    /// Takes in a chunk of the answer: held, or, once what is held would pass
    /// [`record::ANSWER_PIECE`], written to the transcript after what was held before it (a
    /// long answer is several messages, a long chunk too, never copied whole: writing a
    /// message copies it twice more).
    async fn answered(&self, chunk: String) {
        let held = {
            let mut answer = self.answer.lock().unwrap_or_else(|e| e.into_inner());
            if answer.len() + chunk.len() < record::ANSWER_PIECE {
                answer.push_str(&chunk);
                return;
            }
            std::mem::take(&mut *answer)
        };
        if !held.is_empty() {
            self.write_answer(held).await;
        }
        if chunk.len() < record::ANSWER_PIECE {
            *self.answer.lock().unwrap_or_else(|e| e.into_inner()) = chunk;
        } else {
            self.write_answer(chunk).await;
        }
    }

    /// Writes `text` to the transcript as messages of at most [`record::ANSWER_PIECE`]
    /// bytes.
    async fn write_answer(&self, text: String) {
        if text.len() <= record::ANSWER_PIECE {
            let _ = self
                .ops
                .append_message(&self.session, &Message::new(Role::Assistant, text))
                .await;
            return;
        }
        for piece in record::pieces(&text, record::ANSWER_PIECE) {
            let message = Message::new(Role::Assistant, piece);
            let _ = self.ops.append_message(&self.session, &message).await;
        }
    }

    /// Takes in a tool call's report; once the call is over, records it (after the text
    /// before it) and says so as an event.
    async fn tool_reported(
        &self,
        id: String,
        update: impl FnOnce(&mut Call),
        status: Option<ToolCallStatus>,
    ) {
        let over = matches!(
            status,
            Some(ToolCallStatus::Completed | ToolCallStatus::Failed)
        );
        // An id is the agent's to choose, of any length: kept as a name is.
        let id = record::clip(id, record::CALL_NAME, "of its id");
        let finished = {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            // Past the calls kept open, a new one is not recorded: each holds some of the
            // agent's output, and an agent that never ends its calls must not grow berth.
            if calls.len() >= record::OPEN_CALLS && !calls.contains_key(&id) {
                return;
            }
            update(calls.entry(id.clone()).or_default());
            if over { calls.remove(&id) } else { None }
        };
        let Some(call) = finished else {
            return;
        };
        let is_error = status == Some(ToolCallStatus::Failed);
        let name = call.name.clone().unwrap_or_else(|| call.title.clone());
        let input = match &call.input {
            Some(v) => v.clone(),
            None if call.name.is_some() => call.title.clone(),
            None => String::new(),
        };
        self.flush_answer("").await;
        let _ = self
            .ops
            .append_message(
                &self.session,
                &tool_record(&name, &input, is_error, &call.output_text()),
            )
            .await;
        let _ = self
            .tx
            .send(RunEvent::ToolDone {
                agent: self.agent,
                name,
                is_error,
            })
            .await;
    }

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
        (self.option(request, allowed, false), allowed)
    }

    /// The option of `request` that says `allowed` (`always`: for the rest of the session,
    /// where the agent offers it); an execute call allowed lets terminals run from then on.
    fn option(
        &self,
        request: &RequestPermissionRequest,
        allowed: bool,
        always: bool,
    ) -> Option<String> {
        let kind = request
            .tool_call
            .fields
            .kind
            .map(kind_of)
            .unwrap_or(ToolKind::Other);
        if allowed && kind == ToolKind::Execute {
            self.granted_execute.store(true, Ordering::Relaxed);
        }
        let wanted: &[PermissionOptionKind] = match (allowed, always) {
            (true, true) => &[
                PermissionOptionKind::AllowAlways,
                PermissionOptionKind::AllowOnce,
            ],
            (true, false) => &[
                PermissionOptionKind::AllowOnce,
                PermissionOptionKind::AllowAlways,
            ],
            (false, _) => &[
                PermissionOptionKind::RejectOnce,
                PermissionOptionKind::RejectAlways,
            ],
        };
        wanted.iter().find_map(|k| {
            request
                .options
                .iter()
                .find(|o| o.kind == *k)
                .map(|o| o.option_id.0.to_string())
        })
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
        let (kind, message) = match self {
            Denied::Refused(m) => (ErrorKind::Refused, m),
            Denied::NotFound(m) => (ErrorKind::NotFound, m),
            Denied::Failed(m) => (ErrorKind::Io, m),
        };
        berth_agent::acp::error_of_kind(kind, message.clone())
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

/// What a failed agent's standard error ended with, to follow the reason it failed: its last
/// lines, and the sandbox's note on what refused it when the lines show a refusal (the path
/// or host, and the option that opens it). Empty when it said nothing.
async fn last_words(
    task: Option<tokio::task::JoinHandle<()>>,
    tail: &crate::stderr::Tail,
    confinement: Option<&berth_sandbox::Confinement>,
) -> String {
    // The process has ended: what it wrote is in the pipe, read to its end unless another
    // process (one it started) still holds it.
    if let Some(task) = task {
        let _ = tokio::time::timeout(Duration::from_millis(500), task).await;
    }
    let lines = tail.last_lines(STDERR_LINES);
    if lines.is_empty() {
        return String::new();
    }
    let mut said = format!("; its standard error ended:\n{}", lines.join("\n"));
    if let Some(note) = confinement.and_then(|c| berth_sandbox::explain(&tail.text(), c)) {
        said.push('\n');
        said.push_str(&note);
    }
    said
}

/// The lines of a failed agent's standard error its failure message quotes.
const STDERR_LINES: usize = 12;

/// The agent's process, started confined in the worktree, and what the handlers share.
struct Started {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
    shared: Arc<Shared>,
    stderr_tail: crate::stderr::Tail,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    confinement: Option<berth_sandbox::Confinement>,
}

/// Starts the agent's command, confined, in the worktree; why not, when it cannot.
async fn start_agent(t: &AcpTurn<'_>) -> Result<Started, String> {
    let ws = t
        .ops
        .resolve_workspace(t.session.workspace_id.as_str())
        .await
        .ok();
    let berth_ops::AgentProcess {
        sandbox,
        confinement,
        env: process_env,
        network,
    } = t
        .ops
        .agent_process(ws.as_ref(), t.worktree, t.command, &t.declared, t.env)
        .await
        .map_err(|e| e.to_string())?;
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!("exec {}", t.command))
        .current_dir(t.worktree)
        .envs(t.env.iter().map(|(k, v)| (k, v)))
        .envs(process_env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(c) = &confinement {
        c.apply_tokio(&mut command);
    }
    if let Some(network) = &network {
        network.apply_tokio(&mut command);
    }
    let mut child = command.spawn().map_err(|e| match &confinement {
        Some(c) => c.spawn_error(t.command, &e),
        None => format!("cannot start `{}`: {e}", t.command),
    })?;
    // Its standard error, kept with the run: what says why it failed, when it does.
    let (stderr_tail, stderr_task) = match child.stderr.take() {
        Some(stream) => {
            let (tail, task) = crate::stderr::keep(stream, t.stderr.clone());
            (tail, Some(task))
        }
        None => (crate::stderr::Tail::default(), None),
    };
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the agent's stdio could not be opened".to_owned());
    };
    let dir = berth_confined::open(t.worktree)
        .map_err(|e| format!("cannot open the worktree {}: {e}", t.worktree.display()))?;
    let terminals = Terminals::new(t.worktree, t.env, sandbox)
        .map_err(|e| format!("cannot resolve the worktree {}: {e}", t.worktree.display()))?;
    let shared = Arc::new(Shared {
        dir,
        terminals,
        granted_execute: AtomicBool::new(false),
        agent: t.agent,
        tx: t.tx.clone(),
        ops: t.ops.clone(),
        session: t.session.clone(),
        policy: t.policy.clone(),
        root: t.worktree.to_path_buf(),
        answer: Mutex::new(String::new()),
        calls: Mutex::new(HashMap::new()),
        replaying: AtomicBool::new(false),
    });
    Ok(Started {
        child,
        stdin,
        stdout,
        shared,
        stderr_tail,
        stderr_task,
        confinement,
    })
}

/// Runs the agent's turns in one process: the task, then each prompt [`Between`] gives once
/// a turn ends; how the last ended. Every turn's end is said to `between`, a failure's too.
pub(crate) async fn turns(t: AcpTurn<'_>) -> TurnStop {
    let Started {
        mut child,
        stdin,
        stdout,
        shared,
        stderr_tail,
        stderr_task,
        confinement,
    } = match start_agent(&t).await {
        Ok(started) => started,
        Err(message) => {
            let stop = TurnStop::Failed { message };
            t.between.next(&stop, Usage::default()).await;
            return stop;
        }
    };
    let max_line = match t.ops.config(None).await {
        Ok(loaded) => loaded.config.run.max_line_bytes(),
        Err(_) => berth_ops::RunSettings::default().max_line_bytes(),
    };
    let wire::Wire {
        channel,
        probes,
        broken,
        tasks,
    } = wire::start(stdin, stdout, max_line);
    let result = converse(&t, channel, probes, shared.clone()).await;
    drop(tasks);
    // The turns are over: no terminal outlives the agent's process, whoever still holds the
    // handlers.
    shared.terminals.kill_all();
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
    let stop = match result {
        Ok(Outcome::Over(stop)) => return stop,
        Ok(outcome) => outcome.failure(t.command),
        Err(e) => {
            let why = match (broken.why(), exited) {
                // What berth refused to read is why, whether or not the agent then ended.
                (Some(why), _) => format!("the ACP agent `{}` failed: {why}", t.command),
                (None, Some(status)) => format!(
                    "the ACP agent `{}` ended in the middle of its turn ({status})",
                    t.command
                ),
                (None, None) => format!("the ACP agent `{}` failed: {e}", t.command),
            };
            let said = last_words(stderr_task, &stderr_tail, confinement.as_ref()).await;
            TurnStop::Failed {
                message: format!("{why}{said}"),
            }
        }
    };
    shared.flush_answer(berth_agent::INTERRUPTED).await;
    t.between.next(&stop, Usage::default()).await;
    stop
}

/// Ends one turn that the agent answered: its answer's end written (marked when cut short),
/// its tokens counted in the run's session as berth's own agent's are, and what `between`
/// sends next.
async fn turn_ended(
    shared: &Shared,
    between: &dyn Between,
    stop: TurnStop,
    usage: Usage,
) -> Result<String, TurnStop> {
    // Its terminals go on (a dev server it started serves on between turns): they end with
    // the agent's process, in `turns`.
    let suffix = match stop {
        TurnStop::EndTurn | TurnStop::MaxTokens | TurnStop::MaxToolIterations => "",
        _ => berth_agent::INTERRUPTED,
    };
    shared.flush_answer(suffix).await;
    let used = berth_ops::TokenUsage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
    };
    if !used.is_zero() {
        let _ = shared.ops.add_session_usage(&shared.session, used).await;
    }
    between.next(&stop, usage).await.ok_or(stop)
}

/// The conversation with the agent over `transport` (its stdio, bounded: `wire.rs`): each
/// message it sends to its handler (`handlers.rs`: the reader's probes first, then updates
/// and file writes taken whole, the rest by the SDK's typed handlers), and the turn itself
/// (`prompt`).
async fn converse(
    t: &AcpTurn<'_>,
    transport: agent_client_protocol::Channel,
    probes: wire::Probes,
    shared: Arc<Shared>,
) -> Result<Outcome, agent_client_protocol::Error> {
    let (owned, permissions, reads) = (shared.clone(), shared.clone(), shared.clone());
    let (creates, outputs, waits, kills, releases) = (
        shared.clone(),
        shared.clone(),
        shared.clone(),
        shared.clone(),
        shared.clone(),
    );
    let asking = t.asking.clone();
    let prompt = Prompt {
        task: t.prompt.to_owned(),
        worktree: t.worktree.to_path_buf(),
        resume: t.resume.clone(),
        cancel: t.cancel.clone(),
        between: t.between,
    };
    Client
        .v1()
        .name("berth")
        .with_handler(probes)
        .with_handler(handlers::Owned(owned))
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx: ConnectionTo<Agent>| {
                permissions
                    .on_permission(request, responder, asking.clone())
                    .await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, _cx: ConnectionTo<Agent>| {
                reads.on_read(request, responder).await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CreateTerminalRequest, responder, _cx: ConnectionTo<Agent>| {
                creates.on_create_terminal(request, responder).await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: TerminalOutputRequest, responder, _cx: ConnectionTo<Agent>| {
                outputs.on_terminal_output(request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WaitForTerminalExitRequest, responder, cx: ConnectionTo<Agent>| {
                waits.on_wait_for_exit(request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: KillTerminalRequest, responder, _cx: ConnectionTo<Agent>| {
                kills.on_kill_terminal(request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReleaseTerminalRequest, responder, _cx: ConnectionTo<Agent>| {
                releases.on_release_terminal(request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            prompt.send(cx, shared).await
        })
        .await
}

/// The turns asked of the agent: the task, where, the session it continues, its stop, and
/// what follows each turn.
struct Prompt<'a> {
    task: String,
    worktree: PathBuf,
    resume: Option<String>,
    /// The agent's own stop (a stop of the run, or of this agent).
    cancel: CancellationToken,
    between: &'a dyn Between,
}

impl Prompt<'_> {
    /// Initializes the agent, opens its session (new, or its own loaded to resume), then
    /// sends the task and each prompt that follows a turn's end.
    async fn send(
        mut self,
        cx: ConnectionTo<Agent>,
        shared: Arc<Shared>,
    ) -> Result<Outcome, agent_client_protocol::Error> {
        let capabilities = ClientCapabilities::new()
            .fs(FileSystemCapabilities::new()
                .read_text_file(true)
                .write_text_file(true))
            .terminal(true);
        let agent = cx
            .send_request(
                InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities),
            )
            .block_task()
            .await?;
        let session = match self.resume.take() {
            None => {
                cx.send_request(NewSessionRequest::new(self.worktree.clone()))
                    .block_task()
                    .await?
                    .session_id
            }
            Some(id) if agent.agent_capabilities.load_session => {
                shared.replaying.store(true, Ordering::Release);
                let loaded = cx
                    .send_request(LoadSessionRequest::new(id.clone(), self.worktree.clone()))
                    .block_task()
                    .await;
                shared.replaying.store(false, Ordering::Release);
                loaded?;
                SessionId::new(id)
            }
            // Not a protocol failure: the agent is fine, it just cannot do what a resume
            // needs, which the run says in its own words.
            Some(_) => return Ok(Outcome::CannotLoad),
        };
        let queues = prompting::queues_prompts(&agent.agent_capabilities);
        let _ = shared
            .tx
            .send(RunEvent::AgentSession {
                agent: shared.agent,
                id: session.0.to_string(),
            })
            .await;
        let mut task = std::mem::take(&mut self.task);
        loop {
            // Each prompt is recorded as it is sent, once the agent has a session: an agent
            // that cannot start, or cannot load what a resume needs, was told nothing.
            if let Err(e) = shared
                .ops
                .append_message(&shared.session, &Message::new(Role::User, task.clone()))
                .await
            {
                return Ok(Outcome::Unrecorded(e));
            }
            let turn = self.between.turn_cancel();
            let asked = prompting::Asked {
                cx: &cx,
                session: &session,
                shared: &shared,
                between: self.between,
                queues,
            };
            let (stop, usage) = match asked.turn(task, &turn).await? {
                Some(ended) => ended,
                None => {
                    // It did not answer its cancel: a deaf process is told nothing more.
                    let stop = match self.cancel.is_cancelled() {
                        true => TurnStop::Cancelled,
                        false => TurnStop::Failed {
                            message: format!(
                                "the ACP agent did not answer session/cancel within {} s",
                                CANCEL_GRACE.as_secs()
                            ),
                        },
                    };
                    shared.flush_answer(berth_agent::INTERRUPTED).await;
                    self.between.next(&stop, Usage::default()).await;
                    return Ok(Outcome::Over(stop));
                }
            };
            match turn_ended(&shared, self.between, stop, usage).await {
                Ok(next) => task = next,
                Err(stop) => return Ok(Outcome::Over(stop)),
            }
        }
    }
}

/// How the conversation with the agent ended, short of a protocol failure.
enum Outcome {
    /// Its turns are over, each said to [`Between`]: how the last ended.
    Over(TurnStop),
    /// A resume was asked of an agent that cannot load a session; nothing was sent to it.
    CannotLoad,
    /// A prompt could not be written to the transcript, so it was not sent.
    Unrecorded(berth_ops::Error),
}

impl Outcome {
    /// Why a conversation that ended short of its turns' end failed.
    fn failure(self, command: &str) -> TurnStop {
        let message = match self {
            Outcome::Over(stop) => return stop,
            Outcome::Unrecorded(e) => format!("cannot record the prompt in the session: {e}"),
            Outcome::CannotLoad => format!(
                "the ACP agent `{command}` cannot load a session (it does not offer \
                 session/load), so its work cannot be resumed"
            ),
        };
        TurnStop::Failed { message }
    }
}

/// A terminal request's failure as the agent gets it.
fn terminal_error(e: TerminalError) -> agent_client_protocol::Error {
    let (kind, message) = match e {
        TerminalError::Outside(m) => (ErrorKind::Refused, m),
        TerminalError::Unknown(m) => (ErrorKind::NotFound, m),
        TerminalError::Failed(m) => (ErrorKind::Io, m),
    };
    berth_agent::acp::error_of_kind(kind, message)
}

fn status_of(exit: Exit) -> TerminalExitStatus {
    TerminalExitStatus::new()
        .exit_code(exit.code)
        .signal(exit.signal)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the agent is told of a refused request is a refusal by berth-core's table, as MCP
    /// and berth-acp answer one, not the code of a malformed request.
    #[test]
    fn a_refusal_is_answered_with_the_tables_code() {
        let refused = Denied::Refused("leads outside the worktree".into()).error();
        assert_eq!(i32::from(refused.code), ErrorKind::Refused.json_rpc_code());
        assert_eq!(refused.data, Some(serde_json::json!({"kind": "refused"})));
        let missing = Denied::NotFound("no such file".into()).error();
        assert_eq!(i32::from(missing.code), ErrorKind::NotFound.json_rpc_code());
        let outside = terminal_error(TerminalError::Outside("cwd /etc".into()));
        assert_eq!(i32::from(outside.code), ErrorKind::Refused.json_rpc_code());
        assert_eq!(outside.message, "cwd /etc");
    }
}
