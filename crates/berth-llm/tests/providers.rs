//! The three providers against local servers that speak their real streaming wire formats
//! (`berth_testkit::provider_server`): what each sends (the body, the key's header, the call
//! ids after tool use, opaque thinking state sent back verbatim) and what each makes of the
//! stream (text, thoughts, tool calls assembled from pieces, characters split across chunks,
//! stop reasons, usage). How each fails is in `providers_failures.rs`; what only some dialects
//! have, in `providers_dialects.rs`.
//!
//! Each scenario runs once per dialect through `for_each_dialect!` (in `support/`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

#[macro_use]
mod support;

use berth_llm::{ChatMessage, Part, ProviderEvent, StopReason, ToolCall, Usage};
use berth_testkit::provider_server::{ProviderServer, RecordedRequest, Reply, Stop, Turn};
use serde_json::{Value, json};

use support::*;

for_each_dialect!(
    text_streams_in_order,
    the_key_is_in_its_header_never_in_the_url,
    a_tool_conversation_carries_the_call_ids,
    parallel_calls_in_one_message,
    thoughts_stream_and_their_state_goes_back_verbatim,
    a_character_split_across_chunks_comes_out_whole,
    stop_reasons_are_translated,
);

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
