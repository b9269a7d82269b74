//! Background processes of a session: `run_command` with `background: true` starts its
//! command as it starts any other (the same confinement through `Ops::sandbox`, the same
//! environment, the workspace's ports) but returns at once with an id; `read_background`
//! reads its output and `stop_background` ends it.
//!
//! A background command is a confined tree of its own (its own keeper and PID namespace), so
//! it outlives the call that started it, and killing its keeper's process group takes the
//! whole tree down. It lives until its session ends ([`end_session`]: a run's end, `berth
//! chat` leaving, ACP's `session/close` or the connection's end), the workspace is removed
//! (berth-ops ends every process of its registry), or `stop_background` names it; and never
//! longer than this berth process, since its keeper watches berth's lifeline.
//!
//! The processes of a session are kept in this process (one set for every agent in it, keyed
//! by session id: the trees are this process's children whichever agent started them), and
//! in the workspace's registry on disk (berth-ops `background.rs`) for `berth workspace ps`.
//! Their output (standard output and error together) goes through a pipe to a file beside
//! the registry, never in the work folder, kept to its last [`KEPT_BYTES`].

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use berth_ops::background::{is_running, kill_tree, process_start_ticks};
use berth_ops::{BackgroundId, BackgroundProcess, WorkspaceId};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::files::parse_args;
use super::{Tool, ToolContext, ToolKind, ToolOutcome};
use crate::conversation::ToolSpec;

/// The output kept of a background process: its last this many bytes.
pub const KEPT_BYTES: u64 = 1024 * 1024;
/// The most `read_background` returns at once.
pub const MAX_READ_BYTES: u64 = 64 * 1024;
/// How long a start waits to see a command that fails at once (a typo, a missing program).
const FIRST_LOOK: Duration = Duration::from_millis(300);
/// The most background processes one session runs at once: each holds a confined tree, a
/// thread and up to twice [`KEPT_BYTES`] of disk.
pub const MAX_PER_SESSION: usize = 16;
/// How long a stop waits for the tree to be gone.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// One background process as this berth process knows it.
struct Running {
    id: BackgroundId,
    workspace: WorkspaceId,
    pid: u32,
    start_ticks: u64,
    command: String,
    output: PathBuf,
    /// How many bytes of the output were cut from the front of the file so far; held while
    /// the file is cut, and while it is read.
    cut: Mutex<u64>,
    /// How the process ended: `None` while it runs.
    ended: watch::Receiver<Option<String>>,
}

/// The background processes of each session this process runs, by session id.
fn sessions() -> &'static Mutex<HashMap<String, Vec<Arc<Running>>>> {
    static SESSIONS: std::sync::OnceLock<Mutex<HashMap<String, Vec<Arc<Running>>>>> =
        std::sync::OnceLock::new();
    SESSIONS.get_or_init(Mutex::default)
}

fn of_session(session: &str) -> Vec<Arc<Running>> {
    let all = sessions().lock().unwrap_or_else(|e| e.into_inner());
    all.get(session).cloned().unwrap_or_default()
}

/// Sends every background process `session` started its kill, without waiting: for a front
/// end that cannot wait where the session ends (a connection's dispatch loop, a `Drop`). Each
/// leaves the workspace's registry as it is reaped.
pub fn kill_session(session: &str) {
    let taken = {
        let mut all = sessions().lock().unwrap_or_else(|e| e.into_inner());
        all.remove(session).unwrap_or_default()
    };
    for running in &taken {
        kill_tree(running.pid, running.start_ticks);
    }
}

/// Ends every background process `session` started, and waits (a few seconds at most) until
/// each is gone. A front end calls it when a session ends; what is left of a process killed
/// some other way is ended by berth's lifeline with this process.
pub async fn end_session(session: &str) {
    let taken = {
        let mut all = sessions().lock().unwrap_or_else(|e| e.into_inner());
        all.remove(session).unwrap_or_default()
    };
    for running in &taken {
        stop(running).await;
    }
}

/// Ends every background process of every session of this process: for a front end that
/// ends as a whole (a connection that closes, `berth chat` leaving).
pub async fn end_all() {
    let ids: Vec<String> = {
        let all = sessions().lock().unwrap_or_else(|e| e.into_inner());
        all.keys().cloned().collect()
    };
    for id in ids {
        end_session(&id).await;
    }
}

/// Kills the tree and waits for it to be reaped; how it ended.
async fn stop(running: &Running) -> String {
    kill_tree(running.pid, running.start_ticks);
    let mut ended = running.ended.clone();
    let waited = tokio::time::timeout(STOP_WAIT, ended.wait_for(Option::is_some)).await;
    match waited {
        Ok(Ok(status)) => status.clone().unwrap_or_default(),
        _ => format!(
            "was sent SIGKILL but still runs after {} s",
            STOP_WAIT.as_secs()
        ),
    }
}

/// Starts `command` (made by `run_command`: `sh -c`, confined, its environment) in the
/// background for the session of `cx`; the tool's answer.
pub(super) async fn start(
    mut command: tokio::process::Command,
    line: &str,
    workspace: &WorkspaceId,
    confined: Option<&berth_sandbox::Confinement>,
    cx: &ToolContext,
) -> ToolOutcome {
    let ops = &cx.ops;
    let mine = of_session(cx.session.id.as_str());
    let live = mine.iter().filter(|r| r.ended.borrow().is_none()).count();
    if live >= MAX_PER_SESSION {
        return Err(format!(
            "this session runs {live} background processes already, the most it may; stop one with stop_background first"
        ));
    }
    let (id, output) = ops
        .reserve_background(workspace)
        .await
        .map_err(|e| e.to_string())?;
    let file = create_log(&output)?;
    let (reader, writer) =
        std::io::pipe().map_err(|e| format!("could not make the output's pipe: {e}"))?;
    let second = writer
        .try_clone()
        .map_err(|e| format!("could not make the output's pipe: {e}"))?;
    command
        .stdout(writer)
        .stderr(second)
        // It outlives this call: what ends it is its session, a stop, or berth's end.
        .kill_on_drop(false);
    let spawned = command.spawn();
    // The pipe's write ends go with the command, so its end is the output's end.
    drop(command);
    let mut child = spawned.map_err(|e| match confined {
        Some(c) => c.spawn_error("sh", &e),
        None => format!("could not start `sh` in {}: {e}", cx.cwd.display()),
    })?;
    let pid = child
        .id()
        .ok_or("the command ended before its pid was read")?;
    let start_ticks = process_start_ticks(pid)
        .map(|(ticks, _)| ticks)
        .ok_or("the command's process could not be read in /proc")?;
    let (ended_tx, ended) = watch::channel(None);
    let running = Arc::new(Running {
        id: id.clone(),
        workspace: workspace.clone(),
        pid,
        start_ticks,
        command: line.to_owned(),
        output: output.clone(),
        cut: Mutex::new(0),
        ended,
    });
    pump(reader, file, running.clone());
    let record = BackgroundProcess {
        id: id.clone(),
        pid,
        start_ticks,
        command: line.to_owned(),
        started: Utc::now(),
        session: cx.session.id.as_str().to_owned(),
        output: output.clone(),
        owner_pid: std::process::id(),
    };
    sessions()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(cx.session.id.as_str().to_owned())
        .or_default()
        .push(running.clone());
    let registered = ops.add_background(workspace, record).await;
    let waiter_ops = ops.clone();
    let waiter = running.clone();
    tokio::spawn(async move {
        let status = match child.wait().await {
            Ok(status) => describe_status(status),
            Err(e) => format!("could not be waited for: {e}"),
        };
        // Out of the registry before anyone waiting for its end hears of it.
        if let Err(e) = waiter_ops
            .remove_background(&waiter.workspace, &waiter.id)
            .await
        {
            tracing::warn!("background process {} ended: {e}", waiter.id);
        }
        let _ = ended_tx.send(Some(status));
    });
    if let Err(e) = registered {
        // Not listed, it could not be ended by another berth: it is not left running.
        stop(&running).await;
        return Err(format!("could not record the background process: {e}"));
    }
    first_look(&running).await
}

/// The start's answer: the id, or the command's failure when it ended at once.
async fn first_look(running: &Running) -> ToolOutcome {
    let mut ended = running.ended.clone();
    let status = tokio::time::timeout(FIRST_LOOK, ended.wait_for(Option::is_some))
        .await
        .ok()
        .and_then(|s| s.ok().and_then(|s| s.clone()));
    let (id, pid) = (&running.id, running.pid);
    match status {
        None => Ok(format!(
            "started {id} (pid {pid}) in the background: `{}`. It runs until this session ends or stop_background names it; read its output with read_background {{\"id\": \"{id}\"}}.",
            running.command
        )),
        Some(status) => {
            // Give the pump a moment to write what the command said.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let (text, _) = read_window(running, None, Some(MAX_READ_BYTES))?;
            let said = if text.is_empty() {
                "(no output)"
            } else {
                &text
            };
            if status == "exited with status 0" {
                Ok(format!("{id} (pid {pid}) {status} already:\n{said}"))
            } else {
                Err(format!("{id} (pid {pid}) {status} at once:\n{said}"))
            }
        }
    }
}

fn describe_status(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// The output file, made empty and the owner's alone.
fn create_log(path: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("could not make {}: {e}", path.display()))
}

/// Copies the pipe into the file on a thread of its own until every writer is gone (the
/// tree ended), keeping the file within twice [`KEPT_BYTES`]: past that its last
/// [`KEPT_BYTES`] become the file, and what was cut is counted.
fn pump(mut reader: std::io::PipeReader, mut file: std::fs::File, running: Arc<Running>) {
    let name = running.id.to_string();
    let spawned = std::thread::Builder::new()
        .name(format!("berth-{name}"))
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            let mut len = 0u64;
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => return,
                };
                if file.write_all(&buf[..n]).is_err() {
                    // A file that cannot be written drops the output, never the process.
                    continue;
                }
                len += n as u64;
                if len > 2 * KEPT_BYTES {
                    match keep_last(&running, &file, len) {
                        Ok(kept) => {
                            file = kept;
                            len = KEPT_BYTES;
                        }
                        Err(e) => tracing::warn!("{}'s output: {e}", running.id),
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("no thread for {name}'s output: {e}");
    }
}

/// Replaces the output file with its last [`KEPT_BYTES`] (a new file renamed over it, so a
/// reader never sees half of it); the new file, open at its end.
fn keep_last(running: &Running, file: &std::fs::File, len: u64) -> std::io::Result<std::fs::File> {
    let mut cut = running.cut.lock().unwrap_or_else(|e| e.into_inner());
    use std::os::unix::fs::FileExt;
    let mut tail = vec![0u8; KEPT_BYTES as usize];
    // At an offset, leaving the file's own where it is: should this fail, the pump goes on
    // appending to it.
    file.read_exact_at(&mut tail, len - KEPT_BYTES)?;
    let temp = running.output.with_extension("log.new");
    let mut kept = create_log(&temp).map_err(std::io::Error::other)?;
    kept.write_all(&tail)?;
    std::fs::rename(&temp, &running.output)?;
    *cut += len - KEPT_BYTES;
    Ok(kept)
}

/// The output from `offset` (a byte of the whole output), or its last `tail` bytes, at most
/// [`MAX_READ_BYTES`]; the text and a line saying which bytes it is.
fn read_window(
    running: &Running,
    offset: Option<u64>,
    tail: Option<u64>,
) -> Result<(String, String), String> {
    let cut = running.cut.lock().unwrap_or_else(|e| e.into_inner());
    let mut file = std::fs::File::open(&running.output)
        .map_err(|e| format!("could not read {}: {e}", running.output.display()))?;
    let len = file
        .metadata()
        .map_err(|e| format!("could not read {}: {e}", running.output.display()))?
        .len();
    let total = *cut + len;
    let start = match (offset, tail) {
        (Some(offset), _) => offset.min(total),
        (None, tail) => total.saturating_sub(tail.unwrap_or(MAX_READ_BYTES).min(MAX_READ_BYTES)),
    };
    let from = start.max(*cut);
    let end = (from + MAX_READ_BYTES).min(total);
    let mut bytes = vec![0u8; (end - from) as usize];
    file.seek(SeekFrom::Start(from - *cut))
        .and_then(|_| file.read_exact(&mut bytes))
        .map_err(|e| format!("could not read {}: {e}", running.output.display()))?;
    let mut note = format!("[bytes {from}..{end} of {total}; next offset {end}]");
    if start < *cut {
        note.push_str(&format!(
            " [the first {} bytes were cut: only the last {} KiB are kept]",
            *cut,
            KEPT_BYTES / 1024
        ));
    }
    Ok((String::from_utf8_lossy(&bytes).into_owned(), note))
}

/// The session's process `id` names, or an error naming those it has.
fn find(cx: &ToolContext, id: &str) -> Result<Arc<Running>, String> {
    let id: BackgroundId = id.parse().map_err(|e: berth_ops::Error| e.to_string())?;
    let mine = of_session(cx.session.id.as_str());
    if let Some(found) = mine.iter().find(|r| r.id == id) {
        return Ok(found.clone());
    }
    let known: Vec<String> = mine.iter().map(|r| r.id.to_string()).collect();
    Err(match known.is_empty() {
        true => format!("this session started no background process {id}; it has none"),
        false => format!(
            "this session started no background process {id}; its processes are {}",
            known.join(", ")
        ),
    })
}

fn state(running: &Running) -> String {
    match running.ended.borrow().clone() {
        Some(status) => format!("{} (pid {}) {status}", running.id, running.pid),
        None if is_running(running.pid, running.start_ticks) => {
            format!("{} (pid {}) is running", running.id, running.pid)
        }
        None => format!("{} (pid {}) has ended", running.id, running.pid),
    }
}

#[derive(Deserialize)]
struct ReadArgs {
    id: String,
    offset: Option<u64>,
    tail: Option<u64>,
}

/// `read_background {id, offset?, tail?}`.
pub struct ReadBackground;

#[async_trait]
impl Tool for ReadBackground {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_background".into(),
            description: format!(
                "Read the output (stdout and stderr together) of a process this session started with run_command's `background: true`, and whether it still runs. Without `offset`, its last bytes; with `offset`, from that byte on (the answer ends with the next offset to read from). At most {} KiB at once; only the last {} KiB of its output are kept.",
                MAX_READ_BYTES / 1024,
                KEPT_BYTES / 1024
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The process's id, as run_command gave it (bg-1)."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Read from this byte of its output on."},
                    "tail": {"type": "integer", "minimum": 1, "description": "Read its last this many bytes."}
                },
                "required": ["id"],
                "additionalProperties": false
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let args: ReadArgs = parse_args("read_background", arguments)?;
        if args.offset.is_some() && args.tail.is_some() {
            return Err("give `offset` or `tail`, not both".into());
        }
        let running = find(cx, &args.id)?;
        let (text, note) = read_window(&running, args.offset, args.tail)?;
        Ok(format!("{}\n{note}\n{text}", state(&running)))
    }
}

#[derive(Deserialize)]
struct StopArgs {
    id: String,
}

/// `stop_background {id}`.
pub struct StopBackground;

#[async_trait]
impl Tool for StopBackground {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "stop_background".into(),
            description: "Stop a process this session started with run_command's `background: true`, and everything it started (they are killed). Its output can still be read with read_background.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The process's id, as run_command gave it (bg-1)."}
                },
                "required": ["id"],
                "additionalProperties": false
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    async fn describe(&self, arguments: &Value, cx: &ToolContext) -> String {
        let id = arguments.get("id").and_then(Value::as_str).unwrap_or("?");
        match find(cx, id) {
            Ok(running) => format!("stop {id}: $ {}", running.command),
            Err(_) => format!("stop {id}"),
        }
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let args: StopArgs = parse_args("stop_background", arguments)?;
        let running = find(cx, &args.id)?;
        if let Some(status) = running.ended.borrow().clone() {
            return Err(format!("{} had ended already: it {status}", running.id));
        }
        let status = stop(&running).await;
        if running.ended.borrow().is_none() {
            return Err(format!("{} {status}", running.id));
        }
        Ok(format!("stopped {}: it {status}", running.id))
    }
}
