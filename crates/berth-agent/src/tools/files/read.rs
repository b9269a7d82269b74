//! `read_file`: a text file, or a range of its lines, within a size a model's context can
//! take; where the text is cut, a note says where to read on.

use std::io::{self, BufRead, BufReader, Cursor};

use async_trait::async_trait;
use berth_core::StoragePath;
use cap_std::fs::Dir;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    MAX_READ_BYTES, SNIFF_BYTES, blocking, confine, confined_for_front_end, cut, io_message,
    looks_binary, open_root, parse_args, path_argument, path_property, read_existing,
};
use crate::conversation::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolKind, ToolOutcome};

/// `read_file {path, offset?, limit?}`: a text file, or a range of its lines.
pub struct ReadFile;

#[derive(Deserialize)]
struct ReadArgs {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: format!(
                "Read a text file in the working directory. Returns the file's text as it is (no line numbers). At most {} KiB are returned at once; when the text is cut, a note at the end says which line to read on from with `offset`. Binary files are refused.",
                MAX_READ_BYTES / 1024
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path_property("The file's path, relative to the working directory (e.g. `src/main.rs`)."),
                    "offset": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "The first line to return, counting from 1. Default: 1."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "How many lines to return at most. Default: all, up to the size limit."
                    }
                },
                "required": ["path"],
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
        let args: ReadArgs = parse_args("read_file", arguments)?;
        let offset = args.offset.unwrap_or(1);
        if offset == 0 {
            return Err("offset counts lines from 1; use offset 1 for the start".into());
        }
        if args.limit == Some(0) {
            return Err("limit must be at least 1".into());
        }
        if let Some(files) = &cx.files {
            let (path, abs) = confined_for_front_end(&cx.cwd, &args.path).await?;
            let text = read_existing(files.as_ref(), &path, &abs).await?;
            let size = text.len() as u64;
            return read_lines(
                &mut Cursor::new(text.into_bytes()),
                &path,
                size,
                offset,
                args.limit,
            );
        }
        let cwd = cx.cwd.clone();
        blocking(move || {
            let path = confine(&cwd, &args.path, false)?.ok_or("a file path is needed")?;
            read_text(&open_root(&cwd)?, &path, offset, args.limit)
        })
        .await
    }
}

fn read_text(
    root: &Dir,
    path: &StoragePath,
    offset: u64,
    limit: Option<u64>,
) -> Result<String, String> {
    let err = |e: io::Error| io_message(path.as_str(), &e);
    // Checked before the open: opening a FIFO for reading would wait for a writer forever.
    let meta = root.metadata(path.as_path()).map_err(err)?;
    if meta.is_dir() {
        return Err(format!(
            "'{path}' is a folder; use list_dir to see what is in it"
        ));
    }
    if !meta.is_file() {
        return Err(format!(
            "'{path}' is not a regular file (a device, socket or pipe); read_file reads files only"
        ));
    }
    let file = root.open(path.as_path()).map_err(err)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file.into_std());
    read_lines(&mut reader, path, meta.len(), offset, limit)
}

/// The lines `offset..offset+limit` of a file's text, within [`MAX_READ_BYTES`], with a note
/// saying where to read on when they are cut. `size` is the file's length, for messages.
fn read_lines(
    reader: &mut impl BufRead,
    path: &StoragePath,
    size: u64,
    offset: u64,
    limit: Option<u64>,
) -> Result<String, String> {
    let err = |e: io::Error| io_message(path.as_str(), &e);
    let head = reader.fill_buf().map_err(err)?;
    if looks_binary(&head[..head.len().min(SNIFF_BYTES)]) {
        return Err(format!(
            "'{path}' is a binary file ({size} bytes); read_file shows text only"
        ));
    }
    if head.is_empty() {
        return Ok(format!("('{path}' is empty)"));
    }

    let mut out = String::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut last = None;
    let mut note = None;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(err)? == 0 {
            break;
        }
        number += 1;
        if number < offset {
            continue;
        }
        if limit.is_some_and(|l| number - offset >= l) {
            note = Some(format!(
                "[lines {offset}–{} shown; the file goes on: read on with offset={number}]",
                number - 1
            ));
            break;
        }
        let text = String::from_utf8_lossy(&line);
        if out.len() + text.len() > MAX_READ_BYTES {
            match last {
                // Not even one line fits (a minified file): show what fits of it.
                None => {
                    out.push_str(cut(&text, MAX_READ_BYTES));
                    note = Some(format!(
                        "[line {number} is {} bytes; only its first {} KiB are shown. Use run_command (e.g. `cut -c`) to see the rest]",
                        text.len(),
                        MAX_READ_BYTES / 1024
                    ));
                }
                Some(l) => {
                    note = Some(format!(
                        "[cut at {} KiB after line {l}; the file goes on: read on with offset={}]",
                        MAX_READ_BYTES / 1024,
                        l + 1
                    ));
                }
            }
            break;
        }
        out.push_str(&text);
        last = Some(number);
    }
    if number < offset {
        return Err(format!(
            "'{path}' has {number} lines; offset {offset} is past its end"
        ));
    }
    if let Some(note) = note {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&note);
    }
    Ok(out)
}
