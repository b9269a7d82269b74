//! berth-mcp: berth's Model Context Protocol server, built on `rmcp`.
//!
//! It serves workspaces, sessions and their storage to AI agents:
//! - resources (`uri`, `resources`): workspaces, sessions, worktree files, contexts, storage
//!   and transcripts under `berth://` (`amux://` is an alias);
//! - tools (`tools`): workspace create and remove, the six split storage tools, and bridge
//!   tools that return resources and prompts to clients that cannot read them;
//! - prompts (`prompts`): guided workflows rendered from the real state (`berth_ops::review`);
//! - skills (`skills`): each workspace's Agent Skills over the skills extension (SEP-2640);
//! - lands (`land`): the merge queue of runs' winners (`land`, `land_status` tools), driven
//!   in the server's background;
//! - completions of workspace and session identifiers;
//! - notifications (`notify`): `list_changed` on create and remove, `updated` on a subscribed
//!   storage file written through this server;
//! - transports: stdio here, Streamable HTTP's `/mcp` router in `http` (served by berth-serve,
//!   behind its guard, in `berth serve` and `berth mcp --transport http` alike).
//!
//! Everything is done through `berth_ops::Ops`; resources, prompts and tools are functions over
//! a small `context::Context`. Every tool failure a model can act on is a tool result with
//! `isError: true`, never a JSON-RPC error: a model sees tool results, while clients often hide
//! protocol errors. Errors are mapped to MCP in one place (`errors`). Nothing
//! but protocol goes to stdout; git setup output is captured by `berth-git`.

use std::path::PathBuf;
use std::sync::Arc;

use berth_ops::{ErrorKind, Listed, Ops, Owner, StoragePath};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams,
    GetPromptResponse, GetSkillRequestParams, GetSkillResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, PaginatedRequestParams,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Reference, Resource, ResourceContents,
    ResourceTemplate, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool_handler};

mod context;
mod errors;
mod http;
mod land;
mod notify;
mod prompts;
mod resources;
mod runs;
mod schemas;
mod sessions;
mod skills;
mod tools;
mod uri;

pub use berth_ops::DEFAULT_MAX_FILE_BYTES;
pub use http::{DEFAULT_MAX_REQUEST_BYTES, HttpOptions, router as http_router};
pub use sessions::{DEFAULT_IDLE, DEFAULT_MAX_SESSIONS};

use context::Context;
use notify::{Connection, Hub};
use resources::Body;
use uri::Target;

/// The server for one client connection. [`BerthMcp::new`] makes the first; an HTTP server
/// makes one per MCP session with [`BerthMcp::connection`], all sharing one [`Hub`] so that a
/// change made through one session is announced to all.
#[derive(Clone)]
pub struct BerthMcp {
    cx: Arc<Context>,
    hub: Arc<Hub>,
    conn: Arc<Connection>,
    tool_router: ToolRouter<BerthMcp>,
}

impl BerthMcp {
    /// A server over `ops`; `repo` is the repository `workspace_create` makes worktrees of
    /// (`None`: plain workspaces). Worktree files over `max_file_bytes` are refused.
    pub fn new(ops: Ops, repo: Option<PathBuf>, max_file_bytes: u64) -> BerthMcp {
        BerthMcp {
            cx: Arc::new(Context {
                ops,
                repo,
                max_file_bytes,
                runs: Arc::default(),
            }),
            hub: Arc::default(),
            conn: Arc::default(),
            tool_router: Self::tool_router(),
        }
    }

    /// A server for another connection to the same state: its own subscriptions, the shared
    /// hub.
    pub fn connection(&self) -> BerthMcp {
        BerthMcp {
            conn: Arc::default(),
            ..self.clone()
        }
    }

    /// What a subscription to `uri` watches: a storage file, or a workspace's context (its
    /// `context.md`).
    async fn subscription_key(&self, uri: &str) -> Result<notify::Key, ErrorData> {
        let ops = &self.cx.ops;
        let failed = |e: berth_ops::Error| errors::protocol(&e);
        match uri::parse(uri) {
            Some(Target::Context(id)) => {
                let at = ops.storage(Owner::Workspace, &id).await.map_err(failed)?;
                Ok((at.scope().clone(), berth_ops::context_path()))
            }
            Some(Target::Storage(owner, id, Some(path))) => {
                let at = ops.storage(owner, &id).await.map_err(failed)?;
                let path = StoragePath::new(&path)
                    .map_err(|e| failed(berth_core::Error::from(e).into()))?;
                Ok((at.scope().clone(), path))
            }
            Some(_) => Err(errors::of_kind(
                ErrorKind::Invalid,
                format!(
                    "{uri} cannot be subscribed to: subscriptions cover a workspace's context and storage files (berth://workspace/{{id}}/context, berth://workspace/{{id}}/storage/{{path}}, berth://session/{{id}}/storage/{{path}})"
                ),
            )),
            None => Err(errors::of_kind(ErrorKind::NotFound, unknown_resource(uri))),
        }
    }

    /// Identifiers starting with `prefix`: workspace ids and names, or session ids. A
    /// completion is only a hint, so a store that cannot be read offers none rather than
    /// failing the client's typing.
    async fn identifiers(&self, of: Owner, prefix: &str) -> Vec<String> {
        let mut all: Vec<String> = match of {
            Owner::Session => match self.cx.ops.session_ids().await {
                Ok(ids) => ids.into_iter().map(|id| id.to_string()).collect(),
                Err(_) => Vec::new(),
            },
            Owner::Workspace => match self.cx.ops.workspace_records().await {
                Ok(list) => list
                    .into_iter()
                    .flat_map(|ws| {
                        let name = ws.name.map(|n| n.to_string());
                        std::iter::once(ws.id.to_string()).chain(name)
                    })
                    .collect(),
                Err(_) => Vec::new(),
            },
        };
        all.retain(|v| v.starts_with(prefix));
        all.sort();
        all
    }
}

fn unknown_resource(uri: &str) -> String {
    format!(
        "unknown resource {uri:?}: resources are berth://workspace, berth://workspace/{{id}} (with /files, /context, /memory and /storage below it), berth://session and berth://session/{{id}} (with /transcript and /storage)"
    )
}

/// Concrete resources listed per page; the templates cover everything else.
const RESOURCE_PAGE: usize = 500;

// The router built once in `new`; the macro's default rebuilds it on every call.
#[tool_handler(router = self.tool_router)]
impl ServerHandler for BerthMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .enable_prompts()
                .enable_completions()
                .enable_skills_with_directory_read()
                .build(),
        )
        .with_server_info(
            Implementation::new("berth", env!("CARGO_PKG_VERSION")).with_title("berth"),
        )
        .with_instructions(
            "berth keeps isolated workspaces (git worktrees of a project, or plain folders) \
             with notes storage, and sessions with their own storage. Start with the \
             start-issue-work prompt, create a workspace per task with workspace_create, read \
             berth://workspace/{id} for its worktree, browse berth://workspace/{id}/files, keep \
             the plan in context.md with workspace_storage_write, check progress with \
             review-workspace, finish with prepare-pr, and remove the workspace with \
             workspace_remove when the work is merged.",
        )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.conn.attach(context.peer.clone());
        self.hub.register(&self.conn);
    }

    /// The two lists, then each workspace and its context, then each session, a page at a time.
    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let json = |r: Resource| r.with_mime_type("application/json");
        let cursor = request.and_then(|r| r.cursor);
        // Up to two resources an item (a workspace and its context): a page stays within
        // RESOURCE_PAGE resources, and loads only its own records.
        let listed = self
            .cx
            .ops
            .listing_page(cursor.as_deref(), RESOURCE_PAGE / 2)
            .await
            .map_err(|e| errors::protocol(&e))?;
        let mut page = Vec::new();
        if cursor.is_none() {
            page.push(json(
                Resource::new(uri::workspaces(), "workspaces")
                    .with_description("Every workspace, each with the URI of its details"),
            ));
            page.push(json(
                Resource::new(uri::sessions(), "sessions")
                    .with_description("Every session, each with the URI of its details"),
            ));
        }
        for item in &listed.items {
            match item {
                Listed::Workspace(ws) => {
                    let label = ws.name.as_ref().map_or(ws.id.as_str(), |n| n.as_str());
                    let base = uri::workspace(&ws.id);
                    page.push(json(
                        Resource::new(base.clone(), format!("workspace {label}"))
                            .with_description(ws.description.clone()),
                    ));
                    page.push(
                        Resource::new(
                            uri::child(&base, "context", None),
                            format!("context of {label}"),
                        )
                        .with_mime_type("text/markdown"),
                    );
                }
                Listed::Session(s) => page.push(json(
                    Resource::new(uri::session(&s.id), format!("session {}", s.id))
                        .with_description(s.title.clone()),
                )),
            }
        }
        let next_cursor = listed.next;
        let mut result = ListResourcesResult::with_all_items(page);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let t = |uri: &str, name: &str, description: &str, mime: &str| {
            ResourceTemplate::new(format!("{}{uri}", uri::SCHEME), name)
                .with_description(description)
                .with_mime_type(mime)
        };
        let json = "application/json";
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            t(
                "workspace/{id}",
                "workspace",
                "One workspace by id, name or 4+ character id prefix: record, folder, git status, and the URIs of its files, context, storage and sessions",
                json,
            ),
            t(
                "workspace/{id}/files{/path*}",
                "workspace files",
                "A git workspace's worktree: a folder lists its entries (name, type, size, uri; .git left out), a file reads as text or a base64 blob with its MIME type; files over the size limit (10 MiB by default) are refused",
                json,
            ),
            t(
                "workspace/{id}/context",
                "workspace context",
                "The workspace's context.md (task, plan, progress), or a placeholder when none was written",
                "text/markdown",
            ),
            t(
                "workspace/{id}/memory",
                "workspace memory",
                "The workspace's memory (memory/MEMORY.md): the dated notes its agents keep with `remember`, which every new turn starts with",
                "text/markdown",
            ),
            t(
                "workspace/{id}/storage{/path*}",
                "workspace storage",
                "A file or folder of the workspace's storage; subscribe to a file to hear when it is written",
                json,
            ),
            t(
                "session/{id}",
                "session",
                "One session by id or 4+ character prefix: record and the URIs of its transcript and storage",
                json,
            ),
            t(
                "session/{id}/transcript",
                "session transcript",
                "The session's messages as markdown",
                "text/markdown",
            ),
            t(
                "session/{id}/storage{/path*}",
                "session storage",
                "A file or folder of the session's storage",
                json,
            ),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let body = if uri.starts_with(uri::SKILL_SCHEME) {
            skills::read(&self.cx, &uri).await?
        } else {
            let target = uri::parse(&uri)
                .ok_or_else(|| errors::of_kind(ErrorKind::NotFound, unknown_resource(&uri)))?;
            resources::read(&self.cx, target)
                .await
                .map_err(|e| errors::protocol(&e))?
        };
        let contents = match body {
            Body::Json(value) => {
                let text = serde_json::to_string_pretty(&value)
                    .map_err(|e| errors::of_kind(ErrorKind::Io, e.to_string()))?;
                ResourceContents::text(text, uri).with_mime_type("application/json")
            }
            Body::Text { text, mime } => ResourceContents::text(text, uri).with_mime_type(mime),
            Body::Blob { bytes, mime } => {
                use base64::Engine;
                let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                ResourceContents::blob(b64, uri).with_mime_type(mime)
            }
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        skills::list(&self.cx, cursor.as_deref()).await
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        skills::get(&self.cx, &request.uri).await
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        skills::directory(&self.cx, &request.uri).await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let key = self.subscription_key(&request.uri).await?;
        // A client may subscribe before `initialized` reached us; its peer is the same.
        self.conn.attach(context.peer.clone());
        self.hub.register(&self.conn);
        self.conn.subscribe(key, request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.conn.unsubscribe(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(prompts::list()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        prompts::render(&self.cx, &request.name, request.arguments.as_ref())
            .await
            .map(Into::into)
            .map_err(|e| errors::protocol(&e))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let of = match &request.r#ref {
            Reference::Prompt(_) if request.argument.name == "workspace_id" => {
                Some(Owner::Workspace)
            }
            Reference::Resource(r) if request.argument.name == "id" => {
                let rest = r.uri.split_once("://").map_or("", |(_, rest)| rest);
                if rest.starts_with("session") {
                    Some(Owner::Session)
                } else if rest.starts_with("workspace") {
                    Some(Owner::Workspace)
                } else {
                    None
                }
            }
            _ => None,
        };
        let values = match of {
            Some(of) => self.identifiers(of, &request.argument.value).await,
            None => Vec::new(),
        };
        let total = values.len();
        let shown: Vec<String> = values
            .into_iter()
            .take(CompletionInfo::MAX_VALUES)
            .collect();
        let info = CompletionInfo::with_pagination(
            shown,
            Some(total as u32),
            total > CompletionInfo::MAX_VALUES,
        )
        .map_err(|e| errors::of_kind(ErrorKind::Invalid, e))?;
        Ok(CompleteResult::new(info))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("MCP server: {0}")]
    Protocol(String),
}

impl berth_core::Kinded for ServeError {
    /// The protocol's failure on stdio is I/O (listening, and its refusals, are berth-serve's).
    fn kind(&self) -> berth_core::ErrorKind {
        match self {
            ServeError::Protocol(_) => berth_core::ErrorKind::Io,
        }
    }
}

/// Serves MCP over stdin/stdout until the client closes the connection.
///
/// When both are pipes, as when a client spawns the server, they are driven by tokio's IO
/// reactor (`stdio_pipes`): tokio's plain stdio reads and writes on the blocking pool, two
/// thread switches per message, which was a third of a storage read's round trip.
pub async fn serve_stdio(server: BerthMcp) -> Result<(), ServeError> {
    let running = server
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|e| ServeError::Protocol(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServeError::Protocol(e.to_string()))?;
    Ok(())
}
