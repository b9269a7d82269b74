//! The storage tools: `workspace_storage_{read,write,list}` and `session_storage_{read,write,list}`,
//! berth's own storage of the session's workspace and of the session itself, reached through
//! [`berth_ops::Ops`] like every front end reaches it (its path rules, its confinement, its
//! atomic writes). A tool only ever names the session it runs in and that session's workspace:
//! the model gives a path, never an owner.

use async_trait::async_trait;
use berth_ops::{EntryKind, Owner, StorageRef};
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::{MAX_READ_BYTES, cut, parse_args, printable, unified_diff};
use super::{Tool, ToolContext, ToolKind, ToolOutcome};
use crate::conversation::ToolSpec;

/// What a storage tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageAction {
    Read,
    Write,
    List,
}

/// One storage tool: an owner (the session's workspace, or the session) and an action.
pub struct StorageTool {
    owner: Owner,
    action: StorageAction,
}

impl StorageTool {
    pub fn new(owner: Owner, action: StorageAction) -> StorageTool {
        StorageTool { owner, action }
    }

    /// The six storage tools.
    pub fn all() -> Vec<StorageTool> {
        let mut out = Vec::new();
        for owner in [Owner::Workspace, Owner::Session] {
            for action in [
                StorageAction::Read,
                StorageAction::Write,
                StorageAction::List,
            ] {
                out.push(StorageTool::new(owner, action));
            }
        }
        out
    }

    fn scope(&self) -> &'static str {
        match self.owner {
            Owner::Workspace => "workspace",
            Owner::Session => "session",
        }
    }

    fn name(&self) -> String {
        let action = match self.action {
            StorageAction::Read => "read",
            StorageAction::Write => "write",
            StorageAction::List => "list",
        };
        format!("{}_storage_{action}", self.scope())
    }

    /// The storage this tool works in, for the session of `cx`.
    async fn storage(&self, cx: &ToolContext) -> Result<StorageRef, String> {
        let identifier = match self.owner {
            Owner::Workspace => cx.session.workspace_id.as_str(),
            Owner::Session => cx.session.id.as_str(),
        };
        cx.ops
            .storage(self.owner, identifier)
            .await
            .map_err(|e| e.to_string())
    }
}

#[derive(Deserialize)]
struct PathArgs {
    #[serde(default)]
    path: Option<String>,
}

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

/// The text of a stored file, or why it is not shown.
fn as_text(path: &str, bytes: Vec<u8>) -> Result<String, String> {
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return Err(format!(
            "'{path}' is a binary file ({} bytes); the storage tools show text only",
            bytes.len()
        ));
    }
    if bytes.is_empty() {
        return Ok(format!("('{path}' is empty)"));
    }
    let text = String::from_utf8_lossy(&bytes);
    if text.len() <= MAX_READ_BYTES {
        return Ok(text.into_owned());
    }
    Ok(format!(
        "{}\n[cut at {} KiB of {} bytes]",
        cut(&text, MAX_READ_BYTES),
        MAX_READ_BYTES / 1024,
        bytes.len()
    ))
}

#[async_trait]
impl Tool for StorageTool {
    fn spec(&self) -> ToolSpec {
        let whose = match self.owner {
            Owner::Workspace => {
                "the workspace's storage: files berth keeps for this workspace outside the working directory, shared by every session of the workspace (notes, plans, decisions worth keeping; its `context.md` is added to every session's instructions)"
            }
            Owner::Session => {
                "this session's storage: files berth keeps for this session only, outside the working directory (scratch notes and plans of this conversation)"
            }
        };
        let path = |what: &str| json!({"type": "string", "description": what});
        let (description, parameters) = match self.action {
            StorageAction::Read => (
                format!("Read a text file from {whose}."),
                json!({
                    "type": "object",
                    "properties": {"path": path("The file's path in the storage, e.g. `notes/plan.md`.")},
                    "required": ["path"],
                    "additionalProperties": false
                }),
            ),
            StorageAction::Write => (
                format!(
                    "Create or replace a file whole in {whose}. Missing folders are created; the write is atomic."
                ),
                json!({
                    "type": "object",
                    "properties": {
                        "path": path("The file's path in the storage, e.g. `notes/plan.md`."),
                        "content": {"type": "string", "description": "The file's complete new content."}
                    },
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
            ),
            StorageAction::List => (
                format!("List a folder of {whose}: one entry per line, folders ending in `/`."),
                json!({
                    "type": "object",
                    "properties": {"path": path("The folder in the storage. Default: its root.")},
                    "additionalProperties": false
                }),
            ),
        };
        ToolSpec {
            name: self.name(),
            description,
            parameters,
        }
    }

    fn kind(&self) -> ToolKind {
        match self.action {
            StorageAction::Write => ToolKind::Edit,
            _ => ToolKind::Read,
        }
    }

    async fn describe(&self, arguments: &Value, cx: &ToolContext) -> String {
        let name = self.name();
        let args: WriteArgs = match parse_args(&name, arguments.clone()) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let at = match self.storage(cx).await {
            Ok(at) => at,
            Err(e) => return printable(&format!("{name} '{}': {e}", args.path)),
        };
        let (what, old) = match cx.ops.read_file(&at, &args.path).await {
            Ok(bytes) => ("replace", String::from_utf8_lossy(&bytes).into_owned()),
            Err(e) if e.is_not_found() => ("new file", String::new()),
            Err(e) => return printable(&format!("{name} '{}': {e}", args.path)),
        };
        printable(&format!(
            "{name} '{}' ({what})\n{}",
            args.path,
            unified_diff(&args.path, &old, &args.content)
        ))
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let name = self.name();
        match self.action {
            StorageAction::Read => {
                let args: PathArgs = parse_args(&name, arguments)?;
                let path = args.path.ok_or("a file path is needed")?;
                let at = self.storage(cx).await?;
                let bytes = cx
                    .ops
                    .read_file(&at, &path)
                    .await
                    .map_err(|e| e.to_string())?;
                as_text(&path, bytes)
            }
            StorageAction::Write => {
                let args: WriteArgs = parse_args(&name, arguments)?;
                let at = self.storage(cx).await?;
                let len = args.content.len();
                let path = cx
                    .ops
                    .write_file(&at, &args.path, args.content.into_bytes())
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(format!(
                    "Wrote '{path}' in {} storage ({len} bytes)",
                    self.scope()
                ))
            }
            StorageAction::List => {
                let args: PathArgs = parse_args(&name, arguments)?;
                let at = self.storage(cx).await?;
                let entries = cx
                    .ops
                    .list_files(&at, args.path.as_deref())
                    .await
                    .map_err(|e| e.to_string())?;
                if entries.is_empty() {
                    return Ok(format!("(the folder is empty in {} storage)", self.scope()));
                }
                let mut out = String::new();
                for e in entries {
                    match e.kind {
                        EntryKind::Dir => out.push_str(&format!("{}/\n", e.name)),
                        EntryKind::File => {
                            out.push_str(&format!("{} ({} bytes)\n", e.name, e.size))
                        }
                        EntryKind::Symlink => out.push_str(&format!("{} (symlink)\n", e.name)),
                    }
                }
                Ok(out)
            }
        }
    }
}
