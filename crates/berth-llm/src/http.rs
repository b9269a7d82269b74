//! The HTTP side every provider shares: one client with connect and idle-read timeouts,
//! retries that happen only before anything was streamed, the provider's own error message out
//! of an error body, and the server-sent events of a response.
//!
//! Retries: 429, 5xx and connection errors, with jittered exponential backoff that honours
//! `Retry-After`. Any other status fails at once with the provider's message: a 4xx is a
//! request that will fail the same way again. Once a response was accepted nothing is retried,
//! so text a person already saw is never streamed twice.

use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::HeaderMap;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::provider::ProviderError;

/// How a provider's requests are retried and timed out.
#[derive(Debug, Clone)]
pub struct HttpPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The first backoff; each next one doubles, up to `max_backoff`, with up to 50% jitter.
    pub backoff: Duration,
    pub max_backoff: Duration,
    pub connect_timeout: Duration,
    /// How long a stream may stay silent before it counts as cut.
    pub idle_timeout: Duration,
}

impl Default for HttpPolicy {
    fn default() -> Self {
        HttpPolicy {
            attempts: 4,
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// A provider's HTTP client.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    pub policy: HttpPolicy,
}

impl Http {
    pub fn new(policy: HttpPolicy) -> Result<Http, String> {
        // reqwest is built without a default TLS crypto provider; ring is the one berth ships.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(policy.connect_timeout)
            .read_timeout(policy.idle_timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Http { client, policy })
    }

    /// POSTs `body` as JSON and returns the response once its status is a success, retrying
    /// as the module says. `url` must carry no secret: it ends up in messages.
    pub async fn post(
        &self,
        provider: &'static str,
        url: &str,
        headers: HeaderMap,
        body: &impl serde::Serialize,
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, ProviderError> {
        // Written once, into a buffer sized for a usual request (the tools' schemas make most
        // of it), and shared by every attempt: a retry copies nothing.
        let mut written = Vec::with_capacity(16 * 1024);
        serde_json::to_writer(&mut written, body).map_err(|e| ProviderError::Stream {
            provider,
            message: format!("cannot encode the request: {e}"),
        })?;
        let body = Bytes::from(written);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt >= self.policy.attempts;
            let sent = self
                .client
                .post(url)
                .headers(headers.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone())
                .send();
            let outcome = tokio::select! {
                _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
                r = sent => r,
            };
            let wait = match outcome {
                Ok(resp) if resp.status().is_success() => return Ok(resp),
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let retry_after = retry_after(resp.headers());
                    let text = tokio::select! {
                        _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
                        t = resp.text() => t.unwrap_or_default(),
                    };
                    let retryable = status == 429 || (500..600).contains(&status);
                    if !retryable || last {
                        return Err(ProviderError::Status {
                            provider,
                            status,
                            message: error_message(&text),
                        });
                    }
                    let wait = retry_after.unwrap_or_else(|| self.backoff(attempt));
                    tracing::debug!(
                        provider,
                        status,
                        attempt,
                        wait_ms = wait.as_millis() as u64,
                        "the provider answered {status}: trying again"
                    );
                    wait
                }
                Err(e) => {
                    if last {
                        return Err(ProviderError::Connect {
                            provider,
                            url: url.to_owned(),
                            message: error_chain(&e),
                        });
                    }
                    let wait = self.backoff(attempt);
                    tracing::debug!(
                        provider,
                        attempt,
                        wait_ms = wait.as_millis() as u64,
                        "the provider could not be reached ({}): trying again",
                        error_chain(&e)
                    );
                    wait
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
                _ = tokio::time::sleep(wait.min(self.policy.max_backoff)) => {}
            }
        }
    }

    /// The wait before attempt `attempt + 1`: `backoff · 2^(attempt-1)`, capped, with jitter.
    fn backoff(&self, attempt: u32) -> Duration {
        let base = self
            .policy
            .backoff
            .saturating_mul(1 << (attempt - 1).min(16))
            .min(self.policy.max_backoff);
        // Up to half again, so clients that failed together do not retry together.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        base + base.mul_f64(f64::from(nanos % 1000) / 2000.0)
    }
}

/// `Retry-After` in seconds (the form providers send); an HTTP date is left to the backoff.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    // `try_`: a negative, NaN or huge value from the network must not panic.
    let seconds = value.trim().parse::<f64>().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// The provider's own message from an error body: `error.message` (all three dialects, Gemini
/// sometimes inside an array), else the body itself, shortened.
pub fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        let v = v.as_array().and_then(|a| a.first()).unwrap_or(v);
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
    });
    match found {
        Some(m) => m.to_owned(),
        None => {
            let t = body.trim();
            let mut end = t.len().min(500);
            while !t.is_char_boundary(end) {
                end -= 1;
            }
            if t.is_empty() {
                "(no message)".to_owned()
            } else {
                t[..end].to_owned()
            }
        }
    }
}

fn error_chain(e: &reqwest::Error) -> String {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

/// One server-sent event: its `event:` name (empty when none) and its `data:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: String,
    pub data: String,
}

/// The events of an SSE response. Bytes are decoded as UTF-8 only once a whole line is in, so
/// a character split across network chunks comes out whole; a read that fails or stays silent
/// past the idle timeout ends the stream with an error.
pub fn sse_events(
    provider: &'static str,
    response: reqwest::Response,
) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send + 'static {
    sse_from_bytes(provider, response.bytes_stream())
}

/// Where [`sse_from_bytes`] is in its stream of bytes.
struct SseState<S> {
    bytes: std::pin::Pin<Box<S>>,
    buf: Vec<u8>,
    /// Where the unread part of `buf` starts: lines are read in place, and what was read
    /// is dropped once per network read rather than once per line.
    start: usize,
    /// Up to where `buf` is known to hold no newline: a long line arriving in many small
    /// chunks is scanned once, not once per chunk.
    scanned: usize,
    pending: PendingEvent,
    done: bool,
}

/// The fields of the event being read, up to the blank line that ends it.
#[derive(Default)]
struct PendingEvent {
    event: String,
    data: String,
    /// Whether the event has a `data` field yet (an empty one counts).
    has_data: bool,
}

impl PendingEvent {
    /// Takes in one line, without its line ending: the event it ends, if it is the blank line
    /// after one.
    fn take_line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            if !self.has_data && self.event.is_empty() {
                return None;
            }
            self.has_data = false;
            return Some(SseEvent {
                event: std::mem::take(&mut self.event),
                data: std::mem::take(&mut self.data),
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        None
    }
}

/// [`sse_events`] over any stream of byte chunks.
pub fn sse_from_bytes<S, E>(
    provider: &'static str,
    bytes: S,
) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send + 'static
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::fmt::Display,
{
    let state = SseState {
        bytes: Box::pin(bytes),
        buf: Vec::new(),
        start: 0,
        scanned: 0,
        pending: PendingEvent::default(),
        done: false,
    };
    futures::stream::unfold(state, move |mut st| async move {
        loop {
            // A whole line in the buffer: one field, or the blank line that ends an event.
            let from = st.scanned.max(st.start);
            if let Some(nl) = st.buf[from..].iter().position(|&b| b == b'\n') {
                let nl = from + nl;
                let mut line = &st.buf[st.start..nl];
                st.start = nl + 1;
                st.scanned = st.start;
                if line.last() == Some(&b'\r') {
                    line = &line[..line.len() - 1];
                }
                let Ok(line) = std::str::from_utf8(line) else {
                    st.done = true;
                    let e = ProviderError::Stream {
                        provider,
                        message: "the stream is not valid UTF-8".to_owned(),
                    };
                    return Some((Err(e), st));
                };
                if let Some(event) = st.pending.take_line(line) {
                    return Some((Ok(event), st));
                }
                continue;
            }
            st.scanned = st.buf.len();
            if st.done {
                return None;
            }
            // What was read goes before more comes in.
            st.buf.drain(..st.start);
            st.scanned -= st.start;
            st.start = 0;
            match st.bytes.next().await {
                Some(Ok(chunk)) => st.buf.extend_from_slice(&chunk),
                Some(Err(e)) => {
                    st.done = true;
                    st.buf.clear();
                    st.scanned = 0;
                    let e = ProviderError::Stream {
                        provider,
                        message: format!("the connection broke: {e}"),
                    };
                    return Some((Err(e), st));
                }
                None => {
                    st.done = true;
                    // A last event without its blank line still counts.
                    if !st.buf.is_empty() {
                        st.buf.push(b'\n');
                    }
                    st.buf.push(b'\n');
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn events(chunks: Vec<&'static [u8]>) -> Vec<Result<SseEvent, ProviderError>> {
        let s = futures::stream::iter(chunks.into_iter().map(|c| Ok::<_, String>(Bytes::from(c))));
        sse_from_bytes("test", s).collect().await
    }

    #[tokio::test]
    async fn a_character_split_across_chunks_comes_out_whole() {
        let text = "data: caf\u{e9} \u{1F600}\n\n".as_bytes();
        let (a, b) = text.split_at(10); // inside the é
        let (b, c) = b.split_at(4); // inside the emoji
        let got = events(vec![a, b, c]).await;
        assert_eq!(
            got,
            vec![Ok(SseEvent {
                event: String::new(),
                data: "caf\u{e9} \u{1F600}".to_owned()
            })]
        );
    }

    #[tokio::test]
    async fn fields_comments_crlf_and_multiline_data() {
        let got = events(vec![
            b": ping\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\ndata: x",
        ])
        .await;
        assert_eq!(
            got,
            vec![
                Ok(SseEvent {
                    event: "a".into(),
                    data: "1\n2".into()
                }),
                Ok(SseEvent {
                    event: String::new(),
                    data: "x".into()
                })
            ]
        );
    }

    #[test]
    fn provider_messages_are_found_in_each_dialect() {
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}"#
            ),
            "max_tokens: too big"
        );
        assert_eq!(
            error_message(
                r#"[{"error":{"code":400,"message":"API key not valid","status":"INVALID_ARGUMENT"}}]"#
            ),
            "API key not valid"
        );
        assert_eq!(error_message("plain text"), "plain text");
    }
}
