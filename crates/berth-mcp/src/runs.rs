//! Runs an orchestrating agent starts over MCP (`session_run`, as amux's `session_run`): one
//! agent on a task in a new git workspace of the server's repository, or in an existing
//! workspace. They are kept runs, like the CLI's: kept where the home keeps its records, supervised by this
//! server's process, so `berth run list`, `show`, `logs`, `stop` and the web page's runs see
//! them. `session_status` and `session_stop` find the run by its session in the home's runs, in
//! whichever process asks; a run whose server went away is found failed, and `berth run
//! resume` continues it.

use std::sync::OnceLock;

use berth_agent::{Agent, AgentBuilder};
use berth_ops::{ErrorKind, Ops};
use berth_run::{
    AgentStatus, Host, RunError, RunEvent, RunId, RunRequest, RunStore, StopRequest, StoredRequest,
    Supervised,
};
use serde::Serialize;

/// berth's agent for this server's runs, and the home's run store, each made once: a status
/// poll reads the run, not the config and the home's folders again.
#[derive(Default)]
pub struct Runs {
    agent: OnceLock<Agent>,
    store: tokio::sync::OnceCell<RunStore>,
}

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
    pub fn agent(&self, ops: &Ops) -> Agent {
        self.agent
            .get_or_init(|| {
                AgentBuilder::new(ops.clone())
                    .tools(berth_agent::tools::builtin())
                    .build()
            })
            .clone()
    }

    /// Records `request` as a kept run, starts it supervised by this server, and waits for
    /// its agent's `started` event; the rest of the run goes on in this process. A run whose
    /// agent ends before its session exists is an error saying why.
    pub async fn start(&self, ops: &Ops, request: RunRequest) -> Result<Started, berth_ops::Error> {
        let store = self.store(ops).await?;
        let record = store
            .create(StoredRequest::of(&request))
            .await
            .map_err(kept_error)?;
        let supervision = store.supervise(&record.id).await.map_err(kept_error)?;
        let agent = self.agent(ops);
        let mut supervised =
            Supervised::start(ops.clone(), agent, supervision, request, Host::Server)
                .await
                .map_err(run_error)?;
        let first = supervised
            .until_started()
            .await
            .map_err(|why| berth_ops::Error::rule(ErrorKind::External, why));
        // Driven to its end here whatever the first news was: a run that failed to start
        // still checks nothing, sums up, and is kept so.
        supervised.spawn_hosted("berth mcp");
        Ok(Started {
            run: record.id,
            event: first?,
        })
    }

    /// Tells the agent of the kept run that works in `session_id` `text`, as `berth run
    /// tell` does, supervised by this server; the run's state once it is under way. `None`
    /// when no run works in that session.
    pub async fn tell(
        &self,
        ops: &Ops,
        session_id: &str,
        text: &str,
    ) -> Result<Option<RunState>, berth_ops::Error> {
        let store = self.store(ops).await?;
        let Some((record, agent)) = store.find_session(session_id).await.map_err(kept_error)?
        else {
            return Ok(None);
        };
        let runner = self.agent(ops);
        let told = Supervised::tell_or_queue(
            ops.clone(),
            runner,
            store,
            &record.id,
            Some(agent),
            text,
            &[],
            Host::Server,
        )
        .await
        .map_err(run_error)?;
        if let berth_run::Told::Started(supervised) = told {
            supervised.spawn_hosted("berth mcp");
        }
        self.status(ops, session_id).await
    }

    /// The home's kept runs, where its records are (files, or the database every node
    /// shares), opened on first use.
    pub(crate) async fn store(&self, ops: &Ops) -> Result<&RunStore, berth_ops::Error> {
        self.store
            .get_or_try_init(|| async { RunStore::open(ops).await.map_err(kept_error) })
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
