//! The three dialects: Anthropic Messages, OpenAI Chat Completions, Gemini
//! `streamGenerateContent`, each over `http` and each translating the neutral conversation to
//! its wire format and its stream back to [`ProviderEvent`]s.
//!
//! Each is made from plain settings, `new(http, base_url, key)`, with its own
//! `DEFAULT_BASE_URL`; choosing one from a configuration is the caller's (berth-agent's
//! `providers::from_config`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};

use futures::StreamExt;
use reqwest::header::HeaderValue;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::conversation::ToolSpec;
use crate::http::{SseEvent, sse_events};
use crate::provider::{ProviderError, ProviderEvent, ProviderStream};

pub mod anthropic;
pub mod gemini;
pub mod openai;

// ---------------------------------------------------------------------------------------
// What the three dialects share: the request body, reading a response's events under the
// cancellation token, and the header and message helpers.

/// A request body as sent: the dialect's own fields, and its tool definitions written
/// straight from the request's specs. The tools' schemas are the bulk of every request of a
/// turn; built into the `Value` they would be copied on each request, only to be written out.
#[derive(Debug, Serialize)]
pub struct Body<T> {
    #[serde(flatten)]
    pub fields: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<T>,
}

impl<T: Serialize> Body<T> {
    /// The body as one JSON value, as the provider reads it.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a request body is JSON")
    }
}

impl<T: Serialize> Body<T> {
    /// The body as sent: its tools as `written` keeps them for the request's tool set.
    pub(super) fn with_written_tools(
        self,
        specs: &Arc<[ToolSpec]>,
        written: &WrittenTools,
    ) -> Body<Written> {
        Body {
            fields: self.fields,
            tools: self.tools.map(|tools| written.get(specs, &tools)),
        }
    }
}

/// One dialect's tool definitions, written as JSON once for a tool set and kept while that set
/// lives. The schemas are most of a request's bytes, and every turn of an agent with the same
/// tools sends the same set: written afresh, they were a tenth of what a prompt cost berth
/// before its model call, at 500 prompts at once. One set is kept; another one replaces it.
pub(super) struct WrittenTools(Mutex<Option<(Weak<[ToolSpec]>, Written)>>);

/// JSON written once, sent as it is.
#[derive(Clone, Debug)]
pub struct Written(Arc<RawValue>);

impl Serialize for Written {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl WrittenTools {
    pub(super) const fn new() -> WrittenTools {
        WrittenTools(Mutex::new(None))
    }

    /// `tools` (the dialect's definitions of `specs`) as JSON: the kept text when it was
    /// written for this very set, which the `Weak` it is kept with proves (its allocation
    /// cannot be reused while the `Weak` lives).
    fn get(&self, specs: &Arc<[ToolSpec]>, tools: &impl Serialize) -> Written {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((set, text)) = &*kept
            && std::ptr::addr_eq(set.as_ptr(), Arc::as_ptr(specs))
        {
            return text.clone();
        }
        let text = Written(
            serde_json::value::to_raw_value(tools)
                .expect("tool definitions are JSON")
                .into(),
        );
        *kept = Some((Arc::downgrade(specs), text.clone()));
        text
    }
}

/// One dialect's stream decoder: it turns each server-sent event into provider events.
pub(super) trait Decode: Send + 'static {
    /// Handles one event, pushing what it yields to `out`. `Ok(true)` once the dialect's own
    /// end was seen (and the `Done` event pushed): nothing more is read.
    fn event(
        &mut self,
        event: SseEvent,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<bool, ProviderError>;

    /// The response ended before [`Decode::event`] returned `Ok(true)`. A dialect whose stream
    /// simply stops after its last event (Gemini) pushes its `Done` and returns `true`; the
    /// default `false` reports the stream as ended early, never as a silent end.
    fn end(&mut self, _out: &mut Vec<ProviderEvent>) -> bool {
        false
    }
}

/// The events of `response` through `decoder`, until the dialect's end, an error, or
/// `cancel`, which ends the stream with [`ProviderError::Cancelled`] at once, even while a
/// read is waiting. Nothing is retried here: by now the caller may have shown text.
pub(super) fn decode<D: Decode>(
    provider: &'static str,
    response: reqwest::Response,
    cancel: CancellationToken,
    decoder: D,
) -> ProviderStream {
    type Events =
        std::pin::Pin<Box<dyn futures::Stream<Item = Result<SseEvent, ProviderError>> + Send>>;
    struct State<D> {
        events: Events,
        decoder: D,
        queue: VecDeque<Result<ProviderEvent, ProviderError>>,
        cancel: CancellationToken,
        over: bool,
    }
    let state = State {
        events: Box::pin(sse_events(provider, response)),
        decoder,
        queue: VecDeque::new(),
        cancel,
        over: false,
    };
    Box::pin(futures::stream::unfold(state, move |mut st| async move {
        loop {
            // Once the stream is over (its end or an error queued) what is queued goes out;
            // before that, a cancellation drops whatever is queued and ends the stream.
            if st.cancel.is_cancelled() && !st.over {
                st.over = true;
                st.queue.clear();
                return Some((Err(ProviderError::Cancelled), st));
            }
            if let Some(item) = st.queue.pop_front() {
                return Some((item, st));
            }
            if st.over {
                return None;
            }
            let next = tokio::select! {
                biased;
                _ = st.cancel.cancelled() => continue,
                next = st.events.next() => next,
            };
            let mut out = Vec::new();
            let step = match next {
                Some(Ok(event)) => st.decoder.event(event, &mut out),
                Some(Err(e)) => Err(e),
                None if st.decoder.end(&mut out) => Ok(true),
                None => Err(ProviderError::Stream {
                    provider,
                    message: "the stream ended early".to_owned(),
                }),
            };
            // What was decoded before a failure still goes out first; the error ends it.
            st.queue.extend(out.into_iter().map(Ok));
            match step {
                Ok(false) => {}
                Ok(true) => st.over = true,
                Err(e) => {
                    st.over = true;
                    st.queue.push_back(Err(e));
                }
            }
        }
    }))
}

/// An HTTP header value holding a secret: marked sensitive, so it is never printed.
pub(super) fn secret_header(
    provider: &'static str,
    secret: &str,
) -> Result<HeaderValue, ProviderError> {
    let mut value = HeaderValue::from_str(secret).map_err(|_| ProviderError::Stream {
        provider,
        // The key itself is not quoted: it is a secret.
        message: "cannot send the request: the API key holds characters an HTTP header cannot"
            .to_owned(),
    })?;
    value.set_sensitive(true);
    Ok(value)
}

pub(super) fn stream_error(provider: &'static str, message: String) -> ProviderError {
    ProviderError::Stream { provider, message }
}

/// At most 200 characters of `text`, for messages that quote what the provider sent.
pub(super) fn clip(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}
