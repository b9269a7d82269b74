//! `berth workspace …`: one function per subcommand.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use berth_ops::review::{Health, WorktreeStatus};
use berth_ops::{
    AdoptWorkspace, CreateWorkspace, MergeMode, MergeReport, MergeWorkspace, Ops, Owner, Repository,
};

use super::{confirm, meant};
use crate::cli::WorkspaceCmd;
use crate::render;

pub async fn run(ops: &Ops, cmd: WorkspaceCmd) -> anyhow::Result<()> {
    match cmd {
        WorkspaceCmd::List {
            size,
            archived,
            json,
        } => list(ops, size, archived, json.json).await,
        WorkspaceCmd::Archive { workspace, json } => {
            let workspace = meant(ops, Some(&workspace)).await?;
            archive(ops, &workspace, json.json).await
        }
        WorkspaceCmd::Show { workspace, json } => {
            let workspace = meant(ops, workspace.as_deref()).await?;
            show(ops, &workspace, json.json).await
        }
        WorkspaceCmd::Diff {
            workspace,
            stat,
            json,
        } => {
            let workspace = meant(ops, workspace.as_deref()).await?;
            diff(ops, &workspace, stat, json.json).await
        }
        cmd @ (WorkspaceCmd::Create { .. }
        | WorkspaceCmd::Adopt { .. }
        | WorkspaceCmd::Merge { .. }) => run_making(ops, cmd).await,
        WorkspaceCmd::Delete {
            workspace,
            force,
            confirm: c,
        } => delete(ops, &workspace, force, c.yes).await,
        WorkspaceCmd::Gc {
            max_age,
            merged,
            dry_run,
            confirm: c,
            json,
        } => gc(ops, (!merged).then_some(max_age), dry_run, c.yes, json.json).await,
        WorkspaceCmd::Prune {
            dry_run,
            confirm: c,
            json,
        } => prune(ops, dry_run, c.yes, json.json).await,
        WorkspaceCmd::Path { workspace } => path(ops, workspace.as_deref()).await,
        WorkspaceCmd::Ports { workspace, json } => {
            ports(ops, workspace.as_deref(), json.json).await
        }
        WorkspaceCmd::Ps {
            workspace,
            kill,
            json,
        } => super::workspace_ps::ps(ops, workspace.as_deref(), kill.as_deref(), json.json).await,
        WorkspaceCmd::Repair { repo, json } => repair(ops, &repo_or_here(repo)?, json.json).await,
        WorkspaceCmd::Spares {
            repo,
            fill,
            clear,
            json,
        } => spares(ops, &repo_or_here(repo)?, fill, clear, json.json).await,
        WorkspaceCmd::Storage(cmd) => super::storage::run(ops, Owner::Workspace, cmd).await,
        WorkspaceCmd::Push {
            workspace,
            remote,
            json,
        } => {
            let workspace = meant(ops, workspace.as_deref()).await?;
            super::send_on::push(ops, &workspace, &remote, json.json).await
        }
        WorkspaceCmd::Pr {
            workspace,
            remote,
            title,
            json,
        } => {
            let workspace = meant(ops, workspace.as_deref()).await?;
            super::send_on::pull_request(ops, &workspace, &remote, title, json.json).await
        }
        WorkspaceCmd::Memory {
            workspace,
            edit,
            clear,
            confirm: c,
            json,
        } => {
            let workspace = meant(ops, workspace.as_deref()).await?;
            memory(ops, &workspace, edit, clear, c.yes, json.json).await
        }
    }
}

/// The workspace commands that make or merge one: their requests are built here.
async fn run_making(ops: &Ops, cmd: WorkspaceCmd) -> anyhow::Result<()> {
    match cmd {
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
            let request = CreateWorkspace {
                id,
                name,
                description,
                agent_id,
                plain,
                repository: repository(ops, repo).await?,
                new_branch: branch,
                checkout,
                base,
            };
            create(ops, request, json.json).await
        }
        WorkspaceCmd::Adopt {
            path,
            name,
            description,
            json,
        } => {
            let request = AdoptWorkspace {
                path,
                name,
                description,
            };
            adopt(ops, request, json.json).await
        }
        WorkspaceCmd::Merge {
            workspace,
            into,
            squash,
            rebase,
            delete,
            json,
        } => {
            let request = MergeWorkspace {
                workspace: meant(ops, workspace.as_deref()).await?,
                into,
                mode: merge_mode(squash, rebase),
                delete,
                message: None,
            };
            merge(ops, request, json.json).await
        }
        _ => unreachable!("`run` runs the other workspace commands itself"),
    }
}

fn current_dir() -> anyhow::Result<PathBuf> {
    std::env::current_dir().context("cannot read the current folder")
}

/// The repository `--repo` names, else the one containing this folder.
fn repo_or_here(repo: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match repo {
        Some(r) => Ok(r),
        None => current_dir(),
    }
}

/// Where `workspace create` makes its worktree from.
async fn repository(ops: &Ops, repo: Option<PathBuf>) -> anyhow::Result<Repository> {
    Ok(match repo {
        // A URL: berth's clone of it under the home, fetched now.
        Some(r) => Repository::Named(ops.named_repository(&r).await?.path),
        None => Repository::Around(current_dir()?),
    })
}

fn merge_mode(squash: bool, rebase: bool) -> MergeMode {
    match (squash, rebase) {
        (true, _) => MergeMode::Squash,
        (_, true) => MergeMode::Rebase,
        _ => MergeMode::Merge,
    }
}

async fn path(ops: &Ops, workspace: Option<&str>) -> anyhow::Result<()> {
    let workspace = meant(ops, workspace).await?;
    let path = ops.workspace_path(&workspace).await?;
    Ok(render::line(path.display())?)
}

async fn ports(ops: &Ops, workspace: Option<&str>, json: bool) -> anyhow::Result<()> {
    let workspace = meant(ops, workspace).await?;
    let ports = ops.workspace_ports(&workspace).await?;
    if json {
        return Ok(render::json(&ports)?);
    }
    Ok(render::line(format!(
        "{}-{}",
        ports.ports.first, ports.ports.last
    ))?)
}

async fn spares(
    ops: &Ops,
    repo: &std::path::Path,
    fill: bool,
    clear: bool,
    json: bool,
) -> anyhow::Result<()> {
    crate::progress::watch(json);
    let report = ops.spares(repo, fill, clear).await;
    crate::progress::finish_all();
    let report = report?;
    if json {
        return Ok(render::json(&report)?);
    }
    Ok(render::line(format!(
        "{} spare checkout(s) of {} in {}",
        report.ready,
        report.repo.display(),
        report.dir.display()
    ))?)
}

async fn archive(ops: &Ops, identifier: &str, json: bool) -> anyhow::Result<()> {
    let archived = ops.archive_workspace(identifier).await?;
    if let Some(w) = &archived.warning {
        eprintln!("warning: {w}");
    }
    if json {
        return Ok(render::json(&archived)?);
    }
    match (&archived.lost_ref, archived.already) {
        (_, true) => eprintln!(
            "workspace {} was archived already, {}",
            archived.label,
            render::time(archived.archived_at)
        ),
        (Some(r), false) => eprintln!(
            "archived workspace {}; its work is kept on {r}, its sessions and storage stay",
            archived.label
        ),
        (None, false) => eprintln!(
            "archived workspace {}; its sessions and storage stay",
            archived.label
        ),
    }
    Ok(())
}

async fn list(ops: &Ops, size: bool, archived: bool, json: bool) -> anyhow::Result<()> {
    // JSON in the store's order, by id, stable for scripts; without sizes, written from the
    // records' text as the store keeps it.
    if json && !size {
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout());
        return Ok(ops.write_workspaces_json(archived, &mut out).await?);
    }
    let mut all = ops.list_workspaces_including(archived).await?;
    if size {
        ops.measure_workspaces(&mut all).await?;
    }
    if json {
        return Ok(render::json(&all)?);
    }
    // The table by name, as a person looks for them; the unnamed after, by id.
    all.sort_by(|a, b| (a.name.is_none(), &a.name, &a.id).cmp(&(b.name.is_none(), &b.name, &b.id)));
    if all.is_empty() {
        eprintln!(
            "no workspaces yet: `berth workspace create NAME` makes one (a worktree, inside a git repository)"
        );
        return Ok(());
    }
    let ids: Vec<&str> = all.iter().map(|ws| ws.id.as_str()).collect();
    let rows: Vec<Vec<String>> = all
        .iter()
        .zip(render::short_ids(&ids))
        .map(|(ws, id)| {
            let mut row = vec![
                ws.name.clone().unwrap_or_else(|| "-".to_owned()),
                id,
                render::time(ws.last_accessed),
                ws.git_status.as_ref().map_or("-".to_owned(), git_summary),
            ];
            if size {
                row.push(ws.size_bytes.map_or("-".to_owned(), berth_ops::disk::human));
            }
            if archived {
                row.push(ws.archived_at.map_or("-".to_owned(), render::time));
            }
            row.push(render::cell(&ws.description));
            row
        })
        .collect();
    let mut headers = vec!["NAME", "ID", "LAST USED", "GIT"];
    if size {
        headers.push("SIZE");
    }
    if archived {
        headers.push("ARCHIVED");
    }
    headers.push("DESCRIPTION");
    render::table(&headers, &rows)?;
    if all.iter().any(|ws| ws.git_status.is_some()) {
        render::legend(GIT_LEGEND);
    }
    Ok(())
}

/// What the GIT column's symbols mean.
const GIT_LEGEND: &str =
    "GIT: branch  +commits ahead of its base  -commits behind it  ~files with uncommitted changes";

async fn create(ops: &Ops, request: CreateWorkspace, json: bool) -> anyhow::Result<()> {
    crate::progress::watch(json);
    let created = ops.create_workspace_reported(request).await;
    crate::progress::finish_all();
    let created = created?;
    let ws = &created.workspace;
    if let (Some(git), Some(start)) = (&ws.git, &created.start) {
        eprintln!(
            "worktree {} on branch {}, starting at {} ({})",
            git.worktree.display(),
            git.branch,
            start.rev,
            start.sha
        );
    }
    for w in &created.warnings {
        eprintln!("warning: {w}");
    }
    if json {
        // With the worktree's state, as `show` has it.
        let shown = ops.show_workspace(ws.id.as_str()).await?;
        return Ok(render::json(&shown)?);
    }
    Ok(render::line(&ws.id)?)
}

async fn repair(ops: &Ops, repo: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let report = ops.repair_workspaces(repo).await?;
    for skipped in &report.skipped {
        eprintln!("skipped {}: {}", skipped.label, skipped.reason);
    }
    if report.spares_removed > 0 {
        eprintln!(
            "removed {} spare checkout(s) left under the old path",
            report.spares_removed
        );
    }
    if json {
        return Ok(render::json(&report)?);
    }
    for ws in &report.reattached {
        render::line(format!(
            "reattached {}: {} (was in {})",
            ws.label,
            ws.worktree.display(),
            ws.from.display()
        ))?;
    }
    eprintln!(
        "reattached {} workspace(s) to {}",
        report.reattached.len(),
        report.repo.display()
    );
    Ok(())
}

async fn adopt(ops: &Ops, request: AdoptWorkspace, json: bool) -> anyhow::Result<()> {
    let ws = ops.adopt_workspace(request).await?;
    if json {
        let shown = ops.show_workspace(ws.id.as_str()).await?;
        return Ok(render::json(&shown)?);
    }
    if let Some(git) = &ws.git {
        eprintln!(
            "adopted worktree {} on {} (repository {}); berth will not delete its branch",
            git.worktree.display(),
            git.branch,
            git.repo.display()
        );
    }
    Ok(render::line(&ws.id)?)
}

async fn diff(ops: &Ops, identifier: &str, stat: bool, json: bool) -> anyhow::Result<()> {
    // A workspace a pool's node made elsewhere is read from the branch it pushed.
    let runs = berth_run::RunStore::open(ops).await?;
    let d = berth_run::workspace_diff(ops, &runs, identifier, !stat && !json).await?;
    if json {
        return Ok(render::json(&d)?);
    }
    if let Some(patch) = &d.patch {
        return Ok(render::patch(patch)?);
    }
    let counted = |n: Option<u64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let rows: Vec<Vec<String>> = d
        .files
        .iter()
        .map(|f| {
            vec![
                f.status.to_owned(),
                format!("+{}", counted(f.added)),
                format!("-{}", counted(f.removed)),
                render::file_name(&f.path),
            ]
        })
        .collect();
    render::table(&["CHANGE", "ADDED", "REMOVED", "PATH"], &rows)?;
    let (added, removed) = d.totals();
    Ok(render::line(format!(
        "{} file(s) changed, +{added} -{removed} against {}",
        d.files.len(),
        d.base
    ))?)
}

async fn merge(ops: &Ops, request: MergeWorkspace, json: bool) -> anyhow::Result<()> {
    // A workspace a pool's node made elsewhere: its pushed branch, merged into the
    // repository this command runs in.
    let runs = berth_run::RunStore::open(ops).await?;
    let here = std::env::current_dir()?;
    let report = berth_run::merge_workspace(ops, &runs, request, &here).await?;
    if json {
        return Ok(render::json(&report)?);
    }
    let m = &report.merged;
    if let Some(commit) = &m.uncommitted_commit {
        eprintln!(
            "committed the uncommitted work of {} as {}",
            report.workspace,
            &commit[..commit.len().min(12)]
        );
    }
    let short = |sha: &str| sha[..sha.len().min(12)].to_owned();
    if m.before == m.after {
        render::line(format!(
            "{}: nothing to merge: {} already has every commit of {}, and its worktree had no uncommitted change",
            report.workspace, m.into, report.branch
        ))?;
    } else {
        merged(&report, short)?;
    }
    if let Some(deleted) = &report.deleted {
        render::line(format!("deleted workspace {}", deleted.label))?;
        if let Some(w) = &deleted.warning {
            eprintln!("warning: {w}");
        }
    }
    if let Some(w) = &report.warning {
        eprintln!("warning: {w}");
    }
    Ok(())
}

/// What a merge that moved its target did.
fn merged(report: &MergeReport, short: impl Fn(&str) -> String) -> anyhow::Result<()> {
    let m = &report.merged;
    let how = match (m.fast_forward, m.mode) {
        (true, _) => "fast-forward".to_owned(),
        (_, mode) => format!("{mode:?}").to_lowercase(),
    };
    render::line(format!(
        "{}: {} commit(s) of {} into {} ({how}), {} -> {}",
        report.workspace,
        m.commits,
        report.branch,
        m.into,
        short(&m.before),
        short(&m.after)
    ))?;
    if let Some(path) = &m.checkout {
        render::line(format!("updated the checkout at {}", path.display()))?;
    }
    Ok(())
}

async fn show(ops: &Ops, identifier: &str, json: bool) -> anyhow::Result<()> {
    let mut ws = ops.show_workspace(identifier).await?;
    // This command's thread has nothing else to do while the walk runs.
    ops.measure_workspace_here(&mut ws)?;
    if json {
        return Ok(render::json(&ws)?);
    }
    let dash = || "-".to_owned();
    let mut rows = vec![
        ("id", ws.id.to_string()),
        ("name", ws.name.clone().unwrap_or_else(dash)),
        ("description", render::cell(&ws.description)),
        ("created", render::time(ws.created_at)),
        ("last used", render::time(ws.last_accessed)),
        (
            "agent",
            ws.agent_id.as_deref().map_or_else(dash, render::cell),
        ),
        (
            "path",
            ws.path
                .as_ref()
                .map_or_else(dash, |p| p.display().to_string()),
        ),
        (
            "size",
            ws.size_bytes.map_or_else(dash, |b| {
                format!("{} ({b} bytes)", berth_ops::disk::human(b))
            }),
        ),
        (
            "ports",
            ws.ports.map_or_else(
                || "none yet (given on first use: a run, a setup command, a command of berth's agent, `berth workspace ports`)".to_owned(),
                |p| format!("{}-{} (BERTH_PORT = {})", p.first, p.last, p.first),
            ),
        ),
    ];
    archived_rows(&ws, &mut rows);
    git_rows(&ws, &mut rows);
    let devices: Vec<&str> = ws.devices.iter().flatten().map(|d| d.as_str()).collect();
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
    Ok(())
}

/// The rows of an archived workspace: when, and what is kept of it.
fn archived_rows(ws: &berth_ops::WorkspaceView, rows: &mut Vec<(&'static str, String)>) {
    if let Some(at) = ws.archived_at {
        let what = match &ws.git {
            Some(_) => format!(
                "its worktree was removed and its work kept on a ref under refs/berth/lost/{}",
                ws.id
            ),
            None => "its folder is kept".to_owned(),
        };
        rows.push((
            "archived",
            format!("{}: {what}; it takes no new session", render::time(at)),
        ));
        if let Some(git) = &ws.git {
            rows.push(("repository", git.repo.display().to_string()));
            rows.push(("worktree", format!("{} (removed)", git.worktree.display())));
            rows.push((
                "branch",
                format!("{} (from {})", git.branch, git.base_branch),
            ));
        }
    }
}

/// The rows of a git workspace: its repository, branch, checkout, health and changes.
fn git_rows(ws: &berth_ops::WorkspaceView, rows: &mut Vec<(&'static str, String)>) {
    if let (Some(git), Some(st)) = (&ws.git, &ws.git_status) {
        rows.push(("repository", git.repo.display().to_string()));
        rows.push(("worktree", git.worktree.display().to_string()));
        let created = if git.branch_created {
            ", created by berth"
        } else {
            ""
        };
        rows.push((
            "branch",
            format!("{} (from {}{created})", git.branch, git.base_branch),
        ));
        rows.push(("checked out", checked_out(st)));
        rows.push(("health", st.health.as_str().to_owned()));
        if st.health == Health::RepoMissing {
            rows.push((
                "hint",
                "if the repository was moved, `berth workspace repair --repo NEW-PATH` reattaches this workspace to it"
                    .to_owned(),
            ));
        }
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
            rows.push((
                "last commit",
                format!(
                    "{} {} ({})",
                    short(&c.sha),
                    render::cell(&c.subject),
                    c.date
                ),
            ));
        }
    }
}

async fn delete(ops: &Ops, names: &[String], force: bool, yes: bool) -> anyhow::Result<()> {
    // Named, never taken from the folder: deleting the workspace one stands in is
    // too easy to do by accident.
    let mut identifiers = Vec::with_capacity(names.len());
    for w in names {
        identifiers.push(meant(ops, Some(w)).await?);
    }
    // Every one planned before asking, and refused before asking when one would lose work:
    // a question whose yes would fail anyway wastes a turn. The removal checks again.
    let mut plans = Vec::with_capacity(identifiers.len());
    for identifier in &identifiers {
        let plan = ops.plan_delete(identifier, force).await?;
        if plans
            .iter()
            .any(|p: &berth_ops::DeletePlan| p.label == plan.label)
        {
            continue;
        }
        plans.push(plan);
    }
    let question = match plans.as_slice() {
        [one] => one.question.clone(),
        all => format!(
            "Delete {} workspaces ({})?",
            all.len(),
            all.iter()
                .map(|p| p.label.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    confirm(yes, &question)?;
    // An agent's workspace: its run records the work discarded.
    let runs = berth_run::RunStore::open(ops).await?;
    for plan in plans {
        let deleted = berth_run::delete_workspace(ops, &runs, plan).await?;
        if let Some(w) = &deleted.warning {
            eprintln!("warning: {w}");
        }
        eprintln!(
            "deleted workspace {}; unbound {} device(s)",
            deleted.label,
            deleted.unbound.len()
        );
    }
    Ok(())
}

/// `workspace gc`: by age (`Some(days)`), or `--merged` (`None`).
async fn gc(
    ops: &Ops,
    max_age: Option<u32>,
    dry_run: bool,
    yes: bool,
    json: bool,
) -> anyhow::Result<()> {
    let plan = match max_age {
        Some(days) => ops.plan_gc(days).await?,
        None => ops.plan_gc_merged().await?,
    };
    for kept in &plan.kept {
        eprintln!("keeping {}: {}", kept.label, kept.reason);
    }
    let report = if dry_run || plan.is_empty() {
        plan.dry_run()
    } else {
        let mut question = match max_age {
            Some(days) => format!(
                "Delete {} workspace(s) unused for {days} days",
                plan.stale.len()
            ),
            None => format!(
                "Delete {} workspace(s) whose branch is merged",
                plan.stale.len()
            ),
        };
        if !plan.lost_refs.is_empty() {
            question += &format!(
                " and {} lost-work ref(s) older than {} days",
                plan.lost_refs.len(),
                plan.keep_lost_days
            );
        }
        question += "?";
        let already = plan.kept.len();
        confirm(yes, &question)?;
        crate::progress::watch(json);
        let report = ops.apply_gc(plan).await;
        crate::progress::finish_all();
        let report = report?;
        // What changed while the question waited is kept, and said so.
        for kept in &report.kept[already..] {
            eprintln!("kept {}: {}", kept.label, kept.reason);
        }
        report
    };
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if json {
        return Ok(render::json(&report)?);
    }
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for ws in &report.removed {
        render::line(format!(
            "{verb} {} (last used {})",
            ws.label,
            render::time(ws.last_accessed)
        ))?;
    }
    for lost in &report.lost_refs {
        render::line(format!(
            "{verb} {} in {} (kept {})",
            lost.name,
            lost.repo.display(),
            render::time(lost.made_at)
        ))?;
    }
    eprintln!(
        "{verb} {} workspace(s) and {} lost-work ref(s)",
        report.removed.len(),
        report.lost_refs.len()
    );
    Ok(())
}

async fn prune(ops: &Ops, dry_run: bool, yes: bool, json: bool) -> anyhow::Result<()> {
    let plan = ops.plan_prune().await?;
    for kept in &plan.kept {
        eprintln!("keeping {} {}: {}", kept.kind, kept.name, kept.reason);
    }
    let report = if dry_run || plan.is_empty() {
        plan.dry_run()
    } else {
        let question = format!(
            "Remove {} worktree(s) no workspace records and {} record(s) whose worktree is gone?",
            plan.worktrees.len(),
            plan.workspaces.len()
        );
        let already = plan.kept.len();
        confirm(yes, &question)?;
        let report = ops.apply_prune(plan).await?;
        for kept in &report.kept[already..] {
            eprintln!("kept {} {}: {}", kept.kind, kept.name, kept.reason);
        }
        report
    };
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if json {
        return Ok(render::json(&report)?);
    }
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    for wt in &report.worktrees {
        let what = if wt.folder_gone {
            "git's record of the worktree"
        } else {
            "worktree"
        };
        render::line(format!(
            "{verb} {what} {} ({} of {}; no workspace records it)",
            wt.path.display(),
            wt.branch,
            wt.repo.display()
        ))?;
    }
    for ws in &report.workspaces {
        render::line(format!(
            "{verb} workspace {} (its worktree is gone)",
            ws.label
        ))?;
    }
    eprintln!(
        "{verb} {} worktree(s) and {} workspace record(s); kept {}",
        report.worktrees.len(),
        report.workspaces.len(),
        report.kept.len()
    );
    Ok(())
}

/// What the worktree has checked out now: its branch, or `detached at <sha>`, with the commits
/// only that HEAD holds.
fn checked_out(status: &WorktreeStatus) -> String {
    let mut text = match (&status.head, status.detached) {
        (Some(sha), true) => format!("detached at {}", short(sha)),
        (None, true) => "detached".to_owned(),
        (_, false) => status.branch.clone(),
    };
    if let Some(n @ 1..) = status.unreferenced_commits {
        text += &format!(" ({n} commit(s) no branch, tag or remote has)");
    }
    text
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
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
            match (&status.head, status.detached) {
                (Some(sha), true) => format!("detached@{}", short(sha)),
                _ => status.branch.clone(),
            },
            known(status.ahead),
            known(status.behind),
            known(status.changed_files)
        ),
        health => format!("{} {}", status.branch, health.as_str()),
    }
}

/// `berth workspace memory`: show, edit or clear a workspace's memory.
async fn memory(
    ops: &Ops,
    identifier: &str,
    edit: bool,
    clear: bool,
    yes: bool,
    json: bool,
) -> anyhow::Result<()> {
    let ws = ops.resolve_workspace(identifier).await?;
    if clear {
        confirm(
            yes,
            &format!("Forget every note of workspace {}'s memory?", ws.label()),
        )?;
        ops.clear_memory(&ws).await?;
        eprintln!("cleared the memory of {}", ws.label());
        return Ok(());
    }
    if edit {
        let path = ops.memory_file(&ws).await?;
        let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let editor = set("VISUAL")
            .or_else(|| set("EDITOR"))
            .unwrap_or_else(|| "vi".into());
        // As git runs it: the variable is a shell command line, the file its argument.
        let line = format!("{} \"$@\"", editor.to_string_lossy());
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(line)
            .arg("sh")
            .arg(&path)
            .status()
            .with_context(|| format!("cannot start {}", editor.to_string_lossy()))?;
        if !status.success() {
            anyhow::bail!("{} ended with {status}", editor.to_string_lossy());
        }
        return Ok(());
    }
    let memory = ops.memory(&ws).await?;
    if json {
        return Ok(render::json(&memory)?);
    }
    if memory.notes.is_empty() {
        eprintln!(
            "no notes in {}'s memory yet: its agents keep them with `remember` (or edit {})",
            ws.label(),
            memory.path.display()
        );
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    for note in &memory.notes {
        writeln!(out, "{}  {}", note.date, render::cell(&note.text))?;
    }
    Ok(())
}
