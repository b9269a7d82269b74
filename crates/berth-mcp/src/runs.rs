//! Runs an orchestrating agent starts over MCP (`session_run`, as amux's `session_run`): one
//! agent on a task in a new git workspace of the server's repository, or in an existing
//! workspace. They are kept runs, like the CLI's: kept where the home keeps its records, supervised by this
//! server's process, so `berth run list`, `show`, `logs`, `stop` and the web page's runs see
//! them. `session_status` and `session_stop` find the run by its session in the home's runs, in
//! whichever process asks; a run whose server went away is found failed, and `berth run
//! resume` continues it.

use berth_agent::Agent;
use berth_ops::{ErrorKind, Ops};
use berth_run::{
    AgentStatus, How, RunError, RunEvent, RunId, RunRequest, RunStore, Started as RunStarted,
    StopRequest, Telling, Told,
};
use serde::Serialize;

/// The home's runs (berth-run's lifecycle service, with berth's agent for them), opened on
/// first use and kept: a status poll reads the run, not the config and the home's folders
/// again.
#[derive(Default)]
pub struct Runs {
    runs: tokio::sync::OnceCell<berth_run::Runs>,
}

/// Who hosts this server's runs, in what their logs say.
const HOST: How = How::Hosted { by: "berth mcp" };

/// One run's state as status reports it.
#[derive(Debug, Clone, Serialize)]
pub struct RunState {
    pub session_id: String,
    pub workspace_id: String,
    /// The kept run's id, as `berth run show` takes it.
    pub kept_run: RunId,
    #[serde(flatten)]
    pub status: AgentStatus,
    /// Whether the run is over (its summary came, or it failed as a whole).
    pub finished: bool,
    /// What was done with its work once the run was over: merged, discarded or kept.
    pub outcome: Option<berth_run::AgentOutcome>,
}

/// A run's first news: its agent's session exists, or the run ended before it did.
pub struct Started {
    pub run: RunId,
    pub event: RunEvent,
}

impl Runs {
    /// berth's agent, made once for every run of this server.
    pub async fn agent(&self, ops: &Ops) -> Result<Agent, berth_ops::Error> {
        Ok(self.runs(ops).await?.agent().clone())
    }

    /// Checks `request` (a run that cannot start makes nothing), records it as a kept run,
    /// starts it hosted by this server, and waits for its agent's `started` event; the rest
    /// of the run goes on in this process. A run whose agent ends before its session exists
    /// is an error saying why.
    pub async fn start(&self, ops: &Ops, request: RunRequest) -> Result<Started, berth_ops::Error> {
        let runs = self.runs(ops).await?;
        match runs.start(request, HOST.clone()).await.map_err(run_error)? {
            RunStarted::Hosted { record, first } => Ok(Started {
                run: record.id,
                event: first.map_err(|why| berth_ops::Error::rule(ErrorKind::External, why))?,
            }),
            _ => unreachable!("a run started hosted is hosted"),
        }
    }

    /// Tells the agent of the kept run that works in `session_id` `text`, as `berth run
    /// tell` does, hosted by this server; the run's state once it is under way. `None`
    /// when no run works in that session.
    pub async fn tell(
        &self,
        ops: &Ops,
        session_id: &str,
        text: &str,
    ) -> Result<Option<RunState>, berth_ops::Error> {
        let runs = self.runs(ops).await?;
        let Some((record, agent)) = runs
            .store()
            .find_session(session_id)
            .await
            .map_err(kept_error)?
        else {
            return Ok(None);
        };
        let telling = Telling {
            agent: Some(berth_run::AgentNumber::of_index(agent)),
            text,
            ..Telling::default()
        };
        match runs.tell(&record.id, telling, HOST.clone()).await {
            Ok(Told::Queued { .. } | Told::Hosted { .. }) => {}
            Ok(Told::Here(_) | Told::Detached { .. }) => unreachable!("told hosted"),
            Err(e) => return Err(run_error(e)),
        }
        self.status(ops, session_id).await
    }

    /// The home's kept runs, where its records are (files, or the database every node
    /// shares), opened on first use.
    pub(crate) async fn store(&self, ops: &Ops) -> Result<&RunStore, berth_ops::Error> {
        Ok(self.runs(ops).await?.store())
    }

    async fn runs(&self, ops: &Ops) -> Result<&berth_run::Runs, berth_ops::Error> {
        self.runs
            .get_or_try_init(|| async {
                berth_run::Runs::open(ops.clone()).await.map_err(run_error)
            })
            .await
    }

    /// The state of the kept run whose agent works in `session_id`, if any run has it: read
    /// from the run's record and events, in this process or any other.
    pub async fn status(
        &self,
        ops: &Ops,
        session_id: &str,
    ) -> Result<Option<RunState>, berth_ops::Error> {
        let store = self.store(ops).await?;
        let Some((record, agent)) = store.find_session(session_id).await.map_err(kept_error)?
        else {
            return Ok(None);
        };
        let status = store
            .agent_status(&record, agent)
            .await
            .map_err(kept_error)?;
        let kept = &record.agents[agent];
        Ok(Some(RunState {
            session_id: session_id.to_owned(),
            workspace_id: kept.workspace.clone().unwrap_or_default(),
            kept_run: record.id.clone(),
            status,
            finished: record.state.is_over(),
            outcome: kept.outcome,
        }))
    }

    /// Asks the run whose agent works in `session_id` to stop that agent, as `berth run stop`
    /// does; its state then. A run already over is left as it is.
    pub async fn stop(
        &self,
        ops: &Ops,
        session_id: &str,
    ) -> Result<Option<RunState>, berth_ops::Error> {
        let store = self.store(ops).await?;
        let Some((record, agent)) = store.find_session(session_id).await.map_err(kept_error)?
        else {
            return Ok(None);
        };
        if !record.state.is_over() {
            store
                .request_stop(&record.id, StopRequest::Agent(agent))
                .await
                .map_err(kept_error)?;
        }
        self.status(ops, session_id).await
    }
}

pub fn run_error(e: RunError) -> berth_ops::Error {
    match e {
        RunError::Ops(e) => e,
        other => berth_ops::Error::rule(other.kind(), other.to_string()),
    }
}

fn kept_error(e: berth_run::KeptError) -> berth_ops::Error {
    berth_ops::Error::rule(e.kind(), e.to_string())
}
