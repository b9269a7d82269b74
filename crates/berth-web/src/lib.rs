//! berth-web: berth's web page, for a person at a desktop or on a phone. `berth serve` serves
//! it at `/`, behind the same guard as `/acp` and `/mcp` (its token, its Host and Origin
//! rules), which tells each request who is looking ([`Viewer`]).
//!
//! - `/`: the workspaces, searchable and paged (`pages/workspaces.rs`); what costs a git call
//!   (ahead/behind, changed files) and the session counts arrive after the page, from
//!   `/w/status`, so the first page stays fast however many workspaces there are;
//! - `/w/{id}`: a workspace's sessions; `/w/{id}/files` its storage and worktree;
//!   `/w/{id}/diff` its diff against its base;
//! - `/s/{id}`: a session's transcript as Markdown, tool calls folded, **live**: messages
//!   appended by any process (the CLI, an editor) appear within a second, a turn asked for
//!   here streams into the page, and its permission requests are answered here (`live.rs`);
//! - `/runs`: the table of `berth run`, refreshed every second, with stop;
//! - `/runs/{id}`: a run's review, its agents side by side, with merge, land (driven in this
//!   server, `pages/land.rs`), discard, tell and line comments.
//!
//! Rules:
//!
//! - **Everything is escaped.** Pages are written with `maud`, which escapes every value it
//!   is given; the only markup not written here is Markdown's, and Markdown's raw HTML is
//!   shown as text and its links keep only safe schemes (`markdown.rs`).
//! - **A device sees its own workspace only**; another's is "not found", as if it did not
//!   exist. Runs are this machine's, the admin's only.
//! - **State changes are POSTs that carry the page's CSRF token** (`x-berth-csrf`, derived
//!   from the viewer's token): a page of another site can neither read it nor send a header,
//!   on top of the cookie's `SameSite=Strict` and the guard's Origin check.
//! - **No build step**: the CSS and the JavaScript are two files embedded in the binary.

#![forbid(unsafe_code)]

mod assets;
mod error;
mod live;
mod markdown;
mod page;
mod pages;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use berth_agent::Agent;
use berth_ops::Ops;
pub use berth_ops::Reach;
use berth_run::{Lander, RunStore, Runs};

pub use page::login_page;

/// A refusal as the page shows it (the server's own, such as a rate, in the page's words).
pub fn problem(status: axum::http::StatusCode, message: &str) -> axum::response::Response {
    axum::response::IntoResponse::into_response(page::error_page(status, message))
}

/// Who is looking at a page, set by the server's guard on every request it lets through.
#[derive(Debug, Clone)]
pub struct Viewer {
    /// What it may see (berth-ops' rule: everything, or one device's workspace).
    pub reach: Reach,
    /// The value state-changing requests must carry in `x-berth-csrf`.
    pub csrf: String,
}

/// The page's state: berth's operations, its agent (for prompts sent from the page), the kept
/// runs, and the sessions being watched.
#[derive(Clone)]
pub struct Web {
    inner: Arc<Inner>,
}

struct Inner {
    ops: Ops,
    agent: Agent,
    runs: RunStore,
    /// The runs' lifecycle: a Tell from the page goes through it.
    lifecycle: Runs,
    /// Lands asked for here, driven in this server: their agents' turns hosted by it.
    lander: Lander,
    /// The trial merges the review page made (each pair of commits once), kept while the
    /// server runs.
    foresight: berth_run::Foresight,
    live: live::Hub,
    /// Cancelled when the server stops: open event streams end, so a graceful shutdown does
    /// not wait on pages that would watch forever.
    closing: berth_agent::CancellationToken,
}

impl Web {
    /// The page over `ops`, its sessions' agents made by `agent`, its runs those of `runs`
    /// (the home's, [`Runs::open`]).
    pub fn new(ops: Ops, agent: Agent, runs: Runs) -> Web {
        Web {
            inner: Arc::new(Inner {
                lander: Lander::new(ops.clone(), runs.store().clone(), agent.clone()).hosted(),
                ops,
                agent,
                runs: runs.store().clone(),
                lifecycle: runs,
                foresight: berth_run::Foresight::new(),
                live: live::Hub::default(),
                closing: berth_agent::CancellationToken::new(),
            }),
        }
    }

    /// Ends every open event stream (the server is stopping); pages reconnect to the next one.
    pub fn close(&self) {
        self.inner.closing.cancel();
    }
}

/// The routes of the page (the caller puts its guard in front: each handler expects a
/// [`Viewer`] in the request's extensions). Assets need no viewer.
pub fn router(web: Web) -> Router {
    Router::new()
        .route("/", get(pages::workspaces::list))
        .route("/w/status", get(pages::workspaces::status))
        .route("/w/{id}", get(pages::workspaces::show))
        .route("/w/{id}/files", get(pages::workspaces::files))
        .route("/w/{id}/diff", get(pages::workspaces::diff))
        .route("/w/{id}/sessions", post(pages::sessions::create))
        .route("/s/{id}", get(pages::sessions::show))
        .route("/s/{id}/events", get(pages::sessions::events))
        .route("/s/{id}/prompt", post(pages::sessions::prompt))
        .route("/s/{id}/cancel", post(pages::sessions::cancel))
        .route("/s/{id}/fork", post(pages::sessions::fork))
        .route("/s/{id}/permission", post(pages::sessions::permission))
        .route("/runs", get(pages::runs::list))
        .route("/runs/table", get(pages::runs::table))
        .route("/runs/{id}/stop", post(pages::runs::stop))
        .route("/runs/{id}", get(pages::review::show))
        .route("/runs/{id}/agents/{n}/merge", post(pages::review::merge))
        .route("/runs/{id}/agents/{n}/answer", post(pages::review::answer))
        .route("/runs/{id}/agents/{n}/land", post(pages::land::land))
        .route(
            "/runs/{id}/agents/{n}/discard",
            post(pages::review::discard),
        )
        .route("/runs/{id}/agents/{n}/tell", post(pages::review::tell))
        .route(
            "/runs/{id}/agents/{n}/comment",
            post(pages::review::comment),
        )
        .with_state(web)
}

/// The routes anyone may fetch: the stylesheet, the script, and the page a pairing link
/// opens (it holds nothing; its script signs in with the link's token).
pub fn public_router() -> Router {
    assets::router().route("/pair", get(|| async { page::pair_page() }))
}

/// Whether a POST to `path` sends a prompt to the agent (for the server's prompt rate).
pub fn is_prompt(path: &str) -> bool {
    (path.starts_with("/s/") && path.ends_with("/prompt"))
        || (path.starts_with("/runs/") && (path.ends_with("/tell") || path.ends_with("/comment")))
}

/// Paths the page serves that need no token: the assets, and the pages that ask for one.
pub fn is_public(path: &str) -> bool {
    path.starts_with("/assets/") || path == "/login" || path == "/pair"
}
