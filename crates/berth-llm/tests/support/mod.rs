//! What the provider tests share: the three dialects against `berth_testkit`'s local provider
//! servers, a request with one tool, the outcome of a stream, and `for_each_dialect!`, which
//! makes a test module per scenario with an `anthropic`, an `openai` and a `gemini` test.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use berth_llm::conversation::Speaker;
use berth_llm::http::{Http, HttpPolicy};
use berth_llm::providers::anthropic::Anthropic;
use berth_llm::providers::gemini::Gemini;
use berth_llm::providers::openai::OpenAi;
use berth_llm::{
    CancellationToken, ChatMessage, Part, Provider, ProviderError, ProviderEvent, ProviderRequest,
    StopReason, ToolCall, ToolResult, ToolSpec, Usage,
};
use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use futures::StreamExt;
use serde_json::{Value, json};

/// Makes a module per scenario with one test per dialect.
#[allow(unused_macros)] // `providers_dialects.rs` has no scenario run for every dialect
macro_rules! for_each_dialect {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            use super::*;
            #[tokio::test]
            async fn anthropic() {
                super::$scenario(Dialect::Anthropic).await
            }
            #[tokio::test]
            async fn openai() {
                super::$scenario(Dialect::OpenAi).await
            }
            #[tokio::test]
            async fn gemini() {
                super::$scenario(Dialect::Gemini).await
            }
        }
    )*};
}

pub const KEY: &str = "test-key-0123456789-secret";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Anthropic,
    OpenAi,
    Gemini,
}

/// Tiny backoffs keep the suite fast; `max_backoff` stays above 1 s so that a
/// `Retry-After: 1` is honoured in full.
pub fn policy() -> HttpPolicy {
    HttpPolicy {
        attempts: 3,
        backoff: Duration::from_millis(5),
        max_backoff: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(20),
    }
}

impl Dialect {
    pub fn provider(self, server: &ProviderServer) -> Arc<dyn Provider> {
        let http = Http::new(policy()).expect("an HTTP client");
        let url = server.url().to_owned();
        match self {
            Dialect::Anthropic => Arc::new(Anthropic::new(http, url, KEY.into())),
            Dialect::OpenAi => Arc::new(OpenAi::new(http, format!("{url}/v1"), KEY.into())),
            Dialect::Gemini => Arc::new(Gemini::new(http, url, KEY.into())),
        }
    }

    pub fn events(self, turn: &Turn) -> Vec<String> {
        match self {
            Dialect::Anthropic => turn.anthropic_events(),
            Dialect::OpenAi => turn.openai_events(),
            Dialect::Gemini => turn.gemini_events(),
        }
    }

    pub fn reply(self, turn: &Turn) -> Reply {
        Reply::sse(self.events(turn))
    }

    pub fn error(self, status: u16, message: &str) -> Reply {
        match self {
            Dialect::Anthropic => Reply::anthropic_error(status, message),
            Dialect::OpenAi => Reply::openai_error(status, message),
            Dialect::Gemini => Reply::gemini_error(status, message),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dialect::Anthropic => "claude",
            Dialect::OpenAi => "openai",
            Dialect::Gemini => "gemini",
        }
    }

    pub fn path(self) -> &'static str {
        match self {
            Dialect::Anthropic => "/v1/messages",
            Dialect::OpenAi => "/v1/chat/completions",
            Dialect::Gemini => "/v1beta/models/test-model:streamGenerateContent?alt=sse",
        }
    }

    /// The call ids (and, for Gemini, function names) of the tool results in a request body's
    /// last message, as the dialect spells them.
    pub fn result_ids(self, body: &Value) -> Vec<(String, Option<String>)> {
        let s = |v: &Value| v.as_str().map(str::to_owned);
        match self {
            Dialect::Anthropic => last(body, "messages")["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| (s(&b["tool_use_id"]).unwrap(), None))
                .collect(),
            Dialect::OpenAi => {
                // The tool messages after the last assistant message.
                let messages = body["messages"].as_array().unwrap();
                let from = messages
                    .iter()
                    .rposition(|m| m["role"] == "assistant")
                    .unwrap();
                messages[from + 1..]
                    .iter()
                    .filter(|m| m["role"] == "tool")
                    .map(|m| (s(&m["tool_call_id"]).unwrap(), None))
                    .collect()
            }
            Dialect::Gemini => last(body, "contents")["parts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p.get("functionResponse"))
                .map(|r| (s(&r["id"]).unwrap_or_default(), s(&r["name"])))
                .collect(),
        }
    }
}

pub fn last<'a>(body: &'a Value, list: &str) -> &'a Value {
    body[list]
        .as_array()
        .and_then(|a| a.last())
        .unwrap_or_else(|| panic!("no {list} in {body}"))
}

pub fn read_file_spec() -> ToolSpec {
    ToolSpec {
        name: "read_file".into(),
        description: "Reads a file of the working directory.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": false
        }),
    }
}

pub fn request(messages: Vec<ChatMessage>) -> ProviderRequest {
    ProviderRequest {
        model: "test-model".into(),
        system: "Be brief.".into(),
        messages,
        tools: vec![read_file_spec()].into(),
        max_tokens: 1000,
    }
}

/// Everything a stream yielded: its events, and the error that ended it, if one did.
#[derive(Debug)]
pub struct Outcome {
    pub events: Vec<ProviderEvent>,
    pub error: Option<ProviderError>,
}

impl Outcome {
    pub fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn thoughts(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ThoughtDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn calls(&self) -> Vec<ToolCall> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ToolCall(c) => Some(c.clone()),
                _ => None,
            })
            .collect()
    }

    /// The `Done` event, which must be the last event and the only one.
    pub fn done(&self) -> (&ChatMessage, &StopReason, Usage) {
        assert!(self.error.is_none(), "the stream failed: {:?}", self.error);
        let dones = self
            .events
            .iter()
            .filter(|e| matches!(e, ProviderEvent::Done { .. }))
            .count();
        assert_eq!(dones, 1, "exactly one Done: {:#?}", self.events);
        match self.events.last() {
            Some(ProviderEvent::Done {
                message,
                stop,
                usage,
            }) => (message, stop, *usage),
            other => panic!("the last event is not Done: {other:?}"),
        }
    }

    pub fn message(&self) -> ChatMessage {
        self.done().0.clone()
    }

    pub fn error(&self) -> &ProviderError {
        self.error
            .as_ref()
            .unwrap_or_else(|| panic!("the stream did not fail: {:#?}", self.events))
    }
}

pub async fn run(provider: &dyn Provider, request: ProviderRequest) -> Outcome {
    run_with(provider, request, CancellationToken::new()).await
}

pub async fn run_with(
    provider: &dyn Provider,
    request: ProviderRequest,
    cancel: CancellationToken,
) -> Outcome {
    let mut stream = match provider.stream(request, cancel).await {
        Ok(s) => s,
        Err(e) => {
            return Outcome {
                events: Vec::new(),
                error: Some(e),
            };
        }
    };
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(e) => events.push(e),
            Err(e) => {
                assert!(
                    stream.next().await.is_none(),
                    "an error must end the stream"
                );
                return Outcome {
                    events,
                    error: Some(e),
                };
            }
        }
    }
    Outcome {
        events,
        error: None,
    }
}

/// The user message answering each call of `message` with `outputs`, in order
/// (`(content, is_error)`).
pub fn results(message: &ChatMessage, outputs: &[(&str, bool)]) -> ChatMessage {
    let calls: Vec<&ToolCall> = message.tool_calls().collect();
    assert_eq!(calls.len(), outputs.len(), "one output per call");
    ChatMessage {
        speaker: Speaker::User,
        parts: calls
            .iter()
            .zip(outputs)
            .map(|(call, (content, is_error))| {
                Part::ToolResult(ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: (*content).to_owned(),
                    is_error: *is_error,
                })
            })
            .collect(),
    }
}
