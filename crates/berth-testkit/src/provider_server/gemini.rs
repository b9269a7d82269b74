//! Gemini's wire format: its `streamGenerateContent?alt=sse` stream and the Google API's
//! error answers and status names.

use serde_json::{Value, json};

use super::reply::Reply;
use super::sse::sse_event;
use super::turn::{Block, Stop, Turn};

impl Reply {
    /// The Gemini `streamGenerateContent?alt=sse` stream of `turn`.
    pub fn gemini(turn: &Turn) -> Reply {
        Reply::sse(turn.gemini_events())
    }

    /// A Gemini (Google API) error answer: `{"error":{"code":…,"message":…,"status":…}}`.
    pub fn gemini_error(status: u16, message: &str) -> Reply {
        Reply::json(
            status,
            &json!({"error": {"code": status, "message": message, "status": google_status(status)}}),
        )
    }
}

pub(super) fn google_status(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

impl Turn {
    /// The turn as Gemini's `streamGenerateContent?alt=sse` streams it: one
    /// `GenerateContentResponse` per `data:` line. Each text or thought piece is a part of a
    /// response of its own (thoughts with `"thought": true`, a signature as
    /// `thoughtSignature` on the last piece); consecutive tool calls arrive whole, together in
    /// one response, as Gemini sends parallel calls. The last response also carries
    /// `finishReason` and `usageMetadata`.
    ///
    /// Panics when a tool call's joined pieces are not a JSON object: Gemini cannot send
    /// that, so such a turn is a mistake in the test.
    pub fn gemini_events(&self) -> Vec<String> {
        let mut responses: Vec<Vec<Value>> = Vec::new();
        let mut calls: Vec<Value> = Vec::new();
        for block in &self.blocks {
            if !matches!(block, Block::ToolCall { .. }) && !calls.is_empty() {
                responses.push(std::mem::take(&mut calls));
            }
            match block {
                Block::Text { deltas, .. } | Block::Thinking { deltas, .. } => {
                    let (thought, signature) = match block {
                        Block::Thinking { signature, .. } => (true, Some(signature)),
                        Block::Text { signature, .. } => (false, signature.as_ref()),
                        _ => (false, None),
                    };
                    let last = deltas.len().saturating_sub(1);
                    for (i, d) in deltas.iter().enumerate() {
                        let mut part = json!({"text": d});
                        if thought {
                            part["thought"] = json!(true);
                        }
                        if let (true, Some(sig)) = (i == last, signature) {
                            part["thoughtSignature"] = json!(sig);
                        }
                        responses.push(vec![part]);
                    }
                }
                Block::RedactedThinking { .. } => {}
                Block::ToolCall {
                    id,
                    name,
                    pieces,
                    signature,
                } => {
                    let joined = pieces.concat();
                    let args: Value = serde_json::from_str(&joined).unwrap_or_else(|e| {
                        panic!("a Gemini tool call's arguments must be JSON ({e}): {joined}")
                    });
                    assert!(args.is_object(), "Gemini's args are an object: {joined}");
                    let mut call = json!({"name": name, "args": args});
                    if !id.is_empty() {
                        call["id"] = json!(id);
                    }
                    let mut part = json!({"functionCall": call});
                    if let Some(sig) = signature {
                        part["thoughtSignature"] = json!(sig);
                    }
                    calls.push(part);
                }
            }
        }
        if !calls.is_empty() {
            responses.push(calls);
        }
        if responses.is_empty() {
            responses.push(Vec::new());
        }
        let finish = match self.stop_or_default() {
            Stop::EndTurn | Stop::ToolUse => "STOP".to_owned(),
            Stop::MaxTokens => "MAX_TOKENS".to_owned(),
            Stop::Refusal => "SAFETY".to_owned(),
            Stop::Raw(s) => s,
        };
        let count = responses.len();
        responses
            .into_iter()
            .enumerate()
            .map(|(i, parts)| {
                let mut candidate =
                    json!({"content": {"role": "model", "parts": parts}, "index": 0});
                let mut response = json!({"candidates": [], "modelVersion": self.model,
                                          "responseId": "resp-test"});
                if i + 1 == count {
                    candidate["finishReason"] = json!(finish);
                    response["usageMetadata"] = json!({
                        "promptTokenCount": self.input_tokens,
                        "candidatesTokenCount": self.output_tokens,
                        "totalTokenCount": self.input_tokens + self.output_tokens
                    });
                }
                response["candidates"] = json!([candidate]);
                sse_event(None, &response)
            })
            .collect()
    }
}
