//! Lost-work refs in garbage collection: every `refs/berth/lost/<id>` (what a forced removal
//! kept, a `workspace delete --force`'s or a run's) made more than `[git] keep_lost_days` ago
//! goes in `workspace gc`, in every repository berth knows of: those its git workspaces'
//! records name, its own clones under `<home>/repos/`, and those where a forced delete kept
//! work (`<home>/lost-ref-repos`, one path a line: the workspace's record goes with the
//! delete, and may have been the last to name its repository). The time is when berth made
//! the ref (`berth_git::Repo::lost_refs`), never its commit's date.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use berth_git::{LostRef, Repo};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::Ops;
use crate::error::{Error, Result, blocking};

/// The repositories where a forced delete kept work, in the home.
const REPOS_FILE: &str = "lost-ref-repos";

/// A lost-work ref garbage collection deletes (or would, in a dry run).
#[derive(Debug, Clone, Serialize)]
pub struct LostRefView {
    /// The repository's main checkout, or a bare repository's folder.
    pub repo: PathBuf,
    /// `refs/berth/lost/<id>`.
    pub name: String,
    pub target: String,
    /// When berth made it (or first saw it, for one made without a reflog).
    pub made_at: DateTime<Utc>,
}

/// The lost refs old enough to go, and what could not be looked at.
#[derive(Debug)]
pub(crate) struct LostPlan {
    pub(crate) keep_days: u32,
    pub(crate) expired: Vec<LostRefView>,
    pub(crate) warnings: Vec<String>,
}

impl Ops {
    /// The lost refs made `[git] keep_lost_days` or more ago, in every repository berth knows.
    /// A repository that is gone is passed over (its refs went with it); one whose lost refs
    /// cannot be read is a warning, and its refs stay.
    pub(crate) async fn plan_lost(&self) -> Result<LostPlan> {
        let keep_days = self.config(None).await?.config.git.keep_lost_days();
        let mut warnings = Vec::new();
        // A record that does not read must not stop the age gc, which reads none; its
        // repository's lost refs wait for the next gc.
        let mut repos: Vec<PathBuf> = match self.manager.list().await {
            Ok(records) => records
                .into_iter()
                .filter_map(|ws| ws.git.map(|git| git.repo))
                .collect(),
            Err(e) => {
                warnings.push(format!(
                    "lost-work refs of the workspaces' repositories not looked at: {e}"
                ));
                Vec::new()
            }
        };
        repos.extend(clones(&self.home.join("repos")));
        let listed_path = self.home.join(REPOS_FILE);
        let listed = read_repos(&listed_path)?;
        repos.extend(listed.iter().cloned());
        blocking(move || {
            let mut plan = LostPlan {
                keep_days,
                expired: Vec::new(),
                warnings,
            };
            let keep = Duration::from_secs(u64::from(keep_days) * 24 * 60 * 60);
            let now = SystemTime::now();
            let mut seen = Vec::new();
            // The listed repositories still worth looking at next time: there, with lost refs.
            let mut still_listed = Vec::new();
            for path in repos {
                let Ok(repo) = Repo::open(&path) else {
                    continue;
                };
                if listed.contains(&path)
                    && !still_listed.contains(&path)
                    && repo.lost_refs().map_or(true, |refs| !refs.is_empty())
                {
                    still_listed.push(path.clone());
                }
                let root = repo.root().canonicalize().unwrap_or(repo.root().to_owned());
                if seen.contains(&root) {
                    continue;
                }
                seen.push(root);
                match repo.lost_refs() {
                    Ok(refs) => plan.expired.extend(
                        refs.into_iter()
                            .filter(|r| r.expired(keep, now))
                            .map(|r| view(repo.root(), r)),
                    ),
                    Err(e) => plan.warnings.push(format!(
                        "lost-work refs of {} not looked at: {e}",
                        repo.root().display()
                    )),
                }
            }
            if still_listed != listed {
                write_repos(&listed_path, &still_listed)?;
            }
            Ok(plan)
        })
        .await
    }

    /// Notes that a forced delete is about to keep work in `repo`, so gc finds its lost refs
    /// after the last record naming the repository is gone.
    pub(crate) fn remember_lost_repo(&self, repo: &Path) -> Result<()> {
        let path = self.home.join(REPOS_FILE);
        let mut listed = read_repos(&path)?;
        if !listed.iter().any(|p| p == repo) {
            listed.push(repo.to_owned());
            write_repos(&path, &listed)?;
        }
        Ok(())
    }

    /// Deletes the planned lost refs, each only if it still holds what it held when planned.
    /// The ones deleted, and a warning for each that could not be.
    pub(crate) async fn expire_lost(
        &self,
        planned: Vec<LostRefView>,
    ) -> Result<(Vec<LostRefView>, Vec<String>)> {
        blocking(move || {
            let mut deleted = Vec::new();
            let mut warnings = Vec::new();
            for lost in planned {
                let done = Repo::open(&lost.repo).and_then(|repo| {
                    repo.delete_lost(&LostRef {
                        name: lost.name.clone(),
                        target: lost.target.clone(),
                        made_at: lost.made_at.timestamp().max(0) as u64,
                    })
                });
                match done {
                    Ok(()) => deleted.push(lost),
                    Err(e) => warnings.push(format!(
                        "{} in {} kept: {e}",
                        lost.name,
                        lost.repo.display()
                    )),
                }
            }
            Ok((deleted, warnings))
        })
        .await
    }
}

fn view(repo: &Path, lost: LostRef) -> LostRefView {
    LostRefView {
        repo: repo.to_owned(),
        made_at: DateTime::from_timestamp(lost.made_at as i64, 0).unwrap_or_default(),
        name: lost.name,
        target: lost.target,
    }
}

/// berth's clones of repositories named by URL: the folders in `dir` (none when it is not
/// there).
fn clones(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

/// The repositories file: missing is empty.
fn read_repos(path: &Path) -> Result<Vec<PathBuf>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text
            .lines()
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_error(format!("cannot read {}", path.display()), e)),
    }
}

/// Writes the repositories file whole and durably; written empty, it goes.
fn write_repos(path: &Path, repos: &[PathBuf]) -> Result<()> {
    if repos.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(io_error(format!("cannot remove {}", path.display()), e))
            }
            _ => Ok(()),
        };
    }
    let text: String = repos.iter().map(|p| format!("{}\n", p.display())).collect();
    berth_store_fs::durable::write_atomic(path, text.as_bytes())
        .map_err(|e| io_error(format!("cannot write {}", path.display()), e))
}

fn io_error(context: String, e: std::io::Error) -> Error {
    berth_core::Error::io(context, e).into()
}
