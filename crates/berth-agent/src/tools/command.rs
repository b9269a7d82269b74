//! The `run_command` tool: a shell command in the working directory, asked for each time.
//!
//! The command runs as `sh -c` in a session of its own (`setsid`), which makes it the leader of
//! its own process group and takes away any controlling terminal: a timeout, a cancelled turn,
//! or the end of the command kills the whole group, so nothing it started lives on; and a
//! program that would prompt on `/dev/tty` (git asking for a password) fails at once instead of
//! stopping in the background of the front end's terminal until the timeout.
//!
//! Its environment is berth's minus every API key and token, so a command (or a script the
//! model wrote) cannot read the keys berth calls its provider with.
//!
//! With `background: true` it is started the same way but returns at once (see
//! `background.rs`): the process lives on until its session ends.
//!
//! It runs confined (berth-sandbox, through `Ops::sandbox`): it writes only in the working
//! directory and a private `/tmp`, reads nothing on the deny list, has no network and cannot
//! signal what it did not start. What the sandbox refused is added to the output as a note
//! naming the rule.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use berth_ops::Workspace;
use berth_sandbox::{Confinement, Subject};

use super::files::{parse_args, printable};
use super::{
    CommandRequest, CommandResult, Commands, Ran, Tool, ToolContext, ToolKind, ToolOutcome,
};
use crate::conversation::ToolSpec;

/// How long a command may run when the model does not say.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// The longest a model may ask for.
pub const MAX_TIMEOUT_SECS: u64 = 1800;
/// The first bytes of output kept when there is too much.
const HEAD_BYTES: usize = 16 * 1024;
/// The last bytes of output kept when there is too much: errors and summaries come last.
const TAIL_BYTES: usize = 48 * 1024;
/// After the shell exits, how long output still in the pipes is drained.
const DRAIN: Duration = Duration::from_secs(2);

/// Variables never passed to a command, whatever their name's pattern: every provider's key
/// variables, and berth's own token.
fn secret_names() -> impl Iterator<Item = &'static str> {
    berth_ops::ProviderKind::ALL
        .into_iter()
        .flat_map(|kind| kind.key_variables().iter().copied())
        .chain(["BERTH_MCP_TOKEN"])
}

/// Whether an environment variable's name says it holds a secret: the keys berth knows, and
/// any name ending in `_API_KEY` or `_TOKEN` or containing `SECRET` (in any case).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    secret_names().any(|n| n == upper)
        || upper.ends_with("_API_KEY")
        || upper.ends_with("_TOKEN")
        || upper.contains("SECRET")
}

/// `run_command {command, timeout_secs?}`.
#[derive(Default)]
pub struct RunCommand {
    /// The environment to start from; `None`: the process's, read at each call.
    env: Option<Vec<(OsString, OsString)>>,
}

impl RunCommand {
    /// Commands get this process's environment (as it is at each call), minus secrets.
    pub fn new() -> RunCommand {
        RunCommand { env: None }
    }

    /// Commands get `vars` minus secrets, instead of the process's environment.
    pub fn with_env<K, V>(vars: impl IntoIterator<Item = (K, V)>) -> RunCommand
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        RunCommand {
            env: Some(
                vars.into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            ),
        }
    }

    /// The names of the variables a command would start with, secrets included.
    fn environment_names(&self) -> impl Iterator<Item = String> {
        let names: Vec<String> = match &self.env {
            Some(vars) => vars
                .iter()
                .filter_map(|(k, _)| k.to_str().map(str::to_owned))
                .collect(),
            None => std::env::vars_os()
                .filter_map(|(k, _)| k.into_string().ok())
                .collect(),
        };
        names.into_iter()
    }

    /// The environment a command starts with.
    fn environment(&self) -> Vec<(OsString, OsString)> {
        let vars: Vec<(OsString, OsString)> = match &self.env {
            Some(vars) => vars.clone(),
            None => std::env::vars_os().collect(),
        };
        vars.into_iter()
            // A name that is not UTF-8 cannot be checked, so it is not passed on either.
            .filter(|(k, _)| k.to_str().is_some_and(|k| !is_secret_name(k)))
            .collect()
    }
}

#[derive(Deserialize)]
struct CommandArgs {
    command: String,
    timeout_secs: Option<u64>,
    #[serde(default)]
    background: bool,
}

#[async_trait]
impl Tool for RunCommand {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "run_command".into(),
            description: format!(
                "Run a shell command (`sh -c`) in the working directory and return its output (stdout and stderr together). Use it to build, test, run git, and so on. The command has no input and no terminal: it must not wait for a person. It is stopped after `timeout_secs` (default {DEFAULT_TIMEOUT_SECS}, at most {MAX_TIMEOUT_SECS}), and anything it started in the background is stopped when it ends (to keep a server running, start it with `background: true` instead). A non-zero exit status is reported as an error with the output. It runs confined: it may write only in the working directory and a private /tmp, credentials (~/.ssh, ~/.aws, berth's own files, ...) are hidden, it has no network (unless berth's config opens it), and it cannot signal processes it did not start; a refusal is explained after the output. Long output is cut in the middle: the first {} KiB and the last {} KiB are kept. API keys and tokens are not in its environment.",
                HEAD_BYTES / 1024,
                TAIL_BYTES / 1024
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": "The command line, as typed in a POSIX shell, e.g. `cargo test -p mycrate 2>&1 | tail -50`."
                    },
                    "background": {
                        "type": "boolean",
                        "description": "Start it in the background and return at once with its id (a dev server, a watcher): it runs, confined the same way, until this session ends or stop_background names it; read its output with read_background. Default: false."
                    },
                    "timeout_secs": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_TIMEOUT_SECS,
                        "description": format!("Seconds before the command is killed. Default: {DEFAULT_TIMEOUT_SECS}.")
                    }
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    async fn describe(&self, arguments: &Value, cx: &ToolContext) -> String {
        match arguments.get("command").and_then(Value::as_str) {
            Some(command) => printable(&format!("run in {}:\n$ {command}", cx.cwd.display())),
            None => "run_command without a command (it will fail)".into(),
        }
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        self.run(arguments, cx).await.outcome
    }

    async fn run(&self, arguments: Value, cx: &ToolContext) -> Ran {
        let mut refused = None;
        let outcome = self.command(arguments, cx, &mut refused).await;
        Ran { outcome, refused }
    }
}

impl RunCommand {
    /// The call; `refused` gets the note of what the sandbox refused, if anything was.
    async fn command(
        &self,
        arguments: Value,
        cx: &ToolContext,
        refused: &mut Option<String>,
    ) -> ToolOutcome {
        let args: CommandArgs = parse_args("run_command", arguments)?;
        if args.command.trim().is_empty() {
            return Err("the command is empty".into());
        }
        if cx.cancel.is_cancelled() {
            return Err("cancelled before the command started".into());
        }
        let timeout = args
            .timeout_secs
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .clamp(1, MAX_TIMEOUT_SECS);
        let (ws, env) = workspace_and_env(cx).await?;
        let confinement = confinement(cx, ws.as_ref()).await?;
        if args.background {
            if args.timeout_secs.is_some() {
                return Err("a background command has no timeout: it runs until stop_background names it or the session ends; leave `timeout_secs` out".into());
            }
            let ws = ws.ok_or("a background command needs the session's workspace, which cannot be read (was it deleted?)")?;
            // Always berth's own process, never a front end's terminal: it must outlive the
            // call, and be listed and ended with the workspace.
            let command = self.shell_command(&args.command, env, confinement.as_ref(), cx);
            return super::background::start(
                command,
                &args.command,
                &ws.id,
                confinement.as_ref(),
                cx,
            )
            .await;
        }
        // A front end's terminal (an editor's) would run the command with the user's rights,
        // so it is used only where nothing is confined.
        if let Some(commands) = cx.commands.as_ref().filter(|_| confinement.is_none()) {
            return self
                .run_in_front_end(commands.as_ref(), args.command, timeout, env, cx)
                .await;
        }
        let mut command = self.shell_command(&args.command, env, confinement.as_ref(), cx);
        let mut child = command.spawn().map_err(|e| match &confinement {
            Some(c) => c.spawn_error("sh", &e),
            None => format!("could not start `sh` in {}: {e}", cx.cwd.display()),
        })?;
        // A turn that is cancelled may drop this future mid-run (the loop races the call
        // against its cancellation): the guard kills the group then too.
        let mut group = Group(child.id());
        let (status, output) = wait_capturing(&mut child, &mut group, cx, timeout).await?;
        let mut text = output.text();
        // What the sandbox refused, said so the model knows which rule it met.
        if let Some(note) = confinement
            .as_ref()
            .and_then(|c| berth_sandbox::explain(&text, c))
        {
            text.push_str(if text.ends_with('\n') { "" } else { "\n" });
            text.push_str(&note);
            *refused = Some(note);
        }
        shell_outcome(status, text)
    }

    /// Runs `command` in a front end's terminal, with every secret name it would start with
    /// hidden from it.
    async fn run_in_front_end(
        &self,
        commands: &dyn Commands,
        command: String,
        timeout: u64,
        env: Vec<(String, String)>,
        cx: &ToolContext,
    ) -> ToolOutcome {
        let hidden_env = secret_names()
            .map(str::to_owned)
            .chain(self.environment_names().filter(|n| is_secret_name(n)))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let request = CommandRequest {
            command,
            cwd: cx.cwd.clone(),
            timeout: Duration::from_secs(timeout),
            call_id: cx.call_id.clone(),
            hidden_env,
            env,
        };
        let result = commands.run(request, cx.cancel.clone()).await?;
        outcome(&result)
    }

    /// `sh -c line` in the working directory, in a session of its own, its output piped, and
    /// confined where `confinement` says.
    fn shell_command(
        &self,
        line: &str,
        env: Vec<(String, String)>,
        confinement: Option<&Confinement>,
        cx: &ToolContext,
    ) -> Command {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(line)
            .current_dir(&cx.cwd)
            .env_clear()
            // Confined, only what the sandbox's allow list passes (a `PGPASSWORD` has no
            // name a deny list would know).
            .envs(
                self.environment()
                    .into_iter()
                    .filter(|(name, _)| confinement.is_none_or(|c| c.passes_env(name))),
            )
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // The group guard made after the spawn kills everything; this covers the shell
            // should the guard never be made.
            .kill_on_drop(true);
        // SAFETY: the closure runs in the child between fork and exec, and calls only setsid,
        // which is async-signal-safe; it touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        if let Some(c) = confinement {
            c.apply_tokio(&mut command);
        }
        command
    }
}

/// The session's workspace (`None` when it cannot be read), and the variables it sets for a
/// command.
async fn workspace_and_env(
    cx: &ToolContext,
) -> Result<(Option<Workspace>, Vec<(String, String)>), String> {
    // The workspace's ports, so a dev server started here takes its own, given now if
    // this is the first of its processes (no block free fails the command, saying which
    // `[ports]` keys to change); a workspace that cannot be read (deleted meanwhile) gives
    // none rather than failing the command.
    let ws = match cx
        .ops
        .resolve_workspace(cx.session.workspace_id.as_str())
        .await
    {
        Ok(ws) => Some(cx.ops.with_ports(ws).await.map_err(|e| e.to_string())?),
        Err(_) => None,
    };
    let env = ws
        .as_ref()
        .map(|ws| cx.ops.workspace_env(ws))
        .unwrap_or_default();
    Ok((ws, env))
}

/// The command's confinement; `None` where it runs unconfined.
async fn confinement(
    cx: &ToolContext,
    ws: Option<&Workspace>,
) -> Result<Option<Confinement>, String> {
    // Confined unless `[sandbox] mode = "off"`; a sandbox that cannot be made refuses the
    // command rather than running it with all of the user's rights.
    match cx.unconfined {
        true => Ok(None),
        false => cx
            .ops
            .sandbox(ws, &cx.cwd)
            .await
            .map_err(|e| e.to_string())?
            .confine(None, &Subject::Command)
            .map_err(|e| e.to_string()),
    }
}

/// Waits for the shell to end while keeping its output, until the pipes close (or a short
/// drain after the shell exits); kills the group on a timeout or a cancelled turn.
async fn wait_capturing(
    child: &mut Child,
    group: &mut Group,
    cx: &ToolContext,
    timeout: u64,
) -> Result<(Option<ExitStatus>, Capped), String> {
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err("could not capture the command's output".into());
    };

    let mut output = Capped::default();
    let (mut out_buf, mut err_buf) = (vec![0u8; 8192], vec![0u8; 8192]);
    let (mut out_open, mut err_open) = (true, true);
    let mut status: Option<ExitStatus> = None;
    let mut deadline = Instant::now() + Duration::from_secs(timeout);
    loop {
        if status.is_some() && !out_open && !err_open {
            break;
        }
        tokio::select! {
            _ = cx.cancel.cancelled() => {
                group.kill();
                let _ = child.wait().await;
                return Err(format!(
                    "cancelled; the command and everything it started were stopped. Output so far:\n{}",
                    output.text()
                ));
            }
            _ = tokio::time::sleep_until(deadline) => {
                if status.is_some() {
                    // The shell is done; something it left holds the pipes open.
                    break;
                }
                group.kill();
                let _ = child.wait().await;
                return Err(format!(
                    "timed out after {timeout} s; the command and everything it started were killed. Output so far:\n{}",
                    output.text()
                ));
            }
            read = stdout.read(&mut out_buf), if out_open => match read {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => output.push(&out_buf[..n]),
            },
            read = stderr.read(&mut err_buf), if err_open => match read {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => output.push(&err_buf[..n]),
            },
            exited = child.wait(), if status.is_none() => {
                let exited = exited.map_err(|e| format!("could not wait for the command: {e}"))?;
                status = Some(exited);
                // What it left running in the background goes with it, so the pipes
                // close and nothing outlives the call.
                group.kill();
                deadline = deadline.min(Instant::now() + DRAIN);
            }
        }
    }
    Ok((status, output))
}

/// The shell's result as the model sees it: the output on success, the exit status (or
/// signal) and the output as an error otherwise.
fn shell_outcome(status: Option<ExitStatus>, text: String) -> ToolOutcome {
    let status = status.ok_or("the command's status was lost")?;
    if status.success() {
        return Ok(if text.is_empty() {
            "(no output)".into()
        } else {
            text
        });
    }
    let how = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    };
    Err(if text.is_empty() {
        format!("{how} (no output)")
    } else {
        format!("{how}\n{text}")
    })
}

/// A front end's command result as the model sees it: the output on success, the exit status
/// (or signal) and the output as an error otherwise.
fn outcome(result: &CommandResult) -> ToolOutcome {
    let mut text = result.output.clone();
    if result.truncated {
        text.insert_str(0, "[the output was cut; only its end is shown]\n");
    }
    let how = match (result.exit_code, &result.signal) {
        (Some(0), None) => {
            return Ok(if text.is_empty() {
                "(no output)".into()
            } else {
                text
            });
        }
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "ended without an exit status".to_owned(),
    };
    Err(if text.is_empty() {
        format!("{how} (no output)")
    } else {
        format!("{how}\n{text}")
    })
}

/// The process group led by the command's shell, killed once: when the command ends, times
/// out or is cancelled, or when the call is dropped before any of that.
struct Group(Option<u32>);

impl Group {
    fn kill(&mut self) {
        if let Some(id) = self.0.take()
            && let Ok(pgid) = libc::pid_t::try_from(id)
            && pgid > 1
        {
            // SAFETY: killpg only sends a signal. The group id is the shell's pid, which setsid
            // made a group leader, so no other process group is hit. (After the shell is
            // reaped, its pid stays reserved while anything it left is alive in its group;
            // when nothing is, the signal finds no group.)
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Output kept within bounds: the head and the tail, with how much was cut between them.
#[derive(Default)]
struct Capped {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    cut: u64,
}

impl Capped {
    fn push(&mut self, mut bytes: &[u8]) {
        let room = HEAD_BYTES.saturating_sub(self.head.len());
        let now = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..now]);
        bytes = &bytes[now..];
        self.tail.extend(bytes);
        let over = self.tail.len().saturating_sub(TAIL_BYTES);
        if over > 0 {
            self.tail.drain(..over);
            self.cut += over as u64;
        }
    }

    fn text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.cut > 0 {
            text.push_str(&format!("\n[… {} bytes of output cut …]\n", self.cut));
        }
        let (a, b) = self.tail.as_slices();
        let mut tail = Vec::with_capacity(a.len() + b.len());
        tail.extend_from_slice(a);
        tail.extend_from_slice(b);
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for secret in [
            "ANTHROPIC_API_KEY",
            "GOOGLE_API_KEY",
            "BERTH_MCP_TOKEN",
            "GITHUB_TOKEN",
            "my_api_key",
            "AWS_SECRET_ACCESS_KEY",
            "client_secret",
        ] {
            assert!(is_secret_name(secret), "{secret}");
        }
        for plain in ["PATH", "HOME", "TOKENIZERS_PARALLELISM", "KEYBOARD"] {
            assert!(!is_secret_name(plain), "{plain}");
        }
    }

    #[test]
    fn output_keeps_head_and_tail() {
        let mut c = Capped::default();
        c.push(&vec![b'a'; HEAD_BYTES]);
        c.push(&vec![b'b'; TAIL_BYTES + 10]);
        c.push(b"end");
        let text = c.text();
        assert!(text.starts_with('a'));
        assert!(text.ends_with("bend"));
        assert!(
            text.contains("[… 13 bytes of output cut …]"),
            "{}",
            &text[HEAD_BYTES..HEAD_BYTES + 60]
        );
    }
}
