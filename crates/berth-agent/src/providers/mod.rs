//! The three dialects: Anthropic Messages, OpenAI Chat Completions, Gemini
//! `streamGenerateContent`, each over `http` and each translating the neutral conversation to
//! its wire format and its stream back to [`ProviderEvent`]s.

use std::collections::VecDeque;
use std::sync::Arc;

use berth_core::config::{Config, ProviderKind};
use futures::StreamExt;
use reqwest::header::HeaderValue;
use tokio_util::sync::CancellationToken;

use crate::http::{Http, SseEvent, sse_events};
use crate::provider::{Provider, ProviderError, ProviderEvent, ProviderStream};

pub mod anthropic;
pub mod gemini;
pub mod openai;

/// Why no provider could be made from the config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    #[error(
        "no API key for {provider}: set {env} in the environment, or api_key under [providers.{table}] in berth's config"
    )]
    MissingKey {
        provider: &'static str,
        env: &'static str,
        table: &'static str,
    },
    #[error("[providers.{table}] base_url {url:?} is not an http(s) URL")]
    BadBaseUrl { table: &'static str, url: String },
    #[error("{0}")]
    Http(String),
}

/// The provider the merged config names (`provider`, else Claude), with its key and base URL,
/// over `http` (one client for all: building one loads the system's root certificates). The
/// key comes from the config's layers, where the environment (`ANTHROPIC_API_KEY`,
/// `OPENAI_API_KEY`, `GEMINI_API_KEY` or `GOOGLE_API_KEY`) is the top one.
pub fn from_config(config: &Config, http: &Http) -> Result<Arc<dyn Provider>, SetupError> {
    let kind = config.provider();
    let settings = config.provider_settings(kind);
    let (env, table) = match kind {
        ProviderKind::Claude => ("ANTHROPIC_API_KEY", "claude"),
        ProviderKind::Openai => ("OPENAI_API_KEY", "openai"),
        ProviderKind::Gemini => ("GEMINI_API_KEY", "gemini"),
    };
    let key = settings
        .api_key
        .as_ref()
        .map(|k| k.expose().to_owned())
        .filter(|k| !k.is_empty())
        .ok_or(SetupError::MissingKey {
            provider: kind.as_str(),
            env,
            table,
        })?;
    let base_url = match &settings.base_url {
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            url.trim_end_matches('/').to_owned()
        }
        Some(url) => {
            return Err(SetupError::BadBaseUrl {
                table,
                url: url.clone(),
            });
        }
        None => match kind {
            ProviderKind::Claude => anthropic::DEFAULT_BASE_URL.to_owned(),
            ProviderKind::Openai => openai::DEFAULT_BASE_URL.to_owned(),
            ProviderKind::Gemini => gemini::DEFAULT_BASE_URL.to_owned(),
        },
    };
    let http = http.clone();
    Ok(match kind {
        ProviderKind::Claude => Arc::new(anthropic::Anthropic::new(http, base_url, key)),
        ProviderKind::Openai => Arc::new(openai::OpenAi::new(http, base_url, key)),
        ProviderKind::Gemini => Arc::new(gemini::Gemini::new(http, base_url, key)),
    })
}

// ---------------------------------------------------------------------------------------
// What the three dialects share: reading a response's events under the cancellation token,
// and the header and message helpers.

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
