//! The error of every operation, and its [`ErrorKind`].
//!
//! Front ends map the kind once (the CLI to an exit code, MCP to a JSON-RPC code or a tool
//! result, ACP to its errors) and show the message as it is: each message says what is wrong
//! and, where it can, what to do next.

use berth_core::Kinded;
use std::path::PathBuf;

pub use berth_core::ErrorKind;
use berth_git::{GitError, SetupError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] berth_core::Error),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(transparent)]
    Sandbox(#[from] berth_sandbox::SandboxError),
    /// A rule of an operation refused the request; the message says which and what to do.
    #[error("{message}")]
    Rule { kind: ErrorKind, message: String },
    /// Creation failed after the record was written; everything was undone.
    #[error("{0}\n(the new workspace was rolled back: no folder, branch or record was kept)")]
    RolledBack(Box<Error>),
    /// Creation failed and so did undoing it; the message says what is left.
    #[error("{error}\nrolling back also failed, so something was left behind: {cleanup}")]
    RollbackFailed { error: Box<Error>, cleanup: String },
    /// Removing a worktree would lose work, or it cannot be checked for lost work; forcing
    /// the removal overrides this. `Display` says so in no front end's words; each front end
    /// names its own override with [`Error::message_with_force`].
    #[error("{}", self.message_with_force(FORCE))]
    LostWork(GitError),
    #[error("{}", self.message_with_force(FORCE))]
    RepositoryGone { repo: PathBuf, worktree: PathBuf },
    #[error("{what} is not valid UTF-8: {}", .path.display())]
    NonUtf8Path { what: &'static str, path: PathBuf },
    /// A background task died (it panicked or the runtime is shutting down).
    #[error("an internal task failed: {0}")]
    Task(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl berth_core::Kinded for Error {
    fn kind(&self) -> ErrorKind {
        Error::kind(self)
    }
}

/// The override of a refusal to lose work as `Display` names it, in no front end's words.
const FORCE: &str = "the force option";

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(e) => e.kind(),
            Error::Git(e) => e.kind(),
            Error::Setup(e) => e.kind(),
            Error::Rule { kind, .. } => *kind,
            Error::RolledBack(inner) => inner.kind(),
            Error::RollbackFailed { error, .. } => error.kind(),
            Error::LostWork(_) | Error::RepositoryGone { .. } => ErrorKind::Refused,
            Error::NonUtf8Path { .. } => ErrorKind::Invalid,
            Error::Task(_) => ErrorKind::Io,
            Error::Sandbox(e) => e.kind(),
        }
    }

    /// The message, naming `force` as the way to override a refusal to lose work: the CLI
    /// names its `--force`, MCP's tools their argument `force=true`; `Display` neither.
    pub fn message_with_force(&self, force: &str) -> String {
        match self {
            Error::LostWork(e @ GitError::NotAWorktree { .. }) => {
                format!("{e}; to delete it anyway, delete it with {force}")
            }
            Error::LostWork(e) => format!(
                "{e}; to delete it anyway, delete it with {force} (berth first keeps what would be lost on a ref under refs/berth/lost/, and names it)"
            ),
            Error::RepositoryGone { repo, worktree } => format!(
                "the repository {} is gone, so berth cannot check the worktree {} for uncommitted work; if it was moved, run `berth workspace repair --repo NEW-PATH`, else move it back; to remove the worktree anyway, delete it with {force}",
                repo.display(),
                worktree.display()
            ),
            Error::RolledBack(inner) => format!(
                "{}\n(the new workspace was rolled back: no folder, branch or record was kept)",
                inner.message_with_force(force)
            ),
            other => other.to_string(),
        }
    }

    /// A git error met while removing a worktree: a refusal to lose work becomes
    /// [`Error::LostWork`], which says how to override it.
    pub(crate) fn removal(e: GitError) -> Error {
        if e.would_lose_work() {
            Error::LostWork(e)
        } else {
            Error::Git(e)
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    pub fn rule(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error::Rule {
            kind,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Error {
        Error::rule(ErrorKind::Invalid, message)
    }

    pub fn refused(message: impl Into<String>) -> Error {
        Error::rule(ErrorKind::Refused, message)
    }
}

impl From<berth_core::InvalidInput> for Error {
    fn from(e: berth_core::InvalidInput) -> Error {
        Error::Store(e.into())
    }
}

/// Runs blocking work (git, a walk of the worktree) on tokio's blocking pool, so an async
/// server keeps answering other requests meanwhile.
pub async fn blocking<T: Send + 'static>(
    job: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(job)
        .await
        .map_err(|e| Error::Task(e.to_string()))?
}
