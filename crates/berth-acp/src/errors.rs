//! The one mapping of berth's errors to ACP errors. The message is berth's own, which says what
//! is wrong and what to do; the code says what kind of failure it is, and the error's data
//! carries the kind as every protocol spells it (`{"kind": "not_found"}`, as MCP's tool results
//! and JSON-RPC errors do).

use agent_client_protocol::Error;
use berth_agent::AgentError;
use berth_ops::ErrorKind;

/// An error of `kind`, its code by berth-core's one table ([`ErrorKind::json_rpc_code`], which
/// MCP and berth-run's ACP client answer with too), built where both ACP ends build theirs.
pub fn of_kind(kind: ErrorKind, message: impl Into<String>) -> Error {
    berth_agent::acp::error_of_kind(kind, message)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_the_code_of_the_one_table() {
        for kind in ErrorKind::ALL {
            let e = of_kind(kind, "m");
            assert_eq!(i32::from(e.code), kind.json_rpc_code(), "{kind:?}");
        }
    }
}
