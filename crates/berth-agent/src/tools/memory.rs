//! `remember` and `forget`: the workspace's memory (`berth_ops::memory`), dated notes every
//! later session of the workspace starts with. A tool only ever names the session's own
//! workspace.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::{parse_args, printable};
use super::{Tool, ToolContext, ToolKind, ToolOutcome};
use crate::conversation::ToolSpec;

#[derive(Deserialize)]
struct TextArgs {
    text: String,
}

async fn workspace(cx: &ToolContext) -> Result<berth_ops::Workspace, String> {
    cx.ops
        .resolve_workspace(cx.session.workspace_id.as_str())
        .await
        .map_err(|e| e.to_string())
}

/// `remember`: a dated note added to the workspace's memory.
pub struct Remember;

#[async_trait]
impl Tool for Remember {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "remember".to_owned(),
            description: "Keep a note in this workspace's memory, which every later session of the workspace starts with: a decision, a convention, a fact about the project worth not finding out again. One short line; it is dated. Not for this conversation's scratch notes.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The note, one line."}},
                "required": ["text"],
                "additionalProperties": false
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    async fn describe(&self, arguments: &Value, _cx: &ToolContext) -> String {
        match parse_args::<TextArgs>("remember", arguments.clone()) {
            Ok(a) => printable(&format!("remember: {}", a.text)),
            Err(e) => e,
        }
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let args: TextArgs = parse_args("remember", arguments)?;
        let ws = workspace(cx).await?;
        let note = cx
            .ops
            .remember(&ws, &args.text)
            .await
            .map_err(|e| e.to_string())?;
        Ok(format!("Remembered ({}): {}", note.date, note.text))
    }
}

/// `forget`: a note removed from the workspace's memory.
pub struct Forget;

#[async_trait]
impl Tool for Forget {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "forget".to_owned(),
            description: "Remove a note from this workspace's memory, when it is wrong or no longer true: give its text, or a part of it that only that note has.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The note's text, or a part only it has."}},
                "required": ["text"],
                "additionalProperties": false
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Delete
    }

    async fn describe(&self, arguments: &Value, _cx: &ToolContext) -> String {
        match parse_args::<TextArgs>("forget", arguments.clone()) {
            Ok(a) => printable(&format!("forget: {}", a.text)),
            Err(e) => e,
        }
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let args: TextArgs = parse_args("forget", arguments)?;
        let ws = workspace(cx).await?;
        let note = cx
            .ops
            .forget(&ws, &args.text)
            .await
            .map_err(|e| e.to_string())?;
        Ok(format!("Forgot ({}): {}", note.date, note.text))
    }
}
