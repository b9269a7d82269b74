//! The `search` tool: a regular expression over the files of the working directory, the way
//! ripgrep would search it (its own regex and searcher crates, and `.gitignore` rules through
//! its `ignore` crate), but walked beneath a cap-std handle so the walk cannot leave the
//! working directory.
//!
//! The walk does not follow symlinks (as ripgrep does not); a path the model names explicitly
//! may be a symlink inside the working directory and is followed, confined. `.git` is skipped,
//! and so is whatever a `.gitignore` on the way ignores, except a path named explicitly. Hidden
//! files are searched: `.github/` and dotfiles are part of a project.

use std::io;

use async_trait::async_trait;
use berth_core::StoragePath;
use berth_core::storage_path::TEMP_PREFIX;
use cap_std::fs::{Dir, File};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use io::Read as _;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::files::{blocking, confine, cut, io_message, open_root, parse_args};
use super::{Tool, ToolContext, ToolKind, ToolOutcome};
use crate::conversation::ToolSpec;

/// The most matching lines one search returns.
pub const MAX_MATCHES: usize = 200;
/// A matching line longer than this is cut (minified files would flood the answer).
const MAX_LINE_BYTES: usize = 300;
/// A `.gitignore` larger than this is not read: no real one is.
const MAX_GITIGNORE_BYTES: u64 = 1024 * 1024;

/// `search {pattern, path?}`.
pub struct Search;

#[derive(Deserialize)]
struct SearchArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

#[async_trait]
impl Tool for Search {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "search".into(),
            description: format!(
                "Search the files of the working directory for a regular expression (Rust regex syntax, as ripgrep's; case-sensitive unless it starts with `(?i)`; a match never spans lines). Files ignored by .gitignore and the .git folder are skipped; binary files are skipped. Each result is one line: `path:line: text`. At most {MAX_MATCHES} results; narrow the pattern or the path when there are more."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "description": "The regular expression, e.g. `fn main` or `TODO|FIXME`. Escape regex characters to search for them literally (`\\(`)."
                    },
                    "path": {
                        "type": "string",
                        "description": "A folder or file to search, relative to the working directory. Default: the whole working directory."
                    }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    async fn call(&self, arguments: Value, cx: &ToolContext) -> ToolOutcome {
        let args: SearchArgs = parse_args("search", arguments)?;
        if args.pattern.is_empty() {
            return Err("the pattern is empty; give a regular expression to look for".into());
        }
        let matcher = RegexMatcherBuilder::new()
            // Lets the searcher find candidate lines fast; a match never spans lines anyway.
            .line_terminator(Some(b'\n'))
            .build(&args.pattern)
            .map_err(|e| {
                format!(
                    "{:?} is not a valid regular expression: {e}",
                    cut(&args.pattern, 200)
                )
            })?;
        let cwd = cx.cwd.clone();
        let cancel = cx.cancel.clone();
        blocking(move || {
            let path = confine(&cwd, args.path.as_deref().unwrap_or(""), true)?;
            let root = open_root(&cwd)?;
            let mut walk = Walk::new(&matcher, cancel);
            walk.run(&root, path.as_ref())?;
            Ok(walk.finish(&args.pattern, path.as_ref()))
        })
        .await
    }
}

/// One search in progress.
struct Walk<'m> {
    matcher: &'m RegexMatcher,
    searcher: Searcher,
    cancel: CancellationToken,
    /// The `.gitignore` of each folder on the way down, with the folder's path.
    ignores: Vec<(String, Gitignore)>,
    results: Vec<String>,
    files: usize,
    /// More matches existed than were kept.
    full: bool,
}

impl<'m> Walk<'m> {
    fn new(matcher: &'m RegexMatcher, cancel: CancellationToken) -> Walk<'m> {
        Walk {
            matcher,
            searcher: SearcherBuilder::new()
                .line_number(true)
                // A NUL byte says binary: stop reading that file, as ripgrep does.
                .binary_detection(BinaryDetection::quit(b'\0'))
                .build(),
            cancel,
            ignores: Vec::new(),
            results: Vec::new(),
            files: 0,
            full: false,
        }
    }

    fn run(&mut self, root: &Dir, path: Option<&StoragePath>) -> Result<(), String> {
        let Some(path) = path else {
            return self.walk_dir(root, "");
        };
        let err = |e: io::Error| io_message(path.as_str(), &e);
        // The folders above the named path contribute their .gitignore rules to what is
        // beneath it, as they would to git.
        self.load_ignore(root, "");
        let parts: Vec<&str> = path.as_str().split('/').collect();
        for end in 1..parts.len() {
            let above = parts[..end].join("/");
            if let Ok(dir) = root.open_dir(&above) {
                self.load_ignore(&dir, &above);
            }
        }
        let meta = root.metadata(path.as_path()).map_err(err)?;
        if meta.is_dir() {
            let dir = root.open_dir(path.as_path()).map_err(err)?;
            self.walk_dir(&dir, path.as_str())
        } else if meta.is_file() {
            let file = root.open(path.as_path()).map_err(err)?;
            self.search_file(file, path.as_str());
            Ok(())
        } else {
            Err(format!("'{path}' is not a file or a folder"))
        }
    }

    /// Searches the folder `dir`, at `rel` in the working directory, and everything beneath.
    fn walk_dir(&mut self, dir: &Dir, rel: &str) -> Result<(), String> {
        if self.cancel.is_cancelled() {
            return Err("cancelled".into());
        }
        let pushed = self.load_ignore(dir, rel);
        let mut entries = Vec::new();
        // A folder that cannot be read is skipped, as ripgrep skips it.
        if let Ok(list) = dir.entries() {
            for entry in list.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name == ".git" || name.starts_with(TEMP_PREFIX) {
                    continue;
                }
                if let Ok(kind) = entry.file_type() {
                    entries.push((name, kind, entry));
                }
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut outcome = Ok(());
        for (name, kind, entry) in entries {
            // Symlinks are not followed: a link elsewhere in the tree is searched there, and a
            // link out is not searched at all.
            if kind.is_symlink() {
                continue;
            }
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if self.ignored(&child, kind.is_dir()) {
                continue;
            }
            if kind.is_dir() {
                if let Ok(sub) = entry.open_dir() {
                    outcome = self.walk_dir(&sub, &child);
                }
            } else if kind.is_file() {
                if self.cancel.is_cancelled() {
                    outcome = Err("cancelled".into());
                } else if let Ok(file) = entry.open() {
                    self.search_file(file, &child);
                }
            }
            if outcome.is_err() || self.full {
                break;
            }
        }
        if pushed {
            self.ignores.pop();
        }
        outcome
    }

    /// Reads the `.gitignore` of `dir` (at `rel`), if it has one; whether one was added.
    fn load_ignore(&mut self, dir: &Dir, rel: &str) -> bool {
        let Ok(file) = dir.open(".gitignore") else {
            return false;
        };
        let mut text = String::new();
        if file
            .into_std()
            .take(MAX_GITIGNORE_BYTES)
            .read_to_string(&mut text)
            .is_err()
        {
            return false;
        }
        // Rooted at ".", the matcher takes paths relative to the .gitignore's own folder.
        let mut builder = GitignoreBuilder::new(".");
        for line in text.lines() {
            // A line that is not a valid glob is ignored, as git ignores it.
            let _ = builder.add_line(None, line);
        }
        match builder.build() {
            Ok(gi) if !gi.is_empty() => {
                self.ignores.push((rel.to_owned(), gi));
                true
            }
            _ => false,
        }
    }

    /// Whether the path `rel` is ignored: the deepest `.gitignore` with an opinion decides, as
    /// in git (a `!pattern` deeper down re-includes).
    fn ignored(&self, rel: &str, is_dir: bool) -> bool {
        for (base, gi) in self.ignores.iter().rev() {
            let sub = if base.is_empty() {
                rel
            } else {
                match rel
                    .strip_prefix(base.as_str())
                    .and_then(|r| r.strip_prefix('/'))
                {
                    Some(sub) => sub,
                    None => continue,
                }
            };
            match gi.matched(sub, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }

    fn search_file(&mut self, file: File, rel: &str) {
        self.files += 1;
        let file = file.into_std();
        let results = &mut self.results;
        let full = &mut self.full;
        // An unreadable file is skipped; so is the rest of a binary one.
        let _ = self.searcher.search_file(
            self.matcher,
            &file,
            Lossy(|number, line| {
                if results.len() >= MAX_MATCHES {
                    *full = true;
                    return Ok(false);
                }
                let line = line.trim_end_matches(['\n', '\r']);
                let shown = cut(line, MAX_LINE_BYTES);
                let more = if shown.len() < line.len() { " …" } else { "" };
                results.push(format!("{rel}:{number}: {shown}{more}"));
                Ok(true)
            }),
        );
    }

    fn finish(self, pattern: &str, path: Option<&StoragePath>) -> String {
        let where_ = path.map_or_else(|| "the working directory".to_owned(), |p| format!("'{p}'"));
        if self.results.is_empty() {
            return format!(
                "no matches for {:?} in {where_} ({} files searched; .gitignore'd files and .git are skipped)",
                cut(pattern, 200),
                self.files
            );
        }
        let mut out = self.results.join("\n");
        out.push('\n');
        if self.full {
            out.push_str(&format!(
                "[stopped at {MAX_MATCHES} matches; there are more. Narrow the pattern or search a subfolder]\n"
            ));
        }
        out
    }
}
