//! `berth workspace …`

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use berth_core::{
    NewWorkspace, StorageScope, Workspace, WorkspaceId, WorkspaceName, WorkspaceStore,
};
use berth_git::workspace::{self as git_workspace, GitRequest};
use berth_git::{BranchSpec, GitError, Health, Repo, WorktreeStatus};
use serde::Serialize;

use super::{Ctx, confirm};
use crate::cli::WorkspaceCmd;
use crate::render;

/// A workspace as `--json` prints it: the stored record plus where it lives and, for a git
/// workspace, the worktree's state.
#[derive(Serialize)]
struct WorkspaceView<'a> {
    #[serde(flatten)]
    workspace: &'a Workspace,
    path: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    git_status: Option<WorktreeStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    devices: Option<Vec<String>>,
}

fn view<'a>(ctx: &Ctx, ws: &'a Workspace, git_status: Option<WorktreeStatus>) -> WorkspaceView<'a> {
    WorkspaceView {
        workspace: ws,
        path: ctx.store.workspace_dir(&ws.id),
        git_status,
        devices: None,
    }
}

/// The worktree states of `all`, in order (`None` for plain workspaces).
async fn statuses(all: &[Workspace]) -> anyhow::Result<Vec<Option<WorktreeStatus>>> {
    let gits: Vec<_> = all.iter().filter_map(|ws| ws.git.clone()).collect();
    let mut found = git_workspace::statuses(gits).await?.into_iter();
    Ok(all
        .iter()
        .map(|ws| ws.git.as_ref().and_then(|_| found.next()))
        .collect())
}

/// A count git could not tell is shown as `?`.
fn known(count: Option<impl ToString>) -> String {
    count.map_or_else(|| "?".to_owned(), |c| c.to_string())
}

/// One line about a worktree: `berth/x +2 -0 ~3` (ahead, behind, changed files), or the
/// health when something is missing.
fn git_summary(status: &WorktreeStatus) -> String {
    match status.health {
        Health::Ok => format!(
            "{} +{} -{} ~{}",
            status.branch,
            known(status.ahead),
            known(status.behind),
            known(status.changed_files)
        ),
        health => format!("{} {}", status.branch, health.as_str()),
    }
}

/// Which repository a new workspace gets a worktree of, if any: `--repo`, else the one
/// containing the current folder; outside a repository a plain workspace, unless a git option
/// asked for one.
fn git_request(
    plain: bool,
    repo: Option<PathBuf>,
    branch: Option<BranchSpec>,
    base: Option<String>,
) -> anyhow::Result<Option<GitRequest>> {
    if plain {
        return Ok(None);
    }
    let wants_git = repo.is_some() || branch.is_some() || base.is_some();
    let start = match repo {
        Some(r) => r,
        None => std::env::current_dir().context("cannot read the current folder")?,
    };
    match Repo::discover(&start) {
        Ok(found) => Ok(Some(GitRequest {
            repo: found.root().to_owned(),
            branch,
            base,
        })),
        Err(GitError::NotARepository(_)) if !wants_git => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub async fn run(ctx: &Ctx, cmd: WorkspaceCmd) -> anyhow::Result<()> {
    let m = &ctx.manager;
    match cmd {
        WorkspaceCmd::List(flag) => {
            let all = m.list().await?;
            let statuses = statuses(&all).await?;
            if flag.json {
                let views: Vec<_> = all
                    .iter()
                    .zip(statuses)
                    .map(|(ws, st)| view(ctx, ws, st))
                    .collect();
                return Ok(render::json(&views)?);
            }
            let rows: Vec<Vec<String>> = all
                .iter()
                .zip(&statuses)
                .map(|(ws, st)| {
                    vec![
                        ws.id.to_string(),
                        ws.name.as_ref().map_or("-".to_owned(), |n| n.to_string()),
                        render::time(ws.last_accessed),
                        st.as_ref().map_or("-".to_owned(), git_summary),
                        render::cell(&ws.description),
                    ]
                })
                .collect();
            render::table(&["ID", "NAME", "LAST USED", "GIT", "DESCRIPTION"], &rows)?;
        }
        WorkspaceCmd::Create {
            name,
            description,
            id,
            agent_id,
            plain,
            repo,
            branch,
            checkout,
            base,
            json,
        } => {
            let new = NewWorkspace {
                id: id.map(WorkspaceId::new).transpose()?,
                name: name.map(WorkspaceName::new).transpose()?,
                description,
                agent_id,
                git: None,
            };
            let spec = match (branch, checkout) {
                (Some(b), _) => Some(BranchSpec::New(b)),
                (None, Some(b)) => Some(BranchSpec::Existing(b)),
                (None, None) => None,
            };
            let request = git_request(plain, repo, spec, base)?;
            let settings = match &request {
                // The workspace's own config does not exist yet: global file and environment.
                Some(_) => ctx.config(None).await?.config.git,
                None => Default::default(),
            };
            let repo = request.as_ref().map(|r| r.repo.clone());
            let created = git_workspace::create(m, new, request, &settings).await;
            // A failed create may have used a spare too.
            if let (Some(repo), Some(1..)) = (repo, settings.spare_worktrees) {
                refill_in_background(ctx, &repo);
            }
            let ws = created?;
            if json.json {
                let status = ws.git.as_ref().map(git_workspace::status);
                render::json(&view(ctx, &ws, status))?;
            } else {
                if let Some(git) = &ws.git {
                    eprintln!("worktree {} on branch {}", git.worktree, git.branch);
                }
                render::line(&ws.id)?;
            }
        }
        WorkspaceCmd::Show { workspace, json } => {
            let ws = m.resolve(&workspace).await?;
            let devices: Vec<String> = m
                .list_bindings()
                .await?
                .into_iter()
                .filter(|b| b.workspace == ws.id)
                .map(|b| b.device.to_string())
                .collect();
            let status = ws.git.as_ref().map(git_workspace::status);
            let mut v = view(ctx, &ws, status);
            if json.json {
                v.devices = Some(devices);
                return Ok(render::json(&v)?);
            }
            let dash = || "-".to_owned();
            let mut rows = vec![
                ("id", ws.id.to_string()),
                (
                    "name",
                    ws.name.as_ref().map_or_else(dash, |n| n.to_string()),
                ),
                ("description", render::cell(&ws.description)),
                ("created", render::time(ws.created_at)),
                ("last used", render::time(ws.last_accessed)),
                (
                    "agent",
                    ws.agent_id.as_deref().map_or_else(dash, render::cell),
                ),
                (
                    "path",
                    v.path
                        .as_ref()
                        .map_or_else(dash, |p| p.display().to_string()),
                ),
            ];
            if let (Some(git), Some(st)) = (&ws.git, &v.git_status) {
                rows.push(("repository", git.repo.clone()));
                rows.push(("worktree", git.worktree.clone()));
                let created = if git.branch_created {
                    ", created by berth"
                } else {
                    ""
                };
                rows.push((
                    "branch",
                    format!("{} (from {}{created})", git.branch, git.base_branch),
                ));
                rows.push(("health", st.health.as_str().to_owned()));
                rows.push((
                    "changes",
                    format!(
                        "{} ahead, {} behind, {} changed file(s)",
                        known(st.ahead),
                        known(st.behind),
                        known(st.changed_files)
                    ),
                ));
                if let Some(c) = &st.last_commit {
                    let short = &c.sha[..c.sha.len().min(10)];
                    rows.push((
                        "last commit",
                        format!("{short} {} ({})", render::cell(&c.subject), c.date),
                    ));
                }
            }
            let devices = if devices.is_empty() {
                dash()
            } else {
                render::cell(&devices.join(", "))
            };
            rows.push(("devices", devices));
            let mut out = std::io::stdout().lock();
            for (k, v) in rows {
                writeln!(out, "{:<12} {v}", format!("{k}:"))?;
            }
        }
        WorkspaceCmd::Delete {
            workspace,
            force,
            confirm: c,
        } => {
            let ws = match m.resolve(&workspace).await {
                Ok(ws) => ws,
                // Corrupt metadata cannot be read, but the workspace can still be deleted by
                // its exact id: deleting is how a person repairs it.
                Err(berth_core::Error::Corrupt { .. }) => {
                    let id = WorkspaceId::new(workspace.as_str()).context(
                        "a workspace with corrupt metadata can only be deleted by its full id",
                    )?;
                    confirm(
                        c.yes,
                        &format!(
                            "Delete workspace {id} (its metadata is corrupt) and everything in it?"
                        ),
                    )?;
                    let devices = m.delete(&id).await?;
                    eprintln!(
                        "deleted workspace {id}; unbound {} device(s); a git worktree it had, if any, was not looked at",
                        devices.len()
                    );
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            };
            let label = label(&ws);
            if !force {
                // Refuse before asking: a question whose yes would fail anyway wastes a turn.
                git_workspace::check_removable(&ws).await?;
            }
            confirm(
                c.yes,
                &format!("Delete workspace {label} and everything in it?"),
            )?;
            let removed = git_workspace::remove(m, &ws, force).await?;
            if let Some(w) = removed.warning {
                eprintln!("warning: {w}");
            }
            eprintln!(
                "deleted workspace {label}; unbound {} device(s)",
                removed.unbound.len()
            );
        }
        WorkspaceCmd::Gc {
            max_age,
            dry_run,
            confirm: c,
            json,
        } => {
            let age = chrono::Duration::days(i64::from(max_age));
            // One scan: the workspaces shown in the question are the ones removed.
            let (plan, kept) = git_workspace::sort_gc_plan(m.gc_plan(age).await?).await;
            for (ws, why) in &kept {
                eprintln!("keeping {}: {why}", label(ws));
            }
            let (removed, warnings) = if dry_run || plan.stale.is_empty() {
                (plan.stale, Vec::new())
            } else {
                let question = format!(
                    "Delete {} workspace(s) unused for {max_age} days?",
                    plan.stale.len()
                );
                confirm(c.yes, &question)?;
                git_workspace::gc_apply(m, plan).await?
            };
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            if json.json {
                let views: Vec<_> = removed.iter().map(|ws| view(ctx, ws, None)).collect();
                let kept: Vec<_> = kept
                    .iter()
                    .map(|(ws, why)| serde_json::json!({"id": ws.id, "name": ws.name, "reason": why}))
                    .collect();
                return Ok(render::json(&serde_json::json!({
                    "dry_run": dry_run, "max_age_days": max_age, "workspaces": views, "kept": kept
                }))?);
            }
            let verb = if dry_run { "would remove" } else { "removed" };
            for ws in &removed {
                render::line(format!(
                    "{verb} {} (last used {})",
                    label(ws),
                    render::time(ws.last_accessed)
                ))?;
            }
            eprintln!("{verb} {} workspace(s)", removed.len());
        }
        WorkspaceCmd::Path { workspace } => {
            let ws = m.resolve(&workspace).await?;
            m.touch(&ws).await?;
            match &ws.git {
                Some(git) => render::line(&git.worktree)?,
                None => {
                    let path = ctx
                        .store
                        .workspace_dir(&ws.id)
                        .context("this store keeps no folders")?;
                    render::line(path.display())?;
                }
            }
        }
        WorkspaceCmd::Spares {
            repo,
            fill,
            clear,
            json,
        } => {
            let repo = match repo {
                Some(r) => r,
                None => std::env::current_dir().context("cannot read the current folder")?,
            };
            let settings = ctx.config(None).await?.config.git;
            let (pool, repo) = git_workspace::spare_pool(m, &repo, &settings)?;
            let mut cleared = 0;
            if clear {
                cleared = pool.clear(&repo)?;
            }
            if fill {
                let want = settings.spare_worktrees.unwrap_or(0).max(1);
                git_workspace::fill_spares(&pool, &repo, want)?;
            }
            let ready = pool.count();
            if json.json {
                return Ok(render::json(&serde_json::json!({
                    "repo": repo.root(), "dir": pool.dir(), "ready": ready, "cleared": cleared
                }))?);
            }
            render::line(format!(
                "{ready} spare checkout(s) of {} in {}",
                repo.root().display(),
                pool.dir().display()
            ))?;
        }
        WorkspaceCmd::Storage(cmd) => {
            let ws = m.resolve(cmd.owner()).await?;
            super::storage::run(ctx, StorageScope::Workspace(ws.id), cmd).await?;
        }
    }
    Ok(())
}

/// Starts `berth workspace spares --fill` for `repo` as a detached process: the spare is ready
/// for the next create, and this command does not wait for a checkout nobody asked for yet.
fn refill_in_background(ctx: &Ctx, repo: &Path) {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let spawned = Command::new(exe)
        .arg("--home")
        .arg(ctx.store.home())
        .args(["workspace", "spares", "--fill", "--repo"])
        .arg(repo)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group: a Ctrl-C meant for this command does not stop the fill.
        .process_group(0)
        .spawn();
    if let Err(e) = spawned {
        eprintln!("warning: could not start filling spare checkouts: {e}");
    }
}

fn label(ws: &Workspace) -> String {
    match &ws.name {
        Some(n) => format!("{} ({n})", ws.id),
        None => ws.id.to_string(),
    }
}
