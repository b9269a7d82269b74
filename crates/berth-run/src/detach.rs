//! A kept run handed to a supervisor process of its own (`berth run supervise`): what
//! `berth run --detach`, `run resume --detach`, and the terminal dashboard's start, resume
//! and tell do. The process outlives whoever started it; this returns once it has taken the
//! run, so a caller never reports a run started that then silently was not.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use berth_ops::{ErrorKind, Ops};

use crate::agents::AgentNumber;
use crate::error::RunError;
use crate::kept::KeptError;
use crate::kept::RunId;
use crate::kept::RunState;
use crate::kept::RunStore;

/// How long a supervisor may take to take its run.
pub(crate) const SUPERVISOR_START: Duration = Duration::from_secs(15);

/// What the supervisor does with the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Detach {
    /// Starts it: a run just recorded.
    Start,
    /// Continues its unfinished agents (`berth run resume`).
    Resume,
    /// Tells agent `agent` (0-based) of a run that is over `text` (`berth run tell`).
    Tell { agent: usize, text: String },
}

/// Starts `program` (the berth binary) as `berth --home HOME run supervise ID` in its own
/// process group, so a terminal's Ctrl-C or hangup does not reach it, with its output in
/// the run's log; waits until it has taken the run. The supervisor's process id. A resume
/// with nothing to resume, or of a run still running, is refused before anything starts.
pub(crate) async fn detach(
    ops: &Ops,
    store: &RunStore,
    id: &RunId,
    what: Detach,
    program: &Path,
) -> Result<u32, RunError> {
    if what == Detach::Resume {
        store.resumable(id).await?;
    }
    let log_path = store.log_path(id);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| KeptError::Io { path, source }
    };
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let log = std::fs::File::create(&log_path).map_err(io(&log_path))?;
    let log_too = log.try_clone().map_err(io(&log_path))?;
    let mut command = Command::new(program);
    command.stdout(log_too).stderr(log).process_group(0);
    let told = what_to_do(&mut command, ops.home(), id, &what);
    let cannot = |e: std::io::Error| {
        RunError::Ops(berth_ops::Error::rule(
            ErrorKind::Io,
            format!(
                "cannot start the run's supervisor {}: {e}",
                program.display()
            ),
        ))
    };
    let spawned = chrono::Utc::now();
    let mut child = command.spawn().map_err(cannot)?;
    if let (Some(text), Some(mut stdin)) = (told, child.stdin.take()) {
        // A text longer than the pipe holds waits for the supervisor to read it: off the
        // async threads.
        tokio::task::spawn_blocking(move || stdin.write_all(text.as_bytes()))
            .await
            .map_err(|e| cannot(std::io::Error::other(e)))?
            .map_err(cannot)?;
    }
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(cannot)? {
            return Err(RunError::Ops(berth_ops::Error::rule(
                ErrorKind::External,
                format!(
                    "the run's supervisor ended at once ({status}): {}",
                    crate::stderr::last_words(&log_path)
                ),
            )));
        }
        let record = store.load(id).await?;
        match (record.state, record.supervisor) {
            (RunState::Running, Some(pid)) if pid == child.id() => return Ok(pid),
            // Over already: a quick one, or one that could not start. Its record says how.
            // A told run was over before; it is over again once it ended after the spawn.
            (RunState::Ended | RunState::Failed, _)
                if !matches!(what, Detach::Tell { .. })
                    || record.ended_at.is_some_and(|t| t > spawned) =>
            {
                return Ok(child.id());
            }
            _ if started.elapsed() > SUPERVISOR_START => {
                return Err(RunError::Ops(berth_ops::Error::rule(
                    ErrorKind::External,
                    format!(
                        "the run's supervisor did not start within {} s; see {}",
                        SUPERVISOR_START.as_secs(),
                        log_path.display()
                    ),
                )));
            }
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Gives the supervisor's command its arguments ([`SuperviseArgs::command_line`], which the
/// CLI's test parses back): start the run, resume it, or tell an agent; and the text to write
/// to its standard input, for a tell. What an agent is told goes there: never on a command
/// line, where any process of the machine could read it.
fn what_to_do(command: &mut Command, home: &Path, id: &RunId, what: &Detach) -> Option<String> {
    let (what, told) = match what {
        Detach::Start => (Supervise::Start, None),
        Detach::Resume => (Supervise::Resume, None),
        Detach::Tell { agent, text } => (
            Supervise::Tell {
                agent: AgentNumber::of_index(*agent),
            },
            Some(text.clone()),
        ),
    };
    let args = SuperviseArgs {
        home: home.to_owned(),
        run: id.clone(),
        what,
    };
    command.args(args.command_line()).stdin(match told {
        Some(_) => Stdio::piped(),
        None => Stdio::null(),
    });
    told
}

/// The command line of a detached supervisor, after the program's name: `--home HOME run
/// supervise ID [--resume | --tell N]`. [`crate::Runs`] writes it (through `detach`); the
/// CLI parses it back into this type, and its test holds the two to each other. A told text
/// goes on the supervisor's standard input, never here, where any process of the machine
/// could read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuperviseArgs {
    pub home: PathBuf,
    pub run: RunId,
    pub what: Supervise,
}

/// What a detached supervisor does with its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Supervise {
    /// Starts it: a run just recorded.
    Start,
    /// Continues its unfinished agents.
    Resume,
    /// Tells this agent what standard input holds.
    Tell { agent: AgentNumber },
}

impl SuperviseArgs {
    /// The arguments after the program's name.
    pub fn command_line(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--home".into(),
            self.home.clone().into(),
            "run".into(),
            "supervise".into(),
            self.run.as_str().into(),
        ];
        match self.what {
            Supervise::Start => {}
            Supervise::Resume => args.push("--resume".into()),
            Supervise::Tell { agent } => {
                args.push("--tell".into());
                args.push(agent.get().to_string().into());
            }
        }
        args
    }
}

/// Starts the told turn of agent `which` (the only one when `None`) of run `id`, which is
/// over, in a supervisor process of its own rather than the caller's: the agent's index and
/// the supervisor's process id. A run that is running is told by [`crate::Runs::tell`]
/// through its queue, never here; one that started again meanwhile is refused by the
/// supervisor's claim, which `detach` reports.
pub(crate) async fn tell_detached(
    ops: &Ops,
    store: &RunStore,
    id: &RunId,
    which: Option<usize>,
    text: &str,
    program: &Path,
) -> Result<(usize, u32), RunError> {
    // Refused here, before a process is started, when the agent cannot be told.
    let again = store.tellable(id, which, text).await?;
    let Some(&agent) = again.keys().next() else {
        return Err(KeptError::NothingToResume(id.clone()).into());
    };
    let what = Detach::Tell {
        agent,
        text: text.to_owned(),
    };
    let supervisor = detach(ops, store, id, what, program).await?;
    Ok((agent, supervisor))
}
