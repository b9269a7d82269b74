//! The file tools: `read_file`, `write_file`, `edit_file` and `list_dir`, and the confinement
//! every tool that touches the working directory shares.
//!
//! A path from the model is text relative to the working directory. It becomes a
//! [`StoragePath`] first (no `..`, no absolute path, no NUL), then is opened by cap-std beneath
//! an open handle on the working directory, so a symlink that leads out (the file itself or any
//! folder on the way) is refused by the kernel at the moment of the open, not by a check a
//! swapped symlink could race. Paths are never handed to a shell, so a file named `-rf` is just
//! a file. `.git` is git's, not the project's: no file tool reads, lists or writes inside it.
//!
//! Writes are atomic: a temp file in the target's folder, fsync, rename over the target. A
//! symlink inside the working directory is written through (its target is replaced), so
//! editing `AGENTS.md -> CLAUDE.md` edits `CLAUDE.md` and keeps the link.

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Cursor};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use berth_confined::Unconfined;
use berth_core::StoragePath;
use berth_core::storage_path::TEMP_PREFIX;
use cap_std::fs::Dir;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{FileChange, Files, Preview, Tool, ToolContext, ToolKind, ToolOutcome};
use crate::conversation::ToolSpec;

/// The most text one `read_file` returns; past it the model is told where to read on.
pub const MAX_READ_BYTES: usize = 256 * 1024;
/// The largest file `edit_file` (and the diff of a `write_file` request) reads whole.
pub const MAX_EDIT_BYTES: u64 = 16 * 1024 * 1024;
/// The most entries `list_dir` shows.
pub const MAX_LIST_ENTRIES: usize = 1000;
/// The longest diff shown in a result or a permission request.
pub const MAX_DIFF_BYTES: usize = 64 * 1024;
/// How many leading bytes decide whether a file is binary (a NUL among them).
const SNIFF_BYTES: usize = 8 * 1024;

// ---------------------------------------------------------------------------------------------
// Shared by every tool that touches the working directory.
// ---------------------------------------------------------------------------------------------

/// The tool's arguments as `T`, or an error result that says what was expected.
pub(crate) fn parse_args<T: DeserializeOwned>(tool: &str, arguments: Value) -> Result<T, String> {
    serde_json::from_value(arguments)
        .map_err(|e| format!("invalid arguments for {tool}: {e}; see the tool's parameters"))
}

/// Validates a path from the model against the working directory `cwd`. `None` is the
/// working directory itself (empty, `.`, or `cwd` spelled out), allowed only where `root_ok`.
///
/// An absolute path is accepted when it lies inside `cwd` (models often echo the absolute
/// paths they see), and becomes relative; the open beneath the handle still decides.
pub(crate) fn confine(cwd: &Path, raw: &str, root_ok: bool) -> Result<Option<StoragePath>, String> {
    berth_confined::relative(cwd, raw, root_ok).map_err(|why| match why {
        Unconfined::Outside => format!(
            "'{}' is outside the working directory ({}); use a path relative to it",
            shown(raw),
            cwd.display()
        ),
        Unconfined::Root => format!(
            "'{}' names the working directory itself; give a file path relative to it",
            shown(raw)
        ),
        Unconfined::Unusable(rule) => {
            format!("'{}' is not a usable path: it {rule}", shown(raw))
        }
        Unconfined::Git(path) => format!(
            "'{path}' is inside .git, which the file tools do not touch; use git through run_command instead"
        ),
    })
}

/// A path as it may be echoed: bounded, one line.
fn shown(raw: &str) -> String {
    let mut s: String = raw.chars().take(200).collect();
    if raw.chars().count() > 200 {
        s.push('…');
    }
    s.escape_debug().to_string().replace("\\'", "'")
}

/// Text for a permission prompt with its control characters made visible: an escape sequence
/// or a bare carriage return in a command or a file could otherwise hide what a person is
/// asked to allow. Newlines, tabs and CRLF line ends stay as they are.
pub(crate) fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\r' if chars.peek() == Some(&'\n') => out.push(c),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// The handle every file tool opens paths beneath.
pub(crate) fn open_root(cwd: &Path) -> Result<Dir, String> {
    berth_confined::open(cwd).map_err(|e| {
        format!(
            "the working directory {} cannot be opened: {e}",
            cwd.display()
        )
    })
}

/// The absolute path under which a front end's [`Files`] is asked for `path`. What exists of
/// it on disk (the file, else the nearest folder on its way) must resolve inside the working
/// directory, as cap-std decides for the disk tools, so a symlink cannot lead the front end
/// out either; and the file must not be a folder.
fn front_end_path(cwd: &Path, path: &StoragePath) -> Result<PathBuf, String> {
    let root = open_root(cwd)?;
    let mut probe = Some(path.clone());
    while let Some(p) = probe {
        match root.metadata(p.as_path()) {
            Ok(m) if p == *path && m.is_dir() => {
                return Err(format!("'{path}' is a folder, not a file"));
            }
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => probe = p.parent(),
            Err(e) => return Err(io_message(path.as_str(), &e)),
        }
    }
    Ok(cwd.join(path.as_path()))
}

/// Confines `raw` and, with a front end's files, gives the path to ask it for.
async fn confined_for_front_end(cwd: &Path, raw: &str) -> Result<(StoragePath, PathBuf), String> {
    let cwd = cwd.to_path_buf();
    let raw = raw.to_owned();
    blocking(move || {
        let path = confine(&cwd, &raw, false)?.ok_or("a file path is needed")?;
        let abs = front_end_path(&cwd, &path)?;
        Ok((path, abs))
    })
    .await
}

/// A front end's text of a file that must exist.
async fn read_existing(
    files: &dyn Files,
    path: &StoragePath,
    abs: &Path,
) -> Result<String, String> {
    files.read(abs).await?.ok_or_else(|| {
        format!("'{path}' does not exist; list its folder with list_dir to see what does")
    })
}

/// An I/O failure at `path`, said so a model can act on it.
pub(crate) fn io_message(path: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => {
            format!("'{path}' does not exist; list its folder with list_dir to see what does")
        }
        _ if berth_confined::is_escape(e) => format!(
            "'{path}' leads outside the working directory (through a symlink); refused. Use a path relative to the working directory that stays inside it"
        ),
        io::ErrorKind::NotADirectory => format!("a parent of '{path}' is a file, not a folder"),
        io::ErrorKind::IsADirectory => format!("'{path}' is a folder; use list_dir to see it"),
        _ => format!("cannot access '{path}': {e}"),
    }
}

/// Runs blocking file work on tokio's blocking pool.
pub(crate) async fn blocking<T, F>(work: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, String> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(format!("the tool's task failed: {e}")))
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub(crate) fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A unified diff of `old` → `new` for `path`, cut (with a note) past [`MAX_DIFF_BYTES`].
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::configure()
        // A pathological pair of files must not stall a permission prompt.
        .timeout(Duration::from_secs(2))
        .diff_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    if text.len() <= MAX_DIFF_BYTES {
        return text;
    }
    format!(
        "{}\n[the diff is {} bytes; only the first {MAX_DIFF_BYTES} are shown]\n",
        cut(&text, MAX_DIFF_BYTES),
        text.len()
    )
}

/// Whether these leading bytes of a file say it is binary.
fn looks_binary(head: &[u8]) -> bool {
    head.contains(&0)
}

/// The path `path` really names for a write: a symlink inside the working directory is
/// followed (cap-std resolves it beneath the handle, refusing a way out), so the link stays and
/// its target changes.
fn write_target(root: &Dir, path: &StoragePath) -> Result<StoragePath, String> {
    let is_link = root
        .symlink_metadata(path.as_path())
        .is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        return Ok(path.clone());
    }
    let real = root
        .canonicalize(path.as_path())
        .map_err(|e| io_message(path.as_str(), &e))?;
    let real = real.to_str().ok_or_else(|| {
        format!("'{path}' is a symlink to a path that is not UTF-8; write its target directly")
    })?;
    let target = StoragePath::new(real)
        .map_err(|_| format!("'{path}' is a symlink to a path the file tools cannot write"))?;
    if target.as_str().split('/').any(|c| c == ".git") {
        return Err(format!(
            "'{path}' is a symlink into .git, which the file tools do not touch"
        ));
    }
    Ok(target)
}

fn too_large_to_edit(path: &StoragePath, size: u64) -> String {
    format!(
        "'{path}' is {size} bytes, over the limit of {MAX_EDIT_BYTES} bytes for the file tools; change it with run_command instead"
    )
}

/// The current text of a file for a write or an edit: `None` when it does not exist.
fn current_text(root: &Dir, path: &StoragePath) -> Result<Option<String>, String> {
    let meta = match root.metadata(path.as_path()) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_message(path.as_str(), &e)),
    };
    if meta.is_dir() {
        return Err(format!("'{path}' is a folder, not a file"));
    }
    if !meta.is_file() {
        return Err(format!("'{path}' is not a regular file"));
    }
    if meta.len() > MAX_EDIT_BYTES {
        return Err(too_large_to_edit(path, meta.len()));
    }
    let bytes = match berth_confined::read(root, path.as_path(), MAX_EDIT_BYTES) {
        Ok(bytes) => bytes,
        Err(berth_confined::ReadError::Io(e)) => return Err(io_message(path.as_str(), &e)),
        Err(berth_confined::ReadError::TooLarge { size, .. }) => {
            return Err(too_large_to_edit(path, size));
        }
    };
    if looks_binary(&bytes[..bytes.len().min(SNIFF_BYTES)]) {
        return Err(format!(
            "'{path}' is a binary file; the file tools change text files only"
        ));
    }
    String::from_utf8(bytes).map(Some).map_err(|_| {
        format!("'{path}' is not UTF-8 text; the file tools change UTF-8 text files only")
    })
}

/// Replaces `path` (beneath `root`) with `contents` the one way berth writes a file into a
/// folder (berth-confined): atomically and durably, creating its folders; a file that existed
/// keeps its permissions (a script stays executable).
fn write_atomic(root: &Dir, path: &StoragePath, contents: &[u8]) -> Result<(), String> {
    berth_confined::write(root, path.as_path(), contents).map_err(|e| io_message(path.as_str(), &e))
}

fn path_property(what: &str) -> Value {
    json!({"type": "string", "description": what})
}

// ---------------------------------------------------------------------------------------------
// read_file
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// write_file
// ---------------------------------------------------------------------------------------------

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
                return Preview {
                    description: e,
                    change: None,
                };
            }
        };
        let failed = |e: String| Preview {
            description: format!("write_file '{}': {e}", shown_arg(arguments)),
            change: None,
        };
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
            files.write(&abs, &args.content).await?;
            return Ok(format!(
                "Wrote '{path}' ({} bytes, {} lines)",
                args.content.len(),
                args.content.lines().count()
            ));
        }
        let cwd = cx.cwd.clone();
        blocking(move || {
            let path = confine(&cwd, &args.path, false)?.ok_or("a file path is needed")?;
            let root = open_root(&cwd)?;
            let target = write_target(&root, &path)?;
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

/// The `path` argument, for a description that could not be made.
fn shown_arg(arguments: &Value) -> String {
    arguments
        .get("path")
        .and_then(Value::as_str)
        .map(shown)
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// edit_file
// ---------------------------------------------------------------------------------------------

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
                return Preview {
                    description: e,
                    change: None,
                };
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
            Err(e) => Preview {
                description: format!("edit_file '{}': {e}", shown_arg(arguments)),
                change: None,
            },
        }
    }

    async fn describe(&self, arguments: &Value, cx: &ToolContext) -> String {
        self.preview(arguments, cx).await.description
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let args: EditArgs = parse_args("edit_file", arguments)?;
        if let Some(files) = &cx.files {
            let edit = self.plan(args, cx).await?;
            files.write(&edit.abs, &edit.new).await?;
            return Ok(format!("Edited '{}':\n{}", edit.path, edit.diff));
        }
        let cwd = cx.cwd.clone();
        blocking(move || {
            let edit = plan_edit(&cwd, &args)?;
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

// ---------------------------------------------------------------------------------------------
// list_dir
// ---------------------------------------------------------------------------------------------

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

/// The `path` argument of a file tool's call: the file of the working directory it works on.
fn path_argument(arguments: &Value) -> Option<String> {
    arguments
        .get("path")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_confined_lexically() {
        let cwd = Path::new("/work/proj");
        assert_eq!(
            confine(cwd, "src/main.rs", false)
                .unwrap()
                .unwrap()
                .as_str(),
            "src/main.rs"
        );
        assert_eq!(
            confine(cwd, "/work/proj/src/a.rs", false)
                .unwrap()
                .unwrap()
                .as_str(),
            "src/a.rs"
        );
        assert_eq!(confine(cwd, ".", true).unwrap(), None);
        assert_eq!(confine(cwd, "/work/proj", true).unwrap(), None);
        assert!(confine(cwd, ".", false).is_err());
        for bad in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "/work/proj/../x",
            "/work/projx/a",
        ] {
            let e = confine(cwd, bad, true).unwrap_err();
            assert!(e.contains("outside the working directory"), "{bad}: {e}");
        }
        assert!(confine(cwd, "a\0b", false).unwrap_err().contains("NUL"));
        assert!(
            confine(cwd, ".git/config", false)
                .unwrap_err()
                .contains(".git")
        );
        assert_eq!(confine(cwd, "-rf", false).unwrap().unwrap().as_str(), "-rf");
    }

    #[test]
    fn prompts_show_control_characters() {
        assert_eq!(printable("a\tb\r\nc\n"), "a\tb\r\nc\n");
        assert_eq!(
            printable("ls\u{1b}[2K\rrm -rf ~"),
            "ls\\u{1b}[2K\\rrm -rf ~"
        );
    }

    #[test]
    fn overlapping_occurrences_count() {
        assert_eq!(occurrences("aaa", "aa"), [0, 1]);
        assert_eq!(occurrences("éaé", "é"), [0, 3]);
        assert!(occurrences("abc", "x").is_empty());
    }
}
