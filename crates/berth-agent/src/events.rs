//! What a turn tells its front end, in order, through one channel; and how the front end
//! answers a permission request.

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use crate::conversation::Usage;
use crate::tools::plan::PlanStep;
use crate::tools::{FileChange, ToolKind};

/// One thing that happened in a turn. Events arrive in the order they happened; a front end
/// renders them as they come (ACP `session/update`, a terminal, `chat -p`'s stdout).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A piece of the answer.
    Text { text: String },
    /// A piece of the model's reasoning.
    Thought { text: String },
    /// The model called a tool.
    ToolStarted {
        id: String,
        name: String,
        /// What the tool says it does (the tool's own word, not a guess from its name).
        kind: ToolKind,
        /// The file of the working directory the call works on, relative, when it is one.
        location: Option<String>,
        arguments: Value,
    },
    /// The front end was asked whether the call may go ahead.
    PermissionAsked {
        id: String,
        name: String,
        description: String,
        /// The file the call would change, for a front end that shows diffs.
        change: Option<FileChange>,
    },
    /// The tool finished: its output, or the error the model sees.
    ToolFinished {
        id: String,
        name: String,
        output: String,
        is_error: bool,
        /// The file the call changed, when it wrote one.
        change: Option<FileChange>,
    },
    /// The model's plan, whole, replacing the last one it gave (its `update_plan` call, sent
    /// between that call's start and its end).
    Plan { steps: Vec<PlanStep> },
    /// A person's word taken mid-turn ([`crate::TurnOptions::told`]): it joined the
    /// conversation after the step's tool results, and the model reads it next.
    Told { text: String },
    /// Something a person should know that is not part of the answer: an external MCP
    /// server that could not start, so its tools are left out of this turn.
    Notice { message: String },
    /// A request to the model answered: the turn's tokens so far (for a run's budget).
    Usage { usage: Usage },
    /// The turn is over. This is always the last event. `usage` is every request's tokens
    /// added up; `in_context` what the last request read and wrote, i.e. how much of the
    /// context window the conversation now fills (0 when no request answered); `titled` the
    /// session's title when this was its first turn and the session has one now (the turn
    /// titles an untitled session after its prompt), for a front end to show.
    TurnEnded {
        stop: TurnStop,
        usage: Usage,
        in_context: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        titled: Option<String>,
    },
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum TurnStop {
    /// The model finished its answer.
    EndTurn,
    /// The model ran out of output tokens.
    MaxTokens,
    /// The model kept calling tools past `max_tool_iterations`.
    MaxToolIterations,
    /// The model refused.
    Refusal,
    /// The front end cancelled it.
    Cancelled,
    /// The provider or the loop failed; the message says why (a provider's own message for
    /// its errors).
    Failed { message: String },
}

impl TurnStop {
    /// The reason's name, as JSON spells it (`end_turn`, `cancelled`, `failed`, …).
    pub fn as_str(&self) -> &'static str {
        match self {
            TurnStop::EndTurn => "end_turn",
            TurnStop::MaxTokens => "max_tokens",
            TurnStop::MaxToolIterations => "max_tool_iterations",
            TurnStop::Refusal => "refusal",
            TurnStop::Cancelled => "cancelled",
            TurnStop::Failed { .. } => "failed",
        }
    }
}

/// A call waiting for the front end's permission.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PermissionRequest {
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    /// What will happen: the command line, or the file and a diff.
    pub description: String,
    /// The file the call would change, for a front end that shows diffs.
    pub change: Option<FileChange>,
}

impl PermissionRequest {
    /// The call in one line, for a notification: the tool and what it works on (a path, a
    /// command's first line), never a file's contents or a diff.
    pub fn headline(&self) -> String {
        let arg = |key: &str| self.arguments.get(key).and_then(Value::as_str);
        match (arg("path"), arg("command")) {
            (Some(path), _) => format!("{} {path}", self.tool),
            (None, Some(command)) => {
                let line = command.lines().next().unwrap_or_default();
                let cut: String = line.chars().take(120).collect();
                let more = if cut.len() < command.len() { "…" } else { "" };
                format!("{}: {cut}{more}", self.tool)
            }
            _ => self.tool.clone(),
        }
    }

    /// The `needs_input` notice of this request, waiting as `id` in `session`; `watched` when
    /// a person already sees it (an editor, a page).
    pub fn needs_input(
        &self,
        session: &berth_ops::Session,
        id: &str,
        watched: bool,
    ) -> berth_ops::notices::Notice {
        let name = match session.title.as_str() {
            "" => session.id.to_string(),
            t => t.to_owned(),
        };
        let mut notice = berth_ops::notices::Notice::new(
            berth_ops::notices::NotifyEvent::NeedsInput,
            format!("berth: {name} needs you"),
            format!("allow {}?", self.headline()),
        );
        notice.session = Some(session.id.to_string());
        notice.workspace = Some(session.workspace_id.to_string());
        notice.request = Some(format!("{}/{id}", session.id));
        notice.watched = watched;
        notice
    }
}

/// The front end's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    AllowOnce,
    /// Allow this tool for the rest of the session, without asking again.
    AllowAlways,
    Reject,
    /// Nobody answered in the time the front end waits (the web page's); nothing ran.
    Expired,
    /// The front end's policy does not allow it, and nobody was asked (a run without
    /// `--ask`): the model is told so, not that a person refused.
    NotAllowed,
}

/// The front end's side of permissions: a terminal asks a person, ACP asks the client,
/// `chat -p` answers from its flags.
#[async_trait]
pub trait Permissions: Send + Sync {
    async fn decide(&self, request: &PermissionRequest) -> Decision;

    /// Whether a command the sandbox refused part of may run once more without it, with all
    /// of the user's rights (`request.description` says what was refused). Only a person can
    /// say yes: every front end that answers by policy (`berth run`, `chat -p`) keeps this
    /// default, no.
    async fn allow_unconfined(&self, _request: &PermissionRequest) -> bool {
        false
    }
}
