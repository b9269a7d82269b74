//! What a merge of an agent's work leaves behind, the same for a pick, a land and a
//! `workspace merge` of a run's workspace: its commit's message, and the agent recorded
//! merged.

use crate::kept::{AgentOutcome, MergeRecord, RunRecord, RunStore};

/// The longest subject line of a pick's commit, as git's own tools expect it.
const SUBJECT_MAX: usize = 72;

/// The message of the commit that merges agent `agent` (0-based) of `record`: the task once
/// (its first line as the subject, cut at 72 characters, and the whole of it in the body
/// only when the subject does not hold it), then the run, the agent and its check.
pub fn merge_message(record: &RunRecord, agent: usize) -> String {
    let task = record.request.task.trim();
    let first = task.lines().next().unwrap_or("").trim();
    let subject = match first.char_indices().nth(SUBJECT_MAX - 1) {
        Some((at, _)) => format!("{}…", &first[..at]),
        None => first.to_owned(),
    };
    let a = record.agents.get(agent);
    let label = a.map(|a| a.label.as_str()).unwrap_or("agent");
    let mut message = subject.clone();
    message.push_str("\n\n");
    if subject != task {
        message.push_str(task);
        message.push_str("\n\n");
    }
    message.push_str(&format!(
        "berth run {}, agent {} ({label})",
        record.id,
        agent + 1
    ));
    match (&record.request.check, a.and_then(|a| a.check())) {
        (Some(command), Some(check)) => {
            message.push_str(&format!("; check `{command}`: {}", check.described()))
        }
        (Some(command), None) => message.push_str(&format!("; check `{command}` not run")),
        (None, _) => {}
    }
    message.push_str(".\n");
    message
}

/// Records agent `i` of `run` merged, with where (`merge`), unless it is already.
pub(crate) async fn record_merged(
    store: &RunStore,
    run: &RunRecord,
    i: usize,
    merge: Option<MergeRecord>,
) -> Result<(), String> {
    store
        .change_agent(&run.id, i, move |a| {
            a.outcome = Some(AgentOutcome::Merged);
            if merge.is_some() {
                a.merge = merge.clone();
            }
        })
        .await
        .map(drop)
        .map_err(|e| {
            format!(
                "agent {} of run {} is not recorded merged: {e}",
                i + 1,
                run.id
            )
        })
}
