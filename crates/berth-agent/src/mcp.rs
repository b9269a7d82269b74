//! External MCP servers as tools of berth's agent, through the rmcp client: a server from
//! `[[mcp_servers]]` (or an ACP client's `mcpServers`) on stdio or Streamable HTTP, its tools
//! offered to the model as `mcp__<server>__<tool>`.
//!
//! What a person can count on:
//! - **Lazy.** A server starts when a turn first needs the tools, not when berth starts; it
//!   stops when the [`McpServers`] is dropped (a stdio server's process is killed).
//! - **A broken server never hangs or fails a turn.** Starting is bounded by a timeout; a
//!   server that cannot start, or dies, is reported once (an [`AgentEvent::Notice`]) and
//!   started again once, on a later turn; after that its tools are left out until berth
//!   restarts. A call is bounded by the server's `timeout_secs` and by the turn's
//!   cancellation, and a call to a server that died is a tool error the model reads.
//! - **Errors are errors.** A result with `isError` reaches the model as a failed call.
//! - **The list stays current.** `notifications/tools/list_changed` makes the next turn list
//!   the server's tools again.
//! - **Writes ask first.** A tool asks the front end's permission unless the server marks it
//!   read-only (`readOnlyHint`).
//!
//! [`AgentEvent::Notice`]: crate::AgentEvent::Notice

use std::borrow::Cow;
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
/// What a server is made from; a front end with its client's own servers (ACP) builds these.
pub use berth_core::config::{McpServerSettings, Secret};
use rmcp::model::{CallToolRequestParams, ClientConfig, ContentBlock, ProtocolVersion};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use crate::conversation::ToolSpec;
use crate::tools::command::is_secret_name;
use crate::tools::{Tool, ToolContext, ToolKind, ToolOutcome};

/// How long a server may take to start and answer `initialize` and `tools/list`.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one tool call may take when the server's config says nothing.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Starts after the first: a server that failed or died is started again this many times.
const RESTARTS: u32 = 1;
/// Of a stdio server's stderr, the end kept for the message when it fails.
const STDERR_TAIL: usize = 2048;
/// Tool names the providers accept: `^[a-zA-Z0-9_-]{1,64}$`.
const MAX_TOOL_NAME: usize = 64;

/// The external servers of an agent, or of one client's session.
pub struct McpServers {
    servers: Vec<Arc<Server>>,
}

/// One server's state, for `/mcp` and the like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    pub name: String,
    /// "not started", "running", or "failed: <why>".
    pub state: String,
    /// Tools offered to the model (0 unless running).
    pub tools: usize,
}

/// What to start, checked when the servers are made.
#[derive(Clone)]
enum Launch {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// A configuration berth cannot use; the reason is reported once.
    Invalid(String),
}

struct Server {
    name: String,
    launch: Launch,
    call_timeout: Duration,
    state: tokio::sync::Mutex<State>,
    /// A copy of the state's summary for synchronous readers ([`McpServers::status`]).
    status: Mutex<ServerStatus>,
    /// Set by the server's `tools/list_changed`; the next turn lists again.
    tools_changed: Arc<AtomicBool>,
    /// Starts left after a failure or a death; they do not come back.
    restarts_left: AtomicU32,
}

enum State {
    NotStarted,
    Running {
        service: Arc<RunningService<RoleClient, Client>>,
        tools: Vec<Arc<dyn Tool>>,
    },
    Down {
        reason: String,
        reported: bool,
    },
}

impl McpServers {
    /// The servers of `settings`, none started.
    pub fn new(settings: &[McpServerSettings]) -> McpServers {
        let mut seen = HashMap::new();
        let servers = settings
            .iter()
            .map(|s| {
                let mut launch = launch_of(s);
                if seen.insert(s.name.clone(), ()).is_some() {
                    launch = Launch::Invalid(format!(
                        "another server is also named {:?}; names must differ",
                        s.name
                    ));
                }
                Arc::new(Server {
                    name: s.name.clone(),
                    launch,
                    call_timeout: s
                        .timeout_secs
                        .map_or(DEFAULT_CALL_TIMEOUT, Duration::from_secs),
                    state: tokio::sync::Mutex::new(State::NotStarted),
                    status: Mutex::new(ServerStatus {
                        name: s.name.clone(),
                        state: "not started".to_owned(),
                        tools: 0,
                    }),
                    tools_changed: Arc::new(AtomicBool::new(false)),
                    restarts_left: AtomicU32::new(RESTARTS),
                })
            })
            .collect();
        McpServers { servers }
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Each server's state, as of its last use.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers
            .iter()
            .map(|s| lock(&s.status).clone())
            .collect()
    }

    /// The tools of every server that runs, starting (or restarting) servers as needed, and
    /// the notices a person should see (a server that failed, once per failure).
    pub async fn tools(&self) -> (Vec<Arc<dyn Tool>>, Vec<String>) {
        let found = futures::future::join_all(self.servers.iter().map(|s| s.clone().tools())).await;
        let mut tools = Vec::new();
        let mut notices = Vec::new();
        for (t, n) in found {
            tools.extend(t);
            notices.extend(n);
        }
        (tools, notices)
    }
}

/// `berth doctor`'s check of the config's `[[mcp_servers]]` (`None`: the config could not be
/// read): each server started, its tools listed within `timeout`, then stopped.
pub async fn doctor(
    settings: Option<&[McpServerSettings]>,
    timeout: Duration,
) -> Vec<berth_ops::doctor::Finding> {
    use berth_ops::doctor::Finding;
    let Some(settings) = settings else {
        return vec![Finding::not_run("mcp servers", "the config cannot be read")];
    };
    if settings.is_empty() {
        return vec![Finding::ok(
            "mcp servers",
            "none configured ([[mcp_servers]])",
        )];
    }
    let servers = McpServers::new(settings);
    let checks = servers.servers.iter().map(|server| async move {
        let check = format!("mcp {}", server.name);
        let fix = format!(
            "fix the [[mcp_servers]] entry named {:?} in berth's config (run its command by hand to see why it fails), or remove it",
            server.name
        );
        match tokio::time::timeout(timeout, server.clone().tools()).await {
            Err(_) => Finding::error(
                check,
                format!(
                    "it did not start and list its tools within {} s",
                    timeout.as_secs()
                ),
                fix,
            ),
            Ok((tools, _)) => {
                let status = lock(&server.status).clone();
                if status.state == "running" {
                    let mut names: Vec<String> = tools.iter().map(|t| t.spec().name).collect();
                    names.sort();
                    Finding::ok(
                        check,
                        format!("running; {} tool(s): {}", names.len(), names.join(", ")),
                    )
                } else {
                    Finding::error(check, status.state, fix)
                }
            }
        }
    });
    // Stopped when `servers` is dropped, at the end of this function.
    futures::future::join_all(checks).await
}

impl Server {
    async fn tools(self: Arc<Self>) -> (Vec<Arc<dyn Tool>>, Option<String>) {
        let mut state = self.state.lock().await;
        if let State::Running { service, .. } = &*state
            && service.is_transport_closed()
        {
            *state = State::Down {
                reason: "it stopped".to_owned(),
                reported: false,
            };
        }
        let start = match &*state {
            State::NotStarted => true,
            State::Down { .. } => self
                .restarts_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok(),
            State::Running { .. } => false,
        };
        if start {
            *state = match self.start().await {
                Ok((service, tools)) => State::Running {
                    service: Arc::new(service),
                    tools,
                },
                Err(reason) => State::Down {
                    reason,
                    reported: false,
                },
            };
        } else if let State::Running { service, tools } = &mut *state
            && self.tools_changed.swap(false, Ordering::SeqCst)
        {
            match list_tools(&self, service).await {
                Ok(fresh) => *tools = fresh,
                Err(reason) => {
                    *state = State::Down {
                        reason,
                        reported: false,
                    }
                }
            }
        }
        let mut notice = None;
        let (summary, tools) = match &mut *state {
            State::Running { tools, .. } => (("running".to_owned(), tools.len()), tools.clone()),
            State::Down {
                reason, reported, ..
            } => {
                if !*reported {
                    *reported = true;
                    notice = Some(format!(
                        "MCP server {:?} is not available, so its tools are left out: {reason}",
                        self.name
                    ));
                }
                ((format!("failed: {reason}"), 0), Vec::new())
            }
            State::NotStarted => (("not started".to_owned(), 0), Vec::new()),
        };
        {
            let mut status = lock(&self.status);
            status.state = summary.0;
            status.tools = summary.1;
        }
        (tools, notice)
    }

    /// Starts the server and lists its tools, within [`START_TIMEOUT`].
    async fn start(
        self: &Arc<Self>,
    ) -> Result<(RunningService<RoleClient, Client>, Vec<Arc<dyn Tool>>), String> {
        let client = Client {
            tools_changed: self.tools_changed.clone(),
        };
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let started = async {
            let service = match &self.launch {
                Launch::Invalid(reason) => return Err(reason.clone()),
                Launch::Stdio { command, args, env } => {
                    let mut cmd = tokio::process::Command::new(command);
                    cmd.args(args);
                    for (name, _) in std::env::vars_os() {
                        if is_secret_name(&name.to_string_lossy()) {
                            cmd.env_remove(name);
                        }
                    }
                    cmd.envs(env.iter().map(|(k, v)| (k, v)));
                    let (process, stderr) = TokioChildProcess::builder(cmd)
                        .stderr(Stdio::piped())
                        .spawn()
                        .map_err(|e| format!("cannot start {command:?}: {e}"))?;
                    if let Some(mut stderr) = stderr {
                        let tail = stderr_tail.clone();
                        tokio::spawn(async move {
                            let mut buf = [0u8; 4096];
                            while let Ok(n) = stderr.read(&mut buf).await {
                                if n == 0 {
                                    break;
                                }
                                let mut tail = lock(&tail);
                                tail.extend_from_slice(&buf[..n]);
                                let excess = tail.len().saturating_sub(STDERR_TAIL);
                                tail.drain(..excess);
                            }
                        });
                    }
                    client
                        .serve(process)
                        .await
                        .map_err(|e| format!("it did not answer initialize: {e}"))?
                }
                Launch::Http { url, headers } => {
                    let http = http_client()?;
                    let mut map = HashMap::new();
                    for (k, v) in headers {
                        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                            .map_err(|_| format!("header name {k:?} is not valid"))?;
                        let value = reqwest::header::HeaderValue::from_str(v)
                            .map_err(|_| format!("the value of header {k:?} is not valid"))?;
                        map.insert(name, value);
                    }
                    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                        .custom_headers(map);
                    let transport = StreamableHttpClientTransport::with_client(http, config);
                    client
                        .serve(transport)
                        .await
                        .map_err(|e| format!("it did not answer initialize at {url}: {e}"))?
                }
            };
            let tools = list_tools(self, &service).await?;
            Ok((service, tools))
        };
        let outcome = match tokio::time::timeout(START_TIMEOUT, started).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!(
                "it did not start within {} s",
                START_TIMEOUT.as_secs()
            )),
        };
        outcome.map_err(|reason| {
            let tail = String::from_utf8_lossy(&lock(&stderr_tail))
                .trim()
                .to_owned();
            if tail.is_empty() {
                reason
            } else {
                format!("{reason}; its stderr ends with: {tail}")
            }
        })
    }

    /// Calls `tool` on the running server.
    async fn call(&self, tool: &str, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let service = {
            let state = self.state.lock().await;
            match &*state {
                State::Running { service, .. } if !service.is_transport_closed() => service.clone(),
                _ => {
                    return Err(format!(
                        "the MCP server {:?} is not running, so {tool} did not run",
                        self.name
                    ));
                }
            }
        };
        let arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(format!(
                    "the arguments of {tool} must be a JSON object, not {other}"
                ));
            }
        };
        let mut params = CallToolRequestParams::new(Cow::Owned(tool.to_owned()));
        params.arguments = arguments;
        let called = tokio::select! {
            _ = cx.cancel.cancelled() => return Err("cancelled by the user".to_owned()),
            r = tokio::time::timeout(self.call_timeout, service.peer().call_tool(params)) => r,
        };
        let result = match called {
            Err(_) => {
                return Err(format!(
                    "the MCP server {:?} did not answer {tool} within {} s",
                    self.name,
                    self.call_timeout.as_secs()
                ));
            }
            Ok(Err(e)) => {
                if service.is_transport_closed() {
                    return Err(format!(
                        "the MCP server {:?} stopped during {tool}: {e}",
                        self.name
                    ));
                }
                return Err(format!("the MCP server {:?} failed {tool}: {e}", self.name));
            }
            Ok(Ok(result)) => result,
        };
        let mut text = Vec::new();
        for block in &result.content {
            text.push(match block {
                ContentBlock::Text(t) => t.text.clone(),
                ContentBlock::Image(i) => format!("[an image, {}]", i.mime_type),
                ContentBlock::Audio(a) => format!("[audio, {}]", a.mime_type),
                ContentBlock::Resource(r) => match &r.resource {
                    rmcp::model::ResourceContents::TextResourceContents { uri, text, .. } => {
                        format!("{uri}:\n{text}")
                    }
                    rmcp::model::ResourceContents::BlobResourceContents { uri, .. } => {
                        format!("[binary resource {uri}]")
                    }
                    #[allow(unreachable_patterns)]
                    _ => "[a resource]".to_owned(),
                },
                ContentBlock::ResourceLink(l) => format!("[resource link {}]", l.uri),
                _ => "[content of a kind berth does not show]".to_owned(),
            });
        }
        if text.is_empty()
            && let Some(structured) = &result.structured_content
        {
            text.push(structured.to_string());
        }
        let text = text.join("\n");
        if result.is_error == Some(true) {
            Err(if text.is_empty() {
                format!("{tool} failed without saying why")
            } else {
                text
            })
        } else {
            Ok(text)
        }
    }
}

/// The server's tools, as the model sees them.
async fn list_tools(
    server: &Arc<Server>,
    service: &RunningService<RoleClient, Client>,
) -> Result<Vec<Arc<dyn Tool>>, String> {
    let listed = service
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {e}"))?;
    Ok(listed
        .into_iter()
        .map(|t| {
            let read_only = t
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false);
            Arc::new(McpTool {
                server: server.clone(),
                name: t.name.to_string(),
                spec: ToolSpec {
                    name: tool_name(&server.name, &t.name),
                    description: t.description.as_deref().unwrap_or_default().to_owned(),
                    parameters: Value::Object((*t.input_schema).clone()),
                },
                read_only,
            }) as Arc<dyn Tool>
        })
        .collect())
}

/// `mcp__<server>__<tool>`, in the characters and length providers accept; a name too long
/// keeps its start and gets a short hash of the whole, so two long names stay apart.
fn tool_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let full = format!("mcp__{}__{}", clean(server), clean(tool));
    if full.len() <= MAX_TOOL_NAME {
        return full;
    }
    // FNV-1a: stable across runs and builds, which a model's transcript needs.
    let hash = format!("mcp__{server}__{tool}")
        .bytes()
        .fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
        });
    format!("{}_{:08x}", &full[..MAX_TOOL_NAME - 9], hash as u32)
}

/// A tool of an external server.
struct McpTool {
    server: Arc<Server>,
    /// The name the server knows it by.
    name: String,
    spec: ToolSpec,
    read_only: bool,
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    /// The server's `readOnlyHint` is its word that a call changes nothing; without it a
    /// call may do anything, and asks first.
    fn kind(&self) -> ToolKind {
        if self.read_only {
            ToolKind::Read
        } else {
            ToolKind::Other
        }
    }

    async fn describe(&self, arguments: &Value, _cx: &ToolContext) -> String {
        format!(
            "{} on MCP server {:?} with {}",
            self.name, self.server.name, arguments
        )
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        self.server.call(&self.name, arguments, cx).await
    }
}

/// berth's side of each connection: it only listens for tool list changes.
#[derive(Clone)]
struct Client {
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Client {
    // The handshake lifecycle: what every server of the protocol's earlier versions speaks,
    // and where `tools/list_changed` arrives as a plain notification.
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default().with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }
}

fn launch_of(s: &McpServerSettings) -> Launch {
    if s.name.is_empty()
        || s.name.len() > 32
        || !s
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Launch::Invalid(format!(
            "its name {:?} is not 1-32 letters, digits, '-' or '_'",
            s.name
        ));
    }
    match (&s.command, &s.url) {
        (Some(command), None) => Launch::Stdio {
            command: command.clone(),
            args: s.args.clone(),
            env: s
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                .collect(),
        },
        (None, Some(url)) => Launch::Http {
            url: url.clone(),
            headers: s
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                .collect(),
        },
        (Some(_), Some(_)) => {
            Launch::Invalid("it has both `command` and `url`; give one".to_owned())
        }
        (None, None) => Launch::Invalid(
            "it has neither `command` (a server on stdio) nor `url` (Streamable HTTP)".to_owned(),
        ),
    }
}

/// The HTTP client of Streamable HTTP servers: berth's TLS (ring), no overall timeout (a
/// server's event stream may stay open), a bounded connect.
fn http_client() -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_what_providers_accept() {
        assert_eq!(
            tool_name("berth", "workspace_list"),
            "mcp__berth__workspace_list"
        );
        assert_eq!(tool_name("a.b", "c d/é"), "mcp__a_b__c_d__");
        let long = tool_name("server", &"x".repeat(100));
        let other = tool_name("server", &format!("{}y", "x".repeat(99)));
        assert_eq!(long.len(), MAX_TOOL_NAME);
        assert_ne!(long, other);
        assert!(
            long.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
    }

    #[test]
    fn bad_configurations_are_reasons_not_panics() {
        let mut s = McpServerSettings {
            name: "ok".into(),
            ..Default::default()
        };
        assert!(matches!(launch_of(&s), Launch::Invalid(r) if r.contains("neither")));
        s.command = Some("x".into());
        s.url = Some("http://x".into());
        assert!(matches!(launch_of(&s), Launch::Invalid(r) if r.contains("both")));
        s.url = None;
        s.name = "../etc".into();
        assert!(matches!(launch_of(&s), Launch::Invalid(r) if r.contains("name")));
    }
}
