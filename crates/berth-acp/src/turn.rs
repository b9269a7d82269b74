//! A prompt's turn over ACP: the runtime's events become `session/update`s in the order they
//! come, on this one task, and the turn's end becomes the prompt's answer.
//!
//! Text and thought pieces that stream faster than a person reads are merged: the first piece
//! goes out at once, and pieces arriving within [`MERGE_WINDOW`] of the last update wait (at
//! most that long) to go out together, in one update. Nothing is reordered or dropped: any
//! other event, a change from thought to text, and the end of the turn send what waits first.
//! A model streaming a few hundred tokens a second is relayed piece by piece; a burst (a fast
//! local model, a stream that stalled and caught up) costs the client a few updates instead of
//! thousands, each a JSON-RPC message parsed on both sides. When many turns of one process
//! stream at once (a server's), the window widens with their number ([`merge_window`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    PromptResponse, SessionId, SessionInfoUpdate, SessionNotification, SessionUpdate, Terminal,
    TextContent, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind, Usage as AcpUsage, UsageUpdate,
};
use berth_agent::{AgentEvent, StepStatus, Turn};
use serde_json::{Value, json};

use crate::client::{self, Relayed};
use crate::errors;

/// How long streamed text may wait to be merged with the pieces after it: well under one
/// frame of an editor's display.
pub const MERGE_WINDOW: Duration = Duration::from_millis(10);

/// The longest the window grows to, however many turns stream: a person still sees a turn's
/// text twenty times a second.
pub(crate) const MERGE_WINDOW_MOST: Duration = Duration::from_millis(50);

/// Turns streaming at once for each [`MERGE_WINDOW`] of the window.
const TURNS_PER_WINDOW: usize = 64;

/// The turns of this process relaying now.
static RELAYING: AtomicUsize = AtomicUsize::new(0);

/// How long streamed text may wait while `relaying` turns stream at once: [`MERGE_WINDOW`] for
/// up to 63, one more for each 64 more, at most [`MERGE_WINDOW_MOST`] (from 256). Each update
/// is a JSON-RPC message parsed on both sides; with hundreds of turns streaming on one server,
/// updates of 10 ms would take the cores from the turns still being set up (and from each
/// other). So the updates a second of the whole server grow far slower than its turns.
pub fn merge_window(relaying: usize) -> Duration {
    let widths = u32::try_from(1 + relaying / TURNS_PER_WINDOW).unwrap_or(u32::MAX);
    MERGE_WINDOW.saturating_mul(widths).min(MERGE_WINDOW_MOST)
}

/// Counts a turn in [`RELAYING`] while it lives.
struct Relaying;

impl Relaying {
    fn start() -> Relaying {
        RELAYING.fetch_add(1, Ordering::Relaxed);
        Relaying
    }
}

impl Drop for Relaying {
    fn drop(&mut self) {
        RELAYING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Streamed text waiting to go out, and which kind it is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    Answer,
    Thought,
}

/// Sends one turn's events as updates of one session.
pub struct Relay {
    pub cx: ConnectionTo<Client>,
    pub session_id: SessionId,
    pub relayed: Arc<Relayed>,
    /// The terminal each `run_command` call ran in.
    pub terminals: Arc<Mutex<HashMap<String, String>>>,
}

impl Relay {
    /// Relays the turn's events until it ends; the prompt's answer.
    pub async fn run(
        &self,
        mut turn: Turn,
        work_dir: &Path,
    ) -> Result<PromptResponse, agent_client_protocol::Error> {
        let _relaying = Relaying::start();
        let mut waiting: Option<(Stream, String)> = None;
        // When the last streamed update went out.
        let mut last = Instant::now()
            .checked_sub(MERGE_WINDOW_MOST)
            .unwrap_or_else(Instant::now);
        loop {
            let window = merge_window(RELAYING.load(Ordering::Relaxed));
            let event = tokio::select! {
                biased;
                event = turn.next_event() => event,
                () = tokio::time::sleep_until(last + window), if waiting.is_some() => {
                    self.flush(&mut waiting);
                    last = Instant::now();
                    continue;
                }
            };
            let Some(event) = event else { break };
            let piece = match &event {
                AgentEvent::Text { text } => Some((Stream::Answer, text)),
                AgentEvent::Thought { text } => Some((Stream::Thought, text)),
                _ => None,
            };
            if let Some((kind, text)) = piece {
                match &mut waiting {
                    Some((k, buf)) if *k == kind => buf.push_str(text),
                    _ => {
                        self.flush(&mut waiting);
                        waiting = Some((kind, text.clone()));
                    }
                }
                if last.elapsed() >= window {
                    self.flush(&mut waiting);
                    last = Instant::now();
                }
                continue;
            }
            self.flush(&mut waiting);
            if let AgentEvent::TurnEnded {
                stop,
                usage,
                in_context,
                titled,
            } = event
            {
                // A session's first prompt titles it: the editor is told, before the answer.
                if let Some(title) = titled {
                    let update = SessionInfoUpdate::new().title(title);
                    self.send(SessionUpdate::SessionInfoUpdate(update));
                }
                // How full the context window is now, for the editor's meter.
                if in_context > 0 {
                    self.send(SessionUpdate::UsageUpdate(UsageUpdate::new(
                        in_context,
                        turn.context_tokens,
                    )));
                }
                let answer = |reason| {
                    PromptResponse::new(reason).usage(AcpUsage::new(
                        usage.input_tokens + usage.output_tokens,
                        usage.input_tokens,
                        usage.output_tokens,
                    ))
                };
                // A failure is the provider's own message, or the loop's: outside ACP's reach.
                return berth_agent::acp::stop_reason_of(stop)
                    .map(answer)
                    .map_err(|message| errors::of_kind(berth_ops::ErrorKind::External, message));
            }
            self.event(event, work_dir);
        }
        unreachable!("a turn's events end with TurnEnded")
    }

    /// Sends the streamed text that waits, if any.
    fn flush(&self, waiting: &mut Option<(Stream, String)>) {
        match waiting.take() {
            Some((Stream::Answer, text)) => {
                self.send(SessionUpdate::AgentMessageChunk(chunk(text)))
            }
            Some((Stream::Thought, text)) => {
                self.send(SessionUpdate::AgentThoughtChunk(chunk(text)))
            }
            None => {}
        }
    }

    fn send(&self, update: SessionUpdate) {
        // A client that went away does not stop the turn: its transcript is still written.
        let _ = self
            .cx
            .send_notification(SessionNotification::new(self.session_id.clone(), update));
    }

    fn event(&self, event: AgentEvent, work_dir: &Path) {
        match event {
            AgentEvent::Text { text } => self.send(SessionUpdate::AgentMessageChunk(chunk(text))),
            AgentEvent::Thought { text } => {
                self.send(SessionUpdate::AgentThoughtChunk(chunk(text)))
            }
            // berth's plan steps carry no priority: every entry is of medium priority.
            AgentEvent::Plan { steps } => {
                let entries = steps
                    .into_iter()
                    .map(|s| {
                        let status = match s.status {
                            StepStatus::Pending => PlanEntryStatus::Pending,
                            StepStatus::InProgress => PlanEntryStatus::InProgress,
                            StepStatus::Completed => PlanEntryStatus::Completed,
                        };
                        PlanEntry::new(s.step, PlanEntryPriority::Medium, status)
                    })
                    .collect();
                self.send(SessionUpdate::Plan(Plan::new(entries)));
            }
            // The person's word, joined mid-turn: shown as theirs where it joined.
            AgentEvent::Told { text } => self.send(SessionUpdate::UserMessageChunk(chunk(text))),
            // Not the answer, so not a message chunk; editors show thoughts apart from it.
            AgentEvent::Notice { message } => self.send(SessionUpdate::AgentThoughtChunk(chunk(
                format!("[berth] {message}\n"),
            ))),
            AgentEvent::ToolStarted {
                id,
                name,
                kind: tool_kind,
                location,
                arguments,
            } => {
                let mut call = ToolCall::new(id, title(&name, &arguments))
                    .kind(kind(tool_kind))
                    .status(ToolCallStatus::Pending)
                    .raw_input(arguments.clone());
                if let Some(path) = location {
                    call = call.locations(vec![ToolCallLocation::new(work_dir.join(path))]);
                }
                self.send(SessionUpdate::ToolCall(call));
            }
            AgentEvent::PermissionAsked { id, change, .. } => {
                if let Some(change) = change {
                    self.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        id.clone(),
                        ToolCallUpdateFields::new().content(vec![client::diff(&change)]),
                    )));
                }
                self.relayed.mark(&id);
            }
            AgentEvent::ToolFinished {
                id,
                output,
                is_error,
                change,
                ..
            } => {
                let mut content = Vec::new();
                if let Some(terminal) = self
                    .terminals
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id)
                {
                    content.push(ToolCallContent::Terminal(Terminal::new(terminal)));
                }
                if let Some(change) = &change {
                    content.push(client::diff(change));
                }
                content.push(client::text(&output));
                let status = if is_error {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                };
                self.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    id,
                    ToolCallUpdateFields::new()
                        .status(status)
                        .content(content)
                        .raw_output(json!({ "output": output, "is_error": is_error })),
                )));
            }
            // The turn's end says its usage (`usage_update`); a request's alone, nothing.
            AgentEvent::TurnEnded { .. } | AgentEvent::Usage { .. } => {}
        }
    }
}

fn chunk(text: String) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

/// What the editor calls a tool call's kind (its icon, how it is shown): the tool's own word.
fn kind(kind: berth_agent::ToolKind) -> ToolKind {
    use berth_agent::ToolKind as Berth;
    match kind {
        Berth::Read => ToolKind::Read,
        Berth::Search => ToolKind::Search,
        Berth::Think => ToolKind::Think,
        Berth::Edit => ToolKind::Edit,
        Berth::Delete => ToolKind::Delete,
        Berth::Execute => ToolKind::Execute,
        Berth::Other => ToolKind::Other,
    }
}

/// A one-line title: the tool and what it works on.
fn title(name: &str, arguments: &Value) -> String {
    let arg = |key: &str| arguments.get(key).and_then(Value::as_str);
    let detail = match name {
        "run_command" => arg("command").map(|c| format!("`{}`", first_line(c))),
        "search" => arg("pattern").map(|p| format!("{p:?}")),
        _ => arg("path").map(str::to_owned),
    };
    match detail {
        Some(d) => format!("{name} {d}"),
        None => name.to_owned(),
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_widens_with_the_turns_streaming_up_to_its_most() {
        let ms = |n| merge_window(n).as_millis();
        assert_eq!([ms(0), ms(1), ms(63)], [10, 10, 10]);
        assert_eq!([ms(64), ms(128), ms(255)], [20, 30, 40]);
        assert_eq!([ms(256), ms(500), ms(usize::MAX)], [50, 50, 50]);
    }
}
