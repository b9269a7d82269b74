//! Gemini over the Generative Language API: `POST {base}/v1beta/models/{model}:
//! streamGenerateContent?alt=sse`, the conversation translated to contents and parts, and
//! each streamed `GenerateContentResponse` translated back to [`ProviderEvent`]s.
//!
//! The key travels only in the `x-goog-api-key` header, never in the URL (URLs end up in
//! messages and logs).
//!
//! Thought signatures: Gemini signs its reasoning with a `thoughtSignature` on some parts (a
//! thought, a function call, or a plain text part) and wants each back exactly where it came,
//! or (for function calls on Gemini 3) refuses the request. So:
//! - a thought part (`"thought": true`) is a [`Part::Thought`] whose opaque value is the part
//!   itself (consecutive unsigned thought pieces merged into one part);
//! - a function call keeps its whole part as [`ToolCall::opaque`] and is sent back as it came;
//! - a text part with a signature but no thought flag stays visible text (it is the answer),
//!   and the signature rides in a [`Part::Thought`] with empty text right after it, whose
//!   opaque value is the part without its text. When the conversation is sent back, that
//!   thought is folded into the text part before it, so the part goes back whole, with the
//!   signature on the very text it was minted for. (A signed part with empty text, as Gemini
//!   sends at the end of a stream, is kept whole in the thought.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::{Body, Decode, WrittenTools, clip, decode, secret_header, stream_error};
use crate::conversation::{ChatMessage, Part, Speaker, StopReason, ToolCall, ToolResult, Usage};
use crate::http::{Http, SseEvent};
use crate::provider::{Provider, ProviderError, ProviderEvent, ProviderRequest, ProviderStream};

pub const DEFAULT_BASE_URL: &str = berth_core::config::ProviderKind::Gemini.default_base_url();

const NAME: &str = "gemini";

/// This dialect's tool definitions, written once per tool set.
static TOOLS: WrittenTools = WrittenTools::new();

/// The prefix of the ids berth makes for calls Gemini gave none (before Gemini 3 it gives
/// none); such an id is never sent back to Gemini.
const MADE_ID_PREFIX: &str = "gemini-call-";

/// Numbers the made ids across the process, so no two calls of a conversation share one.
static MADE_IDS: AtomicU64 = AtomicU64::new(1);

/// The Gemini provider.
pub struct Gemini {
    http: Http,
    base_url: String,
    key: String,
}

/// Each call id, to its function's name and the id Gemini gave it (if it gave one).
type Calls<'a> = HashMap<&'a str, (&'a str, Option<Value>)>;

/// The part of a call of the model's: as Gemini sent it, with its thought signature, when it
/// did. The call is kept in `calls` for the response that answers it.
fn call_part<'a>(call: &'a ToolCall, calls: &mut Calls<'a>) -> Value {
    let gemini_part = call
        .opaque
        .as_ref()
        .filter(|o| o.get("functionCall").is_some());
    let given_id = match gemini_part {
        Some(p) => p.pointer("/functionCall/id").cloned(),
        None if call.id.starts_with(MADE_ID_PREFIX) => None,
        None => Some(json!(call.id)),
    };
    calls.insert(call.id.as_str(), (call.name.as_str(), given_id.clone()));
    if let Some(p) = gemini_part {
        return p.clone();
    }
    let mut function_call = json!({
        "name": call.name,
        "args": match &call.arguments {
            Ok(v) if v.is_object() => v.clone(),
            _ => json!({}),
        },
    });
    if let Some(id) = given_id {
        function_call["id"] = id;
    }
    json!({"functionCall": function_call})
}

/// The part of a tool's result: it names the function it answers, and carries its call's id
/// only when the call had one.
fn result_part(result: &ToolResult, calls: &Calls<'_>) -> Value {
    let (name, id) = calls
        .get(result.call_id.as_str())
        .cloned()
        .unwrap_or((result.name.as_str(), None));
    let key = if result.is_error { "error" } else { "content" };
    let mut response = json!({
        "name": name,
        "response": {key: result.content},
    });
    if let Some(id) = id {
        response["id"] = id;
    }
    json!({"functionResponse": response})
}

impl Gemini {
    /// `base_url` without the version (`https://generativelanguage.googleapis.com`), no
    /// trailing slash.
    pub fn new(http: Http, base_url: String, key: String) -> Self {
        Gemini {
            http,
            base_url,
            key,
        }
    }

    /// The URL the request for `model` goes to: it carries no key.
    pub fn url(&self, model: &str) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        format!(
            "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
            self.base_url,
            escape_segment(model)
        )
    }

    /// The request body of `request`, as `streamGenerateContent` takes it.
    pub fn body(request: &ProviderRequest) -> Body<[Declarations<'_>; 1]> {
        // Each call id, to its function's name and the id Gemini gave it (if it gave one):
        // a function response must name the function it answers, and carry its call's id
        // only when the call had one.
        let mut calls: Calls<'_> = HashMap::new();
        let mut contents = Vec::new();
        for message in &request.messages {
            let mut parts = Vec::new();
            for (i, part) in message.parts.iter().enumerate() {
                match part {
                    Part::Text(text) => {
                        match message.parts.get(i + 1).and_then(text_signature) {
                            Some(signed) => {
                                let mut whole = signed.clone();
                                whole.insert("text".into(), json!(text));
                                parts.push(Value::Object(whole));
                            }
                            // An empty part is refused; an empty text carries nothing.
                            None if text.is_empty() => {}
                            None => parts.push(json!({"text": text})),
                        }
                    }
                    Part::Image(image) => parts.push(json!({
                        "inlineData": {"mimeType": image.mime_type, "data": image.data},
                    })),
                    Part::Thought { opaque, .. } => {
                        let Some(opaque) = opaque.as_ref().filter(|o| is_gemini_thought(o)) else {
                            // Another provider's reasoning, or one with no state to return.
                            continue;
                        };
                        if text_signature(part).is_some() {
                            if matches!(
                                i.checked_sub(1).map(|j| &message.parts[j]),
                                Some(Part::Text(_))
                            ) {
                                // Folded into the text part before it.
                                continue;
                            }
                            let mut whole = opaque.clone();
                            whole["text"] = json!("");
                            parts.push(whole);
                        } else {
                            parts.push(opaque.clone());
                        }
                    }
                    Part::ToolCall(call) => parts.push(call_part(call, &mut calls)),
                    Part::ToolResult(result) => parts.push(result_part(result, &calls)),
                }
            }
            if parts.is_empty() {
                continue;
            }
            contents.push(json!({
                "role": match message.speaker {
                    Speaker::User => "user",
                    Speaker::Assistant => "model",
                },
                "parts": parts,
            }));
        }
        let mut fields = json!({
            "contents": contents,
            "generationConfig": {"maxOutputTokens": request.max_tokens},
        });
        if !request.system.is_empty() {
            fields["systemInstruction"] = json!({"parts": [{"text": request.system}]});
        }
        let tools = (!request.tools.is_empty()).then(|| {
            [Declarations {
                function_declarations: request
                    .tools
                    .iter()
                    .map(|t| ToolDefinition {
                        name: &t.name,
                        description: &t.description,
                        parameters_json_schema: &t.parameters,
                    })
                    .collect(),
            }]
        });
        Body { fields, tools }
    }
}

/// The request's one `tools` entry: its function declarations.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Declarations<'a> {
    function_declarations: Vec<ToolDefinition<'a>>,
}

/// A tool as Gemini is told of it. `parametersJsonSchema` takes the schema as JSON Schema;
/// `parameters` takes only an OpenAPI subset and refuses keywords berth's tool schemas use
/// (`additionalProperties`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolDefinition<'a> {
    name: &'a str,
    description: &'a str,
    parameters_json_schema: &'a Value,
}

/// A model path segment with anything but `[A-Za-z0-9._-]` percent-encoded, so a model name
/// cannot change the URL's shape.
fn escape_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Whether `opaque` is state Gemini gave (a thought part, or a signature).
fn is_gemini_thought(opaque: &Value) -> bool {
    opaque.get("thought").and_then(Value::as_bool) == Some(true)
        || opaque.get("thoughtSignature").is_some()
}

/// The part a signed text part's signature rides in, without its text: `Some` for the
/// thought that follows such a text part.
fn text_signature(part: &Part) -> Option<&Map<String, Value>> {
    match part {
        Part::Thought {
            opaque: Some(Value::Object(o)),
            ..
        } if o.contains_key("thoughtSignature")
            && !o.contains_key("text")
            && o.get("thought").and_then(Value::as_bool) != Some(true) =>
        {
            Some(o)
        }
        _ => None,
    }
}

#[async_trait]
impl Provider for Gemini {
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
            HeaderName::from_static("x-goog-api-key"),
            secret_header(NAME, &self.key)?,
        );
        let url = self.url(&request.model);
        let response = self
            .http
            .post(
                NAME,
                &url,
                headers,
                &Gemini::body(&request).with_written_tools(&request.tools, &TOOLS),
                &cancel,
            )
            .await?;
        Ok(decode(NAME, response, cancel, Decoder::default()))
    }
}

/// The response stream, one `GenerateContentResponse` at a time.
#[derive(Default)]
struct Decoder {
    parts: Vec<Part>,
    /// The last part is unsigned text or an unsigned thought, which the next unsigned piece
    /// of its kind extends.
    open: bool,
    has_calls: bool,
    finish: Option<String>,
    /// The prompt itself was blocked (`promptFeedback.blockReason`).
    blocked: bool,
    usage: Usage,
}

impl Decode for Decoder {
    fn event(
        &mut self,
        event: SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<bool, ProviderError> {
        let response: Value = serde_json::from_str(&event.data).map_err(|e| {
            stream_error(
                NAME,
                format!("a response is not JSON ({e}): {}", clip(&event.data)),
            )
        })?;
        if let Some(error) = response.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| clip(&error.to_string()), str::to_owned);
            return Err(ProviderError::Reported {
                provider: NAME,
                message,
            });
        }
        if let Some(usage) = response.get("usageMetadata") {
            let count = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
            // Counts are of the whole response so far: the last one wins. Thinking tokens are
            // output tokens (they are billed and limited as such).
            self.usage = Usage {
                input_tokens: count("promptTokenCount"),
                output_tokens: count("candidatesTokenCount") + count("thoughtsTokenCount"),
            };
        }
        if response
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
            .is_some()
        {
            self.blocked = true;
        }
        let candidate = response.pointer("/candidates/0");
        if let Some(parts) = candidate
            .and_then(|c| c.pointer("/content/parts"))
            .and_then(Value::as_array)
        {
            for part in parts {
                self.part(part, out);
            }
        }
        if let Some(reason) = candidate
            .and_then(|c| c.get("finishReason"))
            .and_then(Value::as_str)
        {
            self.finish = Some(reason.to_owned());
        }
        // Gemini has no end event: the stream stops after the response with the finish reason.
        Ok(false)
    }

    fn end(&mut self, out: &mut Vec<ProviderEvent>) -> bool {
        if self.finish.is_none() && !self.blocked {
            return false;
        }
        let stop = match self.finish.as_deref() {
            _ if self.blocked => StopReason::Refusal,
            Some("STOP") if self.has_calls => StopReason::ToolUse,
            Some("STOP") | None => StopReason::EndTurn,
            Some("MAX_TOKENS") => StopReason::MaxTokens,
            Some(
                "SAFETY" | "RECITATION" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII"
                | "IMAGE_SAFETY",
            ) => StopReason::Refusal,
            Some(other) => StopReason::Other(other.to_owned()),
        };
        out.push(ProviderEvent::Done {
            message: ChatMessage {
                speaker: Speaker::Assistant,
                parts: std::mem::take(&mut self.parts),
            },
            stop,
            usage: self.usage,
        });
        true
    }
}

impl Decoder {
    fn part(&mut self, part: &Value, out: &mut Vec<ProviderEvent>) {
        let signature = part.get("thoughtSignature").and_then(Value::as_str);
        if let Some(call) = part.get("functionCall") {
            let id = match call.get("id").and_then(Value::as_str) {
                Some(id) if !id.is_empty() => id.to_owned(),
                _ => format!(
                    "{MADE_ID_PREFIX}{}",
                    MADE_IDS.fetch_add(1, Ordering::Relaxed)
                ),
            };
            let call = ToolCall {
                id,
                name: call
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                // Gemini sends a call's arguments whole, as an object, never as text.
                arguments: Ok(call
                    .get("args")
                    .filter(|a| a.is_object())
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Map::new()))),
                opaque: Some(part.clone()),
            };
            out.push(ProviderEvent::ToolCall(call.clone()));
            self.parts.push(Part::ToolCall(call));
            self.has_calls = true;
            self.open = false;
            return;
        }
        let text = part.get("text").and_then(Value::as_str);
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            let text = text.unwrap_or_default();
            if !text.is_empty() {
                out.push(ProviderEvent::ThoughtDelta(text.to_owned()));
            }
            if let (true, None, Some(Part::Thought { text: t, opaque })) =
                (self.open, signature, self.parts.last_mut())
            {
                t.push_str(text);
                if let Some(o) = opaque {
                    o["text"] = json!(t);
                }
                return;
            }
            self.parts.push(Part::Thought {
                text: text.to_owned(),
                opaque: Some(part.clone()),
            });
            self.open = signature.is_none();
            return;
        }
        match (text, signature) {
            (Some(text), None) => {
                if text.is_empty() {
                    return;
                }
                out.push(ProviderEvent::TextDelta(text.to_owned()));
                match (self.open, self.parts.last_mut()) {
                    (true, Some(Part::Text(t))) => t.push_str(text),
                    _ => {
                        self.parts.push(Part::Text(text.to_owned()));
                        self.open = true;
                    }
                }
            }
            (Some(text), Some(_)) if !text.is_empty() => {
                out.push(ProviderEvent::TextDelta(text.to_owned()));
                let mut rest = part.clone();
                if let Some(o) = rest.as_object_mut() {
                    o.remove("text");
                }
                self.parts.push(Part::Text(text.to_owned()));
                self.parts.push(Part::Thought {
                    text: String::new(),
                    opaque: Some(rest),
                });
                self.open = false;
            }
            (_, Some(_)) => {
                // A signature on a part with no text (the end of a stream): kept whole, with
                // the empty text a part needs.
                let mut whole = part.clone();
                whole["text"] = json!("");
                self.parts.push(Part::Thought {
                    text: String::new(),
                    opaque: Some(whole),
                });
                self.open = false;
            }
            // Parts berth does not use (code execution, inline data…).
            (None, None) => {}
        }
    }
}
