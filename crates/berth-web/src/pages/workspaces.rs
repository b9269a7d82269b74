//! The workspaces (`/`), their git state (`/w/status`, fetched by the page after it loads),
//! one workspace (`/w/{id}`), its files (`/w/{id}/files`) and its diff (`/w/{id}/diff`).

use std::collections::BTreeMap;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use berth_ops::shown::{Form, visible};
use berth_ops::{Node, Owner, SessionView, StoragePath, Workspace};
use maud::{Markup, PreEscaped, html};
use serde::{Deserialize, Serialize};

use crate::error::PageResult;
use crate::markdown;
use crate::page::{Page, age, encode, page};
use crate::{Viewer, Web};

/// Workspaces a page of the list shows.
pub const PAGE_SIZE: usize = 50;
/// The most of a file a page shows.
const SHOWN_BYTES: u64 = 1024 * 1024;

#[derive(Deserialize)]
pub struct ListQuery {
    q: Option<String>,
    after: Option<String>,
}

/// `/`: a page of workspaces, searched by `q` (id, name or description), after the cursor
/// `after`. Only the records of the page are read; what needs git comes later.
pub async fn list(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    Query(query): Query<ListQuery>,
) -> PageResult<Page> {
    let ops = &web.inner.ops;
    let q = query.q.as_deref().map(str::trim).filter(|q| !q.is_empty());
    let held = web.held(&viewer).await?;
    let (items, next) = match held.workspace() {
        Some(mine) => (vec![mine.clone()], None),
        None => {
            let got = ops
                .workspace_page(query.after.as_deref(), Some(PAGE_SIZE), q)
                .await?;
            (got.items, got.next)
        }
    };
    let body = html! {
        div.bar {
            h1 { "Workspaces" }
            form.search method="get" action="/" role="search" {
                input type="search" name="q" value=[q] placeholder="Search by name, id or description" aria-label="Search workspaces";
                button type="submit" { "Search" }
            }
        }
        @if items.is_empty() {
            p.empty { @if q.is_some() { "No workspace matches." } @else { "No workspaces yet. Make one with " code { "berth workspace create" } "." } }
        } @else {
            table.list.workspaces {
                thead { tr {
                    th { "Workspace" } th { "Kind" } th { "Branch" } th { "Changes" }
                    th { "Sessions" } th { "Ports" } th { "Last used" }
                } }
                tbody {
                    @for ws in &items { (row(ws)) }
                }
            }
        }
        @if let Some(next) = &next {
            nav.pager {
                a rel="next" href={ "/?after=" (encode(next)) @if let Some(q) = q { "&q=" (encode(q)) } } { "Next page →" }
            }
        }
    };
    Ok(page(&viewer, "workspaces", "Workspaces", body))
}

fn row(ws: &Workspace) -> Markup {
    let id = ws.id.as_str();
    html! {
        tr data-workspace=(id) {
            td data-label="Workspace" {
                a href={ "/w/" (id) } { (ws.name.as_ref().map_or(id, |n| n.as_str())) }
                @if ws.name.is_some() { " " small.id { (short(id)) } }
                @if !ws.description.is_empty() { div.desc { (ws.description) } }
            }
            td data-label="Kind" { @if ws.git.is_some() { "git" } @else { "folder" } }
            td data-label="Branch" data-fill="branch" {
                @match &ws.git { Some(git) => { code { (git.branch) } " " span.pending { "…" } }, None => "—" }
            }
            td data-label="Changes" data-fill="changes" { @if ws.git.is_some() { span.pending { "…" } } @else { "—" } }
            td data-label="Sessions" data-fill="sessions" { span.pending { "…" } }
            td data-label="Ports" { @match ws.ports { Some(p) => { (p.first) "–" (p.last()) }, None => span title=(NO_PORTS_YET) { "none yet" } } }
            td data-label="Last used" { time datetime=(ws.last_accessed.to_rfc3339()) { (age(ws.last_accessed)) } }
        }
    }
}

/// What a workspace without ports is told: why it has none, and when it gets them.
const NO_PORTS_YET: &str = "a block is given when something of the workspace first needs one (a run, a setup command, a command of berth's agent, berth workspace ports)";

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

#[derive(Deserialize)]
pub struct StatusQuery {
    /// Workspace ids, comma-separated.
    ids: String,
}

/// What costs a call to git or a listing of sessions, for the rows of a page.
#[derive(Serialize)]
pub struct RowStatus {
    branch: Option<String>,
    ahead: Option<u64>,
    behind: Option<u64>,
    changed_files: Option<usize>,
    health: Option<String>,
    sessions: usize,
}

/// `/w/status?ids=a,b`: the git state and session count of each workspace named that the
/// viewer may see (others are left out), looked up side by side.
pub async fn status(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    Query(query): Query<StatusQuery>,
) -> PageResult<axum::Json<BTreeMap<String, RowStatus>>> {
    let ids: Vec<&str> = query.ids.split(',').take(PAGE_SIZE * 2).collect();
    let held = web.held(&viewer).await?;
    let lookups = ids.into_iter().map(|id| {
        let web = web.clone();
        let held = &held;
        async move {
            let ws = web.visible_workspace(held, id).await.ok()?;
            let ops = &web.inner.ops;
            let git = ops.git_status(&ws).await.ok().flatten();
            let sessions = ops.session_records(Some(&ws.id)).await.ok()?.len();
            Some((
                ws.id.to_string(),
                RowStatus {
                    branch: git.as_ref().map(|g| g.branch.clone()),
                    ahead: git.as_ref().and_then(|g| g.ahead),
                    behind: git.as_ref().and_then(|g| g.behind),
                    changed_files: git.as_ref().and_then(|g| g.changed_files),
                    health: git.as_ref().map(|g| {
                        serde_json::to_value(g.health)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default()
                    }),
                    sessions,
                },
            ))
        }
    });
    let found = futures::future::join_all(lookups).await;
    Ok(axum::Json(found.into_iter().flatten().collect()))
}

/// `/w/{id}`: a workspace, its sessions, and where to look further.
pub async fn show(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> PageResult<Page> {
    let held = web.held(&viewer).await?;
    let ws = web.visible_workspace(&held, &id).await?;
    let ops = &web.inner.ops;
    let view = ops.view(&ws, ops.git_status(&ws).await?);
    let mut sessions = ops.session_records(Some(&ws.id)).await?;
    sessions.sort_by_key(|s| std::cmp::Reverse(s.updated_at));
    let id = ws.id.as_str();
    let body = html! {
        (heading(&ws, "overview"))
        dl.facts {
            dt { "Id" } dd { code { (id) } }
            @if !ws.description.is_empty() { dt { "Description" } dd { (ws.description) } }
            @if let Some(dir) = view.work_dir() { dt { "Folder" } dd { code { (dir.display()) } } }
            @if let Some(git) = &view.git {
                dt { "Branch" } dd { code { (git.branch) } " from " code { (git.base_branch) } }
                @if let Some(s) = &view.git_status {
                    dt { "State" } dd {
                        (s.ahead.map_or("?".to_owned(), |n| n.to_string())) " ahead, "
                        (s.behind.map_or("?".to_owned(), |n| n.to_string())) " behind, "
                        (s.changed_files.map_or("?".to_owned(), |n| n.to_string())) " changed files"
                    }
                }
            }
            dt { "Ports" }
            @match view.ports {
                Some(p) => dd { (p.first) "–" (p.last) " (" code { "BERTH_PORT" } "=" (p.first) ")" },
                None => dd { "none yet: " (NO_PORTS_YET) },
            }
            dt { "Last used" } dd { (age(ws.last_accessed)) }
        }
        div.bar {
            h2 { "Sessions" }
            button.js-post type="button" data-action={ "/w/" (id) "/sessions" } { "New session" }
        }
        @if sessions.is_empty() {
            p.empty { "No sessions yet." }
        } @else {
            table.list.sessions {
                thead { tr { th { "Session" } th { "Status" } th { "Answered by" } th { "Tokens" } th { "Updated" } } }
                tbody {
                    @for s in &sessions {
                        tr {
                            td data-label="Session" { a href={ "/s/" (s.id.as_str()) } { @if s.title.is_empty() { (short(s.id.as_str())) } @else { (s.title) } } }
                            td data-label="Status" { (s.status.as_str()) }
                            td data-label="Answered by" { (SessionView::of(s).answered_by()) }
                            td data-label="Tokens" { (s.usage.input_tokens + s.usage.output_tokens) }
                            td data-label="Updated" { (age(s.updated_at)) }
                        }
                    }
                }
            }
        }
    };
    Ok(page(&viewer, "workspace", &ws.label(), body))
}

fn heading(ws: &Workspace, tab: &str) -> Markup {
    let id = ws.id.as_str();
    let tabs = [
        ("overview", format!("/w/{id}"), "Overview"),
        ("files", format!("/w/{id}/files"), "Files"),
        ("diff", format!("/w/{id}/diff"), "Diff"),
    ];
    html! {
        p.crumbs { a href="/" { "Workspaces" } " / " }
        h1 { (ws.name.as_ref().map_or(id, |n| n.as_str())) }
        nav.tabs {
            @for (key, href, label) in &tabs {
                @if *key == "diff" && ws.git.is_none() {} @else {
                    a href=(href) aria-current=[(*key == tab).then_some("page")] { (label) }
                }
            }
        }
    }
}

#[derive(Deserialize)]
pub struct FilesQuery {
    /// `storage` (berth's storage of the workspace) or `worktree` (its folder).
    root: Option<String>,
    path: Option<String>,
}

/// `/w/{id}/files?root=storage|worktree&path=…`: a folder's entries or a file, confined to the
/// workspace's storage or its folder as the MCP resources are (no `..`, no symlink out). An
/// agent names and writes them: names are quoted as git quotes them and a file's text shows
/// its control characters and bidi overrides as escapes (berth-core's `shown`).
pub async fn files(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    Query(query): Query<FilesQuery>,
) -> PageResult<Page> {
    let held = web.held(&viewer).await?;
    let ws = web.visible_workspace(&held, &id).await?;
    let ops = &web.inner.ops;
    let worktree = query.root.as_deref() == Some("worktree");
    let path = query.path.as_deref().filter(|p| !p.is_empty());
    let (path, node) = if worktree {
        ops.read_worktree(&ws, path, SHOWN_BYTES).await?
    } else {
        let at = ops.storage(Owner::Workspace, ws.id.as_str()).await?;
        ops.read_node(&at, path).await?
    };
    let root = if worktree { "worktree" } else { "storage" };
    let base = format!("/w/{}/files?root={root}", ws.id.as_str());
    let body = html! {
        (heading(&ws, "files"))
        nav.tabs.small {
            a href={ "/w/" (ws.id.as_str()) "/files?root=storage" } aria-current=[(!worktree).then_some("page")] { "Storage" }
            @if ws.git.is_some() {
                a href={ "/w/" (ws.id.as_str()) "/files?root=worktree" } aria-current=[worktree.then_some("page")] { "Worktree" }
            }
        }
        (crumbs(&base, path.as_ref()))
        @match node {
            Node::Folder(entries) => {
                @if entries.is_empty() { p.empty { "Empty." } }
                @else {
                    ul.entries {
                        @for e in &entries {
                            li {
                                a href={ (base) "&path=" (encode(&e.path)) } {
                                    (visible(&e.name, Form::FileName)) @if e.kind == berth_ops::EntryKind::Dir { "/" }
                                }
                                @if e.kind != berth_ops::EntryKind::Dir { " " small { (e.size) " bytes" } }
                            }
                        }
                    }
                }
            },
            Node::File(bytes) => { (file_view(path.as_ref(), &bytes)) },
        }
    };
    Ok(page(&viewer, "files", &ws.label(), body))
}

fn crumbs(base: &str, path: Option<&StoragePath>) -> Markup {
    let parts: Vec<&str> = path.map_or(Vec::new(), |p| p.as_str().split('/').collect());
    html! {
        p.crumbs {
            a href=(base) { "/" }
            @for (i, part) in parts.iter().enumerate() {
                @let upto = parts[..=i].join("/");
                a href={ (base) "&path=" (encode(&upto)) } { (visible(part, Form::FileName)) }
                @if i + 1 < parts.len() { "/" }
            }
        }
    }
}

fn file_view(path: Option<&StoragePath>, bytes: &[u8]) -> Markup {
    if bytes.contains(&0) {
        return html! { p.empty { "A binary file of " (bytes.len()) " bytes." } };
    }
    let text = String::from_utf8_lossy(bytes);
    let markdown = path.is_some_and(|p| p.as_str().ends_with(".md"));
    html! {
        @if markdown {
            article.markdown { (PreEscaped(markdown::to_html(&text))) }
        } @else {
            pre.file { code { (visible(text.as_ref(), Form::Lines)) } }
        }
    }
}

/// `/w/{id}/diff`: the workspace's changes against its base, committed and not, as a diff.
pub async fn diff(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> PageResult<Response> {
    let held = web.held(&viewer).await?;
    let ws = web.visible_workspace(&held, &id).await?;
    let diff = web.inner.ops.workspace_diff(ws.id.as_str(), true).await?;
    let (added, removed) = diff.totals();
    let body = html! {
        (heading(&ws, "diff"))
        p { (diff.files.len()) " files changed against " code { (diff.base) } ", "
            span.add { "+" (added) } " " span.del { "−" (removed) } }
        @if !diff.files.is_empty() {
            table.list.files {
                thead { tr { th { "File" } th { "Change" } th { "Lines" } } }
                tbody { @for f in &diff.files { tr {
                    // An agent's name for it, quoted as git quotes it (berth-core's `shown`).
                    td data-label="File" { code { (visible(&f.path, Form::FileName)) } }
                    td data-label="Change" { (f.status) }
                    td data-label="Lines" { @match (f.added, f.removed) {
                        (Some(a), Some(r)) => { span.add { "+" (a) } " " span.del { "−" (r) } },
                        _ => "binary",
                    } }
                } } }
            }
        }
        @if let Some(patch) = &diff.patch { (patch_view(patch)) }
    };
    Ok(page(&viewer, "diff", &ws.label(), body).into_response())
}

/// A unified diff, each line marked by what it is; what an agent wrote in a line shows its
/// control characters and bidi overrides as escapes (berth-core's `shown`).
fn patch_view(patch: &str) -> Markup {
    html! {
        pre.diff { code {
            @for line in patch.lines() {
                @let class = if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff ") || line.starts_with("index ") {
                    "meta"
                } else if line.starts_with("@@") {
                    "hunk"
                } else if line.starts_with('+') {
                    "add"
                } else if line.starts_with('-') {
                    "del"
                } else {
                    "ctx"
                };
                span class=(class) { (visible(line, Form::Lines)) "\n" }
            }
        } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_and_a_file_show_an_agents_controls_as_escapes() {
        let patch = "+++ \"b/evil\\342\\200\\256.txt\"\n+ok\x1b[2J\u{9b}1A \u{202e}gnp.exe\n";
        let html = patch_view(patch).into_string();
        assert!(
            html.contains(r#"<span class="add">+ok\x1b[2J\u{9b}1A \u{202e}gnp.exe"#),
            "{html}"
        );
        let file = file_view(None, "a\u{202e}b\x1b]52;c;ZXZpbA==\x07\n".as_bytes()).into_string();
        assert!(file.contains(r"a\u{202e}b\x1b]52;c;ZXZpbA==\x07"), "{file}");
        for html in [html, file] {
            // The page's own line breaks aside.
            assert!(
                !html
                    .chars()
                    .filter(|c| *c != '\n')
                    .any(berth_ops::shown::drives_the_terminal),
                "{html}"
            );
        }
    }
}
