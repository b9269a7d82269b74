//! What a provider is to the loop: it takes the conversation and streams the model's answer
//! back as events, ending with the whole assistant message (with any opaque state) and why the
//! model stopped. The three dialects are in `providers/`.

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Stream;
use tokio_util::sync::CancellationToken;

use crate::conversation::{ChatMessage, StopReason, ToolCall, ToolSpec, Usage};

/// One request: the whole conversation so far.
#[derive(Debug, Clone)]
pub struct ProviderRequest {
    pub model: String,
    pub system: String,
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call: the same for every request of a turn, so shared.
    pub tools: Arc<[ToolSpec]>,
    pub max_tokens: u32,
}

/// What a provider streams, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    TextDelta(String),
    ThoughtDelta(String),
    /// A tool call, complete (its arguments assembled from their deltas).
    ToolCall(ToolCall),
    /// The last event: the assistant message as a whole (text, thoughts with their opaque
    /// state, tool calls, in order), why the model stopped, and the tokens counted.
    Done {
        message: ChatMessage,
        stop: StopReason,
        usage: Usage,
    },
}

pub type ProviderStream =
    Pin<Box<dyn Stream<Item = Result<ProviderEvent, ProviderError>> + Send + 'static>>;

#[async_trait]
pub trait Provider: Send + Sync {
    /// `claude`, `openai` or `gemini`: what the session records.
    fn name(&self) -> &'static str;

    /// Sends the request and streams the answer. Retries (429, 5xx, connection errors) happen
    /// inside, before the first event; once an event was yielded, a failure ends the stream
    /// with an error and nothing is sent again. `cancel` aborts the request at once.
    async fn stream(
        &self,
        request: ProviderRequest,
        cancel: CancellationToken,
    ) -> Result<ProviderStream, ProviderError>;
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The provider answered with an error status; `message` is its own message.
    #[error("{provider} answered {status}: {message}")]
    Status {
        provider: &'static str,
        status: u16,
        message: String,
    },
    /// The provider could not be reached (after the retries).
    #[error("cannot reach {provider} at {url}: {message}")]
    Connect {
        provider: &'static str,
        url: String,
        message: String,
    },
    /// The stream broke or said something that cannot be understood, after it started.
    #[error("{provider}'s stream failed: {message}")]
    Stream {
        provider: &'static str,
        message: String,
    },
    /// The provider sent an error event inside the stream.
    #[error("{provider} reported an error: {message}")]
    Reported {
        provider: &'static str,
        message: String,
    },
    #[error("cancelled")]
    Cancelled,
}

impl berth_core::Kinded for ProviderError {
    /// The provider's trouble, or the way to it: external. A turn stopped by its person is
    /// refused (it was not let finish).
    fn kind(&self) -> berth_core::ErrorKind {
        match self {
            ProviderError::Cancelled => berth_core::ErrorKind::Refused,
            _ => berth_core::ErrorKind::External,
        }
    }
}
