//! The one error type of berth's libraries. Stores and the manager return it; the CLI, MCP and
//! ACP layers turn it into a message for a person or a model, so every variant says what is wrong
//! and, where it can, what to do next.

use std::path::PathBuf;

use crate::id::InvalidInput;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The thing named does not exist. `what` reads like "workspace 'abc'".
    #[error("{what} not found{}", hint_suffix(.hint))]
    NotFound { what: String, hint: Option<String> },

    /// Creating would replace something that exists.
    #[error("{what} already exists")]
    AlreadyExists { what: String },

    /// An identifier, path or argument from outside was refused.
    #[error(transparent)]
    Invalid(#[from] InvalidInput),

    /// A request that is well-formed but not allowed in the current state (e.g. removing a
    /// folder without asking for recursion).
    #[error("{0}")]
    Refused(String),

    /// A session's turn is held by another answer (see `SessionStore::hold_turn`). Its own
    /// variant, so that a reader that only needs the turn when it is free (a reload, which
    /// then shows the live answer instead of recovering it) needs no guessing.
    #[error(
        "session '{session}' is answering a prompt elsewhere (another process, or another server on the same store); wait for its answer, or cancel it there"
    )]
    TurnHeld { session: String },

    /// A file was expected and the path names a folder (reading, or writing over it). Its own
    /// kind, so a caller that can show a folder instead (a resource read) needs no guessing.
    #[error("{0}")]
    IsFolder(String),

    /// An identifier matched more than one thing.
    #[error("{identifier:?} is ambiguous; it matches: {}. Use more characters or the full id.", .candidates.join(", "))]
    Ambiguous {
        identifier: String,
        candidates: Vec<String>,
    },

    /// A file berth owns could not be parsed. It is never treated as missing or overwritten:
    /// the person has to look at it.
    #[error("{} is corrupt{}: {reason}. berth leaves it untouched; fix or remove it by hand", .file.display(), line_suffix(*.line))]
    Corrupt {
        file: PathBuf,
        line: Option<usize>,
        reason: String,
    },

    /// The configuration is well-formed TOML but has a value of the wrong type or kind.
    #[error("configuration: {0}")]
    Config(String),

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

fn line_suffix(line: Option<usize>) -> String {
    line.map(|l| format!(" at line {l}")).unwrap_or_default()
}

fn hint_suffix(hint: &Option<String>) -> String {
    hint.as_ref().map(|h| format!("; {h}")).unwrap_or_default()
}

impl Error {
    pub fn not_found(what: impl Into<String>) -> Self {
        Error::NotFound {
            what: what.into(),
            hint: None,
        }
    }

    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// Whether this is [`Error::TurnHeld`]: the session answers a prompt elsewhere.
    pub fn is_turn_held(&self) -> bool {
        matches!(self, Error::TurnHeld { .. })
    }
}

/// What kind of failure an error is, for the front ends that map it once: to an exit code, an
/// MCP error code, an ACP error. Every error type of berth's libraries is [`Kinded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The thing named does not exist.
    NotFound,
    /// An identifier, path, argument or config value is malformed or ambiguous.
    Invalid,
    /// Well-formed, but not allowed now: it would lose work, or the state forbids it.
    Refused,
    /// It would replace something that exists.
    Conflict,
    /// A path names a folder where a file was expected.
    IsFolder,
    /// A file berth owns cannot be parsed; a person has to look at it.
    Corrupt,
    /// A program berth ran (git, a setup command) failed.
    External,
    /// What the command needs is not set up here: a provider's key, an agent command that
    /// cannot start. Found before anything is made; the message says what to set.
    NotConfigured,
    /// The operating system failed a read or write.
    Io,
}

impl ErrorKind {
    /// Every kind, for a table or a test that must cover them all.
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::NotFound,
        ErrorKind::Invalid,
        ErrorKind::Refused,
        ErrorKind::Conflict,
        ErrorKind::IsFolder,
        ErrorKind::Corrupt,
        ErrorKind::External,
        ErrorKind::NotConfigured,
        ErrorKind::Io,
    ];

    /// The JSON-RPC error code of a failure of this kind, the one table MCP and ACP both
    /// answer with (each error's data carries the kind itself, `{"kind": "not_found"}`):
    ///
    /// | Kind | Code |
    /// |---|---|
    /// | not found | -32002 (resource not found): a client may create one, so nothing else is this |
    /// | invalid, is a folder | -32602 (invalid params): the request names something it cannot |
    /// | refused, conflict, not configured | -32600 (invalid request): well-formed, but it cannot be done as asked, now or here |
    /// | corrupt, external, I/O | -32603 (internal error): berth's message says what failed |
    pub fn json_rpc_code(self) -> i32 {
        match self {
            ErrorKind::NotFound => -32002,
            ErrorKind::Invalid | ErrorKind::IsFolder => -32602,
            ErrorKind::Refused | ErrorKind::Conflict | ErrorKind::NotConfigured => -32600,
            ErrorKind::Corrupt | ErrorKind::External | ErrorKind::Io => -32603,
        }
    }

    /// The name used in JSON (`not_found`, `is_folder`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Refused => "refused",
            ErrorKind::Conflict => "conflict",
            ErrorKind::IsFolder => "is_folder",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::External => "external",
            ErrorKind::NotConfigured => "not_configured",
            ErrorKind::Io => "io",
        }
    }
}

/// An error that knows its kind: every public error type of berth's libraries is one (a test
/// of the CLI's fails otherwise), so a front end maps it once, to an exit status or a
/// JSON-RPC code, whatever the type.
pub trait Kinded: std::error::Error + Send + Sync + 'static {
    fn kind(&self) -> ErrorKind;
}

/// Reads the kind of `error` where it is an `E`: one entry of a front end's table of error
/// types (the CLI's exit status).
pub fn kind_as<E: Kinded>(error: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    error.downcast_ref::<E>().map(Kinded::kind)
}

impl ErrorKind {
    /// The exit status of a command that failed with an error of this kind (`berth --help`
    /// lists them): 2 invalid, 3 not found, 4 refused, 5 corrupt, 6 conflict, 7 not
    /// configured, 1 for the rest.
    pub fn exit_status(self) -> u8 {
        match self {
            ErrorKind::Invalid | ErrorKind::IsFolder => 2,
            ErrorKind::NotFound => 3,
            ErrorKind::Refused => 4,
            ErrorKind::Corrupt => 5,
            ErrorKind::Conflict => 6,
            ErrorKind::NotConfigured => 7,
            ErrorKind::External | ErrorKind::Io => 1,
        }
    }
}

impl Kinded for Error {
    fn kind(&self) -> ErrorKind {
        Error::kind(self)
    }
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::AlreadyExists { .. } => ErrorKind::Conflict,
            Error::Invalid(_) | Error::Ambiguous { .. } | Error::Config(_) => ErrorKind::Invalid,
            Error::Refused(_) | Error::TurnHeld { .. } => ErrorKind::Refused,
            Error::IsFolder(_) => ErrorKind::IsFolder,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Io { .. } => ErrorKind::Io,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A read whose "not found" is an answer, not a failure.
pub trait Found<T> {
    /// `Ok(None)` when the thing does not exist; every other error stays an error (a corrupt
    /// record is never taken for a missing one).
    fn found(self) -> Result<Option<T>>;
}

impl<T> Found<T> for Result<T> {
    fn found(self) -> Result<Option<T>> {
        match self {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The 1-based line of a byte offset in `text`; parsers report spans, people read lines.
pub fn line_of_offset(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
