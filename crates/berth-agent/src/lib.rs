//! berth-agent: berth's coding agent, as a library that every front end drives (`berth chat`,
//! `berth acp`).
//!
//! - [`acp`]: ACP's facts about berth's turns and errors (stop reasons both ways, an error of
//!   a kind), for berth-run's ACP client and berth-acp's server alike.
//! - [`conversation`]: the conversation in no provider's dialect.
//! - [`provider`] and [`providers`]: streaming Claude, OpenAI and Gemini over their real wire
//!   formats ([`http`]: one client, retries only before the first token, SSE). These are
//!   berth-llm's, re-exported under their old paths; [`providers::from_config`] (berth's
//!   config → a provider) is this crate's.
//! - [`tools`]: what a tool is, and the built-in ones, confined to the working directory.
//! - [`runtime`]: [`AgentBuilder`] → [`Agent`], which runs a turn of a session: prompt → model
//!   → tool calls → results → model, until the model ends its turn. A turn yields
//!   [`AgentEvent`]s in order through one channel, stops at once when its cancellation token
//!   fires, and asks the front end's [`Permissions`] before each call of a tool whose
//!   [`ToolKind`] changes or runs something.
//! - [`context`]: token estimates and compaction that never separates a call from its result.
//! - [`ModelChoice`] and [`SessionModel`] are berth-ops's (`models.rs`): the model a session
//!   calls is resolved there, once, for every front end; a turn calls it unless its
//!   [`TurnOptions`] name another.
//! - [`mcp`]: external MCP servers (`[[mcp_servers]]`, an ACP client's `mcpServers`) whose
//!   tools join the built-in ones, started lazily through the rmcp client.
//! - [`slash`]: the slash commands (`/clear`, `/model`, …): what a typed line is, and
//!   [`Agent::session_command`], what a command does to a session, for `berth chat` and
//!   `berth acp` alike.

pub mod acp;
pub mod context;
pub mod events;
pub mod mcp;
pub mod providers;
pub mod runtime;
pub mod slash;
pub mod tools;

pub use berth_llm::{conversation, http, provider};
pub use berth_ops::{ModelChoice, SessionModel};
pub use conversation::{
    ChatMessage, Image, Part, StopReason, ToolCall, ToolResult, ToolSpec, Usage,
};
pub use events::{AgentEvent, Decision, PermissionRequest, Permissions, TurnStop};
pub use mcp::{McpServers, ServerStatus};
pub use provider::{Provider, ProviderError, ProviderEvent, ProviderRequest, ProviderStream};
pub use runtime::{
    Agent, AgentBuilder, AgentError, Following, INTERRUPTED, Turn, TurnOptions, TurnRequest,
};
pub use tokio_util::sync::CancellationToken;
pub use tools::plan::{PlanStep, StepStatus};
pub use tools::{
    CommandRequest, CommandResult, Commands, FileChange, Files, Policy, Preview, Tool, ToolContext,
    ToolKind, ToolOutcome, Toolbox,
};
