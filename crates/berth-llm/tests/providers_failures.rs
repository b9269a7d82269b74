//! How each of the three providers fails, against local servers that speak their real
//! streaming wire formats: a 4xx once, with the provider's own message; 429 and 5xx retried,
//! honouring `Retry-After`; a stream cut after text never retried; an error inside the stream
//! reported; a cancellation at once.
//!
//! Each scenario runs once per dialect through `for_each_dialect!` (in `support/`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

#[macro_use]
mod support;

use std::time::{Duration, Instant};

use berth_llm::{CancellationToken, ChatMessage, ProviderError, ProviderEvent};
use berth_testkit::provider_server::{
    Framing, ProviderServer, Reply, Turn, anthropic_stream_error, data_error,
};
use futures::StreamExt;

use support::*;

for_each_dialect!(
    a_4xx_is_sent_once_with_the_providers_message,
    retry_after_is_honoured,
    a_500_is_retried,
    a_stream_cut_after_text_fails_without_retry,
    a_clean_end_without_the_dialects_end_is_an_error,
    an_error_inside_the_stream_is_reported,
    cancellation_ends_the_stream_at_once,
    cancellation_before_the_answer_ends_the_request,
);

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
