//! The Anthropic Messages API's wire format: its event stream, its error answers, and its
//! error event inside a stream.

use serde_json::{Value, json};

use super::reply::Reply;
use super::sse::sse_event;
use super::turn::{Block, Stop, Turn};

impl Reply {
    /// The Anthropic Messages stream of `turn`.
    pub fn anthropic(turn: &Turn) -> Reply {
        Reply::sse(turn.anthropic_events())
    }

    /// An Anthropic error answer: `{"type":"error","error":{"type":…,"message":…}}`, with the
    /// error type Anthropic documents for `status`.
    pub fn anthropic_error(status: u16, message: &str) -> Reply {
        let kind = match status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            402 => "billing_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            504 => "timeout_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        Reply::json(
            status,
            &json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }
}

/// An Anthropic `error` event inside a stream (`overloaded_error`, say).
pub fn anthropic_stream_error(kind: &str, message: &str) -> String {
    sse_event(
        Some("error"),
        &json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

impl Turn {
    /// The turn as the Anthropic Messages API streams it: `message_start`, a `ping`, per
    /// block `content_block_start` / `content_block_delta`s / `content_block_stop`, then
    /// `message_delta` (stop reason, output tokens) and `message_stop`.
    pub fn anthropic_events(&self) -> Vec<String> {
        let ev = |name: &str, data: Value| sse_event(Some(name), &data);
        let mut out = vec![
            ev(
                "message_start",
                json!({"type": "message_start", "message": {
                    "id": "msg_test", "type": "message", "role": "assistant", "content": [],
                    "model": self.model, "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": self.input_tokens, "output_tokens": 1}
                }}),
            ),
            ev("ping", json!({"type": "ping"})),
        ];
        for (index, block) in self.blocks.iter().enumerate() {
            let start = |content_block: Value| {
                ev(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": content_block}),
                )
            };
            let delta = |delta: Value| {
                ev(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": delta}),
                )
            };
            match block {
                Block::Text { deltas, .. } => {
                    out.push(start(json!({"type": "text", "text": ""})));
                    for d in deltas {
                        out.push(delta(json!({"type": "text_delta", "text": d})));
                    }
                }
                Block::Thinking { deltas, signature } => {
                    out.push(start(json!({"type": "thinking", "thinking": ""})));
                    for d in deltas {
                        out.push(delta(json!({"type": "thinking_delta", "thinking": d})));
                    }
                    out.push(delta(
                        json!({"type": "signature_delta", "signature": signature}),
                    ));
                }
                Block::RedactedThinking { data } => {
                    out.push(start(json!({"type": "redacted_thinking", "data": data})));
                }
                Block::ToolCall {
                    id, name, pieces, ..
                } => {
                    out.push(start(
                        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    ));
                    for p in pieces {
                        out.push(delta(
                            json!({"type": "input_json_delta", "partial_json": p}),
                        ));
                    }
                }
            }
            out.push(ev(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        let stop = match self.stop_or_default() {
            Stop::EndTurn => "end_turn".to_owned(),
            Stop::ToolUse => "tool_use".to_owned(),
            Stop::MaxTokens => "max_tokens".to_owned(),
            Stop::Refusal => "refusal".to_owned(),
            Stop::Raw(s) => s,
        };
        out.push(ev(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop, "stop_sequence": null},
                   "usage": {"output_tokens": self.output_tokens}}),
        ));
        out.push(ev("message_stop", json!({"type": "message_stop"})));
        out
    }
}
