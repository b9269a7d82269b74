//! The one mapping from berth's errors to MCP. Protocol requests (resources, prompts,
//! subscriptions) get JSON-RPC errors by kind; tools get results with `isError`, which a model
//! reads, carrying the kind in structured content as well as the message.

use berth_ops::{Error, ErrorKind};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

/// The JSON-RPC error for a failed protocol request: not found is `-32002` (resource not
/// found), bad input `-32602` (invalid params), and corruption or I/O an internal error that
/// keeps berth's message (it names the file and line, or what failed). A client that sees
/// "not found" may create a new one, so nothing else is ever reported as that. Every one
/// carries `{"kind": …}` as its data, spelled as in tool results and ACP errors.
pub fn protocol(e: &Error) -> ErrorData {
    of_kind(e.kind(), e.to_string())
}

/// The JSON-RPC error of a failure of `kind` (see [`protocol`]).
pub fn of_kind(kind: ErrorKind, message: String) -> ErrorData {
    let data = Some(json!({ "kind": kind.as_str() }));
    match kind {
        ErrorKind::NotFound => ErrorData::resource_not_found(message, data),
        ErrorKind::Invalid | ErrorKind::Refused | ErrorKind::Conflict | ErrorKind::IsFolder => {
            ErrorData::invalid_params(message, data)
        }
        ErrorKind::NotConfigured => ErrorData::invalid_request(message, data),
        ErrorKind::Corrupt | ErrorKind::External | ErrorKind::Io => {
            ErrorData::internal_error(message, data)
        }
    }
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
