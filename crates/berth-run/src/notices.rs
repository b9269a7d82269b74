//! What a run tells people (`[[notify]]`), made by the run's supervisor from its events,
//! whatever shows the run (a table, nothing when detached, MCP):
//!
//! - a question that waits for a person (`--ask`): `needs_input`, one per question;
//! - by default, **one notification per run's end**, after its checks, naming how each agent
//!   ended (`done`, `failed`, or for a one-agent run `budget`); none when a person stopped the
//!   whole run (they know), and a told turn's end is `told_done`, not the run's end again;
//! - each agent's own end (`agent_done`) and each failed check (`check_failed`), only to
//!   entries that name those events.

use berth_ops::notices::{Notice, NotifyEvent};

use crate::check::CheckResult;
use crate::event::AgentState;
use crate::event::AgentSummary;
use crate::event::RunEvent;
use crate::kept::RunRecord;

/// What the supervisor knows of the run beyond its events.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct How {
    /// A told turn (`run tell`) of a run that was over.
    pub told: bool,
    /// A person stopped the whole run.
    pub stopped_by_person: bool,
}

/// The notices `event` of the run `record` makes.
pub(crate) fn of(record: &RunRecord, event: &RunEvent, how: How) -> Vec<Notice> {
    let title = format!("berth run: {}", berth_ops::title_of(&record.request.task));
    let many = record.agents.len() > 1;
    let agent_notice = |agent: usize, kind: NotifyEvent, title: String, summary: String| {
        let mut notice = Notice::new(kind, title, summary);
        notice.run = Some(record.id.to_string());
        notice.agent = Some(agent + 1);
        if let Some(a) = record.agents.get(agent) {
            notice.session = a.session.clone();
            notice.workspace = a.workspace.clone();
        }
        notice
    };
    let label = |agent: usize| agent_label(record, agent);
    match event {
        RunEvent::Ended {
            agent,
            state,
            message,
            input_tokens,
            output_tokens,
            elapsed_ms,
            ..
        } if many && !how.told => {
            let tokens = input_tokens + output_tokens;
            let took = elapsed_ms / 1000;
            vec![agent_notice(
                *agent,
                NotifyEvent::AgentDone,
                title.clone(),
                format!(
                    "{} {} ({tokens} tokens, {took}s)",
                    label(*agent),
                    ended(*state, message.as_deref())
                ),
            )]
        }
        RunEvent::Checked { agent, check } if !check.passed && !check.not_run => {
            vec![agent_notice(
                *agent,
                NotifyEvent::CheckFailed,
                title.clone(),
                format!(
                    "{}: the check `{}` {}",
                    label(*agent),
                    check.command,
                    checked(check)
                ),
            )]
        }
        RunEvent::Asked {
            agent,
            question,
            tool,
            description,
        } => {
            // Titled for what it is: a person is needed, not a run's end.
            let mut notice = agent_notice(
                *agent,
                NotifyEvent::NeedsInput,
                format!("needs you: may agent {} use {tool}?", agent + 1),
                format!("{} asks: may it {tool}? {description}", label(*agent)),
            );
            notice.request = Some(question.clone());
            vec![notice]
        }
        RunEvent::Summary { .. } if how.stopped_by_person => Vec::new(),
        RunEvent::Summary { agents } => vec![summary_notice(record, agents, how, title)],
        _ => Vec::new(),
    }
}

/// An agent as a notice names it: its number and its workspace's name (or its label).
fn agent_label(record: &RunRecord, agent: usize) -> String {
    let a = record.agents.get(agent);
    let name = a
        .and_then(|a| a.status.workspace_name.clone())
        .or_else(|| a.map(|a| a.label.clone()))
        .unwrap_or_default();
    format!("agent {} ({name})", agent + 1)
}

/// The notice of a run's end: how many agents are done, and how each ended.
fn summary_notice(record: &RunRecord, agents: &[AgentSummary], how: How, title: String) -> Notice {
    let many = record.agents.len() > 1;
    let all_well = agents
        .iter()
        .all(|a| a.state == AgentState::Done && a.check.as_ref().is_none_or(|c| c.passed));
    let kind = match agents {
        _ if how.told => NotifyEvent::ToldDone,
        _ if all_well => NotifyEvent::Done,
        // One agent's run stopped at its budget says so.
        [one] if one.state == AgentState::Budget => NotifyEvent::Budget,
        _ => NotifyEvent::Failed,
    };
    let done = agents
        .iter()
        .filter(|a| a.state == AgentState::Done)
        .count();
    let each = match agents {
        // A one-agent run: its changes and its check, after how it ended unless done
        // (the count says that).
        [one] if !many && one.state == AgentState::Done => changes(one),
        [one] if !many => format!(
            "{}, {}",
            ended(one.state, one.message.as_deref()),
            changes(one)
        ),
        all => all
            .iter()
            .map(|a| {
                format!(
                    "{}: {}, {}",
                    agent_label(record, a.agent),
                    ended(a.state, a.message.as_deref()),
                    changes(a)
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    };
    let summary = format!("{done} of {} agent(s) done; {each}", agents.len());
    let mut notice = Notice::new(kind, title, summary);
    notice.run = Some(record.id.to_string());
    if let [one] = agents {
        notice.session = one.session.clone();
        notice.workspace = one.workspace.clone();
        if many {
            notice.agent = Some(one.agent + 1);
        }
    }
    notice
}

/// How an agent ended, in words: `done`, `stopped`, `failed: why`. A reason of several
/// lines (an ACP agent's, with its standard error's last lines) is its first and its last:
/// a notification is one short line.
fn ended(state: AgentState, message: Option<&str>) -> String {
    match state {
        AgentState::Done => "done".to_owned(),
        AgentState::Stopped => "stopped".to_owned(),
        AgentState::Budget => message.unwrap_or("stopped at its budget").to_owned(),
        _ => {
            let why = message.unwrap_or("no reason given");
            let mut lines = why.lines().map(str::trim).filter(|l| !l.is_empty());
            let first = lines.next().unwrap_or(why);
            match lines.next_back() {
                Some(last) => format!("failed: {first} … {last}"),
                None => format!("failed: {first}"),
            }
        }
    }
}

/// How a check went, in words: `passed`, `failed (exit 1)`, `not run (the agent changed
/// nothing)`.
fn checked(check: &CheckResult) -> String {
    check.described()
}

/// What an agent changed, and its check: `2 file(s) changed (+10 -1), check passed`.
fn changes(a: &AgentSummary) -> String {
    let mut line = format!(
        "{} file(s) changed (+{} -{})",
        a.files_changed, a.added, a.removed
    );
    if let Some(check) = &a.check {
        line.push_str(&format!(", check {}", checked(check)));
    }
    line
}
