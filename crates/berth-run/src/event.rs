//! What happens in a run, as every front end sees it: each agent's state, the events of a
//! run (`RunEvent`), an agent's status folded from them (`AgentStatus`), and how each agent's
//! part ended (`AgentSummary`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::check::CheckResult;

/// Where an agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    /// Waiting for one of the run's `[run] max_agents` places; nothing made yet.
    Queued,
    Starting,
    Working,
    Done,
    Failed,
    Stopped,
    /// Stopped at the run's budget (`--max-tokens`, `--max-cost`).
    Budget,
}

impl AgentState {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentState::Queued => "queued",
            AgentState::Starting => "starting",
            AgentState::Working => "working",
            AgentState::Done => "done",
            AgentState::Failed => "failed",
            AgentState::Stopped => "stopped",
            AgentState::Budget => "budget",
        }
    }

    /// Whether the agent has ended (done, failed or stopped).
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            AgentState::Queued | AgentState::Starting | AgentState::Working
        )
    }
}

/// One thing that happened in a run. `agent` is the agent's index (0-based) in the request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    /// The agent waits for a place: `max_agents` of the run's agents work at once.
    Queued { agent: usize, max_agents: usize },
    /// The agent's workspace and session exist; its turn is starting.
    Started {
        agent: usize,
        label: String,
        workspace: String,
        workspace_name: String,
        session: String,
        worktree: PathBuf,
    },
    /// An ACP agent's own session id, once it has one: what `run resume` loads.
    AgentSession { agent: usize, id: String },
    /// A piece of the agent's answer.
    Text { agent: usize, text: String },
    /// The agent called a tool.
    Tool {
        agent: usize,
        name: String,
        kind: berth_agent::ToolKind,
    },
    /// A tool call finished.
    ToolDone {
        agent: usize,
        name: String,
        is_error: bool,
    },
    /// The policy refused a call that writes or runs; the agent was told.
    Refused {
        agent: usize,
        tool: String,
        description: String,
    },
    /// Something a person should know that is not the answer.
    Notice { agent: usize, message: String },
    /// The agent was told `text` (`berth run tell`, the dashboard, the review page): berth's
    /// own agent mid-turn, beside a step's tool results, or any agent's next turn's prompt;
    /// shown in its transcript where it joined.
    Told { agent: usize, text: String },
    /// A call the policy does not cover waits for a person (`--ask`): `berth run answer`,
    /// or the review page, answers `question`.
    Asked {
        agent: usize,
        question: String,
        tool: String,
        description: String,
    },
    /// The question was answered (`allow`, `allow_always`, `deny`), or not: `expired` (the
    /// run's wait passed), `cancelled` (a stop).
    Answered {
        agent: usize,
        question: String,
        answer: String,
    },
    /// The agent's turn ended.
    Ended {
        agent: usize,
        state: AgentState,
        /// How: `end_turn`, `max_tokens`, `cancelled`, `failed`, ….
        stop: String,
        /// Why, when it failed.
        message: Option<String>,
        input_tokens: u64,
        output_tokens: u64,
        elapsed_ms: u64,
    },
    /// The check command ran in the agent's worktree.
    Checked { agent: usize, check: CheckResult },
    /// The agent's branch was pushed to the repository's `origin`.
    Pushed { agent: usize, branch: String },
    /// The run is over: one entry per agent. Always the last event.
    Summary { agents: Vec<AgentSummary> },
}

impl RunEvent {
    /// The agent the event is about; `None` for the summary, which is about all.
    pub fn agent(&self) -> Option<usize> {
        match self {
            RunEvent::Queued { agent, .. }
            | RunEvent::Started { agent, .. }
            | RunEvent::AgentSession { agent, .. }
            | RunEvent::Text { agent, .. }
            | RunEvent::Tool { agent, .. }
            | RunEvent::ToolDone { agent, .. }
            | RunEvent::Refused { agent, .. }
            | RunEvent::Notice { agent, .. }
            | RunEvent::Told { agent, .. }
            | RunEvent::Asked { agent, .. }
            | RunEvent::Answered { agent, .. }
            | RunEvent::Ended { agent, .. }
            | RunEvent::Checked { agent, .. }
            | RunEvent::Pushed { agent, .. } => Some(*agent),
            RunEvent::Summary { .. } => None,
        }
    }
}

/// Of an agent's answer, what [`AgentStatus`] keeps: its end.
pub const ANSWER_KEPT: usize = 1 << 20;

/// Where one agent of a run is, folded from its events: what every front end that watches a
/// run shows (the CLI's table, MCP's `session_status`, later the web page).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentStatus {
    pub state: AgentState,
    pub workspace_name: Option<String>,
    /// How its turn ended (`end_turn`, `cancelled`, `failed`, …), once it did.
    pub stop: Option<String>,
    /// Why, when it failed.
    pub message: Option<String>,
    pub last_tool: Option<String>,
    /// What it did last, as a line shows it: its last tool, a refusal, or its check.
    pub latest: Option<String>,
    /// Calls the policy refused.
    pub refused: Vec<String>,
    /// The answer so far: its last [`ANSWER_KEPT`] bytes at least, and never more than
    /// twice that (the session's transcript has all of it).
    pub answer: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// From its start to its end (0 while it works).
    pub elapsed_ms: u64,
    /// Whether its check passed, once it ran; `None` too for a check a stop kept from
    /// running (`not run`).
    pub check_passed: Option<bool>,
    /// The question it waits on for a person's answer (`--ask`), while it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
}

/// A question an agent waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiting {
    pub question: String,
    pub tool: String,
    pub description: String,
}

impl Default for AgentStatus {
    fn default() -> AgentStatus {
        AgentStatus {
            state: AgentState::Starting,
            workspace_name: None,
            stop: None,
            message: None,
            last_tool: None,
            latest: None,
            refused: Vec::new(),
            answer: String::new(),
            input_tokens: 0,
            output_tokens: 0,
            elapsed_ms: 0,
            check_passed: None,
            waiting: None,
        }
    }
}

impl AgentStatus {
    /// Takes in one event of this agent.
    pub fn apply(&mut self, event: &RunEvent) {
        match event {
            RunEvent::Queued { .. } => self.state = AgentState::Queued,
            RunEvent::Started { workspace_name, .. } => {
                self.state = AgentState::Working;
                self.workspace_name = Some(workspace_name.clone());
            }
            RunEvent::Text { text, .. } => {
                self.answer.push_str(text);
                // Its end only: a watcher's memory must not grow with an agent's answer.
                if self.answer.len() > 2 * ANSWER_KEPT {
                    let mut cut = self.answer.len() - ANSWER_KEPT;
                    while !self.answer.is_char_boundary(cut) {
                        cut += 1;
                    }
                    self.answer.drain(..cut);
                }
            }
            RunEvent::Tool { name, .. } => {
                self.last_tool = Some(name.clone());
                self.latest = Some(name.clone());
            }
            RunEvent::Refused { tool, .. } => {
                self.refused.push(tool.clone());
                self.latest = Some(format!("refused {tool}"));
            }
            RunEvent::Ended {
                state,
                stop,
                message,
                input_tokens,
                output_tokens,
                elapsed_ms,
                ..
            } => {
                self.state = *state;
                self.stop = Some(stop.clone());
                self.message = message.clone();
                self.input_tokens = *input_tokens;
                self.output_tokens = *output_tokens;
                self.elapsed_ms = *elapsed_ms;
            }
            RunEvent::Checked { check, .. } => {
                self.check_passed = (!check.not_run).then_some(check.passed);
                self.latest = Some(format!("check {}", check.verdict()));
            }
            RunEvent::Pushed { branch, .. } => self.latest = Some(format!("pushed {branch}")),
            RunEvent::Told { .. } => self.latest = Some("told more".to_owned()),
            RunEvent::Asked {
                question,
                tool,
                description,
                ..
            } => {
                self.latest = Some(format!("waits: may it {tool}?"));
                self.waiting = Some(Waiting {
                    question: question.clone(),
                    tool: tool.clone(),
                    description: description.clone(),
                });
            }
            RunEvent::Answered { answer, .. } => {
                if let Some(w) = self.waiting.take() {
                    self.latest = Some(format!("{} {answer}", w.tool));
                }
            }
            RunEvent::ToolDone { .. }
            | RunEvent::AgentSession { .. }
            | RunEvent::Notice { .. }
            | RunEvent::Summary { .. } => {}
        }
    }
}

/// How one agent's part of a run ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentSummary {
    pub agent: usize,
    pub label: String,
    pub workspace: Option<String>,
    pub workspace_name: Option<String>,
    pub session: Option<String>,
    pub state: AgentState,
    pub stop: String,
    pub message: Option<String>,
    pub files_changed: usize,
    pub added: u64,
    pub removed: u64,
    pub check: Option<CheckResult>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What its session's tokens cost in US dollars, where `[prices]` knows its model.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    pub elapsed_ms: u64,
}
