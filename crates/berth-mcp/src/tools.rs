//! The tools: workspace create and remove, the six split storage tools, and the bridge tools
//! that give clients without resource or prompt support the same data as tool results.
//!
//! A tool never fails at the protocol level for a problem the model can act on: an unknown
//! workspace, a refused path or a dirty worktree comes back as a result with `isError: true`
//! whose text says what to do next.

use std::collections::HashMap;

use berth_ops::{CreateWorkspace, Error, Owner, Repository};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use rmcp::{ErrorData, tool, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::context::Context;
use crate::notify::Hub;
use crate::resources::{self, Body};
use crate::uri::{self, Target};
use crate::{BerthMcp, errors, prompts, schemas};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceCreateArgs {
    /// A unique name for the workspace: letters, digits, '.', '_' or '-', up to 64. A git
    /// workspace gets the new branch `berth/<name>`.
    pub name: String,
    /// What the workspace is for.
    #[serde(default)]
    pub description: Option<String>,
    /// An existing branch to check out (a local branch, or `origin/<branch>` tracked locally)
    /// instead of creating `berth/<name>`.
    #[serde(default)]
    pub branch: Option<String>,
    /// Where the new branch starts and what ahead/behind is measured against. Default: the
    /// repository's `origin/HEAD`, else `main`, else `master`, else `HEAD`.
    #[serde(default)]
    pub base_branch: Option<String>,
    /// The agent this workspace belongs to.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// Make a plain folder even when the server has a repository.
    #[serde(default)]
    pub plain: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceRemoveArgs {
    /// The workspace: its id, its name, or an unambiguous id prefix of 4+ characters
    /// (`workspace_identifier` is accepted too, as the other tools name it).
    #[serde(alias = "workspace_identifier")]
    pub workspace_id: String,
    /// Remove even if the worktree has uncommitted changes or commits nothing else keeps
    /// (unmerged, or on a detached HEAD); that work is first kept on the git ref
    /// `refs/berth/lost/<id>`, named in the result.
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceFileArgs {
    /// The workspace: its id, its name, or an unambiguous id prefix of 4+ characters.
    pub workspace_identifier: String,
    /// A path relative to the workspace's storage, e.g. `context.md` or `notes/plan.md`.
    pub path: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceWriteArgs {
    /// The workspace: its id, its name, or an unambiguous id prefix of 4+ characters.
    pub workspace_identifier: String,
    /// A path relative to the workspace's storage; missing folders are created.
    pub path: String,
    /// The new contents of the file (replaces it whole, atomically).
    pub content: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceListArgs {
    /// The workspace: its id, its name, or an unambiguous id prefix of 4+ characters.
    pub workspace_identifier: String,
    /// A folder relative to the workspace's storage; the storage root when omitted.
    #[serde(default)]
    pub path: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionFileArgs {
    /// The session: its id or an unambiguous id prefix of 4+ characters.
    pub session_identifier: String,
    /// A path relative to the session's storage.
    pub path: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionWriteArgs {
    /// The session: its id or an unambiguous id prefix of 4+ characters.
    pub session_identifier: String,
    /// A path relative to the session's storage; missing folders are created.
    pub path: String,
    /// The new contents of the file (replaces it whole, atomically).
    pub content: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionListArgs {
    /// The session: its id or an unambiguous id prefix of 4+ characters.
    pub session_identifier: String,
    /// A folder relative to the session's storage; the storage root when omitted.
    #[serde(default)]
    pub path: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceShowArgs {
    /// The workspace: its id, its name, or an unambiguous id prefix of 4+ characters.
    pub workspace_identifier: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceBrowseArgs {
    /// The workspace: its id, its name, or an unambiguous id prefix of 4+ characters.
    pub workspace_identifier: String,
    /// A file or folder relative to the worktree, e.g. `src` or `src/main.rs`; the worktree's
    /// root when omitted.
    #[serde(default)]
    pub path: Option<String>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct SessionsArgs {
    /// The `next_cursor` of the previous page; leave out for the first page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// How many to return, 1 to 1000 (default 100).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct WorkspacesArgs {
    /// The `next_cursor` of the previous page; leave out for the first page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// How many to return, 1 to 1000 (default 100).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Only workspaces whose id, name or description contains this text (any case).
    #[serde(default)]
    pub query: Option<String>,
}

/// A page of a list tool: the items and `next_cursor` as structured content; as text, one
/// compact line an item (not a second copy of the data) and how to get the next page.
fn listed(
    key: &str,
    items: Vec<Value>,
    lines: Vec<String>,
    next: Option<String>,
) -> (Value, Vec<ContentBlock>) {
    let mut text = if lines.is_empty() {
        format!("(no {key})")
    } else {
        lines.join("\n")
    };
    if let Some(c) = &next {
        text.push_str(&format!("\n(more: call again with cursor {c:?})"));
    }
    said(json!({ key: items, "next_cursor": next }), text)
}

async fn list_workspaces(cx: &Context, a: WorkspacesArgs) -> Outcome {
    let page = cx
        .ops
        .workspace_page(a.cursor.as_deref(), a.limit, a.query.as_deref())
        .await?;
    let lines = page
        .items
        .iter()
        .map(|ws| {
            let git = ws
                .git
                .as_ref()
                .map_or("plain".to_owned(), |g| g.branch.clone());
            format!(
                "{}\t{}\t{git}\t{}",
                ws.id,
                ws.name.as_ref().map_or("-", |n| n.as_str()),
                ws.description
            )
        })
        .collect();
    let items = page
        .items
        .iter()
        .map(|ws| resources::workspace_item(cx, ws))
        .collect();
    Ok(listed("workspaces", items, lines, page.next))
}

async fn list_sessions(cx: &Context, a: SessionsArgs) -> Outcome {
    let page = cx.ops.session_page(a.cursor.as_deref(), a.limit).await?;
    let lines = page
        .items
        .iter()
        .map(|s| {
            format!(
                "{}\t{}\t{}\t{}",
                s.id,
                s.workspace_id,
                s.status.as_str(),
                s.title
            )
        })
        .collect();
    let items = page.items.iter().map(resources::session_item).collect();
    Ok(listed("sessions", items, lines, page.next))
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionShowArgs {
    /// The session: its id or an unambiguous id prefix of 4+ characters.
    pub session_identifier: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct PromptGetArgs {
    /// The prompt: `start-issue-work`, `prepare-pr` or `review-workspace`.
    pub name: String,
    /// The prompt's arguments by name, e.g. {"workspace_id": "feature-auth"}; `prompt_list`
    /// shows each prompt's arguments.
    #[serde(default)]
    pub arguments: HashMap<String, String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionRunArgs {
    /// What the agent is to do.
    pub task: String,
    /// Work in this existing workspace (id, name or 4+ character id prefix); without it, a new
    /// git workspace of this server's repository, named after the task (or `name`).
    #[serde(default)]
    pub workspace_identifier: Option<String>,
    /// The new workspace's name starts with this (it gets `-1`, or the next free number).
    #[serde(default)]
    pub name: Option<String>,
    /// An ACP agent to run by its command (e.g. `gemini --experimental-acp`) instead of berth's
    /// own; its file reads and writes through berth stay in its worktree.
    #[serde(default)]
    pub agent_command: Option<String>,
    /// berth's own agent's model: a model, a provider, or provider/model.
    #[serde(default)]
    pub model: Option<String>,
    /// Tools that may write or run without a person (e.g. `write_file`, `run_command`, or a
    /// kind such as `edit`); everything else that writes or runs is refused.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Let every tool write and run.
    #[serde(default)]
    pub allow_all: bool,
    /// A command to run in the worktree once the agent is done (e.g. `cargo test`).
    #[serde(default)]
    pub check: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionTellArgs {
    /// The session of the run (its id or a 4+ character prefix).
    pub session_identifier: String,
    /// What to tell its agent: a follow-up, a fix after review.
    pub text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SessionRunRef {
    /// The session `session_run` answered with (its id or a 4+ character prefix).
    pub session_identifier: String,
}

async fn session_run(cx: &Context, a: SessionRunArgs) -> Outcome {
    let repository = match &cx.repo {
        Some(repo) => Repository::Named(repo.clone()),
        None => Repository::None,
    };
    let config = cx.ops.config(None).await?.config;
    let agents = berth_run::choose_agents(
        berth_run::AgentChoice {
            agents: Some("1"),
            agent: &[],
            model: a.model.as_deref(),
            agent_cmd: a.agent_command.as_deref(),
        },
        &config,
    )?;
    let request = berth_run::RunRequest {
        task: a.task,
        repository,
        workspace: a.workspace_identifier,
        agents,
        name: a.name,
        policy: berth_run::Policy::new(&a.allow, a.allow_all),
        check: a.check,
        check_timeout: std::time::Duration::from_secs(berth_run::DEFAULT_CHECK_TIMEOUT_SECS),
        resume: Default::default(),
        agent_writable: Vec::new(),
        push: false,
        // `[run]`'s limits, as for `berth run` without flags.
        budget: Default::default(),
        max_agents: None,
        stderr_dir: None,
        ask: None,
    };
    // Checked first (a run that cannot start makes no workspace or session), then kept as
    // every run is, hosted by this server; it answers once its session exists.
    let started = cx.runs.start(&cx.ops, request).await?;
    let berth_run::RunEvent::Started {
        session,
        workspace,
        worktree,
        ..
    } = &started.event
    else {
        unreachable!("start answers with the started event");
    };
    let state = cx.runs.status(&cx.ops, session).await?.ok_or_else(|| {
        Error::rule(
            berth_ops::ErrorKind::Io,
            format!("run {} is not found in the home's runs", started.run),
        )
    })?;
    let mut value = serde_json::to_value(&state).unwrap_or(Value::Null);
    value["run_id"] = json!(session);
    value["worktree"] = json!(worktree);
    value["uri"] = json!(uri::session(&berth_ops::SessionId::new(session.as_str())?));
    let text = format!(
        "started session {session} in workspace {workspace} ({}), run {}; follow it with session_status, stop it with session_stop",
        worktree.display(),
        started.run
    );
    Ok(said(value, text))
}

async fn session_status(cx: &Context, a: SessionRunRef, stop: bool) -> Outcome {
    let session = cx.ops.resolve_session(&a.session_identifier).await?;
    let id = session.id.to_string();
    let state = if stop {
        cx.runs.stop(&cx.ops, &id).await?
    } else {
        cx.runs.status(&cx.ops, &id).await?
    };
    let Some(state) = state else {
        return Err(Error::rule(
            berth_ops::ErrorKind::NotFound,
            format!(
                "session {id} has no run (no kept run of this home works in it); its transcript is at {}",
                uri::child(&uri::session(&session.id), "transcript", None)
            ),
        ));
    };
    let mut value = serde_json::to_value(&state).unwrap_or(Value::Null);
    value["run_id"] = json!(id);
    let text = format!(
        "session {id}: {}{}",
        state.status.state.as_str(),
        if state.finished { " (finished)" } else { "" }
    );
    Ok(said(value, text))
}

async fn session_tell(cx: &Context, a: SessionTellArgs) -> Outcome {
    let session = cx.ops.resolve_session(&a.session_identifier).await?;
    let id = session.id.to_string();
    let Some(state) = cx.runs.tell(&cx.ops, &id, &a.text).await? else {
        return Err(Error::rule(
            berth_ops::ErrorKind::NotFound,
            format!("session {id} has no run (no kept run of this home works in it)"),
        ));
    };
    let mut value = serde_json::to_value(&state).unwrap_or(Value::Null);
    value["run_id"] = json!(id);
    let text = format!(
        "told session {id}'s agent; follow it with session_status, stop it with session_stop"
    );
    Ok(said(value, text))
}

/// A tool's outcome before it becomes a result: structured data and its content blocks.
type Outcome = Result<(Value, Vec<ContentBlock>), Error>;

fn result(outcome: Outcome) -> Result<CallToolResult, ErrorData> {
    Ok(match outcome {
        Ok((value, content)) => {
            let mut r = CallToolResult::structured(value);
            r.content = content;
            r
        }
        Err(e) => errors::tool(&e),
    })
}

/// Data with a one-line text rendering.
fn said(value: Value, text: String) -> (Value, Vec<ContentBlock>) {
    (value, vec![ContentBlock::text(text)])
}

/// Data whose text rendering is the data itself, compact.
fn rendered(value: Value) -> (Value, Vec<ContentBlock>) {
    Body::Json(value).into_tool_output("", "")
}

async fn read(cx: &Context, owner: Owner, identifier: &str, path: &str) -> Outcome {
    let at = cx.ops.storage(owner, identifier).await?;
    let bytes = cx.ops.read_file(&at, path).await?;
    let uri = uri::child(&resources::owner_uri(at.scope()), "storage", Some(path));
    Ok(Body::file(path, bytes).into_tool_output(path, &uri))
}

async fn write(
    cx: &Context,
    hub: &Hub,
    owner: Owner,
    identifier: &str,
    path: &str,
    content: String,
) -> Outcome {
    let at = cx.ops.storage(owner, identifier).await?;
    let size = content.len();
    let path = cx.ops.write_file(&at, path, content.into_bytes()).await?;
    hub.updated(&(at.scope().clone(), path.clone())).await;
    Ok(said(
        json!({"path": path.as_str(), "size": size}),
        format!("wrote {size} bytes to {path}"),
    ))
}

async fn list(cx: &Context, owner: Owner, identifier: &str, path: Option<&str>) -> Outcome {
    let at = cx.ops.storage(owner, identifier).await?;
    let entries = cx.ops.list_files(&at, path).await?;
    let text = if entries.is_empty() {
        "(empty)".to_owned()
    } else {
        entries
            .iter()
            .map(|e| format!("{}\t{}\t{}", e.kind.as_str(), e.size, e.path))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(said(json!({ "entries": entries }), text))
}

async fn create(cx: &Context, args: WorkspaceCreateArgs) -> Outcome {
    // The server's repository is at hand, not named by this request: plain=true still
    // makes a plain workspace.
    let repository = match &cx.repo {
        Some(repo) => Repository::Around(repo.clone()),
        None => Repository::None,
    };
    let request = CreateWorkspace {
        name: Some(args.name),
        description: args.description.unwrap_or_default(),
        agent_id: args.agent_id,
        plain: args.plain,
        checkout: args.branch,
        base: args.base_branch,
        ..CreateWorkspace::new(repository)
    };
    let created = cx.ops.create_workspace_reported(request).await?;
    let view = &created.workspace;
    let mut text = format!("created workspace {}", view.id);
    if let Some(git) = &view.git {
        text.push_str(&format!(
            "\nworktree: {}\nbranch: {} (from {})",
            git.worktree.display(),
            git.branch,
            git.base_branch
        ));
    }
    if let Some(start) = &created.start {
        text.push_str(&format!("\nstarting at: {} ({})", start.rev, start.sha));
    }
    // The warnings name this tool's argument, not the CLI's flag.
    let warnings: Vec<String> = created
        .warnings
        .iter()
        .map(|w| w.message(|rev| format!("base_branch={rev:?}")))
        .collect();
    for w in &warnings {
        text.push_str(&format!("\nwarning: {w}"));
    }
    let mut value = serde_json::to_value(view).unwrap_or(Value::Null);
    value["uri"] = json!(uri::workspace(&view.id));
    value["start"] = json!(created.start);
    value["warnings"] = json!(warnings);
    Ok(said(value, text))
}

async fn remove(cx: &Context, args: WorkspaceRemoveArgs) -> Outcome {
    let plan = cx.ops.plan_delete(&args.workspace_id, args.force).await?;
    let deleted = cx.ops.delete_workspace(plan).await?;
    let mut text = format!("removed workspace {}", deleted.label);
    if let Some(w) = &deleted.warning {
        text.push_str(&format!("\nwarning: {w}"));
    }
    Ok(said(
        json!({"id": deleted.id, "removed": true, "unbound": deleted.unbound, "warning": deleted.warning}),
        text,
    ))
}

async fn prompt(cx: &Context, name: &str, arguments: HashMap<String, String>) -> Outcome {
    let arguments: JsonObject = arguments
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let prompt = prompts::render(cx, name, Some(&arguments)).await?;
    let text = prompt
        .messages
        .iter()
        .filter_map(|m| m.content.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n\n");
    Ok(said(
        serde_json::to_value(&prompt).unwrap_or(Value::Null),
        text,
    ))
}

// The tools as rmcp routes them: each parses its arguments and calls one function above.
#[tool_router(vis = "pub(crate)")]
impl BerthMcp {
    #[tool(
        description = "Create a workspace: an isolated git worktree on its own branch when this server has a repository (a plain folder otherwise, or with plain=true). Returns its id, name, folder and, for git, the worktree path, branch and the commit it started at (start), with warnings to pass on (a default base behind the main checkout's branch, a missing [git] copy entry).",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schemas::workspace_create()
    )]
    async fn workspace_create(
        &self,
        Parameters(args): Parameters<WorkspaceCreateArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let outcome = create(&self.cx, args).await;
        if outcome.is_ok() {
            self.hub.list_changed().await;
        }
        result(outcome)
    }

    #[tool(
        description = "Remove a workspace with its storage and sessions. A git workspace's worktree and the branch berth created go too; this is refused while the worktree has uncommitted changes or commits nothing else keeps (unmerged, or on a detached HEAD), unless force=true, which first keeps that work on a git ref named in the result.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schemas::workspace_remove()
    )]
    async fn workspace_remove(
        &self,
        Parameters(args): Parameters<WorkspaceRemoveArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let outcome = remove(&self.cx, args).await;
        if outcome.is_ok() {
            self.hub.list_changed().await;
        }
        result(outcome)
    }

    #[tool(
        description = "Read a file from a workspace's storage (notes, context.md, plans). Text comes back as text; binary files as base64 in structuredContent.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::file()
    )]
    async fn workspace_storage_read(
        &self,
        Parameters(a): Parameters<WorkspaceFileArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(read(&self.cx, Owner::Workspace, &a.workspace_identifier, &a.path).await)
    }

    #[tool(
        description = "Write a file in a workspace's storage, replacing it whole and atomically; folders are created as needed. storage/context.md is the workspace's context.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schemas::written()
    )]
    async fn workspace_storage_write(
        &self,
        Parameters(a): Parameters<WorkspaceWriteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(
            write(
                &self.cx,
                &self.hub,
                Owner::Workspace,
                &a.workspace_identifier,
                &a.path,
                a.content,
            )
            .await,
        )
    }

    #[tool(
        description = "List a folder of a workspace's storage: name, kind and size of each entry.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::entries()
    )]
    async fn workspace_storage_list(
        &self,
        Parameters(a): Parameters<WorkspaceListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(
            list(
                &self.cx,
                Owner::Workspace,
                &a.workspace_identifier,
                a.path.as_deref(),
            )
            .await,
        )
    }

    #[tool(
        description = "List workspaces a page at a time (the berth://workspace resource, for clients that cannot read resources): id, name, description, timestamps, git part and URI of each, and next_cursor for the next page. Optional query filters on id, name and description.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::workspace_page()
    )]
    async fn resource_workspace_list(
        &self,
        Parameters(a): Parameters<WorkspacesArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(list_workspaces(&self.cx, a).await)
    }

    #[tool(
        description = "Show one workspace (the berth://workspace/{id} resource): its record, folder, and for a git workspace the worktree path, branch, base, ahead/behind, changed files, last commit and health.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::workspace_show()
    )]
    async fn resource_workspace_show(
        &self,
        Parameters(a): Parameters<WorkspaceShowArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(
            resources::workspace_json(&self.cx, &a.workspace_identifier)
                .await
                .map(rendered),
        )
    }

    #[tool(
        description = "Read a file from a session's storage.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::file()
    )]
    async fn session_storage_read(
        &self,
        Parameters(a): Parameters<SessionFileArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(read(&self.cx, Owner::Session, &a.session_identifier, &a.path).await)
    }

    #[tool(
        description = "Write a file in a session's storage, replacing it whole and atomically; folders are created as needed.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schemas::written()
    )]
    async fn session_storage_write(
        &self,
        Parameters(a): Parameters<SessionWriteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(
            write(
                &self.cx,
                &self.hub,
                Owner::Session,
                &a.session_identifier,
                &a.path,
                a.content,
            )
            .await,
        )
    }

    #[tool(
        description = "List a folder of a session's storage: name, kind and size of each entry.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::entries()
    )]
    async fn session_storage_list(
        &self,
        Parameters(a): Parameters<SessionListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(
            list(
                &self.cx,
                Owner::Session,
                &a.session_identifier,
                a.path.as_deref(),
            )
            .await,
        )
    }

    #[tool(
        description = "Browse a git workspace's worktree (the berth://workspace/{id}/files resource): a folder gives its entries (name, type, size, uri; .git left out), a file its contents with a MIME type, text as text and anything else as base64. Paths outside the worktree are refused.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::worktree_node()
    )]
    async fn resource_workspace_browse(
        &self,
        Parameters(a): Parameters<WorkspaceBrowseArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let path = a.path.filter(|p| !p.is_empty() && p != "/" && p != ".");
        let shown = path.clone().unwrap_or_default();
        let file_uri = uri::child(
            &uri::workspace(&a.workspace_identifier),
            "files",
            path.as_deref(),
        );
        result(
            resources::read(&self.cx, Target::Files(a.workspace_identifier, path))
                .await
                .map(|body| body.into_tool_output(&shown, &file_uri)),
        )
    }

    #[tool(
        description = "List sessions a page at a time (the berth://session resource): id, workspace, title, provider, model, agent (the ACP agent that works in it, which answers instead of that model; null for berth's own), status, timestamps and URI of each, and next_cursor for the next page.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::session_page()
    )]
    async fn resource_session_list(
        &self,
        Parameters(a): Parameters<SessionsArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(list_sessions(&self.cx, a).await)
    }

    #[tool(
        description = "Show one session (the berth://session/{id} resource): its record and the URIs of its transcript, storage and workspace.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::session_show()
    )]
    async fn resource_session_show(
        &self,
        Parameters(a): Parameters<SessionShowArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(
            resources::session_json(&self.cx, &a.session_identifier)
                .await
                .map(rendered),
        )
    }

    #[tool(
        description = "List the guided-workflow prompts (for clients that cannot get prompts): start-issue-work, prepare-pr, review-workspace, each with its arguments.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::prompts()
    )]
    async fn prompt_list(&self) -> Result<CallToolResult, ErrorData> {
        let prompts = serde_json::to_value(prompts::list()).map_err(|e| {
            errors::of_kind(
                berth_ops::ErrorKind::Io,
                format!("cannot render the prompt list: {e}"),
            )
        })?;
        result(Ok(rendered(json!({ "prompts": prompts }))))
    }

    #[tool(
        description = "Render a guided-workflow prompt from the current state (for clients that cannot get prompts); returns its messages. Arguments as listed by prompt_list, e.g. name=review-workspace, arguments={\"workspace_id\": \"feature-auth\"}.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::prompt()
    )]
    async fn prompt_get(
        &self,
        Parameters(a): Parameters<PromptGetArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(prompt(&self.cx, &a.name, a.arguments).await)
    }

    #[tool(
        description = "Start an agent on a task (amux's session_run): berth's own agent, or any ACP agent by its command, in a new git workspace of this server's repository (or an existing workspace), with a berth session whose transcript keeps the task and the answer. Answers at once with the session id (also the run id); follow it with session_status and stop it with session_stop. Writes and commands are refused unless allow names the tool (or allow_all).",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schemas::run_state()
    )]
    async fn session_run(
        &self,
        Parameters(a): Parameters<SessionRunArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let outcome = session_run(&self.cx, a).await;
        if outcome.is_ok() {
            self.hub.list_changed().await;
        }
        result(outcome)
    }

    #[tool(
        description = "Where a run started with session_run is: working, done, failed or stopped; how it ended, its last tool, calls refused, the answer so far, tokens, time, and the check's result.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::run_state()
    )]
    async fn session_status(
        &self,
        Parameters(a): Parameters<SessionRunRef>,
    ) -> Result<CallToolResult, ErrorData> {
        result(session_status(&self.cx, a, false).await)
    }

    #[tool(
        description = "Stop a run started with session_run: its agent is cancelled at once (what it streamed stays in the transcript). Answers with the run's state; session_status shows it stopped once the agent has ended.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schemas::run_state()
    )]
    async fn session_stop(
        &self,
        Parameters(a): Parameters<SessionRunRef>,
    ) -> Result<CallToolResult, ErrorData> {
        result(session_status(&self.cx, a, true).await)
    }

    #[tool(
        description = "Tell the agent of a run something more (a follow-up, a fix after review), in its own workspace and session, with the same agent and policy, as `berth run tell` does: a run that is over goes back to running for it; in a run still running, berth's own agent is told at its next step, in the same turn, and an ACP agent as its next prompt once its current turn ends. Answers with the run's state; follow it with session_status.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schemas::run_state()
    )]
    async fn session_tell(
        &self,
        Parameters(a): Parameters<SessionTellArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(session_tell(&self.cx, a).await)
    }

    #[tool(
        description = "Land the work of finished runs on their base, in order, as `berth land` does (a merge queue): each agent's work is committed, brought up to date with the base as it now stands, and the run's check run on that combined tree; only when it passes does the base move. A conflict or a check that fails there goes back to the agent in a turn of its own session (retries turns); an agent that does not mend it is left with the reason and the queue goes on. Answers at once with the land's id (land_id); follow it with land_status. dry_run only says what it would do.",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = false),
        output_schema = schemas::land()
    )]
    async fn land(
        &self,
        Parameters(a): Parameters<crate::land::LandArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(
            crate::land::land(&self.cx, a)
                .await
                .map(|(v, t)| said(v, t)),
        )
    }

    #[tool(
        description = "Where a land started with land (or `berth land`) is: landing, stopped, over, or cut off (its server went away: `berth land --resume` goes on); each agent's state (waiting, landing, landed, skipped, left with the reason), its check on the combined tree, and every step so far.",
        annotations(read_only_hint = true, open_world_hint = false),
        output_schema = schemas::land_status()
    )]
    async fn land_status(
        &self,
        Parameters(a): Parameters<crate::land::LandRef>,
    ) -> Result<CallToolResult, ErrorData> {
        result(
            crate::land::status(&self.cx, a)
                .await
                .map(|(v, t)| said(v, t)),
        )
    }
}
