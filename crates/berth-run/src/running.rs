//! A run under way: `start` makes each agent's workspace and session (or takes the ones a
//! resumed run had), waits for a place when `[run] max_agents` is full, runs berth's own
//! agent's turns (an ACP agent's are `acp_agent.rs`'s), keeps to the budget, then checks
//! and sums up. `Run` is its events and its stop.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use berth_agent::{
    Agent, AgentEvent, CancellationToken, Decision, PermissionRequest, Permissions, TurnOptions,
    TurnRequest, TurnStop,
};
use berth_ops::{CreateSession, CreateWorkspace, ErrorKind, Ops};
use tokio::sync::mpsc;

use crate::acp_agent;
use crate::agents::AgentSpec;
use crate::ask;
use crate::ask::Answer;
use crate::check;
use crate::error::RunError;
use crate::event::AgentState;
use crate::event::AgentSummary;
use crate::event::RunEvent;
use crate::preflight::prepare;
use crate::request::Budget;
use crate::request::Resume;
use crate::request::RunRequest;
use crate::request::moved_prompt;
use crate::request::name_from_task;
use crate::request::resume_prompt;
pub(crate) use crate::tellings::Tellings;
use berth_agent::Policy;

mod between;

/// A run under way: its events, and the way to stop it.
pub(crate) struct Run {
    pub events: mpsc::Receiver<RunEvent>,
    /// Its agents' questions waiting for a person (`--ask`).
    pub(crate) questions: Arc<ask::Questions>,
    /// Whose `[[notify]]` entries hear of the run's events.
    pub(crate) ops: Ops,
    pub(crate) told: Arc<Tellings>,
    pub(crate) stopper: Stopper,
    pub(crate) task: Option<tokio::task::JoinHandle<()>>,
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

    /// Tells agent `i` (0-based) `text` at its next step (berth's own agent), else once its
    /// current turn ends, in the same session;
    /// `false` when its turns are over already (it ended, or never started).
    pub fn tell(&self, i: usize, text: String) -> bool {
        self.told.push(i, text)
    }

    /// [`Run::tell`], cutting agent `i`'s current turn first (`berth run tell --now`): only
    /// that turn is cancelled; the agent goes on with `text`, then what was queued before.
    pub fn tell_now(&self, i: usize, text: String) -> bool {
        self.told.push_now(i, text)
    }

    /// Answers agent `i`'s (0-based) question `question` (`--ask`); `false` when it is not
    /// waiting any more (answered, expired, its agent stopped).
    pub fn answer(&self, i: usize, question: &str, answer: Answer) -> bool {
        self.questions.answer(i, question, answer)
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
pub(crate) struct Stopper {
    pub(crate) all: CancellationToken,
    /// One per agent, each a child of `all`.
    pub(crate) agents: Vec<CancellationToken>,
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
pub(crate) fn start(ops: Ops, agent: Agent, request: RunRequest) -> Result<Run, RunError> {
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
        let check_jobs = match self.ops.config(None).await {
            Ok(loaded) => loaded.config.run.check_jobs(),
            Err(_) => 1,
        };
        let check_jobs = Arc::new(tokio::sync::Semaphore::new(check_jobs));
        // Each agent is measured and checked as soon as it ends, not after the slowest.
        let agents = which.into_iter().map(|i| {
            let me = self.clone();
            let base = base.clone();
            let places = places.clone();
            let check_jobs = check_jobs.clone();
            async move {
                let mut outcome = me.one(i, &base, places.as_ref()).await;
                let measured = me.measure(&mut outcome.summary).await;
                me.check(&mut outcome, measured, &check_jobs).await;
                outcome
            }
        });
        let mut summaries = futures::future::join_all(agents).await;
        if self.request.push {
            self.push(&summaries).await;
        }
        for s in &mut summaries {
            if let Some(id) = &s.summary.session
                && let Ok(session) = self.ops.resolve_session(id).await
            {
                s.summary.cost_usd = self.ops.session_cost(&session).await.ok().flatten();
            }
        }
        let agents = summaries.into_iter().map(|s| s.summary).collect();
        self.send(RunEvent::Summary { agents }).await;
    }

    /// What the agent changed against its base, into its summary; `false` when that cannot
    /// be read (no workspace, or git failed), so nothing is concluded from it.
    async fn measure(&self, summary: &mut AgentSummary) -> bool {
        let Some(id) = &summary.workspace else {
            return false;
        };
        match self.ops.workspace_diff(id, false).await {
            Ok(d) => {
                let (added, removed) = d.totals();
                summary.files_changed = d.files.len();
                summary.added = added;
                summary.removed = removed;
                true
            }
            Err(_) => false,
        }
    }

    /// The run's check for an agent that ended: run in its worktree (one of `check_jobs`
    /// places) when it ended done having changed something, else `not run` with why. Its
    /// output is kept beside the run's record.
    async fn check(
        &self,
        outcome: &mut Outcome,
        measured: bool,
        check_jobs: &tokio::sync::Semaphore,
    ) {
        let Some(command) = &self.request.check else {
            return;
        };
        let i = outcome.summary.agent;
        let keep = self
            .request
            .stderr_dir
            .as_ref()
            .map(|d| d.join(crate::kept::check_log_name(i)));
        let not_run = match outcome.summary.state {
            AgentState::Done if measured && outcome.summary.files_changed == 0 => {
                Some("the agent changed nothing")
            }
            AgentState::Done => None,
            AgentState::Failed => Some("the agent failed"),
            AgentState::Stopped => Some("the agent was stopped"),
            AgentState::Budget => Some("the agent went over its budget"),
            AgentState::Queued | AgentState::Starting | AgentState::Working => {
                Some("the agent did not finish")
            }
        };
        let result = match (not_run, &outcome.worktree) {
            (None, Some(dir)) => {
                // A stop of the run, or of this agent, cuts its check short, or keeps it from
                // starting while it waits for a place.
                let stop = self.stopper.agent(i);
                let place = tokio::select! {
                    place = check_jobs.acquire() => place.ok(),
                    _ = stop.cancelled() => None,
                };
                let ws = match &outcome.summary.workspace {
                    Some(id) => self.ops.resolve_workspace(id).await.ok(),
                    None => None,
                };
                let sandbox = self.ops.sandbox(ws.as_ref(), dir).await;
                let result = check::run(
                    dir.clone(),
                    command.clone(),
                    outcome.env.clone(),
                    self.request.check_timeout,
                    sandbox,
                    stop,
                    keep,
                )
                .await;
                drop(place);
                result
            }
            (why, _) => {
                // What an earlier turn's check printed says nothing of this one.
                if let Some(path) = &keep {
                    let _ = std::fs::remove_file(path);
                }
                check::CheckResult::not_run(command, why.unwrap_or("the agent has no worktree"))
            }
        };
        self.send(RunEvent::Checked {
            agent: i,
            check: result.clone(),
        })
        .await;
        outcome.summary.check = Some(result);
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
        let mut summary = AgentSummary::starting(i, spec.label());
        // Held until its turn ends: its check runs out of the count.
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
        let prompt = match resume {
            Some(Resume {
                prompt: Some(told), ..
            }) => {
                // A run that was over, told more: what it was told, where it was told.
                self.send(RunEvent::Told {
                    agent: i,
                    text: told.clone(),
                })
                .await;
                told.clone()
            }
            Some(Resume { moved: true, .. }) => moved_prompt(&self.request.task),
            Some(_) => resume_prompt(&self.request.task),
            None => self.request.task.clone(),
        };
        let acp_session = resume.and_then(|r| r.acp_session.clone());
        let (stop, usage) = self.turns(i, &placed, prompt, acp_session).await;
        // Its session ends with its last turn, and so does what its agent started in the
        // background: before its work is measured and checked.
        berth_agent::tools::background::end_session(placed.session.id.as_str()).await;
        summary.elapsed_ms = started.elapsed().as_millis() as u64;
        summary.input_tokens = usage.input_tokens;
        summary.output_tokens = usage.output_tokens;
        summary.stop = stop.as_str().to_owned();
        let over_budget = self
            .over_budget
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&i);
        (summary.state, summary.message) = ended_as(stop, over_budget);
        self.send(ended(&summary)).await;
        Outcome {
            summary,
            worktree: Some(placed.worktree),
            env: placed.env,
        }
    }

    /// Agent `i`'s turn on `prompt` in its workspace, then one more for each thing it was
    /// told while it worked and did not take mid-turn; how the last ended, and the tokens of
    /// all of them.
    async fn turns(
        &self,
        i: usize,
        placed: &Placed,
        mut prompt: String,
        acp_session: Option<String>,
    ) -> (TurnStop, berth_agent::Usage) {
        let spec = &self.request.agents[i];
        let between = between::Turns::new(self, i, self.spending(i, placed).await);
        let stop = match spec {
            AgentSpec::Berth { .. } => loop {
                let cancel = acp_agent::Between::turn_cancel(&between);
                let spending = between.spending();
                let (stop, used) = self.turn(i, placed, prompt, spending, cancel).await;
                match acp_agent::Between::next(&between, &stop, used).await {
                    Some(next) => prompt = next,
                    None => break stop,
                }
            },
            AgentSpec::Acp { command, .. } => {
                acp_agent::turns(acp_agent::AcpTurn {
                    command,
                    agent: i,
                    prompt: &prompt,
                    resume: acp_session,
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
                    between: &between,
                })
                .await
            }
        };
        (stop, between.used())
    }

    /// Makes agent `i`'s workspace (`<base>-<i+1>`, or the next free number after it) and its
    /// session, with the agent's model kept as the session's choice, or naming the ACP agent
    /// that works in it (no berth model answers there).
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
                agent: spec.acp_label(),
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
        cancel: CancellationToken,
    ) -> (TurnStop, berth_agent::Usage) {
        let permissions = Arc::new(PolicyPermissions {
            policy: self.request.policy.clone(),
            tx: self.tx.clone(),
            agent: i,
            asking: self.asking(i),
        });
        let told = self.told.clone();
        let request = TurnRequest {
            session: placed.session.clone(),
            prompt,
            images: Vec::new(),
            cwd: placed.worktree.clone(),
            permissions,
            cancel,
            options: TurnOptions {
                // Checked by the turn itself, so a tool the over-budget answer asked for
                // never runs, however soon the Usage event below is read.
                stop_after: Some(Arc::new(move |used| spending.crossed(used).is_some())),
                // What it is told while it works joins at its next step.
                told: Some(Arc::new(move || told.take_all(i))),
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
                AgentEvent::Told { text } => RunEvent::Told { agent: i, text },
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

/// An agent's state once its turns ended `stop`, and why, when not done: a budget crossed
/// first, whatever the turn said.
fn ended_as(stop: TurnStop, over_budget: Option<String>) -> (AgentState, Option<String>) {
    match stop {
        _ if over_budget.is_some() => (AgentState::Budget, over_budget),
        TurnStop::Cancelled => (AgentState::Stopped, None),
        TurnStop::Failed { message } => (AgentState::Failed, Some(message)),
        TurnStop::EndTurn
        | TurnStop::MaxTokens
        | TurnStop::MaxToolIterations
        | TurnStop::Refusal => (AgentState::Done, None),
    }
}

impl AgentSummary {
    /// Agent `agent`'s summary before anything happened: what a failure to start reports.
    fn starting(agent: usize, label: String) -> AgentSummary {
        AgentSummary {
            agent,
            label,
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
        }
    }
}
