//! `write_file`: a file created or replaced whole, atomically. Its permission request shows
//! the change as a diff against what the file holds now (or a note when that cannot be shown).

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    blocking, confine, confined_for_front_end, current_text, not_berths_own, open_root, parse_args,
    path_argument, path_property, printable, shown_arg, unified_diff, write_atomic, write_target,
};
use crate::conversation::ToolSpec;
use crate::tools::{FileChange, Preview, Tool, ToolContext, ToolKind, ToolOutcome};

/// `write_file {path, content}`: creates or replaces a file whole.
pub struct WriteFile;

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write_file".into(),
            description: "Create a file, or replace a file's whole content, in the working directory. Missing parent folders are created. The write is atomic: the file has either its old or its new content, never a mix. To change part of an existing file, prefer edit_file.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path_property("The file's path, relative to the working directory (e.g. `src/lib.rs`)."),
                    "content": {"type": "string", "description": "The file's complete new content."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn location(&self, arguments: &Value) -> Option<String> {
        path_argument(arguments)
    }

    async fn preview(&self, arguments: &Value, cx: &ToolContext) -> Preview {
        let args: WriteArgs = match parse_args("write_file", arguments.clone()) {
            Ok(a) => a,
            Err(e) => {
                return Preview::described(e);
            }
        };
        let failed =
            |e: String| Preview::described(format!("write_file '{}': {e}", shown_arg(arguments)));
        if let Some(files) = &cx.files {
            let (path, abs) = match confined_for_front_end(&cx.cwd, &args.path).await {
                Ok(p) => p,
                Err(e) => return failed(e),
            };
            let (what, old) = match files.read(&abs).await {
                Ok(Some(old)) => ("replace".to_owned(), Some(old)),
                Ok(None) => ("new file".to_owned(), None),
                Err(e) => (
                    format!("replace; its current content is not shown: {e}"),
                    None,
                ),
            };
            let diff = unified_diff(path.as_str(), old.as_deref().unwrap_or(""), &args.content);
            return Preview {
                description: printable(&format!("write_file '{path}' ({what})\n{diff}")),
                change: Some(FileChange {
                    path: abs,
                    old,
                    new: args.content,
                }),
            };
        }
        let cwd = cx.cwd.clone();
        blocking(move || {
            let path = confine(&cwd, &args.path, false)?.ok_or("a file path is needed")?;
            let root = open_root(&cwd)?;
            let target = write_target(&root, &path)?;
            let (what, old) = match current_text(&root, &target) {
                Ok(Some(old)) => ("replace".to_owned(), Some(old)),
                Ok(None) => ("new file".to_owned(), None),
                // A binary or huge file can still be replaced; it just cannot be diffed.
                Err(e) => (
                    format!("replace; its current content is not shown: {e}"),
                    None,
                ),
            };
            let diff = unified_diff(path.as_str(), old.as_deref().unwrap_or(""), &args.content);
            Ok(Preview {
                description: printable(&format!("write_file '{path}' ({what})\n{diff}")),
                change: Some(FileChange {
                    path: cwd.join(target.as_path()),
                    old,
                    new: args.content,
                }),
            })
        })
        .await
        .unwrap_or_else(failed)
    }

    async fn describe(&self, arguments: &Value, cx: &ToolContext) -> String {
        self.preview(arguments, cx).await.description
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let args: WriteArgs = parse_args("write_file", arguments)?;
        if let Some(files) = &cx.files {
            let (path, abs) = confined_for_front_end(&cx.cwd, &args.path).await?;
            not_berths_own(&cx.ops, &path, &abs)?;
            files.write(&abs, &args.content).await?;
            return Ok(format!(
                "Wrote '{path}' ({} bytes, {} lines)",
                args.content.len(),
                args.content.lines().count()
            ));
        }
        let (cwd, ops) = (cx.cwd.clone(), cx.ops.clone());
        blocking(move || {
            let path = confine(&cwd, &args.path, false)?.ok_or("a file path is needed")?;
            let root = open_root(&cwd)?;
            let target = write_target(&root, &path)?;
            not_berths_own(&ops, &path, &cwd.join(target.as_path()))?;
            let existed = match root.metadata(target.as_path()) {
                Ok(m) if m.is_dir() => return Err(format!("'{path}' is a folder, not a file")),
                Ok(_) => true,
                Err(_) => false,
            };
            write_atomic(&root, &target, args.content.as_bytes())?;
            Ok(format!(
                "{} '{path}' ({} bytes, {} lines)",
                if existed { "Replaced" } else { "Created" },
                args.content.len(),
                args.content.lines().count()
            ))
        })
        .await
    }
}
