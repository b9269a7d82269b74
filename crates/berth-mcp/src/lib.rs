//! berth-mcp: berth's Model Context Protocol server, built on `rmcp`.
//!
//! It serves workspaces, sessions and their storage to AI agents. Every tool failure (an
//! unknown workspace, a refused path, a worktree with uncommitted work) is a tool result with
//! `isError: true` and a message that says what to do next, never a JSON-RPC error: a model
//! sees tool results, while clients often hide protocol errors. Nothing but protocol goes to
//! stdout; git setup output is captured by `berth-git`.
//!
//! This is the first slice of issue 5: the workspace tools, the six split storage tools, and
//! the workspace resources (with their bridge tools) over stdio. File, context and session
//! resources, prompts, completions, notifications and Streamable HTTP come next.

use std::path::PathBuf;

use base64::Engine;
use berth_core::config::GitSettings;
use berth_core::{NewWorkspace, StoragePath, StorageScope, WorkspaceManager, WorkspaceName};
use berth_git::BranchSpec;
use berth_git::workspace::{self as git_workspace, GitRequest};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};

/// The server: a manager over some store, and what `workspace_create` needs to make git
/// workspaces.
#[derive(Clone)]
pub struct BerthMcp {
    manager: WorkspaceManager,
    /// The repository `workspace_create` makes worktrees of; `None` makes plain workspaces.
    repo: Option<PathBuf>,
    git: GitSettings,
    tool_router: ToolRouter<BerthMcp>,
}

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
    /// The workspace: its id, its name, or an unambiguous id prefix of 4+ characters.
    pub workspace_id: String,
    /// Remove even if the worktree has uncommitted changes or its branch has unmerged commits;
    /// that work is lost.
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

/// The canonical scheme; `amux://` (the seed's) is accepted as an alias.
const SCHEME: &str = "berth://";
const ALIAS: &str = "amux://";

/// What a resource URI names, after the scheme.
enum Target<'a> {
    Workspaces,
    Workspace(&'a str),
}

fn parse_uri(uri: &str) -> Option<Target<'_>> {
    let rest = uri
        .strip_prefix(SCHEME)
        .or_else(|| uri.strip_prefix(ALIAS))?;
    match rest.split_once('/') {
        None if rest == "workspace" => Some(Target::Workspaces),
        Some(("workspace", id)) if !id.is_empty() && !id.contains('/') => {
            Some(Target::Workspace(id))
        }
        _ => None,
    }
}

fn workspace_uri(id: &impl std::fmt::Display) -> String {
    format!("{SCHEME}workspace/{id}")
}

/// A tool's outcome before it becomes a result: structured data and its text rendering, or a
/// message for the model.
type Outcome = Result<(Value, String), String>;

fn result(outcome: Outcome) -> Result<CallToolResult, ErrorData> {
    Ok(match outcome {
        Ok((value, text)) => {
            let mut r = CallToolResult::structured(value);
            r.content = vec![ContentBlock::text(text)];
            r
        }
        Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
    })
}

/// Data whose text rendering is the data itself, pretty-printed.
fn rendered(value: Value) -> (Value, String) {
    let text = serde_json::to_string_pretty(&value).unwrap_or_default();
    (value, text)
}

fn text_of(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[tool_router]
impl BerthMcp {
    pub fn new(manager: WorkspaceManager, repo: Option<PathBuf>, git: GitSettings) -> BerthMcp {
        BerthMcp {
            manager,
            repo,
            git,
            tool_router: Self::tool_router(),
        }
    }

    /// Every workspace, each with the URI of its details.
    async fn workspaces_json(&self) -> Result<Value, String> {
        let all = self.manager.list().await.map_err(text_of)?;
        let items: Vec<Value> = all
            .iter()
            .map(|ws| {
                let mut v = serde_json::to_value(ws).unwrap_or(Value::Null);
                v["uri"] = json!(workspace_uri(&ws.id));
                v
            })
            .collect();
        Ok(json!({ "workspaces": items }))
    }

    /// One workspace: the record, its folder and, for git, the worktree's state.
    async fn workspace_json(&self, identifier: &str) -> Result<Value, String> {
        let ws = self.manager.resolve(identifier).await.map_err(text_of)?;
        let status = match ws.git.clone() {
            Some(git) => Some(
                tokio::task::spawn_blocking(move || git_workspace::status(&git))
                    .await
                    .map_err(text_of)?,
            ),
            None => None,
        };
        let mut v = serde_json::to_value(&ws).map_err(text_of)?;
        v["uri"] = json!(workspace_uri(&ws.id));
        v["path"] = json!(self.manager.workspaces().workspace_dir(&ws.id));
        v["git_status"] = json!(status);
        Ok(v)
    }

    async fn workspace_scope(&self, identifier: &str) -> Result<StorageScope, String> {
        let ws = self.manager.resolve(identifier).await.map_err(text_of)?;
        Ok(StorageScope::Workspace(ws.id))
    }

    async fn session_scope(&self, identifier: &str) -> Result<StorageScope, String> {
        let s = self
            .manager
            .resolve_session(identifier)
            .await
            .map_err(text_of)?;
        Ok(StorageScope::Session {
            workspace: s.workspace_id,
            session: s.id,
        })
    }

    async fn read(&self, scope: Result<StorageScope, String>, path: &str) -> Outcome {
        let scope = scope?;
        let path = StoragePath::new(path).map_err(text_of)?;
        let bytes = self
            .manager
            .read_storage(&scope, &path)
            .await
            .map_err(text_of)?;
        let size = bytes.len();
        Ok(match String::from_utf8(bytes) {
            Ok(text) => (
                json!({"path": path.as_str(), "encoding": "utf-8", "size": size, "content": text}),
                text,
            ),
            Err(e) => {
                let b64 = base64::engine::general_purpose::STANDARD.encode(e.as_bytes());
                (
                    json!({"path": path.as_str(), "encoding": "base64", "size": size, "content": b64}),
                    format!(
                        "{path} is binary ({size} bytes); its base64 content is in structuredContent"
                    ),
                )
            }
        })
    }

    async fn write(
        &self,
        scope: Result<StorageScope, String>,
        path: &str,
        content: String,
    ) -> Outcome {
        let scope = scope?;
        let path = StoragePath::new(path).map_err(text_of)?;
        let size = content.len();
        self.manager
            .write_storage(&scope, &path, content.into_bytes())
            .await
            .map_err(text_of)?;
        Ok((
            json!({"path": path.as_str(), "size": size}),
            format!("wrote {size} bytes to {path}"),
        ))
    }

    async fn list(&self, scope: Result<StorageScope, String>, path: Option<&str>) -> Outcome {
        let scope = scope?;
        let path = path
            .filter(|p| !p.is_empty())
            .map(StoragePath::new)
            .transpose()
            .map_err(text_of)?;
        let entries = self
            .manager
            .list_storage(&scope, path.as_ref())
            .await
            .map_err(text_of)?;
        let text = if entries.is_empty() {
            "(empty)".to_owned()
        } else {
            entries
                .iter()
                .map(|e| format!("{}\t{}\t{}", e.kind.as_str(), e.size, e.path))
                .collect::<Vec<_>>()
                .join("\n")
        };
        Ok((json!({ "entries": entries }), text))
    }

    #[tool(
        description = "Create a workspace: an isolated git worktree on its own branch when this server has a repository (a plain folder otherwise, or with plain=true). Returns its id, name, folder and, for git, the worktree path and branch."
    )]
    async fn workspace_create(
        &self,
        Parameters(args): Parameters<WorkspaceCreateArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(self.create(args).await)
    }

    async fn create(&self, args: WorkspaceCreateArgs) -> Outcome {
        let name = WorkspaceName::new(args.name).map_err(text_of)?;
        let new = NewWorkspace {
            id: None,
            name: Some(name),
            description: args.description.unwrap_or_default(),
            agent_id: args.agent_id,
            git: None,
        };
        if args.plain && (args.branch.is_some() || args.base_branch.is_some()) {
            return Err(
                "a plain workspace has no branch: leave out branch and base_branch, or plain"
                    .to_owned(),
            );
        }
        let request = match (&self.repo, args.plain) {
            (Some(repo), false) => Some(GitRequest {
                repo: repo.clone(),
                branch: args.branch.map(BranchSpec::Existing),
                base: args.base_branch,
            }),
            (None, false) if args.branch.is_some() || args.base_branch.is_some() => {
                return Err("this server has no repository, so branch and base_branch cannot be used; start it with --repo PATH, or leave them out for a plain workspace".to_owned());
            }
            _ => None,
        };
        let ws = git_workspace::create(&self.manager, new, request, &self.git)
            .await
            .map_err(text_of)?;
        let folder = self.manager.workspaces().workspace_dir(&ws.id);
        let mut text = format!("created workspace {}", ws.id);
        if let Some(git) = &ws.git {
            text.push_str(&format!(
                "\nworktree: {}\nbranch: {} (from {})",
                git.worktree, git.branch, git.base_branch
            ));
        }
        let mut value = serde_json::to_value(&ws).map_err(text_of)?;
        value["path"] = json!(folder);
        Ok((value, text))
    }

    #[tool(
        description = "Remove a workspace with its storage and sessions. A git workspace's worktree and the branch berth created go too; this is refused while the worktree has uncommitted changes or unmerged commits, unless force=true."
    )]
    async fn workspace_remove(
        &self,
        Parameters(args): Parameters<WorkspaceRemoveArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(
            async {
                let ws = self
                    .manager
                    .resolve(&args.workspace_id)
                    .await
                    .map_err(text_of)?;
                let removed = git_workspace::remove(&self.manager, &ws, args.force)
                    .await
                    .map_err(text_of)?;
                let mut text = format!("removed workspace {}", ws.id);
                if let Some(w) = &removed.warning {
                    text.push_str(&format!("\nwarning: {w}"));
                }
                Ok((
                    json!({"id": ws.id, "removed": true, "warning": removed.warning}),
                    text,
                ))
            }
            .await,
        )
    }

    #[tool(
        description = "Read a file from a workspace's storage (notes, context.md, plans). Text comes back as text; binary files as base64 in structuredContent."
    )]
    async fn workspace_storage_read(
        &self,
        Parameters(a): Parameters<WorkspaceFileArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.workspace_scope(&a.workspace_identifier).await;
        result(self.read(scope, &a.path).await)
    }

    #[tool(
        description = "Write a file in a workspace's storage, replacing it whole and atomically; folders are created as needed. storage/context.md is the workspace's context."
    )]
    async fn workspace_storage_write(
        &self,
        Parameters(a): Parameters<WorkspaceWriteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.workspace_scope(&a.workspace_identifier).await;
        result(self.write(scope, &a.path, a.content).await)
    }

    #[tool(
        description = "List a folder of a workspace's storage: name, kind and size of each entry."
    )]
    async fn workspace_storage_list(
        &self,
        Parameters(a): Parameters<WorkspaceListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.workspace_scope(&a.workspace_identifier).await;
        result(self.list(scope, a.path.as_deref()).await)
    }

    #[tool(
        description = "List every workspace (the berth://workspace resource, for clients that cannot read resources): id, name, description, timestamps, git part and URI."
    )]
    async fn resource_workspace_list(&self) -> Result<CallToolResult, ErrorData> {
        result(self.workspaces_json().await.map(rendered))
    }

    #[tool(
        description = "Show one workspace (the berth://workspace/{id} resource): its record, folder, and for a git workspace the worktree path, branch, base, ahead/behind, changed files, last commit and health."
    )]
    async fn resource_workspace_show(
        &self,
        Parameters(a): Parameters<WorkspaceShowArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(
            self.workspace_json(&a.workspace_identifier)
                .await
                .map(rendered),
        )
    }

    #[tool(description = "Read a file from a session's storage.")]
    async fn session_storage_read(
        &self,
        Parameters(a): Parameters<SessionFileArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.session_scope(&a.session_identifier).await;
        result(self.read(scope, &a.path).await)
    }

    #[tool(
        description = "Write a file in a session's storage, replacing it whole and atomically; folders are created as needed."
    )]
    async fn session_storage_write(
        &self,
        Parameters(a): Parameters<SessionWriteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.session_scope(&a.session_identifier).await;
        result(self.write(scope, &a.path, a.content).await)
    }

    #[tool(
        description = "List a folder of a session's storage: name, kind and size of each entry."
    )]
    async fn session_storage_list(
        &self,
        Parameters(a): Parameters<SessionListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.session_scope(&a.session_identifier).await;
        result(self.list(scope, a.path.as_deref()).await)
    }
}

// The router built once in `new`; the macro's default rebuilds it on every call.
#[tool_handler(router = self.tool_router)]
impl ServerHandler for BerthMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::from_build_env())
        .with_instructions(
            "berth keeps isolated workspaces (git worktrees of a project, or plain folders) \
                 with notes storage, and sessions with their own storage. Create a workspace \
                 per task with workspace_create, keep notes with workspace_storage_write, and \
                 remove it with workspace_remove when the work is merged.",
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new(format!("{SCHEME}workspace"), "workspaces")
                .with_description("Every workspace, each with the URI of its details")
                .with_mime_type("application/json"),
        ]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(format!("{SCHEME}workspace/{{id}}"), "workspace")
                .with_description(
                    "One workspace by id, name or 4+ character id prefix: record, folder, git status",
                )
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let value = match parse_uri(&uri) {
            Some(Target::Workspaces) => self.workspaces_json().await,
            Some(Target::Workspace(id)) => self.workspace_json(id).await,
            None => Err(format!(
                "unknown resource {uri:?}: resources are berth://workspace and berth://workspace/{{id}}"
            )),
        }
        .map_err(|message| ErrorData::resource_not_found(message, None))?;
        let text = serde_json::to_string_pretty(&value)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, uri).with_mime_type("application/json"),
        ])
        .into())
    }
}

#[derive(Debug)]
pub struct ServeError(String);

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MCP server: {}", self.0)
    }
}

impl std::error::Error for ServeError {}

/// Serves MCP over stdin/stdout until the client closes the connection.
pub async fn serve_stdio(server: BerthMcp) -> Result<(), ServeError> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ServeError(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServeError(e.to_string()))?;
    Ok(())
}
