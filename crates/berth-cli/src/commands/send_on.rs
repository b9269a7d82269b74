//! `berth workspace push` and `berth workspace pr`: a workspace's work sent on, with what a
//! reviewer reads of it (the task, the agent's summary, the check) gathered from its session
//! and, for an agent of a run, the run's record.

use berth_ops::send_on::{PullRequest, PullRequestText, Pushed};
use berth_ops::{Ops, Role, Session};

use crate::render;

/// The longest task and summary a pull request's body quotes, in characters.
const QUOTED_CHARS: usize = 4_000;

pub async fn push(ops: &Ops, workspace: &str, remote: &str, json: bool) -> anyhow::Result<()> {
    let session = latest_session(ops, workspace).await?;
    let pushed = ops
        .push_workspace(
            workspace,
            remote,
            &commit_message(session.as_ref(), workspace),
        )
        .await?;
    if json {
        return Ok(render::json(&pushed)?);
    }
    say_pushed(&pushed);
    Ok(())
}

pub async fn pull_request(
    ops: &Ops,
    workspace: &str,
    remote: &str,
    title: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let session = latest_session(ops, workspace).await?;
    let text = pull_request_text(ops, session.as_ref(), title).await?;
    let message = commit_message(session.as_ref(), workspace);
    let (pushed, outcome) = ops.pull_request(workspace, remote, &message, text).await?;
    if json {
        return Ok(render::json(&serde_json::json!({
            "pushed": pushed,
            "pull_request": outcome,
        }))?);
    }
    say_pushed(&pushed);
    match outcome {
        PullRequest::Opened { tool, url } => render::line(format!("opened with {tool}: {url}"))?,
        PullRequest::Updated { tool, url } => render::line(format!("updated with {tool}: {url}"))?,
        PullRequest::NotOpened { why, compare_url } => {
            eprintln!("berth: no pull request was opened: {why}");
            match compare_url {
                Some(url) => render::line(format!("open it at {url}"))?,
                None => eprintln!(
                    "berth: the remote is on no host berth knows the pull request page of; open one of {} into {} there",
                    pushed.branch, pushed.base
                ),
            }
        }
    }
    Ok(())
}

fn say_pushed(pushed: &Pushed) {
    match &pushed.commit {
        Some(commit) => eprintln!(
            "committed the uncommitted work of {} as {}",
            pushed.workspace,
            &commit[..commit.len().min(12)]
        ),
        None => eprintln!("{} had no uncommitted work", pushed.workspace),
    }
    eprintln!("pushed {} to {}", pushed.branch, pushed.remote);
}

/// The workspace's session updated last, the one whose work this most likely is.
async fn latest_session(ops: &Ops, workspace: &str) -> anyhow::Result<Option<Session>> {
    let ws = ops.resolve_workspace(workspace).await?;
    let sessions = ops.session_records(Some(&ws.id)).await?;
    Ok(sessions.into_iter().max_by_key(|s| s.updated_at))
}

/// A commit message that names the session: its title, and its id to find it by.
fn commit_message(session: Option<&Session>, workspace: &str) -> String {
    match session {
        Some(s) if !s.title.is_empty() => format!("{} (berth session {})", s.title, s.id),
        Some(s) => format!("Work of berth session {}", s.id),
        None => format!("Work of berth workspace {workspace}"),
    }
}

/// The title and body: the task, the agent's summary, and a run's check.
async fn pull_request_text(
    ops: &Ops,
    session: Option<&Session>,
    title: Option<String>,
) -> anyhow::Result<PullRequestText> {
    let Some(session) = session else {
        return Ok(PullRequestText {
            title: title.unwrap_or_else(|| "Work from berth".to_owned()),
            body: "Made with berth.".to_owned(),
        });
    };
    let transcript = ops.transcript(session).await?;
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
    if let Some(check) = run_check(ops, session) {
        body.push_str(&format!("## Check\n\n{check}\n\n"));
    }
    body.push_str(&format!("Made with berth (session {}).", session.id));
    Ok(PullRequestText { title, body })
}

/// For an agent of a kept run with a check: the command and how it went.
fn run_check(ops: &Ops, session: &Session) -> Option<String> {
    let store = berth_run::RunStore::new(ops.home());
    let (record, agent) = store.find_session(session.id.as_str()).ok()??;
    let command = record.request.check.clone()?;
    let status = store.agent_status(&record, agent).ok()?;
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
