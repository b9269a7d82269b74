//! `edit_file`: one exact occurrence of a text replaced. An edit that would be ambiguous (the
//! text found zero or several times) changes nothing and says why, so the model can retry.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use berth_core::StoragePath;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    blocking, confine, confined_for_front_end, current_text, not_berths_own, open_root, parse_args,
    path_argument, path_property, printable, shown_arg, unified_diff, write_atomic, write_target,
};
use crate::conversation::ToolSpec;
use crate::tools::{FileChange, Preview, Tool, ToolContext, ToolKind, ToolOutcome};

/// `edit_file {path, old_text, new_text}`: replaces the one occurrence of `old_text`.
pub struct EditFile;

#[derive(Deserialize)]
struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
}

/// An edit worked out against the file as it is now.
struct Edit {
    path: StoragePath,
    /// The path written on disk (a symlink's target).
    target: StoragePath,
    /// The absolute path, for a front end.
    abs: PathBuf,
    old: String,
    new: String,
    diff: String,
}

#[async_trait]
impl Tool for EditFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit_file".into(),
            description: "Change part of a text file in the working directory: replace `old_text` with `new_text`. `old_text` must appear exactly once in the file, matched character for character (whitespace, indentation and line endings included); when it appears zero or several times nothing is changed and the error says which, so include enough surrounding lines to make it unique. Read the file first. Returns a unified diff of the change.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path_property("The file's path, relative to the working directory."),
                    "old_text": {"type": "string", "description": "The exact text to replace; it must occur exactly once in the file."},
                    "new_text": {"type": "string", "description": "The text to put in its place (may be empty to delete it)."}
                },
                "required": ["path", "old_text", "new_text"],
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
        let args: EditArgs = match parse_args("edit_file", arguments.clone()) {
            Ok(a) => a,
            Err(e) => {
                return Preview::described(e);
            }
        };
        match self.plan(args, cx).await {
            Ok(edit) => Preview {
                description: printable(&format!("edit_file '{}'\n{}", edit.path, edit.diff)),
                change: Some(FileChange {
                    path: edit.abs,
                    old: Some(edit.old),
                    new: edit.new,
                }),
            },
            Err(e) => Preview::described(format!("edit_file '{}': {e}", shown_arg(arguments))),
        }
    }

    async fn describe(&self, arguments: &Value, cx: &ToolContext) -> String {
        self.preview(arguments, cx).await.description
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let args: EditArgs = parse_args("edit_file", arguments)?;
        if let Some(files) = &cx.files {
            let edit = self.plan(args, cx).await?;
            not_berths_own(&cx.ops, &edit.path, &edit.abs)?;
            files.write(&edit.abs, &edit.new).await?;
            return Ok(format!("Edited '{}':\n{}", edit.path, edit.diff));
        }
        let (cwd, ops) = (cx.cwd.clone(), cx.ops.clone());
        blocking(move || {
            let edit = plan_edit(&cwd, &args)?;
            not_berths_own(&ops, &edit.path, &edit.abs)?;
            write_atomic(&open_root(&cwd)?, &edit.target, edit.new.as_bytes())?;
            Ok(format!("Edited '{}':\n{}", edit.path, edit.diff))
        })
        .await
    }
}

impl EditFile {
    /// The edit worked out against the file as the front end or the disk has it now.
    async fn plan(&self, args: EditArgs, cx: &ToolContext) -> Result<Edit, String> {
        check_edit(&args)?;
        if let Some(files) = &cx.files {
            let (path, abs) = confined_for_front_end(&cx.cwd, &args.path).await?;
            let old = files
                .read(&abs)
                .await?
                .ok_or_else(|| missing_for_edit(&path))?;
            let (new, diff) = apply_edit(&path, &old, &args)?;
            return Ok(Edit {
                target: path.clone(),
                path,
                abs,
                old,
                new,
                diff,
            });
        }
        let cwd = cx.cwd.clone();
        blocking(move || plan_edit(&cwd, &args)).await
    }
}

fn check_edit(args: &EditArgs) -> Result<(), String> {
    if args.old_text.is_empty() {
        return Err(
            "old_text is empty; give the exact text to replace (to create a file or replace all of it, use write_file)"
                .into(),
        );
    }
    if args.old_text == args.new_text {
        return Err("old_text and new_text are the same; there is nothing to change".into());
    }
    Ok(())
}

fn missing_for_edit(path: &StoragePath) -> String {
    format!("'{path}' does not exist; create it with write_file, or list its folder with list_dir")
}

fn plan_edit(cwd: &Path, args: &EditArgs) -> Result<Edit, String> {
    let path = confine(cwd, &args.path, false)?.ok_or("a file path is needed")?;
    check_edit(args)?;
    let root = open_root(cwd)?;
    let target = write_target(&root, &path)?;
    let old = current_text(&root, &target)?.ok_or_else(|| missing_for_edit(&path))?;
    let (new, diff) = apply_edit(&path, &old, args)?;
    Ok(Edit {
        abs: cwd.join(target.as_path()),
        path,
        target,
        old,
        new,
        diff,
    })
}

/// `old` with the one occurrence of `old_text` replaced, and the diff; or why not.
fn apply_edit(path: &StoragePath, old: &str, args: &EditArgs) -> Result<(String, String), String> {
    let found = occurrences(old, &args.old_text);
    match found.as_slice() {
        [] => {
            let mut msg = format!(
                "old_text was not found in '{path}'; nothing was changed. Read the file again and copy the text exactly, whitespace and indentation included"
            );
            if old.contains("\r\n") && !args.old_text.contains('\r') && args.old_text.contains('\n')
            {
                msg.push_str(" (the file has CRLF line endings: old_text needs \\r\\n too)");
            }
            Err(msg)
        }
        [at] => {
            let mut new = String::with_capacity(old.len() + args.new_text.len());
            new.push_str(&old[..*at]);
            new.push_str(&args.new_text);
            new.push_str(&old[at + args.old_text.len()..]);
            let diff = unified_diff(path.as_str(), old, &new);
            Ok((new, diff))
        }
        several => {
            let mut lines = String::new();
            for (i, at) in several.iter().take(10).enumerate() {
                if i > 0 {
                    lines.push_str(", ");
                }
                let _ = write!(lines, "{}", old[..*at].matches('\n').count() + 1);
            }
            if several.len() > 10 {
                lines.push_str(", …");
            }
            Err(format!(
                "old_text occurs {} times in '{path}' (at lines {lines}); nothing was changed. Include more of the surrounding text so that it occurs exactly once",
                several.len()
            ))
        }
    }
}

/// Every start of `needle` in `hay`, overlapping ones included: "aa" occurs twice in "aaa",
/// and an edit there would be ambiguous.
fn occurrences(hay: &str, needle: &str) -> Vec<usize> {
    let step = needle.chars().next().map_or(1, char::len_utf8);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = hay[from..].find(needle) {
        out.push(from + i);
        from += i + step;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_occurrences_count() {
        assert_eq!(occurrences("aaa", "aa"), [0, 1]);
        assert_eq!(occurrences("éaé", "é"), [0, 3]);
        assert!(occurrences("abc", "x").is_empty());
    }
}
