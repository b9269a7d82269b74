//! The one mapping of berth's errors to ACP errors. The message is berth's own, which says what
//! is wrong and what to do; the code says what kind of failure it is.

use agent_client_protocol::{Error, ErrorCode};
use berth_agent::AgentError;
use berth_ops::ErrorKind;

/// An operation's error: not found is -32002, bad input -32602, a refusal or a conflict
/// -32600 (the request cannot be done as asked), anything else -32603.
pub fn ops(e: berth_ops::Error) -> Error {
    let code = match e.kind() {
        ErrorKind::NotFound => ErrorCode::RESOURCE_NOT_FOUND,
        ErrorKind::Invalid => ErrorCode::INVALID_PARAMS,
        ErrorKind::Refused | ErrorKind::Conflict => ErrorCode::INVALID_REQUEST,
        _ => ErrorCode::INTERNAL_ERROR,
    };
    Error::new(code, e.to_string()).data(serde_json::json!({ "kind": format!("{:?}", e.kind()) }))
}

/// Why a turn could not start: an operation's error, or a setup error (no key, a bad base
/// URL), whose message names the config key or variable to set.
pub fn agent(e: AgentError) -> Error {
    match e {
        AgentError::Ops(e) => ops(e),
        AgentError::Setup(e) => Error::new(ErrorCode::INTERNAL_ERROR, e.to_string()),
    }
}

/// A request whose parameters berth cannot use.
pub fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::INVALID_PARAMS, message.into())
}

/// A request that cannot be done now (a second prompt while one runs).
pub fn refused(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::INVALID_REQUEST, message.into())
}

/// A failure inside berth.
pub fn internal(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::INTERNAL_ERROR, message.into())
}
