//! `berth store migrate --to URL`: copies this home's records (workspaces with their config,
//! sessions with their transcripts, storage of both scopes, device bindings) from the store in
//! use into another: a SQLite or Postgres database, or back into the files under the home.
//!
//! - **Through the store traits**, both ways, so every backend is a source and a target; ids,
//!   names, times (created, last used, a session's last change), status and git records are
//!   kept exactly.
//! - **Idempotent.** What the target already holds the same is left alone; a transcript the
//!   target holds a beginning of gets the rest appended, a workspace used since gets its time;
//!   anything else the target holds differently is a conflict, kept and reported. Nothing in
//!   the target is deleted, so a shared database keeps what other homes put there.
//! - **Verified.** After copying, every item of the source is read back from the target and
//!   compared (records, transcripts message by message, files byte by byte), and the counts
//!   are reported.
//! - **Dry run.** The same plan, written nowhere: a database without berth's tables yet reads
//!   as empty and is not created.

use std::collections::BTreeMap;

use berth_core::{
    EntryKind, ErrorKind, Found, NewSession, NewWorkspace, Session, SessionStatus, StoragePath,
    StorageScope, Workspace, WorkspaceManager,
};
use serde::Serialize;

use berth_ops::{Error, Ops, Result, StoreChoice};

/// What a migrated item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MigrateKind {
    Workspace,
    Config,
    Session,
    /// A file of a workspace's or a session's storage.
    File,
    Binding,
}

impl MigrateKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MigrateKind::Workspace => "workspace",
            MigrateKind::Config => "config",
            MigrateKind::Session => "session",
            MigrateKind::File => "file",
            MigrateKind::Binding => "binding",
        }
    }
}

/// What became of an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MigrateOutcome {
    /// Written to the target by this run.
    Copied,
    /// A dry run: it would be written.
    WouldCopy,
    /// The target held part of it (the start of a transcript, an older time): the rest was
    /// written.
    Updated,
    WouldUpdate,
    /// The target holds the same.
    AlreadyThere,
    /// The target holds something different under that id or key, and keeps it.
    Conflict,
    /// Not copied: the target has no place for it (a symlink in a storage folder).
    Skipped,
}

impl MigrateOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            MigrateOutcome::Copied => "copied",
            MigrateOutcome::WouldCopy => "would copy",
            MigrateOutcome::Updated => "updated",
            MigrateOutcome::WouldUpdate => "would update",
            MigrateOutcome::AlreadyThere => "already there",
            MigrateOutcome::Conflict => "conflict",
            MigrateOutcome::Skipped => "skipped",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct MigrateItem {
    pub kind: MigrateKind,
    /// A workspace's label, a session's id, a file's path, a device.
    pub what: String,
    /// The workspace it belongs to (its own id for a workspace).
    pub workspace: Option<String>,
    pub outcome: MigrateOutcome,
    /// Why, for a conflict or a skip; what was done, for an update.
    pub detail: String,
}

/// How many items of a kind the source holds, and how many the target was found to hold the
/// same after the copy (`None` in a dry run, which verifies nothing).
#[derive(Debug, Clone, Serialize)]
pub struct MigrateCount {
    pub kind: MigrateKind,
    pub source: usize,
    pub verified: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MigrateReport {
    /// The store copied from, and the one copied to (URLs without passwords).
    pub from: String,
    pub to: String,
    pub dry_run: bool,
    pub items: Vec<MigrateItem>,
    pub counts: Vec<MigrateCount>,
    /// Messages copied (transcripts count as sessions above; these are their rows).
    pub messages: usize,
}

impl MigrateReport {
    pub fn count(&self, outcome: MigrateOutcome) -> usize {
        self.items.iter().filter(|i| i.outcome == outcome).count()
    }

    /// Whether everything of the source is in the target (after a real run).
    pub fn complete(&self) -> bool {
        self.counts
            .iter()
            .all(|c| c.verified.is_none_or(|v| v == c.source))
    }
}

/// Copies the records of the home `ops` opened into the store `to` names: `sqlite://…`,
/// `postgres://…`, or `fs` for the files under this home. See the module's documentation.
pub async fn migrate_store(ops: &Ops, to: &str, dry_run: bool) -> Result<MigrateReport> {
    let target = match to {
        "fs" | "files" => StoreChoice::Files,
        url => match StoreChoice::of(ops.home(), Some(url))? {
            StoreChoice::Files => unreachable!("a url names a database"),
            db => db,
        },
    };
    if target == *ops.store_choice() {
        return Err(Error::invalid(format!(
            "{} is the store this home already uses; name another with --to (a sqlite:// or postgres:// URL, or fs)",
            target.describe(ops.home())
        )));
    }
    let to_name = target.describe(ops.home());
    let dst = match (&target, dry_run) {
        (StoreChoice::Database { url }, true) => {
            berth_store_sql::SqlStore::probe(url.expose(), ops.home())?.map(|s| s.manager())
        }
        _ => Some(target.open(ops.home())?),
    };
    let mut run = Run {
        src: ops.manager(),
        dst: dst.as_ref(),
        dry_run,
        items: Vec::new(),
        messages: 0,
    };
    run.copy_all().await?;
    let counts = match (&dst, dry_run) {
        (Some(dst), false) => verify(ops.manager(), dst).await?,
        _ => source_counts(ops.manager()).await?,
    };
    Ok(MigrateReport {
        from: ops.store_choice().describe(ops.home()),
        to: to_name,
        dry_run,
        items: run.items,
        counts,
        messages: run.messages,
    })
}

struct Run<'a> {
    src: &'a WorkspaceManager,
    /// `None`: a dry run against a database that does not exist yet (empty).
    dst: Option<&'a WorkspaceManager>,
    dry_run: bool,
    items: Vec<MigrateItem>,
    messages: usize,
}

impl Run<'_> {
    fn note(
        &mut self,
        kind: MigrateKind,
        what: impl Into<String>,
        ws: &Workspace,
        outcome: MigrateOutcome,
        detail: impl Into<String>,
    ) {
        berth_ops::progress::step("copying", self.items.len() as u64 + 1, 0);
        self.items.push(MigrateItem {
            kind,
            what: what.into(),
            workspace: Some(ws.id.to_string()),
            outcome,
            detail: detail.into(),
        });
    }

    fn copied(&self) -> MigrateOutcome {
        if self.dry_run {
            MigrateOutcome::WouldCopy
        } else {
            MigrateOutcome::Copied
        }
    }

    fn updated(&self) -> MigrateOutcome {
        if self.dry_run {
            MigrateOutcome::WouldUpdate
        } else {
            MigrateOutcome::Updated
        }
    }

    async fn copy_all(&mut self) -> Result<()> {
        for ws in self.src.list().await? {
            self.workspace(&ws).await?;
        }
        for b in self.src.list_bindings().await? {
            let held = match self.dst {
                Some(dst) => dst.bindings().resolve(&b.device).await?,
                None => None,
            };
            let (outcome, detail) = match held {
                None => {
                    if let (Some(dst), false) = (self.dst, self.dry_run) {
                        dst.bindings().bind(&b.device, &b.workspace).await?;
                    }
                    (self.copied(), String::new())
                }
                Some(w) if w == b.workspace => (MigrateOutcome::AlreadyThere, String::new()),
                Some(w) => (
                    MigrateOutcome::Conflict,
                    format!("the target binds it to workspace {w}, and keeps that"),
                ),
            };
            berth_ops::progress::step("copying", self.items.len() as u64 + 1, 0);
            self.items.push(MigrateItem {
                kind: MigrateKind::Binding,
                what: b.device.to_string(),
                workspace: Some(b.workspace.to_string()),
                outcome,
                detail,
            });
        }
        Ok(())
    }

    async fn workspace(&mut self, ws: &Workspace) -> Result<()> {
        let held = match self.dst {
            Some(dst) => dst.workspaces().load(&ws.id).await.found()?,
            None => None,
        };
        let label = ws.label();
        match held {
            None => {
                if let (Some(dst), false) = (self.dst, self.dry_run)
                    && !self.create_workspace(dst, ws).await?
                {
                    return Ok(());
                }
                let outcome = self.copied();
                self.note(MigrateKind::Workspace, label, ws, outcome, "");
            }
            Some(t) if t == *ws => {
                self.note(
                    MigrateKind::Workspace,
                    label,
                    ws,
                    MigrateOutcome::AlreadyThere,
                    "",
                );
            }
            Some(t)
                if t.last_accessed < ws.last_accessed
                    && Workspace {
                        last_accessed: ws.last_accessed,
                        ..t.clone()
                    } == *ws =>
            {
                if let (Some(dst), false) = (self.dst, self.dry_run) {
                    dst.workspaces()
                        .update_accessed(&ws.id, ws.last_accessed)
                        .await?;
                }
                let outcome = self.updated();
                self.note(
                    MigrateKind::Workspace,
                    label,
                    ws,
                    outcome,
                    "used since the last copy: its last-used time",
                );
            }
            Some(t) => {
                self.note(
                    MigrateKind::Workspace,
                    label,
                    ws,
                    MigrateOutcome::Conflict,
                    format!(
                        "the target holds a different workspace {} under this id, and keeps it; nothing of this one is copied",
                        t.label()
                    ),
                );
                return Ok(());
            }
        }
        self.config(ws).await?;
        self.storage(ws, &StorageScope::Workspace(ws.id.clone()))
            .await?;
        for s in self.src.sessions().list(Some(&ws.id)).await? {
            self.session(ws, &s).await?;
        }
        Ok(())
    }

    /// Creates `ws` in the target as it was (its times, its archiving); whether it was, or
    /// (noted as a conflict) the target gave its id or ports to another.
    async fn create_workspace(&mut self, dst: &WorkspaceManager, ws: &Workspace) -> Result<bool> {
        let new = NewWorkspace {
            id: Some(ws.id.clone()),
            name: ws.name.clone(),
            description: ws.description.clone(),
            agent_id: ws.agent_id.clone(),
            git: ws.git.clone(),
            // The very block it held, or a refusal if the target gave any of its
            // ports to another workspace; one without a block gets one on first
            // use there.
            ports: ws.ports,
        };
        match dst.workspaces().create(new, ws.created_at).await {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Conflict => {
                self.note(
                    MigrateKind::Workspace,
                    ws.label(),
                    ws,
                    MigrateOutcome::Conflict,
                    format!("{e}; the target's is kept and nothing of this one is copied"),
                );
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        }
        if ws.last_accessed > ws.created_at {
            dst.workspaces()
                .update_accessed(&ws.id, ws.last_accessed)
                .await?;
        }
        // An archived workspace stays archived: its worktree is not there to use.
        if ws.archived_at.is_some() {
            dst.workspaces()
                .set_archived(&ws.id, ws.archived_at)
                .await?;
        }
        Ok(true)
    }

    async fn config(&mut self, ws: &Workspace) -> Result<()> {
        let Some(text) = self.src.workspaces().load_config(&ws.id).await? else {
            return Ok(());
        };
        let held = match self.dst {
            Some(dst) => dst
                .workspaces()
                .load_config(&ws.id)
                .await
                .found()?
                .flatten(),
            None => None,
        };
        let (outcome, detail) = match held {
            None => {
                if let (Some(dst), false) = (self.dst, self.dry_run) {
                    dst.workspaces().save_config(&ws.id, &text.text).await?;
                }
                (self.copied(), String::new())
            }
            Some(t) if t.text == text.text => (MigrateOutcome::AlreadyThere, String::new()),
            Some(_) => (
                MigrateOutcome::Conflict,
                "the target's config of this workspace differs, and is kept".to_owned(),
            ),
        };
        self.note(MigrateKind::Config, "config.toml", ws, outcome, detail);
        Ok(())
    }

    async fn session(&mut self, ws: &Workspace, s: &Session) -> Result<()> {
        let transcript = self.src.sessions().read_transcript(&s.id).await?;
        let held = match self.dst {
            Some(dst) => dst.sessions().load(&s.id).await.found()?,
            None => None,
        };
        let what = s.id.to_string();
        match held {
            None => {
                if let (Some(dst), false) = (self.dst, self.dry_run) {
                    let new = NewSession {
                        id: Some(s.id.clone()),
                        workspace: s.workspace_id.clone(),
                        title: s.title.clone(),
                        provider: s.provider,
                        model: s.model.clone(),
                        cwd: s.cwd.clone(),
                        agent: s.agent.clone(),
                    };
                    dst.sessions().create(new, s.created_at).await?;
                    dst.sessions()
                        .write_transcript(&s.id, &transcript.messages)
                        .await?;
                    restore_state(dst, s).await?;
                }
                self.messages += transcript.messages.len();
                let outcome = self.copied();
                self.note(
                    MigrateKind::Session,
                    what,
                    ws,
                    outcome,
                    format!("{} messages", transcript.messages.len()),
                );
            }
            Some(t) => {
                let dst = self.dst.expect("a held session has a target");
                let theirs = dst.sessions().read_transcript(&s.id).await?.messages;
                let mine = &transcript.messages;
                let same_record = t.workspace_id == s.workspace_id
                    && t.provider == s.provider
                    && t.model == s.model
                    && t.agent == s.agent
                    && t.created_at == s.created_at
                    && t.cwd == s.cwd;
                if !same_record || !mine.starts_with(&theirs) {
                    self.note(
                        MigrateKind::Session,
                        what,
                        ws,
                        MigrateOutcome::Conflict,
                        "the target holds a different session under this id (or a transcript that is not a beginning of this one), and keeps it",
                    );
                } else if t == *s && theirs.len() == mine.len() {
                    self.note(
                        MigrateKind::Session,
                        what,
                        ws,
                        MigrateOutcome::AlreadyThere,
                        "",
                    );
                } else {
                    let more = mine.len() - theirs.len();
                    if !self.dry_run {
                        // Appending to a closed session is refused: reopen it for the copy only
                        // when the target's is not closed, which `restore_state` ends in.
                        if t.status == SessionStatus::Closed && more > 0 {
                            self.note(
                                MigrateKind::Session,
                                what,
                                ws,
                                MigrateOutcome::Conflict,
                                "the target's session is closed and cannot take the newer messages",
                            );
                            return self.session_storage(ws, s).await;
                        }
                        for m in &mine[theirs.len()..] {
                            dst.sessions().append(&s.id, m).await?;
                        }
                        if t != *s {
                            restore_state(dst, s).await?;
                        }
                    }
                    self.messages += more;
                    let outcome = self.updated();
                    self.note(
                        MigrateKind::Session,
                        what,
                        ws,
                        outcome,
                        format!("{more} newer messages; title and status as in the source"),
                    );
                }
            }
        }
        self.session_storage(ws, s).await
    }

    async fn session_storage(&mut self, ws: &Workspace, s: &Session) -> Result<()> {
        let scope = StorageScope::Session {
            workspace: ws.id.clone(),
            session: s.id.clone(),
        };
        self.storage(ws, &scope).await
    }

    /// Every file of a storage scope, folders walked depth first.
    async fn storage(&mut self, ws: &Workspace, scope: &StorageScope) -> Result<()> {
        let mut folders: Vec<Option<StoragePath>> = vec![None];
        while let Some(dir) = folders.pop() {
            for entry in self.src.storage().list(scope, dir.as_ref()).await? {
                let path = StoragePath::new(&entry.path)?;
                let what = match scope {
                    StorageScope::Workspace(_) => entry.path.clone(),
                    StorageScope::Session { session, .. } => {
                        format!("{} (session {session})", entry.path)
                    }
                };
                match entry.kind {
                    EntryKind::Dir => folders.push(Some(path)),
                    EntryKind::Symlink => self.note(
                        MigrateKind::File,
                        what,
                        ws,
                        MigrateOutcome::Skipped,
                        "a symlink: a storage folder keeps files, and this one is left where it is",
                    ),
                    EntryKind::File => {
                        let bytes = self.src.storage().read(scope, &path).await?;
                        let held = match self.dst {
                            Some(dst) => dst.storage().read(scope, &path).await.found()?,
                            None => None,
                        };
                        let (outcome, detail) = match held {
                            None => {
                                if let (Some(dst), false) = (self.dst, self.dry_run) {
                                    dst.storage().write(scope, &path, bytes).await?;
                                }
                                (self.copied(), String::new())
                            }
                            Some(b) if b == bytes => (MigrateOutcome::AlreadyThere, String::new()),
                            Some(_) => (
                                MigrateOutcome::Conflict,
                                "the target's file differs, and is kept".to_owned(),
                            ),
                        };
                        self.note(MigrateKind::File, what, ws, outcome, detail);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Brings a copied session's title, status, tokens and last change to the source's. A
/// status is reached by the moves `SessionStatus::can_become` allows from idle; tokens by
/// adding what the copy lacks (so a migration run again adds nothing).
async fn restore_state(dst: &WorkspaceManager, s: &Session) -> Result<()> {
    let store = dst.sessions();
    let copied = store.load(&s.id).await?;
    let lacking = berth_core::TokenUsage {
        input_tokens: s
            .usage
            .input_tokens
            .saturating_sub(copied.usage.input_tokens),
        output_tokens: s
            .usage
            .output_tokens
            .saturating_sub(copied.usage.output_tokens),
    };
    if !lacking.is_zero() {
        store.add_usage(&s.id, lacking).await?;
    }
    let mut current = copied.status;
    if current != s.status {
        // Cancelled and failed are reached through running, as a turn reaches them.
        if !current.can_become(s.status)
            && current.can_become(SessionStatus::Running)
            && SessionStatus::Running.can_become(s.status)
        {
            store
                .set_status(&s.id, SessionStatus::Running, s.updated_at)
                .await?;
            current = SessionStatus::Running;
        }
        if current.can_become(s.status) {
            store.set_status(&s.id, s.status, s.updated_at).await?;
        }
    }
    // The title last: it sets the time of the last change whatever the status did.
    store.set_title(&s.id, &s.title, s.updated_at).await?;
    Ok(())
}

async fn source_counts(src: &WorkspaceManager) -> Result<Vec<MigrateCount>> {
    let mut counts: BTreeMap<MigrateKind, usize> = BTreeMap::new();
    for ws in src.list().await? {
        *counts.entry(MigrateKind::Workspace).or_default() += 1;
        if src.workspaces().load_config(&ws.id).await?.is_some() {
            *counts.entry(MigrateKind::Config).or_default() += 1;
        }
        *counts.entry(MigrateKind::File).or_default() +=
            files_of(src, &StorageScope::Workspace(ws.id.clone()))
                .await?
                .len();
        for s in src.sessions().list(Some(&ws.id)).await? {
            *counts.entry(MigrateKind::Session).or_default() += 1;
            let scope = StorageScope::Session {
                workspace: ws.id.clone(),
                session: s.id.clone(),
            };
            *counts.entry(MigrateKind::File).or_default() += files_of(src, &scope).await?.len();
        }
    }
    *counts.entry(MigrateKind::Binding).or_default() += src.list_bindings().await?.len();
    Ok(all_kinds(&counts, None))
}

fn all_kinds(
    source: &BTreeMap<MigrateKind, usize>,
    verified: Option<&BTreeMap<MigrateKind, usize>>,
) -> Vec<MigrateCount> {
    [
        MigrateKind::Workspace,
        MigrateKind::Config,
        MigrateKind::Session,
        MigrateKind::File,
        MigrateKind::Binding,
    ]
    .into_iter()
    .map(|kind| MigrateCount {
        kind,
        source: source.get(&kind).copied().unwrap_or(0),
        verified: verified.map(|v| v.get(&kind).copied().unwrap_or(0)),
    })
    .collect()
}

/// The files of a scope (symlinks are not files), with their paths.
async fn files_of(m: &WorkspaceManager, scope: &StorageScope) -> Result<Vec<StoragePath>> {
    let mut out = Vec::new();
    let mut folders: Vec<Option<StoragePath>> = vec![None];
    while let Some(dir) = folders.pop() {
        for entry in m.storage().list(scope, dir.as_ref()).await? {
            let path = StoragePath::new(&entry.path)?;
            match entry.kind {
                EntryKind::Dir => folders.push(Some(path)),
                EntryKind::File => out.push(path),
                EntryKind::Symlink => {}
            }
        }
    }
    Ok(out)
}

/// Reads every item of the source back from the target and counts those that are the same.
async fn verify(src: &WorkspaceManager, dst: &WorkspaceManager) -> Result<Vec<MigrateCount>> {
    let mut source: BTreeMap<MigrateKind, usize> = BTreeMap::new();
    let mut same: BTreeMap<MigrateKind, usize> = BTreeMap::new();
    let mut tally = |kind: MigrateKind, ok: bool| {
        *source.entry(kind).or_default() += 1;
        if ok {
            *same.entry(kind).or_default() += 1;
        }
    };
    for ws in src.list().await? {
        let theirs = dst.workspaces().load(&ws.id).await.ok();
        tally(MigrateKind::Workspace, theirs.as_ref() == Some(&ws));
        if theirs.is_none() {
            // Count what it holds as missing, without reading a target that lacks it.
            if src.workspaces().load_config(&ws.id).await?.is_some() {
                tally(MigrateKind::Config, false);
            }
            for _ in files_of(src, &StorageScope::Workspace(ws.id.clone())).await? {
                tally(MigrateKind::File, false);
            }
            for s in src.sessions().list(Some(&ws.id)).await? {
                tally(MigrateKind::Session, false);
                let scope = StorageScope::Session {
                    workspace: ws.id.clone(),
                    session: s.id.clone(),
                };
                for _ in files_of(src, &scope).await? {
                    tally(MigrateKind::File, false);
                }
            }
            continue;
        }
        if let Some(text) = src.workspaces().load_config(&ws.id).await? {
            let held = dst.workspaces().load_config(&ws.id).await?;
            tally(
                MigrateKind::Config,
                held.is_some_and(|t| t.text == text.text),
            );
        }
        let mut scopes = vec![StorageScope::Workspace(ws.id.clone())];
        for s in src.sessions().list(Some(&ws.id)).await? {
            let ok = match dst.sessions().load(&s.id).await {
                Ok(t) => {
                    t == s
                        && dst.sessions().read_transcript(&s.id).await?.messages
                            == src.sessions().read_transcript(&s.id).await?.messages
                }
                Err(_) => false,
            };
            tally(MigrateKind::Session, ok);
            scopes.push(StorageScope::Session {
                workspace: ws.id.clone(),
                session: s.id.clone(),
            });
        }
        for scope in &scopes {
            for path in files_of(src, scope).await? {
                let mine = src.storage().read(scope, &path).await?;
                let ok = dst
                    .storage()
                    .read(scope, &path)
                    .await
                    .is_ok_and(|b| b == mine);
                tally(MigrateKind::File, ok);
            }
        }
    }
    for b in src.list_bindings().await? {
        let held = dst.bindings().resolve(&b.device).await?;
        tally(MigrateKind::Binding, held.as_ref() == Some(&b.workspace));
    }
    Ok(all_kinds(&source, Some(&same)))
}
