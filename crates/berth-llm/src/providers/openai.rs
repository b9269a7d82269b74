//! OpenAI Chat Completions, and the servers that speak it (Ollama, vLLM, llama.cpp, …):
//! `POST {base}/chat/completions` with `stream: true`, the conversation translated to chat
//! messages, and the `chat.completion.chunk` stream translated back to [`ProviderEvent`]s.
//!
//! Tool calls arrive in pieces keyed by their index (the id and the name in a call's first
//! piece, the arguments spread over the rest) and are assembled here; they are emitted, in
//! index order, once the model says why it stopped. Reasoning that compatible servers stream
//! (`reasoning_content`, or `reasoning`) becomes thought deltas; it is never sent back, as the
//! API has no place for it.

use std::collections::BTreeMap;

use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{Body, Decode, WrittenTools, clip, decode, secret_header, stream_error};
use crate::conversation::{ChatMessage, Part, Speaker, StopReason, ToolCall, Usage};
use crate::http::{Http, SseEvent};
use crate::provider::{Provider, ProviderError, ProviderEvent, ProviderRequest, ProviderStream};

pub const DEFAULT_BASE_URL: &str = berth_core::config::ProviderKind::Openai.default_base_url();

const NAME: &str = "openai";

/// This dialect's tool definitions, written once per tool set.
static TOOLS: WrittenTools = WrittenTools::new();

/// The OpenAI Chat Completions provider.
pub struct OpenAi {
    http: Http,
    base_url: String,
    key: String,
}

impl OpenAi {
    /// `base_url` with its version (`https://api.openai.com/v1`, `http://localhost:11434/v1`),
    /// no trailing slash.
    pub fn new(http: Http, base_url: String, key: String) -> Self {
        OpenAi {
            http,
            base_url,
            key,
        }
    }

    /// The request body of `request`, as Chat Completions takes it from `base_url`.
    pub fn body<'a>(request: &'a ProviderRequest, base_url: &str) -> Body<Vec<ToolDefinition<'a>>> {
        let mut messages = Vec::new();
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        for message in &request.messages {
            push_messages(message, &mut messages);
        }
        let mut fields = json!({
            "model": request.model,
            "messages": messages,
            "stream": true,
            // Without it the stream carries no token counts.
            "stream_options": {"include_usage": true},
        });
        // api.openai.com deprecated `max_tokens`, and its reasoning models refuse it, in favour
        // of `max_completion_tokens`; the compatible servers people point berth at (Ollama,
        // vLLM, llama.cpp) document `max_tokens`, and some ignore or refuse the newer name.
        // So OpenAI itself gets the new field and every other server the old one.
        let field = if host(base_url) == host(DEFAULT_BASE_URL) {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        fields[field] = json!(request.max_tokens);
        let tools = (!request.tools.is_empty()).then(|| {
            request
                .tools
                .iter()
                .map(|t| ToolDefinition {
                    kind: "function",
                    function: Function {
                        name: &t.name,
                        description: &t.description,
                        parameters: &t.parameters,
                    },
                })
                .collect()
        });
        Body { fields, tools }
    }
}

/// A tool as Chat Completions is told of it.
#[derive(Debug, Serialize)]
pub struct ToolDefinition<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Debug, Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// The host of an `http(s)://host[:port]/…` URL.
fn host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or_default();
    authority.split(':').next().unwrap_or_default()
}

/// One conversation message as chat messages: a user message's tool results become `tool`
/// messages of their own (first, since they must follow the assistant message that made the
/// calls), then its text; an assistant message is its text and its calls.
fn push_messages(message: &ChatMessage, out: &mut Vec<Value>) {
    let text: String = message.text();
    match message.speaker {
        Speaker::User => {
            for part in &message.parts {
                if let Part::ToolResult(result) = part {
                    // A tool message has no error flag: the model learns of a failure from
                    // the content.
                    let content = if result.is_error {
                        format!("Error: {}", result.content)
                    } else {
                        result.content.clone()
                    };
                    out.push(json!({
                        "role": "tool",
                        "tool_call_id": result.call_id,
                        "content": content,
                    }));
                }
            }
            let images: Vec<Value> = message
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Image(image) => Some(json!({
                        "type": "image_url",
                        "image_url": {"url": format!("data:{};base64,{}", image.mime_type, image.data)},
                    })),
                    _ => None,
                })
                .collect();
            if !images.is_empty() {
                // Images need the list form of `content`; text alone keeps the plain string,
                // which every compatible server takes.
                let mut content = images;
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                out.push(json!({"role": "user", "content": content}));
            } else if !text.is_empty() {
                out.push(json!({"role": "user", "content": text}));
            }
        }
        Speaker::Assistant => {
            let calls: Vec<Value> = message
                .tool_calls()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            // The arguments as the model wrote them, even when they were not
                            // JSON: the call's error result then makes sense to it.
                            "arguments": match &call.arguments {
                                Ok(v) => v.to_string(),
                                Err(raw) => raw.clone(),
                            },
                        },
                    })
                })
                .collect();
            if text.is_empty() && calls.is_empty() {
                return;
            }
            let mut m = json!({
                "role": "assistant",
                "content": if text.is_empty() { Value::Null } else { json!(text) },
            });
            if !calls.is_empty() {
                m["tool_calls"] = json!(calls);
            }
            out.push(m);
        }
    }
}

#[async_trait]
impl Provider for OpenAi {
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
            AUTHORIZATION,
            secret_header(NAME, &format!("Bearer {}", self.key))?,
        );
        let url = format!("{}/chat/completions", self.base_url);
        let body =
            OpenAi::body(&request, &self.base_url).with_written_tools(&request.tools, &TOOLS);
        let response = self.http.post(NAME, &url, headers, &body, &cancel).await?;
        Ok(decode(NAME, response, cancel, Decoder::default()))
    }
}

/// A tool call being assembled from its pieces.
#[derive(Default)]
struct CallPieces {
    id: String,
    name: String,
    arguments: String,
}

/// The chunk stream, one `data:` at a time.
#[derive(Default)]
struct Decoder {
    /// Thoughts and text, in stream order (consecutive pieces of one kind merged).
    parts: Vec<Part>,
    calls: BTreeMap<u64, CallPieces>,
    /// The calls as emitted, once the finish reason came.
    emitted: Option<Vec<ToolCall>>,
    finish: Option<String>,
    refused: bool,
    usage: Usage,
}

impl Decode for Decoder {
    fn event(
        &mut self,
        event: SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<bool, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done(out);
            return Ok(true);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            stream_error(NAME, format!("a chunk is not JSON ({e}): {}", clip(data)))
        })?;
        // OpenAI and compatible servers report a failure after the stream started as a chunk
        // holding `error`.
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| clip(&error.to_string()), str::to_owned);
            return Err(ProviderError::Reported {
                provider: NAME,
                message,
            });
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            let count = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Usage {
                input_tokens: count("prompt_tokens"),
                output_tokens: count("completion_tokens"),
            };
        }
        let choice = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|choices| {
                choices
                    .iter()
                    .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            });
        let Some(choice) = choice else {
            // The usage chunk has no choices.
            return Ok(false);
        };
        if let Some(delta) = choice.get("delta") {
            self.delta(delta, out)?;
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(reason.to_owned());
            // The calls are complete: the loop may start on them while usage is still to come.
            self.emit_calls(out);
        }
        Ok(false)
    }
}

impl Decoder {
    fn delta(&mut self, delta: &Value, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        let piece = |name: &str| {
            delta
                .get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        // Servers name the reasoning field differently; none sends both.
        if let Some(thought) = piece("reasoning_content").or_else(|| piece("reasoning")) {
            match self.parts.last_mut() {
                Some(Part::Thought { text, .. }) => text.push_str(thought),
                _ => self.parts.push(Part::Thought {
                    text: thought.to_owned(),
                    opaque: None,
                }),
            }
            out.push(ProviderEvent::ThoughtDelta(thought.to_owned()));
        }
        // A refusal is streamed in a field of its own; the person sees it as the answer.
        let refusal = piece("refusal");
        self.refused |= refusal.is_some();
        for text in [piece("content"), refusal].into_iter().flatten() {
            match self.parts.last_mut() {
                Some(Part::Text(t)) => t.push_str(text),
                _ => self.parts.push(Part::Text(text.to_owned())),
            }
            out.push(ProviderEvent::TextDelta(text.to_owned()));
        }
        let Some(calls) = delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty())
        else {
            return Ok(());
        };
        if self.emitted.is_some() {
            return Err(stream_error(
                NAME,
                "a tool call arrived after the finish reason".to_owned(),
            ));
        }
        for call in calls {
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            let index = match call.get("index").and_then(Value::as_u64) {
                Some(i) => i,
                // Some servers leave the index out: a new id starts a new call, pieces
                // without one continue the last.
                None => {
                    let last = self.calls.last_key_value();
                    match (last, id) {
                        (Some((&i, c)), Some(id)) if c.id == id => i,
                        (Some((&i, _)), None) => i,
                        (Some((&i, _)), Some(_)) => i + 1,
                        (None, _) => 0,
                    }
                }
            };
            let pieces = self.calls.entry(index).or_default();
            if let Some(id) = id.filter(|_| pieces.id.is_empty()) {
                pieces.id = id.to_owned();
            }
            let function = call.get("function").unwrap_or(&Value::Null);
            if let Some(name) = function
                .get("name")
                .and_then(Value::as_str)
                .filter(|_| pieces.name.is_empty())
            {
                pieces.name = name.to_owned();
            }
            if let Some(arguments) = function.get("arguments").and_then(Value::as_str) {
                pieces.arguments.push_str(arguments);
            }
        }
        Ok(())
    }

    /// The assembled calls as `ToolCall` events, in index order, once.
    fn emit_calls(&mut self, out: &mut Vec<ProviderEvent>) {
        if self.emitted.is_some() {
            return;
        }
        let calls: Vec<ToolCall> = std::mem::take(&mut self.calls)
            .into_iter()
            .map(|(index, pieces)| ToolCall {
                // A server that gives no id still needs one to tie the result to the call.
                id: if pieces.id.is_empty() {
                    format!("call_{index}")
                } else {
                    pieces.id
                },
                name: pieces.name,
                arguments: if pieces.arguments.trim().is_empty() {
                    Ok(Value::Object(Map::new()))
                } else {
                    serde_json::from_str::<Value>(&pieces.arguments).map_err(|_| pieces.arguments)
                },
                opaque: None,
            })
            .collect();
        out.extend(calls.iter().cloned().map(ProviderEvent::ToolCall));
        self.emitted = Some(calls);
    }

    fn done(&mut self, out: &mut Vec<ProviderEvent>) {
        self.emit_calls(out);
        let calls = self.emitted.take().unwrap_or_default();
        let has_calls = !calls.is_empty();
        let mut parts = std::mem::take(&mut self.parts);
        parts.extend(calls.into_iter().map(Part::ToolCall));
        let stop = match self.finish.as_deref() {
            Some("length") => StopReason::MaxTokens,
            Some("content_filter") => StopReason::Refusal,
            // Some compatible servers say `stop` even when the message calls tools; the calls
            // are what the loop must act on.
            _ if has_calls => StopReason::ToolUse,
            _ if self.refused => StopReason::Refusal,
            Some("stop") | None => StopReason::EndTurn,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            Some(other) => StopReason::Other(other.to_owned()),
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
}
