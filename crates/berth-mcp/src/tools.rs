//! The tools: workspace create and remove, the six split storage tools, and the bridge tools
//! that give clients without resource or prompt support the same data as tool results.
//!
//! A tool never fails at the protocol level for a problem the model can act on: an unknown
//! workspace, a refused path or a dirty worktree comes back as a result with `isError: true`
//! whose text says what to do next.

use std::collections::HashMap;

use berth_core::{NewWorkspace, StoragePath, StorageScope, WorkspaceName};
use berth_git::BranchSpec;
use berth_git::workspace::{self as git_workspace, GitRequest};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use rmcp::{ErrorData, tool, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::resources::Body;
use crate::uri::{Owner, Target};
use crate::{BerthMcp, prompts, text_of, uri};

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

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceBrowseArgs {
    /// The workspace: its id, its name, or an unambiguous id prefix of 4+ characters.
    pub workspace_identifier: String,
    /// A file or folder relative to the worktree, e.g. `src` or `src/main.rs`; the worktree's
    /// root when omitted.
    #[serde(default)]
    pub path: Option<String>,
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
    Body::Json(value).into_tool_output("")
}

#[tool_router(vis = "pub(crate)")]
impl BerthMcp {
    async fn scope(&self, owner: Owner, identifier: &str) -> Result<StorageScope, String> {
        self.storage_owner(owner, identifier)
            .await
            .map(|(scope, _)| scope)
    }

    async fn read(&self, owner: Owner, identifier: &str, path: &str) -> Outcome {
        let path = StoragePath::new(path).map_err(text_of)?;
        let bytes = match owner {
            // The hot path of agents' notes: the record just resolved also records the use.
            Owner::Workspace => {
                let ws = self.manager.resolve(identifier).await.map_err(text_of)?;
                let scope = StorageScope::Workspace(ws.id.clone());
                self.manager.read_storage_of(&ws, &scope, &path).await
            }
            Owner::Session => {
                let scope = self.scope(owner, identifier).await?;
                self.manager.read_storage(&scope, &path).await
            }
        }
        .map_err(text_of)?;
        Ok(Body::file(path.as_str(), bytes).into_tool_output(path.as_str()))
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
        self.hub.updated(&(scope, path.clone())).await;
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
        let made_git = request.is_some();
        let ws = git_workspace::create(&self.manager, new, request, &self.git)
            .await
            .map_err(text_of)?;
        self.hub.list_changed().await;
        if made_git {
            self.refill_spares();
        }
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
        value["uri"] = json!(uri::workspace(&ws.id));
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
                self.hub.list_changed().await;
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
        result(
            self.read(Owner::Workspace, &a.workspace_identifier, &a.path)
                .await,
        )
    }

    #[tool(
        description = "Write a file in a workspace's storage, replacing it whole and atomically; folders are created as needed. storage/context.md is the workspace's context."
    )]
    async fn workspace_storage_write(
        &self,
        Parameters(a): Parameters<WorkspaceWriteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(Owner::Workspace, &a.workspace_identifier).await;
        result(self.write(scope, &a.path, a.content).await)
    }

    #[tool(
        description = "List a folder of a workspace's storage: name, kind and size of each entry."
    )]
    async fn workspace_storage_list(
        &self,
        Parameters(a): Parameters<WorkspaceListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(Owner::Workspace, &a.workspace_identifier).await;
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
        result(
            self.read(Owner::Session, &a.session_identifier, &a.path)
                .await,
        )
    }

    #[tool(
        description = "Write a file in a session's storage, replacing it whole and atomically; folders are created as needed."
    )]
    async fn session_storage_write(
        &self,
        Parameters(a): Parameters<SessionWriteArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(Owner::Session, &a.session_identifier).await;
        result(self.write(scope, &a.path, a.content).await)
    }

    #[tool(
        description = "List a folder of a session's storage: name, kind and size of each entry."
    )]
    async fn session_storage_list(
        &self,
        Parameters(a): Parameters<SessionListArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let scope = self.scope(Owner::Session, &a.session_identifier).await;
        result(self.list(scope, a.path.as_deref()).await)
    }

    #[tool(
        description = "Browse a git workspace's worktree (the berth://workspace/{id}/files resource): a folder gives its entries (name, type, size, uri; .git left out), a file its contents with a MIME type, text as text and anything else as base64. Paths outside the worktree are refused."
    )]
    async fn resource_workspace_browse(
        &self,
        Parameters(a): Parameters<WorkspaceBrowseArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let path = a.path.filter(|p| !p.is_empty() && p != "/" && p != ".");
        let shown = path.clone().unwrap_or_default();
        result(
            self.read_target(Target::Files(a.workspace_identifier, path))
                .await
                .map(|body| body.into_tool_output(&shown)),
        )
    }

    #[tool(
        description = "List every session (the berth://session resource): id, workspace, title, provider, model, status, timestamps and URI."
    )]
    async fn resource_session_list(&self) -> Result<CallToolResult, ErrorData> {
        result(self.sessions_json().await.map(rendered))
    }

    #[tool(
        description = "Show one session (the berth://session/{id} resource): its record and the URIs of its transcript, storage and workspace."
    )]
    async fn resource_session_show(
        &self,
        Parameters(a): Parameters<SessionShowArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        result(self.session_json(&a.session_identifier).await.map(rendered))
    }

    #[tool(
        description = "List the guided-workflow prompts (for clients that cannot get prompts): start-issue-work, prepare-pr, review-workspace, each with its arguments."
    )]
    async fn prompt_list(&self) -> Result<CallToolResult, ErrorData> {
        let prompts = serde_json::to_value(prompts::list()).map_err(|e| {
            ErrorData::internal_error(format!("cannot render the prompt list: {e}"), None)
        })?;
        result(Ok(rendered(json!({ "prompts": prompts }))))
    }

    #[tool(
        description = "Render a guided-workflow prompt from the current state (for clients that cannot get prompts); returns its messages. Arguments as listed by prompt_list, e.g. name=review-workspace, arguments={\"workspace_id\": \"feature-auth\"}."
    )]
    async fn prompt_get(
        &self,
        Parameters(a): Parameters<PromptGetArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let arguments: JsonObject = a
            .arguments
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        result(
            async {
                let prompt = self.render_prompt(&a.name, Some(&arguments)).await?;
                let text = prompt
                    .messages
                    .iter()
                    .filter_map(|m| m.content.as_text().map(|t| t.text.as_str()))
                    .collect::<Vec<_>>()
                    .join("\n\n");
                Ok((serde_json::to_value(&prompt).map_err(text_of)?, text))
            }
            .await,
        )
    }
}
