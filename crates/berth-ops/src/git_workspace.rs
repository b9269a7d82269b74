//! Git workspaces: a berth workspace record and a git worktree kept in step.
//!
//! The record is written first, the worktree second, and any failure after the record exists
//! (git refusing, a copy failing, a setup command failing or timing out) undoes both, so a
//! failed create leaves no folder, no branch and no metadata. Removal goes the other way:
//! the worktree first, refusing if that would lose work, then the record.
//!
//! Every git call blocks, so each runs on tokio's blocking pool: an async server (MCP) keeps
//! answering other requests while a checkout runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_core::config::GitSettings;
use berth_core::{
    DeviceId, ErrorKind, GitInfo, NewWorkspace, PortRange, Workspace, WorkspaceId, WorkspaceManager,
};
use berth_git::spares::SparePool;
use berth_git::{
    BranchSpec, Copied, GitError, Health, Repo, WorktreePlan, WorktreeRef, WorktreeStatus,
};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::{Error, Result, blocking};
use crate::view::KeptView;

/// Setup commands get this long unless `[git] setup_timeout_secs` says otherwise.
pub const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(600);

/// What makes a workspace a git workspace.
#[derive(Debug, Clone)]
pub struct GitRequest {
    /// Any folder inside the repository (a linked worktree of it counts as the repository).
    pub repo: PathBuf,
    /// `None` creates `berth/<name>` (or `berth/<id>` for an unnamed workspace).
    pub branch: Option<BranchSpec>,
    /// `None` uses the repository's default base.
    pub base: Option<String>,
}

/// Where a new worktree started, as a person wants to see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StartPoint {
    /// The revision as named: the base of a new branch, or the branch checked out.
    #[serde(rename = "ref")]
    pub rev: String,
    /// Its commit, abbreviated.
    pub sha: String,
}

/// Something about a new workspace that its creator should know, though nothing failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CreateWarning {
    /// The default base lags behind the branch checked out in the main worktree, so the new
    /// branch starts from older code than the person is looking at.
    StaleBase {
        base: String,
        sha: String,
        branch: String,
        behind: usize,
        repo: PathBuf,
    },
    /// A `[git] copy` entry the main checkout does not have.
    MissingCopy { entry: String, repo: PathBuf },
    /// `[git] copy` entries, in a bare repository: there is no checkout to copy them from.
    NoCheckoutToCopyFrom { repo: PathBuf, entries: Vec<String> },
    /// The repository was moved: linked worktrees (berth's among them, perhaps) still point
    /// at where it was.
    MovedRepository {
        repo: PathBuf,
        from: PathBuf,
        worktrees: usize,
    },
}

impl CreateWarning {
    /// The warning, naming the option that starts from another base as `base` spells it for
    /// a revision (the CLI: `--base REV`; MCP: `base_branch="REV"`).
    pub fn message(&self, base: impl Fn(&str) -> String) -> String {
        match self {
            CreateWarning::StaleBase {
                base: from,
                sha,
                branch,
                behind,
                repo,
            } => format!(
                "the new branch starts from {from} ({sha}), which is {behind} commit(s) behind {branch}, the branch checked out in {}; to start from {branch} instead, pass {}",
                repo.display(),
                base(branch)
            ),
            CreateWarning::MissingCopy { entry, repo } => format!(
                "[git] copy entry {entry:?} is not in the main checkout {}, so nothing was copied for it",
                repo.display()
            ),
            CreateWarning::NoCheckoutToCopyFrom { repo, entries } => format!(
                "{} is a bare repository, so there is no checkout to copy [git] copy entries from; nothing was copied ({})",
                repo.display(),
                entries.join(", ")
            ),
            CreateWarning::MovedRepository {
                repo,
                from,
                worktrees,
            } => format!(
                "this repository was moved from {}: {worktrees} of its worktree(s) still point there; run `berth workspace repair --repo {}` to reattach them and the berth workspaces on them",
                from.display(),
                repo.display()
            ),
        }
    }
}

impl std::fmt::Display for CreateWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message(|rev| format!("--base {rev}")))
    }
}

/// A workspace just made, with where its worktree started and what its creator should know.
#[derive(Debug)]
pub struct Made {
    pub workspace: Workspace,
    pub start: Option<StartPoint>,
    pub warnings: Vec<CreateWarning>,
}

/// Creates a workspace; with `git`, also its worktree, copies and setup commands, all or
/// nothing. `settings` is berth's own `[git]` config (never read from the repository). Setup
/// commands are the workspace's first processes, so a workspace with any is given its block of
/// ports from `ports` before git runs; one without holds none until it needs them.
pub async fn create(
    manager: &WorkspaceManager,
    mut new: NewWorkspace,
    git: Option<GitRequest>,
    settings: &GitSettings,
    ports: PortRange,
) -> Result<Made> {
    let Some(request) = git else {
        return Ok(Made {
            workspace: manager.create(new).await?,
            start: None,
            warnings: Vec::new(),
        });
    };
    let id = new.id.take().unwrap_or_else(WorkspaceId::generate);
    let worktree = worktree_path(manager, &id, settings)?;
    let default_branch = format!(
        "berth/{}",
        new.name.as_ref().map_or(id.as_str(), |n| n.as_str())
    );
    let (repo, plan, start, mut warnings) =
        blocking(move || plan_worktree(request, default_branch)).await?;
    let pool = match settings.spare_worktrees {
        Some(n) if n > 0 => Some(SparePool::new(&spare_base(manager, settings)?, &repo)),
        _ => None,
    };
    new.id = Some(id);
    new.git = Some(GitInfo {
        repo: utf8("the repository path", repo.root())?,
        branch: plan.branch.clone(),
        base_branch: plan.base_branch.clone(),
        branch_created: plan.branch_created,
        worktree: utf8("the worktree path", &worktree)?,
    });
    // The record first: it claims the id and name, and a crash from here on leaves a
    // workspace that `workspace delete --force` cleans up, never an orphan worktree.
    let mut ws = manager.create(new).await?;
    if !settings.setup.is_empty() {
        // Before git runs, so that a full range undoes nothing but the record.
        match manager.workspaces().assign_ports(&ws.id, ports).await {
            Ok(block) => ws.ports = Some(block),
            Err(error) => return Err(undo_record(manager, &ws.id, error.into()).await),
        }
    }
    let settings = settings.clone();
    let ws_env = workspace_env(&ws);
    let prepared = blocking({
        let git = ws.git.clone().expect("set above");
        let id = ws.id.clone();
        move || {
            let worktree = git.worktree.as_path();
            if let Some(parent) = worktree.parent() {
                std::fs::create_dir_all(parent).map_err(|source| GitError::Io {
                    context: format!("cannot create {}", parent.display()),
                    source,
                })?;
            }
            // A spare checkout, if one is ready, else git's own; either undoes its own partial
            // work when git fails.
            let from_spare = match &pool {
                Some(pool) => pool.take(&repo, worktree, &plan)?,
                None => false,
            };
            if !from_spare {
                repo.create(worktree, &plan)?;
            }
            let prepared = prepare(&repo, worktree, &settings, &ws_env);
            if let Err(error) = prepared {
                if let Err(cleanup) = repo.remove_worktree(worktree_ref(&git), true) {
                    return Err(Error::RollbackFailed {
                        error: Box::new(error),
                        cleanup: format!(
                            "{cleanup}; workspace {id} is kept so that `berth workspace delete --force {id}` can finish the cleanup"
                        ),
                    });
                }
                return Err(error);
            }
            prepared
        }
    })
    .await;
    match prepared {
        Ok(prepared) => {
            warnings.extend(prepared);
            Ok(Made {
                workspace: ws,
                start: Some(start),
                warnings,
            })
        }
        // The worktree could not be removed: the record stays, to find it by.
        Err(e @ Error::RollbackFailed { .. }) => Err(e),
        // The worktree is gone; now the record.
        Err(error) => Err(undo_record(manager, &ws.id, error).await),
    }
}

/// The repository, the worktree's plan and start, and what the person should know of them
/// (a stale default base, worktrees stranded by a moved repository). Run off the async
/// threads: it reads the repository.
fn plan_worktree(
    request: GitRequest,
    default_branch: String,
) -> Result<(Repo, WorktreePlan, StartPoint, Vec<CreateWarning>)> {
    let repo = Repo::discover(&request.repo)?;
    let spec = request.branch.unwrap_or(BranchSpec::New(default_branch));
    let plan = repo.plan(&spec, request.base.as_deref())?;
    let start = StartPoint {
        rev: plan.start().to_owned(),
        sha: repo.short_sha(plan.start())?,
    };
    let mut warnings = Vec::new();
    // A base the person chose is theirs; the default one may be older than the code
    // they are looking at.
    if request.base.is_none()
        && matches!(spec, BranchSpec::New(_))
        && let Some(behind) = repo.base_behind_checkout(plan.start())
    {
        warnings.push(CreateWarning::StaleBase {
            base: start.rev.clone(),
            sha: start.sha.clone(),
            branch: behind.branch,
            behind: behind.commits,
            repo: repo.root().to_owned(),
        });
    }
    let stranded = repo.stranded_worktrees();
    if let Some((_, from)) = stranded.first() {
        warnings.push(CreateWarning::MovedRepository {
            repo: repo.root().to_owned(),
            from: from.clone(),
            worktrees: stranded.len(),
        });
    }
    Ok((repo, plan, start, warnings))
}

/// Deletes the record of a workspace whose create failed with `error`: the error, said to be
/// rolled back, or with why the record could not be deleted.
async fn undo_record(manager: &WorkspaceManager, id: &WorkspaceId, error: Error) -> Error {
    match manager.delete_record(id).await {
        Ok(_) => Error::RolledBack(Box::new(error)),
        Err(cleanup) => Error::RollbackFailed {
            error: Box::new(error),
            cleanup: cleanup.to_string(),
        },
    }
}

/// What adopting the linked worktree at `path` would record: its repository (the main
/// checkout), the branch checked out there (or a detached HEAD), `base` or the repository's
/// default base, and the worktree's path as it is. `branch_created` is false: berth did not
/// make the branch, so it never deletes it. Refused when another workspace already records that
/// worktree, so no two records can remove one folder.
pub async fn adoption(
    manager: &WorkspaceManager,
    path: &Path,
    base: Option<String>,
) -> Result<GitInfo> {
    let path = path.to_owned();
    let (found, base_branch) = blocking(move || {
        let found = berth_git::linked_worktree(&path)?;
        let base = match base {
            Some(b) => b,
            None => found.repo.default_base()?,
        };
        Ok((found, base))
    })
    .await?;
    if let Some(owner) = recorded_at(manager, &found.path).await? {
        return Err(Error::rule(
            ErrorKind::Conflict,
            format!(
                "the worktree {} is already berth workspace {}",
                found.path.display(),
                owner.label()
            ),
        ));
    }
    Ok(GitInfo {
        repo: utf8("the repository path", found.repo.root())?,
        branch: found.branch,
        base_branch,
        branch_created: false,
        worktree: utf8("the worktree path", &found.path)?,
    })
}

/// The workspace whose recorded worktree is `worktree` (compared with symlinks resolved).
pub async fn recorded_at(manager: &WorkspaceManager, worktree: &Path) -> Result<Option<Workspace>> {
    let wanted = worktree
        .canonicalize()
        .unwrap_or_else(|_| worktree.to_owned());
    Ok(manager.list().await?.into_iter().find(|ws| {
        ws.git.as_ref().is_some_and(|git| {
            git.worktree == wanted || git.worktree.canonicalize().is_ok_and(|p| p == wanted)
        })
    }))
}

/// What a process started for `ws` is told about it: its ports (`BERTH_PORT`,
/// `BERTH_PORT_1` …), none for a workspace without a block yet (`Ops::with_ports` gives one).
pub fn workspace_env(ws: &Workspace) -> Vec<(String, String)> {
    ws.ports.map(|p| p.env()).unwrap_or_default()
}

/// Records an existing linked worktree as a new git workspace (see [`adoption`]). Nothing runs
/// in the worktree: no checkout, no `[git] copy`, no setup commands; it is used as it is.
pub async fn adopt(
    manager: &WorkspaceManager,
    mut new: NewWorkspace,
    path: &Path,
) -> Result<Workspace> {
    new.git = Some(adoption(manager, path, None).await?);
    Ok(manager.create(new).await?)
}

/// Checks out submodules (unless `[git] submodules = false`), copies `[git] copy` files and
/// runs `[git] setup` commands in a fresh worktree, in that order (setup may need the
/// submodules); warns of copy entries it could not copy. A failure of any of them fails the
/// create, which is rolled back.
fn prepare(
    repo: &Repo,
    worktree: &Path,
    settings: &GitSettings,
    env: &[(String, String)],
) -> Result<Vec<CreateWarning>> {
    let mut warnings = Vec::new();
    if settings.submodules() {
        repo.init_submodules(worktree)?;
    }
    if repo.is_bare() {
        // No checkout to copy from: the bare folder holds git's own files, never a `.env`.
        if !settings.copy.is_empty() {
            warnings.push(CreateWarning::NoCheckoutToCopyFrom {
                repo: repo.root().to_owned(),
                entries: settings.copy.clone(),
            });
        }
    } else {
        let Copied { missing, .. } = berth_git::copy_files(repo.root(), worktree, &settings.copy)?;
        warnings.extend(missing.into_iter().map(|entry| CreateWarning::MissingCopy {
            entry,
            repo: repo.root().to_owned(),
        }));
    }
    let timeout = settings
        .setup_timeout_secs
        .map_or(DEFAULT_SETUP_TIMEOUT, Duration::from_secs);
    berth_git::run_setup(worktree, &settings.setup, env, timeout)?;
    Ok(warnings)
}

/// What `remove` did besides deleting the record.
#[derive(Debug, Default)]
pub struct Removed {
    pub unbound: Vec<DeviceId>,
    /// Something the person should know, e.g. that the repository was already gone.
    pub warning: Option<String>,
}

/// Removes a workspace. For a git workspace the worktree goes first, refused (and nothing
/// removed) when it holds uncommitted changes or commits nothing else keeps, unless `force`;
/// a forced removal first keeps that work on `refs/berth/lost/<id>` (the warning names it).
/// Then the record.
pub async fn remove(manager: &WorkspaceManager, ws: &Workspace, force: bool) -> Result<Removed> {
    let mut warning = None;
    // An archived workspace's worktree and the branch berth made went with its archive; a
    // branch of that name now is someone else's.
    if let Some(git) = ws.git.clone().filter(|_| !ws.is_archived()) {
        let keep = force.then(|| lost_ref(&ws.id));
        warning = blocking(move || remove_worktree(&git, keep.as_deref())).await?;
    }
    let unbound = manager.delete_record(&ws.id).await?;
    Ok(Removed { unbound, warning })
}

/// Where a forced removal of workspace `id` keeps the work it would otherwise lose: where an
/// archive keeps it too.
fn lost_ref(id: &WorkspaceId) -> String {
    crate::archive::lost_ref(id)
}

/// Removes the worktree (and the branch berth made). Without `keep` (unforced) the check for
/// lost work runs here, at the moment of removal, whatever was checked before. With it
/// (forced), what would be lost is first put on that ref.
fn remove_worktree(git: &GitInfo, keep: Option<&str>) -> Result<Option<String>> {
    let worktree = git.worktree.as_path();
    let force = keep.is_some();
    match Repo::open(&git.repo) {
        Ok(repo) => {
            let kept = match keep {
                Some(refname) => repo
                    .keep_lost_work(worktree_ref(git), refname)
                    .map_err(|e| {
                        Error::rule(
                            ErrorKind::External,
                            format!(
                                "cannot keep the worktree's work on {refname} before removing it, so nothing was removed: {e}"
                            ),
                        )
                    })?,
                None => None,
            };
            repo.remove_worktree(worktree_ref(git), force)
                .map_err(Error::removal)?;
            Ok(kept.map(|k| {
                format!(
                    "kept {} commit(s) and {} uncommitted file(s) that the forced delete would have lost on {}; `git -C {} branch NAME {}` brings them back",
                    k.commits,
                    k.uncommitted,
                    k.refname,
                    git.repo.display(),
                    k.refname
                )
            }))
        }
        Err(_) if !worktree.exists() => Ok(Some(format!(
            "the repository {} and the worktree were both gone already",
            git.repo.display()
        ))),
        Err(_) if force => {
            std::fs::remove_dir_all(worktree).map_err(|source| GitError::Io {
                context: format!("cannot remove {}", worktree.display()),
                source,
            })?;
            Ok(Some(format!(
                "the repository {} is gone; removed the worktree folder without git",
                git.repo.display()
            )))
        }
        Err(_) => Err(Error::RepositoryGone {
            repo: git.repo.clone(),
            worktree: git.worktree.clone(),
        }),
    }
}

/// Whether removing this workspace would lose work; `Err` says why. Plain workspaces, and
/// git workspaces whose worktree and repository are both gone, are always removable.
pub async fn check_removable(ws: &Workspace) -> Result<()> {
    let Some(git) = ws.git.clone().filter(|_| !ws.is_archived()) else {
        return Ok(());
    };
    blocking(move || match Repo::open(&git.repo) {
        Ok(repo) => repo
            .check_removable(worktree_ref(&git))
            .map_err(Error::removal),
        Err(_) if !git.worktree.exists() => Ok(()),
        Err(_) => Err(Error::RepositoryGone {
            repo: git.repo.clone(),
            worktree: git.worktree.clone(),
        }),
    })
    .await
}

/// A workspace `repair` reattached to its moved repository.
#[derive(Debug, Clone, Serialize)]
pub struct Reattached {
    pub id: WorkspaceId,
    pub label: String,
    /// The repository as it was recorded.
    pub from: PathBuf,
    /// Its worktree, where it is now.
    pub worktree: PathBuf,
}

/// What `berth workspace repair` did.
#[derive(Debug, Clone, Serialize)]
pub struct RepairReport {
    /// The repository, where it is now.
    pub repo: PathBuf,
    pub reattached: Vec<Reattached>,
    /// Workspaces whose repository is gone from where it was recorded and that could not be
    /// matched to this one, with the reason.
    pub skipped: Vec<KeptView>,
    /// Spare checkouts left under the repository's old path, removed.
    pub spares_removed: usize,
}

/// Reattaches the workspaces of the repository containing `path`, which was moved: git's
/// `worktree repair` first (so each worktree's `.git` file leads to the repository again),
/// then each record, whose repository becomes the new path. A workspace counts as this
/// repository's only when the repository recorded for it is gone and git's own record of
/// the worktree here names it; a worktree that lived inside the repository is looked for at
/// the same place inside the new one. Spares left in the old path's pool are removed.
pub async fn repair(
    manager: &WorkspaceManager,
    path: &Path,
    settings: &GitSettings,
) -> Result<RepairReport> {
    let path = path.to_owned();
    let repo = blocking(move || Ok(Repo::discover(&path)?)).await?;
    let root = repo.root().to_owned();
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    for ws in manager.list().await? {
        // An archived workspace has no worktree to reattach.
        let Some(git) = ws.git.clone().filter(|_| !ws.is_archived()) else {
            continue;
        };
        let repo = repo.clone();
        let found_at = blocking(move || Ok(moved_worktree(&repo, &git))).await?;
        match found_at {
            Ok(at) => found.push((ws, at)),
            Err(Some(reason)) => skipped.push(KeptView::new(&ws, reason)),
            Err(None) => {}
        }
    }
    // Git first: every worktree's `.git` file, and the records of those that moved with the
    // repository.
    let moved: Vec<PathBuf> = found
        .iter()
        .filter(|(ws, at)| ws.git.as_ref().is_some_and(|g| &g.worktree != at))
        .map(|(_, at)| at.clone())
        .collect();
    let checked = {
        let repo = repo.clone();
        let found: Vec<PathBuf> = found.iter().map(|(_, at)| at.clone()).collect();
        blocking(move || {
            let moved: Vec<&Path> = moved.iter().map(PathBuf::as_path).collect();
            repo.repair_worktrees(&moved)?;
            Ok(found
                .iter()
                .map(|at| {
                    berth_git::linked_worktree(at)
                        .map(|w| w.repo.root() == repo.root())
                        .unwrap_or(false)
                })
                .collect::<Vec<bool>>())
        })
        .await?
    };
    let mut reattached = Vec::new();
    let mut old_roots = Vec::new();
    for ((ws, at), ok) in found.into_iter().zip(checked) {
        let old = ws.git.clone().expect("only git workspaces were found");
        if !ok {
            skipped.push(KeptView::new(
                &ws,
                format!(
                    "git could not reattach its worktree {} to {}",
                    at.display(),
                    root.display()
                ),
            ));
            continue;
        }
        let git = GitInfo {
            repo: utf8("the repository path", &root)?,
            worktree: utf8("the worktree path", &at)?,
            ..old.clone()
        };
        manager.workspaces().set_git(&ws.id, &git).await?;
        if !old_roots.contains(&old.repo) {
            old_roots.push(old.repo.clone());
        }
        reattached.push(Reattached {
            id: ws.id.clone(),
            label: ws.label(),
            from: old.repo,
            worktree: at,
        });
    }
    let base = spare_base(manager, settings)?;
    let spares_removed = blocking(move || clear_spares_of(&base, &old_roots, &repo)).await?;
    Ok(RepairReport {
        repo: root,
        reattached,
        skipped,
        spares_removed,
    })
}

/// Where the worktree of a workspace whose repository moved to `repo` is now; why it cannot
/// be told, or none when the workspace is not one of this repository's moved ones.
fn moved_worktree(repo: &Repo, git: &GitInfo) -> std::result::Result<PathBuf, Option<String>> {
    if git.repo == repo.root() || Repo::open(&git.repo).is_ok() {
        return Err(None);
    }
    let at = match git.worktree.strip_prefix(&git.repo) {
        Ok(inside) if !git.worktree.exists() => repo.root().join(inside),
        _ => git.worktree.clone(),
    };
    if !at.exists() {
        return Err(Some(format!(
            "its repository {} is gone and so is its worktree {}, so berth cannot tell whether it was this repository's",
            git.repo.display(),
            git.worktree.display()
        )));
    }
    if repo.owns_worktree(&git.worktree, &at) {
        Ok(at)
    } else {
        Err(None)
    }
}

/// Removes the spare checkouts kept for the repository at its old roots: how many.
fn clear_spares_of(base: &Path, old_roots: &[PathBuf], repo: &Repo) -> Result<usize> {
    let mut removed = 0;
    for old in old_roots {
        let pool = SparePool::for_root(base, old);
        if pool.dir().exists() {
            removed += pool.clear(repo)?;
        }
    }
    Ok(removed)
}

/// What garbage collection did with one planned workspace.
#[derive(Debug)]
pub enum Collected {
    /// Removed, worktree and record; with a warning about the cleanup, if any.
    Removed(Option<String>),
    /// Kept whole (the record as it is now), for the reason given.
    Kept(Box<Workspace>, String),
    /// Already gone when its turn came.
    Gone,
}

/// Collects one workspace planned at `cutoff`: the worktree first, checked for lost work at
/// that moment and never forced, then the record, only if it is still idle. A workspace used
/// since the plan, or whose worktree gained work, is kept whole.
pub async fn collect(
    manager: &WorkspaceManager,
    id: &WorkspaceId,
    cutoff: DateTime<Utc>,
) -> Result<Collected> {
    // The record as it is now, not as it was planned: it may have been used, or its
    // worktree moved, since.
    let ws = match manager.workspaces().load(id).await {
        Ok(ws) => ws,
        Err(e) if e.is_not_found() => return Ok(Collected::Gone),
        Err(e) => return Err(e.into()),
    };
    if ws.last_accessed >= cutoff {
        return Ok(Collected::Kept(
            Box::new(ws),
            "it was used after garbage collection looked at it".to_owned(),
        ));
    }
    let mut warning = None;
    if let Some(git) = ws.git.clone() {
        match blocking(move || remove_worktree(&git, None)).await {
            Ok(w) => warning = w,
            Err(e) if e.kind() == ErrorKind::Refused => {
                return Ok(Collected::Kept(
                    Box::new(ws),
                    format!("it changed after garbage collection looked at it: {e}"),
                ));
            }
            // One worktree git cannot remove does not stop the others; its record stays.
            Err(e) => {
                return Ok(Collected::Kept(
                    Box::new(ws),
                    format!("its worktree could not be removed: {e}"),
                ));
            }
        }
    }
    if manager.delete_record_if_idle(&ws.id, cutoff).await? {
        Ok(Collected::Removed(warning))
    } else {
        // Used in the moment between the two steps. The worktree held no uncommitted work
        // and no unmerged commits (that was checked as it went), and the record with its
        // storage and sessions stays.
        Ok(Collected::Kept(
            Box::new(ws),
            "it was used while its worktree was being removed; its record, storage and sessions are kept (the worktree had nothing uncommitted or unmerged)".to_owned(),
        ))
    }
}

/// The state of a git workspace's worktree. Never fails: what cannot be known is left out
/// and `health` says why.
pub fn status(git: &GitInfo) -> WorktreeStatus {
    match Repo::open(&git.repo) {
        Ok(repo) => repo.status(worktree_ref(git)),
        Err(_) => WorktreeStatus::unknown(Health::RepoMissing, &git.branch, &git.base_branch),
    }
}

/// What a reviewer of a git workspace wants beyond its status: which files are uncommitted and
/// which commits the branch adds to its base.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Review {
    pub status: WorktreeStatus,
    /// `git status --porcelain` entries: two status letters and the path.
    pub uncommitted: Vec<String>,
    /// `<short sha> <subject>` of the commits ahead of the base, newest first.
    pub commits: Vec<String>,
}

/// Commits listed in a [`Review`] at most; a branch further ahead says so by its `ahead` count.
pub const REVIEW_MAX_COMMITS: usize = 50;

/// The status of `git`'s worktree with its uncommitted files and new commits. Never fails:
/// what git cannot tell is left empty, and `status.health` says why.
pub fn review(git: &GitInfo) -> Review {
    let status = status(git);
    let mut review = Review {
        status,
        uncommitted: Vec::new(),
        commits: Vec::new(),
    };
    if review.status.health != Health::Ok {
        return review;
    }
    review.uncommitted = berth_git::changed_paths(&git.worktree).unwrap_or_default();
    // The branch's tip, or the commit a detached worktree has checked out.
    if let Ok(repo) = Repo::open(&git.repo)
        && let Some(tip) = repo.tip(worktree_ref(git))
    {
        review.commits = repo
            .commits_ahead(&git.base_branch, &tip, REVIEW_MAX_COMMITS)
            .unwrap_or_default();
    }
    review
}

/// Statuses of many worktrees, a few at a time (each costs a handful of git processes).
pub async fn statuses(gits: Vec<GitInfo>) -> Result<Vec<WorktreeStatus>> {
    blocking(move || {
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
        let chunk = gits.len().div_ceil(workers).max(1);
        Ok(std::thread::scope(|scope| {
            let handles: Vec<_> = gits
                .chunks(chunk)
                .map(|part| scope.spawn(move || part.iter().map(status).collect::<Vec<_>>()))
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("status never panics"))
                .collect()
        }))
    })
    .await
}

fn worktree_ref(git: &GitInfo) -> WorktreeRef<'_> {
    WorktreeRef {
        path: &git.worktree,
        branch: &git.branch,
        base_branch: &git.base_branch,
        branch_created: git.branch_created,
    }
}

/// Where spare checkouts live: beside the worktrees, so taking one is a rename.
pub(crate) fn spare_base(manager: &WorkspaceManager, settings: &GitSettings) -> Result<PathBuf> {
    // Where any workspace's worktree would go; the pool sits beside them all, so any id does.
    let worktree = worktree_path(manager, &WorkspaceId::default_workspace(), settings)?;
    let beside = match &settings.worktree_dir {
        Some(_) => worktree.parent(),
        // <home>/workspaces/<id>/worktree → <home>
        None => worktree
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent),
    };
    let base = beside.ok_or_else(no_worktree_home)?;
    Ok(base.join(".berth-spares"))
}

/// The spare pool of the repository containing `repo`, and the repository.
pub fn spare_pool(
    manager: &WorkspaceManager,
    repo: &Path,
    settings: &GitSettings,
) -> Result<(SparePool, Repo)> {
    let repo = Repo::discover(repo)?;
    let base = spare_base(manager, settings)?;
    Ok((SparePool::new(&base, &repo), repo))
}

/// Says that process `pid` is about to fill the spares of the repository whose main checkout
/// is `root` (see `SparePool::announce_fill`).
pub fn announce_refill(
    manager: &WorkspaceManager,
    root: &Path,
    settings: &GitSettings,
    pid: u32,
) -> Result<()> {
    SparePool::for_root(&spare_base(manager, settings)?, root).announce_fill(pid);
    Ok(())
}

/// Tops up the repository's spare checkouts to `want`, at its default base. Blocks for as long
/// as the checkouts take; meant for a background process or task.
pub fn fill_spares(pool: &SparePool, repo: &Repo, want: usize) -> Result<()> {
    let base = repo.default_base()?;
    Ok(pool.fill(repo, &base, want)?)
}

/// `[git] worktree_dir/<id>`, else the store's `workspaces/<id>/worktree`.
fn worktree_path(
    manager: &WorkspaceManager,
    id: &WorkspaceId,
    settings: &GitSettings,
) -> Result<PathBuf> {
    match &settings.worktree_dir {
        Some(dir) if Path::new(dir).is_absolute() => Ok(Path::new(dir).join(id.as_str())),
        Some(dir) => Err(Error::invalid(format!(
            "[git] worktree_dir must be an absolute path, not {dir:?}"
        ))),
        None => manager
            .workspaces()
            .workspace_dir(id)
            .map(|d| d.join("worktree"))
            .ok_or_else(no_worktree_home),
    }
}

fn no_worktree_home() -> Error {
    Error::invalid(
        "this store keeps no folders, so git workspaces need [git] worktree_dir in the config",
    )
}

/// `path`, refused unless it is UTF-8: records keep paths as text.
fn utf8(what: &'static str, path: &Path) -> Result<PathBuf> {
    match path.to_str() {
        Some(_) => Ok(path.to_owned()),
        None => Err(Error::NonUtf8Path {
            what,
            path: path.to_owned(),
        }),
    }
}
