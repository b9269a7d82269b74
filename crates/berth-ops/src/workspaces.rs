//! Workspace operations: create (deciding plain or git, and the branch rules), list, show,
//! delete, garbage collection (lost-work refs too, `lost`), path and spare checkouts.

use std::path::{Path, PathBuf};

use berth_core::config::GitSettings;
use berth_core::{DeviceId, ErrorKind, NewWorkspace, Workspace, WorkspaceId, WorkspaceName};
use berth_git::{BranchSpec, GitError, Repo, WorktreeStatus};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::{Error, Result, blocking};
use crate::git_workspace::{self, Collected, GitRequest};
pub use crate::git_workspace::{CreateWarning, Reattached, RepairReport, StartPoint};
use crate::lost::LostRefView;
use crate::view::{KeptView, PortsView, WorkspaceView};
use crate::{Ops, Refill};

/// Where a new workspace's repository comes from.
#[derive(Debug, Clone)]
pub enum Repository {
    /// The repository containing this folder, if there is one (the CLI's current folder);
    /// outside a repository the workspace is plain, unless a branch or base was asked for.
    Around(PathBuf),
    /// This repository, which must be one (`--repo`, or a server started in one).
    Named(PathBuf),
    /// No repository: a plain workspace (a server started outside any repository).
    None,
}

/// What a front end's `--repo` named: a folder, or a URL, whose clone under the home is made
/// from and given back to (see [`Ops::named_repository`]).
#[derive(Debug, Clone)]
pub struct NamedRepository {
    /// The repository to make worktrees of: the folder named, or berth's clone of the URL.
    pub path: PathBuf,
    /// The URL, when one was named: work made from it goes back to it as pushed branches.
    pub url: Option<String>,
}

/// A request to create a workspace, as a front end received it. [`Ops::create_workspace`]
/// checks every rule, in one place for every front end.
#[derive(Debug, Clone)]
pub struct CreateWorkspace {
    /// A client-chosen id (a mobile app's persistent id); a fresh UUID when `None`.
    pub id: Option<String>,
    pub name: Option<String>,
    pub description: String,
    pub agent_id: Option<String>,
    /// A plain folder even where a repository is at hand.
    pub plain: bool,
    pub repository: Repository,
    /// Create this new branch instead of `berth/<name>`.
    pub new_branch: Option<String>,
    /// Check out this existing branch (local, or `origin/<branch>` tracked locally).
    pub checkout: Option<String>,
    /// Where a new branch starts and what ahead/behind is measured against.
    pub base: Option<String>,
}

impl CreateWorkspace {
    /// A plain request with everything else left out.
    pub fn new(repository: Repository) -> CreateWorkspace {
        CreateWorkspace {
            id: None,
            name: None,
            description: String::new(),
            agent_id: None,
            plain: false,
            repository,
            new_branch: None,
            checkout: None,
            base: None,
        }
    }

    fn asks_for_git(&self) -> bool {
        self.new_branch.is_some() || self.checkout.is_some() || self.base.is_some()
    }

    /// The git part of the request, with every rule checked: `None` for a plain workspace.
    /// Runs git (to find the repository), so it blocks.
    fn git_request(&self) -> Result<Option<GitRequest>> {
        if self.new_branch.is_some() && self.checkout.is_some() {
            return Err(Error::invalid(
                "a new branch and an existing branch to check out exclude each other: give one",
            ));
        }
        if self.plain {
            if self.asks_for_git() || matches!(self.repository, Repository::Named(_)) {
                return Err(Error::invalid(
                    "a plain workspace has no repository or branch: leave out the repository, branch, checkout and base, or leave out plain",
                ));
            }
            return Ok(None);
        }
        let branch = match (&self.new_branch, &self.checkout) {
            (Some(b), _) => Some(BranchSpec::New(b.clone())),
            (None, Some(b)) => Some(BranchSpec::Existing(b.clone())),
            (None, None) => None,
        };
        let start = match &self.repository {
            Repository::None if self.asks_for_git() => {
                return Err(Error::invalid(
                    "no repository is at hand, so a branch, checkout or base cannot be used: name a repository (or start berth in one), or leave them out for a plain workspace",
                ));
            }
            Repository::None => return Ok(None),
            Repository::Around(p) | Repository::Named(p) => p,
        };
        match Repo::discover(start) {
            Ok(found) => Ok(Some(GitRequest {
                repo: found.root().to_owned(),
                branch,
                base: self.base.clone(),
            })),
            Err(GitError::NotARepository(_))
                if matches!(self.repository, Repository::Around(_)) && !self.asks_for_git() =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// A workspace just created, as every front end reports it.
#[derive(Debug, Serialize)]
pub struct Created {
    pub workspace: WorkspaceView,
    /// Where a git workspace's worktree started: the revision and its commit.
    pub start: Option<StartPoint>,
    /// What the creator should know though nothing failed; the CLI prints them on stderr,
    /// MCP puts them in the tool result.
    pub warnings: Vec<CreateWarning>,
}

/// A workspace's block of ports, as `berth workspace ports` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspacePorts {
    pub workspace: WorkspaceId,
    /// `<id> (<name>)`, or the id.
    pub label: String,
    /// Its processes see them as `BERTH_PORT` (the first) and `BERTH_PORT_1` ….
    #[serde(flatten)]
    pub ports: PortsView,
}

/// A request to adopt an existing linked worktree (made by hand, by claude-squad, by amux…)
/// as a git workspace.
#[derive(Debug, Clone)]
pub struct AdoptWorkspace {
    /// The worktree's folder, or any folder inside it.
    pub path: PathBuf,
    pub name: Option<String>,
    pub description: String,
}

/// What deleting a workspace will do, decided before anyone is asked.
#[derive(Debug)]
pub struct DeletePlan {
    target: DeleteTarget,
    force: bool,
    /// `<id> (<name>)`, or the id.
    pub label: String,
    /// The question to ask a person before going ahead.
    pub question: String,
}

#[derive(Debug)]
enum DeleteTarget {
    Whole(Box<Workspace>),
    /// A workspace whose record cannot be read: only its folder and bindings can go.
    Corrupt(WorkspaceId),
}

/// What a delete did.
#[derive(Debug, Serialize)]
pub struct Deleted {
    pub id: WorkspaceId,
    pub label: String,
    /// Devices that were bound to it.
    pub unbound: Vec<DeviceId>,
    /// Something the person should know (a repository already gone, a worktree not looked at).
    pub warning: Option<String>,
}

/// Which workspaces garbage collection would remove, and which it keeps and why.
#[derive(Debug, Clone, Serialize)]
pub struct GcPlan {
    /// Unused this long (`None` with `merged`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age_days: Option<u32>,
    /// Chosen because their branch is merged into its base, whatever their age.
    pub merged: bool,
    #[serde(skip)]
    cutoff: DateTime<Utc>,
    /// Idle for longer than `max_age_days`, and removable now.
    pub stale: Vec<WorkspaceView>,
    /// Idle as long, but removing them would lose work.
    pub kept: Vec<KeptView>,
    /// `[git] keep_lost_days`, and the lost-work refs made longer ago than that, which go too.
    pub keep_lost_days: u32,
    pub lost_refs: Vec<LostRefView>,
    /// Repositories whose lost-work refs could not be read.
    pub warnings: Vec<String>,
}

/// What garbage collection did (or, for a dry run, would do).
#[derive(Debug, Clone, Serialize)]
pub struct GcReport {
    pub dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age_days: Option<u32>,
    pub merged: bool,
    /// The workspaces removed (would be, in a dry run).
    #[serde(rename = "workspaces")]
    pub removed: Vec<WorkspaceView>,
    pub kept: Vec<KeptView>,
    pub keep_lost_days: u32,
    /// The lost-work refs deleted (would be, in a dry run).
    pub lost_refs: Vec<LostRefView>,
    /// Cleanup that could not finish (a worktree folder left behind, a ref not deleted).
    pub warnings: Vec<String>,
}

impl GcPlan {
    /// The report of a dry run: what applying this plan would remove.
    pub fn dry_run(self) -> GcReport {
        GcReport {
            dry_run: true,
            max_age_days: self.max_age_days,
            merged: self.merged,
            removed: self.stale,
            kept: self.kept,
            keep_lost_days: self.keep_lost_days,
            lost_refs: self.lost_refs,
            warnings: self.warnings,
        }
    }

    /// Whether applying it would remove nothing.
    pub fn is_empty(&self) -> bool {
        self.stale.is_empty() && self.lost_refs.is_empty()
    }
}

/// The progress task of garbage collection.
const GC_PROGRESS: &str = "removing workspaces";

/// A repository's spare checkouts.
#[derive(Debug, Serialize)]
pub struct SparesReport {
    pub repo: PathBuf,
    pub dir: PathBuf,
    pub ready: usize,
    pub cleared: usize,
}

/// The identifier of the workspace whose worktree holds the current folder.
pub const HERE: &str = ".";

fn not_in_a_workspace(dir: &Path, named_here: bool) -> Error {
    let first = match named_here {
        true => "`.` names the workspace this folder is in, but",
        false => "no workspace named, and",
    };
    Error::invalid(format!(
        "{first} {} is in no workspace's worktree: name the workspace (`berth workspace list` shows them), or run this inside its worktree",
        dir.display()
    ))
}

impl Ops {
    /// The workspace an identifier names: an id, a name, or an unambiguous id prefix.
    pub async fn resolve_workspace(&self, identifier: &str) -> Result<Workspace> {
        Ok(self.manager.resolve(identifier).await?)
    }

    /// The well-known `default` workspace, created on first use and never collected.
    pub async fn default_workspace(&self) -> Result<Workspace> {
        Ok(self.manager.default_workspace().await?)
    }

    /// The repository `repo` names: a folder as it is, or, for a URL (`https://`, `ssh://`,
    /// `git://`, `file://`, `user@host:path`), berth's bare clone of it under the home's
    /// `repos/`, made on first use and fetched now. A URL carrying a password is refused: the
    /// clone's config keeps the URL, where agents read it.
    pub async fn named_repository(&self, repo: &Path) -> Result<NamedRepository> {
        let Some(url) = repo.to_str().filter(|r| berth_git::is_url(r)) else {
            return Ok(NamedRepository {
                path: repo.to_owned(),
                url: None,
            });
        };
        if berth_git::has_password(url) {
            return Err(Error::invalid(
                "the repository's URL carries a password, which its clone would keep where agents can read it: give git the credential another way (a credential helper, an SSH key) and leave it out of the URL",
            ));
        }
        let dir = berth_git::clone_dir(&self.home.join("repos"), url);
        let fetched = url.to_owned();
        let path =
            blocking(move || Ok(Repo::clone_or_fetch(&fetched, &dir)?.root().to_owned())).await?;
        Ok(NamedRepository {
            path,
            url: Some(url.to_owned()),
        })
    }

    /// The URL a queued run names its repository by, which every node fetches: `repo` when
    /// it is one, else the `origin` of the repository holding `dir`. A folder is refused:
    /// other nodes cannot reach it.
    pub fn pool_url(&self, repo: Option<&Path>, dir: &Path) -> Result<String> {
        let url = match repo {
            Some(repo) => repo
                .to_str()
                .filter(|r| berth_git::is_url(r))
                .map(str::to_owned)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "a queued run needs its repository as a URL every node can fetch (https://, ssh://, git://, file://, user@host:path), not the folder {}",
                        repo.display()
                    ))
                })?,
            None => berth_git::remote_url(dir, "origin")?.ok_or_else(|| {
                Error::invalid(format!(
                    "a queued run needs its repository as a URL every node can fetch: {} has no `origin` remote; name one with --repo URL",
                    dir.display()
                ))
            })?,
        };
        if berth_git::has_password(&url) {
            return Err(Error::invalid(
                "the repository's URL carries a password, which would be kept in the run where every node reads it: give git the credential another way (a credential helper, an SSH key) and leave it out of the URL",
            ));
        }
        Ok(url)
    }

    /// The workspace a command means: the one `identifier` names (an id, a name, a prefix, or
    /// `.` for the one this folder is in), else the git workspace whose worktree holds `dir`.
    /// `None` when nothing is named and `dir` is in no workspace; `.` outside every workspace
    /// is an error that says so.
    pub async fn workspace_meant(
        &self,
        identifier: Option<&str>,
        dir: &Path,
    ) -> Result<Option<Workspace>> {
        match identifier {
            Some(HERE) => match self.workspace_containing(dir).await? {
                Some(ws) => Ok(Some(ws)),
                None => Err(not_in_a_workspace(dir, true)),
            },
            Some(identifier) => Ok(Some(self.resolve_workspace(identifier).await?)),
            None => self.workspace_containing(dir).await,
        }
    }

    /// [`Ops::workspace_meant`] for a command that needs a workspace: one neither named nor
    /// found from `dir` is a usage error that says how to name one.
    pub async fn workspace_required(
        &self,
        identifier: Option<&str>,
        dir: &Path,
    ) -> Result<Workspace> {
        self.workspace_meant(identifier, dir)
            .await?
            .ok_or_else(|| not_in_a_workspace(dir, false))
    }

    /// The git workspace whose worktree holds `dir` (the innermost, if worktrees nest).
    pub async fn workspace_containing(&self, dir: &Path) -> Result<Option<Workspace>> {
        let dir = std::path::absolute(dir)
            .map_err(|e| berth_core::Error::io(format!("cannot use {}", dir.display()), e))?;
        // Both sides canonical, so a path through a symlink still matches.
        let dir = dir.canonicalize().unwrap_or(dir);
        let mut best: Option<(usize, Workspace)> = None;
        for ws in self.manager.list().await? {
            // An archived workspace's worktree is gone; a folder made at its path since is not
            // its work.
            let Some(git) = ws.git.as_ref().filter(|_| !ws.is_archived()) else {
                continue;
            };
            let root = git
                .worktree
                .canonicalize()
                .unwrap_or_else(|_| git.worktree.clone());
            if dir.starts_with(&root) {
                let depth = root.components().count();
                if best.as_ref().is_none_or(|(d, _)| depth > *d) {
                    best = Some((depth, ws));
                }
            }
        }
        Ok(best.map(|(_, ws)| ws))
    }

    /// Every workspace record, sorted by id, without git state: cheap, for listings that page
    /// or complete.
    pub async fn workspace_records(&self) -> Result<Vec<Workspace>> {
        Ok(self.manager.list().await?)
    }

    /// What a process started for `ws` (a dev server, a check, a tool) is told about it, on
    /// top of its environment: the workspace's own ports, `BERTH_PORT` (the first) and
    /// `BERTH_PORT_1` … `BERTH_PORT_<n-1>`; nothing for a workspace without a block, so a
    /// caller about to start one gets `ws` from [`Ops::with_ports`] first.
    pub fn workspace_env(&self, ws: &Workspace) -> Vec<(String, String)> {
        crate::git_workspace::workspace_env(ws)
    }

    /// `ws` with its block of ports: the one it holds, else the lowest free block of the
    /// home's `[ports]`, given to it now and held until it is deleted. A workspace takes no
    /// ports when it is made (so creating one never fails for want of them), only when
    /// something of its own first needs them: every front end calls this before it starts a
    /// process for the workspace (a run's agent, terminals and check, berth's `run_command`),
    /// then [`Ops::workspace_env`] and [`Ops::sandbox`] give the process its ports. The store
    /// chooses atomically (`WorkspaceStore::assign_ports`), so two workspaces' processes never
    /// share a port. `Refused`, naming the `[ports]` keys, when no block is free.
    pub async fn with_ports(&self, mut ws: Workspace) -> Result<Workspace> {
        if ws.ports.is_none() {
            ws.ports = Some(self.assign_ports(&ws.id).await?);
        }
        Ok(ws)
    }

    /// The block of ports of the workspace `identifier` names, given now if it has none
    /// (`berth workspace ports`). Asking is use, as `path` is: ports are asked for to start
    /// something of the workspace's.
    pub async fn workspace_ports(&self, identifier: &str) -> Result<WorkspacePorts> {
        let ws = self.manager.resolve(identifier).await?;
        self.manager.touch(&ws).await?;
        let ws = self.with_ports(ws).await?;
        let block = ws.ports.expect("with_ports gives a block or fails");
        Ok(WorkspacePorts {
            workspace: ws.id.clone(),
            label: ws.label(),
            ports: PortsView::of(block),
        })
    }

    /// Gives the workspace its block from the home's `[ports]`. The range is the home's (the
    /// global file and the environment), never a workspace's own layer: the ports are one pool
    /// shared by every workspace on the machine.
    async fn assign_ports(&self, id: &WorkspaceId) -> Result<berth_core::PortBlock> {
        let range = self.config(None).await?.config.ports.range();
        Ok(self.manager.workspaces().assign_ports(id, range).await?)
    }

    /// The view of a record, with its folder; `git_status` where it was looked up.
    pub fn view(&self, ws: &Workspace, git_status: Option<WorktreeStatus>) -> WorkspaceView {
        WorkspaceView::new(
            ws,
            self.manager.workspaces().workspace_dir(&ws.id),
            git_status,
        )
    }

    /// Every workspace in use with its worktree's state; archived ones are left out (see
    /// [`Ops::list_workspaces_including`]).
    pub async fn list_workspaces(&self) -> Result<Vec<WorkspaceView>> {
        self.list_workspaces_including(false).await
    }

    /// Every workspace with its worktree's state, archived ones too when `archived` (they
    /// have no worktree, so no state).
    pub async fn list_workspaces_including(&self, archived: bool) -> Result<Vec<WorkspaceView>> {
        let all: Vec<Workspace> = self
            .manager
            .list()
            .await?
            .into_iter()
            .filter(|ws| archived || !ws.is_archived())
            .collect();
        let in_use = |ws: &Workspace| ws.git.is_some() && !ws.is_archived();
        let gits: Vec<_> = all
            .iter()
            .filter(|ws| in_use(ws))
            .filter_map(|ws| ws.git.clone())
            .collect();
        let mut found = git_workspace::statuses(gits).await?.into_iter();
        let workspaces = self.manager.workspaces();
        Ok(all
            .into_iter()
            .map(|ws| {
                let status = in_use(&ws).then(|| found.next()).flatten();
                let path = workspaces.workspace_dir(&ws.id);
                WorkspaceView::of(ws, path, status)
            })
            .collect())
    }

    /// One workspace with its worktree's state and the devices bound to it.
    pub async fn show_workspace(&self, identifier: &str) -> Result<WorkspaceView> {
        let ws = self.manager.resolve(identifier).await?;
        let devices = self
            .manager
            .list_bindings()
            .await?
            .into_iter()
            .filter(|b| b.workspace == ws.id)
            .map(|b| b.device)
            .collect();
        let status = self.git_status(&ws).await?;
        let mut view = self.view(&ws, status);
        view.devices = Some(devices);
        Ok(view)
    }

    /// Fills in each workspace's `size_bytes`: the disk its folder and its worktree take
    /// (`disk::usage_of`: no symbolic link followed, a file linked twice counted once), a few
    /// at a time. A walk costs a stat of every file, so only a front end that asks measures.
    pub async fn measure_workspaces(&self, views: &mut [WorkspaceView]) -> Result<()> {
        let roots = crate::disk::measured_roots(views);
        let sizes = blocking(move || {
            if roots.len() < 2 {
                return crate::disk::measure_each(&roots).into_iter().collect();
            }
            let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
            let chunk = roots.len().div_ceil(workers).max(1);
            std::thread::scope(|scope| {
                let handles: Vec<_> = roots
                    .chunks(chunk)
                    .map(|part| scope.spawn(move || crate::disk::measure_each(part)))
                    .collect();
                let mut sizes = Vec::new();
                for h in handles {
                    for size in h.join().expect("a walk never panics") {
                        sizes.push(size?);
                    }
                }
                Ok(sizes)
            })
        })
        .await?;
        for (view, size) in views.iter_mut().zip(sizes) {
            view.size_bytes = Some(size);
        }
        Ok(())
    }

    /// [`Ops::measure_workspaces`] of one workspace on the caller's thread, for a front end
    /// whose thread has nothing else to do meanwhile (a CLI's `workspace show`): the blocking
    /// pool would cost it a thread's start, two switches and the join at exit, a good part of
    /// a command that otherwise reads three small files.
    pub fn measure_workspace_here(&self, view: &mut WorkspaceView) -> Result<()> {
        let roots = crate::disk::measured_roots(std::slice::from_ref(view));
        let [size] =
            <[_; 1]>::try_from(crate::disk::measure_each(&roots)).expect("one view, one size");
        view.size_bytes = Some(size?);
        Ok(())
    }

    /// The state of a git workspace's worktree; `None` for a plain workspace, and for an
    /// archived one, which has no worktree.
    pub async fn git_status(&self, ws: &Workspace) -> Result<Option<WorktreeStatus>> {
        match ws.git.clone().filter(|_| !ws.is_archived()) {
            Some(git) => blocking(move || Ok(git_workspace::status(&git)))
                .await
                .map(Some),
            None => Ok(None),
        }
    }

    /// Creates a workspace (see [`Ops::create_workspace_reported`]) and returns only its view.
    pub async fn create_workspace(&self, request: CreateWorkspace) -> Result<WorkspaceView> {
        Ok(self.create_workspace_reported(request).await?.workspace)
    }

    /// Creates a workspace: a git worktree when the request leads to a repository, all or
    /// nothing; then refills spare checkouts if the config keeps any (even after a failed
    /// create, which may have used one too). Says where the worktree started and warns of
    /// what its creator should know (a default base behind the main checkout's branch, a
    /// `[git] copy` entry that is not there); every front end shows both. The view has no
    /// `git_status`; `show_workspace` has it.
    pub async fn create_workspace_reported(&self, request: CreateWorkspace) -> Result<Created> {
        // The workspace's own config does not exist yet: global file and environment.
        let config = self.config(None).await?.config;
        // No ports: a block is given when something of the workspace first needs one.
        let new = NewWorkspace {
            id: request.id.clone().map(WorkspaceId::new).transpose()?,
            name: request.name.clone().map(WorkspaceName::new).transpose()?,
            description: request.description.clone(),
            agent_id: request.agent_id.clone(),
            git: None,
            ports: None,
        };
        // A taken name is said as such before git is asked: its branch `berth/<name>` exists
        // too, and git would report that instead. The store still refuses a name taken
        // meanwhile by another process.
        if let Some(name) = &new.name {
            match self.manager.workspaces().load_by_name(name).await {
                Ok(taken) => {
                    return Err(Error::rule(
                        ErrorKind::Conflict,
                        format!(
                            "a workspace named '{name}' ({}) already exists; pick another name, or work in that one",
                            taken.id
                        ),
                    ));
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        let ports = config.ports.range();
        let git = blocking(move || request.git_request()).await?;
        let Some(git) = git else {
            let made =
                git_workspace::create(&self.manager, new, None, &Default::default(), ports).await?;
            return Ok(self.created(made));
        };
        let settings = config.git;
        let repo = git.repo.clone();
        let created = git_workspace::create(&self.manager, new, Some(git), &settings, ports).await;
        if let Some(want @ 1..) = settings.spare_worktrees {
            self.refill_spares(repo, want, settings);
        }
        // No git status here: on a fresh worktree of a big repository it costs as much as
        // the create itself (the index is refreshed), and most callers only want the id.
        Ok(self.created(created?))
    }

    fn created(&self, made: git_workspace::Made) -> Created {
        Created {
            workspace: self.view(&made.workspace, None),
            start: made.start,
            warnings: made.warnings,
        }
    }

    /// Adopts an existing linked worktree as a git workspace, recorded as it is: its path,
    /// its branch (or detached HEAD), its repository's main checkout. berth did not make the
    /// branch, so deleting the workspace removes the worktree (only when that loses no work)
    /// and never the branch. Refused for the main checkout, a folder outside git, and a
    /// worktree another workspace records.
    pub async fn adopt_workspace(&self, request: AdoptWorkspace) -> Result<WorkspaceView> {
        // Nothing runs in an adopted worktree, so it takes no ports until something does.
        let new = NewWorkspace {
            id: None,
            name: request.name.map(WorkspaceName::new).transpose()?,
            description: request.description,
            agent_id: None,
            git: None,
            ports: None,
        };
        let path = std::path::absolute(&request.path).map_err(|e| {
            berth_core::Error::io(format!("cannot use {}", request.path.display()), e)
        })?;
        let ws = git_workspace::adopt(&self.manager, new, &path).await?;
        Ok(self.view(&ws, None))
    }

    /// Decides what deleting the workspace `identifier` names would do, and refuses (before
    /// anyone is asked) when it would lose work and `force` is not set. A workspace whose
    /// record is corrupt can still be deleted by its full id: that is how a person repairs it.
    pub async fn plan_delete(&self, identifier: &str, force: bool) -> Result<DeletePlan> {
        match self.manager.resolve(identifier).await {
            Ok(ws) => {
                if !force {
                    git_workspace::check_removable(&ws).await?;
                }
                let label = ws.label();
                Ok(DeletePlan {
                    question: format!("Delete workspace {label} and everything in it?"),
                    label,
                    target: DeleteTarget::Whole(Box::new(ws)),
                    force,
                })
            }
            Err(berth_core::Error::Corrupt { file, line, reason }) => {
                let id = WorkspaceId::new(identifier).ok().filter(|id| {
                    self.manager
                        .workspaces()
                        .workspace_dir(id)
                        .is_none_or(|d| file.starts_with(d))
                });
                let Some(id) = id else {
                    return Err(berth_core::Error::Corrupt {
                        file,
                        line,
                        reason: format!(
                            "{reason} (a workspace with a corrupt record can be deleted by its full id only)"
                        ),
                    }
                    .into());
                };
                Ok(DeletePlan {
                    question: format!(
                        "Delete workspace {id} (its metadata is corrupt) and everything in it?"
                    ),
                    label: id.to_string(),
                    target: DeleteTarget::Corrupt(id),
                    force,
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Carries out a delete plan: a git workspace's worktree first (checked again for lost
    /// work at that moment unless forced), then the record and its bindings.
    pub async fn delete_workspace(&self, plan: DeletePlan) -> Result<Deleted> {
        match plan.target {
            DeleteTarget::Whole(ws) => {
                // Nothing it started for an agent outlives the workspace.
                self.end_background(&ws.id, true).await?;
                if let Some(git) = ws.git.as_ref().filter(|_| plan.force) {
                    self.remember_lost_repo(&git.repo)?;
                }
                let dir = self.manager.workspaces().workspace_dir(&ws.id);
                let removed = git_workspace::remove(&self.manager, &ws, plan.force).await?;
                // Its network's forwards end with it in this process (a server of it on the
                // host's loopback included).
                if let Some(dir) = dir {
                    berth_sandbox::close_network(&dir);
                }
                Ok(Deleted {
                    id: ws.id,
                    label: plan.label,
                    unbound: removed.unbound,
                    warning: removed.warning,
                })
            }
            DeleteTarget::Corrupt(id) => {
                self.end_background(&id, true).await?;
                let unbound = self.manager.delete_record(&id).await?;
                Ok(Deleted {
                    id,
                    label: plan.label,
                    unbound,
                    warning: Some(
                        "its metadata was corrupt, so a git worktree it had, if any, was not looked at".to_owned(),
                    ),
                })
            }
        }
    }

    /// Which workspaces are unused for `max_age_days` (never `default`, never an archived one),
    /// that can go and those whose removal would lose work.
    pub async fn plan_gc(&self, max_age_days: u32) -> Result<GcPlan> {
        let plan = self
            .manager
            .gc_plan(chrono::Duration::days(i64::from(max_age_days)))
            .await?;
        let mut stale = Vec::new();
        let mut kept = Vec::new();
        // An archived workspace holds only records, kept for whoever reviews its work.
        for ws in plan.stale.into_iter().filter(|ws| !ws.is_archived()) {
            match git_workspace::check_removable(&ws).await {
                Ok(()) => stale.push(self.view(&ws, None)),
                Err(why) => kept.push(KeptView::new(&ws, why.to_string())),
            }
        }
        let lost = self.plan_lost().await?;
        Ok(GcPlan {
            max_age_days: Some(max_age_days),
            merged: false,
            cutoff: plan.cutoff,
            stale,
            kept,
            keep_lost_days: lost.keep_days,
            lost_refs: lost.expired,
            warnings: lost.warnings,
        })
    }

    /// Which git workspaces are done with: their branch is merged into its base
    /// (`Repo::branch_merged`: its tip in the base's history, and commits of its own), however
    /// recently they were used. Those whose removal would lose work (uncommitted or untracked
    /// files, commits their HEAD alone holds) are kept, with why. A branch not merged, never
    /// committed to, or that git cannot judge is not a candidate. Applied as an age plan is
    /// ([`Ops::apply_gc`]): each checked again at its removal, and one used after this plan
    /// is kept.
    pub async fn plan_gc_merged(&self) -> Result<GcPlan> {
        let cutoff = Utc::now();
        let records = self.manager.list().await?;
        let mut stale = Vec::new();
        let mut kept = Vec::new();
        for ws in records {
            let Some(git) = ws.git.clone() else {
                continue;
            };
            if git.branch == berth_git::DETACHED_HEAD || ws.id.is_default() || ws.is_archived() {
                continue;
            }
            let merged = blocking(move || {
                Ok(match Repo::open(&git.repo) {
                    Ok(repo) => repo.branch_merged(&git.branch, &git.base_branch),
                    Err(e) => berth_git::BranchMerged::Unknown(e.to_string()),
                })
            })
            .await?;
            if merged != berth_git::BranchMerged::Merged {
                continue;
            }
            match git_workspace::check_removable(&ws).await {
                Ok(()) => stale.push(self.view(&ws, None)),
                Err(why) => kept.push(KeptView::new(&ws, why.to_string())),
            }
        }
        let lost = self.plan_lost().await?;
        Ok(GcPlan {
            max_age_days: None,
            merged: true,
            cutoff,
            stale,
            kept,
            keep_lost_days: lost.keep_days,
            lost_refs: lost.expired,
            warnings: lost.warnings,
        })
    }

    /// Applies a plan, one workspace at a time: its worktree first, checked for lost work
    /// again at that moment and never forced, then its record if it is still idle. What
    /// changed since the plan (new files, new commits, a use) is kept whole and reported.
    /// Last the planned lost-work refs go, each only if it still holds what it held.
    pub async fn apply_gc(&self, plan: GcPlan) -> Result<GcReport> {
        let mut report = GcReport {
            dry_run: false,
            max_age_days: plan.max_age_days,
            merged: plan.merged,
            removed: Vec::new(),
            kept: plan.kept,
            keep_lost_days: plan.keep_lost_days,
            lost_refs: Vec::new(),
            warnings: plan.warnings,
        };
        let total = plan.stale.len() as u64;
        for (i, view) in plan.stale.into_iter().enumerate() {
            crate::progress::step(GC_PROGRESS, i as u64, total);
            match git_workspace::collect(&self.manager, &view.id, plan.cutoff).await? {
                Collected::Removed(warning) => {
                    if let Some(w) = warning {
                        report.warnings.push(format!("{}: {w}", view.label));
                    }
                    // What it ran in the background goes with it; a registry that cannot be
                    // read is said, not taken for none.
                    if let Err(e) = self.end_background(&view.id, true).await {
                        report.warnings.push(format!("{}: {e}", view.label));
                    }
                    report.removed.push(view);
                }
                Collected::Kept(ws, reason) => report.kept.push(KeptView::new(&ws, reason)),
                Collected::Gone => {}
            }
        }
        crate::progress::finish(GC_PROGRESS);
        let (deleted, warnings) = self.expire_lost(plan.lost_refs).await?;
        report.lost_refs = deleted;
        report.warnings.extend(warnings);
        Ok(report)
    }

    /// Where the workspace's work happens (a git workspace's worktree, else its folder);
    /// asking counts as a use.
    pub async fn workspace_path(&self, identifier: &str) -> Result<PathBuf> {
        let ws = self.manager.resolve(identifier).await?;
        crate::archive::refuse_archived(&ws, "it has no folder to work in")?;
        self.manager.touch(&ws).await?;
        let view = self.view(&ws, None);
        let dir = view.work_dir().map(Path::to_owned).ok_or_else(|| {
            Error::rule(
                ErrorKind::NotFound,
                format!("workspace {} has no folder in this store", ws.label()),
            )
        })?;
        // A database store keeps a plain workspace's folder on each machine that asks for it;
        // the filesystem store made it with the workspace.
        if ws.git.is_none() && !dir.is_dir() {
            std::fs::create_dir_all(&dir).map_err(|e| {
                berth_core::Error::io(format!("cannot create {}", dir.display()), e)
            })?;
        }
        Ok(dir)
    }

    /// Reattaches the workspaces of the repository containing `repo`, which was moved: git's
    /// `worktree repair`, then the records (see `git_workspace::repair`). Afterwards their
    /// status is healthy and delete removes worktree and branch without --force.
    pub async fn repair_workspaces(&self, repo: &Path) -> Result<RepairReport> {
        let settings = self.config(None).await?.config.git;
        git_workspace::repair(&self.manager, repo, &settings).await
    }

    /// The main checkout of the repository containing `path`. Outside a repository: `None`,
    /// or with `required` an error saying so.
    pub async fn repository_root(&self, path: &Path, required: bool) -> Result<Option<PathBuf>> {
        let path = path.to_owned();
        blocking(move || match Repo::discover(&path) {
            Ok(repo) => Ok(Some(repo.root().to_owned())),
            Err(GitError::NotARepository(_)) if !required => Ok(None),
            Err(e) => Err(e.into()),
        })
        .await
    }

    /// The spare checkouts of the repository containing `repo`: cleared first with `clear`,
    /// then topped up to `[git] spare_worktrees` (at least one) with `fill`.
    pub async fn spares(&self, repo: &Path, fill: bool, clear: bool) -> Result<SparesReport> {
        let settings = self.config(None).await?.config.git;
        let manager = self.manager.clone();
        let repo = repo.to_owned();
        blocking(move || {
            let (pool, repo) = git_workspace::spare_pool(&manager, &repo, &settings)?;
            let cleared = if clear { pool.clear(&repo)? } else { 0 };
            if fill {
                let want = settings.spare_worktrees().max(1);
                git_workspace::fill_spares(&pool, &repo, want)?;
            }
            Ok(SparesReport {
                repo: repo.root().to_owned(),
                dir: pool.dir().to_owned(),
                ready: pool.count(),
                cleared,
            })
        })
        .await
    }

    /// Tops up `repo`'s spare checkouts to `want` in the background, as [`Refill`] says. A
    /// failure only costs the next create its head start, so it is reported on stderr, never
    /// returned.
    fn refill_spares(&self, repo: PathBuf, want: usize, settings: GitSettings) {
        match self.refill.as_ref() {
            Refill::InProcess => {
                let manager = self.manager.clone();
                tokio::spawn(async move {
                    let filled = blocking(move || {
                        let (pool, repo) = git_workspace::spare_pool(&manager, &repo, &settings)?;
                        git_workspace::fill_spares(&pool, &repo, want)
                    })
                    .await;
                    if let Err(e) = filled {
                        tracing::warn!("could not refill spare checkouts: {e}");
                    }
                });
            }
            Refill::Detached { args } => {
                use std::os::unix::process::CommandExt;
                use std::process::{Command, Stdio};
                let spawned = std::env::current_exe().and_then(|program| {
                    Command::new(program)
                        .args(args)
                        .arg("--repo")
                        .arg(&repo)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        // Its own process group: a Ctrl-C meant for the command does not stop it.
                        .process_group(0)
                        .spawn()
                });
                match spawned {
                    // A create right after this one (the next command of a script) waits for
                    // the refill rather than race it, even before the new process has begun
                    // filling. Only a filler of its own announces: the hint dies with its
                    // process, so one that exits without filling leaves nothing to wait for,
                    // where a hint naming this long-lived process would keep creates waiting
                    // after a refill that failed before it began.
                    Ok(mut child) => {
                        let _ = git_workspace::announce_refill(
                            &self.manager,
                            &repo,
                            &settings,
                            child.id(),
                        );
                        // Reaped when it ends, should this process outlive it: a zombie
                        // still answers as alive, and creates would wait for it.
                        std::thread::spawn(move || child.wait());
                    }
                    Err(e) => {
                        tracing::warn!("could not start filling spare checkouts: {e}")
                    }
                }
            }
        }
    }
}
