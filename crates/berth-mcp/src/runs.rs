//! Runs an orchestrating agent starts over MCP (`session_run`, as amux's `session_run`): one
//! agent on a task in a new git workspace of the server's repository, or in an existing
//! workspace, through berth-run. The tool answers with the session at once; the run goes on in
//! this server's process, `session_status` reads where it is (berth-run's `AgentStatus`),
//! `session_stop` stops it, and `berth://session/{id}` shows its state. Runs live as long as
//! this server: a client of another server sees the session and its transcript, not the run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use berth_agent::{Agent, AgentBuilder};
use berth_ops::Ops;
use berth_run::{AgentStatus, RunEvent, Stopper};
use serde::Serialize;

/// The runs started through this server, by session id.
#[derive(Default)]
pub struct Runs {
    agent: OnceLock<Agent>,
    by_session: Mutex<HashMap<String, Arc<Entry>>>,
}

/// One run's state as status reports it.
#[derive(Debug, Clone, Serialize)]
pub struct RunState {
    pub session_id: String,
    pub workspace_id: String,
    #[serde(flatten)]
    pub status: AgentStatus,
    /// Whether the run is over (its summary came).
    pub finished: bool,
}

struct Entry {
    state: Mutex<RunState>,
    stopper: Stopper,
    started: Instant,
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

    /// Follows `run` from its `started` event (its session exists) until it ends.
    pub fn follow(
        self: &Arc<Self>,
        mut run: berth_run::Run,
        started: &RunEvent,
        session_id: String,
        workspace_id: String,
    ) -> RunState {
        let mut status = AgentStatus::default();
        status.apply(started);
        let entry = Arc::new(Entry {
            state: Mutex::new(RunState {
                session_id: session_id.clone(),
                workspace_id,
                status,
                finished: false,
            }),
            stopper: run.stopper(),
            started: Instant::now(),
        });
        self.by_session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session_id, entry.clone());
        let first = entry.snapshot();
        tokio::spawn(async move {
            while let Some(event) = run.events.recv().await {
                let mut state = entry.lock();
                match event {
                    RunEvent::Summary { .. } => state.finished = true,
                    event => state.status.apply(&event),
                }
            }
            entry.lock().finished = true;
        });
        first
    }

    /// The state of the run of `session_id`, if this server started one.
    pub fn status(&self, session_id: &str) -> Option<RunState> {
        self.entry(session_id).map(|e| e.snapshot())
    }

    /// Stops the run of `session_id`; its state, if this server started one.
    pub fn stop(&self, session_id: &str) -> Option<RunState> {
        let entry = self.entry(session_id)?;
        entry.stopper.stop();
        Some(entry.snapshot())
    }

    fn entry(&self, session_id: &str) -> Option<Arc<Entry>> {
        self.by_session
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session_id)
            .cloned()
    }
}

impl Entry {
    fn lock(&self) -> std::sync::MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state, with the time so far while the agent works.
    fn snapshot(&self) -> RunState {
        let mut state = self.lock().clone();
        if state.status.stop.is_none() {
            state.status.elapsed_ms = self.started.elapsed().as_millis() as u64;
        }
        state
    }
}
