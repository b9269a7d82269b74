//! The agent's tools: what a tool is to the loop, and the built-in ones. Every file tool is
//! confined to the session's working directory with berth's own path rules (a `StoragePath`,
//! then a cap-std handle on the directory: no `..`, no absolute path, no symlink out).
//!
//! Every tool declares its [`ToolKind`] (read, edit, execute, …), once: the loop asks the front
//! end before each call of a kind that changes or runs something, chat's `--allow` rules and
//! ACP's tool kinds read it, and nothing sorts tools by their names.
//!
//! A front end may bring its own reach: [`Files`] (an editor's buffers instead of the disk)
//! and [`Commands`] (an editor's terminals instead of berth's own processes). The tools keep
//! their rules either way: paths are confined the same, and a file that exists on disk must
//! resolve inside the working directory before the front end is asked for it.

pub mod background;
pub mod command;
pub mod files;
pub mod memory;
pub mod plan;
pub mod search;
pub mod skill;
pub mod storage;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
    /// The call being run (empty outside a turn): a front end's terminal shows under it.
    pub call_id: String,
    /// Where file tools read and write text; `None`: the disk.
    pub files: Option<Arc<dyn Files>>,
    /// Where `run_command` runs; `None`: berth's own child processes.
    pub commands: Option<Arc<dyn Commands>>,
    /// This call runs without the sandbox: a person allowed it once, after the sandbox
    /// refused part of it (never set where nobody is asked, as in `berth run`).
    pub unconfined: bool,
}

impl ToolContext {
    /// This context for one call.
    pub fn for_call(&self, call_id: &str) -> ToolContext {
        ToolContext {
            call_id: call_id.to_owned(),
            ..self.clone()
        }
    }

    /// A context on the disk and berth's own processes, outside any call.
    pub fn new(cwd: PathBuf, ops: Ops, session: Session, cancel: CancellationToken) -> ToolContext {
        ToolContext {
            cwd,
            ops,
            session,
            cancel,
            call_id: String::new(),
            files: None,
            commands: None,
            unconfined: false,
        }
    }
}

/// A front end's own view of text files: an editor's buffers, unsaved changes included.
/// Paths are absolute and already confined to the working directory.
#[async_trait]
pub trait Files: Send + Sync {
    /// The file's text; `None` when there is no such file.
    async fn read(&self, path: &std::path::Path) -> Result<Option<String>, String>;
    /// Creates or replaces the file with `text`.
    async fn write(&self, path: &std::path::Path, text: &str) -> Result<(), String>;
}

/// A command for a front end to run (in an editor's terminal).
#[derive(Debug, Clone)]
pub struct CommandRequest {
    /// The command line, for `sh -c`.
    pub command: String,
    pub cwd: PathBuf,
    /// Killed after this long.
    pub timeout: Duration,
    /// The tool call it runs for.
    pub call_id: String,
    /// Variables that must not reach the command (API keys, tokens): set empty where they
    /// cannot be removed.
    pub hidden_env: Vec<String>,
    /// Variables set for the command: the workspace's ports (`Ops::workspace_env`).
    pub env: Vec<(String, String)>,
}

/// What a command did.
#[derive(Debug, Clone, Default)]
pub struct CommandResult {
    /// Its output (stdout and stderr together), as much as was kept.
    pub output: String,
    pub exit_code: Option<u32>,
    pub signal: Option<String>,
    /// Whether the output was cut.
    pub truncated: bool,
}

/// A front end's way of running commands. It stops the command when `cancel` fires or the
/// timeout passes, and says so in its `Err`.
#[async_trait]
pub trait Commands: Send + Sync {
    async fn run(
        &self,
        request: CommandRequest,
        cancel: CancellationToken,
    ) -> Result<CommandResult, String>;
}

/// A file a call would change (or changed): the path (absolute), its text before (`None`: a
/// new file) and after. Front ends show it as a diff.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileChange {
    pub path: PathBuf,
    pub old: Option<String>,
    pub new: String,
}

/// What a person is asked to allow.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Preview {
    /// The command line, or the file and a diff.
    pub description: String,
    /// The file change, for tools that write one.
    pub change: Option<FileChange>,
}

impl Preview {
    /// A description alone: a tool that changes no file, or a call that cannot be read.
    pub fn described(description: impl Into<String>) -> Self {
        Preview {
            description: description.into(),
            change: None,
        }
    }
}

/// What a tool does: how front ends show its calls, and whether a call needs permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads files or data, changing nothing.
    Read,
    /// Searches files or data, changing nothing.
    Search,
    /// Only shapes the conversation (a plan), changing nothing outside it.
    Think,
    /// Creates or changes files or data.
    Edit,
    /// Removes files or data.
    Delete,
    /// Runs a command.
    Execute,
    /// Anything else: an external tool that does not say it only reads.
    Other,
}

impl ToolKind {
    /// Whether a call of this kind changes or runs something, and so waits for the front
    /// end's permission.
    pub fn needs_permission(self) -> bool {
        !matches!(self, ToolKind::Read | ToolKind::Search | ToolKind::Think)
    }

    /// The kind's name, as JSON spells it (`read`, `edit`, `execute`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Search => "search",
            ToolKind::Think => "think",
            ToolKind::Edit => "edit",
            ToolKind::Delete => "delete",
            ToolKind::Execute => "execute",
            ToolKind::Other => "other",
        }
    }
}

/// Which calls that write or run may go ahead without asking a person: the tools a person
/// named (`--allow`, an MCP client's `allow`), or all. Every front end that answers from a
/// list (`chat -p`, interactive chat's allowed tools, runs) asks this.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    tools: std::collections::HashSet<String>,
    all: bool,
}

impl Policy {
    /// The tools named (surrounding blanks trimmed, as a comma-separated flag leaves them), or
    /// every tool when `all`.
    pub fn new(tools: impl IntoIterator<Item = impl AsRef<str>>, all: bool) -> Policy {
        Policy {
            tools: tools
                .into_iter()
                .map(|t| t.as_ref().trim().to_owned())
                .collect(),
            all,
        }
    }

    /// The tools named, sorted (to keep a policy and make it again with [`Policy::new`]).
    pub fn named(&self) -> Vec<String> {
        let mut tools: Vec<String> = self.tools.iter().cloned().collect();
        tools.sort();
        tools
    }

    /// Whether every tool may run.
    pub fn allows_all(&self) -> bool {
        self.all
    }

    /// Whether the tool called `tool` may run.
    pub fn allows(&self, tool: &str) -> bool {
        self.all || self.tools.contains(tool)
    }

    /// Whether a call may run when its tool is known by name and kind (another agent's tool,
    /// over ACP): its name or its kind named, or a kind that only reads.
    pub fn allows_call(&self, tool: &str, kind: ToolKind) -> bool {
        self.allows(tool) || self.tools.contains(kind.as_str()) || !kind.needs_permission()
    }
}

/// A tool's answer for the model. `Err` is an error result (the model sees it as a failure,
/// with this message), never a success.
pub type ToolOutcome = Result<String, String>;

/// A call's answer with what berth itself knows of the call besides its text ([`Tool::run`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    pub outcome: ToolOutcome,
    /// The note berth added to the output because its sandbox refused part of what the call
    /// did (`run_command`'s [`berth_sandbox::explain`], made where berth confined the
    /// process). It is the one ground for offering to run the call once more without the
    /// sandbox; the output's text never is, since a command can print any line, a note's mark
    /// included.
    pub refused: Option<String>,
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;

    /// What the tool does. Every tool says it, so a new or renamed tool is never taken for
    /// one that only reads.
    fn kind(&self) -> ToolKind;

    /// Whether a call writes or runs something, and so needs the front end's permission: its
    /// kind's answer.
    fn needs_permission(&self) -> bool {
        self.kind().needs_permission()
    }

    /// The file of the working directory a call works on (relative, as the model gave it),
    /// for a front end that shows or follows it; `None` for calls on no such file.
    fn location(&self, _arguments: &Value) -> Option<String> {
        None
    }

    /// What a person is asked to allow: the command line, or the file and a diff of the
    /// change. Only called for tools that need permission.
    async fn describe(&self, _arguments: &Value, _cx: &ToolContext) -> String {
        String::new()
    }

    /// The description, with the file change where the tool writes one (read once, for
    /// both). Only called for tools that need permission.
    async fn preview(&self, arguments: &Value, cx: &ToolContext) -> Preview {
        Preview::described(self.describe(arguments, cx).await)
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome;

    /// [`Tool::call`], with what berth knows of the call besides its text: whether its
    /// sandbox refused part of it. The default knows of no refusal; `run_command` says what
    /// its sandbox refused. The agent loop calls this.
    async fn run(&self, arguments: Value, cx: &ToolContext) -> Ran {
        Ran {
            outcome: self.call(arguments, cx).await,
            refused: None,
        }
    }
}

/// The tools of one agent, by name.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: Vec<Arc<dyn Tool>>,
    /// Each tool's spec, in the order of `tools`: made once, when the tool is added. A spec
    /// is a JSON schema [`Tool::spec`] builds on each call, and every request of every turn
    /// carries all of them; shared, a request takes them without a copy.
    specs: Arc<[ToolSpec]>,
}

impl Toolbox {
    pub fn new() -> Toolbox {
        Toolbox::default()
    }

    /// Adds a tool; a later tool of the same name replaces the earlier one.
    pub fn with(self, tool: Arc<dyn Tool>) -> Toolbox {
        let spec = tool.spec();
        let (mut tools, mut specs): (Vec<_>, Vec<_>) = self
            .tools
            .into_iter()
            .zip(self.specs.iter().cloned())
            .filter(|(_, s)| s.name != spec.name)
            .unzip();
        tools.push(tool);
        specs.push(spec);
        Toolbox {
            tools,
            specs: specs.into(),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        let at = self.specs.iter().position(|s| s.name == name)?;
        self.tools.get(at)
    }

    pub fn specs(&self) -> Arc<[ToolSpec]> {
        self.specs.clone()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Every built-in tool: the file tools, search, run_command (with this process's environment
/// minus its secrets) and its background processes' read_background and stop_background, update_plan, remember and forget (the workspace's memory), skill, and
/// the storage tools of the session's workspace and of the session.
pub fn builtin() -> Toolbox {
    let mut tools = Toolbox::new()
        .with(Arc::new(files::ReadFile))
        .with(Arc::new(files::WriteFile))
        .with(Arc::new(files::EditFile))
        .with(Arc::new(files::ListDir))
        .with(Arc::new(search::Search))
        .with(Arc::new(command::RunCommand::new()))
        .with(Arc::new(background::ReadBackground))
        .with(Arc::new(background::StopBackground))
        .with(Arc::new(plan::UpdatePlan))
        .with(Arc::new(memory::Remember))
        .with(Arc::new(memory::Forget))
        .with(Arc::new(skill::UseSkill));
    for tool in storage::StorageTool::all() {
        tools = tools.with(Arc::new(tool));
    }
    tools
}
