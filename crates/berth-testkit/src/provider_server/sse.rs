//! Server-sent events as the providers frame them, and the error event that OpenAI-compatible
//! servers and Gemini send inside a stream.

use serde_json::{Value, json};

use super::gemini::google_status;

/// An error as OpenAI-compatible servers and Gemini send one inside a stream: a `data:` line
/// holding `{"error":{"message":…,"code":…}}`.
pub fn data_error(code: u16, message: &str) -> String {
    sse_event(
        None,
        &json!({"error": {"code": code, "message": message, "status": google_status(code)}}),
    )
}

/// One server-sent event: an optional `event:` line, one `data:` line, and the blank line.
pub fn sse_event(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}
