//! A worker of a pool (`berth serve --worker`): takes queued runs from the database every
//! node shares and works them here, up to a number of agents at once.
//!
//! The queue is the database's: a worker claims the oldest run it may work with `FOR UPDATE
//! SKIP LOCKED` (so racing workers never take the same one, nor wait for each other), holds
//! it by a lease it renews, and is woken by Postgres's `NOTIFY` when a run is queued, not by
//! polling. It also looks every half lease (5 s at most) for runs whose worker's lease lapsed
//! (a node that died or was cut off): those are taken over, each unfinished agent going on from its durable
//! transcript in a new workspace here (the old one's folder was the dead node's).
//!
//! Work goes back as pushed branches: a queued run names its repository by URL, each node
//! fetches it into its own clone under its home, and each agent's branch is pushed to the URL
//! when the agent is done.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use berth_agent::Agent;
use berth_ops::{Ops, Repository};
use tokio_util::sync::CancellationToken;

use crate::error::RunError;
use crate::kept::{
    KeptError, PoolPlace, RunRecord, RunState, RunStore, StoredRequest, Supervision,
};
use crate::request::Resume;
use crate::request::RunRequest;
use crate::supervisor::{Host, Next, Supervised};

/// How often a worker on SQLite, which cannot be woken, looks for queued runs.
const SQLITE_LOOK: Duration = Duration::from_secs(1);

/// The longest a worker on Postgres goes without looking for runs whose lease lapsed (it
/// looks every half lease when that is sooner): a dead node's run moves on within its lease
/// and this.
const LAPSED_LOOK: Duration = Duration::from_secs(5);

/// What a worker may take on.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Agents working here at once, over all the runs taken.
    pub max_agents: usize,
    /// How long a lease lasts (`[pool] lease_secs`): expired ones are looked for twice as
    /// often.
    pub lease: Duration,
}

/// Takes queued runs until `stop` is cancelled. The runs taken are worked on tasks of their
/// own; on stop, they are left as they are: their leases lapse and another worker goes on
/// with them (as after a crash, which a stop then is no different from).
#[tracing::instrument(name = "pool.work", skip_all)]
pub(crate) async fn work(
    ops: Ops,
    agent: Agent,
    store: RunStore,
    options: WorkerOptions,
    stop: CancellationToken,
) -> Result<(), KeptError> {
    let max = options.max_agents.max(1);
    let busy = Arc::new(AtomicUsize::new(0));
    let freed = Arc::new(tokio::sync::Notify::new());
    let mut listener = store.listen().await?;
    let look = match listener {
        Some(_) => (options.lease / 2).min(LAPSED_LOOK),
        None => SQLITE_LOOK,
    };
    loop {
        // Take what fits.
        loop {
            let room = max.saturating_sub(busy.load(Ordering::Acquire));
            if room == 0 {
                break;
            }
            // An idle worker takes a run of more agents than it has places too, and works
            // it with the ones past its places queued.
            let fits = match busy.load(Ordering::Acquire) {
                0 => usize::MAX,
                _ => room,
            };
            let supervision = match store.claim(fits).await {
                Ok(Some(s)) => s,
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(node = store.node(), "cannot claim a run: {e}");
                    break;
                }
            };
            let agents = supervision.record().agents.len().clamp(1, max);
            busy.fetch_add(agents, Ordering::AcqRel);
            let (ops, agent, store, busy, freed) = (
                ops.clone(),
                agent.clone(),
                store.clone(),
                busy.clone(),
                freed.clone(),
            );
            tokio::spawn(async move {
                let id = supervision.record().id.clone();
                if let Err(e) = work_one(ops, agent, &store, supervision, max).await {
                    tracing::error!(node = store.node(), %id, "run {id}: {e}");
                }
                busy.fetch_sub(agents, Ordering::AcqRel);
                freed.notify_one();
            });
        }
        let woken = async {
            match &mut listener {
                Some(l) => {
                    // A run queued, or notices missed (`None`): look. Once the connection's
                    // reader is gone, the periodic look alone finds what is queued.
                    if l.next().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = woken => {}
            _ = freed.notified() => {}
            _ = tokio::time::sleep(look) => {}
        }
    }
}

/// Queues `request` for the pool's workers (`berth run --queue`), checked as far as this
/// machine can: a database store, a task, and a repository by a URL every node fetches
/// (`repo`, else the `origin` of the repository holding `here`). What needs the node that
/// takes it (a key, the agent's program) is checked there. `node` pins it to one node.
pub(crate) async fn queue(
    ops: &Ops,
    store: &RunStore,
    request: RunRequest,
    repo: Option<&std::path::Path>,
    here: &std::path::Path,
    node: Option<String>,
) -> Result<RunRecord, RunError> {
    let stored = queued_request(ops, store, &request, repo, here, node)?;
    Ok(store.create(stored).await?)
}

/// What [`queue`] records for `request`, checked as it checks it; nothing made yet.
pub(crate) fn queued_request(
    ops: &Ops,
    store: &RunStore,
    request: &RunRequest,
    repo: Option<&std::path::Path>,
    here: &std::path::Path,
    node: Option<String>,
) -> Result<StoredRequest, RunError> {
    if !store.pooled() {
        return Err(KeptError::NeedsDatabase.into());
    }
    if request.task.trim().is_empty() {
        return Err(RunError::EmptyTask);
    }
    crate::preflight::writable_needs_an_acp_agent(request)?;
    let repo_url = ops.pool_url(repo, here)?;
    Ok(StoredRequest {
        repository: None,
        // Every node gives the work back where it came from.
        push: true,
        pool: Some(PoolPlace { node, repo_url }),
        ..StoredRequest::of(request)
    })
}

/// Works one claimed run to its end: a queued one from the start, one taken over from where
/// its agents were.
async fn work_one(
    ops: Ops,
    agent: Agent,
    store: &RunStore,
    mut supervision: Supervision,
    max_agents: usize,
) -> Result<(), RunError> {
    let record = supervision.record().clone();
    let Some(pool) = record.request.pool.clone() else {
        supervision
            .fail("a run claimed by a worker was not queued")
            .await?;
        return Ok(());
    };
    // This node's clone of the repository, fetched now.
    let repository = match ops
        .named_repository(std::path::Path::new(&pool.repo_url))
        .await
    {
        Ok(named) => named.path,
        Err(e) => {
            supervision
                .fail(&format!(
                    "node {} cannot fetch {}: {e}",
                    store.node(),
                    pool.repo_url
                ))
                .await?;
            supervision.release().await;
            return Ok(());
        }
    };
    // Taken over: each unfinished agent that had a session goes on from its transcript, in a
    // new workspace here unless its workspace is this node's.
    let again: BTreeMap<usize, Resume> = record
        .unfinished()
        .into_iter()
        .map(|(i, mut r)| {
            r.moved = record.agents[i].node.as_deref() != Some(store.node());
            if r.moved {
                // An ACP agent's own session lives in its process's state on the old node:
                // here it starts a new one, told the task again.
                r.acp_session = None;
            }
            (i, r)
        })
        .collect();
    let mut request = supervision.request_again(again).await?;
    request.repository = Repository::Named(repository);
    request.push = true;
    request.max_agents = Some(max_agents);
    let request = match crate::preflight::preflight(&ops, &agent, request).await {
        Ok(r) => r,
        Err(e) => {
            supervision.fail(&e.to_string()).await?;
            supervision.release().await;
            return Ok(());
        }
    };
    let was = record.state;
    let mut supervised = Supervised::start(ops, agent, supervision, request, Host::Server).await?;
    if was != RunState::Queued {
        tracing::info!(
            node = store.node(),
            id = %record.id,
            "took over run {} from a node whose hold ran out",
            record.id
        );
    }
    while let Some(next) = supervised.next().await {
        if let Next::Unkept(e) = next {
            tracing::warn!(node = store.node(), id = %record.id, "run {}: {e}", record.id);
            if matches!(e, KeptError::Fenced { .. }) {
                // Another node has it now: this one lets it be, writing nothing more.
                return Ok(());
            }
        }
    }
    supervised.finish().await?;
    Ok(())
}
