//! The one mapping of berth's errors to ACP errors. The message is berth's own, which says what
//! is wrong and what to do; the code says what kind of failure it is, and the error's data
//! carries the kind as every protocol spells it (`{"kind": "not_found"}`, as MCP's tool results
//! and JSON-RPC errors do).

use agent_client_protocol::{Error, ErrorCode};
use berth_agent::AgentError;
use berth_ops::ErrorKind;

/// An error of `kind`: not found is -32002, bad input -32602, a refusal, a conflict or what is
/// not configured -32600 (the request cannot be done as asked), anything else -32603.
pub fn of_kind(kind: ErrorKind, message: impl Into<String>) -> Error {
    let code = match kind {
        ErrorKind::NotFound => ErrorCode::RESOURCE_NOT_FOUND,
        ErrorKind::Invalid => ErrorCode::INVALID_PARAMS,
        ErrorKind::Refused | ErrorKind::Conflict | ErrorKind::NotConfigured => {
            ErrorCode::INVALID_REQUEST
        }
        ErrorKind::IsFolder | ErrorKind::Corrupt | ErrorKind::External | ErrorKind::Io => {
            ErrorCode::INTERNAL_ERROR
        }
    };
    Error::new(code, message.into()).data(serde_json::json!({ "kind": kind.as_str() }))
}

/// An operation's error.
pub fn ops(e: berth_ops::Error) -> Error {
    of_kind(e.kind(), e.to_string())
}

/// Why a turn could not start: an operation's error, or a setup error (no key, a bad base
/// URL), whose message names the config key or variable to set.
pub fn agent(e: AgentError) -> Error {
    of_kind(e.kind(), e.to_string())
}

/// A request whose parameters berth cannot use.
pub fn invalid(message: impl Into<String>) -> Error {
    of_kind(ErrorKind::Invalid, message)
}

/// A request that cannot be done now (a second prompt while one runs).
pub fn refused(message: impl Into<String>) -> Error {
    of_kind(ErrorKind::Refused, message)
}
