//! A workspace's memory: dated notes its agents keep across sessions, in `memory/MEMORY.md`
//! of the workspace's folder, a Markdown file a person can read and edit. Each note is a list
//! item, `- YYYY-MM-DD: text`; any other line is the person's, kept as it is. Every change is
//! read, changed and written atomically under `memory/.lock`, so two processes never lose
//! each other's notes. Every new turn starts with the newest notes in its instructions,
//! within a bound.

use std::fs::File;
use std::path::{Path, PathBuf};

use berth_core::Workspace;
use chrono::{NaiveDate, Utc};
use serde::Serialize;

use crate::Ops;
use crate::error::{Error, Result, blocking};

/// The memory file, in the workspace's folder.
const FILE: &str = "memory/MEMORY.md";

/// A note's text is one line of at most this many characters.
pub const MAX_NOTE_CHARS: usize = 1000;

/// One note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub date: NaiveDate,
    pub text: String,
}

/// A workspace's memory as it is now.
#[derive(Debug, Clone, Serialize)]
pub struct Memory {
    pub path: PathBuf,
    /// Oldest first, as the file has them.
    pub notes: Vec<Note>,
    /// The file as it is, the person's own lines too; empty when there is none.
    #[serde(skip)]
    pub text: String,
}

impl Memory {
    /// The newest notes whose lines fit in `bound` characters, oldest first, as instructions
    /// show them; how many older ones were left out.
    pub fn newest(&self, bound: usize) -> (Vec<&Note>, usize) {
        let mut used = 0;
        let mut kept: Vec<&Note> = Vec::new();
        for note in self.notes.iter().rev() {
            let cost = note.text.chars().count() + 14;
            if used + cost > bound {
                break;
            }
            used += cost;
            kept.push(note);
        }
        kept.reverse();
        let left_out = self.notes.len() - kept.len();
        (kept, left_out)
    }
}

fn parse(text: &str) -> Vec<Note> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("- ")?;
            let (date, text) = rest.split_once(": ")?;
            Some(Note {
                date: NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?,
                text: text.trim().to_owned(),
            })
        })
        .collect()
}

fn note_line(note: &Note) -> String {
    format!("- {}: {}", note.date.format("%Y-%m-%d"), note.text)
}

impl Ops {
    fn memory_path(&self, ws: &Workspace) -> Result<PathBuf> {
        let dir = self
            .manager
            .workspaces()
            .workspace_dir(&ws.id)
            .ok_or_else(|| {
                Error::refused(format!(
                    "workspace {} has no folder in this store, so it has no memory",
                    ws.label()
                ))
            })?;
        Ok(dir.join(FILE))
    }

    /// The workspace's memory; empty when nothing was remembered yet. Read on the caller's
    /// thread: a small file of one-line notes that every turn reads, where a trip through the
    /// blocking pool would cost each turn two thread switches.
    pub async fn memory(&self, ws: &Workspace) -> Result<Memory> {
        let path = self.memory_path(ws)?;
        let text = read(&path)?;
        Ok(Memory {
            notes: parse(&text),
            path,
            text,
        })
    }

    /// Adds a note dated today; its text is made one line.
    pub async fn remember(&self, ws: &Workspace, text: &str) -> Result<Note> {
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() {
            return Err(Error::invalid(
                "there is nothing to remember: the text is empty",
            ));
        }
        if text.chars().count() > MAX_NOTE_CHARS {
            return Err(Error::invalid(format!(
                "a note is at most {MAX_NOTE_CHARS} characters; keep the gist"
            )));
        }
        let note = Note {
            date: Utc::now().date_naive(),
            text,
        };
        let path = self.memory_path(ws)?;
        let line = note_line(&note);
        blocking(move || {
            change(&path, |text| {
                let mut text = text.to_owned();
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                if text.is_empty() {
                    text.push_str("# Memory\n\n");
                }
                text.push_str(&line);
                text.push('\n');
                Ok(text)
            })
        })
        .await?;
        Ok(note)
    }

    /// Removes the note whose text is `text`, or the one note that contains it.
    pub async fn forget(&self, ws: &Workspace, text: &str) -> Result<Note> {
        let path = self.memory_path(ws)?;
        let wanted = text.trim().to_owned();
        if wanted.is_empty() {
            return Err(Error::invalid(
                "name the note to forget: its text, or a part of it",
            ));
        }
        blocking(move || {
            let mut gone = None;
            change(&path, |current| {
                let notes = parse(current);
                let exact: Vec<&Note> = notes.iter().filter(|n| n.text == wanted).collect();
                let found: Vec<&Note> = match exact.len() {
                    0 => notes.iter().filter(|n| n.text.contains(&wanted)).collect(),
                    _ => exact,
                };
                let note = match found.as_slice() {
                    [one] => (*one).clone(),
                    [] => {
                        return Err(Error::rule(
                            crate::ErrorKind::NotFound,
                            format!("no note of the memory says {wanted:?}"),
                        ));
                    }
                    many => {
                        return Err(Error::invalid(format!(
                            "{} notes say {wanted:?}; give more of the one to forget: {}",
                            many.len(),
                            many.iter()
                                .map(|n| format!("{:?}", n.text))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )));
                    }
                };
                let line = note_line(&note);
                let mut removed = false;
                let kept: Vec<&str> = current
                    .lines()
                    .filter(|l| {
                        if !removed && parse(l).first() == Some(&note) && l.trim_end() == line {
                            removed = true;
                            return false;
                        }
                        true
                    })
                    .collect();
                gone = Some(note);
                Ok(kept.join("\n") + "\n")
            })?;
            Ok(gone.expect("a note was removed"))
        })
        .await
    }

    /// The memory file, made (with its title) when there is none yet: for a person to edit.
    pub async fn memory_file(&self, ws: &Workspace) -> Result<PathBuf> {
        let path = self.memory_path(ws)?;
        let made = path.clone();
        blocking(move || {
            change(&made, |text| {
                Ok(match text {
                    "" => "# Memory\n\n".to_owned(),
                    t => t.to_owned(),
                })
            })
        })
        .await?;
        Ok(path)
    }

    /// Forgets every note; the person's own lines go too (the file is removed).
    pub async fn clear_memory(&self, ws: &Workspace) -> Result<()> {
        let path = self.memory_path(ws)?;
        blocking(move || {
            let _lock = lock(&path)?;
            match std::fs::remove_file(&path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io(&path, e)),
            }
        })
        .await
    }
}

/// The person's own memory for every workspace, `$XDG_CONFIG_HOME/berth/memory.md` (else
/// `~/.config/berth/memory.md`): read into every turn, never written by an agent. Its path
/// and text; `None` when there is no such file (or no home to look in).
pub fn user_memory() -> Result<Option<(PathBuf, String)>> {
    let Some(config) = crate::skills::user_config_dir() else {
        return Ok(None);
    };
    let path = config.join("berth").join("memory.md");
    let text = read(&path)?;
    Ok((!text.trim().is_empty()).then_some((path, text)))
}

/// The end of `text` within `bound` characters, cut at a line: the newest lines of a file
/// kept oldest first.
pub fn tail(text: &str, bound: usize) -> &str {
    let count = text.chars().count();
    if count <= bound {
        return text;
    }
    let (cut, _) = text.char_indices().nth(count - bound).unwrap_or((0, ' '));
    // A cut at the start of a line keeps it; one inside a line drops the rest of that line.
    if text[..cut].ends_with('\n') {
        return &text[cut..];
    }
    match text[cut..].find('\n') {
        Some(line) => &text[cut + line + 1..],
        None => &text[cut..],
    }
}

/// The memory file's text, empty when there is none. A person edits it: what is not a file
/// (a FIFO would hold the async thread a turn's setup reads it on) or not UTF-8 is an error.
fn read(path: &Path) -> Result<String> {
    match berth_store_fs::durable::read_file(path) {
        Ok(Some(bytes)) => String::from_utf8(bytes).map_err(|e| {
            io(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
            )
        }),
        Ok(None) => Ok(String::new()),
        Err(e) => Err(io(path, e)),
    }
}

/// Reads, changes and writes the file atomically, under its lock.
fn change(path: &Path, edit: impl FnOnce(&str) -> Result<String>) -> Result<()> {
    let _lock = lock(path)?;
    let text = edit(&read(path)?)?;
    berth_store_fs::durable::write_atomic(path, text.as_bytes()).map_err(|e| io(path, e))
}

fn lock(path: &Path) -> Result<File> {
    let dir = path.parent().expect("the memory file is in a folder");
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let lock_path = dir.join(".lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| io(&lock_path, e))?;
    file.lock().map_err(|e| io(&lock_path, e))?;
    Ok(file)
}

fn io(path: &Path, e: std::io::Error) -> Error {
    berth_core::Error::io(format!("the memory at {}", path.display()), e).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_whole_newest_lines() {
        assert_eq!(tail("a\nbb\nccc\n", 100), "a\nbb\nccc\n");
        assert_eq!(tail("a\nbb\nccc\n", 5), "ccc\n");
        assert_eq!(
            tail("a\nbb\nccc\n", 4),
            "ccc\n",
            "a cut at a line's start keeps it"
        );
        assert_eq!(tail("a\nbb\nccc\n", 3), "", "no whole line fits");
    }

    #[test]
    fn notes_are_read_from_list_items_and_the_newest_fit_the_bound() {
        let text = "# Memory\n\nA person's line.\n- 2026-01-02: first\n- not a date: skipped\n- 2026-01-03: second\n";
        let notes = parse(text);
        assert_eq!(
            notes.iter().map(|n| n.text.as_str()).collect::<Vec<_>>(),
            ["first", "second"]
        );
        let memory = Memory {
            path: PathBuf::new(),
            notes,
            text: text.to_owned(),
        };
        let (kept, left_out) = memory.newest(20);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].text, "second");
        assert_eq!(left_out, 1);
    }
}
