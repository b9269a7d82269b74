//! `berth import`: a way in for people coming from the two systems berth replaces.
//!
//! - [`aptove`]: Aptove's data folder (workspaces with their uuid, name, times and provider,
//!   the one session each workspace holds, global and per-workspace config, device bindings).
//! - [`amux`]: a repository's `.amux/workspaces/`, each workspace adopted as a git workspace
//!   on its existing worktree and branch, with the files of its storage.
//!
//! Both work the same way, item by item, and report every item with its outcome, so one bad
//! folder never stops the rest:
//! - **Read-only source.** The source is opened through a cap-std handle and only read; a
//!   symlink that leads out of it is refused by the kernel, not followed.
//! - **Hostile names refused per item.** A folder whose name is not a valid id, a record whose
//!   id does not match its folder, a symlinked folder: each is refused with its reason.
//! - **Idempotent.** Ids are kept (Aptove's uuid, amux's id), so a second run finds what the
//!   first imported and says so; what berth holds differently is a conflict, and berth's is
//!   kept: nothing is overwritten.
//! - **Dry run.** Everything is planned exactly as for real, and nothing is written.
//!
//! `config_text` adds settings to a person's config file without rewriting it.

pub(crate) mod amux;
pub(crate) mod aptove;
mod config_text;

use std::path::{Path, PathBuf};

use berth_confined::ReadError;
use berth_core::storage_path::MAX_FILE_BYTES;
use berth_core::{ErrorKind, WorkspaceId, WorkspaceName};
use serde::Serialize;

use berth_ops::{Error, Result};

/// What an imported item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    Workspace,
    Session,
    Config,
    Binding,
    /// A file of a workspace's storage.
    Storage,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemKind::Workspace => "workspace",
            ItemKind::Session => "session",
            ItemKind::Config => "config",
            ItemKind::Binding => "binding",
            ItemKind::Storage => "storage",
        }
    }
}

/// What became of an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Written to berth by this run.
    Imported,
    /// A dry run: it would be written.
    WouldImport,
    /// berth already holds it, from an earlier import (or, for a setting, the same value).
    AlreadyThere,
    /// Not imported because berth has no place for it (a setting berth does not have, an empty
    /// session). Not a failure: the detail says why.
    Skipped,
    /// Not imported: berth holds something different under that id or key, and berth's is
    /// kept.
    Conflict,
    /// Not imported: refused as unsafe or invalid (a hostile name, a symlink, a folder that is
    /// not a worktree of the repository).
    Refused,
    /// Not imported: the source could not be read (a corrupt file, named with its line).
    Failed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Imported => "imported",
            Outcome::WouldImport => "would import",
            Outcome::AlreadyThere => "already there",
            Outcome::Skipped => "skipped",
            Outcome::Conflict => "conflict",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
        }
    }

    /// Whether the item failed to come in although berth could have held it.
    pub fn is_failure(self) -> bool {
        matches!(self, Outcome::Conflict | Outcome::Refused | Outcome::Failed)
    }

    /// The outcome of an item that met an error of this kind.
    fn of_error(kind: ErrorKind) -> Outcome {
        match kind {
            ErrorKind::Conflict => Outcome::Conflict,
            ErrorKind::Invalid | ErrorKind::Refused => Outcome::Refused,
            ErrorKind::NotFound
            | ErrorKind::IsFolder
            | ErrorKind::Corrupt
            | ErrorKind::External
            | ErrorKind::NotConfigured
            | ErrorKind::Io => Outcome::Failed,
        }
    }
}

/// One thing found in the source, and what became of it.
#[derive(Debug, Clone, Serialize)]
pub struct ImportItem {
    pub kind: ItemKind,
    /// What it is: a workspace's id, a session's id, a config key, a device.
    pub what: String,
    /// The berth workspace it belongs to (a workspace's own id, a session's or a setting's
    /// workspace, a binding's target); `null` for global settings.
    pub workspace: Option<String>,
    /// The file or folder it was read from.
    pub source: PathBuf,
    pub outcome: Outcome,
    /// What was done, or why not: a sentence for a person.
    pub detail: String,
    /// For a conflict, refusal or failure: the kind of error, as the CLI's exit status and
    /// MCP's errors name it.
    pub error: Option<ErrorKind>,
}

/// Everything one import found, item by item, in the order it was met.
#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    /// `aptove` or `amux`.
    pub from: &'static str,
    /// The folder read.
    pub source: PathBuf,
    pub dry_run: bool,
    pub items: Vec<ImportItem>,
}

impl ImportReport {
    fn new(from: &'static str, source: PathBuf, dry_run: bool) -> ImportReport {
        ImportReport {
            from,
            source,
            dry_run,
            items: Vec::new(),
        }
    }

    /// How many items ended with `outcome`.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.items.iter().filter(|i| i.outcome == outcome).count()
    }

    /// The kind of what did not come in, if anything: the kind of every conflict, refusal and
    /// failure when they share one, else `Io` (the CLI's "failure"). `None` when everything
    /// was imported, already there, or skipped.
    pub fn failure(&self) -> Option<ErrorKind> {
        let mut kinds = self
            .items
            .iter()
            .filter(|i| i.outcome.is_failure())
            .map(|i| i.error.unwrap_or(ErrorKind::Io));
        let first = kinds.next()?;
        Some(if kinds.all(|k| k == first) {
            first
        } else {
            ErrorKind::Io
        })
    }

    /// Adds an item; in a dry run an import is reported as one that would happen.
    fn push(&mut self, item: Item) {
        let outcome = match item.outcome {
            Outcome::Imported if self.dry_run => Outcome::WouldImport,
            o => o,
        };
        berth_ops::progress::step("importing", self.items.len() as u64 + 1, 0);
        self.items.push(ImportItem {
            kind: item.kind,
            what: item.what,
            workspace: item.workspace.map(|w| w.to_string()),
            source: item.source,
            outcome,
            detail: item.detail,
            error: item.error,
        });
    }
}

/// An item under construction: the builder methods keep each report line to one expression.
#[derive(Debug, Clone)]
struct Item {
    kind: ItemKind,
    what: String,
    workspace: Option<WorkspaceId>,
    source: PathBuf,
    outcome: Outcome,
    detail: String,
    error: Option<ErrorKind>,
}

impl Item {
    fn new(kind: ItemKind, what: impl Into<String>, source: &Path) -> Item {
        Item {
            kind,
            what: what.into(),
            workspace: None,
            source: source.to_owned(),
            outcome: Outcome::Imported,
            detail: String::new(),
            error: None,
        }
    }

    fn of(mut self, workspace: &WorkspaceId) -> Item {
        self.workspace = Some(workspace.clone());
        self
    }

    fn outcome(mut self, outcome: Outcome, detail: impl Into<String>) -> Item {
        self.outcome = outcome;
        self.detail = detail.into();
        self
    }

    /// Not imported, for the reason `error` gives; its kind decides conflict, refused or
    /// failed.
    fn error(mut self, error: &Error) -> Item {
        self.outcome = Outcome::of_error(error.kind());
        self.error = Some(error.kind());
        self.detail = error.to_string();
        self
    }

    /// Not imported, with a kind and a message of the importer's own.
    fn fail(self, kind: ErrorKind, message: impl Into<String>) -> Item {
        self.error(&Error::rule(kind, message))
    }
}

/// A name from the source as a berth workspace name, if it is a valid one that no other
/// workspace has: `claimed` holds the names this run has given out already, and `free` says
/// whether berth has the name (true when it is free, or already this workspace's). Otherwise
/// `None` and why, for the detail.
fn usable_name(
    name: &str,
    claimed: &mut std::collections::HashSet<String>,
    free: bool,
) -> std::result::Result<WorkspaceName, String> {
    let valid = WorkspaceName::new(name).map_err(|e| {
        format!(
            "its name {:?} is not a valid berth name ({}), so it is unnamed and the name is kept in its description",
            clip(name),
            e.rule
        )
    })?;
    if !free || !claimed.insert(valid.to_string()) {
        return Err(format!(
            "another workspace is already named {valid:?}, so it is unnamed and the name is kept in its description"
        ));
    }
    Ok(valid)
}

/// The description of a workspace whose name could not be used: the name, then what the
/// source's own description said.
fn description_with_name(name: &str, description: &str) -> String {
    match description {
        "" => name.to_owned(),
        d => format!("{name}: {d}"),
    }
}

/// Text from the source in a message: bounded, and on one line.
fn clip(text: &str) -> String {
    let mut shown: String = text
        .chars()
        .take(80)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().count() > 80 {
        shown.push('…');
    }
    shown
}

/// Why a source entry is refused before it is read, or `None` when its name is a valid id and
/// it is a real folder. A symlink is never followed: the tools berth imports from make real
/// folders, and one that points elsewhere could bring in anything.
fn check_entry(dir: &cap_std::fs::Dir, name: &std::ffi::OsStr) -> EntryCheck {
    let Some(text) = name.to_str() else {
        return EntryCheck::Refused(format!(
            "the folder name {:?} is not valid UTF-8, so it cannot be a workspace id",
            name
        ));
    };
    let meta = match dir.symlink_metadata(text) {
        Ok(m) => m,
        Err(e) => return EntryCheck::Failed(format!("cannot read it: {e}")),
    };
    if meta.file_type().is_symlink() {
        let target = dir
            .read_link_contents(text)
            .map(|t| format!(" (to {})", t.display()))
            .unwrap_or_default();
        return EntryCheck::Refused(format!(
            "it is a symlink{target}, not a folder; berth does not follow it, since it could lead anywhere"
        ));
    }
    if !meta.is_dir() {
        return EntryCheck::NotAFolder;
    }
    match WorkspaceId::new(text) {
        Ok(id) => EntryCheck::Folder(id),
        Err(e) => EntryCheck::Refused(format!("{e}; the folder is left alone")),
    }
}

enum EntryCheck {
    Folder(WorkspaceId),
    /// A stray file: the tools themselves skip those.
    NotAFolder,
    Refused(String),
    Failed(String),
}

/// The names in `dir`, sorted, so reports come out in the same order every time.
fn sorted_entries(dir: &cap_std::fs::Dir, path: &Path) -> Result<Vec<std::ffi::OsString>> {
    let mut names = Vec::new();
    let entries = dir
        .entries()
        .map_err(|e| berth_core::Error::io(format!("cannot list {}", path.display()), e))?;
    for entry in entries {
        let entry = entry
            .map_err(|e| berth_core::Error::io(format!("cannot list {}", path.display()), e))?;
        names.push(entry.file_name());
    }
    names.sort();
    Ok(names)
}

/// Reads a text file below `dir`, confined to it: `Ok(None)` if it does not exist; refused
/// if it leads outside (a symlink out) or is over berth's file limit, failed if it is not
/// UTF-8 or cannot be read.
fn read_text(dir: &cap_std::fs::Dir, rel: &str, shown: &Path) -> Result<Option<String>> {
    let bytes = match berth_confined::read(dir, Path::new(rel), MAX_FILE_BYTES) {
        Ok(b) => b,
        Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(ReadError::Io(e)) if berth_confined::is_escape(&e) => {
            return Err(Error::refused(format!(
                "{} leads outside the folder being imported (through a symlink); refused",
                shown.display()
            )));
        }
        Err(ReadError::Io(e)) => {
            return Err(
                berth_core::Error::io(format!("cannot read {}", shown.display()), e).into(),
            );
        }
        Err(ReadError::TooLarge { size, .. }) => {
            return Err(Error::refused(format!(
                "{} is {size} bytes, over berth's limit of {MAX_FILE_BYTES} bytes for one file; refused",
                shown.display()
            )));
        }
    };
    String::from_utf8(bytes).map(Some).map_err(|e| {
        berth_core::Error::Corrupt {
            file: shown.to_owned(),
            line: None,
            reason: format!("not valid UTF-8 (byte {})", e.utf8_error().valid_up_to()),
        }
        .into()
    })
}

/// Parses TOML from the source; a failure is `Corrupt` with the file and line.
fn parse_toml<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T> {
    toml::from_str(text).map_err(|e: toml::de::Error| {
        berth_core::Error::Corrupt {
            file: path.to_owned(),
            line: e
                .span()
                .map(|s| berth_core::error::line_of_offset(text, s.start)),
            reason: e.message().trim().to_owned(),
        }
        .into()
    })
}

/// Refuses a berth home inside the source folder: the import would write into what it only
/// reads.
fn check_home_outside(home: &Path, source: &Path) -> Result<()> {
    if let (Ok(home), Ok(source)) = (home.canonicalize(), source.canonicalize())
        && home.starts_with(&source)
    {
        return Err(Error::invalid(format!(
            "the berth home {} is inside {}, which an import only reads; use a home elsewhere (--home or BERTH_HOME)",
            home.display(),
            source.display()
        )));
    }
    Ok(())
}

/// Opens the source folder for reading only, confined: no path read beneath it leaves it.
fn open_source(path: &Path) -> Result<cap_std::fs::Dir> {
    berth_confined::open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::rule(
                ErrorKind::NotFound,
                format!("there is no folder {}", path.display()),
            )
        } else {
            berth_core::Error::io(format!("cannot open {}", path.display()), e).into()
        }
    })
}
