//! What a run tells people (`[[notify]]`): an agent done, failed or stopped at its budget, a
//! check failed, and the run's end. Made by the run's supervisor from its events, whatever
//! shows the run (a table, nothing when detached, MCP). A one-agent run says its end once, as
//! the run's.

use berth_ops::notices::{Notice, NotifyEvent};

use crate::kept::RunRecord;
use crate::{AgentState, RunEvent};

/// The notices `event` of the run `record` makes.
pub(crate) fn of(record: &RunRecord, event: &RunEvent) -> Vec<Notice> {
    let title = format!("berth run: {}", berth_ops::title_of(&record.request.task));
    let many = record.agents.len() > 1;
    let agent_notice = |agent: usize, kind: NotifyEvent, summary: String| {
        let mut notice = Notice::new(kind, title.clone(), summary);
        notice.run = Some(record.id.to_string());
        notice.agent = Some(agent + 1);
        if let Some(a) = record.agents.get(agent) {
            notice.session = a.session.clone();
            notice.workspace = a.workspace.clone();
        }
        notice
    };
    let label = |agent: usize| {
        let a = record.agents.get(agent);
        let name = a
            .and_then(|a| a.status.workspace_name.clone())
            .or_else(|| a.map(|a| a.label.clone()))
            .unwrap_or_default();
        format!("agent {} ({name})", agent + 1)
    };
    match event {
        RunEvent::Ended {
            agent,
            state,
            message,
            input_tokens,
            output_tokens,
            elapsed_ms,
            ..
        } if many => {
            let tokens = input_tokens + output_tokens;
            let took = elapsed_ms / 1000;
            let (kind, how) = match state {
                AgentState::Done => (NotifyEvent::Done, "done".to_owned()),
                AgentState::Stopped => (NotifyEvent::Failed, "stopped".to_owned()),
                AgentState::Budget => (
                    NotifyEvent::Budget,
                    message
                        .clone()
                        .unwrap_or_else(|| "stopped at its budget".to_owned()),
                ),
                _ => (
                    NotifyEvent::Failed,
                    format!(
                        "failed: {}",
                        message.as_deref().unwrap_or("no reason given")
                    ),
                ),
            };
            vec![agent_notice(
                *agent,
                kind,
                format!("{} {how} ({tokens} tokens, {took}s)", label(*agent)),
            )]
        }
        RunEvent::Checked { agent, check } if !check.passed => vec![agent_notice(
            *agent,
            NotifyEvent::CheckFailed,
            format!(
                "{}: the check `{}` failed{}",
                label(*agent),
                check.command,
                check
                    .outcome
                    .as_deref()
                    .map(|o| format!(" ({o})"))
                    .unwrap_or_default()
            ),
        )],
        RunEvent::Summary { agents } => {
            let done = agents
                .iter()
                .filter(|a| a.state == AgentState::Done)
                .count();
            let failed_checks = agents
                .iter()
                .filter(|a| a.check.as_ref().is_some_and(|c| !c.passed))
                .count();
            let budget = agents.iter().any(|a| a.state == AgentState::Budget);
            let kind = match (done == agents.len() && failed_checks == 0, budget) {
                (true, _) => NotifyEvent::Done,
                // One agent's run stopped at its budget says so; several say it per agent.
                (false, true) if agents.len() == 1 => NotifyEvent::Budget,
                (false, _) => NotifyEvent::Failed,
            };
            let mut summary = format!("{done} of {} agent(s) done", agents.len());
            if failed_checks > 0 {
                summary.push_str(&format!(", {failed_checks} check(s) failed"));
            }
            if let [one] = agents.as_slice() {
                summary.push_str(&format!(
                    "; {} file(s) changed (+{} -{})",
                    one.files_changed, one.added, one.removed
                ));
            }
            let mut notice = Notice::new(kind, title, summary);
            notice.run = Some(record.id.to_string());
            if let [one] = agents.as_slice() {
                notice.session = one.session.clone();
                notice.workspace = one.workspace.clone();
            }
            vec![notice]
        }
        _ => Vec::new(),
    }
}
