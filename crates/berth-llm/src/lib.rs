//! berth-llm: model clients. Provider wire formats, streaming and retries; it knows nothing of
//! berth (no config, no stores, no sessions).
//!
//! - [`conversation`]: the conversation in no provider's dialect.
//! - [`provider`]: what a provider is: a request in, a stream of [`ProviderEvent`]s out.
//! - [`providers`]: Claude, OpenAI and Gemini over their real streaming wire formats, each
//!   made from a base URL and a key.
//! - [`http`]: one client, retries only before the first token, server-sent events.
//!
//! berth-agent chooses a provider from berth's config and runs the tool loop over it.

#![forbid(unsafe_code)]

pub mod conversation;
pub mod http;
pub mod provider;
pub mod providers;

pub use conversation::{
    ChatMessage, Image, Part, StopReason, ToolCall, ToolResult, ToolSpec, Usage,
};
pub use provider::{Provider, ProviderError, ProviderEvent, ProviderRequest, ProviderStream};
pub use tokio_util::sync::CancellationToken;
