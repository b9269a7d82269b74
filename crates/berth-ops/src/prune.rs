//! `workspace prune`: git worktrees and berth records that have lost each other.
//!
//! - A worktree in berth's folders (`<home>/workspaces/<id>/worktree`, `[git] worktree_dir`)
//!   that git lists but no record names: left by a record removed behind berth's back, or
//!   by a crash of another tool. It goes (`git worktree remove`) when nothing would be lost:
//!   no uncommitted or untracked file, no commit its HEAD alone holds. Its branch is never
//!   deleted (berth cannot know it made it). One whose folder is gone is forgotten by git
//!   (`git worktree prune`).
//! - A git workspace whose worktree folder is gone: its record goes, as garbage collection
//!   removes one (`git_workspace::collect`: the branch berth made is deleted only when it
//!   holds nothing that is not on its base; a record used since the plan stays). One with
//!   sessions is kept: their transcripts are work too.
//!
//! What would lose work is kept and reported, with why. Planned first, then applied, each
//! item checked again at the moment it goes.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use berth_core::Workspace;
use berth_git::{DETACHED_HEAD, Health, Repo, WorktreeRef};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::Ops;
use crate::error::{Result, blocking};
use crate::git_workspace::{self, Collected};
use crate::view::WorkspaceView;

/// A worktree in berth's folders that no record names.
#[derive(Debug, Clone, Serialize)]
pub struct OrphanWorktree {
    pub path: PathBuf,
    /// The repository's main checkout (or bare folder).
    pub repo: PathBuf,
    /// Its branch, or `HEAD` when detached.
    pub branch: String,
    /// Its folder is gone; only git's record of it is left.
    pub folder_gone: bool,
}

/// Something prune leaves, and why.
#[derive(Debug, Clone, Serialize)]
pub struct PruneKept {
    /// `worktree` (an orphan worktree, by its path) or `workspace` (a record, by its label).
    pub kind: &'static str,
    pub name: String,
    pub reason: String,
}

/// What prune would remove, and what it keeps.
#[derive(Debug, Clone)]
pub struct PrunePlan {
    cutoff: DateTime<Utc>,
    pub worktrees: Vec<OrphanWorktree>,
    pub workspaces: Vec<WorkspaceView>,
    pub kept: Vec<PruneKept>,
}

/// What prune did (or, for a dry run, would do).
#[derive(Debug, Clone, Serialize)]
pub struct PruneReport {
    pub dry_run: bool,
    /// Orphan worktrees removed (or forgotten by git, their folder being gone).
    pub worktrees: Vec<OrphanWorktree>,
    /// Records of workspaces whose worktree was gone, removed.
    pub workspaces: Vec<WorkspaceView>,
    pub kept: Vec<PruneKept>,
    pub warnings: Vec<String>,
}

impl PrunePlan {
    pub fn is_empty(&self) -> bool {
        self.worktrees.is_empty() && self.workspaces.is_empty()
    }

    /// The report of a dry run: what applying this plan would do.
    pub fn dry_run(self) -> PruneReport {
        PruneReport {
            dry_run: true,
            worktrees: self.worktrees,
            workspaces: self.workspaces,
            kept: self.kept,
            warnings: Vec::new(),
        }
    }
}

impl Ops {
    /// Finds orphan worktrees in berth's folders and records whose worktree is gone.
    pub async fn plan_prune(&self) -> Result<PrunePlan> {
        let cutoff = Utc::now();
        let settings = self.config(None).await?.config.git;
        let records = self.manager.list().await?;
        let mut kept = Vec::new();

        let workspaces = self.records_without_worktree(&records, &mut kept).await?;

        // Worktrees in berth's folders without a record.
        let recorded: HashSet<PathBuf> = records
            .iter()
            .filter_map(|w| w.git.as_ref())
            .flat_map(|g| {
                [Some(g.worktree.clone()), g.worktree.canonicalize().ok()]
                    .into_iter()
                    .flatten()
            })
            .collect();
        let repos: Vec<PathBuf> = records
            .iter()
            .filter_map(|w| w.git.as_ref().map(|g| g.repo.clone()))
            .collect();
        let places = Places {
            home_workspaces: self.home().join("workspaces"),
            worktree_dir: settings
                .worktree_dir
                .as_deref()
                .filter(|d| Path::new(d).is_absolute())
                .map(PathBuf::from),
            // A plain workspace's folder is its person's: whatever is in it is never an orphan.
            plain: records
                .iter()
                .filter(|w| w.git.is_none())
                .filter_map(|w| self.view(w, None).path)
                .collect(),
        };
        let found = blocking(move || Ok(orphans(&places, &repos, &recorded))).await?;
        let mut worktrees = Vec::new();
        for orphan in found {
            if orphan.folder_gone {
                worktrees.push(orphan);
                continue;
            }
            let checked = orphan.clone();
            let removable = blocking(move || {
                let repo = Repo::open(&checked.repo)?;
                Ok(repo.check_removable(orphan_ref(&checked)))
            })
            .await?;
            match removable {
                Ok(()) => worktrees.push(orphan),
                Err(why) => kept.push(PruneKept {
                    kind: "worktree",
                    name: orphan.path.display().to_string(),
                    reason: format!("no workspace records it, but {why}"),
                }),
            }
        }
        Ok(PrunePlan {
            cutoff,
            worktrees,
            workspaces,
            kept,
        })
    }

    /// The records whose worktree is gone and that can go without losing anything; those
    /// that cannot are added to `kept`, with why.
    async fn records_without_worktree(
        &self,
        records: &[Workspace],
        kept: &mut Vec<PruneKept>,
    ) -> Result<Vec<WorkspaceView>> {
        let mut workspaces = Vec::new();
        // An archived workspace has no worktree by design: it is not broken.
        let gits: Vec<_> = records
            .iter()
            .filter(|w| !w.is_archived())
            .filter_map(|w| w.git.clone())
            .collect();
        let statuses = git_workspace::statuses(gits).await?;
        let in_use = records
            .iter()
            .filter(|w| w.git.is_some() && !w.is_archived());
        for (ws, status) in in_use.zip(statuses) {
            let gone = match status.health {
                Health::WorktreeMissing => true,
                Health::RepoMissing => ws.git.as_ref().is_some_and(|g| !g.worktree.exists()),
                Health::Ok | Health::BranchMissing => false,
            };
            if !gone {
                continue;
            }
            let sessions = self.session_records(Some(&ws.id)).await?.len();
            if sessions > 0 {
                kept.push(PruneKept {
                    kind: "workspace",
                    name: ws.label(),
                    reason: format!(
                        "its worktree is gone, but it has {sessions} session(s); `berth workspace delete {}` removes it with them",
                        ws.id
                    ),
                });
                continue;
            }
            match git_workspace::check_removable(ws).await {
                Ok(()) => workspaces.push(self.view(ws, None)),
                Err(why) => kept.push(PruneKept {
                    kind: "workspace",
                    name: ws.label(),
                    reason: format!(
                        "its worktree is gone, but {why} (`berth workspace delete --force {}` keeps that on refs/berth/lost/{} and removes it)",
                        ws.id, ws.id
                    ),
                }),
            }
        }
        Ok(workspaces)
    }

    /// Applies a plan, each item checked again as it goes: an orphan worktree that gained
    /// work or a record since is kept, and so is a record used or whose worktree came back.
    pub async fn apply_prune(&self, plan: PrunePlan) -> Result<PruneReport> {
        let mut report = PruneReport {
            dry_run: false,
            worktrees: Vec::new(),
            workspaces: Vec::new(),
            kept: plan.kept,
            warnings: Vec::new(),
        };
        for orphan in plan.worktrees {
            if git_workspace::recorded_at(&self.manager, &orphan.path)
                .await?
                .is_some()
            {
                report.kept.push(PruneKept {
                    kind: "worktree",
                    name: orphan.path.display().to_string(),
                    reason: "a workspace records it now".to_owned(),
                });
                continue;
            }
            let o = orphan.clone();
            let done = blocking(move || {
                let repo = Repo::open(&o.repo)?;
                if o.folder_gone {
                    return Ok(repo.prune_worktrees());
                }
                // Not forced: the lost-work check runs again, now.
                Ok(repo.remove_worktree(orphan_ref(&o), false))
            })
            .await?;
            match done {
                Ok(()) => report.worktrees.push(orphan),
                Err(why) => report.kept.push(PruneKept {
                    kind: "worktree",
                    name: orphan.path.display().to_string(),
                    reason: format!("it changed since prune looked at it: {why}"),
                }),
            }
        }
        for view in plan.workspaces {
            // Its worktree may have come back (a repair, a restore) since the plan.
            if view.git.as_ref().is_some_and(|g| g.worktree.exists()) {
                report.kept.push(PruneKept {
                    kind: "workspace",
                    name: view.label.clone(),
                    reason: "its worktree is back".to_owned(),
                });
                continue;
            }
            match git_workspace::collect(&self.manager, &view.id, plan.cutoff).await? {
                Collected::Removed(warning) => {
                    if let Some(w) = warning {
                        report.warnings.push(format!("{}: {w}", view.label));
                    }
                    report.workspaces.push(view);
                }
                Collected::Kept(ws, reason) => report.kept.push(kept_workspace(&ws, reason)),
                Collected::Gone => {}
            }
        }
        Ok(report)
    }
}

fn kept_workspace(ws: &Workspace, reason: String) -> PruneKept {
    PruneKept {
        kind: "workspace",
        name: ws.label(),
        reason,
    }
}

/// An orphan as the lost-work check sees it: berth did not make its branch (as far as it
/// can know), so the branch stays and keeps its commits.
fn orphan_ref(o: &OrphanWorktree) -> WorktreeRef<'_> {
    WorktreeRef {
        path: &o.path,
        branch: &o.branch,
        base_branch: DETACHED_HEAD,
        branch_created: false,
    }
}

/// Where berth makes worktrees: `<home>/workspaces/<id>/worktree`, and `<worktree_dir>/<id>`
/// when `[git] worktree_dir` is set; never inside a plain workspace's folder.
struct Places {
    home_workspaces: PathBuf,
    worktree_dir: Option<PathBuf>,
    plain: Vec<PathBuf>,
}

impl Places {
    /// The folders where a worktree of berth's could be.
    fn candidates(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&self.home_workspaces) {
            found.extend(entries.flatten().map(|e| e.path().join("worktree")));
        }
        if let Some(dir) = &self.worktree_dir
            && let Ok(entries) = std::fs::read_dir(dir)
        {
            found.extend(entries.flatten().map(|e| e.path()));
        }
        found
    }

    /// Whether `p` (as git lists it: absolute, symlinks resolved where it could) is such a
    /// place.
    fn holds(&self, p: &Path) -> bool {
        let same = |a: &Path, b: &Path| {
            a == b
                || a.canonicalize()
                    .ok()
                    .zip(b.canonicalize().ok())
                    .is_some_and(|(x, y)| x == y)
                || b.canonicalize().is_ok_and(|y| a == y)
        };
        if self
            .plain
            .iter()
            .any(|plain| p.ancestors().any(|a| same(a, plain)))
        {
            return false;
        }
        let in_home = p.file_name().is_some_and(|n| n == "worktree")
            && p.parent()
                .and_then(Path::parent)
                .is_some_and(|w| same(w, &self.home_workspaces));
        let in_dir = self
            .worktree_dir
            .as_deref()
            .is_some_and(|d| p.parent().is_some_and(|parent| same(parent, d)));
        in_home || in_dir
    }
}

/// Worktrees in berth's places that git lists and no record names: those found on disk there,
/// and those the recorded repositories list there (their folder gone, say).
fn orphans(places: &Places, repos: &[PathBuf], recorded: &HashSet<PathBuf>) -> Vec<OrphanWorktree> {
    let is_recorded =
        |p: &Path| recorded.contains(p) || p.canonicalize().is_ok_and(|c| recorded.contains(&c));
    let mut repos: Vec<PathBuf> = repos.to_vec();
    // On disk: a folder that is a linked worktree's top; its repository is looked at too.
    for root in places.candidates() {
        if root.join(".git").is_file()
            && places.holds(&root)
            && !is_recorded(&root)
            && let Ok(linked) = berth_git::linked_worktree(&root)
        {
            repos.push(linked.repo.root().to_owned());
        }
    }
    repos.sort();
    repos.dedup();
    let mut found: Vec<OrphanWorktree> = Vec::new();
    for repo_path in &repos {
        let Ok(repo) = Repo::open(repo_path) else {
            continue;
        };
        let Ok(listed) = repo.listed_worktrees() else {
            continue;
        };
        for wt in listed {
            if places.holds(&wt.path)
                && !is_recorded(&wt.path)
                && !found.iter().any(|f| f.path == wt.path)
            {
                found.push(OrphanWorktree {
                    path: wt.path,
                    repo: repo.root().to_owned(),
                    branch: wt.branch,
                    folder_gone: wt.gone,
                });
            }
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}
