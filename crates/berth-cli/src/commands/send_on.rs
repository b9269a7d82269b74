//! `berth workspace push` and `berth workspace pr`: a workspace's work sent on (the rules are
//! berth-ops' `send_on` and berth-run's `pull_request_text`), said on the terminal.

use berth_ops::Ops;
use berth_ops::send_on::{PullRequest, Pushed};

use crate::render;

pub async fn push(ops: &Ops, workspace: &str, remote: &str, json: bool) -> anyhow::Result<()> {
    let pushed = ops.push_workspace(workspace, remote, None).await?;
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
    let text = berth_run::pull_request_text(ops, workspace, title).await?;
    let (pushed, outcome) = ops.pull_request(workspace, remote, text).await?;
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
