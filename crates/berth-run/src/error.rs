//! What stops a run from starting or going on: [`RunError`], the error of berth-run's
//! lifecycle, with the kind every front end maps to its exit status or wire code.

use std::path::PathBuf;

use berth_ops::ErrorKind;

use crate::kept::{BatchId, KeptError};
use crate::tasks::TasksError;

/// What stops a run from starting.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the task is empty: give the agents something to do")]
    EmptyTask,
    #[error("a run needs at least one agent")]
    NoAgents,
    #[error("a run in an existing workspace takes one agent, not {0}")]
    OneAgentPerWorkspace(usize),
    #[error(
        "a run makes a git worktree per agent, and {0} is in no git repository: start it in one, or name one with --repo"
    )]
    NoRepository(PathBuf),
    #[error("a run resumed names agent {0}, which the run does not have")]
    NoSuchAgent(usize),
    #[error(
        "the agent command {command:?} cannot start: {program:?} is not a program on PATH (or, with a '/', a file that can run); install it, or name another agent command"
    )]
    AgentCannotStart { command: String, program: String },
    #[error(
        "the agent command {command:?} cannot start confined: its program {} is in {}, which the sandbox hides from agent processes; install it elsewhere (on PATH outside that folder, or in the repository), or run unconfined with [sandbox] mode = \"off\"",
        .program.display(),
        .hidden_by.display()
    )]
    AgentHidden {
        command: String,
        program: PathBuf,
        hidden_by: PathBuf,
    },
    /// berth's own agent cannot call its model (no key for its provider).
    #[error(transparent)]
    Agent(berth_agent::AgentError),
    #[error(transparent)]
    Ops(#[from] berth_ops::Error),
    /// Its record could not be kept.
    #[error(transparent)]
    Kept(#[from] KeptError),
    /// A file of tasks gives no runs (`berth run --tasks`).
    #[error(transparent)]
    Tasks(#[from] TasksError),
    /// Run `run` (from 1) of a batch could not start; the runs before it go on.
    #[error(
        "batch {batch}: run {run} of {count} could not start: {error}{}",
        before_it(*run, batch)
    )]
    BatchCut {
        batch: BatchId,
        run: usize,
        count: usize,
        /// Not a `source`: its words are in this one's already.
        error: Box<RunError>,
    },
}

impl RunError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            RunError::EmptyTask
            | RunError::NoAgents
            | RunError::OneAgentPerWorkspace(_)
            | RunError::NoRepository(_)
            | RunError::NoSuchAgent(_) => ErrorKind::Invalid,
            RunError::AgentCannotStart { .. } | RunError::AgentHidden { .. } => {
                ErrorKind::NotConfigured
            }
            RunError::Agent(e) => e.kind(),
            RunError::Ops(e) => e.kind(),
            RunError::Kept(e) => e.kind(),
            RunError::Tasks(e) => e.kind(),
            RunError::BatchCut { error, .. } => error.kind(),
        }
    }
}

/// What a cut batch left going: the runs before the one that could not start.
fn before_it(run: usize, batch: &BatchId) -> String {
    match run {
        1 => String::new(),
        2 => format!("; the run before it goes on: `berth run list --batch {batch}`"),
        _ => format!(
            "; the {} runs before it go on: `berth run list --batch {batch}`",
            run - 1
        ),
    }
}

impl berth_ops::Kinded for RunError {
    fn kind(&self) -> berth_ops::ErrorKind {
        RunError::kind(self)
    }
}
