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
//!
//! Each tool is a module of its own (`read`, `write`, `edit`, `list`); what they and the other
//! tools share is here.

mod edit;
mod list;
mod read;
mod write;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_confined::Unconfined;
use berth_core::StoragePath;
use cap_std::fs::Dir;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use edit::EditFile;
pub use list::ListDir;
pub use read::ReadFile;
pub use write::WriteFile;

use super::Files;

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

/// Text for a permission prompt with its control characters made visible (berth-core's
/// `shown`): an escape sequence, a bare carriage return or a bidi override in a command or a
/// file could otherwise hide what a person is asked to allow. Newlines, tabs and CRLF line
/// ends stay as they are.
pub(crate) fn printable(text: &str) -> String {
    berth_core::shown::visible(text, berth_core::shown::Form::Lines).into_owned()
}

/// Refuses a write that would land in berth's own files ([`berth_ops::Ops::berths_own_entry`]):
/// a plain workspace's folder keeps berth's record, config layer and sessions beside the work,
/// and berth obeys them when it reads them back. `abs` is where the write lands, symlinks and
/// all; `path` is how the model named it.
fn not_berths_own(ops: &berth_ops::Ops, path: &StoragePath, abs: &Path) -> Result<(), String> {
    match ops.berths_own_entry(abs) {
        None => Ok(()),
        Some(entry) => Err(format!(
            "'{path}' is berth's own ({}): this workspace's folder keeps berth's record, config and sessions beside the work, and the file tools do not change them; ask the person to, if it must change",
            entry.display()
        )),
    }
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

/// The `path` argument, for a description that could not be made.
fn shown_arg(arguments: &Value) -> String {
    arguments
        .get("path")
        .and_then(Value::as_str)
        .map(shown)
        .unwrap_or_default()
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
            "ls\\x1b[2K\\x0drm -rf ~"
        );
        assert_eq!(
            printable("rm -rf ~ #\u{202e}txt.sh"),
            "rm -rf ~ #\\u{202e}txt.sh"
        );
    }
}
