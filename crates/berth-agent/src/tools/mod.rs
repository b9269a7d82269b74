//! The agent's tools: what a tool is to the loop, and the built-in ones. Every file tool is
//! confined to the session's working directory with berth's own path rules (a `StoragePath`,
//! then a cap-std handle on the directory: no `..`, no absolute path, no symlink out).
//!
//! Read-only tools run freely; tools that write or run commands say so with
//! [`Tool::needs_permission`], and the loop asks the front end before each call.

pub mod command;
pub mod files;
pub mod search;
pub mod storage;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use berth_ops::{Ops, Session};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::conversation::ToolSpec;

/// What a tool call can reach.
#[derive(Clone)]
pub struct ToolContext {
    /// The directory file tools and commands are confined to.
    pub cwd: PathBuf,
    pub ops: Ops,
    pub session: Session,
    /// Cancelled when the turn is: a long tool stops at once.
    pub cancel: CancellationToken,
}

/// A tool's answer for the model. `Err` is an error result (the model sees it as a failure,
/// with this message), never a success.
pub type ToolOutcome = Result<String, String>;

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;

    /// Whether a call writes or runs something, and so needs the front end's permission.
    fn needs_permission(&self) -> bool {
        false
    }

    /// What a person is asked to allow: the command line, or the file and a diff of the
    /// change. Only called for tools that need permission.
    async fn describe(&self, _arguments: &Value, _cx: &ToolContext) -> String {
        String::new()
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome;
}

/// The tools of one agent, by name.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: Vec<Arc<dyn Tool>>,
}

impl Toolbox {
    pub fn new() -> Toolbox {
        Toolbox::default()
    }

    /// Adds a tool; a later tool of the same name replaces the earlier one.
    pub fn with(mut self, tool: Arc<dyn Tool>) -> Toolbox {
        let name = tool.spec().name;
        self.tools.retain(|t| t.spec().name != name);
        self.tools.push(tool);
        self
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.spec().name == name)
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Every built-in tool: the file tools, search, run_command (with this process's environment
/// minus its secrets), and the storage tools of the session's workspace and of the session.
pub fn builtin() -> Toolbox {
    let mut tools = Toolbox::new()
        .with(Arc::new(files::ReadFile))
        .with(Arc::new(files::WriteFile))
        .with(Arc::new(files::EditFile))
        .with(Arc::new(files::ListDir))
        .with(Arc::new(search::Search))
        .with(Arc::new(command::RunCommand::new()));
    for tool in storage::StorageTool::all() {
        tools = tools.with(Arc::new(tool));
    }
    tools
}
