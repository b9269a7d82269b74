//! What only some of the providers have, against local servers that speak their real
//! streaming wire formats: each dialect's request body, images, malformed tool arguments kept
//! raw, Gemini's calls without ids and its signed parts, foreign thoughts never sent, the
//! OpenAI-compatible variants, and the server used from blocking tests.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

#[macro_use]
mod support;

use berth_llm::conversation::Speaker;
use berth_llm::http::Http;
use berth_llm::providers::anthropic::Anthropic;
use berth_llm::providers::gemini::Gemini;
use berth_llm::providers::openai::OpenAi;
use berth_llm::{ChatMessage, Part, ProviderError, StopReason, Usage};
use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use serde_json::{Value, json};

use support::*;

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

/// Each dialect writes a tool set's definitions once and keeps them: a request carries the
/// tools of its own set, whatever set came before it, and the same definitions as its
/// dialect's body writes them afresh.
#[tokio::test]
async fn tools_written_once_are_the_requests_own() {
    for d in [Dialect::Anthropic, Dialect::OpenAi, Dialect::Gemini] {
        let server = ProviderServer::start().await;
        let provider = d.provider(&server);
        let mut write_file = read_file_spec();
        write_file.name = "write_file".into();
        write_file.description = "Writes a file of the working directory.".into();
        let read: std::sync::Arc<[berth_llm::ToolSpec]> = vec![read_file_spec()].into();
        let both: std::sync::Arc<[berth_llm::ToolSpec]> =
            vec![read_file_spec(), write_file.clone()].into();
        // The same set twice, another set, the first again, then a set equal to the second
        // but made anew.
        let equal_to_both: std::sync::Arc<[berth_llm::ToolSpec]> =
            vec![read_file_spec(), write_file].into();
        let sets = [&read, &read, &both, &read, &equal_to_both];
        for set in sets {
            server.push(d.reply(&Turn::new().text(["ok"])));
            let mut asked = request(vec![ChatMessage::user_text("hi")]);
            asked.tools = set.clone();
            let fresh = match d {
                Dialect::Anthropic => Anthropic::body(&asked).to_value(),
                Dialect::OpenAi => OpenAi::body(&asked, "http://localhost/v1").to_value(),
                Dialect::Gemini => Gemini::body(&asked).to_value(),
            };
            run(&*provider, asked).await.done();
            let sent = server.requests().last().unwrap().body.clone();
            assert_eq!(
                sent["tools"],
                fresh["tools"],
                "{}: {} tools",
                d.name(),
                set.len()
            );
        }
        let names = |body: &Value| body["tools"].to_string().matches("write_file").count();
        let counts: Vec<usize> = server.requests().iter().map(|r| names(&r.body)).collect();
        assert_eq!(counts, [0, 0, 1, 0, 1], "{}", d.name());
    }
}
