//! Land from the review page (`POST /runs/{id}/agents/{n}/land`): one agent's work brought
//! onto its base as `berth land RUN:N` does it, through the same engine (`berth_run::Lander`):
//! committed, brought up to date with the base as it now stands, the run's check run on that
//! combined tree, and only then the base moved; a conflict or a red check goes back to the
//! agent in a turn of its own session. The land is driven in this server (its agents' turns
//! hosted here, SIGTERM kept for the server's shutdown), so the POST answers at once; the
//! review page says where each agent's newest land stands, from the kept lands.

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use berth_ops::MergeMode;
use berth_run::{AgentNumber, ItemState, LandRecord, LandRequest, LandState, Target, Which};
use maud::{Markup, html};

use super::runs::admin_only;
use super::{check_csrf, done};
use crate::error::{PageError, PageResult};
use crate::{Viewer, Web};

/// What the Land button says before it is pressed.
pub const WHAT_LAND_DOES: &str = "Land this agent's work on its base branch: it is brought up to date with the base as it now stands, the run's check is run on that combined tree, and the base moves only when it passes. A conflict or a failing check goes back to the agent (2 turns).";

/// `POST /runs/{id}/agents/{n}/land`: a land of agent `n` created (refused at once when it
/// cannot land: a run still running, an agent discarded or without work) and driven in this
/// server.
pub async fn land(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path((id, n)): Path<(String, AgentNumber)>,
) -> PageResult<axum::Json<serde_json::Value>> {
    admin_only(&viewer)?;
    check_csrf(&viewer, &headers)?;
    let run = web.inner.runs.resolve(&id).await?;
    let here = std::env::current_dir().map_err(|e| {
        PageError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot read the server's folder: {e}"),
        )
    })?;
    let lander = web.inner.lander.clone();
    let held = lander
        .create(LandRequest {
            targets: vec![Target {
                run: run.to_string(),
                which: Which::Agent(n.index()),
            }],
            mode: MergeMode::Merge,
            retries: berth_run::DEFAULT_LAND_RETRIES,
            resolve: true,
            dir: here,
            batch: None,
        })
        .await?;
    let land = held.record.id.clone();
    tokio::spawn(async move {
        if let Err(e) = lander.drive(held).await {
            // Its record says where it stopped; `berth land --resume` goes on.
            tracing::warn!(%land, "land {land}: {e}");
        }
    });
    Ok(done(Some(format!("/runs/{run}"))))
}

/// Where an agent's newest land stands, as its card says it.
#[derive(Debug, Clone)]
pub struct Landing {
    pub land: String,
    /// `waiting`, `landing`, `landed`, `skipped`, `left`, or `cut off` (its driver went away).
    pub state: &'static str,
    pub into: Option<String>,
    pub reason: Option<String>,
    /// The last step of the agent's land, while it lands.
    pub last: Option<String>,
}

impl Landing {
    /// Whether it is under way now: no second land of the agent is offered meanwhile.
    pub fn under_way(&self) -> bool {
        matches!(self.state, "waiting" | "landing")
    }
}

/// The newest land of each agent of run `run` (0-based), from the kept lands.
pub async fn of_run(web: &Web, run: &str, agents: usize) -> Vec<Option<Landing>> {
    let store = web.inner.lander.store();
    let mut shown = vec![None; agents];
    // A land that cannot be read is not this page's to report: `berth land list` says it.
    let Ok(lands) = store.list().await else {
        return shown;
    };
    // Newest first: the first land that names an agent is its newest.
    for land in lands.into_iter().flatten() {
        if !land.items.iter().any(|i| i.run.as_str() == run) {
            continue;
        }
        let seen = store.look(land).await;
        let (land, driven) = (seen.record, seen.driven);
        for (k, item) in land.items.iter().enumerate() {
            let Some(agent) = item
                .agent
                .filter(|a| item.run.as_str() == run && *a < agents)
            else {
                continue;
            };
            if shown[agent].is_none() {
                shown[agent] = Some(landing(&land, k, driven));
            }
        }
    }
    shown
}

fn landing(land: &LandRecord, k: usize, driven: bool) -> Landing {
    let item = &land.items[k];
    let open = !item.state.is_done() && item.state != ItemState::Left;
    let state = match (open, land.state, driven) {
        (true, LandState::Landing, false) | (true, LandState::Stopped, _) => "cut off",
        _ => item.state.as_str(),
    };
    Landing {
        land: land.id.to_string(),
        state,
        into: item.into.clone(),
        reason: item.reason.clone().or_else(|| land.message.clone()),
        last: land
            .steps
            .iter()
            .rev()
            .find(|s| s.item == Some(k))
            .map(|s| s.text.clone()),
    }
}

/// An agent's land on its card.
pub fn view(l: &Landing) -> Markup {
    let onto = l.into.as_deref().unwrap_or("its base");
    let shown = |t: &str| berth_ops::shown::visible(t, berth_ops::shown::Form::Line).into_owned();
    html! {
        div class={ "land " (l.state.replace(' ', "-")) } data-land=(l.land) role="status" {
            @match l.state {
                "landed" => p { span.add { "Landed" } " onto " code { (onto) } " by land " code { (l.land) } "." },
                "skipped" => p { "Picked already: land " code { (l.land) } " counted it as landed." },
                "left" => p { span.del { "Not landed" } " by land " code { (l.land) } ": " (shown(l.reason.as_deref().unwrap_or("no reason was kept"))) },
                "cut off" => p { "Land " code { (l.land) } " stopped before this agent was through"
                    @if let Some(why) = &l.reason { " (" (shown(why)) ")" }
                    "; " code { "berth land --resume " (l.land) } " goes on." },
                _ => p { "Landing onto " code { (onto) } " (land " code { (l.land) } ")"
                    @if let Some(last) = &l.last { ": " (shown(last)) } "…" },
            }
        }
    }
}
