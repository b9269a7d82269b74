//! Which agent of a run a land takes: `RUN` (its one agent that finished), `RUN:N`, or
//! `RUN:best` (the pick rule); and for `--batch`, which agent of each of the batch's runs.
//! The rules here are every front end's: the CLI, MCP and the dashboard only name targets.

use crate::event::AgentState;
use crate::kept::{BatchId, RunId, RunRecord};

use super::drive::{Lander, refused};
use super::record::{Target, Which};

/// The agent of `record` that `which` names.
pub(super) fn choose(record: &RunRecord, which: Which) -> berth_ops::Result<usize> {
    let id = &record.id;
    match which {
        Which::Agent(i) if i < record.agents.len() => Ok(i),
        Which::Agent(i) => Err(berth_ops::Error::invalid(format!(
            "run {id} has no agent {}: it has {}",
            i + 1,
            record.agents.len()
        ))),
        Which::Best => crate::evidence::best(record)
            .map(|(i, _)| i)
            .map_err(refused),
        Which::Only => {
            let done: Vec<usize> = (0..record.agents.len())
                .filter(|&i| record.agents[i].status.state == AgentState::Done)
                .collect();
            match done.as_slice() {
                [one] => Ok(*one),
                [] => Err(refused(format!(
                    "run {id} has no agent that finished: nothing of it can land"
                ))),
                many => Err(berth_ops::Error::invalid(format!(
                    "run {id} has {} agents that finished: land `{id}:N` (1 is the first) or `{id}:best`",
                    many.len()
                ))),
            }
        }
    }
}

/// Refused when agent `i` of `record` has nothing to land: it did not finish, or changed
/// nothing. (A check that failed on the old base is no reason: the land checks the
/// combined tree, and hands a red check back.)
pub(super) fn has_work(record: &RunRecord, i: usize) -> berth_ops::Result<()> {
    let a = &record.agents[i];
    let id = &record.id;
    if a.status.state != AgentState::Done {
        return Err(refused(format!(
            "agent {} of run {id} did not finish ({}): it has no work to land",
            i + 1,
            a.status.state.as_str()
        )));
    }
    if a.summary.as_ref().is_some_and(|s| s.files_changed == 0) {
        return Err(refused(format!(
            "agent {} of run {id} changed nothing: it has no work to land",
            i + 1
        )));
    }
    Ok(())
}

/// Batch `id`'s targets, in the file's order: of each run with a check, its best passing
/// agent (the pick rule); of each run without, its one agent that finished. A run with none
/// to land is left out, with why; one still running refuses the whole batch.
impl Lander {
    pub async fn batch_targets(
        &self,
        id: &BatchId,
    ) -> berth_ops::Result<(Vec<Target>, Vec<(RunId, String)>)> {
        let kept = |e: crate::kept::KeptError| berth_ops::Error::rule(e.kind(), e.to_string());
        let mut targets = Vec::new();
        let mut left_out = Vec::new();
        for record in crate::kept::batch_runs(&self.runs, id)
            .await
            .map_err(kept)?
        {
            if !record.state.is_over() {
                return Err(refused(format!(
                    "run {} of batch {id} is still {}: land the batch once its runs are over (`berth run wait {}`)",
                    record.id,
                    record.state.as_str(),
                    record.id
                )));
            }
            match batch_choice(&record) {
                Ok(which) => targets.push(Target {
                    run: record.id.to_string(),
                    which,
                }),
                Err(why) => left_out.push((record.id.clone(), why)),
            }
        }
        Ok((targets, left_out))
    }
}

/// Which agent of a batch's run lands, or why none does.
fn batch_choice(record: &RunRecord) -> Result<Which, String> {
    if record.request.check.is_some() {
        return crate::evidence::best(record).map(|_| Which::Best);
    }
    let done = record
        .agents
        .iter()
        .filter(|a| a.status.state == AgentState::Done)
        .count();
    match done {
        1 => Ok(Which::Only),
        0 => Err("no agent finished".to_owned()),
        n => Err(format!(
            "{n} agents finished and it has no check to choose by: land `{}:N`",
            record.id
        )),
    }
}
