//! `WorkspaceManager`: record-level operations composed from the store traits. It knows nothing
//! of git worktrees: `berth-ops` pairs records with worktrees and is its only user outside the
//! stores' tests.
//!
//! It holds no state of its own beyond the stores, so several managers in several processes on
//! one home agree by construction; everything that must be atomic is atomic in a store method.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};

use crate::config::{self, ConfigText, LoadedConfig};
use crate::error::{Error, Result};
use crate::id::{DeviceId, SessionId, WorkspaceId, WorkspaceName};
use crate::model::{
    NewSession, NewWorkspace, Session, SessionStatus, StorageEntry, StorageScope, Workspace,
};
use crate::storage_path::StoragePath;
use crate::store::{
    Binding, BindingStore, DeleteCondition, SessionStore, StorageStore, WorkspaceStore,
};
use crate::transcript::{Message, Transcript};

/// Shortest id prefix accepted, so a stray "a" never resolves to somebody's workspace.
pub const MIN_PREFIX: usize = 4;

/// The id-prefix rule, once for workspaces, sessions and runs: `identifier` names an id it
/// begins when it has at least [`MIN_PREFIX`] characters (a shorter one would name too many
/// to be meant, and could guess at ids it should not know of).
pub fn is_id_prefix(identifier: &str, id: &str) -> bool {
    identifier.len() >= MIN_PREFIX && id.starts_with(identifier)
}

/// What an identifier names among candidates, by [`named_by_id`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named<T> {
    /// No candidate has that id, nor begins with it.
    Nothing,
    One(T),
    /// The identifier is a prefix of several ids: ambiguous, never a guess.
    Several(Vec<T>),
}

impl<T> Named<T> {
    /// Nothing, one or several, by how many `found` holds.
    pub fn of(mut found: Vec<T>) -> Self {
        match found.len() {
            0 => Named::Nothing,
            1 => Named::One(found.remove(0)),
            _ => Named::Several(found),
        }
    }
}

/// The id resolve rule, once for workspaces, sessions, runs, batches and lands: the candidate
/// whose id (`id_of`) is `identifier` exactly wins; else the candidates whose ids it begins
/// ([`is_id_prefix`]: [`MIN_PREFIX`] characters or more), one of them named, several
/// ambiguous (in the candidates' order).
pub fn named_by_id<T>(
    identifier: &str,
    candidates: impl IntoIterator<Item = T>,
    id_of: impl Fn(&T) -> &str,
) -> Named<T> {
    let mut prefixed = Vec::new();
    for candidate in candidates {
        let id = id_of(&candidate);
        if id == identifier {
            return Named::One(candidate);
        }
        if is_id_prefix(identifier, id) {
            prefixed.push(candidate);
        }
    }
    Named::of(prefixed)
}

/// How stale `last_accessed` may get before a use rewrites it. Garbage collection works in
/// days, so a minute of slack costs nothing and spares a durable metadata write on every read.
const ACCESS_GRANULARITY: Duration = Duration::seconds(60);

/// The outcome of a garbage-collection scan: what is idle since `cutoff`.
#[derive(Debug, Clone)]
pub struct GcPlan {
    pub cutoff: DateTime<Utc>,
    pub stale: Vec<Workspace>,
}

#[derive(Clone)]
pub struct WorkspaceManager {
    workspaces: Arc<dyn WorkspaceStore>,
    bindings: Arc<dyn BindingStore>,
    storage: Arc<dyn StorageStore>,
    sessions: Arc<dyn SessionStore>,
    /// Until when each workspace's `last_accessed` is known fresh, as this process last read
    /// or wrote it: a use before then records nothing, so need not load the record either (a
    /// turn uses its workspace's storage and sessions a handful of times).
    fresh: Arc<Mutex<HashMap<WorkspaceId, std::time::Instant>>>,
    /// The configs layered so far: a server asks for the same one at every prompt.
    layered: Arc<config::Layered>,
}

impl WorkspaceManager {
    pub fn new(
        workspaces: Arc<dyn WorkspaceStore>,
        bindings: Arc<dyn BindingStore>,
        storage: Arc<dyn StorageStore>,
        sessions: Arc<dyn SessionStore>,
    ) -> Self {
        WorkspaceManager {
            workspaces,
            bindings,
            storage,
            sessions,
            fresh: Arc::default(),
            layered: Arc::default(),
        }
    }

    pub fn sessions(&self) -> &dyn SessionStore {
        self.sessions.as_ref()
    }

    pub fn workspaces(&self) -> &dyn WorkspaceStore {
        self.workspaces.as_ref()
    }

    pub fn bindings(&self) -> &dyn BindingStore {
        self.bindings.as_ref()
    }

    pub fn storage(&self) -> &dyn StorageStore {
        self.storage.as_ref()
    }

    pub async fn create(&self, new: NewWorkspace) -> Result<Workspace> {
        self.workspaces.create(new, Utc::now()).await
    }

    pub async fn list(&self) -> Result<Vec<Workspace>> {
        self.workspaces.list().await
    }

    /// Finds a workspace by exact id, then exact name, then unambiguous id prefix (at least
    /// four characters). An exact match always wins over a prefix match.
    pub async fn resolve(&self, identifier: &str) -> Result<Workspace> {
        // Every valid name and prefix is also a valid id (names follow the same rule, shorter),
        // so an identifier that is not a valid id can only be refused, with the rule it broke.
        let id = WorkspaceId::new(identifier)?;
        match self.workspaces.load(&id).await {
            Err(e) if e.is_not_found() => {}
            other => return other,
        }
        if let Ok(name) = WorkspaceName::new(identifier) {
            match self.workspaces.load_by_name(&name).await {
                Err(e) if e.is_not_found() => {}
                other => return other,
            }
        }
        let not_found = || Error::NotFound {
            what: format!("workspace {identifier:?}"),
            hint: Some(match identifier.len() < MIN_PREFIX {
                true => format!(
                    "no workspace has that id or name, and an id prefix needs {MIN_PREFIX} or more characters; list the workspaces to see theirs"
                ),
                false => {
                    "no workspace has that id, name or id prefix; list the workspaces to see theirs"
                        .to_owned()
                }
            }),
        };
        if identifier.len() < MIN_PREFIX {
            return Err(not_found());
        }
        let ids = self.workspaces.list_ids().await?;
        match named_by_id(identifier, ids, |id| id.as_str()) {
            Named::Nothing => Err(not_found()),
            Named::One(one) => self.workspaces.load(&one).await,
            Named::Several(many) => {
                let mut candidates = Vec::new();
                for id in many {
                    let label = match self.workspaces.load(&id).await {
                        Ok(Workspace { name: Some(n), .. }) => format!("{id} ({n})"),
                        _ => id.to_string(),
                    };
                    candidates.push(label);
                }
                Err(Error::Ambiguous {
                    identifier: identifier.to_owned(),
                    candidates,
                })
            }
        }
    }

    /// The workspace bound to `device`, creating and binding a new one if there is none.
    /// Two processes racing on the same new device end with one workspace and one binding:
    /// both may create, but only one binding wins, and the loser removes its own workspace.
    pub async fn resolve_device(&self, device: &DeviceId) -> Result<Workspace> {
        if let Some(id) = self.bindings.resolve(device).await? {
            match self.workspaces.load(&id).await {
                Ok(ws) => return self.touched(ws).await,
                // A binding to a workspace that no longer exists (deleted by hand, or by a
                // delete that raced a bind) is dropped so the device can get a new one.
                Err(e) if e.is_not_found() => {
                    self.bindings.unbind_workspace(&id).await?;
                }
                Err(e) => return Err(e),
            }
        }
        let candidate = self.create(NewWorkspace::default()).await?;
        let winner = self.bindings.bind_if_absent(device, &candidate.id).await?;
        if winner == candidate.id {
            return Ok(candidate);
        }
        self.workspaces
            .delete(&candidate.id, DeleteCondition::Always)
            .await?;
        let ws = self.workspaces.load(&winner).await?;
        self.touched(ws).await
    }

    /// Removes a workspace's record: its bindings first (so no device is left pointing at
    /// nothing), then its folder with storage and sessions. Returns the devices unbound.
    ///
    /// The record only: a git workspace's worktree is not looked at. The operations layer
    /// (`berth-ops`) removes the worktree first and is the one caller; front ends never get a
    /// manager, so none can leave a worktree without its record.
    pub async fn delete_record(&self, id: &WorkspaceId) -> Result<Vec<DeviceId>> {
        // Fail with NotFound before touching bindings of a workspace that does not exist. A
        // corrupt workspace.toml must still be deletable: deleting is how it gets fixed.
        match self.workspaces.load(id).await {
            Ok(_) | Err(Error::Corrupt { .. }) => {}
            Err(e) => return Err(e),
        }
        let devices = self.bindings.unbind_workspace(id).await?;
        self.workspaces.delete(id, DeleteCondition::Always).await?;
        self.forget_fresh(id);
        Ok(devices)
    }

    /// Which workspaces garbage collection would remove now (idle since `now - max_age`,
    /// never `default`), without removing any.
    pub async fn gc_plan(&self, max_age: Duration) -> Result<GcPlan> {
        let cutoff = Utc::now() - max_age;
        Ok(GcPlan {
            cutoff,
            stale: self.workspaces.gc(cutoff).await?,
        })
    }

    /// Removes a workspace's record, with its bindings, only if it is still idle since
    /// `cutoff` (checked atomically with the removal). Returns whether it was removed. Like
    /// [`Self::delete_record`], the record only.
    pub async fn delete_record_if_idle(
        &self,
        id: &WorkspaceId,
        cutoff: DateTime<Utc>,
    ) -> Result<bool> {
        let removed = self
            .workspaces
            .delete(id, DeleteCondition::IdleSince(cutoff))
            .await?;
        if removed {
            self.forget_fresh(id);
            self.bindings.unbind_workspace(id).await?;
        }
        Ok(removed)
    }

    /// A deleted workspace's use is a load again, which says it is gone.
    fn forget_fresh(&self, id: &WorkspaceId) {
        self.fresh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    /// The well-known `default` workspace, created on first use.
    pub async fn default_workspace(&self) -> Result<Workspace> {
        let id = WorkspaceId::default_workspace();
        match self.workspaces.load(&id).await {
            Err(e) if e.is_not_found() => {}
            other => return other,
        }
        let new = NewWorkspace {
            id: Some(id.clone()),
            description: "default workspace for single-user use".to_owned(),
            ..NewWorkspace::default()
        };
        match self.create(new).await {
            Err(Error::AlreadyExists { .. }) => self.workspaces.load(&id).await,
            other => other,
        }
    }

    /// Records a real use of the workspace (throttled to once a minute).
    pub async fn touch(&self, ws: &Workspace) -> Result<()> {
        let now = Utc::now();
        let mut accessed = ws.last_accessed;
        if now - accessed >= ACCESS_GRANULARITY {
            self.workspaces.update_accessed(&ws.id, now).await?;
            accessed = now;
        }
        let left = (ACCESS_GRANULARITY - (now - accessed))
            .to_std()
            .unwrap_or_default();
        let mut fresh = self.fresh.lock().unwrap_or_else(|e| e.into_inner());
        let at = std::time::Instant::now();
        // Bounded by the workspaces used within a minute: the stale ones go as others come.
        if fresh.len() >= 1024 {
            fresh.retain(|_, until| *until > at);
        }
        fresh.insert(ws.id.clone(), at + left);
        Ok(())
    }

    async fn touched(&self, mut ws: Workspace) -> Result<Workspace> {
        self.touch(&ws).await?;
        ws.last_accessed = ws.last_accessed.max(Utc::now() - ACCESS_GRANULARITY);
        Ok(ws)
    }

    pub async fn bind(&self, device: &DeviceId, ws: &Workspace) -> Result<Option<WorkspaceId>> {
        self.bindings.bind(device, &ws.id).await
    }

    pub async fn unbind(&self, device: &DeviceId) -> Result<WorkspaceId> {
        self.bindings
            .unbind(device)
            .await?
            .ok_or_else(|| Error::NotFound {
                what: format!("binding for device {:?}", device.as_str()),
                hint: Some(
                    "no binding is kept for that device; list the bindings to see them".to_owned(),
                ),
            })
    }

    pub async fn list_bindings(&self) -> Result<Vec<Binding>> {
        self.bindings.list().await
    }

    /// Records a use of the workspace that owns `scope` (a session's use counts for its
    /// workspace, so garbage collection keeps workspaces whose sessions are active).
    async fn touch_owner(&self, workspace: &WorkspaceId) -> Result<()> {
        let known_fresh = self
            .fresh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(workspace)
            .is_some_and(|until| *until > std::time::Instant::now());
        if known_fresh {
            return Ok(());
        }
        let ws = self.workspaces.load(workspace).await?;
        self.touch(&ws).await
    }

    fn owner(scope: &StorageScope) -> &WorkspaceId {
        match scope {
            StorageScope::Workspace(w) => w,
            StorageScope::Session { workspace, .. } => workspace,
        }
    }

    pub async fn read_storage(&self, scope: &StorageScope, path: &StoragePath) -> Result<Vec<u8>> {
        self.touch_owner(Self::owner(scope)).await?;
        self.storage.read(scope, path).await
    }

    /// `read_storage` for a caller that already holds the record of the workspace owning
    /// `scope` (it has just resolved it), which saves loading it again to record the use.
    pub async fn read_storage_of(
        &self,
        owner: &Workspace,
        scope: &StorageScope,
        path: &StoragePath,
    ) -> Result<Vec<u8>> {
        if &owner.id != Self::owner(scope) {
            return Err(Error::Refused(format!(
                "{scope} does not belong to workspace '{}'",
                owner.id
            )));
        }
        self.touch(owner).await?;
        self.storage.read(scope, path).await
    }

    pub async fn write_storage(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        contents: Vec<u8>,
    ) -> Result<()> {
        self.touch_owner(Self::owner(scope)).await?;
        self.storage.write(scope, path, contents).await
    }

    /// See [`StorageStore::write_unsynced`].
    pub async fn write_storage_unsynced(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        contents: Vec<u8>,
    ) -> Result<()> {
        self.touch_owner(Self::owner(scope)).await?;
        self.storage.write_unsynced(scope, path, contents).await
    }

    /// See [`StorageStore::append_unsynced`].
    pub async fn append_storage_unsynced(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        more: Vec<u8>,
    ) -> Result<()> {
        self.storage.append_unsynced(scope, path, more).await
    }

    pub async fn list_storage(
        &self,
        scope: &StorageScope,
        dir: Option<&StoragePath>,
    ) -> Result<Vec<StorageEntry>> {
        self.touch_owner(Self::owner(scope)).await?;
        self.storage.list(scope, dir).await
    }

    pub async fn remove_storage(
        &self,
        scope: &StorageScope,
        path: &StoragePath,
        recursive: bool,
    ) -> Result<()> {
        self.touch_owner(Self::owner(scope)).await?;
        self.storage.remove(scope, path, recursive).await
    }

    /// Creates a session. Provider and model are the caller's to choose (the CLI and the ACP
    /// agent take them from the workspace's merged config), so the frontmatter records what is
    /// actually called.
    pub async fn create_session(&self, new: NewSession) -> Result<Session> {
        self.touch_owner(&new.workspace).await?;
        self.sessions.create(new, Utc::now()).await
    }

    /// Finds a session by exact id or unambiguous id prefix (4+ characters).
    pub async fn resolve_session(&self, identifier: &str) -> Result<Session> {
        let id = SessionId::new(identifier)?;
        match self.sessions.load(&id).await {
            Err(e) if e.is_not_found() => {}
            other => return other,
        }
        let not_found = || Error::NotFound {
            what: format!("session {identifier:?}"),
            hint: Some(match identifier.len() < MIN_PREFIX {
                true => format!(
                    "no session has that id, and an id prefix needs {MIN_PREFIX} or more characters; list the sessions to see theirs"
                ),
                false => "no session has that id or id prefix; list the sessions to see theirs"
                    .to_owned(),
            }),
        };
        if identifier.len() < MIN_PREFIX {
            return Err(not_found());
        }
        let ids = self.sessions.list_ids().await?;
        let named = match named_by_id(identifier, ids, |id| id.as_str()) {
            Named::Nothing => Vec::new(),
            Named::One(id) => vec![id],
            Named::Several(ids) => ids,
        };
        let mut found = Vec::new();
        for id in named {
            // The id list may hold sessions deleted a moment ago; only live ones count.
            match self.sessions.load(&id).await {
                Ok(s) => found.push(s),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        match Named::of(found) {
            Named::Nothing => Err(not_found()),
            Named::One(session) => Ok(session),
            Named::Several(found) => Err(Error::Ambiguous {
                identifier: identifier.to_owned(),
                candidates: found
                    .iter()
                    .map(|s| match s.title.as_str() {
                        "" => s.id.to_string(),
                        t => format!("{} ({t})", s.id),
                    })
                    .collect(),
            }),
        }
    }

    pub async fn append_message(&self, session: &Session, message: &Message) -> Result<()> {
        self.touch_owner(&session.workspace_id).await?;
        self.sessions.append(&session.id, message).await
    }

    /// See [`SessionStore::append_syncing`].
    pub async fn append_message_syncing(
        &self,
        session: &Session,
        message: &Message,
    ) -> Result<crate::Syncing> {
        self.touch_owner(&session.workspace_id).await?;
        self.sessions.append_syncing(&session.id, message).await
    }

    /// See [`SessionStore::transcript_stamp`].
    pub async fn transcript_stamp(&self, session: &Session) -> Result<crate::TranscriptStamp> {
        self.sessions.transcript_stamp(&session.id).await
    }

    pub async fn read_transcript(&self, session: &Session) -> Result<Transcript> {
        self.sessions.read_transcript(&session.id).await
    }

    pub async fn clear_session(&self, session: &Session) -> Result<()> {
        self.touch_owner(&session.workspace_id).await?;
        self.sessions.clear(&session.id).await
    }

    pub async fn delete_session(&self, session: &Session) -> Result<()> {
        self.sessions.delete(&session.id).await
    }

    pub async fn set_session_status(
        &self,
        session: &Session,
        status: SessionStatus,
    ) -> Result<Session> {
        self.touch_owner(&session.workspace_id).await?;
        self.sessions
            .set_status(&session.id, status, Utc::now())
            .await
    }

    /// The config in force for `workspace` (or globally with `None`): `global` is the global
    /// file's text, which lives beside the store rather than in it.
    pub async fn config(
        &self,
        global: Option<&ConfigText>,
        workspace: Option<&WorkspaceId>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<LoadedConfig> {
        let ws_text = match workspace {
            Some(id) => self.workspaces.load_config(id).await?,
            None => None,
        };
        self.layered.layer(global, ws_text.as_ref(), env)
    }
}

#[cfg(test)]
mod rule_tests {
    use super::*;

    #[test]
    fn an_exact_id_wins_then_a_prefix_names_one_or_is_ambiguous() {
        let ids = ["abcd1234", "abcd", "abce0000", "ffff0000"];
        let named = |identifier| named_by_id(identifier, ids, |id| id);
        // "abcd" is an id and a prefix of another: the id wins.
        assert_eq!(named("abcd"), Named::One("abcd"));
        assert_eq!(named("abcd12"), Named::One("abcd1234"));
        assert_eq!(named("abc"), Named::Nothing, "shorter than MIN_PREFIX");
        assert_eq!(named("0000"), Named::Nothing);
        let two = ["abcd1234", "abcd9999"];
        assert_eq!(
            named_by_id("abcd", two, |id| id),
            Named::Several(vec!["abcd1234", "abcd9999"])
        );
    }
}
