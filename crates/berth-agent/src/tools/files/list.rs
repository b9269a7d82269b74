//! `list_dir`: a folder's entries, sorted, with their kind and size. Symlinks are shown, never
//! followed, and `.git` and berth's own temp files are left out.

use std::fmt::Write as _;
use std::io;
use std::path::PathBuf;

use async_trait::async_trait;
use berth_core::StoragePath;
use berth_core::storage_path::TEMP_PREFIX;
use cap_std::fs::Dir;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    MAX_LIST_ENTRIES, blocking, confine, io_message, open_root, parse_args, path_argument,
    path_property,
};
use crate::conversation::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolKind, ToolOutcome};

/// `list_dir {path?}`: a folder's entries with their kind and size.
pub struct ListDir;

#[derive(Deserialize)]
struct ListArgs {
    #[serde(default)]
    path: Option<String>,
}

#[async_trait]
impl Tool for ListDir {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_dir".into(),
            description: format!(
                "List a folder of the working directory: one entry per line, sorted by name, folders ending in `/` and files with their size; symlinks show where they point. `.git` is not shown. At most {MAX_LIST_ENTRIES} entries."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path_property("The folder, relative to the working directory. Default: the working directory itself (`.`).")
                },
                "additionalProperties": false
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn location(&self, arguments: &Value) -> Option<String> {
        path_argument(arguments)
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let args: ListArgs = parse_args("list_dir", arguments)?;
        let cwd = cx.cwd.clone();
        blocking(move || {
            let path = confine(&cwd, args.path.as_deref().unwrap_or(""), true)?;
            list(&open_root(&cwd)?, path.as_ref())
        })
        .await
    }
}

fn list(root: &Dir, path: Option<&StoragePath>) -> Result<String, String> {
    let shown = path.map_or(".", |p| p.as_str());
    let err = |e: io::Error| io_message(shown, &e);
    let entries = match path {
        None => root.entries().map_err(err)?,
        Some(p) => {
            let meta = root.metadata(p.as_path()).map_err(err)?;
            if !meta.is_dir() {
                return Err(format!(
                    "'{p}' is a file, not a folder; read it with read_file"
                ));
            }
            root.read_dir(p.as_path()).map_err(err)?
        }
    };
    let mut rows = Vec::new();
    for entry in entries {
        let entry = entry.map_err(err)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == ".git" || name.starts_with(TEMP_PREFIX) {
            continue;
        }
        // The entry's own metadata: a symlink is shown as one, never followed.
        let Ok(meta) = entry.metadata() else {
            // Removed between the listing and the look: it is gone, so it is not listed.
            continue;
        };
        let row = if meta.file_type().is_symlink() {
            let rel: PathBuf = match path {
                Some(p) => p.as_path().join(&name),
                None => PathBuf::from(&name),
            };
            match root.read_link_contents(&rel) {
                Ok(to) => format!("{name} -> {} (symlink)", to.display()),
                Err(_) => format!("{name} (symlink)"),
            }
        } else if meta.is_dir() {
            format!("{name}/")
        } else if meta.is_file() {
            format!("{name} ({} bytes)", meta.len())
        } else {
            format!("{name} (special file)")
        };
        rows.push((name, row));
    }
    if rows.is_empty() {
        return Ok(format!("('{shown}' is an empty folder)"));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let total = rows.len();
    let mut out = String::new();
    for (_, row) in rows.iter().take(MAX_LIST_ENTRIES) {
        out.push_str(row);
        out.push('\n');
    }
    if total > MAX_LIST_ENTRIES {
        let _ = writeln!(
            out,
            "[{} more entries not shown; list a subfolder, or use search]",
            total - MAX_LIST_ENTRIES
        );
    }
    Ok(out)
}
