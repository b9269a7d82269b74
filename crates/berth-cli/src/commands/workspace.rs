//! `berth workspace …`

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use berth_core::{
    NewWorkspace, StorageScope, Workspace, WorkspaceId, WorkspaceName, WorkspaceStore,
};
use serde::Serialize;

use super::{Ctx, confirm};
use crate::cli::WorkspaceCmd;
use crate::render;

/// A workspace as `--json` prints it: the stored record plus where it lives.
#[derive(Serialize)]
struct WorkspaceView<'a> {
    #[serde(flatten)]
    workspace: &'a Workspace,
    path: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    devices: Option<Vec<String>>,
}

fn view<'a>(ctx: &Ctx, ws: &'a Workspace) -> WorkspaceView<'a> {
    WorkspaceView {
        workspace: ws,
        path: ctx.store.workspace_dir(&ws.id),
        devices: None,
    }
}

pub async fn run(ctx: &Ctx, cmd: WorkspaceCmd) -> anyhow::Result<()> {
    let m = &ctx.manager;
    match cmd {
        WorkspaceCmd::List(flag) => {
            let all = m.list().await?;
            if flag.json {
                let views: Vec<_> = all.iter().map(|ws| view(ctx, ws)).collect();
                return Ok(render::json(&views)?);
            }
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|ws| {
                    vec![
                        ws.id.to_string(),
                        ws.name.as_ref().map_or("-".to_owned(), |n| n.to_string()),
                        render::time(ws.last_accessed),
                        render::cell(&ws.description),
                    ]
                })
                .collect();
            render::table(&["ID", "NAME", "LAST USED", "DESCRIPTION"], &rows)?;
        }
        WorkspaceCmd::Create {
            name,
            description,
            id,
            agent_id,
            json,
        } => {
            let new = NewWorkspace {
                id: id.map(WorkspaceId::new).transpose()?,
                name: name.map(WorkspaceName::new).transpose()?,
                description,
                agent_id,
                git: None,
            };
            let ws = m.create(new).await?;
            if json.json {
                render::json(&view(ctx, &ws))?;
            } else {
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
            let mut v = view(ctx, &ws);
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
            if let Some(git) = &ws.git {
                rows.push(("repository", git.repo.clone()));
                rows.push((
                    "branch",
                    format!("{} (from {})", git.branch, git.base_branch),
                ));
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
            confirm: c,
        } => {
            let (id, label) = match m.resolve(&workspace).await {
                Ok(ws) => (ws.id.clone(), label(&ws)),
                // Corrupt metadata cannot be read, but the workspace can still be deleted by
                // its exact id: deleting is how a person repairs it.
                Err(berth_core::Error::Corrupt { .. }) => {
                    let id = WorkspaceId::new(workspace.as_str()).context(
                        "a workspace with corrupt metadata can only be deleted by its full id",
                    )?;
                    let label = id.to_string();
                    (id, label)
                }
                Err(e) => return Err(e.into()),
            };
            confirm(
                c.yes,
                &format!("Delete workspace {label} and everything in it?"),
            )?;
            let devices = m.delete(&id).await?;
            eprintln!(
                "deleted workspace {label}; unbound {} device(s)",
                devices.len()
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
            let plan = m.gc_plan(age).await?;
            let removed = if dry_run || plan.stale.is_empty() {
                plan.stale
            } else {
                let question = format!(
                    "Delete {} workspace(s) unused for {max_age} days?",
                    plan.stale.len()
                );
                confirm(c.yes, &question)?;
                m.gc_apply(plan).await?
            };
            if json.json {
                let views: Vec<_> = removed.iter().map(|ws| view(ctx, ws)).collect();
                return Ok(render::json(&serde_json::json!({
                    "dry_run": dry_run, "max_age_days": max_age, "workspaces": views
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
            let path = ctx
                .store
                .workspace_dir(&ws.id)
                .context("this store keeps no folders")?;
            render::line(path.display())?;
        }
        WorkspaceCmd::Storage(cmd) => {
            let ws = m.resolve(cmd.owner()).await?;
            super::storage::run(ctx, StorageScope::Workspace(ws.id), cmd).await?;
        }
    }
    Ok(())
}

fn label(ws: &Workspace) -> String {
    match &ws.name {
        Some(n) => format!("{} ({n})", ws.id),
        None => ws.id.to_string(),
    }
}
