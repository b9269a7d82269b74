//! OpenAI Chat Completions' wire format: its chunk stream (as OpenAI-compatible servers send
//! it too) and its error answers.

use serde_json::{Value, json};

use super::reply::Reply;
use super::sse::sse_event;
use super::turn::{Block, Stop, Turn};

impl Reply {
    /// The OpenAI Chat Completions stream of `turn`.
    pub fn openai(turn: &Turn) -> Reply {
        Reply::sse(turn.openai_events())
    }

    /// An OpenAI error answer: `{"error":{"message":…,"type":…,"param":null,"code":…}}`.
    pub fn openai_error(status: u16, message: &str) -> Reply {
        let (kind, code) = match status {
            401 => ("invalid_request_error", json!("invalid_api_key")),
            429 => ("requests", json!("rate_limit_exceeded")),
            500..=599 => ("server_error", Value::Null),
            _ => ("invalid_request_error", Value::Null),
        };
        Reply::json(
            status,
            &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
        )
    }
}

impl Turn {
    /// The turn as OpenAI Chat Completions streams it with `stream_options.include_usage`:
    /// `chat.completion.chunk`s whose `choices[0].delta` carries the role, `content` pieces,
    /// `reasoning_content` pieces (as DeepSeek, vLLM and others send reasoning), and
    /// `tool_calls` by index (id, type and name in a call's first delta, then `arguments`
    /// pieces); then a chunk with `finish_reason`, a chunk with `usage` and no choices, and
    /// `data: [DONE]`.
    pub fn openai_events(&self) -> Vec<String> {
        let chunk = |choices: Value, usage: Value| {
            sse_event(
                None,
                &json!({"id": "chatcmpl-test", "object": "chat.completion.chunk",
                        "created": 1_700_000_000, "model": self.model,
                        "system_fingerprint": "fp_test", "choices": choices, "usage": usage}),
            )
        };
        let delta = |delta: Value| {
            chunk(
                json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
                Value::Null,
            )
        };
        let mut out = vec![delta(
            json!({"role": "assistant", "content": "", "refusal": null}),
        )];
        let mut call_index = 0;
        for block in &self.blocks {
            match block {
                Block::Text { deltas, .. } => {
                    for d in deltas {
                        out.push(delta(json!({"content": d})));
                    }
                }
                Block::Thinking { deltas, .. } => {
                    for d in deltas {
                        out.push(delta(json!({"reasoning_content": d})));
                    }
                }
                Block::RedactedThinking { .. } => {}
                Block::ToolCall {
                    id, name, pieces, ..
                } => {
                    out.push(delta(json!({"tool_calls": [{
                        "index": call_index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""}
                    }]})));
                    for p in pieces {
                        out.push(delta(json!({"tool_calls": [{
                            "index": call_index, "function": {"arguments": p}
                        }]})));
                    }
                    call_index += 1;
                }
            }
        }
        let finish = match self.stop_or_default() {
            Stop::EndTurn => "stop".to_owned(),
            Stop::ToolUse => "tool_calls".to_owned(),
            Stop::MaxTokens => "length".to_owned(),
            Stop::Refusal => "content_filter".to_owned(),
            Stop::Raw(s) => s,
        };
        out.push(chunk(
            json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish}]),
            Value::Null,
        ));
        out.push(chunk(
            json!([]),
            json!({"prompt_tokens": self.input_tokens, "completion_tokens": self.output_tokens,
                   "total_tokens": self.input_tokens + self.output_tokens}),
        ));
        out.push("data: [DONE]\n\n".to_owned());
        out
    }
}
