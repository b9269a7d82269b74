//! The one mapping from berth's errors to MCP. Protocol requests (resources, prompts,
//! subscriptions) get JSON-RPC errors by kind; tools get results with `isError`, which a model
//! reads, carrying the kind in structured content as well as the message.

use berth_ops::{Error, ErrorKind};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

/// The JSON-RPC error for a failed protocol request, its code by berth-core's one table
/// ([`ErrorKind::json_rpc_code`], which ACP answers with too), with berth's message and
/// `{"kind": …}` as its data, spelled as in tool results and ACP errors.
pub fn protocol(e: &Error) -> ErrorData {
    of_kind(e.kind(), e.to_string())
}

/// The JSON-RPC error of a failure of `kind` (see [`protocol`]).
pub fn of_kind(kind: ErrorKind, message: String) -> ErrorData {
    let data = Some(json!({ "kind": kind.as_str() }));
    ErrorData::new(rmcp::model::ErrorCode(kind.json_rpc_code()), message, data)
}

/// A failed tool call as the model sees it: the message as text, and
/// `{"error": {"kind", "message"}}` as structured content. A refusal to lose work names the
/// tool's own argument (`force=true`), not the CLI's flag.
pub fn tool(e: &Error) -> CallToolResult {
    let message = e.message_with_force("force=true");
    let mut result = CallToolResult::error(vec![ContentBlock::text(message.clone())]);
    result.structured_content = Some(json!({
        "error": { "kind": e.kind().as_str(), "message": message }
    }));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_the_code_of_the_one_table() {
        for kind in ErrorKind::ALL {
            let e = of_kind(kind, "m".into());
            assert_eq!(e.code.0, kind.json_rpc_code(), "{kind:?}");
            assert_eq!(e.data, Some(json!({ "kind": kind.as_str() })));
        }
    }
}
