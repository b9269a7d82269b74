//! The three providers against local servers that speak their real streaming wire formats
//! (`berth_testkit::provider_server`): what each sends (the body, the key's header, the call
//! ids after tool use, opaque thinking state sent back verbatim), what each makes of the
//! stream (text, thoughts, tool calls assembled from pieces, stop reasons, usage), and how
//! each fails (a 4xx once, with the provider's own message; 429 and 5xx retried; a stream cut
//! after text never retried; a cancellation at once).
//!
//! Most scenarios run once per dialect through `for_each_dialect!`, which makes a test module
//! per scenario with an `anthropic`, an `openai` and a `gemini` test.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_llm::conversation::Speaker;
use berth_llm::http::{Http, HttpPolicy};
use berth_llm::providers::anthropic::Anthropic;
use berth_llm::providers::gemini::Gemini;
use berth_llm::providers::openai::OpenAi;
use berth_llm::{
    CancellationToken, ChatMessage, Part, Provider, ProviderError, ProviderEvent, ProviderRequest,
    StopReason, ToolCall, ToolResult, ToolSpec, Usage,
};
use berth_testkit::provider_server::{
    Framing, ProviderServer, RecordedRequest, Reply, Stop, Turn, anthropic_stream_error, data_error,
};
use futures::StreamExt;
use serde_json::{Value, json};

const KEY: &str = "test-key-0123456789-secret";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Anthropic,
    OpenAi,
    Gemini,
}

/// Tiny backoffs keep the suite fast; `max_backoff` stays above 1 s so that a
/// `Retry-After: 1` is honoured in full.
fn policy() -> HttpPolicy {
    HttpPolicy {
        attempts: 3,
        backoff: Duration::from_millis(5),
        max_backoff: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(20),
    }
}

impl Dialect {
    fn provider(self, server: &ProviderServer) -> Arc<dyn Provider> {
        let http = Http::new(policy()).expect("an HTTP client");
        let url = server.url().to_owned();
        match self {
            Dialect::Anthropic => Arc::new(Anthropic::new(http, url, KEY.into())),
            Dialect::OpenAi => Arc::new(OpenAi::new(http, format!("{url}/v1"), KEY.into())),
            Dialect::Gemini => Arc::new(Gemini::new(http, url, KEY.into())),
        }
    }

    fn events(self, turn: &Turn) -> Vec<String> {
        match self {
            Dialect::Anthropic => turn.anthropic_events(),
            Dialect::OpenAi => turn.openai_events(),
            Dialect::Gemini => turn.gemini_events(),
        }
    }

    fn reply(self, turn: &Turn) -> Reply {
        Reply::sse(self.events(turn))
    }

    fn error(self, status: u16, message: &str) -> Reply {
        match self {
            Dialect::Anthropic => Reply::anthropic_error(status, message),
            Dialect::OpenAi => Reply::openai_error(status, message),
            Dialect::Gemini => Reply::gemini_error(status, message),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dialect::Anthropic => "claude",
            Dialect::OpenAi => "openai",
            Dialect::Gemini => "gemini",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Dialect::Anthropic => "/v1/messages",
            Dialect::OpenAi => "/v1/chat/completions",
            Dialect::Gemini => "/v1beta/models/test-model:streamGenerateContent?alt=sse",
        }
    }

    /// The call ids (and, for Gemini, function names) of the tool results in a request body's
    /// last message, as the dialect spells them.
    fn result_ids(self, body: &Value) -> Vec<(String, Option<String>)> {
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

fn last<'a>(body: &'a Value, list: &str) -> &'a Value {
    body[list]
        .as_array()
        .and_then(|a| a.last())
        .unwrap_or_else(|| panic!("no {list} in {body}"))
}

/// Makes a module per scenario with one test per dialect.
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

for_each_dialect!(
    text_streams_in_order,
    the_key_is_in_its_header_never_in_the_url,
    a_tool_conversation_carries_the_call_ids,
    parallel_calls_in_one_message,
    thoughts_stream_and_their_state_goes_back_verbatim,
    a_4xx_is_sent_once_with_the_providers_message,
    retry_after_is_honoured,
    a_500_is_retried,
    a_stream_cut_after_text_fails_without_retry,
    a_clean_end_without_the_dialects_end_is_an_error,
    a_character_split_across_chunks_comes_out_whole,
    an_error_inside_the_stream_is_reported,
    cancellation_ends_the_stream_at_once,
    cancellation_before_the_answer_ends_the_request,
    stop_reasons_are_translated,
);

fn read_file_spec() -> ToolSpec {
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

fn request(messages: Vec<ChatMessage>) -> ProviderRequest {
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
struct Outcome {
    events: Vec<ProviderEvent>,
    error: Option<ProviderError>,
}

impl Outcome {
    fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    fn thoughts(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ThoughtDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    fn calls(&self) -> Vec<ToolCall> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ToolCall(c) => Some(c.clone()),
                _ => None,
            })
            .collect()
    }

    /// The `Done` event, which must be the last event and the only one.
    fn done(&self) -> (&ChatMessage, &StopReason, Usage) {
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

    fn message(&self) -> ChatMessage {
        self.done().0.clone()
    }

    fn error(&self) -> &ProviderError {
        self.error
            .as_ref()
            .unwrap_or_else(|| panic!("the stream did not fail: {:#?}", self.events))
    }
}

async fn run(provider: &dyn Provider, request: ProviderRequest) -> Outcome {
    run_with(provider, request, CancellationToken::new()).await
}

async fn run_with(
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
fn results(message: &ChatMessage, outputs: &[(&str, bool)]) -> ChatMessage {
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

// ---------------------------------------------------------------------------------------
// Scenarios, each run for every dialect.

async fn text_streams_in_order(d: Dialect) {
    let server = ProviderServer::start().await;
    server.push(d.reply(&Turn::new().text(["Hel", "lo, ", "world"]).usage(12, 7)));
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(
        out.events[..3],
        [
            ProviderEvent::TextDelta("Hel".into()),
            ProviderEvent::TextDelta("lo, ".into()),
            ProviderEvent::TextDelta("world".into()),
        ]
    );
    let (message, stop, usage) = out.done();
    assert_eq!(message, &ChatMessage::assistant_text("Hello, world"));
    assert_eq!(stop, &StopReason::EndTurn);
    assert_eq!(
        usage,
        Usage {
            input_tokens: 12,
            output_tokens: 7
        }
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path, d.path());
    assert_eq!(requests[0].header("content-type"), Some("application/json"));
}

async fn the_key_is_in_its_header_never_in_the_url(d: Dialect) {
    let server = ProviderServer::start().await;
    server.push(d.reply(&Turn::new().text(["ok"])));
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    out.done();
    let req = &server.requests()[0];
    let (header, value) = match d {
        Dialect::Anthropic => ("x-api-key", KEY.to_owned()),
        Dialect::OpenAi => ("authorization", format!("Bearer {KEY}")),
        Dialect::Gemini => ("x-goog-api-key", KEY.to_owned()),
    };
    assert_eq!(req.header(header), Some(value.as_str()));
    assert!(
        !req.path.contains(KEY),
        "the key is in the URL: {}",
        req.path
    );
    let carrying: Vec<&str> = req
        .headers
        .iter()
        .filter(|(_, v)| v.contains(KEY))
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(carrying, [header], "the key is in one header only");
    assert!(!String::from_utf8_lossy(&req.raw_body).contains(KEY));
    if d == Dialect::Gemini {
        assert_eq!(req.query(), "alt=sse");
    }
}

/// Three requests: the model calls a tool (arguments in pieces), gets its result, calls
/// another, gets an error result, answers. The second and third requests carry the results
/// under the ids (and for Gemini the function names) of their calls.
async fn a_tool_conversation_carries_the_call_ids(d: Dialect) {
    let server = ProviderServer::start().await;
    let provider = d.provider(&server);
    server.push(d.reply(&Turn::new().text(["Let me look."]).tool_call(
        "call_a1",
        "read_file",
        [r#"{"pa"#, r#"th": "sr"#, r#"c/main.rs"}"#],
    )));
    server.push(d.reply(&Turn::new().tool_call(
        "call_b2",
        "list_dir",
        [r#"{"path""#, r#": ".", "deep"#, r#"": true}"#],
    )));
    server.push(d.reply(&Turn::new().text(["Done."])));

    let mut conversation = vec![ChatMessage::user_text("what is in main.rs?")];
    let first = run(&*provider, request(conversation.clone())).await;
    let expected_first = ToolCall {
        id: "call_a1".into(),
        name: "read_file".into(),
        arguments: Ok(json!({"path": "src/main.rs"})),
        opaque: None,
    };
    let calls = first.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (&calls[0].id, &calls[0].name, &calls[0].arguments),
        (
            &expected_first.id,
            &expected_first.name,
            &expected_first.arguments
        )
    );
    let (message, stop, _) = first.done();
    assert_eq!(stop, &StopReason::ToolUse);
    assert_eq!(message.text(), "Let me look.");
    assert!(matches!(message.parts[0], Part::Text(_)), "{message:?}");
    assert_eq!(message.tool_calls().cloned().collect::<Vec<_>>(), calls);
    conversation.push(message.clone());
    conversation.push(results(message, &[("fn main() {}", false)]));

    let second = run(&*provider, request(conversation.clone())).await;
    let calls = second.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_b2");
    assert_eq!(calls[0].name, "list_dir");
    assert_eq!(calls[0].arguments, Ok(json!({"path": ".", "deep": true})));
    let message = second.message();
    conversation.push(message.clone());
    conversation.push(results(&message, &[("no such tool: list_dir", true)]));

    let third = run(&*provider, request(conversation)).await;
    assert_eq!(third.message().text(), "Done.");
    assert_eq!(third.done().1, &StopReason::EndTurn);

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let gemini_name = |n: &str| (d == Dialect::Gemini).then(|| n.to_owned());
    assert_eq!(
        d.result_ids(&requests[1].body),
        [("call_a1".to_owned(), gemini_name("read_file"))]
    );
    assert_eq!(
        d.result_ids(&requests[2].body),
        [("call_b2".to_owned(), gemini_name("list_dir"))]
    );
    assert_results_spelled(d, &requests[2]);
}

/// The dialect's own spelling of the tool calls and results in the last request of
/// `a_tool_conversation_carries_the_call_ids`.
fn assert_results_spelled(d: Dialect, req: &RecordedRequest) {
    let body = &req.body;
    match d {
        Dialect::Anthropic => {
            let messages = body["messages"].as_array().unwrap();
            assert_eq!(messages.len(), 5);
            assert_eq!(
                messages[1]["content"],
                json!([
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "call_a1", "name": "read_file",
                     "input": {"path": "src/main.rs"}}
                ])
            );
            assert_eq!(
                messages[2]["content"],
                json!([{"type": "tool_result", "tool_use_id": "call_a1",
                        "content": "fn main() {}", "is_error": false}])
            );
            assert_eq!(messages[4]["role"], "user");
            assert_eq!(messages[4]["content"][0]["is_error"], true);
        }
        Dialect::OpenAi => {
            let messages = body["messages"].as_array().unwrap();
            // system, user, assistant, tool, assistant, tool
            assert_eq!(messages.len(), 6, "{messages:#?}");
            assert_eq!(
                messages[2],
                json!({"role": "assistant", "content": "Let me look.", "tool_calls": [
                    {"id": "call_a1", "type": "function",
                     "function": {"name": "read_file", "arguments": "{\"path\":\"src/main.rs\"}"}}
                ]})
            );
            assert_eq!(
                messages[3],
                json!({"role": "tool", "tool_call_id": "call_a1", "content": "fn main() {}"})
            );
            assert_eq!(messages[4]["content"], Value::Null);
            assert_eq!(
                messages[5],
                json!({"role": "tool", "tool_call_id": "call_b2",
                       "content": "Error: no such tool: list_dir"})
            );
        }
        Dialect::Gemini => {
            let contents = body["contents"].as_array().unwrap();
            assert_eq!(contents.len(), 5);
            assert_eq!(contents[1]["role"], "model");
            assert_eq!(
                contents[1]["parts"],
                json!([{"text": "Let me look."},
                       {"functionCall": {"name": "read_file", "id": "call_a1",
                                         "args": {"path": "src/main.rs"}}}])
            );
            assert_eq!(
                contents[2],
                json!({"role": "user", "parts": [{"functionResponse": {
                    "name": "read_file", "id": "call_a1",
                    "response": {"content": "fn main() {}"}}}]})
            );
            assert_eq!(
                contents[4]["parts"][0]["functionResponse"]["response"],
                json!({"error": "no such tool: list_dir"})
            );
        }
    }
}

async fn parallel_calls_in_one_message(d: Dialect) {
    let server = ProviderServer::start().await;
    server.push(
        d.reply(
            &Turn::new()
                .tool_call("c1", "read_file", [r#"{"path": "a"#, r#".txt"}"#])
                .tool_call("c2", "read_file", [r#"{"path""#, r#": "b.txt"}"#])
                .tool_call("c3", "list_dir", ["{}"]),
        ),
    );
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("go")]),
    )
    .await;
    let calls = out.calls();
    let summary: Vec<(&str, &str, Result<Value, String>)> = calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone()))
        .collect();
    assert_eq!(
        summary,
        [
            ("c1", "read_file", Ok(json!({"path": "a.txt"}))),
            ("c2", "read_file", Ok(json!({"path": "b.txt"}))),
            ("c3", "list_dir", Ok(json!({}))),
        ]
    );
    let (message, stop, _) = out.done();
    assert_eq!(stop, &StopReason::ToolUse);
    assert_eq!(message.tool_calls().cloned().collect::<Vec<_>>(), calls);
    // The calls come before `Done`, each once.
    assert_eq!(out.events.len(), 4, "{:#?}", out.events);

    // Sent back, the three results answer the three calls, in order.
    server.push(d.reply(&Turn::new().text(["ok"])));
    let conversation = vec![
        ChatMessage::user_text("go"),
        message.clone(),
        results(message, &[("A", false), ("B", false), ("C", false)]),
    ];
    run(&*d.provider(&server), request(conversation))
        .await
        .done();
    let ids: Vec<String> = d
        .result_ids(&server.requests()[1].body)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ids, ["c1", "c2", "c3"]);
}

async fn thoughts_stream_and_their_state_goes_back_verbatim(d: Dialect) {
    let server = ProviderServer::start().await;
    let mut turn = Turn::new().thinking(["The user ", "wants a greeting."], "sig-think-1");
    if d == Dialect::Anthropic {
        turn = turn.redacted_thinking("ENCRYPTED-blob==");
    }
    let turn = turn.text(["Hi", "!"]);
    server.push(d.reply(&turn));
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hello")]),
    )
    .await;
    assert_eq!(out.thoughts(), "The user wants a greeting.");
    assert_eq!(out.text(), "Hi!");
    // Thought deltas come before the text.
    let first_text = out
        .events
        .iter()
        .position(|e| matches!(e, ProviderEvent::TextDelta(_)))
        .unwrap();
    assert!(matches!(out.events[0], ProviderEvent::ThoughtDelta(_)));
    assert!(
        out.events[..first_text]
            .iter()
            .all(|e| matches!(e, ProviderEvent::ThoughtDelta(_)))
    );
    let message = out.message();
    assert_eq!(message.text(), "Hi!");
    let thought_text: String = message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Thought { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thought_text, "The user wants a greeting.");

    server.push(d.reply(&Turn::new().text(["sure"])));
    let conversation = vec![
        ChatMessage::user_text("hello"),
        message,
        ChatMessage::user_text("again"),
    ];
    run(&*d.provider(&server), request(conversation))
        .await
        .done();
    let body = &server.requests()[1].body;
    match d {
        Dialect::Anthropic => assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "The user wants a greeting.",
                 "signature": "sig-think-1"},
                {"type": "redacted_thinking", "data": "ENCRYPTED-blob=="},
                {"type": "text", "text": "Hi!"}
            ]})
        ),
        // Chat Completions has no place for reasoning: only the answer goes back.
        Dialect::OpenAi => assert_eq!(
            body["messages"][2],
            json!({"role": "assistant", "content": "Hi!"})
        ),
        // Each part as it came: the unsigned first piece, the signed second one, the text.
        Dialect::Gemini => assert_eq!(
            body["contents"][1],
            json!({"role": "model", "parts": [
                {"text": "The user ", "thought": true},
                {"text": "wants a greeting.", "thought": true, "thoughtSignature": "sig-think-1"},
                {"text": "Hi!"}
            ]})
        ),
    }
}

async fn a_4xx_is_sent_once_with_the_providers_message(d: Dialect) {
    let server = ProviderServer::start().await;
    // Nothing else is queued: a second request would be answered "no reply scripted" and
    // counted.
    server.push(d.error(400, "max_tokens: 999999 is greater than the maximum"));
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(
        out.error(),
        &ProviderError::Status {
            provider: d.name(),
            status: 400,
            message: "max_tokens: 999999 is greater than the maximum".into(),
        }
    );
    assert!(out.events.is_empty());
    assert_eq!(server.request_count(), 1);

    server.push(d.error(401, "invalid x-api-key"));
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert!(
        matches!(out.error(), ProviderError::Status { status: 401, message, .. }
                 if message == "invalid x-api-key"),
        "{:?}",
        out.error
    );
    assert_eq!(server.request_count(), 2);
}

async fn retry_after_is_honoured(d: Dialect) {
    let server = ProviderServer::start().await;
    server.push(d.error(429, "rate limited").header("Retry-After", "1"));
    server.push(d.reply(&Turn::new().text(["after the wait"])));
    let started = Instant::now();
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    let waited = started.elapsed();
    assert_eq!(out.message().text(), "after the wait");
    assert_eq!(server.request_count(), 2);
    assert!(
        waited >= Duration::from_millis(950),
        "Retry-After: 1 was not honoured: {waited:?}"
    );
    // The two requests are the same request.
    let requests = server.requests();
    assert_eq!(requests[0].body, requests[1].body);
}

/// A `Retry-After` no clock can wait for falls back to the backoff; it must not panic.
#[tokio::test]
async fn an_absurd_retry_after_falls_back_to_the_backoff() {
    let server = ProviderServer::start().await;
    let d = Dialect::Anthropic;
    server.push(d.error(429, "rate limited").header("Retry-After", "1e400"));
    server.push(d.error(429, "rate limited").header("Retry-After", "-5"));
    server.push(d.reply(&Turn::new().text(["ok"])));
    let started = Instant::now();
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(out.message().text(), "ok");
    assert_eq!(server.request_count(), 3);
    assert!(started.elapsed() < Duration::from_secs(1));
}

async fn a_500_is_retried(d: Dialect) {
    let server = ProviderServer::start().await;
    server.push(d.error(500, "internal error"));
    server.push(d.error(503, "overloaded"));
    server.push(d.reply(&Turn::new().text(["third time"])));
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(out.message().text(), "third time");
    assert_eq!(server.request_count(), 3);

    // With every attempt failing, the last one's message is the error.
    for _ in 0..3 {
        server.push(d.error(500, "still broken"));
    }
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(
        out.error(),
        &ProviderError::Status {
            provider: d.name(),
            status: 500,
            message: "still broken".into()
        }
    );
    assert_eq!(server.request_count(), 6);
}

/// The events up to and including the first that holds `needle`.
fn events_through(d: Dialect, turn: &Turn, needle: &str) -> usize {
    d.events(turn)
        .iter()
        .position(|e| e.contains(needle))
        .unwrap()
        + 1
}

async fn a_stream_cut_after_text_fails_without_retry(d: Dialect) {
    let server = ProviderServer::start().await;
    let turn = Turn::new().text(["one ", "two ", "three"]);
    server.push(d.reply(&turn).cut_after(events_through(d, &turn, "two ")));
    server.push(d.reply(&turn));
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(out.text(), "one two ");
    assert!(
        matches!(out.error(), ProviderError::Stream { provider, .. } if *provider == d.name()),
        "{:?}",
        out.error
    );
    assert!(
        !out.events
            .iter()
            .any(|e| matches!(e, ProviderEvent::Done { .. }))
    );
    assert_eq!(
        server.request_count(),
        1,
        "a started stream is never retried"
    );
}

async fn a_clean_end_without_the_dialects_end_is_an_error(d: Dialect) {
    let server = ProviderServer::start().await;
    let turn = Turn::new().text(["one ", "two ", "three"]);
    // Without chunked framing a cut is a clean end of the body to HTTP: only the dialect can
    // tell the answer is unfinished.
    server.push(
        d.reply(&turn)
            .framing(Framing::Close)
            .cut_after(events_through(d, &turn, "two ")),
    );
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(out.text(), "one two ");
    assert_eq!(
        out.error(),
        &ProviderError::Stream {
            provider: d.name(),
            message: "the stream ended early".into()
        }
    );
    assert_eq!(server.request_count(), 1);

    // The whole answer with the same framing is fine.
    server.push(d.reply(&turn).framing(Framing::Close));
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(out.message().text(), "one two three");
}

async fn a_character_split_across_chunks_comes_out_whole(d: Dialect) {
    let server = ProviderServer::start().await;
    let text = "caf\u{e9} \u{1F600} na\u{ef}ve";
    let bytes = d.events(&Turn::new().text([text])).concat().into_bytes();
    let at = |needle: &str, offset: usize| {
        let n = needle.as_bytes();
        bytes.windows(n.len()).position(|w| w == n).unwrap() + offset
    };
    // Inside the é (2 bytes), inside the emoji (4 bytes), inside the ï.
    let cuts = [at("\u{e9}", 1), at("\u{1F600}", 2), at("\u{ef}", 1)];
    let mut chunks = Vec::new();
    let mut from = 0;
    for cut in cuts {
        chunks.push(bytes[from..cut].to_vec());
        from = cut;
    }
    chunks.push(bytes[from..].to_vec());
    assert!(
        std::str::from_utf8(&chunks[1]).is_err(),
        "the split is inside a character"
    );
    server.push(Reply::sse_bytes(chunks));
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(out.text(), text);
    assert_eq!(out.message().text(), text);
}

async fn an_error_inside_the_stream_is_reported(d: Dialect) {
    let server = ProviderServer::start().await;
    let turn = Turn::new().text(["partial ", "answer"]);
    let mut events = d.events(&turn);
    let keep = events_through(d, &turn, "partial ");
    events.truncate(keep);
    events.push(match d {
        Dialect::Anthropic => anthropic_stream_error("overloaded_error", "Overloaded"),
        _ => data_error(503, "Overloaded"),
    });
    server.push(Reply::sse(events));
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(out.text(), "partial ");
    match out.error() {
        ProviderError::Reported { provider, message } => {
            assert_eq!(*provider, d.name());
            assert!(message.contains("Overloaded"), "{message}");
        }
        other => panic!("not a reported error: {other:?}"),
    }
    assert_eq!(server.request_count(), 1);
}

async fn cancellation_ends_the_stream_at_once(d: Dialect) {
    let server = ProviderServer::start().await;
    let turn = Turn::new().text(["first ", "never"]);
    server.push(
        d.reply(&turn)
            .pause_after(events_through(d, &turn, "first "), Duration::from_secs(30)),
    );
    let cancel = CancellationToken::new();
    let provider = d.provider(&server);
    let mut stream = provider
        .stream(request(vec![ChatMessage::user_text("hi")]), cancel.clone())
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap();
    assert_eq!(first, Some(Ok(ProviderEvent::TextDelta("first ".into()))));
    // The server is silent now; the cancellation must not wait for it.
    let started = Instant::now();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        canceller.cancel();
    });
    let next = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("the cancellation ended the wait");
    assert_eq!(next, Some(Err(ProviderError::Cancelled)));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(stream.next().await, None);
}

async fn cancellation_before_the_answer_ends_the_request(d: Dialect) {
    let server = ProviderServer::start().await;
    server.push(
        d.reply(&Turn::new().text(["late"]))
            .delay_head(Duration::from_secs(30)),
    );
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(5),
        run_with(
            &*d.provider(&server),
            request(vec![ChatMessage::user_text("hi")]),
            cancel,
        ),
    )
    .await
    .expect("the cancellation ended the request");
    assert_eq!(out.error(), &ProviderError::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(2));
}

async fn stop_reasons_are_translated(d: Dialect) {
    let server = ProviderServer::start().await;
    for (stop, expected) in [
        (Stop::MaxTokens, StopReason::MaxTokens),
        (Stop::Refusal, StopReason::Refusal),
        (Stop::EndTurn, StopReason::EndTurn),
    ] {
        server.push(d.reply(&Turn::new().text(["x"]).stop(stop)));
        let out = run(
            &*d.provider(&server),
            request(vec![ChatMessage::user_text("hi")]),
        )
        .await;
        assert_eq!(out.done().1, &expected);
    }
    let (raw, expected) = match d {
        Dialect::Anthropic => ("pause_turn", StopReason::Other("pause_turn".into())),
        Dialect::OpenAi => ("content_filter", StopReason::Refusal),
        Dialect::Gemini => ("RECITATION", StopReason::Refusal),
    };
    server.push(d.reply(&Turn::new().text(["x"]).stop(Stop::Raw(raw.into()))));
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(out.done().1, &expected);
}

// ---------------------------------------------------------------------------------------
// What only some dialects have.

#[tokio::test]
async fn anthropic_request_body() {
    let server = ProviderServer::start().await;
    server.push(Reply::anthropic(&Turn::new().text(["ok"])));
    let provider = Dialect::Anthropic.provider(&server);
    run(&*provider, request(vec![ChatMessage::user_text("hi")]))
        .await
        .done();
    let req = &server.requests()[0];
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        req.body,
        json!({
            "model": "test-model",
            "max_tokens": 1000,
            "system": "Be brief.",
            "stream": true,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "tools": [{
                "name": "read_file",
                "description": "Reads a file of the working directory.",
                "input_schema": read_file_spec().parameters,
            }],
        })
    );
    // No system prompt and no tools: neither key is sent.
    let mut bare = request(vec![ChatMessage::user_text("hi")]);
    bare.system.clear();
    bare.tools = Vec::new().into();
    let body = Anthropic::body(&bare).to_value();
    assert!(body.get("system").is_none() && body.get("tools").is_none());
}

#[tokio::test]
async fn openai_request_body() {
    let server = ProviderServer::start().await;
    server.push(Reply::openai(&Turn::new().text(["ok"])));
    let provider = Dialect::OpenAi.provider(&server);
    run(&*provider, request(vec![ChatMessage::user_text("hi")]))
        .await
        .done();
    let req = &server.requests()[0];
    assert_eq!(
        req.body,
        json!({
            "model": "test-model",
            "stream": true,
            "stream_options": {"include_usage": true},
            // A local server: the field every compatible server knows.
            "max_tokens": 1000,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "read_file",
                "description": "Reads a file of the working directory.",
                "parameters": read_file_spec().parameters,
            }}],
        })
    );
    // api.openai.com itself gets the field its reasoning models require.
    let body = OpenAi::body(
        &request(vec![ChatMessage::user_text("hi")]),
        "https://api.openai.com/v1",
    )
    .to_value();
    assert_eq!(body["max_completion_tokens"], 1000);
    assert!(body.get("max_tokens").is_none());
}

#[tokio::test]
async fn gemini_request_body() {
    let server = ProviderServer::start().await;
    server.push(Reply::gemini(&Turn::new().text(["ok"])));
    let provider = Dialect::Gemini.provider(&server);
    run(&*provider, request(vec![ChatMessage::user_text("hi")]))
        .await
        .done();
    let req = &server.requests()[0];
    assert_eq!(
        req.body,
        json!({
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"functionDeclarations": [{
                "name": "read_file",
                "description": "Reads a file of the working directory.",
                "parametersJsonSchema": read_file_spec().parameters,
            }]}],
            "generationConfig": {"maxOutputTokens": 1000},
        })
    );
}

/// An image a person attached reaches each provider in its own documented form, before the
/// text, with its data untouched.
#[tokio::test]
async fn images_in_each_dialect() {
    // A 1x1 PNG.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==";
    let image = berth_llm::Image::new("image/png", png).unwrap();
    let message = || {
        vec![ChatMessage::user_with_images(
            "what is this?",
            std::slice::from_ref(&image),
        )]
    };
    let claude = Anthropic::body(&request(message())).to_value();
    assert_eq!(
        claude["messages"][0]["content"],
        json!([
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
            {"type": "text", "text": "what is this?"},
        ])
    );
    let openai = OpenAi::body(&request(message()), "https://api.openai.com/v1").to_value();
    assert_eq!(
        openai["messages"][1],
        json!({"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}},
            {"type": "text", "text": "what is this?"},
        ]})
    );
    let gemini = Gemini::body(&request(message())).to_value();
    assert_eq!(
        gemini["contents"][0]["parts"],
        json!([
            {"inlineData": {"mimeType": "image/png", "data": png}},
            {"text": "what is this?"},
        ])
    );

    // What no provider takes is refused before it is sent, saying what to send instead.
    let tiff = berth_llm::Image::new("image/tiff", png).unwrap_err();
    assert!(tiff.contains("PNG, JPEG, GIF or WebP"), "{tiff}");
    let not_base64 = berth_llm::Image::new("image/png", "not base64!").unwrap_err();
    assert!(not_base64.contains("not base64"), "{not_base64}");
    let huge = "A".repeat(8 * 1024 * 1024);
    let too_big = berth_llm::Image::new("image/png", &huge).unwrap_err();
    assert!(too_big.contains("at most 5 MB"), "{too_big}");
    // Line breaks inside base64 (as some encoders write it) are fine, and dropped.
    let wrapped = format!("{}\n{}", &png[..40], &png[40..]);
    assert_eq!(berth_llm::Image::new("IMAGE/PNG", &wrapped).unwrap(), image);
}

/// Anthropic and OpenAI stream arguments as text, which may not be JSON: the call comes
/// through with the raw text as its error, to be reported back to the model, never run.
#[tokio::test]
async fn malformed_arguments_are_kept_raw_anthropic() {
    malformed_arguments(Dialect::Anthropic).await;
}

#[tokio::test]
async fn malformed_arguments_are_kept_raw_openai() {
    malformed_arguments(Dialect::OpenAi).await;
}

async fn malformed_arguments(d: Dialect) {
    let server = ProviderServer::start().await;
    server.push(
        d.reply(
            &Turn::new()
                .tool_call("bad1", "read_file", [r#"{"path": "#, r#""a.txt""#])
                .tool_call("good2", "read_file", [r#"{"path": "b.txt"}"#])
                .tool_call("empty3", "list_dir", Vec::<String>::new()),
        ),
    );
    let out = run(
        &*d.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    let args: Vec<Result<Value, String>> = out.calls().into_iter().map(|c| c.arguments).collect();
    assert_eq!(
        args,
        [
            Err(r#"{"path": "a.txt""#.to_owned()),
            Ok(json!({"path": "b.txt"})),
            // No arguments at all are no arguments, not an error.
            Ok(json!({})),
        ]
    );
    let message = out.message();
    assert_eq!(message.tool_calls().count(), 3);

    // Sent back: OpenAI gets the raw text; Anthropic, whose `input` must be an object, an
    // empty one (the call never ran; its error result says why).
    server.push(d.reply(&Turn::new().text(["ok"])));
    let conversation = vec![
        ChatMessage::user_text("hi"),
        message.clone(),
        results(
            &message,
            &[
                ("the arguments are not JSON", true),
                ("b", false),
                ("[]", false),
            ],
        ),
    ];
    run(&*d.provider(&server), request(conversation))
        .await
        .done();
    let body = &server.requests()[1].body;
    match d {
        Dialect::Anthropic => {
            assert_eq!(body["messages"][1]["content"][0]["input"], json!({}))
        }
        _ => assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            r#"{"path": "a.txt""#
        ),
    }
}

/// Gemini sends a call's arguments as an object inside JSON, so they cannot be malformed on
/// their own; a response that is not JSON at all is a stream error.
#[tokio::test]
async fn malformed_json_is_a_stream_error_gemini() {
    let server = ProviderServer::start().await;
    let mut events = Turn::new().text(["fine "]).gemini_events();
    events.insert(
        1,
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": \n\n".into(),
    );
    server.push(Reply::sse(events));
    let out = run(
        &*Dialect::Gemini.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert!(
        matches!(out.error(), ProviderError::Stream { message, .. } if message.contains("not JSON")),
        "{:?}",
        out.error
    );
}

/// Gemini before version 3 gives calls no id: berth makes unique ones, never sends them back,
/// and ties each function response to its call by the called function's name. Signed parts
/// (a call, a text) go back exactly as they came.
#[tokio::test]
async fn gemini_calls_without_ids_and_signed_parts() {
    let server = ProviderServer::start().await;
    let provider = Dialect::Gemini.provider(&server);
    server.push(Reply::gemini(
        &Turn::new()
            .signed_tool_call("", "read_file", [r#"{"path": "a.txt"}"#], "sig-call-1")
            .tool_call("", "list_dir", [r#"{"path": "."}"#]),
    ));
    server.push(Reply::gemini(
        &Turn::new().signed_text(["The file ", "says hi."], "sig-text-2"),
    ));
    server.push(Reply::gemini(&Turn::new().text(["bye"])));

    let mut conversation = vec![ChatMessage::user_text("read a.txt")];
    let first = run(&*provider, request(conversation.clone())).await;
    let calls = first.calls();
    assert_eq!(calls.len(), 2);
    assert!(
        calls.iter().all(|c| c.id.starts_with("gemini-call-")),
        "{calls:?}"
    );
    assert_ne!(calls[0].id, calls[1].id);
    assert_eq!(
        calls[0].opaque,
        Some(
            json!({"functionCall": {"name": "read_file", "args": {"path": "a.txt"}},
                    "thoughtSignature": "sig-call-1"})
        )
    );
    assert_eq!(first.done().1, &StopReason::ToolUse);
    let message = first.message();
    conversation.push(message.clone());
    // The results name the wrong function: the call's own name is what Gemini must get.
    let mut answers = results(&message, &[("hi", false), ("a.txt", false)]);
    for part in &mut answers.parts {
        if let Part::ToolResult(r) = part {
            r.name = "not-the-name".into();
        }
    }
    conversation.push(answers);

    let second = run(&*provider, request(conversation.clone())).await;
    assert_eq!(second.text(), "The file says hi.");
    let message = second.message();
    assert_eq!(message.text(), "The file says hi.");
    conversation.push(message);
    conversation.push(ChatMessage::user_text("thanks"));

    run(&*provider, request(conversation)).await.done();
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for req in &requests[1..] {
        let contents = req.body["contents"].as_array().unwrap();
        assert_eq!(
            contents[1],
            json!({"role": "model", "parts": [
                {"functionCall": {"name": "read_file", "args": {"path": "a.txt"}},
                 "thoughtSignature": "sig-call-1"},
                {"functionCall": {"name": "list_dir", "args": {"path": "."}}}
            ]})
        );
        assert_eq!(
            contents[2],
            json!({"role": "user", "parts": [
                {"functionResponse": {"name": "read_file", "response": {"content": "hi"}}},
                {"functionResponse": {"name": "list_dir", "response": {"content": "a.txt"}}}
            ]})
        );
    }
    assert_eq!(
        requests[2].body["contents"][3],
        json!({"role": "model", "parts": [
            {"text": "The file "},
            {"text": "says hi.", "thoughtSignature": "sig-text-2"}
        ]})
    );
}

/// Gemini ends a stream with a signature on an empty text part: it goes back as it came.
#[tokio::test]
async fn gemini_signature_on_an_empty_part_goes_back_whole() {
    let server = ProviderServer::start().await;
    let mut events = Turn::new().text(["Hello"]).gemini_events();
    // The finish reason moves to a last response whose only part is the signature.
    events[0] = events[0].replace(",\"finishReason\":\"STOP\"", "");
    events.push(
        "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"\",\
         \"thoughtSignature\":\"sig-end\"}]},\"finishReason\":\"STOP\",\"index\":0}]}\n\n"
            .into(),
    );
    server.push(Reply::sse(events));
    server.push(Reply::gemini(&Turn::new().text(["ok"])));
    let provider = Dialect::Gemini.provider(&server);
    let out = run(&*provider, request(vec![ChatMessage::user_text("hi")])).await;
    let message = out.message();
    assert_eq!(message.text(), "Hello");
    let conversation = vec![
        ChatMessage::user_text("hi"),
        message,
        ChatMessage::user_text("more"),
    ];
    run(&*provider, request(conversation)).await.done();
    assert_eq!(
        server.requests()[1].body["contents"][1]["parts"],
        json!([{"text": "Hello"}, {"text": "", "thoughtSignature": "sig-end"}])
    );
}

/// Thoughts from another provider (switched mid-session) carry no state this one knows: they
/// are left out rather than sent as something they are not.
#[tokio::test]
async fn foreign_thoughts_are_not_sent() {
    let claude_thought = Part::Thought {
        text: "hmm".into(),
        opaque: Some(json!({"type": "thinking", "thinking": "hmm", "signature": "s"})),
    };
    let gemini_thought = Part::Thought {
        text: "hmm".into(),
        opaque: Some(json!({"text": "hmm", "thought": true, "thoughtSignature": "g"})),
    };
    let conversation = |thought: Part| {
        request(vec![
            ChatMessage::user_text("hi"),
            ChatMessage {
                speaker: Speaker::Assistant,
                parts: vec![thought, Part::Text("answer".into())],
            },
            ChatMessage::user_text("again"),
        ])
    };
    let body = Anthropic::body(&conversation(gemini_thought.clone())).to_value();
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "text", "text": "answer"}])
    );
    let body = Gemini::body(&conversation(claude_thought)).to_value();
    assert_eq!(body["contents"][1]["parts"], json!([{"text": "answer"}]));
    let body = Gemini::body(&conversation(gemini_thought)).to_value();
    assert_eq!(
        body["contents"][1]["parts"],
        json!([{"text": "hmm", "thought": true, "thoughtSignature": "g"}, {"text": "answer"}])
    );
}

/// OpenAI-compatible servers that stream reasoning as `reasoning` (not `reasoning_content`),
/// and that say `stop` although the message calls tools.
#[tokio::test]
async fn openai_compatible_variants() {
    let server = ProviderServer::start().await;
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    server.push(Reply::sse([
        chunk(json!({"role": "assistant"}), Value::Null),
        chunk(json!({"reasoning": "thinking..."}), Value::Null),
        chunk(json!({"content": "calling"}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "c9", "type": "function",
                                   "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("stop")),
        "data: [DONE]\n\n".to_owned(),
    ]));
    let out = run(
        &*Dialect::OpenAi.provider(&server),
        request(vec![ChatMessage::user_text("hi")]),
    )
    .await;
    assert_eq!(out.thoughts(), "thinking...");
    let (message, stop, usage) = out.done();
    assert_eq!(stop, &StopReason::ToolUse);
    assert_eq!(usage, Usage::default());
    assert_eq!(
        message.parts[..2],
        [
            Part::Thought {
                text: "thinking...".into(),
                opaque: None
            },
            Part::Text("calling".into())
        ]
    );
    assert_eq!(message.tool_calls().next().unwrap().id, "c9");
}

/// The server is usable from a plain `#[test]` through its own runtime thread, as the
/// end-to-end tests of `berth chat -p` use it.
#[test]
fn the_server_runs_in_the_background_for_blocking_tests() {
    let server = ProviderServer::start_in_background();
    server.push(Reply::anthropic(&Turn::new().text(["from a thread"])));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = server.url().to_owned();
    let out = std::thread::spawn(move || {
        runtime.block_on(async move {
            let http = Http::new(policy()).unwrap();
            let provider = Anthropic::new(http, url, KEY.into());
            run(&provider, request(vec![ChatMessage::user_text("hi")])).await
        })
    })
    .join()
    .unwrap();
    assert_eq!(out.message().text(), "from a thread");
    assert_eq!(server.requests()[0].path, "/v1/messages");
}
