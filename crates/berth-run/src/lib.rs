//! berth-run: agents put to work in workspaces, several side by side, watched, checked, and
//! summed up, for every front end that starts runs (`berth run` today; `berth serve` and its
//! web page next).
//!
//! A run is one task given to one or more agents: berth's own, or any ACP agent by its
//! command (`acp_agent`). Each agent gets a git workspace of its own
//! (made with the usual create rules: spares, `[git] copy` and `setup`), and a berth session
//! in it titled after the task, whose transcript keeps the task and the answer as they stream.
//! The agents run at once; their events come through one channel as [`RunEvent`]s, tagged
//! with the agent's index, in the order each agent produced them. When every agent has ended,
//! the run's check command (`--check`) runs in each worktree, and a [`RunEvent::Summary`]
//! closes the channel: per agent, how it stopped, what it changed against its base, the
//! check's result, tokens and time.
//!
//! Permissions are a policy: tools the policy allows run; every other call that writes or runs
//! is refused, the agent is told it was the policy (an error result), and the refusal is an
//! event; unless the run asks a person (`--ask`, [`ask`]), and then the call waits for an
//! answer ([`Run::answer`]) or the run's wait. Stopping a run ([`Run::stop`]) cancels every turn at once; the
//! text already streamed stays in the transcripts, marked interrupted.

mod acp_agent;
mod agents;
mod ask;
mod check;
mod compare;
mod detach;
mod finish;
mod kept;
mod notices;
mod preflight;
mod pull_request;
mod pushed;
mod stderr;
mod supervisor;
mod terminals;
mod worker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use berth_agent::{
    Agent, AgentEvent, CancellationToken, Decision, PermissionRequest, Permissions, TurnOptions,
    TurnRequest, TurnStop,
};
use berth_ops::{CreateSession, CreateWorkspace, ErrorKind, Ops, Repository};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

pub use agents::{
    AgentChoice, AgentNumber, AgentSpec, BUILTIN, check_model_name, choose_agents, parse_agent,
    parse_agents,
};
pub use ask::{Answer, DEFAULT_ASK_TIMEOUT};
pub use berth_agent::Policy;
pub use check::CheckResult;
pub use compare::{Compared, Comparison, compare};
pub use detach::{Detach, SUPERVISOR_START, ToldDetached, detach, start_detached, tell_detached};
pub use finish::{
    Cleaned, Dropped, Pick, Picked, clean, cleanable, delete_workspace, discard, merge_message,
    pick,
};
pub use kept::{
    AgentOutcome, AgentRecord, KeptError, PoolPlace, RunId, RunPage, RunRecord, RunState, RunStore,
    StopRequest, StoredRequest, Supervision,
};
pub use preflight::preflight;
pub use pull_request::pull_request_text;
pub use pushed::{merge_workspace, pushed_url, workspace_diff};
pub use stderr::read_kept as read_kept_stderr;
pub use supervisor::{Host, Next, Supervised, Told};
pub use worker::{WorkerOptions, queue, work};

/// Seconds a check may take in each worktree unless the run says otherwise.
pub const DEFAULT_CHECK_TIMEOUT_SECS: u64 = 600;

/// What to run.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub task: String,
    /// The repository the workspaces are worktrees of (the folder it was started in, or
    /// `--repo`).
    pub repository: Repository,
    /// Work in this existing workspace (id, name or prefix) instead of a new one: one agent,
    /// in its worktree or folder.
    pub workspace: Option<String>,
    /// One per agent.
    pub agents: Vec<AgentSpec>,
    /// The workspaces' names start with this (default: from the task); each gets its index.
    pub name: Option<String>,
    pub policy: Policy,
    /// Run in each worktree once the agents are done.
    pub check: Option<String>,
    /// How long a check may take.
    pub check_timeout: Duration,
    /// A run resumed (`berth run resume`): only these agents run, each continuing in its
    /// workspace and session. Empty for a new run.
    pub resume: BTreeMap<usize, Resume>,
    /// What an ACP agent's process may write besides its worktree (`--agent-writable`);
    /// empty: the state berth knows the agent keeps (`berth_sandbox::agent_profile`).
    pub agent_writable: Vec<PathBuf>,
    /// Give the work back by pushing: each agent that ended done has its uncommitted work
    /// committed and its branch pushed to the repository's `origin` (a repository named by
    /// URL, whose clone berth keeps).
    pub push: bool,
    /// What each agent may use before it is stopped (`--max-tokens`, `--max-cost`; else
    /// `[run]`'s).
    pub budget: Budget,
    /// Agents working at once, the others queued: a worker's `--max-agents` for a run larger
    /// than it; `None`: `[run] max_agents`.
    pub max_agents: Option<usize>,
    /// Where each ACP agent's standard error is kept (`agent-N.stderr`, the last MiB or
    /// more): the kept run's folder on this machine, set by its supervisor; `None`: not kept.
    pub stderr_dir: Option<PathBuf>,
    /// `--ask`: a call the policy does not cover waits this long for a person's answer
    /// ([`Run::answer`]) instead of being refused; `None`: refused at once.
    pub ask: Option<Duration>,
}

/// What one agent of a run may use; past it the agent is stopped, recorded as `budget`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// US dollars, by the session's model's `[prices]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
}

impl Budget {
    /// This budget, where it is silent `[run]`'s of `loaded`.
    fn or(self, loaded: &berth_ops::LoadedConfig) -> Budget {
        let run = &loaded.config.run;
        Budget {
            max_tokens: self.max_tokens.or(run.max_tokens),
            max_cost: self.max_cost.or(run.max_cost),
        }
    }

    /// Why `usage` (costing `cost`, where the price is known) is over the budget.
    fn crossed(&self, usage: berth_agent::Usage, cost: Option<f64>) -> Option<String> {
        let tokens = usage.input_tokens + usage.output_tokens;
        if let Some(max) = self.max_tokens
            && tokens > max
        {
            return Some(format!(
                "stopped at its budget: {tokens} tokens, over the {max} allowed (--max-tokens)"
            ));
        }
        if let (Some(max), Some(cost)) = (self.max_cost, cost)
            && cost > max
        {
            return Some(format!(
                "stopped at its budget: ${cost:.2}, over the ${max:.2} allowed (--max-cost)"
            ));
        }
        None
    }
}

/// An agent continued where it stopped: its workspace and session, and an ACP agent's own
/// session id (which it loads with `session/load`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    pub workspace: String,
    pub session: String,
    pub acp_session: Option<String>,
    /// What the agent is told (`berth run tell`); without it, to carry on with the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Its workspace is on another node (one that died): it goes on in a new workspace here,
    /// in a new session carrying its transcript.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub moved: bool,
}

/// What a resumed agent is told: the task again, and that its work so far is in the
/// worktree (its earlier answers are in the session it continues).
fn resume_prompt(task: &str) -> String {
    format!(
        "Your earlier turn on this task was cut off before it ended (the process running it \
         stopped). What you changed is still in the worktree: look at its state and carry on \
         until the task is done. The task:\n\n{task}"
    )
}

/// What an agent taken over from a node that died is told: its work there is gone, its
/// history is not.
fn moved_prompt(task: &str) -> String {
    format!(
        "Your earlier turn on this task was cut off before it ended: the machine running it \
         stopped, and what you changed there is lost. This is a fresh worktree. Do the task \
         again here, from the start, until it is done. The task:\n\n{task}"
    )
}

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
            | RunEvent::Asked { agent, .. }
            | RunEvent::Answered { agent, .. }
            | RunEvent::Ended { agent, .. }
            | RunEvent::Checked { agent, .. }
            | RunEvent::Pushed { agent, .. } => Some(*agent),
            RunEvent::Summary { .. } => None,
        }
    }
}

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
    /// The answer so far.
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
            RunEvent::Text { text, .. } => self.answer.push_str(text),
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

/// What stops a run from starting.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the task is empty: give the agents something to do")]
    EmptyTask,
    #[error("a run needs at least one agent")]
    NoAgents,
    #[error("a run in an existing workspace takes one agent, not {0}")]
    OneAgentPerWorkspace(usize),
    #[error(
        "a run makes a git worktree per agent, and {0} is in no git repository: start it in one, or name one with --repo"
    )]
    NoRepository(PathBuf),
    #[error("a run resumed names agent {0}, which the run does not have")]
    NoSuchAgent(usize),
    #[error(
        "the agent command {command:?} cannot start: {program:?} is not a program on PATH (or, with a '/', a file that can run); install it, or name another agent command"
    )]
    AgentCannotStart { command: String, program: String },
    #[error(
        "the agent command {command:?} cannot start confined: its program {} is in {}, which the sandbox hides from agent processes; install it elsewhere (on PATH outside that folder, or in the repository), or run unconfined with [sandbox] mode = \"off\"",
        .program.display(),
        .hidden_by.display()
    )]
    AgentHidden {
        command: String,
        program: PathBuf,
        hidden_by: PathBuf,
    },
    /// berth's own agent cannot call its model (no key for its provider).
    #[error(transparent)]
    Agent(berth_agent::AgentError),
    #[error(transparent)]
    Ops(#[from] berth_ops::Error),
    /// Its record could not be kept.
    #[error(transparent)]
    Kept(#[from] KeptError),
}

impl RunError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            RunError::EmptyTask
            | RunError::NoAgents
            | RunError::OneAgentPerWorkspace(_)
            | RunError::NoRepository(_)
            | RunError::NoSuchAgent(_) => ErrorKind::Invalid,
            RunError::AgentCannotStart { .. } | RunError::AgentHidden { .. } => {
                ErrorKind::NotConfigured
            }
            RunError::Agent(e) => e.kind(),
            RunError::Ops(e) => e.kind(),
            RunError::Kept(e) => e.kind(),
        }
    }
}

/// A run under way: its events, and the way to stop it.
pub struct Run {
    pub events: mpsc::Receiver<RunEvent>,
    /// Its agents' questions waiting for a person (`--ask`).
    questions: Arc<ask::Questions>,
    /// Whose `[[notify]]` entries hear of the run's events.
    ops: Ops,
    told: Arc<Tellings>,
    stopper: Stopper,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Run {
    /// Cancels every agent's turn at once; the run then checks and sums up as usual, each
    /// stopped agent as `stopped`.
    pub fn stop(&self) {
        self.stopper.stop();
    }

    /// Cancels agent `i`'s turn (0-based); the others go on.
    pub fn stop_agent(&self, i: usize) {
        self.stopper.stop_agent(i);
    }

    /// Tells agent `i` (0-based) `text` once its current turn ends, in the same session;
    /// `false` when its turns are over already (it ended, or never started).
    pub fn tell(&self, i: usize, text: String) -> bool {
        self.told.push(i, text)
    }

    /// Answers agent `i`'s (0-based) question `question` (`--ask`); `false` when it is not
    /// waiting any more (answered, expired, its agent stopped).
    pub fn answer(&self, i: usize, question: &str, answer: Answer) -> bool {
        self.questions.answer(i, question, answer)
    }

    /// A handle that stops the run, for whoever does not hold its events.
    pub fn stopper(&self) -> Stopper {
        self.stopper.clone()
    }

    /// Why the run's events ended before its summary: its task panicked (with the panic's
    /// message) or was dropped. For whoever finds the channel closed without a
    /// [`RunEvent::Summary`].
    pub async fn why_it_broke(&mut self) -> String {
        let Some(task) = self.task.take() else {
            return "the run's task is gone".to_owned();
        };
        match task.await {
            Ok(()) => "the run's task ended without summing up".to_owned(),
            Err(e) if e.is_panic() => {
                let panic = e.into_panic();
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".to_owned());
                format!("berth failed inside the run (a panic: {message}); this is a bug")
            }
            Err(e) => format!("the run's task was stopped: {e}"),
        }
    }
}

/// Stops a run, or one of its agents, from elsewhere (see [`Run::stop`]).
#[derive(Clone)]
pub struct Stopper {
    all: CancellationToken,
    /// One per agent, each a child of `all`.
    agents: Vec<CancellationToken>,
}

impl Stopper {
    pub fn stop(&self) {
        self.all.cancel();
    }

    /// Cancels agent `i`'s turn; an index the run does not have does nothing.
    pub fn stop_agent(&self, i: usize) {
        if let Some(token) = self.agents.get(i) {
            token.cancel();
        }
    }

    /// What stops agent `i`: a stop of the run, or of this agent.
    fn agent(&self, i: usize) -> CancellationToken {
        self.agents
            .get(i)
            .cloned()
            .unwrap_or_else(|| self.all.clone())
    }
}

/// Starts a run: checks the request, then makes the workspaces and runs the agents on a task
/// of its own. A workspace that cannot be made is that agent's failure, not the run's.
pub fn start(ops: Ops, agent: Agent, request: RunRequest) -> Result<Run, RunError> {
    let request = prepare(request)?;
    let (tx, rx) = mpsc::channel(1024);
    let all = CancellationToken::new();
    let agents = request.agents.iter().map(|_| all.child_token()).collect();
    let stopper = Stopper { all, agents };
    let told = Arc::new(Tellings::default());
    let questions = Arc::new(ask::Questions::default());
    let run = Arc::new(Running {
        ops: ops.clone(),
        agent,
        request,
        tx,
        stopper: stopper.clone(),
        told: told.clone(),
        questions: questions.clone(),
        over_budget: Default::default(),
    });
    let task = tokio::spawn(async move { run.run().await });
    Ok(Run {
        events: rx,
        questions,
        ops,
        told,
        stopper,
        task: Some(task),
    })
}

/// Checks a request before anything is made, and settles its repository (the one around
/// the folder it names): what [`start`] does first, for a front end that records the run
/// before it starts it (`berth run --detach`).
pub fn prepare(request: RunRequest) -> Result<RunRequest, RunError> {
    if request.task.trim().is_empty() {
        return Err(RunError::EmptyTask);
    }
    if request.agents.is_empty() {
        return Err(RunError::NoAgents);
    }
    if request.workspace.is_some() && request.agents.len() > 1 {
        return Err(RunError::OneAgentPerWorkspace(request.agents.len()));
    }
    writable_needs_an_acp_agent(&request)?;
    // A name that cannot be a workspace's, with the largest index it will get, is refused
    // now rather than by every agent's create.
    if let Some(name) = &request.name {
        berth_ops::WorkspaceName::new(format!("{name}-{}-20", request.agents.len()))
            .map_err(|e| RunError::Ops(e.into()))?;
    }
    // Checked before anything is made: outside a repository, a create would make plain
    // workspaces, one per agent, only for the run to fail on each.
    let repository = match &request.repository {
        _ if request.workspace.is_some() => Repository::None,
        // A resumed run's workspaces exist already.
        kept if !request.resume.is_empty() => kept.clone(),
        Repository::Around(dir) => {
            let repo =
                berth_git::Repo::discover(dir).map_err(|_| RunError::NoRepository(dir.clone()))?;
            Repository::Named(repo.root().to_path_buf())
        }
        Repository::Named(dir) => Repository::Named(dir.clone()),
        Repository::None => return Err(RunError::NoRepository(PathBuf::from("this server"))),
    };
    if let Some(i) = request.resume.keys().find(|i| **i >= request.agents.len()) {
        return Err(RunError::NoSuchAgent(*i));
    }
    Ok(RunRequest {
        repository,
        ..request
    })
}

/// Refuses state to write (`--agent-writable`) for a run with no ACP agent, whose process it
/// would be for: refused, not ignored. [`prepare`]'s, and a queued run's.
pub(crate) fn writable_needs_an_acp_agent(request: &RunRequest) -> Result<(), RunError> {
    let any_acp = request
        .agents
        .iter()
        .any(|a| matches!(a, AgentSpec::Acp { .. }));
    if !request.agent_writable.is_empty() && !any_acp {
        return Err(RunError::Ops(berth_ops::Error::invalid(
            "--agent-writable is for ACP agents' processes, and this run has none: berth's own agent writes only its worktree",
        )));
    }
    Ok(())
}

/// The places of a run whose agents outnumber `[run] max_agents`.
#[derive(Clone)]
struct Places {
    max: usize,
    free: Arc<tokio::sync::Semaphore>,
}

struct Running {
    ops: Ops,
    agent: Agent,
    request: RunRequest,
    tx: mpsc::Sender<RunEvent>,
    stopper: Stopper,
    told: Arc<Tellings>,
    questions: Arc<ask::Questions>,
    /// Why an agent was stopped at its budget, once it was.
    over_budget: std::sync::Mutex<BTreeMap<usize, String>>,
}

/// What an agent has spent, and may: its budget, its model's price (per million tokens read
/// and written), and the tokens of its turns before this one.
#[derive(Clone, Copy)]
struct Spending {
    budget: Budget,
    price: Option<(f64, f64)>,
    before: berth_agent::Usage,
}

impl Spending {
    /// Why the agent is over its budget, having used `usage` in this turn.
    fn crossed(&self, usage: berth_agent::Usage) -> Option<String> {
        let total = berth_agent::Usage {
            input_tokens: self.before.input_tokens + usage.input_tokens,
            output_tokens: self.before.output_tokens + usage.output_tokens,
        };
        let cost = self.price.map(|(input, output)| {
            (total.input_tokens as f64 * input + total.output_tokens as f64 * output) / 1_000_000.0
        });
        self.budget.crossed(total, cost)
    }
}

/// What agents of a running run were told while they worked (`berth run tell`), each taken
/// after the agent's current turn; an agent whose last turn ended takes no more.
#[derive(Default)]
struct Tellings {
    queues: std::sync::Mutex<BTreeMap<usize, (std::collections::VecDeque<String>, bool)>>,
}

impl Tellings {
    /// Queues `text` for agent `i`; `false` when its turns are over.
    fn push(&self, i: usize, text: String) -> bool {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let (texts, closed) = queues.entry(i).or_default();
        if *closed {
            return false;
        }
        texts.push_back(text);
        true
    }

    /// The next text for agent `i`, else its turns are over from now.
    fn next_or_close(&self, i: usize) -> Option<String> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let (texts, closed) = queues.entry(i).or_default();
        let next = texts.pop_front();
        if next.is_none() {
            *closed = true;
        }
        next
    }

    /// Agent `i` takes no more; what was queued for it is dropped and given back.
    fn close(&self, i: usize) -> Vec<String> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        let (texts, closed) = queues.entry(i).or_default();
        *closed = true;
        texts.drain(..).collect()
    }
}

/// One agent's workspace and session, once made.
struct Placed {
    workspace: berth_ops::WorkspaceView,
    session: berth_ops::Session,
    worktree: PathBuf,
    /// What every process started for the workspace gets (its ports).
    env: Vec<(String, String)>,
}

impl Running {
    /// What agent `i` asks a person with, when the run asks (`--ask`).
    fn asking(&self, i: usize) -> Option<ask::Asking> {
        self.request.ask.map(|timeout| ask::Asking {
            questions: self.questions.clone(),
            timeout,
            cancel: self.stopper.agent(i),
            tx: self.tx.clone(),
        })
    }

    /// A place for agent `i`, at once or once it is queued and another agent ends; `None`
    /// when the agent, or the run, is stopped while it waits.
    async fn take_place(
        &self,
        i: usize,
        places: &Places,
    ) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if let Ok(place) = places.free.clone().try_acquire_owned() {
            return Some(place);
        }
        self.send(RunEvent::Queued {
            agent: i,
            max_agents: places.max,
        })
        .await;
        let stop = self.stopper.agent(i);
        tokio::select! {
            place = places.free.clone().acquire_owned() => place.ok(),
            _ = stop.cancelled() => None,
        }
    }

    async fn send(&self, event: RunEvent) {
        // A front end that stopped listening does not stop the run: the transcripts and the
        // workspaces are still written.
        let _ = self.tx.send(event).await;
    }

    async fn run(self: Arc<Self>) {
        let base = self
            .request
            .name
            .clone()
            .unwrap_or_else(|| name_from_task(&self.request.task));
        let which: Vec<usize> = match self.request.resume.is_empty() {
            true => (0..self.request.agents.len()).collect(),
            false => self.request.resume.keys().copied().collect(),
        };
        // `[run] max_agents` places (or the worker's), taken in the agents' order; none:
        // no limit.
        let configured = match self.ops.config(None).await {
            Ok(loaded) => loaded.config.run.max_agents.map(|n| n.get()),
            Err(_) => None,
        };
        let places = match (self.request.max_agents, configured) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
        .filter(|max| *max < which.len())
        .map(|max| Places {
            max,
            free: Arc::new(tokio::sync::Semaphore::new(max)),
        });
        let agents = which.into_iter().map(|i| {
            let me = self.clone();
            let base = base.clone();
            let places = places.clone();
            async move { me.one(i, &base, places.as_ref()).await }
        });
        let mut summaries = futures::future::join_all(agents).await;
        if let Some(command) = &self.request.check {
            let checks = summaries.iter().map(|s| {
                // A stop of the run, or of this agent, cuts its check short.
                let stop = self.stopper.agent(s.summary.agent);
                let worktree = s.worktree.clone();
                let env = s.env.clone();
                let command = command.clone();
                let timeout = self.request.check_timeout;
                let workspace = s.summary.workspace.clone();
                let ops = self.ops.clone();
                async move {
                    let dir = worktree?;
                    let ws = match workspace {
                        Some(id) => ops.resolve_workspace(&id).await.ok(),
                        None => None,
                    };
                    let sandbox = ops.sandbox(ws.as_ref(), &dir).await;
                    Some(check::run(dir, command, env, timeout, sandbox, stop).await)
                }
            });
            let results = futures::future::join_all(checks).await;
            for (s, result) in summaries.iter_mut().zip(results) {
                if let Some(result) = result {
                    self.send(RunEvent::Checked {
                        agent: s.summary.agent,
                        check: result.clone(),
                    })
                    .await;
                    s.summary.check = Some(result);
                }
            }
        }
        if self.request.push {
            self.push(&summaries).await;
        }
        for s in &mut summaries {
            if let Some(id) = &s.summary.workspace
                && let Ok(d) = self.ops.workspace_diff(id, false).await
            {
                let (added, removed) = d.totals();
                s.summary.files_changed = d.files.len();
                s.summary.added = added;
                s.summary.removed = removed;
            }
            if let Some(id) = &s.summary.session
                && let Ok(session) = self.ops.resolve_session(id).await
            {
                s.summary.cost_usd = self.ops.session_cost(&session).await.ok().flatten();
            }
        }
        let agents = summaries.into_iter().map(|s| s.summary).collect();
        self.send(RunEvent::Summary { agents }).await;
    }

    /// Gives each agent's work back to the repository's `origin`: the uncommitted work of
    /// each that ended done committed, its branch pushed. One that cannot be pushed is said,
    /// and its work stays in its workspace.
    async fn push(&self, summaries: &[Outcome]) {
        for s in summaries {
            let (Some(id), AgentState::Done) = (&s.summary.workspace, s.summary.state) else {
                continue;
            };
            let agent = s.summary.agent;
            let message = format!(
                "{} (berth run, agent {})",
                berth_ops::title_of(&self.request.task),
                agent + 1
            );
            match self.ops.push_workspace(id, "origin", Some(&message)).await {
                Ok(pushed) => {
                    let branch = pushed.branch;
                    self.send(RunEvent::Pushed { agent, branch }).await
                }
                Err(e) => {
                    self.send(RunEvent::Notice {
                        agent,
                        message: format!("its branch could not be pushed, and stays here: {e}"),
                    })
                    .await
                }
            }
        }
    }

    /// Agent `i`: a place among the run's `max_agents`, then its workspace and session, its
    /// turn, its end.
    async fn one(&self, i: usize, base: &str, places: Option<&Places>) -> Outcome {
        let spec = &self.request.agents[i];
        let mut summary = AgentSummary {
            agent: i,
            label: spec.label(),
            workspace: None,
            workspace_name: None,
            session: None,
            state: AgentState::Starting,
            stop: "failed".to_owned(),
            message: None,
            files_changed: 0,
            added: 0,
            removed: 0,
            check: None,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: None,
            elapsed_ms: 0,
        };
        // Held until its turn ends: the check runs after every agent's, out of the count.
        let _place = match places {
            Some(places) => match self.take_place(i, places).await {
                Some(place) => Some(place),
                None => {
                    summary.state = AgentState::Stopped;
                    summary.stop = "cancelled".to_owned();
                    summary.message = Some("stopped while queued, before it started".to_owned());
                    self.send(ended(&summary)).await;
                    return Outcome {
                        summary,
                        worktree: None,
                        env: Vec::new(),
                    };
                }
            },
            None => None,
        };
        let started = Instant::now();
        let resume = self.request.resume.get(&i);
        let placed = match resume {
            Some(r) if r.moved => self.placed_again(i, base, r).await,
            Some(r) => self.placed_before(r).await,
            None => self.place(i, base, spec).await,
        };
        let placed = match placed {
            Ok(p) => p,
            Err(e) => {
                summary.state = AgentState::Failed;
                summary.message = Some(e.to_string());
                self.send(ended(&summary)).await;
                return Outcome {
                    summary,
                    worktree: None,
                    env: Vec::new(),
                };
            }
        };
        summary.workspace = Some(placed.workspace.id.to_string());
        summary.workspace_name = placed.workspace.name.clone();
        summary.session = Some(placed.session.id.to_string());
        self.send(RunEvent::Started {
            agent: i,
            label: summary.label.clone(),
            workspace: placed.workspace.id.to_string(),
            workspace_name: placed.workspace.name.clone().unwrap_or_default(),
            session: placed.session.id.to_string(),
            worktree: placed.worktree.clone(),
        })
        .await;
        let mut prompt = match resume {
            Some(Resume {
                prompt: Some(told), ..
            }) => told.clone(),
            Some(Resume { moved: true, .. }) => moved_prompt(&self.request.task),
            Some(_) => resume_prompt(&self.request.task),
            None => self.request.task.clone(),
        };
        let mut acp_session = resume.and_then(|r| r.acp_session.clone());
        if matches!(spec, AgentSpec::Acp { .. }) {
            // An ACP agent's process answers one prompt; it is told more once the run is
            // over (`berth run tell` then resumes its session).
            self.told.close(i);
        }
        let mut usage = berth_agent::Usage::default();
        let mut spending = self.spending(i, &placed).await;
        // A turn, then one more for each thing the agent was told while it worked.
        let stop = loop {
            spending.before = usage;
            let (stop, used) = match spec {
                AgentSpec::Berth { .. } => self.turn(i, &placed, prompt, spending).await,
                AgentSpec::Acp { command, .. } => {
                    acp_agent::turn(acp_agent::AcpTurn {
                        command,
                        agent: i,
                        prompt: &prompt,
                        resume: acp_session.take(),
                        worktree: &placed.worktree,
                        session: &placed.session,
                        env: &placed.env,
                        ops: &self.ops,
                        policy: &self.request.policy,
                        tx: &self.tx,
                        cancel: self.stopper.agents[i].clone(),
                        declared: spec.declared(&self.request.agent_writable),
                        asking: self.asking(i),
                        stderr: self
                            .request
                            .stderr_dir
                            .as_ref()
                            .map(|d| d.join(format!("agent-{}.stderr", i + 1))),
                    })
                    .await
                }
            };
            // An ACP agent says what it used when its turn ends: held to its budget then.
            if let Some(why) = spending.crossed(used) {
                self.over_budget
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(i)
                    .or_insert(why);
            }
            usage.input_tokens += used.input_tokens;
            usage.output_tokens += used.output_tokens;
            let went_on = matches!(
                stop,
                TurnStop::EndTurn | TurnStop::MaxTokens | TurnStop::MaxToolIterations
            );
            if !went_on {
                for dropped in self.told.close(i) {
                    self.send(RunEvent::Notice {
                        agent: i,
                        message: format!(
                            "it was not told {:?}: its turn ended {}",
                            berth_ops::title_of(&dropped),
                            stop.as_str()
                        ),
                    })
                    .await;
                }
                break stop;
            }
            match self.told.next_or_close(i) {
                Some(text) => {
                    self.send(RunEvent::Notice {
                        agent: i,
                        message: format!("told: {}", berth_ops::title_of(&text)),
                    })
                    .await;
                    prompt = text;
                }
                None => break stop,
            }
        };
        summary.elapsed_ms = started.elapsed().as_millis() as u64;
        summary.input_tokens = usage.input_tokens;
        summary.output_tokens = usage.output_tokens;
        summary.stop = stop.as_str().to_owned();
        let over_budget = self
            .over_budget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&i);
        (summary.state, summary.message) = match stop {
            _ if over_budget.is_some() => (AgentState::Budget, over_budget),
            TurnStop::Cancelled => (AgentState::Stopped, None),
            TurnStop::Failed { message } => (AgentState::Failed, Some(message)),
            TurnStop::EndTurn
            | TurnStop::MaxTokens
            | TurnStop::MaxToolIterations
            | TurnStop::Refusal => (AgentState::Done, None),
        };
        self.send(ended(&summary)).await;
        Outcome {
            summary,
            worktree: Some(placed.worktree),
            env: placed.env,
        }
    }

    /// Makes agent `i`'s workspace (`<base>-<i+1>`, or the next free number after it) and its
    /// session, with the agent's model kept as the session's choice.
    async fn place(&self, i: usize, base: &str, spec: &AgentSpec) -> berth_ops::Result<Placed> {
        let (workspace, worktree) = match &self.request.workspace {
            Some(identifier) => {
                let ws = self.ops.resolve_workspace(identifier).await?;
                let dir = self.ops.work_dir(&ws)?;
                (self.ops.view(&ws, None), dir)
            }
            None => self.create(i, base).await?,
        };
        let session = self
            .ops
            .create_session(CreateSession {
                workspace: workspace.id.to_string(),
                title: berth_ops::title_of(&self.request.task),
                cwd: Some(worktree.clone()),
                ..CreateSession::default()
            })
            .await?;
        if let Some(name) = spec.model() {
            let current = self.ops.session_model(&session).await?.choice;
            let choice = self
                .agent
                .parse_model(&workspace.id, name, &current)
                .await
                .map_err(|e| berth_ops::Error::rule(e.kind(), e.to_string()))?;
            self.ops.choose_session_model(&session, &choice).await?;
        }
        // The agent, its terminals and its check are the workspace's processes: its block of
        // ports is given here if it has none yet, before any of them starts.
        let record = self.ops.resolve_workspace(workspace.id.as_str()).await?;
        let record = self.ops.with_ports(record).await?;
        let env = self.ops.workspace_env(&record);
        Ok(Placed {
            workspace,
            session,
            worktree,
            env,
        })
    }

    /// A resumed agent's workspace and session, as they are now.
    async fn placed_before(&self, resume: &Resume) -> berth_ops::Result<Placed> {
        let record = self.ops.resolve_workspace(&resume.workspace).await?;
        let record = self.ops.with_ports(record).await?;
        let worktree = self.ops.work_dir(&record)?;
        let session = self.ops.resolve_session(&resume.session).await?;
        Ok(Placed {
            workspace: self.ops.view(&record, None),
            env: self.ops.workspace_env(&record),
            session,
            worktree,
        })
    }

    /// An agent taken over from a node that died: a new workspace here, and a new session
    /// in it carrying the old one's transcript (the old workspace's folder is that node's).
    async fn placed_again(
        &self,
        i: usize,
        base: &str,
        resume: &Resume,
    ) -> berth_ops::Result<Placed> {
        let (workspace, worktree) = self.create(i, base).await?;
        let from = self.ops.resolve_session(&resume.session).await?;
        let session = self
            .ops
            .carry_session(&from, workspace.id.as_str(), worktree.clone())
            .await?;
        let record = self.ops.resolve_workspace(workspace.id.as_str()).await?;
        let record = self.ops.with_ports(record).await?;
        Ok(Placed {
            workspace,
            env: self.ops.workspace_env(&record),
            session,
            worktree,
        })
    }

    /// A new git workspace for agent `i`, and its worktree.
    async fn create(
        &self,
        i: usize,
        base: &str,
    ) -> berth_ops::Result<(berth_ops::WorkspaceView, PathBuf)> {
        let mut attempt = 0;
        let created = loop {
            let name = match attempt {
                0 => format!("{base}-{}", i + 1),
                n => format!("{base}-{}-{}", i + 1, n + 1),
            };
            let request = CreateWorkspace {
                name: Some(name),
                description: berth_ops::title_of(&self.request.task),
                ..CreateWorkspace::new(self.request.repository.clone())
            };
            match self.ops.create_workspace_reported(request).await {
                Err(e) if e.kind() == ErrorKind::Conflict && attempt < 20 => attempt += 1,
                other => break other?,
            }
        };
        let workspace = created.workspace;
        let Some(worktree) = workspace.git.as_ref().map(|g| g.worktree.clone()) else {
            return Err(berth_ops::Error::invalid(
                "a run needs a git repository: start it in one, or name one with its repository option",
            ));
        };
        Ok((workspace, worktree))
    }

    /// Agent `i`'s budget (the run's, else `[run]`'s) and its model's price. A cost limit
    /// with no price for the model cannot be held: said, and the token limit still holds.
    async fn spending(&self, i: usize, placed: &Placed) -> Spending {
        let global = self.ops.config(None).await;
        let budget = match &global {
            Ok(loaded) => self.request.budget.or(loaded),
            Err(_) => self.request.budget,
        };
        let mut price = None;
        if budget.max_cost.is_some() {
            let model = self
                .ops
                .session_model(&placed.session)
                .await
                .map(|m| m.choice.model);
            let config = self.ops.config(Some(&placed.session.workspace_id)).await;
            if let (Ok(model), Ok(config)) = (model, config) {
                price = config
                    .config
                    .prices
                    .get(&model)
                    .map(|p| (p.input, p.output));
                if price.is_none() {
                    self.send(RunEvent::Notice {
                        agent: i,
                        message: format!(
                            "--max-cost cannot be held: [prices] has no entry for {model} (--max-tokens still is)"
                        ),
                    })
                    .await;
                }
            }
        }
        Spending {
            budget,
            price,
            before: berth_agent::Usage::default(),
        }
    }

    /// The agent's turn on the task, its events relayed as the run's.
    async fn turn(
        &self,
        i: usize,
        placed: &Placed,
        prompt: String,
        spending: Spending,
    ) -> (TurnStop, berth_agent::Usage) {
        let permissions = Arc::new(PolicyPermissions {
            policy: self.request.policy.clone(),
            tx: self.tx.clone(),
            agent: i,
            asking: self.asking(i),
        });
        let request = TurnRequest {
            session: placed.session.clone(),
            prompt,
            images: Vec::new(),
            cwd: placed.worktree.clone(),
            permissions,
            cancel: self.stopper.agents[i].clone(),
            options: TurnOptions {
                // Checked by the turn itself, so a tool the over-budget answer asked for
                // never runs, however soon the Usage event below is read.
                stop_after: Some(Arc::new(move |used| spending.crossed(used).is_some())),
                ..TurnOptions::default()
            },
        };
        let mut turn = match self.agent.start_turn(request).await {
            Ok(t) => t,
            Err(e) => {
                return (
                    TurnStop::Failed {
                        message: e.to_string(),
                    },
                    berth_agent::Usage::default(),
                );
            }
        };
        while let Some(event) = turn.next_event().await {
            let relayed = match event {
                AgentEvent::Text { text } => RunEvent::Text { agent: i, text },
                AgentEvent::ToolStarted { name, kind, .. } => RunEvent::Tool {
                    agent: i,
                    name,
                    kind,
                },
                AgentEvent::ToolFinished { name, is_error, .. } => RunEvent::ToolDone {
                    agent: i,
                    name,
                    is_error,
                },
                AgentEvent::Notice { message } => RunEvent::Notice { agent: i, message },
                AgentEvent::TurnEnded { stop, usage, .. } => return (stop, usage),
                AgentEvent::Usage { usage } => {
                    // Over its budget: stopped at once, as a stop stops it.
                    if let Some(why) = spending.crossed(usage) {
                        self.over_budget
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .entry(i)
                            .or_insert(why);
                        self.stopper.stop_agent(i);
                    }
                    continue;
                }
                AgentEvent::Thought { .. }
                | AgentEvent::PermissionAsked { .. }
                | AgentEvent::Plan { .. } => continue,
            };
            self.send(relayed).await;
        }
        unreachable!("a turn's events end with TurnEnded")
    }
}

/// An agent's summary, and where its check runs.
struct Outcome {
    summary: AgentSummary,
    worktree: Option<PathBuf>,
    env: Vec<(String, String)>,
}

fn ended(s: &AgentSummary) -> RunEvent {
    RunEvent::Ended {
        agent: s.agent,
        state: s.state,
        stop: s.stop.clone(),
        message: s.message.clone(),
        input_tokens: s.input_tokens,
        output_tokens: s.output_tokens,
        elapsed_ms: s.elapsed_ms,
    }
}

/// Permissions from the run's policy: allowed tools run, everything else is refused at once
/// and said as an event.
struct PolicyPermissions {
    policy: Policy,
    tx: mpsc::Sender<RunEvent>,
    agent: usize,
    /// With `--ask`: a person is asked instead.
    asking: Option<ask::Asking>,
}

#[async_trait]
impl Permissions for PolicyPermissions {
    async fn decide(&self, request: &PermissionRequest) -> Decision {
        if self.policy.allows(&request.tool) {
            return Decision::AllowOnce;
        }
        if let Some(asking) = &self.asking {
            return asking
                .ask(self.agent, &request.tool, &request.description)
                .await;
        }
        let _ = self
            .tx
            .send(RunEvent::Refused {
                agent: self.agent,
                tool: request.tool.clone(),
                description: request.description.lines().next().unwrap_or("").to_owned(),
            })
            .await;
        Decision::NotAllowed
    }
}

/// A workspace name from a task: its first words, lowercase, joined by `-`, at most
/// [`NAME_FROM_TASK_MAX`] characters; it stops at the first word that is tool syntax
/// (`write_file`, `path=notes.txt`, `src/lib.rs`), which names nothing a person would look
/// for (a file's name, `out.txt`, is a word: `out-txt`). `run` when no word is left.
pub fn name_from_task(task: &str) -> String {
    let mut name = String::new();
    for raw in task.split_whitespace() {
        let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if word.contains(|c: char| "_=/\\:;()[]{}<>`$@#|&*~+\"'".contains(c)) {
            break;
        }
        let word: String = word
            .chars()
            .map(|c| if c == '.' { '-' } else { c })
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect::<String>()
            .to_ascii_lowercase();
        let word = word
            .split('-')
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join("-");
        let word = word.as_str();
        if word.is_empty() {
            continue;
        }
        let joined = name.len() + usize::from(!name.is_empty()) + word.len();
        if joined > NAME_FROM_TASK_MAX {
            if name.is_empty() {
                name = word[..NAME_FROM_TASK_MAX].trim_end_matches('-').to_owned();
            }
            break;
        }
        if !name.is_empty() {
            name.push('-');
        }
        name.push_str(word);
    }
    if name.is_empty() {
        "run".to_owned()
    } else {
        name
    }
}

/// The longest name [`name_from_task`] gives (each agent's workspace adds `-N`).
pub const NAME_FROM_TASK_MAX: usize = 24;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_tasks_first_words() {
        assert_eq!(
            name_from_task("Fix the parser: it panics!"),
            "fix-the-parser-it-panics"
        );
        assert_eq!(
            name_from_task("Add notes tool: write_file path=notes.txt"),
            "add-notes-tool"
        );
        assert_eq!(name_from_task("Update src/lib.rs to log"), "update");
        assert_eq!(name_from_task("Write out.txt"), "write-out-txt");
        assert_eq!(name_from_task("Tidy ..hidden-- files"), "tidy-hidden-files");
        assert_eq!(name_from_task("Répare le bug"), "rpare-le-bug");
        assert_eq!(name_from_task("¿¡!"), "run");
        assert_eq!(name_from_task("write_file everything"), "run");
        let long = name_from_task(&"word ".repeat(30));
        assert!(
            long.len() <= NAME_FROM_TASK_MAX && !long.ends_with('-'),
            "{long}"
        );
        let one = name_from_task(&"x".repeat(60));
        assert_eq!(one.len(), NAME_FROM_TASK_MAX);
        assert!(berth_ops::WorkspaceName::new(format!("{long}-3")).is_ok());
    }
}
