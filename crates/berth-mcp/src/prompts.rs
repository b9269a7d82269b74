//! The guided workflows: `start-issue-work`, `review-workspace` and `prepare-pr`.
//!
//! Each is rendered from the real state at the moment it is asked for: the repository's default
//! base branch, the worktree's uncommitted files and commits ahead and behind, the project's own
//! check commands, the workspace's age and last use, and its context file. Arguments are text
//! from a client, so wherever one lands inside a command it is quoted for the shell (or encoded
//! as JSON inside a tool call), and wherever it lands in markdown it is kept to one line.

use std::path::Path;

use berth_core::WorkspaceName;
use berth_ops::review::{Health, Review, WorkspaceReview};
use berth_ops::toolchain::Check;
use berth_ops::{Error, Result, Workspace};
use chrono::{DateTime, Utc};
use rmcp::model::{GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, Role};
use serde_json::{Value, json};

use crate::context::Context;
use crate::uri;

pub const START_ISSUE_WORK: &str = "start-issue-work";
pub const PREPARE_PR: &str = "prepare-pr";
pub const REVIEW_WORKSPACE: &str = "review-workspace";

/// Context files longer than this are cut in a prompt; the resource has the whole file.
const CONTEXT_IN_PROMPT: usize = 4000;

pub fn list() -> Vec<Prompt> {
    let arg = |name: &str, description: &str, required: bool| {
        PromptArgument::new(name)
            .with_description(description)
            .with_required(required)
    };
    let workspace_id = || {
        arg(
            "workspace_id",
            "The workspace: its id, its name, or an unambiguous id prefix",
            true,
        )
    };
    vec![
        Prompt::new(
            START_ISSUE_WORK,
            Some(
                "Start work on an issue: understand it, create a workspace, plan, and check with the project's own commands",
            ),
            Some(vec![
                arg(
                    "issue_number",
                    "The issue's number or key, e.g. 42 or PROJ-7",
                    true,
                ),
                arg("issue_title", "The issue's title", false),
                arg("issue_url", "Where the issue can be read", false),
            ]),
        ),
        Prompt::new(
            PREPARE_PR,
            Some(
                "Prepare a workspace's branch for a pull request: commit, rebase, run the project's checks, push, open the PR",
            ),
            Some(vec![
                workspace_id(),
                arg("pr_title", "The pull request's title", false),
                arg("pr_description", "The pull request's description", false),
            ]),
        ),
        Prompt::new(
            REVIEW_WORKSPACE,
            Some(
                "Review a workspace's state (age, branch, uncommitted work, context) and suggest next steps",
            ),
            Some(vec![workspace_id()]),
        ),
    ]
}

/// A prompt's arguments: strings, though a number is taken for its digits.
struct Args<'a>(Option<&'a JsonObject>);

impl Args<'_> {
    fn get(&self, name: &str) -> Option<String> {
        match self.0?.get(name)? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    fn required(&self, name: &str, prompt: &str) -> Result<String> {
        self.get(name)
            .ok_or_else(|| Error::invalid(format!("the {prompt} prompt needs the argument {name}")))
    }
}

/// Renders the prompt `name` from the current state.
pub async fn render(
    cx: &Context,
    name: &str,
    arguments: Option<&JsonObject>,
) -> Result<GetPromptResult> {
    let args = Args(arguments);
    let (description, text) = match name {
        START_ISSUE_WORK => start_issue_work(cx, &args).await?,
        PREPARE_PR => {
            let id = args.required("workspace_id", PREPARE_PR)?;
            prepare_pr(cx, &id, &args).await?
        }
        REVIEW_WORKSPACE => {
            let id = args.required("workspace_id", REVIEW_WORKSPACE)?;
            review_workspace(cx, &id).await?
        }
        other => {
            return Err(Error::invalid(format!(
                "there is no prompt {other:?}; the prompts are {START_ISSUE_WORK}, {PREPARE_PR} and {REVIEW_WORKSPACE}"
            )));
        }
    };
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(description),
    )
}

async fn start_issue_work(cx: &Context, args: &Args<'_>) -> Result<(String, String)> {
    let number = args.required("issue_number", START_ISSUE_WORK)?;
    let number = number.trim_start_matches('#').to_owned();
    let name = WorkspaceName::new(format!("issue-{number}")).map_err(|_| {
            Error::invalid(format!(
                "issue_number {number:?} is not an issue number or key: use letters, digits, '.', '_' or '-', e.g. 42 or PROJ-7"
            ))
        })?;
    let title = args.get("issue_title").map(|t| one_line(&t));
    let url = args.get("issue_url").map(|u| one_line(&u));
    let heading = match &title {
        Some(t) => format!("issue #{number}: {t}"),
        None => format!("issue #{number}"),
    };
    let (base, checks) = match &cx.repo {
        Some(repo) => {
            let project = cx.ops.project(repo).await?;
            (
                project.default_base.map(|b| (project.repo, b)),
                project.checks,
            )
        }
        None => (None, Vec::new()),
    };

    let mut t = format!("# Start work on {heading}\n\n");
    if let Some(url) = &url {
        t += &format!("The issue: {url}\n\n");
    }
    t += "## 1. Understand the issue\n\n";
    t += &format!(
        "- Read {} in full, comments included.\n- Write down what done means: the behaviour that must change and how it will be checked.\n- If anything is ambiguous, ask before writing code; guessing costs more than asking.\n\n",
        url.as_deref().unwrap_or("the issue")
    );
    t += "## 2. Create a workspace\n\n";
    match cx.ops.resolve_workspace(name.as_str()).await {
        Ok(existing) => {
            t += &format!(
                "A workspace for this issue already exists: `{}` ({}). Continue there instead of creating another; the `review-workspace` prompt with workspace_id `{}` shows where it stands.\n\n",
                name, existing.id, name
            );
        }
        Err(e) if !e.is_not_found() => return Err(e),
        Err(_) => {
            let mut call = json!({"name": name.as_str()});
            call["description"] = json!(format!(
                "Issue #{number}{}",
                title.as_ref().map(|t| format!(": {t}")).unwrap_or_default()
            ));
            t += &format!(
                "Call the `workspace_create` tool with:\n\n```json\n{}\n```\n\n",
                serde_json::to_string(&call).map_err(json_error)?
            );
            t += &match &base {
                    Some((repo, base)) => format!(
                        "It makes a git worktree of `{}` on the new branch `berth/{name}`, starting from `{base}`, the repository's default base branch.\n\n",
                        repo.display()
                    ),
                    None => "This server has no repository, so the workspace is a plain folder with storage for notes.\n\n".to_owned(),
                };
        }
    }
    t += "## 3. Find your way around\n\n";
    t += &format!(
        "- Read `{}` for the worktree path, branch and status.\n- Browse `{}` and read the files the issue touches.\n\n",
        uri::workspace(&name),
        uri::child(&uri::workspace(&name), "files", None)
    );
    t += "## 4. Plan\n\n";
    let template = format!(
        "# {}\n\n## Goal\n\n## Acceptance criteria\n\n## Plan\n\n## Progress\n",
        match &title {
            Some(t) => format!("Issue #{number}: {t}"),
            None => format!("Issue #{number}"),
        }
    );
    t += &format!(
        "Keep the plan in the workspace's context, so later sessions can pick it up: call `workspace_storage_write` with\n\n```json\n{}\n```\n\nfilled in.\n\n",
        serde_json::to_string(&json!({
            "workspace_identifier": name.as_str(),
            "path": "context.md",
            "content": template,
        }))
        .map_err(json_error)?
    );
    t += "## 5. Work in small steps, checking each\n\n";
    t += &checks_text(&checks, None);
    t += &format!(
        "\n## 6. Review and hand in\n\nUse the `{REVIEW_WORKSPACE}` prompt (workspace_id `{name}`) to see where the work stands, and `{PREPARE_PR}` when it is done.\n"
    );
    Ok((format!("Start work on {heading}"), t))
}

async fn review_workspace(cx: &Context, identifier: &str) -> Result<(String, String)> {
    let WorkspaceReview {
        workspace: ws,
        git: review,
        context,
        sessions,
    } = cx.ops.review_workspace(identifier).await?;
    let now = Utc::now();
    let label = ws.label();

    let mut t = format!("# Review of workspace {label}\n\n");
    if !ws.description.is_empty() {
        t += &format!("{}\n\n", one_line(&ws.description));
    }
    t += "## Age\n\n";
    t += &format!(
        "- Created {} ago ({}).\n- Last used {} ago ({}).\n",
        age(now, ws.created_at),
        ws.created_at.format("%Y-%m-%d %H:%M UTC"),
        age(now, ws.last_accessed),
        ws.last_accessed.format("%Y-%m-%d %H:%M UTC"),
    );
    t += &format!("- {sessions} session(s).\n\n");

    let mut actions: Vec<String> = Vec::new();
    match (&ws.git, &review) {
        (Some(git), Some((review, _))) => {
            t += &branch_text(git, review);
            actions.extend(next_steps(&ws, git, review));
        }
        _ => {
            t += "## Files\n\nA plain workspace: no branch or worktree, only storage.\n\n";
        }
    }
    if (now - ws.last_accessed).num_days() >= 14 {
        actions.push(format!(
                "It has not been used for {}: finish it, or remove it with `workspace_remove` if the work is done or abandoned.",
                age(now, ws.last_accessed)
            ));
    }
    t += &context_section(&ws, context.as_deref());
    if context.is_none() {
        actions.push(
                "Write the goal, plan and progress to `context.md` with `workspace_storage_write`, so the next session starts informed.".to_owned(),
            );
    }
    if let Some((_, checks)) = &review {
        t += "## The project's checks\n\n";
        t += &checks_text(checks, ws.git.as_ref().map(|g| g.worktree.as_path()));
        t += "\n";
    }
    t += "## Recommended next steps\n\n";
    if actions.is_empty() {
        actions.push("Nothing is pending: carry on with the plan in the context.".to_owned());
    }
    for (i, a) in actions.iter().enumerate() {
        t += &format!("{}. {a}\n", i + 1);
    }
    Ok((format!("Review of workspace {label}"), t))
}

async fn prepare_pr(cx: &Context, identifier: &str, args: &Args<'_>) -> Result<(String, String)> {
    let WorkspaceReview {
        workspace: ws,
        git: review,
        context,
        ..
    } = cx.ops.review_workspace(identifier).await?;
    let (Some(git), Some((review, checks))) = (ws.git.clone(), review) else {
        return Err(Error::invalid(format!(
            "workspace {} is a plain workspace: it has no branch to open a pull request from",
            ws.label()
        )));
    };
    let title = args
        .get("pr_title")
        .map(|t| one_line(&t))
        .or_else(|| (!ws.description.is_empty()).then(|| one_line(&ws.description)))
        .or_else(|| {
            review
                .status
                .last_commit
                .as_ref()
                .map(|c| c.subject.clone())
        })
        .unwrap_or_else(|| git.branch.clone());
    let body = args
        .get("pr_description")
        .unwrap_or_else(|| "Summarize what changed and why, and how it was tested.".to_owned());
    let wt = git.worktree.clone();
    let in_wt = sh(&git.worktree.to_string_lossy());
    let target = git
        .base_branch
        .strip_prefix("origin/")
        .unwrap_or(&git.base_branch);

    let mut t = format!("# Prepare a pull request from workspace {}\n\n", ws.label());
    t += &branch_text(&git, &review);
    let mut step = 0;
    let mut next = || {
        step += 1;
        step
    };
    t += "## Checklist\n\n";
    if !review.uncommitted.is_empty() {
        t += &format!(
            "{}. Commit or discard the {} uncommitted file(s) listed above:\n   `git -C {in_wt} add -A && git -C {in_wt} commit`\n",
            next(),
            review.uncommitted.len()
        );
    }
    if review.status.behind.unwrap_or(0) > 0 {
        t += &format!(
            "{}. The base has moved on by {} commit(s); rebase onto it and resolve any conflicts:\n   `git -C {in_wt} rebase {}`\n",
            next(),
            review.status.behind.unwrap_or(0),
            sh(&git.base_branch)
        );
    }
    t += &format!(
        "{}. Run the project's checks in the worktree; all must pass:\n",
        next()
    );
    for line in checks_text(&checks, Some(&wt)).lines() {
        t += &format!("   {line}\n");
    }
    if review.status.ahead == Some(0) {
        t += &format!(
            "{}. The branch has no commits beyond `{}` yet: there is nothing to open a pull request for.\n",
            next(),
            git.base_branch
        );
    }
    t += &format!(
        "{}. Push the branch:\n   `git -C {in_wt} push -u origin {}`\n",
        next(),
        sh(&git.branch)
    );
    t += &format!(
        "{}. Open the pull request:\n   `cd {in_wt} && gh pr create --base {} --head {} --title {} --body {}`\n",
        next(),
        sh(target),
        sh(&git.branch),
        sh(&title),
        sh(&body)
    );
    t += &format!(
        "{}. After it is merged, remove the workspace with `workspace_remove` ({}).\n\n",
        next(),
        serde_json::to_string(&json!({"workspace_id": ws.id})).map_err(json_error)?
    );
    t += &format!("Title: {title}\n\n");
    t += &context_section(&ws, context.as_deref());
    Ok((format!("Prepare a pull request: {title}"), t))
}

/// A tool-call example that could not be encoded (it always can: its values are strings).
fn json_error(e: serde_json::Error) -> Error {
    Error::invalid(format!("cannot encode a tool call for the prompt: {e}"))
}

fn branch_text(git: &berth_core::GitInfo, review: &Review) -> String {
    let s = &review.status;
    let known = |n: Option<u64>| n.map_or("unknown".to_owned(), |n| n.to_string());
    let mut t = "## Branch\n\n".to_owned();
    t += &format!(
        "- Branch `{}` from base `{}`, in the worktree `{}`.\n- Health: {}.\n- {} commit(s) ahead of the base, {} behind.\n",
        git.branch,
        git.base_branch,
        git.worktree.display(),
        s.health.as_str(),
        known(s.ahead),
        known(s.behind)
    );
    if let Some(c) = &s.last_commit {
        t += &format!(
            "- Last commit: {} {} ({}).\n",
            &c.sha[..c.sha.len().min(10)],
            one_line(&c.subject),
            c.date
        );
    }
    if review.uncommitted.is_empty() {
        t += "- No uncommitted changes.\n";
    } else {
        t += &format!("- {} uncommitted file(s):\n", review.uncommitted.len());
        for f in &review.uncommitted {
            t += &format!("  - `{}`\n", one_line(f));
        }
    }
    if !review.commits.is_empty() {
        t += "- Commits on the branch:\n";
        for c in &review.commits {
            t += &format!("  - {}\n", one_line(c));
        }
    }
    t + "\n"
}

fn next_steps(ws: &Workspace, git: &berth_core::GitInfo, review: &Review) -> Vec<String> {
    let s = &review.status;
    let mut out = Vec::new();
    match s.health {
        Health::Ok => {}
        Health::WorktreeMissing => out.push(format!(
            "The worktree `{}` is gone. If the work is pushed or merged, remove the workspace with `workspace_remove`; otherwise recover the branch `{}` first.",
            git.worktree.display(), git.branch
        )),
        Health::RepoMissing => out.push(format!(
            "The repository `{}` is gone or moved; nothing git-related can be done until it is back. `workspace_remove` with force=true drops the record.",
            git.repo.display()
        )),
        Health::BranchMissing => out.push(format!(
            "The branch `{}` no longer exists; the work on it may be lost. Remove the workspace if it was merged.",
            git.branch
        )),
    }
    if !review.uncommitted.is_empty() {
        out.push(format!(
            "Commit the {} uncommitted file(s) in small, described steps.",
            review.uncommitted.len()
        ));
    }
    if s.behind.unwrap_or(0) > 0 {
        out.push(format!(
            "Rebase onto `{}`, which has {} new commit(s): `git -C {} rebase {}`.",
            git.base_branch,
            s.behind.unwrap_or(0),
            sh(&git.worktree.to_string_lossy()),
            sh(&git.base_branch)
        ));
    }
    if s.health == Health::Ok && review.uncommitted.is_empty() && s.ahead.unwrap_or(0) > 0 {
        out.push(format!(
            "The branch is clean and {} commit(s) ahead: when the work is complete, use the `{PREPARE_PR}` prompt with workspace_id `{}`.",
            s.ahead.unwrap_or(0),
            ws.name.as_ref().map_or(ws.id.as_str(), |n| n.as_str())
        ));
    }
    if s.health == Health::Ok && review.uncommitted.is_empty() && s.ahead == Some(0) {
        out.push("No work yet: read the context and start on the plan.".to_owned());
    }
    out
}

fn context_section(ws: &Workspace, context: Option<&str>) -> String {
    let uri = uri::child(&uri::workspace(&ws.id), "context", None);
    match context {
        None => format!("## Context\n\nNo context file yet (`{uri}`).\n\n"),
        Some(text) => {
            let mut cut = text.len().min(CONTEXT_IN_PROMPT);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            let more = if cut < text.len() {
                format!("\n\n(cut at {CONTEXT_IN_PROMPT} bytes; read `{uri}` for the rest)")
            } else {
                String::new()
            };
            // A fence longer than any run of backticks in the text keeps the text inside it.
            let fence = "`".repeat(longest_backtick_run(text).max(2) + 1);
            format!(
                "## Context (`{uri}`)\n\n{fence}markdown\n{}\n{fence}{more}\n\n",
                &text[..cut]
            )
        }
    }
}

fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// The project's checks as a list, each run in `dir` when given.
fn checks_text(checks: &[Check], dir: Option<&Path>) -> String {
    if checks.is_empty() {
        return "No Cargo, npm, pnpm, yarn, Go, Python or Make project was found at the worktree's root; find the project's test and lint commands in its README or CI configuration.\n".to_owned();
    }
    checks
        .iter()
        .map(|c| match dir {
            Some(d) => format!(
                "- {} ({}): `cd {} && {}`\n",
                c.purpose,
                c.tool,
                sh(&d.to_string_lossy()),
                c.command
            ),
            None => format!("- {} ({}): `{}`\n", c.purpose, c.tool, c.command),
        })
        .collect()
}

/// `s` quoted for a POSIX shell: bare when it is made only of characters no shell treats
/// specially, otherwise in single quotes with each `'` written as `'\''`.
pub fn sh(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Client text kept to one line of markdown: control characters (newlines included) become
/// spaces, so a title cannot start a heading or a fence of its own.
fn one_line(s: &str) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    flat.trim().to_owned()
}

/// A duration as a person says it: `3 days`, `5 hours`, `under a minute`.
fn age(now: DateTime<Utc>, then: DateTime<Utc>) -> String {
    let d = now - then;
    let (n, unit) = if d.num_days() >= 1 {
        (d.num_days(), "day")
    } else if d.num_hours() >= 1 {
        (d.num_hours(), "hour")
    } else if d.num_minutes() >= 1 {
        (d.num_minutes(), "minute")
    } else {
        return "under a minute".to_owned();
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting_survives_hostile_text() {
        assert_eq!(sh("main"), "main");
        assert_eq!(sh("origin/main"), "origin/main");
        assert_eq!(sh(""), "''");
        assert_eq!(sh("a b"), "'a b'");
        assert_eq!(sh("it's $(rm -rf ~)"), r"'it'\''s $(rm -rf ~)'");
        // The quoted form is what a shell reads back as the original.
        let hostile = "x'; touch /tmp/pwned; echo '`id` $HOME \"q\"\n";
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", sh(hostile)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), hostile);
    }

    #[test]
    fn one_line_flattens_markdown_breakouts() {
        assert_eq!(
            one_line("Fix it\n# injected heading\r"),
            "Fix it # injected heading"
        );
    }

    #[test]
    fn fences_outgrow_the_text() {
        assert_eq!(longest_backtick_run("a ```` b ` c"), 4);
    }
}
