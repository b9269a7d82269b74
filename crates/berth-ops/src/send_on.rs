//! Sending a workspace's work on: its uncommitted work committed, its branch pushed to a
//! remote, and a pull (merge) request opened or updated with the host's own tool (`gh`,
//! `glab`) when one is installed and signed in; else the page where a person opens one.
//! Nothing here runs unless a command asks for it: berth never pushes on its own.
//!
//! Credentials are git's and the tool's own (the person's git configuration, `gh auth`);
//! berth stores none.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

use berth_core::Workspace;

use crate::Ops;
use crate::error::{Error, ErrorKind, Result, blocking};

/// A workspace's branch, pushed.
#[derive(Debug, Clone, Serialize)]
pub struct Pushed {
    /// The workspace, as `name (id)`.
    pub workspace: String,
    pub branch: String,
    /// The local branch it is meant for: the workspace's base.
    pub base: String,
    pub remote: String,
    /// The commit made of its uncommitted work; `None` when there was none.
    pub commit: Option<String>,
    /// Where a person opens a pull request of it, for a GitHub or GitLab remote.
    pub compare_url: Option<String>,
}

/// What a pull request says.
#[derive(Debug, Clone)]
pub struct PullRequestText {
    pub title: String,
    pub body: String,
}

/// What became of a pull request.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PullRequest {
    Opened {
        tool: String,
        url: String,
    },
    Updated {
        tool: String,
        url: String,
    },
    /// No tool could open it: why, and the page where a person does.
    NotOpened {
        why: String,
        compare_url: Option<String>,
    },
}

/// A host's own tool for pull requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Gh,
    Glab,
}

impl Tool {
    fn program(self) -> &'static str {
        match self {
            Tool::Gh => "gh",
            Tool::Glab => "glab",
        }
    }

    /// Installed and signed in (`auth status` succeeds).
    fn ready(self, dir: &Path) -> bool {
        Command::new(self.program())
            .args(["auth", "status"])
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .output()
            .is_ok_and(|out| out.status.success())
    }

    /// The tool's commands that find the branch's request, update it, and open one.
    fn commands<'a>(self, pushed: &'a Pushed, text: &'a PullRequestText) -> [Vec<&'a str>; 3] {
        match self {
            Tool::Gh => [
                vec![
                    "pr",
                    "view",
                    &pushed.branch,
                    "--json",
                    "url",
                    "--jq",
                    ".url",
                ],
                vec![
                    "pr",
                    "edit",
                    &pushed.branch,
                    "--title",
                    &text.title,
                    "--body",
                    &text.body,
                ],
                vec![
                    "pr",
                    "create",
                    "--head",
                    &pushed.branch,
                    "--base",
                    &pushed.base,
                    "--title",
                    &text.title,
                    "--body",
                    &text.body,
                ],
            ],
            Tool::Glab => [
                vec!["mr", "view", &pushed.branch, "--output", "json"],
                vec![
                    "mr",
                    "update",
                    &pushed.branch,
                    "--title",
                    &text.title,
                    "--description",
                    &text.body,
                ],
                vec![
                    "mr",
                    "create",
                    "--source-branch",
                    &pushed.branch,
                    "--target-branch",
                    &pushed.base,
                    "--title",
                    &text.title,
                    "--description",
                    &text.body,
                    "--yes",
                ],
            ],
        }
    }

    /// Opens the request, or updates the one the branch has; its URL.
    fn send(self, dir: &Path, pushed: &Pushed, text: &PullRequestText) -> Result<PullRequest> {
        let tool = self.program().to_owned();
        let [existing, update, create] = self.commands(pushed, text);
        let run = |args: &[&str]| {
            Command::new(&tool)
                .args(args)
                .current_dir(dir)
                .stdin(std::process::Stdio::null())
                .output()
                .map_err(|e| Error::rule(ErrorKind::External, format!("cannot run {tool}: {e}")))
        };
        let found = run(&existing)?;
        let (out, updated) = match found.status.success() {
            true => (run(&update)?, true),
            false => (run(&create)?, false),
        };
        if !out.status.success() {
            return Err(Error::rule(
                ErrorKind::External,
                format!(
                    "{tool} could not {} the pull request: {}",
                    if updated { "update" } else { "open" },
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ));
        }
        // The URL is the last line a tool prints that is one (`gh pr create` prints it;
        // `gh pr edit` prints it too; else the view's).
        let url_in = |bytes: &[u8]| {
            String::from_utf8_lossy(bytes).lines().rev().find_map(|l| {
                l.split_whitespace()
                    .find(|w| w.starts_with("http"))
                    .map(str::to_owned)
            })
        };
        let url = url_in(&out.stdout)
            .or_else(|| url_in(&found.stdout))
            .unwrap_or_default();
        Ok(match updated {
            true => PullRequest::Updated { tool, url },
            false => PullRequest::Opened { tool, url },
        })
    }
}

impl Ops {
    /// Gives a git workspace's work to `remote`: its uncommitted work committed with
    /// `message` (`None`: one naming its latest session, as [`Ops::work_message`] says), then
    /// its branch pushed under the same name.
    pub async fn push_workspace(
        &self,
        identifier: &str,
        remote: &str,
        message: Option<&str>,
    ) -> Result<Pushed> {
        let ws = self.manager.resolve(identifier).await?;
        self.push(&ws, remote, message).await
    }

    /// The message a workspace's uncommitted work is committed with when it is pushed: its
    /// latest session's title and id, which a reviewer finds it by.
    pub async fn work_message(&self, ws: &Workspace) -> Result<String> {
        Ok(match self.latest_session(ws).await? {
            Some(s) if !s.title.is_empty() => format!("{} (berth session {})", s.title, s.id),
            Some(s) => format!("Work of berth session {}", s.id),
            None => format!("Work of berth workspace {}", ws.label()),
        })
    }

    async fn push(&self, ws: &Workspace, remote: &str, message: Option<&str>) -> Result<Pushed> {
        let git = ws.git.clone().ok_or_else(|| {
            Error::invalid(format!(
                "workspace {} is a plain workspace: it has no branch to push",
                ws.label()
            ))
        })?;
        let message = match message {
            Some(m) => m.to_owned(),
            None => self.work_message(ws).await?,
        };
        let remote = remote.to_owned();
        let workspace = ws.label();
        blocking(move || {
            let url = berth_git::remote_url(&git.worktree, &remote)?.ok_or_else(|| {
                Error::rule(
                    ErrorKind::NotFound,
                    format!(
                        "the repository has no remote {remote:?}; `git remote -v` lists its remotes (name one with --remote)"
                    ),
                )
            })?;
            let commit = berth_git::commit_all(&git.worktree, &message)?;
            berth_git::push_branch(&git.worktree, &remote, &git.branch)?;
            let base = git
                .base_branch
                .split_once('/')
                .filter(|(r, _)| *r == remote)
                .map_or(git.base_branch.as_str(), |(_, b)| b)
                .to_owned();
            Ok(Pushed {
                workspace,
                compare_url: berth_git::compare_url(&url, &base, &git.branch),
                branch: git.branch,
                base,
                remote,
                commit,
            })
        })
        .await
    }

    /// Pushes the workspace as [`Ops::push_workspace`] does with no message, then opens its
    /// pull request, or updates the one its branch has, with `gh` (a GitHub remote, or any
    /// other when `gh` is signed in) or `glab` (GitLab). With neither ready, the push stands
    /// and the outcome says what is missing and where a person opens the request.
    pub async fn pull_request(
        &self,
        identifier: &str,
        remote: &str,
        text: PullRequestText,
    ) -> Result<(Pushed, PullRequest)> {
        let ws = self.manager.resolve(identifier).await?;
        let pushed = self.push(&ws, remote, None).await?;
        let dir = ws
            .git
            .as_ref()
            .map(|g| g.worktree.clone())
            .expect("a pushed workspace has a worktree");
        let sent = pushed.clone();
        let outcome = blocking(move || {
            let url = berth_git::remote_url(&dir, &sent.remote)?.unwrap_or_default();
            let preferred: &[Tool] = if url.contains("gitlab") {
                &[Tool::Glab, Tool::Gh]
            } else {
                &[Tool::Gh, Tool::Glab]
            };
            match preferred.iter().find(|t| t.ready(&dir)) {
                Some(tool) => tool.send(&dir, &sent, &text),
                None => Ok(PullRequest::NotOpened {
                    why: format!(
                        "neither gh nor glab is installed and signed in here (`gh auth login`, `glab auth login`); the branch {} is pushed to {}",
                        sent.branch, sent.remote
                    ),
                    compare_url: sent.compare_url.clone(),
                }),
            }
        })
        .await?;
        Ok((pushed, outcome))
    }
}
