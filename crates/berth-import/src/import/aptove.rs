//! `berth import aptove`: Aptove's data folder into berth.
//!
//! Aptove (agent-storage-fs) keeps, under `<data_dir>/Aptove` (`~/.local/share/Aptove` on
//! Linux, `~/Library/Application Support/Aptove` on macOS, `%LOCALAPPDATA%\Aptove` on
//! Windows):
//!
//! ```text
//! config.toml                   the global config: provider, [providers.X], [agent], …
//! bindings.toml                 [bindings] "<device>" = "<workspace uuid>"
//! workspaces/<uuid>/
//!   workspace.toml              uuid, name, created_at, last_accessed (RFC 3339), provider
//!   config.toml                 the workspace's overrides
//!   session.md                  the workspace's one session: a frontmatter (provider, model,
//!                               created_at), then "## User" / "## Assistant" blocks
//! ```
//!
//! What becomes what:
//! - A workspace keeps its uuid as its berth id, its created and last-used times, and its
//!   name when that is a valid, free berth name (else the name goes into the description).
//!   Aptove's `default` workspace and berth's mean the same thing; if berth already has its own,
//!   Aptove's default session and settings go into it.
//! - `workspace.toml`'s provider becomes the workspace's `provider` setting: in Aptove it wins
//!   over the workspace's config, and in berth the workspace's config is where it lives.
//! - Settings berth has under the same names (`provider`, `[providers.X]` `api_key`, `model`,
//!   `base_url`, `[agent] max_tool_iterations`) are added to berth's global or workspace config
//!   file; the rest is reported as skipped, with why. A setting berth already has with another
//!   value is a conflict: berth's is kept.
//! - `session.md` becomes a session of its workspace, read with berth's transcript parser.
//! - Each binding, when its workspace came in.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use berth_core::config::{ConfigText, ProviderKind};
use berth_core::{
    DeviceId, ErrorKind, Message, NewSession, NewWorkspace, Role, SessionId, WorkspaceId,
    WorkspaceName,
};
use cap_std::fs::Dir;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::config_text::{self, Setting};
use super::{
    EntryCheck, ImportReport, Item, ItemKind, Outcome, check_entry, check_home_outside, clip,
    description_with_name, open_source, parse_toml, read_text, sorted_entries, usable_name,
};
use berth_ops::{Error, Ops, Result};

/// Aptove's data folder on this machine: `dirs::data_local_dir()` joined with `Aptove`, as
/// Aptove's own `AgentConfig::data_dir` finds it.
pub fn default_dir() -> Option<PathBuf> {
    dirs::data_local_dir().map(|d| d.join("Aptove"))
}

/// The comment above every line this import adds to a config file.
const NOTE: &str = "imported from Aptove by `berth import aptove`";

/// `workspace.toml`, exactly as Aptove's `WorkspaceToml` writes it.
#[derive(Deserialize)]
struct WorkspaceToml {
    uuid: String,
    #[serde(default)]
    name: Option<String>,
    created_at: String,
    last_accessed: String,
    #[serde(default)]
    provider: Option<String>,
}

/// `bindings.toml`, as Aptove's `BindingsFile` writes it.
#[derive(Deserialize)]
struct BindingsToml {
    #[serde(default)]
    bindings: BTreeMap<String, String>,
}

/// Settings read from one Aptove config file (or `workspace.toml`'s provider), and what was
/// left out.
#[derive(Default)]
struct Mapped {
    settings: Vec<(Setting, PathBuf)>,
    /// Key, why it is not imported, the file it was in.
    skipped: Vec<(String, String, PathBuf)>,
}

/// Where settings go: berth's global config, or a workspace's.
#[derive(Clone)]
enum Target {
    Global,
    /// The workspace, and whether berth has it yet (a dry run has not made it).
    Workspace(WorkspaceId, bool),
}

/// Imports Aptove's data folder `dir` (default: Aptove's own, see [`default_dir`]) into the home
/// `ops` opened, item by item; with `dry_run` nothing is written. The source is only read.
/// Fails as a whole only when `dir` cannot be read or is not an Aptove folder; anything wrong
/// with one item is reported on that item and the rest go on.
pub async fn import_aptove(ops: &Ops, dir: Option<&Path>, dry_run: bool) -> Result<ImportReport> {
    let dir = match dir {
        Some(d) => std::path::absolute(d)
            .map_err(|e| berth_core::Error::io(format!("cannot use {}", d.display()), e))?,
        None => default_dir().ok_or_else(|| {
            Error::invalid(
                "cannot find the platform data folder where Aptove keeps its data; pass the folder: berth import aptove DIR",
            )
        })?,
    };
    let root = open_source(&dir).map_err(|e| match e.kind() {
        ErrorKind::NotFound => Error::rule(
            ErrorKind::NotFound,
            format!(
                "there is no Aptove data folder at {}; pass the folder Aptove uses: berth import aptove DIR",
                dir.display()
            ),
        ),
        _ => e,
    })?;
    check_home_outside(ops.home(), &dir)?;
    let marks = ["workspaces", "config.toml", "bindings.toml"];
    if !marks.iter().any(|m| root.symlink_metadata(m).is_ok()) {
        return Err(Error::invalid(format!(
            "{} does not look like Aptove's data folder: it has no workspaces/, config.toml or bindings.toml",
            dir.display()
        )));
    }
    let mut run = Import {
        ops,
        root,
        report: ImportReport::new("aptove", dir.clone(), dry_run),
        dir,
        claimed: HashSet::new(),
        seen: HashSet::new(),
        imported: HashSet::new(),
        aptove_provider: None,
    };
    run.global_config().await;
    run.workspaces().await?;
    run.bindings().await;
    Ok(run.report)
}

/// One run of the import.
struct Import<'a> {
    ops: &'a Ops,
    root: Dir,
    dir: PathBuf,
    report: ImportReport,
    /// Names given to workspaces by this run (or theirs from an earlier one).
    claimed: HashSet<String>,
    /// Aptove workspaces found (valid ids), whether imported or not.
    seen: HashSet<WorkspaceId>,
    /// Aptove workspaces that berth holds after this run (or would, in a dry run).
    imported: HashSet<WorkspaceId>,
    /// The global config's provider, for a session whose frontmatter names none berth knows.
    aptove_provider: Option<ProviderKind>,
}

impl Import<'_> {
    fn dry_run(&self) -> bool {
        self.report.dry_run
    }

    async fn global_config(&mut self) {
        let file = self.dir.join("config.toml");
        let table = match read_toml_table(&self.root, "config.toml", &file) {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                self.report
                    .push(Item::new(ItemKind::Config, "config.toml", &file).error(&e));
                return;
            }
        };
        self.aptove_provider = table
            .get("provider")
            .and_then(|p| p.as_str())
            .and_then(|p| ProviderKind::from_str(p).ok());
        let mapped = map_config(&table, &file, false);
        self.settings(Target::Global, mapped).await;
    }

    async fn workspaces(&mut self) -> Result<()> {
        let folder = self.dir.join("workspaces");
        let dir = match self.root.open_dir("workspaces") {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                let why = if e.to_string().contains("outside") {
                    "it leads outside the folder being imported (through a symlink); refused"
                        .to_owned()
                } else {
                    format!("cannot open it: {e}")
                };
                self.report.push(
                    Item::new(ItemKind::Workspace, "workspaces/", &folder)
                        .fail(ErrorKind::Refused, why),
                );
                return Ok(());
            }
        };
        for name in sorted_entries(&dir, &folder)? {
            let shown = folder.join(&name);
            let what = name.to_string_lossy().into_owned();
            // Found, whatever becomes of it: a binding to it is then refused, not stale.
            if let Ok(id) = WorkspaceId::new(what.as_str()) {
                self.seen.insert(id);
            }
            match check_entry(&dir, &name) {
                EntryCheck::NotAFolder => {}
                EntryCheck::Refused(why) => self.report.push(
                    Item::new(ItemKind::Workspace, clip(&what), &shown)
                        .fail(ErrorKind::Refused, why),
                ),
                EntryCheck::Failed(why) => self.report.push(
                    Item::new(ItemKind::Workspace, clip(&what), &shown).fail(ErrorKind::Io, why),
                ),
                EntryCheck::Folder(id) => self.workspace(&dir, id, shown).await,
            }
        }
        Ok(())
    }

    /// One workspace folder: its record, then its settings and its session.
    async fn workspace(&mut self, parent: &Dir, id: WorkspaceId, folder: PathBuf) {
        let item = Item::new(ItemKind::Workspace, id.as_str(), &folder).of(&id);
        let dir = match parent.open_dir(id.as_str()) {
            Ok(d) => d,
            Err(e) => {
                let e = berth_core::Error::io(format!("cannot open {}", folder.display()), e);
                self.report.push(item.error(&e.into()));
                return;
            }
        };
        let file = folder.join("workspace.toml");
        let meta: WorkspaceToml = match read_text(&dir, "workspace.toml", &file) {
            Ok(Some(text)) => match parse_toml(&file, &text) {
                Ok(meta) => meta,
                Err(e) => return self.report.push(item.error(&e)),
            },
            Ok(None) => {
                return self.report.push(item.fail(
                    ErrorKind::Corrupt,
                    format!(
                        "{} has no workspace.toml (Aptove skips such a folder too)",
                        folder.display()
                    ),
                ));
            }
            Err(e) => return self.report.push(item.error(&e)),
        };
        if meta.uuid != id.as_str() {
            return self.report.push(item.fail(
                ErrorKind::Refused,
                format!(
                    "its uuid {:?} in {} does not match its folder name; refused, since the uuid would become its berth id",
                    clip(&meta.uuid),
                    file.display()
                ),
            ));
        }
        let (created, accessed) = match (
            time(&meta.created_at, "created_at", &file),
            time(&meta.last_accessed, "last_accessed", &file),
        ) {
            (Ok(c), Ok(a)) => (c, a),
            (Err(e), _) | (_, Err(e)) => return self.report.push(item.error(&e)),
        };
        let store = self.ops.manager().workspaces();
        let in_berth = match store.load(&id).await {
            Ok(ws) if ws.created_at == created => {
                if let Some(n) = &ws.name {
                    self.claimed.insert(n.to_string());
                }
                let mut detail = format!("workspace {} was imported before", ws.label());
                // Used in Aptove since (or an earlier import stopped before recording the
                // time): the later use counts. Times never move backwards.
                if accessed > ws.last_accessed {
                    if !self.dry_run()
                        && let Err(e) = store.update_accessed(&id, accessed).await
                    {
                        return self.report.push(item.error(&e.into()));
                    }
                    detail.push_str(&format!(
                        "; its last use moves to Aptove's, {}",
                        accessed.to_rfc3339()
                    ));
                }
                self.report
                    .push(item.outcome(Outcome::AlreadyThere, detail));
                true
            }
            Ok(_) if id.is_default() => {
                self.report.push(item.outcome(
                    Outcome::AlreadyThere,
                    "berth's own default workspace is kept; Aptove's default session and settings go into it",
                ));
                true
            }
            Ok(ws) => {
                return self.report.push(item.fail(
                    ErrorKind::Conflict,
                    format!(
                        "berth already has a workspace {} with this id, created {}; it is kept, and this Aptove workspace (with its session, settings and bindings) is not imported",
                        ws.label(),
                        ws.created_at.to_rfc3339()
                    ),
                ));
            }
            Err(e) if e.is_not_found() => {
                match self.create_workspace(&id, &meta, created, accessed).await {
                    Ok(detail) => self.report.push(item.outcome(Outcome::Imported, detail)),
                    Err(e) => return self.report.push(item.error(&e)),
                }
                !self.dry_run()
            }
            Err(e) => return self.report.push(item.error(&e.into())),
        };
        self.imported.insert(id.clone());
        self.workspace_settings(&dir, &id, &folder, &meta, in_berth)
            .await;
        self.session(&dir, &id, &folder, &meta, created, in_berth)
            .await;
    }

    /// Creates the workspace record with Aptove's times (unless this is a dry run); returns
    /// what to tell the person.
    async fn create_workspace(
        &mut self,
        id: &WorkspaceId,
        meta: &WorkspaceToml,
        created: DateTime<Utc>,
        accessed: DateTime<Utc>,
    ) -> Result<String> {
        let store = self.ops.manager().workspaces();
        let mut detail = format!(
            "created {}, last used {}",
            created.to_rfc3339(),
            accessed.to_rfc3339()
        );
        let (name, description) = match &meta.name {
            None => (None, String::new()),
            Some(n) => {
                let free = match WorkspaceName::new(n.as_str()) {
                    Ok(valid) => {
                        matches!(store.load_by_name(&valid).await, Err(e) if e.is_not_found())
                    }
                    Err(_) => true,
                };
                match usable_name(n, &mut self.claimed, free) {
                    Ok(valid) => (Some(valid), String::new()),
                    Err(why) => {
                        detail.push_str("; ");
                        detail.push_str(&why);
                        (None, description_with_name(n, ""))
                    }
                }
            }
        };
        if let Some(n) = &name {
            detail = format!("named {n}, {detail}");
        }
        if self.dry_run() {
            return Ok(detail);
        }
        let new = NewWorkspace {
            id: Some(id.clone()),
            name,
            description,
            agent_id: None,
            git: None,
            // Given on first use, as every new workspace's.
            ports: None,
        };
        // The store stamps both times with the moment it is given; the last use then moves
        // forward to Aptove's (it never moves backwards), so no store API is needed for times.
        store.create(new, created).await?;
        store.update_accessed(id, accessed).await?;
        Ok(detail)
    }

    /// The workspace's own config and `workspace.toml`'s provider into berth's workspace
    /// config.
    async fn workspace_settings(
        &mut self,
        dir: &Dir,
        id: &WorkspaceId,
        folder: &Path,
        meta: &WorkspaceToml,
        in_berth: bool,
    ) {
        let file = folder.join("config.toml");
        let mut mapped = match read_toml_table(dir, "config.toml", &file) {
            Ok(Some(table)) => map_config(&table, &file, true),
            Ok(None) => Mapped::default(),
            Err(e) => {
                self.report.push(
                    Item::new(ItemKind::Config, "config.toml", &file)
                        .of(id)
                        .error(&e),
                );
                Mapped::default()
            }
        };
        if let Some(p) = &meta.provider {
            let meta_file = folder.join("workspace.toml");
            match ProviderKind::from_str(p) {
                Ok(kind) => {
                    let setting = Setting {
                        path: vec!["provider".to_owned()],
                        value: toml::Value::String(kind.as_str().to_owned()),
                    };
                    // In Aptove the workspace's provider wins over its config's.
                    if let Some(at) = mapped
                        .settings
                        .iter()
                        .position(|(s, _)| s.path == setting.path)
                    {
                        let (overridden, file) = mapped.settings.remove(at);
                        if overridden.value != setting.value {
                            mapped.skipped.push((
                                "provider".to_owned(),
                                format!(
                                    "overridden by workspace.toml's provider {}, as in Aptove",
                                    kind.as_str()
                                ),
                                file,
                            ));
                        }
                    }
                    mapped.settings.insert(0, (setting, meta_file));
                }
                Err(e) => mapped
                    .skipped
                    .push(("provider".to_owned(), e.to_string(), meta_file)),
            }
        }
        self.settings(Target::Workspace(id.clone(), in_berth), mapped)
            .await;
    }

    /// Adds `mapped` settings to berth's config file for `target`, reporting each: already
    /// there, a conflict (berth's value is kept), or added. Nothing is written in a dry run.
    async fn settings(&mut self, target: Target, mapped: Mapped) {
        let workspace = match &target {
            Target::Workspace(id, _) => Some(id.clone()),
            Target::Global => None,
        };
        let item = |key: &str, source: &Path| {
            let item = Item::new(ItemKind::Config, key, source);
            match &workspace {
                Some(id) => item.of(id),
                None => item,
            }
        };
        for (key, why, source) in &mapped.skipped {
            self.report
                .push(item(key, source).outcome(Outcome::Skipped, why.clone()));
        }
        if mapped.settings.is_empty() {
            return;
        }
        let (origin, current) = match self.berth_config(&target).await {
            Ok(found) => found,
            Err(e) => {
                for (s, source) in &mapped.settings {
                    self.report.push(item(&s.key(), source).error(&e));
                }
                return;
            }
        };
        let table: toml::Table = match toml::from_str(&current) {
            Ok(t) => t,
            Err(e) => {
                // berth's own file does not parse: nothing is added to it until it is fixed.
                let line = e
                    .span()
                    .map(|s| berth_core::error::line_of_offset(&current, s.start));
                let reason = e.message().trim().to_owned();
                for (s, source) in &mapped.settings {
                    let corrupt = berth_core::Error::Corrupt {
                        file: origin.clone(),
                        line,
                        reason: reason.clone(),
                    };
                    self.report
                        .push(item(&s.key(), source).error(&corrupt.into()));
                }
                return;
            }
        };
        let mut adding: Vec<(Setting, PathBuf)> = Vec::new();
        for (s, source) in mapped.settings {
            match config_text::lookup(&table, &s.path) {
                Some(v) if *v == s.value => self.report.push(item(&s.key(), &source).outcome(
                    Outcome::AlreadyThere,
                    format!("berth's config already has {} = {}", s.key(), s.shown()),
                )),
                Some(v) => self.report.push(item(&s.key(), &source).fail(
                    ErrorKind::Conflict,
                    format!(
                        "berth's config {} has {} = {}, which is kept (Aptove has {})",
                        origin.display(),
                        s.key(),
                        config_text::shown(&s, v),
                        s.shown()
                    ),
                )),
                None => adding.push((s, source)),
            }
        }
        if adding.is_empty() {
            return;
        }
        let settings: Vec<Setting> = adding.iter().map(|(s, _)| s.clone()).collect();
        let written = self
            .write_settings(&target, &origin, &current, &settings)
            .await;
        for (s, source) in adding {
            let item = item(&s.key(), &source);
            self.report.push(match &written {
                Ok(()) => item.outcome(
                    Outcome::Imported,
                    format!("{} = {} in {}", s.key(), s.shown(), origin.display()),
                ),
                Err(e) => item.error(e),
            });
        }
    }

    /// The config file settings for `target` go to, and its text (empty if there is none).
    async fn berth_config(&self, target: &Target) -> Result<(PathBuf, String)> {
        match target {
            Target::Global => {
                let origin = berth_ops::config::global_path(self.ops.home());
                let text = berth_ops::config::global_text(self.ops.home())?;
                Ok((origin, text.map(|t| t.text).unwrap_or_default()))
            }
            Target::Workspace(id, in_berth) => {
                let store = self.ops.manager().workspaces();
                let origin = store
                    .workspace_dir(id)
                    .map(|d| d.join("config.toml"))
                    .unwrap_or_else(|| PathBuf::from(format!("the config of workspace {id}")));
                if !in_berth {
                    return Ok((origin, String::new()));
                }
                let text = store.load_config(id).await?;
                Ok((origin, text.map(|t| t.text).unwrap_or_default()))
            }
        }
    }

    /// `current` with `settings` added, checked by berth's own config reader, then written
    /// (unless this is a dry run).
    async fn write_settings(
        &self,
        target: &Target,
        origin: &Path,
        current: &str,
        settings: &[Setting],
    ) -> Result<()> {
        let Some(text) = config_text::with_settings(current, settings, NOTE) else {
            return Err(Error::refused(format!(
                "{} lays out its tables so that berth cannot add lines without rewriting it; add these settings by hand",
                origin.display()
            )));
        };
        // berth must accept the result: a value of the wrong type for berth is refused here,
        // not at the next start.
        let file = ConfigText {
            origin: origin.to_owned(),
            text: text.clone(),
        };
        berth_core::config::layer(Some(&file), None, std::iter::empty())?;
        if self.dry_run() {
            return Ok(());
        }
        match target {
            Target::Global => {
                berth_confined::write_atomic(origin, text.as_bytes()).map_err(|e| {
                    berth_core::Error::io(format!("cannot write {}", origin.display()), e)
                })?
            }
            Target::Workspace(id, _) => {
                self.ops
                    .manager()
                    .workspaces()
                    .save_config(id, &text)
                    .await?
            }
        }
        Ok(())
    }

    /// The workspace's `session.md` as a session of its berth workspace. Aptove has one session
    /// per workspace, keyed by the workspace's uuid, so the berth session gets that same id:
    /// deterministic, so a second import finds it, and the two can be told apart only by the
    /// command (`session` or `workspace`) that names them.
    async fn session(
        &mut self,
        dir: &Dir,
        id: &WorkspaceId,
        folder: &Path,
        meta: &WorkspaceToml,
        created: DateTime<Utc>,
        in_berth: bool,
    ) {
        let file = folder.join("session.md");
        let sid = SessionId::new(id.as_str()).expect("a workspace id is a valid session id");
        let item = Item::new(ItemKind::Session, sid.as_str(), &file).of(id);
        let text = match read_text(dir, "session.md", &file) {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => return self.report.push(item.error(&e)),
        };
        if text.trim().is_empty() {
            return self.report.push(item.outcome(
                Outcome::Skipped,
                "it is empty (Aptove makes an empty session.md with every workspace)",
            ));
        }
        let transcript = match berth_core::transcript::parse(text.as_bytes()) {
            Ok(t) => t,
            Err(e) => {
                let e = berth_core::Error::Corrupt {
                    file: file.clone(),
                    line: Some(e.line),
                    reason: e.reason,
                };
                return self.report.push(item.error(&e.into()));
            }
        };
        let messages = transcript.messages;
        if messages.is_empty() {
            return self
                .report
                .push(item.outcome(Outcome::Skipped, "it has no messages (a frontmatter only)"));
        }
        let sessions = self.ops.manager().sessions();
        let outcome = match sessions.load(&sid).await {
            Ok(s) if &s.workspace_id == id => {
                match sessions.read_transcript(&sid).await {
                    Ok(berths) if berths.messages == messages => Ok((
                        Outcome::AlreadyThere,
                        format!("{} message(s), imported before", messages.len()),
                    )),
                    // Aptove was used on after the first import: the new messages follow.
                    Ok(berths) if messages.starts_with(&berths.messages) => {
                        let new = &messages[berths.messages.len()..];
                        self.append(&sid, new).await.map(|()| {
                            (
                                Outcome::Imported,
                                format!(
                                    "{} new message(s) appended to the {} imported before",
                                    new.len(),
                                    berths.messages.len()
                                ),
                            )
                        })
                    }
                    Ok(_) => Err(Error::rule(
                        ErrorKind::Conflict,
                        format!(
                            "berth's session {sid} no longer matches Aptove's (it was continued in berth, or edited); berth's is kept"
                        ),
                    )),
                    Err(e) => Err(e.into()),
                }
            }
            Ok(s) => Err(Error::rule(
                ErrorKind::Conflict,
                format!(
                    "berth already has a session {sid} in workspace {}; it is kept",
                    s.workspace_id
                ),
            )),
            Err(e) if e.is_not_found() => self
                .create_session(
                    id,
                    &sid,
                    meta,
                    &transcript.frontmatter,
                    &messages,
                    created,
                    in_berth,
                )
                .await
                .map(|detail| (Outcome::Imported, detail)),
            Err(e) => Err(e.into()),
        };
        self.report.push(match outcome {
            Ok((outcome, detail)) => item.outcome(outcome, detail),
            Err(e) => item.error(&e),
        });
    }

    #[allow(clippy::too_many_arguments)]
    async fn create_session(
        &self,
        id: &WorkspaceId,
        sid: &SessionId,
        meta: &WorkspaceToml,
        fm: &berth_core::transcript::Frontmatter,
        messages: &[Message],
        workspace_created: DateTime<Utc>,
        in_berth: bool,
    ) -> Result<String> {
        // The provider the session was held with; where the frontmatter names none berth
        // knows (Aptove writes "unknown" when it had none), the one Aptove would have used.
        let provider = ProviderKind::from_str(&fm.provider)
            .ok()
            .or_else(|| {
                meta.provider
                    .as_deref()
                    .and_then(|p| ProviderKind::from_str(p).ok())
            })
            .or(self.aptove_provider)
            .unwrap_or(ProviderKind::Claude);
        let model = match fm.model.trim() {
            "" => "unknown".to_owned(),
            m => m.to_owned(),
        };
        let created = DateTime::parse_from_rfc3339(fm.created_at.trim())
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or(workspace_created);
        let detail = format!(
            "{} message(s), {} {model}",
            messages.len(),
            provider.as_str()
        );
        if self.dry_run() || !in_berth {
            return Ok(detail);
        }
        let ws = self.ops.manager().workspaces().load(id).await?;
        let title = messages
            .iter()
            .find(|m| m.role == Role::User)
            .map(|m| berth_ops::title_of(&m.content))
            .unwrap_or_else(|| "Aptove session".to_owned());
        let new = NewSession {
            id: Some(sid.clone()),
            workspace: id.clone(),
            title,
            provider,
            model,
            cwd: self
                .ops
                .view(&ws, None)
                .work_dir()
                .map(|p| p.display().to_string()),
            // Aptove's sessions were its own model's, as berth's own are.
            agent: None,
        };
        // Through the store, not the manager: importing is not a use of the workspace, whose
        // last use stays Aptove's.
        let sessions = self.ops.manager().sessions();
        sessions.create(new, created).await?;
        sessions.write_transcript(sid, messages).await?;
        Ok(detail)
    }

    async fn append(&self, sid: &SessionId, messages: &[Message]) -> Result<()> {
        if self.dry_run() {
            return Ok(());
        }
        for m in messages {
            self.ops.manager().sessions().append(sid, m).await?;
        }
        Ok(())
    }

    async fn bindings(&mut self) {
        let file = self.dir.join("bindings.toml");
        let text = match read_text(&self.root, "bindings.toml", &file) {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                return self
                    .report
                    .push(Item::new(ItemKind::Binding, "bindings.toml", &file).error(&e));
            }
        };
        let parsed: BindingsToml = match parse_toml(&file, &text) {
            Ok(b) => b,
            Err(e) => {
                return self
                    .report
                    .push(Item::new(ItemKind::Binding, "bindings.toml", &file).error(&e));
            }
        };
        for (device, workspace) in parsed.bindings {
            let item = Item::new(ItemKind::Binding, clip(&device), &file);
            let (device, id) = match (DeviceId::new(device), WorkspaceId::new(workspace)) {
                (Ok(d), Ok(w)) => (d, w),
                (Err(e), _) | (_, Err(e)) => {
                    self.report.push(item.error(&e.into()));
                    continue;
                }
            };
            let item = item.of(&id);
            if !self.imported.contains(&id) {
                self.report.push(if self.seen.contains(&id) {
                    item.fail(
                        ErrorKind::Refused,
                        format!("its workspace {id} was not imported (see above)"),
                    )
                } else {
                    item.outcome(
                        Outcome::Skipped,
                        format!(
                            "Aptove has no workspace {id}: a stale binding, which Aptove itself replaces with a new workspace when the device connects"
                        ),
                    )
                });
                continue;
            }
            let result = self.bind(&device, &id).await;
            self.report.push(match result {
                Ok((outcome, detail)) => item.outcome(outcome, detail),
                Err(e) => item.error(&e),
            });
        }
    }

    /// Binds `device` to `id` unless berth binds it already (to that workspace: already there;
    /// to another: a conflict, and berth's binding is kept).
    async fn bind(&self, device: &DeviceId, id: &WorkspaceId) -> Result<(Outcome, String)> {
        let bindings = self.ops.manager().bindings();
        let conflict = |other: &WorkspaceId| {
            Error::rule(
                ErrorKind::Conflict,
                format!("berth binds this device to workspace {other}, which is kept"),
            )
        };
        match bindings.resolve(device).await? {
            Some(w) if &w == id => {
                return Ok((Outcome::AlreadyThere, format!("bound to {id} before")));
            }
            Some(other) => return Err(conflict(&other)),
            None => {}
        }
        if !self.dry_run() {
            // Atomic: a binding made meanwhile by another process wins, and is reported.
            let winner = bindings.bind_if_absent(device, id).await?;
            if &winner != id {
                return Err(conflict(&winner));
            }
        }
        Ok((Outcome::Imported, format!("bound to {id}")))
    }
}

/// Reads and parses a TOML file of the source into a table.
fn read_toml_table(dir: &Dir, rel: &str, shown: &Path) -> Result<Option<toml::Table>> {
    match read_text(dir, rel, shown)? {
        Some(text) => parse_toml(shown, &text).map(Some),
        None => Ok(None),
    }
}

/// An RFC 3339 time from `workspace.toml`; one that does not parse makes the file corrupt.
fn time(text: &str, key: &str, file: &Path) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            berth_core::Error::Corrupt {
                file: file.to_owned(),
                line: None,
                reason: format!("{key} {:?} is not an RFC 3339 time ({e})", clip(text)),
            }
            .into()
        })
}

/// The settings of an Aptove config file that berth has under the same names, and why the rest
/// are not imported. `workspace` is true for a workspace's overrides.
fn map_config(table: &toml::Table, file: &Path, workspace: bool) -> Mapped {
    let mut mapped = Mapped::default();
    let mut skip =
        |key: String, why: &str| mapped.skipped.push((key, why.to_owned(), file.to_owned()));
    let mut settings = Vec::new();
    for (key, value) in table {
        if is_empty(value) {
            continue; // nothing to lose: `mcp_servers = []`, an empty table
        }
        match (key.as_str(), value) {
            ("provider", toml::Value::String(p)) => match ProviderKind::from_str(p) {
                Ok(kind) => settings.push(setting(&["provider"], kind.as_str().into())),
                Err(e) => skip(key.clone(), &e.to_string()),
            },
            ("provider", _) => skip(key.clone(), "it is not a string"),
            ("providers", toml::Value::Table(providers)) => {
                for (name, settings_of) in providers {
                    let known = ProviderKind::ALL.iter().any(|k| k.as_str() == name);
                    match settings_of {
                        toml::Value::Table(t) if known => {
                            for (k, v) in t {
                                let path = format!("providers.{name}.{k}");
                                match (k.as_str(), v) {
                                    ("api_key" | "model" | "base_url", toml::Value::String(_)) => {
                                        settings.push(setting(&["providers", name, k], v.clone()))
                                    }
                                    _ if is_empty(v) => {}
                                    _ => skip(path, "berth has no such provider setting"),
                                }
                            }
                        }
                        _ if is_empty(settings_of) => {}
                        _ => skip(
                            format!("providers.{name}"),
                            &format!("berth's providers are {}", ProviderKind::names()),
                        ),
                    }
                }
            }
            ("agent", toml::Value::Table(agent)) => {
                for (k, v) in agent {
                    match (k.as_str(), v) {
                        ("max_tool_iterations", toml::Value::Integer(_)) => {
                            settings.push(setting(&["agent", "max_tool_iterations"], v.clone()))
                        }
                        _ if is_empty(v) => {}
                        ("retry", _) => skip(
                            "agent.retry".into(),
                            "berth retries rate limits and server errors by itself, only before anything streamed",
                        ),
                        _ => skip(format!("agent.{k}"), "berth has no such setting"),
                    }
                }
            }
            ("identity" | "transports" | "state", _) if workspace => {
                skip(key.clone(), "Aptove ignores it in a workspace's config too")
            }
            ("identity", _) => skip(
                key.clone(),
                "Aptove's agent id and client token; `berth mcp --transport http` takes its own token (BERTH_MCP_TOKEN)",
            ),
            ("transports" | "serve", _) => skip(
                key.clone(),
                "Aptove's bridge for ACP clients; berth serves MCP (`berth mcp`, and over HTTP with --listen and [mcp])",
            ),
            ("state", _) => skip(key.clone(), "Aptove's terminal UI state"),
            ("mcp_servers", _) => skip(
                key.clone(),
                "berth's [[mcp_servers]] take the same name, command, args and env; copy the ones you want by hand, since an import never makes berth start a program",
            ),
            ("system_prompt", _) => skip(
                key.clone(),
                "berth's agent has no system prompt setting; standing instructions go in the workspace's context.md (berth workspace storage write WS context.md)",
            ),
            _ => skip(key.clone(), "berth has no such setting"),
        }
    }
    mapped.settings = settings.into_iter().map(|s| (s, file.to_owned())).collect();
    mapped
}

fn setting(path: &[&str], value: toml::Value) -> Setting {
    Setting {
        path: path.iter().map(|k| (*k).to_owned()).collect(),
        value,
    }
}

/// An empty array, or a table of nothing but empty things.
fn is_empty(value: &toml::Value) -> bool {
    match value {
        toml::Value::Array(a) => a.is_empty(),
        toml::Value::Table(t) => t.values().all(is_empty),
        _ => false,
    }
}
