//! What a pull request of a workspace's work says: its latest session's task (its first
//! prompt), the agent's summary (its last answer) and, for an agent of a kept run with a
//! check, how the check went. `berth workspace pr` sends it; the rule lives here so that every
//! front end that opens one says the same.

use berth_ops::send_on::PullRequestText;
use berth_ops::{Ops, Role};

use crate::kept::RunStore;

/// The longest task and summary a pull request's body quotes, in characters.
const QUOTED_CHARS: usize = 4_000;

/// The title (`title`, else the latest session's, else its task's) and body of a pull request
/// of the workspace `identifier` names.
pub async fn pull_request_text(
    ops: &Ops,
    identifier: &str,
    title: Option<String>,
) -> Result<PullRequestText, berth_ops::Error> {
    let ws = ops.resolve_workspace(identifier).await?;
    let Some(session) = ops.latest_session(&ws).await? else {
        return Ok(PullRequestText {
            title: title.unwrap_or_else(|| "Work from berth".to_owned()),
            body: "Made with berth.".to_owned(),
        });
    };
    let transcript = ops.transcript(&session).await?;
    let said = |role: Role, first: bool| {
        let mut of_role = transcript.messages.iter().filter(|m| m.role == role);
        let found = if first {
            of_role.next()
        } else {
            of_role.next_back()
        };
        found.map(|m| cut(m.content.trim(), QUOTED_CHARS))
    };
    let task = said(Role::User, true);
    let summary = said(Role::Assistant, false);
    let title =
        title
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| match session.title.as_str() {
                "" => task
                    .as_deref()
                    .map(berth_ops::title_of)
                    .unwrap_or_else(|| "Work from berth".to_owned()),
                t => t.to_owned(),
            });
    let mut body = String::new();
    if let Some(task) = task {
        body.push_str(&format!("## Task\n\n{task}\n\n"));
    }
    if let Some(summary) = summary {
        body.push_str(&format!("## Summary\n\n{summary}\n\n"));
    }
    if let Some(check) = run_check(ops, session.id.as_str()).await {
        body.push_str(&format!("## Check\n\n{check}\n\n"));
    }
    body.push_str(&format!("Made with berth (session {}).", session.id));
    Ok(PullRequestText { title, body })
}

/// For an agent of a kept run with a check: the command and how it went.
async fn run_check(ops: &Ops, session: &str) -> Option<String> {
    let store = RunStore::open(ops).await.ok()?;
    let (record, agent) = store.find_session(session).await.ok()??;
    let command = record.request.check.clone()?;
    let status = store.agent_status(&record, agent).await.ok()?;
    let result = match status.check_passed {
        Some(true) => "passed",
        Some(false) => "failed",
        None => "not run",
    };
    Some(format!("`{command}`: {result}"))
}

fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}
