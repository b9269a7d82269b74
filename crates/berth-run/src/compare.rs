//! A run's agents side by side: for each, how it ended, its check, tokens, cost and time, and
//! what it changed (each file, with its diff when asked for); and, when asked for
//! ([`compare_foreseen`]), what its work conflicts with ([`crate::foresight::Foresight`]). The one model
//! of a review that `berth run compare` prints and the web page's `/runs/ID` shows.

use berth_ops::{FileDiff, Ops};
use serde::Serialize;

use crate::foresight::{AgentForesight, Foresight};
use crate::kept::{KeptError, RunId, RunRecord, RunStore};

/// A run, its agents side by side.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub run: String,
    pub task: String,
    pub state: String,
    /// Where its review stands (`review`, `picked`, …), with its checks.
    pub review: crate::kept::Review,
    pub check: Option<String>,
    pub agents: Vec<Compared>,
}

/// One agent of a compared run.
#[derive(Debug, Clone, Serialize)]
pub struct Compared {
    /// Counted from 1, as `berth run` shows them.
    pub agent: usize,
    pub label: String,
    pub workspace: Option<String>,
    pub workspace_name: Option<String>,
    pub session: Option<String>,
    pub state: String,
    /// What was done with its work: `merged`, `discarded` or `kept`; `None` until decided.
    pub outcome: Option<String>,
    /// Why it failed or stopped, when it did: for an ACP agent, with the last lines of its
    /// standard error.
    pub message: Option<String>,
    /// The question it waits on for a person's answer (`--ask`), while it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<crate::event::Waiting>,
    /// Whether its check passed; `None` when none ran.
    pub check_passed: Option<bool>,
    /// Its check in a word: `passed`, `failed` or `not run` (a stop kept it from running);
    /// `None` without a check.
    pub check_verdict: Option<String>,
    /// How its check failed (`exit 1`), or why it did not run, when it did not pass.
    pub check_outcome: Option<String>,
    /// Its check in full, its last lines of output included, once it ran or was found not
    /// to run.
    pub check: Option<crate::check::CheckResult>,
    /// Why it is not picked without being forced, when it is not ([`crate::evidence::pick_refusal`]).
    pub refusal: Option<String>,
    /// Whether forcing the pick could merge anything ([`crate::evidence::Pickable::forceable`]).
    pub forceable: bool,
    /// Why it cannot be picked or dropped at all now (the run still running, its work merged
    /// or discarded already, no workspace), when it cannot ([`crate::evidence::pickable`]).
    pub closed: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: Option<f64>,
    pub elapsed_ms: u64,
    /// What it changed against its base.
    pub files: Vec<FileDiff>,
    pub added: u64,
    pub removed: u64,
    /// The unified diff, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// Why its changes cannot be shown (its workspace deleted, say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
    /// What its work conflicts with (its base as it stands, other runs' finished agents), by
    /// a trial merge; `None` when not asked for ([`compare_foreseen`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<AgentForesight>,
}

/// The run `id` side by side, with each agent's unified diff when `patches`.
pub async fn compare(
    ops: &Ops,
    store: &RunStore,
    id: &RunId,
    patches: bool,
) -> Result<Comparison, KeptError> {
    let record = store.load(id).await?;
    Ok(compare_record(ops, store, &record, patches).await)
}

/// [`compare`], with what each agent's work conflicts with, by `foresight`'s trial merges.
pub async fn compare_foreseen(
    ops: &Ops,
    store: &RunStore,
    id: &RunId,
    patches: bool,
    foresight: &Foresight,
) -> Result<Comparison, KeptError> {
    let record = store.load(id).await?;
    let mut comparison = compare_record(ops, store, &record, patches).await;
    for seen in foresight.foresee(ops, store, &record).await {
        if let Some(a) = comparison.agents.get_mut(seen.agent - 1) {
            a.conflicts = Some(seen);
        }
    }
    Ok(comparison)
}

async fn compare_record(
    ops: &Ops,
    store: &RunStore,
    record: &RunRecord,
    patches: bool,
) -> Comparison {
    let mut agents = Vec::new();
    for (i, a) in record.agents.iter().enumerate() {
        let summary = a.summary.as_ref();
        let pickable = crate::evidence::pickable(record, i);
        let check = summary.and_then(|s| s.check.as_ref());
        let mut compared = Compared {
            agent: i + 1,
            label: a.label.clone(),
            workspace: a.workspace.clone(),
            workspace_name: a.status.workspace_name.clone(),
            session: a.session.clone(),
            state: a.status.state.as_str().to_owned(),
            outcome: a.outcome.map(|o| o.as_str().to_owned()),
            message: a.status.message.clone(),
            waiting: a.status.waiting.clone(),
            check_passed: match check {
                Some(c) => (!c.not_run).then_some(c.passed),
                None => a.status.check_passed,
            },
            check_verdict: match check {
                Some(c) => Some(c.verdict().to_owned()),
                None => a
                    .status
                    .check_passed
                    .map(|p| if p { "passed" } else { "failed" }.to_owned()),
            },
            check_outcome: check.and_then(|c| c.outcome.clone()),
            check: check.cloned(),
            refusal: pickable.refusal,
            forceable: pickable.forceable,
            closed: pickable.closed,
            input_tokens: a.status.input_tokens,
            output_tokens: a.status.output_tokens,
            cost_usd: summary.and_then(|s| s.cost_usd),
            elapsed_ms: a.status.elapsed_ms,
            files: Vec::new(),
            added: 0,
            removed: 0,
            patch: None,
            unreadable: None,
            conflicts: None,
        };
        match &a.workspace {
            // A pool's agent worked on another node: its pushed branch.
            Some(ws) => match crate::pushed::workspace_diff(ops, store, ws, patches).await {
                Ok(diff) => {
                    (compared.added, compared.removed) = diff.totals();
                    compared.files = diff.files;
                    compared.patch = diff.patch;
                }
                // Merged or discarded, and its workspace gone with it: what it changed, as the
                // run summed it up.
                Err(_) if a.outcome.is_some_and(|o| o.is_closed()) => {
                    if let Some(s) = summary {
                        (compared.added, compared.removed) = (s.added, s.removed);
                    }
                }
                Err(e) => compared.unreadable = Some(e.to_string()),
            },
            None => compared.unreadable = Some("it never got a workspace".to_owned()),
        }
        agents.push(compared);
    }
    Comparison {
        run: record.id.to_string(),
        task: record.request.task.clone(),
        state: record.state.as_str().to_owned(),
        review: record.review(),
        check: record.request.check.clone(),
        agents,
    }
}
