//! A session's page (`/s/{id}`), its live events (`/s/{id}/events`, Server-Sent Events), and
//! what the page asks of it: a prompt to berth's agent, a cancel, a permission's answer; and
//! a new session in a workspace.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use berth_agent::slash::{self, FrontEnd, Input};
use berth_agent::{Decision, TurnOptions, TurnRequest};
use berth_ops::{CreateSession, Message, Role};
use futures::Stream;
use maud::{Markup, PreEscaped, html};
use serde::Deserialize;
use tokio::sync::{broadcast, mpsc};

use super::{check_csrf, done};
use crate::error::{PageError, PageResult};
use crate::live::{Live, PagePermissions};
use crate::markdown;
use crate::page::{Page, age, page};
use crate::{Viewer, Web};

/// How often a watching page's transcript is looked at for messages appended elsewhere.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// `/s/{id}`: the transcript, and the box for the next prompt.
pub async fn show(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> PageResult<Page> {
    let held = web.held(&viewer).await?;
    let session = web.visible_session(&held, &id).await?;
    let ops = &web.inner.ops;
    let transcript = ops.transcript(&session).await?;
    // What answers: the ACP agent that works in the session, else the model the next turn
    // calls (a choice kept for the session, else the config's); and the workspace's name for
    // the way back. Neither is worth failing the page for.
    let model = match (&session.agent, ops.session_model(&session).await) {
        (Some(agent), _) => format!("agent {agent}"),
        (None, Ok(m)) => m.choice.to_string(),
        (None, Err(_)) => format!("{}/{}", session.provider, session.model),
    };
    let workspace = ops
        .resolve_workspace(session.workspace_id.as_str())
        .await
        .ok()
        .and_then(|ws| ws.name.map(|n| n.to_string()))
        .unwrap_or_else(|| "workspace".to_owned());
    let live = web.inner.live.session(session.id.as_str());
    let title = if session.title.is_empty() {
        session.id.to_string()
    } else {
        session.title.clone()
    };
    let id = session.id.as_str();
    let body = html! {
        p.crumbs { a href="/" { "Workspaces" } " / " a href={ "/w/" (session.workspace_id.as_str()) } { (workspace) } " / " }
        h1 { (title) }
        p.meta { (session.status.as_str()) " · " (model) " · "
            (session.usage.input_tokens + session.usage.output_tokens) " tokens · updated " (age(session.updated_at)) }
        section #transcript data-session=(id) data-have=(transcript.messages.len()) aria-live="polite" {
            @for message in &transcript.messages { (message_view(message)) }
        }
        div #streaming .message.assistant.streaming hidden { div.role { "Assistant" } div.text {} }
        div #permissions {}
        p #turn-status role="status" { @if live.is_running() { "Answering…" } }
        pre #said hidden {}
        form #prompt data-action={ "/s/" (id) "/prompt" } {
            label for="prompt-text" .visually-hidden { "Prompt" }
            textarea #prompt-text name="text" rows="3" placeholder="Ask berth's agent… (/help lists the commands)" required {}
            div.actions {
                button type="submit" { "Send" }
                button.js-post.secondary type="button" data-action={ "/s/" (id) "/cancel" } { "Stop" }
                button.secondary #notify-me type="button" hidden
                    title="Let the browser tell you when this session needs you or has answered, while the page is out of sight" { "Notify me" }
                button.js-post.secondary #fork type="button" data-action={ "/s/" (id) "/fork" }
                    title="A new session that starts with this conversation; this one stays as it is" { "Fork" }
            }
        }
    };
    Ok(page(&viewer, "session", &title, body))
}

/// One message of a transcript: Markdown for what people and models said; a tool call folded,
/// its first line (the tool and its input) as the summary and its result inside.
fn message_view(message: &Message) -> Markup {
    let role = message.role.as_str();
    html! {
        article class={ "message " (role) } {
            @if message.role == Role::Tool {
                @let (call, result) = message.content.split_once('\n').unwrap_or((&message.content, ""));
                @let failed = result.trim_start().starts_with("error:");
                details.tool {
                    summary { span.role { "Tool" } " " code { (call.trim().trim_matches('`')) } @if failed { " " span.del { "failed" } } }
                    pre { code { (result.trim()) } }
                }
            } @else {
                div.role { (role_name(message.role)) }
                div.text.markdown { (PreEscaped(markdown::to_html(&message.content))) }
            }
        }
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "You",
        Role::Assistant => "Assistant",
        Role::System => "System",
        Role::Tool => "Tool",
    }
}

#[derive(Deserialize)]
pub struct EventsQuery {
    /// How many messages the page shows already.
    have: Option<usize>,
}

/// `/s/{id}/events`: the session's life as Server-Sent Events. `message` (its HTML) for each
/// message the transcript gains, from whatever process (each look asks the store for the
/// transcript's stamp, and reads it only when that changed); `reload` when it shrank (an edit);
/// and what a turn asked for from a page says meanwhile (`live.rs`), each as its type.
pub async fn events(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    Query(query): Query<EventsQuery>,
) -> PageResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let held = web.held(&viewer).await?;
    let session = web.visible_session(&held, &id).await?;
    let live = web.inner.live.session(session.id.as_str());
    let mut updates = live.subscribe();
    let (tx, rx) = mpsc::channel::<Event>(256);
    for waiting in live.waiting() {
        let _ = tx.try_send(live_event(&waiting));
    }
    let ops = web.inner.ops.clone();
    let closing = web.inner.closing.clone();
    let mut have = query.have.unwrap_or(0);
    tokio::spawn(async move {
        let mut seen = None;
        let mut look = tokio::time::interval(LOOK_EVERY);
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let event = tokio::select! {
                _ = tx.closed() => return,
                _ = closing.cancelled() => return,
                _ = look.tick() => {
                    // Read again only when the store says the transcript changed.
                    match ops.transcript_stamp(&session).await {
                        Ok(now) if seen == Some(now) => continue,
                        Ok(now) => seen = Some(now),
                        // Unreadable for now: the next look tries again.
                        Err(_) => continue,
                    }
                    match ops.transcript(&session).await {
                        Ok(t) if t.messages.len() > have => {
                            for m in &t.messages[have..] {
                                let html = message_view(m).into_string();
                                let data = serde_json::json!({ "role": m.role.as_str(), "html": html });
                                if tx.send(Event::default().event("message").data(data.to_string())).await.is_err() {
                                    return;
                                }
                            }
                            have = t.messages.len();
                            continue;
                        }
                        Ok(t) if t.messages.len() < have => Event::default().event("reload").data("{}"),
                        Ok(_) => continue,
                        // Unreadable for now (a torn tail being written): the next look reads
                        // it again, whatever the stamp says.
                        Err(_) => {
                            seen = None;
                            continue;
                        }
                    }
                }
                update = updates.recv() => match update {
                    Ok(update) => live_event(&update),
                    // A page too slow to keep up misses previews only; messages still come.
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            };
            if tx.send(event).await.is_err() {
                return;
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok(event), rx))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

fn live_event(update: &Live) -> Event {
    let data = serde_json::to_value(update).unwrap_or_default();
    let kind = data["type"].as_str().unwrap_or("notice").to_owned();
    Event::default().event(kind).data(data.to_string())
}

#[derive(Deserialize)]
pub struct PromptForm {
    text: String,
}

/// `POST /s/{id}/prompt`: starts a turn of berth's agent with the text; its answer streams
/// to every page watching the session. Answers at once (202); a turn that cannot start (no key
/// for the provider, a turn already running) is refused with why. A slash command an editor
/// offers (`/clear`, `/context`, `/model NAME`, …) is run instead, and its answer is the
/// reply's `said` (200).
pub async fn prompt(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(form): axum::Form<PromptForm>,
) -> PageResult<(StatusCode, axum::Json<serde_json::Value>)> {
    check_csrf(&viewer, &headers)?;
    let held = web.held(&viewer).await?;
    let session = web.visible_session(&held, &id).await?;
    let cwd = web
        .inner
        .ops
        .turn_folder(&held, &session)
        .await?
        .ok_or_else(|| {
            PageError::new(
                StatusCode::CONFLICT,
                "this session's workspace has no folder on this machine",
            )
        })?;
    // A slash command is run, as in an editor, and its answer shown; a line starting with
    // `//`, or an unknown `/name` (a path, say), goes to the model.
    let text = match slash::parse(&form.text) {
        Input::Empty => {
            return Err(PageError::new(
                StatusCode::BAD_REQUEST,
                "the prompt is empty",
            ));
        }
        Input::Usage(usage) => return Err(PageError::new(StatusCode::BAD_REQUEST, usage)),
        Input::Command(command) => {
            let said = web
                .inner
                .agent
                .session_command(&session, &cwd, &command, FrontEnd::Editor)
                .await?;
            return Ok((
                StatusCode::OK,
                axum::Json(serde_json::json!({ "ok": true, "said": said })),
            ));
        }
        Input::Prompt(line) => line,
        Input::Unknown(_) => form.text.clone(),
    };
    let text = text.trim();
    // The admin's wait, from the global config: not a layer a device's workspace holds.
    let timeout = web
        .inner
        .ops
        .config(None)
        .await?
        .config
        .serve
        .permission_timeout();
    let live = web.inner.live.session(session.id.as_str());
    let Some(cancel) = live.begin() else {
        return Err(PageError::new(
            StatusCode::CONFLICT,
            "this session is still answering; wait for its answer or stop it first",
        ));
    };
    let started = web
        .inner
        .agent
        .start_turn(TurnRequest {
            session: session.clone(),
            prompt: text.to_owned(),
            images: Vec::new(),
            cwd,
            permissions: Arc::new(PagePermissions {
                live: live.clone(),
                cancel: cancel.clone(),
                timeout,
                ops: web.inner.ops.clone(),
                session,
            }),
            cancel,
            options: TurnOptions::default(),
        })
        .await;
    match started {
        Ok(turn) => {
            tokio::spawn(live.relay(turn));
            Ok((StatusCode::ACCEPTED, done(None)))
        }
        Err(e) => {
            live.finish();
            Err(e.into())
        }
    }
}

/// `POST /s/{id}/cancel`: stops the turn running from a page.
pub async fn cancel(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> PageResult<axum::Json<serde_json::Value>> {
    check_csrf(&viewer, &headers)?;
    let held = web.held(&viewer).await?;
    let session = web.visible_session(&held, &id).await?;
    if web.inner.live.session(session.id.as_str()).cancel() {
        Ok(done(None))
    } else {
        Err(PageError::new(
            StatusCode::CONFLICT,
            "no turn asked for from this page is running in this session",
        ))
    }
}

#[derive(Deserialize)]
pub struct PermissionForm {
    id: String,
    /// `allow_once`, `allow_always` or `reject`.
    decision: String,
}

/// `POST /s/{id}/permission`: answers a waiting permission request.
pub async fn permission(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::Form(form): axum::Form<PermissionForm>,
) -> PageResult<axum::Json<serde_json::Value>> {
    check_csrf(&viewer, &headers)?;
    let held = web.held(&viewer).await?;
    let session = web.visible_session(&held, &id).await?;
    let decision = match form.decision.as_str() {
        "allow_once" => Decision::AllowOnce,
        "allow_always" => Decision::AllowAlways,
        "reject" => Decision::Reject,
        other => {
            return Err(PageError::new(
                StatusCode::BAD_REQUEST,
                format!("decision must be allow_once, allow_always or reject, not {other:?}"),
            ));
        }
    };
    if web
        .inner
        .live
        .session(session.id.as_str())
        .answer(&form.id, decision)
    {
        Ok(done(None))
    } else {
        Err(PageError::new(
            StatusCode::NOT_FOUND,
            "that request is not waiting any more: it was answered, or its turn ended",
        ))
    }
}

/// `POST /w/{id}/sessions`: a new session in the workspace; the page goes to it. Refused,
/// before anything is made, when no turn could start there (no key for the provider).
pub async fn create(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> PageResult<axum::Json<serde_json::Value>> {
    check_csrf(&viewer, &headers)?;
    let held = web.held(&viewer).await?;
    let ws = web.visible_workspace(&held, &id).await?;
    // A session no prompt could be answered in is not made (503, kind not configured).
    web.inner.agent.preflight(Some(&ws.id), None).await?;
    let session = web
        .inner
        .ops
        .create_session(CreateSession {
            workspace: ws.id.to_string(),
            ..CreateSession::default()
        })
        .await?;
    Ok(done(Some(format!("/s/{}", session.id.as_str()))))
}

/// `POST /s/{id}/fork`: a new session whose transcript starts as a copy of this one's
/// (`Ops::fork_session`, as `berth session fork` and ACP's `session/fork`), opened next.
pub async fn fork(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> PageResult<axum::Json<serde_json::Value>> {
    check_csrf(&viewer, &headers)?;
    let held = web.held(&viewer).await?;
    let session = web.visible_session(&held, &id).await?;
    let forked = web
        .inner
        .ops
        .fork_session(&session, None, None, None)
        .await?;
    Ok(done(Some(format!("/s/{}", forked.id.as_str()))))
}
