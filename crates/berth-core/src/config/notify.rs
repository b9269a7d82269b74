//! `[[notify]]`: where to tell a person what happened and which events each entry wants;
//! berth-notify delivers them.

use serde::{Deserialize, Serialize};

use super::Secret;

/// What a notification is about (`[[notify]] events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyEvent {
    /// A permission request waits for a person's answer.
    NeedsInput,
    /// A run ended, checks and all, with every agent done and every check passed.
    Done,
    /// A run ended with an agent failed or stopped, or a check failed.
    Failed,
    /// A one-agent run's agent was stopped at its budget.
    Budget,
    /// A turn an agent was told after its run was over (`run tell`) ended.
    ToldDone,
    /// One agent of several ended (done, failed, stopped or at its budget). Only to entries
    /// that name it.
    AgentDone,
    /// A run's check failed in one agent's worktree. Only to entries that name it: the run's
    /// end says so anyway.
    CheckFailed,
}

impl NotifyEvent {
    pub const ALL: [NotifyEvent; 7] = [
        NotifyEvent::NeedsInput,
        NotifyEvent::Done,
        NotifyEvent::Failed,
        NotifyEvent::Budget,
        NotifyEvent::ToldDone,
        NotifyEvent::AgentDone,
        NotifyEvent::CheckFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::NeedsInput => "needs_input",
            NotifyEvent::Done => "done",
            NotifyEvent::Failed => "failed",
            NotifyEvent::Budget => "budget",
            NotifyEvent::ToldDone => "told_done",
            NotifyEvent::AgentDone => "agent_done",
            NotifyEvent::CheckFailed => "check_failed",
        }
    }

    /// Whether an entry that names no events gets it: one notification per run's end, not
    /// one per agent and check as well.
    pub fn by_default(self) -> bool {
        !matches!(self, NotifyEvent::AgentDone | NotifyEvent::CheckFailed)
    }
}

/// The shape of a `url` notification's body.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyFormat {
    /// berth's own JSON object (docs/notify.md).
    #[default]
    Json,
    /// ntfy's: the summary as the body, the title, link and event as headers.
    Ntfy,
    /// A Slack incoming webhook's `{"text": …}`.
    Slack,
}

/// One `[[notify]]` entry: where to tell a person what happened, and what.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotifySettings {
    /// POST the notification here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<Secret>,
    /// Run this shell command with the notification's JSON on its standard input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Show it on this machine's desktop (the freedesktop notification service over the
    /// session's D-Bus, through `notify-send`), when there is a session bus.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub desktop: bool,
    pub format: NotifyFormat,
    /// The events this entry sends; empty for every event [`NotifyEvent::by_default`] says.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<NotifyEvent>,
    /// Send even when a person watches (a page or an editor shows the session).
    pub always: bool,
}

impl NotifySettings {
    pub fn wants(&self, event: NotifyEvent) -> bool {
        match self.events.is_empty() {
            true => event.by_default(),
            false => self.events.contains(&event),
        }
    }
}
