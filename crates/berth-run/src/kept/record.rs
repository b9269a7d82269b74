//! A kept run's record: its id, the request as kept, each agent's place and state, and
//! how an event changes them. Written only by the run's supervisor.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use berth_ops::Repository;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::*;
use crate::agents::AgentSpec;
use crate::event::AgentState;
use crate::event::AgentStatus;
use crate::event::AgentSummary;
use crate::event::RunEvent;
use crate::request::Resume;
use crate::request::RunRequest;
use berth_agent::Policy;

/// A run's id: 12 lowercase hex digits, made by berth; it names the run's folder.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(pub(super) String);

impl RunId {
    pub(crate) fn generate() -> RunId {
        RunId(uuid::Uuid::new_v4().simple().to_string()[..12].to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunId {
    type Error = KeptError;
    fn try_from(value: String) -> Result<RunId, KeptError> {
        let ok = !value.is_empty()
            && value.len() <= 64
            && value
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if ok {
            Ok(RunId(value))
        } else {
            Err(KeptError::BadId(value.chars().take(80).collect()))
        }
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A run's request as kept, to start it again (resume) in another process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredRequest {
    pub task: String,
    /// The repository the workspaces are worktrees of (none for a run in a workspace).
    pub repository: Option<PathBuf>,
    pub workspace: Option<String>,
    pub agents: Vec<AgentSpec>,
    pub name: Option<String>,
    pub allow: Vec<String>,
    pub allow_all: bool,
    pub check: Option<String>,
    pub check_timeout_secs: u64,
    /// `--agent-writable` (absent in runs kept before it existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_writable: Vec<PathBuf>,
    /// The repository was named by URL: each agent's branch is pushed to it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub push: bool,
    /// `--max-tokens`, `--max-cost` (absent in runs kept before budgets existed).
    #[serde(default)]
    pub budget: crate::request::Budget,
    /// A queued run (`berth run --queue`): worked by whichever worker takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolPlace>,
    /// `--ask`: a call the policy does not cover waits this long for a person's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_timeout_secs: Option<u64>,
    /// The batch it was started in (`berth run --tasks`), and its place there (absent in
    /// runs started alone, and in runs kept before batches existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchPlace>,
}

/// Where a queued run may be worked, and what it is made from there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolPlace {
    /// The node it is pinned to (`--node`); any when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The URL every node fetches the repository from, and pushes each agent's branch to.
    pub repo_url: String,
}

impl StoredRequest {
    /// A request as [`crate::preflight::prepare`] settled it.
    pub fn of(request: &RunRequest) -> StoredRequest {
        StoredRequest {
            task: request.task.clone(),
            repository: match &request.repository {
                Repository::Named(dir) | Repository::Around(dir) => Some(dir.clone()),
                Repository::None => None,
            },
            workspace: request.workspace.clone(),
            agents: request.agents.clone(),
            name: request.name.clone(),
            allow: request.policy.named(),
            allow_all: request.policy.allows_all(),
            check: request.check.clone(),
            check_timeout_secs: request.check_timeout.as_secs(),
            agent_writable: request.agent_writable.clone(),
            push: request.push,
            budget: request.budget,
            pool: None,
            ask_timeout_secs: request.ask.map(|d| d.as_secs()),
            batch: None,
        }
    }

    /// The request again, to run the agents in `resume` (all of them when it is empty).
    pub fn request(&self, resume: BTreeMap<usize, Resume>) -> RunRequest {
        RunRequest {
            task: self.task.clone(),
            repository: match &self.repository {
                Some(dir) => Repository::Named(dir.clone()),
                None => Repository::None,
            },
            workspace: self.workspace.clone(),
            agents: self.agents.clone(),
            name: self.name.clone(),
            policy: Policy::new(&self.allow, self.allow_all),
            check: self.check.clone(),
            check_timeout: Duration::from_secs(self.check_timeout_secs),
            resume,
            agent_writable: self.agent_writable.clone(),
            push: self.push,
            budget: self.budget,
            max_agents: None,
            stderr_dir: None,
            ask: self.ask_timeout_secs.map(Duration::from_secs),
        }
    }
}

/// Where a run is as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Queued for a worker (`berth run --queue`): nothing made yet.
    Queued,
    /// Recorded; its supervisor is starting.
    Starting,
    /// Its supervisor is at work.
    Running,
    /// Every agent ended and the summary is in.
    Ended,
    /// Its supervisor died before the run ended.
    Failed,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Starting => "starting",
            RunState::Running => "running",
            RunState::Ended => "ended",
            RunState::Failed => "failed",
        }
    }

    /// Whether the run is over (ended or failed).
    pub fn is_over(self) -> bool {
        matches!(self, RunState::Ended | RunState::Failed)
    }
}

/// One agent of a kept run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentRecord {
    pub label: String,
    /// The machine its supervisor ran it on (its host name), once it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub workspace: Option<String>,
    pub session: Option<String>,
    pub worktree: Option<PathBuf>,
    /// An ACP agent's own session id, to load on resume.
    pub acp_session: Option<String>,
    /// Where it is (its answer is in its session's transcript, not here).
    #[serde(flatten)]
    pub status: AgentStatus,
    /// How it ended, once the run summed up.
    pub summary: Option<AgentSummary>,
    /// What was done with its work once it ended: merged, discarded or kept on purpose.
    /// Set by whatever merged or deleted its workspace (`run pick`, `run discard`,
    /// `workspace merge`, `workspace delete`, the review page); never by its turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AgentOutcome>,
    /// Where its work was kept when its worktree was dropped (`refs/berth/lost/<id>`): what
    /// `berth run restore` brings back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_ref: Option<String>,
    /// Where its work was merged, to undo it (`berth run pick --undo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeRecord>,
}

/// A pick's merge, as kept: the branch, and its tip before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeRecord {
    /// The branch the work went into.
    pub into: String,
    /// Its tip before the merge, and after (full SHAs).
    pub before: String,
    pub after: String,
    /// The repository the branch is in.
    pub repo: PathBuf,
}

/// What was done with an agent's work once it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentOutcome {
    /// Its work was merged into a branch of the repository.
    Merged,
    /// Its work was dropped on purpose (its commits kept on berth's lost-work ref).
    Discarded,
    /// Another agent was picked, and this one's workspace kept (`run pick --keep-others`).
    Kept,
}

impl AgentOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentOutcome::Merged => "merged",
            AgentOutcome::Discarded => "discarded",
            AgentOutcome::Kept => "kept",
        }
    }

    /// Whether the agent's part is over for good: nothing more to tell it.
    pub fn is_closed(self) -> bool {
        matches!(self, AgentOutcome::Merged | AgentOutcome::Discarded)
    }
}

/// A run as kept in `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: RunId,
    pub created_at: DateTime<Utc>,
    /// When a supervisor last took it (a queued run waits from `created_at` to this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub state: RunState,
    /// The process supervising it, while it runs.
    pub supervisor: Option<u32>,
    /// Why it failed as a whole.
    pub message: Option<String>,
    pub request: StoredRequest,
    pub agents: Vec<AgentRecord>,
}

impl RunRecord {
    pub(crate) fn new(id: RunId, request: StoredRequest) -> RunRecord {
        let state = match request.pool {
            Some(_) => RunState::Queued,
            None => RunState::Starting,
        };
        let agents = request
            .agents
            .iter()
            .map(|spec| AgentRecord {
                label: spec.label(),
                node: None,
                workspace: None,
                session: None,
                worktree: None,
                acp_session: None,
                status: AgentStatus::default(),
                summary: None,
                outcome: None,
                lost_ref: None,
                merge: None,
            })
            .collect();
        RunRecord {
            id,
            created_at: Utc::now(),
            started_at: None,
            ended_at: None,
            state,
            supervisor: None,
            message: None,
            request,
            agents,
        }
    }

    /// Whether the run is over with every agent done and every check passed: what the CLI's
    /// exit status says.
    pub fn succeeded(&self) -> bool {
        self.state == RunState::Ended
            && self.agents.iter().all(|a| {
                a.status.state == AgentState::Done
                    // A check not run (the agent changed nothing) is no evidence the work
                    // is good: only a check that passed says so.
                    && a.check().is_none_or(|c| c.passed)
            })
    }

    /// The agents `run resume` continues: those not done that have a session to continue.
    pub fn unfinished(&self) -> BTreeMap<usize, Resume> {
        self.agents
            .iter()
            .enumerate()
            .filter(|(_, a)| a.status.state != AgentState::Done)
            .filter_map(|(i, a)| {
                Some((
                    i,
                    Resume {
                        workspace: a.workspace.clone()?,
                        session: a.session.clone()?,
                        acp_session: a.acp_session.clone(),
                        prompt: None,
                        moved: false,
                    },
                ))
            })
            .collect()
    }

    /// Takes in one event, as worked on node `node`; whether the record changed in a way
    /// worth writing (the answer's text is not kept here).
    pub(super) fn take(&mut self, event: &RunEvent, node: &str) -> bool {
        if let RunEvent::Summary { agents } = event {
            for summary in agents {
                if let Some(a) = self.agents.get_mut(summary.agent) {
                    a.summary = Some(summary.clone());
                }
            }
            self.state = RunState::Ended;
            self.ended_at = Some(Utc::now());
            self.supervisor = None;
            return true;
        }
        let Some(a) = event.agent().and_then(|i| self.agents.get_mut(i)) else {
            return false;
        };
        match event {
            RunEvent::Text { .. } => return false,
            RunEvent::Started {
                workspace,
                session,
                worktree,
                ..
            } => {
                a.workspace = Some(workspace.clone());
                a.session = Some(session.clone());
                a.worktree = Some(worktree.clone());
                // Kept by the supervisor, on the machine that runs the agent.
                a.node = Some(node.to_owned());
            }
            RunEvent::AgentSession { id, .. } => a.acp_session = Some(id.clone()),
            _ => {}
        }
        a.status.apply(event);
        true
    }

    /// Ends a queued run that no worker took yet: stopped, its agents never started.
    pub(super) fn stop_queued(&mut self) {
        self.state = RunState::Ended;
        self.ended_at = Some(Utc::now());
        self.message = Some("stopped before a worker took it".to_owned());
        for a in &mut self.agents {
            a.status.state = AgentState::Stopped;
            a.status.stop = Some("cancelled".to_owned());
            a.status.message = Some("stopped while queued, before it started".to_owned());
        }
    }

    /// Marks the run failed, and each agent that had not ended, for `why`.
    pub(super) fn fail(&mut self, why: &str) {
        self.state = RunState::Failed;
        self.ended_at = Some(Utc::now());
        self.supervisor = None;
        self.message = Some(why.to_owned());
        for a in &mut self.agents {
            if !a.status.state.is_final() {
                a.status.state = AgentState::Failed;
                a.status.stop = Some("failed".to_owned());
                a.status.message = Some(why.to_owned());
            }
        }
    }
}

/// Where a run's review stands: what a person reads first (`run list`, `run show`, the
/// dashboard, the web page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    pub stage: ReviewStage,
    /// The agents merged (counted from 1), when picked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub picked: Vec<usize>,
    /// Checks that passed, and that failed (one not run counts in neither).
    pub checks_passed: usize,
    pub checks_failed: usize,
}

/// A run's review, in a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewStage {
    /// Queued for a worker.
    Queued,
    /// Its agents are at work.
    Running,
    /// An agent waits for a person's answer (`--ask`).
    Waiting,
    /// Over, and nothing picked or discarded yet: a person's turn.
    Review,
    /// An agent's work was merged.
    Picked,
    /// Every agent's work was dropped, or kept aside, and none merged.
    Discarded,
}

impl ReviewStage {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewStage::Queued => "queued",
            ReviewStage::Running => "running",
            ReviewStage::Waiting => "waiting",
            ReviewStage::Review => "review",
            ReviewStage::Picked => "picked",
            ReviewStage::Discarded => "discarded",
        }
    }
}

impl fmt::Display for Review {
    /// `picked 3 2✓ 1✗`, `review 1✓`, `running`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.stage.as_str())?;
        if !self.picked.is_empty() {
            let picked: Vec<String> = self.picked.iter().map(usize::to_string).collect();
            write!(f, " {}", picked.join(","))?;
        }
        if self.checks_passed > 0 {
            write!(f, " {}✓", self.checks_passed)?;
        }
        if self.checks_failed > 0 {
            write!(f, " {}✗", self.checks_failed)?;
        }
        Ok(())
    }
}

impl RunRecord {
    /// Where the run's review stands.
    pub fn review(&self) -> Review {
        let merged: Vec<usize> = self
            .agents
            .iter()
            .enumerate()
            .filter(|(_, a)| a.outcome == Some(AgentOutcome::Merged))
            .map(|(i, _)| i + 1)
            .collect();
        let stage = match self.state {
            RunState::Queued => ReviewStage::Queued,
            RunState::Starting | RunState::Running
                if self.agents.iter().any(|a| a.status.waiting.is_some()) =>
            {
                ReviewStage::Waiting
            }
            RunState::Starting | RunState::Running => ReviewStage::Running,
            RunState::Ended | RunState::Failed if !merged.is_empty() => ReviewStage::Picked,
            RunState::Ended | RunState::Failed
                if !self.agents.is_empty() && self.agents.iter().all(|a| a.outcome.is_some()) =>
            {
                ReviewStage::Discarded
            }
            RunState::Ended | RunState::Failed => ReviewStage::Review,
        };
        let (mut checks_passed, mut checks_failed) = (0, 0);
        for a in &self.agents {
            match a.check().map(|c| (c.passed, c.not_run)) {
                Some((true, _)) => checks_passed += 1,
                Some((false, false)) => checks_failed += 1,
                _ => {}
            }
        }
        Review {
            stage,
            picked: merged,
            checks_passed,
            checks_failed,
        }
    }
}

impl AgentRecord {
    /// Its check's result, once it ran (or was found not to run).
    pub fn check(&self) -> Option<&crate::check::CheckResult> {
        self.summary.as_ref().and_then(|s| s.check.as_ref())
    }
}

/// A request to stop a run or one of its agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRequest {
    All,
    /// The agent's index, 0-based.
    Agent(usize),
}
