//! The runs of `berth run` (`/runs`): each run and its agents (state, last tool, tokens,
//! elapsed), newest first, the table refreshed by the page every second (`/runs/table`), and
//! stop (`POST /runs/{id}/stop`). Runs are this machine's processes: the admin's only.

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use berth_run::{RunRecord, StopRequest};
use chrono::Utc;
use maud::{Markup, html};

use super::{check_csrf, done};
use crate::error::{PageError, PageResult};
use crate::page::{Page, age, page};
use crate::{Reach, Viewer, Web};

/// Runs the table shows, newest first.
const SHOWN: usize = 50;

pub(super) fn admin_only(viewer: &Viewer) -> PageResult<()> {
    match viewer.reach {
        Reach::All => Ok(()),
        Reach::Device(_) => Err(PageError::new(
            StatusCode::FORBIDDEN,
            "runs are this machine's; a device's token does not reach them",
        )),
    }
}

/// `/runs`: the page.
pub async fn list(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
) -> PageResult<Page> {
    admin_only(&viewer)?;
    let table = table_of(web).await?;
    let body = html! {
        div.bar {
            h1 { "Runs" }
            button.secondary #notify-me type="button" hidden
                title="Let the browser tell you when a run ends, while the page is out of sight" { "Notify me" }
        }
        div #runs data-refresh="/runs/table" { (table) }
    };
    Ok(page(&viewer, "runs", "Runs", body))
}

/// `/runs/table`: the table alone, for the page to swap in.
pub async fn table(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
) -> PageResult<Response> {
    admin_only(&viewer)?;
    let table = table_of(web).await?;
    Ok((
        [(axum::http::header::CACHE_CONTROL, "no-store")],
        Html(table.into_string()),
    )
        .into_response())
}

/// The table, from the newest runs' records only: one page of the store (the page asks
/// every second, so it must not read every run there is).
async fn table_of(web: Web) -> PageResult<Markup> {
    let mut runs: Vec<RunRecord> = Vec::new();
    let mut unreadable = 0;
    for run in web.inner.runs.page(SHOWN, None).await?.runs {
        match run {
            Ok(run) => runs.push(run),
            Err(_) => unreadable += 1,
        }
    }
    Ok(html! {
        @if runs.is_empty() {
            p.empty { "No runs yet. Start one with " code { "berth run" } "." }
        }
        @if unreadable > 0 {
            p.problem { (unreadable) " runs cannot be read; " code { "berth run list" } " says why." }
        }
        @for run in &runs { (run_view(run)) }
    })
}

fn run_view(run: &RunRecord) -> Markup {
    let id = run.id.as_str();
    let end = run.ended_at.unwrap_or_else(Utc::now);
    let elapsed = (end - run.created_at).num_seconds().max(0);
    let review = run.review();
    html! {
        section.run data-run=(id) data-state=(run.state.as_str()) {
            div.bar {
                h2 {
                    a href={ "/runs/" (id) } { code { (id.get(..8).unwrap_or(id)) } } " "
                    span class={ "state " (review.stage.as_str()) } { (review.to_string()) }
                }
                @if !run.state.is_over() {
                    button.js-post.secondary type="button" data-action={ "/runs/" (id) "/stop" } data-confirm="Stop every agent of this run?" { "Stop" }
                }
            }
            p.task { (run.request.task.chars().take(300).collect::<String>()) }
            p.meta { "started " (age(run.created_at)) " · " (elapsed / 60) "m " (elapsed % 60) "s"
                @if let Some(m) = &run.message { " · " span.del { (m) } } }
            table.list.agents {
                thead { tr { th { "Agent" } th { "State" } th { "Last tool" } th { "Tokens" } th { "Node" } th { "Workspace" } } }
                tbody { @for a in &run.agents { tr {
                    td data-label="Agent" { (a.label) }
                    td data-label="State" { span class={ "state " (a.status.state.as_str()) } { (a.status.state.as_str()) } }
                    td data-label="Last tool" { (a.status.latest.as_deref().or(a.status.last_tool.as_deref()).unwrap_or("—")) }
                    td data-label="Tokens" { (a.status.input_tokens + a.status.output_tokens) }
                    td data-label="Node" { (a.node.as_deref().unwrap_or("—")) }
                    td data-label="Workspace" { @match &a.workspace {
                        Some(w) => { a href={ "/w/" (w) } { (a.status.workspace_name.as_deref().unwrap_or(w)) }
                            @if let Some(s) = &a.session { " · " a href={ "/s/" (s) } { "session" } } },
                        None => "—",
                    } }
                } } }
            }
        }
    }
}

/// `POST /runs/{id}/stop`: asks the run's supervisor to stop every agent.
pub async fn stop(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> PageResult<axum::Json<serde_json::Value>> {
    admin_only(&viewer)?;
    check_csrf(&viewer, &headers)?;
    let runs = &web.inner.runs;
    let id = runs.resolve(&id).await?;
    runs.request_stop(&id, StopRequest::All).await?;
    Ok(done(None))
}
