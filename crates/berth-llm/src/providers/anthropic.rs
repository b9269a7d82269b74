//! Claude over the Anthropic Messages API: `POST {base}/v1/messages` with `stream: true`,
//! the conversation translated to content blocks, and the server-sent events translated back
//! to [`ProviderEvent`]s.
//!
//! Thinking blocks (`thinking` with its signature, `redacted_thinking`) are kept whole as a
//! [`Part::Thought`]'s opaque value and sent back exactly as received: the API checks the
//! signature, and a model that called tools while thinking needs its thinking back.

use std::borrow::Cow;
use std::collections::BTreeMap;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::conversation::{ChatMessage, Part, Speaker, StopReason, ToolCall, Usage};
use crate::http::{Http, SseEvent};
use crate::provider::{Provider, ProviderError, ProviderEvent, ProviderRequest, ProviderStream};

use super::{Body, Decode, WrittenTools, clip, decode, secret_header, stream_error};

pub const DEFAULT_BASE_URL: &str = berth_core::config::ProviderKind::Claude.default_base_url();

/// The API version berth speaks; the stream format below is this version's.
const API_VERSION: &str = "2023-06-01";

const NAME: &str = "claude";

/// This dialect's tool definitions, written once per tool set.
static TOOLS: WrittenTools = WrittenTools::new();

/// The Anthropic Messages provider.
pub struct Anthropic {
    http: Http,
    base_url: String,
    key: String,
}

impl Anthropic {
    /// `base_url` without the `/v1` (`https://api.anthropic.com`), no trailing slash.
    pub fn new(http: Http, base_url: String, key: String) -> Self {
        Anthropic {
            http,
            base_url,
            key,
        }
    }

    /// The request body of `request`, as the Messages API takes it.
    pub fn body(request: &ProviderRequest) -> Body<Vec<ToolDefinition<'_>>> {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .filter_map(|m| {
                let content = blocks(m);
                // The API refuses a message without content; a message with nothing to send
                // (a turn that was cancelled before any text, say) is left out.
                (!content.is_empty()).then(|| {
                    json!({
                        "role": match m.speaker {
                            Speaker::User => "user",
                            Speaker::Assistant => "assistant",
                        },
                        "content": content,
                    })
                })
            })
            .collect();
        let mut fields = json!({
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
            "stream": true,
        });
        if !request.system.is_empty() {
            fields["system"] = json!(request.system);
        }
        let tools = (!request.tools.is_empty()).then(|| {
            request
                .tools
                .iter()
                .map(|t| ToolDefinition {
                    name: &t.name,
                    description: &t.description,
                    input_schema: &t.parameters,
                })
                .collect()
        });
        Body { fields, tools }
    }
}

/// A tool as the Messages API is told of it.
#[derive(Debug, Serialize)]
pub struct ToolDefinition<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
}

/// The content blocks of one message. Tool results go first: the API requires a user
/// message's `tool_result` blocks to come before anything else in it.
fn blocks(message: &ChatMessage) -> Vec<Value> {
    let mut results = Vec::new();
    let mut others = Vec::new();
    for part in &message.parts {
        match part {
            // Empty text blocks are refused by the API.
            Part::Text(text) if text.is_empty() => {}
            Part::Text(text) => others.push(json!({"type": "text", "text": text})),
            Part::Image(image) => others.push(json!({
                "type": "image",
                "source": {"type": "base64", "media_type": image.mime_type, "data": image.data},
            })),
            Part::Thought { opaque, .. } => {
                // Only Claude's own thinking blocks go back, verbatim; a thought without one
                // (another provider's, or one whose stream broke before its signature)
                // cannot be verified by the API and is left out.
                if let Some(block) = opaque.as_ref().filter(|o| is_thinking_block(o)) {
                    others.push(block.clone());
                }
            }
            Part::ToolCall(call) => others.push(json!({
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                // `input` must be an object. Arguments that were not valid JSON were never
                // run (their result says so), so an empty object stands in for them.
                "input": match &call.arguments {
                    Ok(v) if v.is_object() => v.clone(),
                    _ => json!({}),
                },
            })),
            Part::ToolResult(result) => results.push(json!({
                "type": "tool_result",
                "tool_use_id": result.call_id,
                "content": result.content,
                "is_error": result.is_error,
            })),
        }
    }
    results.extend(others);
    results
}

fn is_thinking_block(v: &Value) -> bool {
    matches!(
        v.get("type").and_then(Value::as_str),
        Some("thinking" | "redacted_thinking")
    )
}

#[async_trait]
impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn stream(
        &self,
        request: ProviderRequest,
        cancel: CancellationToken,
    ) -> Result<ProviderStream, ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("x-api-key"),
            secret_header(NAME, &self.key)?,
        );
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        let url = format!("{}/v1/messages", self.base_url);
        let response = self
            .http
            .post(
                NAME,
                &url,
                headers,
                &Anthropic::body(&request).with_written_tools(&request.tools, &TOOLS),
                &cancel,
            )
            .await?;
        Ok(decode(NAME, response, cancel, Decoder::default()))
    }
}

/// A content block being streamed, by its index.
enum Block {
    Text(String),
    Thinking {
        text: String,
        signature: String,
    },
    /// A `redacted_thinking` block: complete in its start event.
    Redacted(Value),
    ToolUse {
        id: String,
        name: String,
        json: String,
        /// The `input` of the start event: used when no `input_json_delta` follows.
        initial: Value,
    },
    /// A block berth does not use (server tools, citations…): skipped.
    Other,
}

/// The Anthropic event stream, one event at a time.
#[derive(Default)]
struct Decoder {
    open: BTreeMap<u64, Block>,
    parts: Vec<Part>,
    usage: Usage,
    stop: Option<String>,
}

/// A `content_block_delta` event. Texts borrow from the event where they hold no escapes.
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    index: u64,
    #[serde(borrow, default)]
    delta: DeltaBody<'a>,
}

#[derive(Deserialize, Default)]
struct DeltaBody<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    signature: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    partial_json: Option<Cow<'a, str>>,
}

impl Decoder {
    fn delta(&mut self, delta: Delta, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let index = delta.index;
        let Some(block) = self.open.get_mut(&index) else {
            return Err(stream_error(
                NAME,
                format!("a delta for content block {index}, which never started"),
            ));
        };
        let body = delta.delta;
        match (body.kind.as_ref(), block) {
            ("text_delta", Block::Text(text)) => {
                let piece = body.text.unwrap_or_default();
                text.push_str(&piece);
                out.push(ProviderEvent::TextDelta(piece.into_owned()));
            }
            ("thinking_delta", Block::Thinking { text, .. }) => {
                let piece = body.thinking.unwrap_or_default();
                text.push_str(&piece);
                out.push(ProviderEvent::ThoughtDelta(piece.into_owned()));
            }
            ("signature_delta", Block::Thinking { signature, .. }) => {
                signature.push_str(&body.signature.unwrap_or_default());
            }
            ("input_json_delta", Block::ToolUse { json, .. }) => {
                json.push_str(&body.partial_json.unwrap_or_default());
            }
            // Citations and deltas of blocks berth skips.
            _ => {}
        }
        Ok(())
    }
}

impl Decode for Decoder {
    fn event(
        &mut self,
        event: SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<bool, ProviderError> {
        // Nearly every event of a stream is a delta: read those straight into their fields.
        if event.event == "content_block_delta"
            && let Ok(delta) = serde_json::from_str::<Delta>(&event.data)
            && delta.kind == "content_block_delta"
        {
            self.delta(delta, out)?;
            return Ok(false);
        }
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            stream_error(
                NAME,
                format!("an event is not JSON ({e}): {}", clip(&event.data)),
            )
        })?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        match kind {
            "message_start" => {
                if let Some(usage) = data.pointer("/message/usage") {
                    self.read_usage(usage);
                }
            }
            "content_block_start" => self.start_block(&data, out)?,
            "content_block_delta" => {
                let delta = Delta::deserialize(&data).map_err(|e| {
                    stream_error(NAME, format!("a content block delta is malformed: {e}"))
                })?;
                self.delta(delta, out)?;
            }
            "content_block_stop" => {
                let index = index_of(&data)?;
                if let Some(block) = self.open.remove(&index) {
                    self.finish_block(block, out);
                }
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(reason.to_owned());
                }
                if let Some(usage) = data.get("usage") {
                    self.read_usage(usage);
                }
            }
            "message_stop" => {
                self.finish_message(out);
                return Ok(true);
            }
            "error" => {
                let message = data
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map_or_else(|| clip(&event.data), str::to_owned);
                let message = match data.pointer("/error/type").and_then(Value::as_str) {
                    Some(kind) => format!("{message} ({kind})"),
                    None => message,
                };
                return Err(ProviderError::Reported {
                    provider: NAME,
                    message,
                });
            }
            // `ping`, and event types added after this was written (the API's versioning
            // policy allows new ones): nothing to do.
            _ => {}
        }
        Ok(false)
    }
}

impl Decoder {
    /// A content block starts: text and thoughts it already holds go out at once.
    fn start_block(
        &mut self,
        data: &Value,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<(), ProviderError> {
        let index = index_of(data)?;
        let block = data.get("content_block").unwrap_or(&Value::Null);
        let text_field = |name: &str| {
            block
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let started = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = text_field("text");
                if !text.is_empty() {
                    out.push(ProviderEvent::TextDelta(text.clone()));
                }
                Block::Text(text)
            }
            Some("thinking") => {
                let text = text_field("thinking");
                if !text.is_empty() {
                    out.push(ProviderEvent::ThoughtDelta(text.clone()));
                }
                Block::Thinking {
                    text,
                    signature: text_field("signature"),
                }
            }
            Some("redacted_thinking") => Block::Redacted(block.clone()),
            Some("tool_use") => Block::ToolUse {
                id: text_field("id"),
                name: text_field("name"),
                json: String::new(),
                initial: block.get("input").cloned().unwrap_or(Value::Null),
            },
            _ => Block::Other,
        };
        self.open.insert(index, started);
        Ok(())
    }

    /// The message ends: its blocks are put together into the one `Done`.
    fn finish_message(&mut self, out: &mut Vec<ProviderEvent>) {
        // Blocks are stopped before the message is; any left open are finished in
        // their order rather than lost.
        for (_, block) in std::mem::take(&mut self.open) {
            self.finish_block(block, out);
        }
        let parts = std::mem::take(&mut self.parts);
        let has_calls = parts.iter().any(|p| matches!(p, Part::ToolCall(_)));
        let stop = match self.stop.as_deref() {
            Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::MaxTokens,
            Some("refusal") => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_owned()),
            // No `message_delta` said why: judge by what the message holds.
            None if has_calls => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        out.push(ProviderEvent::Done {
            message: ChatMessage {
                speaker: Speaker::Assistant,
                parts,
            },
            stop,
            usage: self.usage,
        });
    }

    /// Tokens from a `usage` object: input counts the cached tokens too (they fill the
    /// context window all the same); `output_tokens` is cumulative, so the last one wins.
    fn read_usage(&mut self, usage: &Value) {
        let count = |name: &str| usage.get(name).and_then(Value::as_u64);
        let input: Option<u64> = [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ]
        .iter()
        .filter_map(|n| count(n))
        .reduce(|a, b| a + b);
        if let Some(input) = input {
            self.usage.input_tokens = input;
        }
        if let Some(output) = count("output_tokens") {
            self.usage.output_tokens = output;
        }
    }

    fn finish_block(&mut self, block: Block, out: &mut Vec<ProviderEvent>) {
        match block {
            Block::Text(text) => {
                if !text.is_empty() {
                    self.parts.push(Part::Text(text));
                }
            }
            Block::Thinking { text, signature } => {
                let opaque = json!({"type": "thinking", "thinking": text, "signature": signature});
                self.parts.push(Part::Thought {
                    text,
                    opaque: Some(opaque),
                });
            }
            Block::Redacted(block) => self.parts.push(Part::Thought {
                text: String::new(),
                opaque: Some(block),
            }),
            Block::ToolUse {
                id,
                name,
                json,
                initial,
            } => {
                let arguments = if json.trim().is_empty() {
                    // No input deltas: the start event's input, or no arguments at all.
                    Ok(if initial.is_object() {
                        initial
                    } else {
                        Value::Object(Map::new())
                    })
                } else {
                    serde_json::from_str::<Value>(&json).map_err(|_| json)
                };
                let call = ToolCall {
                    id,
                    name,
                    arguments,
                    opaque: None,
                };
                out.push(ProviderEvent::ToolCall(call.clone()));
                self.parts.push(Part::ToolCall(call));
            }
            Block::Other => {}
        }
    }
}

fn index_of(data: &Value) -> Result<u64, ProviderError> {
    data.get("index").and_then(Value::as_u64).ok_or_else(|| {
        stream_error(
            NAME,
            format!("an event without its index: {}", clip(&data.to_string())),
        )
    })
}
