//! A run's review (`/runs/{id}`): its agents side by side (`berth_run::compare_foreseen`, the
//! model `berth run compare` prints), each with its state, check, what its work conflicts
//! with (its base as it now stands, other runs' finished agents: a trial merge), tokens,
//! cost, time, changes and diff; and the actions that finish the work, each the library call
//! the CLI makes:
//!
//! - Merge (`berth_run::pick`, as `berth run pick`): the agent's work merged with a message
//!   naming the task, its workspace archived, the other agents' workspaces kept or (Merge
//!   and drop the others) dropped; each agent's outcome recorded in the run. The buttons
//!   follow berth-run's rule of a pick on evidence: shown only when a pick can work (never
//!   on a running run's agent, nor one merged or discarded), disabled with the reason when
//!   the evidence is against the agent, beside an explicit "Merge anyway" whose
//!   confirmation names that reason;
//! - Tell (`Runs::tell`, as `berth run tell`): after the agent's current turn
//!   in a running run, else the run runs again, supervised by this server;
//! - a comment on a line of a diff, which becomes a Tell quoting the file and the line;
//! - Allow, Always allow or Deny, for the question an agent of a run started with `--ask`
//!   waits on (`RunStore::queue_answer`, as `berth run answer`);
//! - Discard (`berth_run::discard`, as `berth run discard --agent N`);
//! - Land (`berth_run::Lander`, as `berth land RUN:N`, `pages/land.rs`): beside Merge, on
//!   the base with the run's check run on the combined tree; each agent's card says where its
//!   newest land stands (landing, landed, left with the reason), and the page reloads itself
//!   while one is under way.
//!
//! A merged or discarded agent shows how it ended, without these actions. A failed check's
//! last lines are folded under its agent's card.
//!
//! Runs are this machine's: the admin's only, as `/runs` is.

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use berth_ops::MergeMode;
use berth_run::{Against, AgentForesight, AgentNumber, Compared, How, RunId, Telling};
use maud::{Markup, html};
use serde::Deserialize;

use super::land::{Landing, WHAT_LAND_DOES};
use super::runs::admin_only;
use super::{check_csrf, done};
use crate::error::{PageError, PageResult};
use crate::page::{Page, page};
use crate::{Viewer, Web};

/// `/runs/{id}`: the agents side by side.
pub async fn show(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> PageResult<Page> {
    admin_only(&viewer)?;
    let runs = &web.inner.runs;
    let id = runs.resolve(&id).await?;
    let compared =
        berth_run::compare_foreseen(&web.inner.ops, runs, &id, true, &web.inner.foresight).await?;
    let lands = super::land::of_run(&web, id.as_str(), compared.agents.len()).await;
    let landing = lands
        .iter()
        .any(|l| l.as_ref().is_some_and(Landing::under_way));
    let title = format!("Run {}", &compared.run);
    let body = html! {
        p.crumbs { a href="/runs" { "Runs" } " / " }
        div.bar {
            h1 { "Run " code { (compared.run) } " " span class={ "state " (compared.review.stage.as_str()) } { (compared.review.to_string()) } }
        }
        p.task { (compared.task.chars().take(600).collect::<String>()) }
        @if let Some(check) = &compared.check { p.meta { "check: " code { (check) } } }
        div.compare data-run=(compared.run) data-landing[landing] {
            @for (agent, land) in compared.agents.iter().zip(&lands) { (agent_view(&compared.run, agent, land.as_ref())) }
        }
        p #turn-status role="status" {}
    };
    Ok(page(&viewer, "review", &title, body))
}

fn agent_view(run: &str, a: &Compared, land: Option<&Landing>) -> Markup {
    let base = format!("/runs/{run}/agents/{}", a.agent);
    let name = a.workspace_name.clone().unwrap_or_else(|| a.label.clone());
    let others = "Merge this agent's work and drop the other agents' (kept on lost refs, which berth run restore brings back)?";
    html! {
        section.agent data-agent=(a.agent) {
            h2 { "Agent " (a.agent) " " small { (name) } }
            dl.facts {
                dt { "State" } dd { span class={ "state " (a.state) } { (a.state) } }
                @if let Some(outcome) = &a.outcome { dt { "Outcome" } dd.outcome { span class={ "state " (outcome) } { (outcome) } } }
                dt { "Check" } dd.check { @match a.check_verdict.as_deref() {
                    Some("passed") => span.add { "passed" },
                    Some("failed") => span.del { "failed" @if let Some(o) = &a.check_outcome { " (" (o) ")" } },
                    Some(other) => { (other) @if let Some(o) = &a.check_outcome { " (" (o) ")" } },
                    None => "—",
                } }
                @if let Some(seen) = &a.conflicts { dt { "Conflicts" } dd.conflicts { (conflicts_view(seen)) } }
                dt { "Changed" } dd.changed { (a.files.len()) @if a.files.len() == 1 { " file " } @else { " files " } span.add { "+" (a.added) } " " span.del { "−" (a.removed) } }
                dt { "Tokens" } dd { (a.input_tokens + a.output_tokens) }
                dt { "Cost" } dd { @match a.cost_usd { Some(c) => { "$" (format!("{c:.2}")) }, None => "—" } }
                dt { "Time" } dd { (a.elapsed_ms / 1000) "s" }
                @if let Some(s) = &a.session { dt { "Session" } dd { a href={ "/s/" (s) } { "transcript" } } }
            }
            @let closed = matches!(a.outcome.as_deref(), Some("merged" | "discarded"));
            @if let Some(l) = land { (super::land::view(l)) }
            @let landing = land.is_some_and(Landing::under_way);
            @match (&a.closed, &a.refusal) {
                // Nothing to pick or drop now: why, instead of buttons that would fail.
                (Some(why), _) => {
                    @if !closed { p.cannot { "Merge and Discard: not now, " (why) "." } }
                }
                (None, Some(refusal)) => {
                    div.actions {
                        button.merge type="button" disabled title=(refusal) { "Merge" }
                        @if a.forceable {
                            button.js-post.secondary.merge-anyway type="button" data-action={ (base) "/merge?force=1" } data-confirm={ (refusal) ". Merge this agent's work into its base branch anyway?" } { "Merge anyway" }
                        }
                        // A land moves the base only once the check passes on the combined
                        // tree, handing a red check back to the agent: no force needed.
                        @if !landing { (land_button(&base)) }
                        button.js-post.secondary.discard type="button" data-action={ (base) "/discard" } data-confirm="Drop this agent's work? It is kept on a lost ref, and berth run restore brings it back." { "Discard" }
                    }
                    p.refusal { "Not merged without forcing it: " (refusal) "." }
                    @if !landing { (land_note()) }
                }
                (None, None) => {
                    @if a.unreadable.is_none() {
                        div.actions {
                            button.js-post.merge type="button" data-action={ (base) "/merge" } data-confirm="Merge this agent's work into its base branch?" { "Merge" }
                            button.js-post.secondary.merge-only type="button" data-action={ (base) "/merge?others=delete" } data-confirm=(others) { "Merge and drop the others" }
                            @if !landing { (land_button(&base)) }
                            button.js-post.secondary.discard type="button" data-action={ (base) "/discard" } data-confirm="Drop this agent's work? It is kept on a lost ref, and berth run restore brings it back." { "Discard" }
                        }
                        @if !landing { (land_note()) }
                    }
                }
            }
            @if !closed {
                form.tell data-action={ (base) "/tell" } {
                    label for={ "tell-" (a.agent) } .visually-hidden { "Tell agent " (a.agent) }
                    textarea id={ "tell-" (a.agent) } name="text" rows="2" placeholder="Tell this agent something more…" required {}
                    div.actions { button type="submit" { "Tell" } }
                }
            }
            @if let Some(w) = &a.waiting {
                div.question role="alertdialog" {
                    p { "The agent asks to use " strong { (w.tool) } }
                    pre { (shown(&w.description)) }
                    div.actions {
                        button.js-post.allow type="button" data-action={ (base) "/answer?answer=allow" } { "Allow" }
                        button.js-post.secondary.always type="button" data-action={ (base) "/answer?answer=allow_always" } { "Always allow" }
                        button.js-post.secondary.deny type="button" data-action={ (base) "/answer?answer=deny" } { "Deny" }
                    }
                }
            }
            @if let Some(why) = &a.message {
                pre.why { (shown(why)) }
            }
            @if let Some(c) = a.check.as_ref().filter(|c| !c.passed && !c.not_run) {
                details.check-output {
                    summary { "The check's last lines (" (c.described()) ")" }
                    pre { (shown(c.output.as_deref().unwrap_or(""))) }
                    p.meta { "All of it: " code { "berth run logs " (run) " --agent " (a.agent) " --check" } }
                }
            }
            @if let Some(why) = &a.unreadable {
                p.problem { "Its changes cannot be shown: " (why) }
            }
            @if let Some(patch) = &a.patch { (diff_view(&base, patch)) }
        }
    }
}

/// What an agent's work conflicts with: each base or other run's agent with its files (named
/// as git quotes them), `none` when it merges cleanly with all it was tried against, or why it
/// was not looked at.
fn conflicts_view(seen: &AgentForesight) -> Markup {
    let files = |files: &[berth_run::FileName]| {
        files
            .iter()
            .map(berth_run::FileName::shown)
            .collect::<Vec<_>>()
            .join(", ")
    };
    html! {
        @if let Some(u) = &seen.unjudged {
            @if u.reason.worth_saying() { span.meta { "not looked for: " (shown(&u.why)) } } @else { "—" }
        } @else if seen.with.is_empty() {
            span.add { "none" }
            span.meta { " (with " (seen.base.as_deref().unwrap_or("its base")) " and " (seen.compared) " agent(s) of other runs)" }
        } @else {
            ul {
                @for c in &seen.with {
                    li.del {
                        @match &c.against {
                            Against::Base { branch } => { "with " code { (branch) } },
                            Against::Agent { run, agent, label } => {
                                "with " a href={ "/runs/" (run) } { "run " (run) " agent " (agent) } " (" (label) ")"
                            },
                        }
                        ": " code { (files(&c.files)) }
                    }
                }
            }
        }
        @for u in &seen.unknown {
            p.meta { "not compared with run " (u.run) " agent " (u.agent) ": " (shown(&u.why)) }
        }
    }
}

/// The Land button of an agent whose actions start at `base`.
fn land_button(base: &str) -> Markup {
    html! {
        button.js-post.secondary.land type="button" data-action={ (base) "/land" } data-confirm=(WHAT_LAND_DOES) title="Lands it on the base with the run's check run on the combined tree (berth land)" { "Land" }
    }
}

/// What Land does, said under the buttons (a phone shows no button's title).
fn land_note() -> Markup {
    html! {
        p.land-note { "Land brings it onto its base as the base now stands, and moves the base only once the run's check passes on that combined tree." }
    }
}

/// An agent's words as the page shows them: HTML escapes what would be markup, and
/// berth-core's `shown` what would reorder the line (a bidi override) or is no text (a
/// control character), as escapes a person reads.
fn shown(text: &str) -> String {
    berth_ops::shown::visible(text, berth_ops::shown::Form::Lines).into_owned()
}

/// The file a `+++ ` line of a patch names, as git quotes it (`"evil\033[31m.txt"`); `None`
/// for `/dev/null`.
fn new_file(header: &str) -> Option<String> {
    let name = header.strip_prefix("+++ ")?;
    if let Some(quoted) = name.strip_prefix("\"b/") {
        // Quoted by git already: the quotes kept, the `b/` taken out.
        return Some(format!("\"{quoted}"));
    }
    let name = name.strip_prefix("b/")?;
    Some(berth_ops::shown::visible(name, berth_ops::shown::Form::FileName).into_owned())
}

/// A unified diff with its new side's line numbers; each added or unchanged line can be
/// commented on (the page's script opens a box under it). Its files named as git quotes them,
/// its lines through [`shown`].
fn diff_view(base: &str, patch: &str) -> Markup {
    let mut file = String::new();
    let mut line = 0u64;
    html! {
        div.diff data-comment={ (base) "/comment" } {
            @for text in patch.lines() {
                @if let Some(path) = new_file(text) {
                    ({ let header = html! { div.file { (path) } }; file = path; header })
                } @else if text.starts_with("+++") || text.starts_with("---") || text.starts_with("diff ") || text.starts_with("index ") || text.starts_with("new file") || text.starts_with("deleted file") {
                } @else if let Some(hunk) = text.strip_prefix("@@") {
                    ({
                        line = hunk_start(hunk);
                        html! { div.hunk { "@@" (hunk) } }
                    })
                } @else if let Some(rest) = text.strip_prefix('-') {
                    div.line.del { span.no {} span.text { "-" (shown(rest)) } }
                } @else {
                    @let (class, shown) = match text.strip_prefix('+') {
                        Some(rest) => ("line add", format!("+{}", shown(rest))),
                        None => ("line ctx", shown(text)),
                    };
                    ({
                        let n = line;
                        line += 1;
                        html! {
                            div class=(class) data-file=(file) data-line=(n) tabindex="0" title="Comment on this line" {
                                span.no { (n) } span.text { (shown) }
                            }
                        }
                    })
                }
            }
        }
    }
}

/// The first new-side line of a hunk header (` -a,b +c,d @@ …`).
fn hunk_start(hunk: &str) -> u64 {
    hunk.split_whitespace()
        .find_map(|part| part.strip_prefix('+'))
        .and_then(|range| range.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// The workspace of agent `n` of the run `id`.
async fn workspace_of(web: &Web, id: &str, n: AgentNumber) -> PageResult<(RunId, String)> {
    let runs = &web.inner.runs;
    let id = runs.resolve(id).await?;
    let record = runs.load(&id).await?;
    let agent = record
        .agents
        .get(n.index())
        .ok_or_else(|| PageError::not_found("agent"))?;
    let ws = agent.workspace.clone().ok_or_else(|| {
        PageError::new(
            axum::http::StatusCode::CONFLICT,
            "this agent never got a workspace",
        )
    })?;
    Ok((id, ws))
}

#[derive(Deserialize)]
pub struct AnswerQuery {
    /// `allow`, `allow_always` or `deny`.
    answer: String,
}

/// `POST /runs/{id}/agents/{n}/answer?answer=…`: answers the question the agent waits on (a
/// run started with `--ask`), as `berth run answer` does.
pub async fn answer(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path((id, n)): Path<(String, AgentNumber)>,
    axum::extract::Query(query): axum::extract::Query<AnswerQuery>,
) -> PageResult<axum::Json<serde_json::Value>> {
    admin_only(&viewer)?;
    check_csrf(&viewer, &headers)?;
    let answer: berth_run::Answer = query
        .answer
        .parse()
        .map_err(|e: String| PageError::new(axum::http::StatusCode::BAD_REQUEST, e))?;
    let runs = &web.inner.runs;
    let run = runs.resolve(&id).await?;
    runs.queue_answer(&run, Some(n.index()), answer).await?;
    Ok(done(Some(format!("/runs/{run}"))))
}

#[derive(Deserialize)]
pub struct MergeQuery {
    /// `delete`: the other agents' work is dropped once this one is merged.
    others: Option<String>,
    /// `1`: merged though the evidence is against it (`berth run pick --force`).
    force: Option<String>,
    /// `1`: merged though another agent of the run was (`berth run pick --also`).
    also: Option<String>,
}

/// `POST /runs/{id}/agents/{n}/merge`: the agent picked, as `berth run pick` does: its work
/// merged into its base and its workspace archived; the other agents' workspaces kept, or
/// with `?others=delete` dropped. `?force=1` and `?also=1` are pick's `--force` and `--also`.
pub async fn merge(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path((id, n)): Path<(String, AgentNumber)>,
    axum::extract::Query(query): axum::extract::Query<MergeQuery>,
) -> PageResult<axum::Json<serde_json::Value>> {
    admin_only(&viewer)?;
    check_csrf(&viewer, &headers)?;
    let (run, _) = workspace_of(&web, &id, n).await?;
    let runs = &web.inner.runs;
    let here = std::env::current_dir().map_err(|e| {
        PageError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot read the server's folder: {e}"),
        )
    })?;
    berth_run::pick(
        &web.inner.ops,
        runs,
        berth_run::Pick {
            run: run.clone(),
            choice: berth_run::Choice::Agent(n.index()),
            mode: MergeMode::Merge,
            keep_others: query.others.as_deref() != Some("delete"),
            force: query.force.as_deref() == Some("1"),
            also: query.also.as_deref() == Some("1"),
        },
        &here,
    )
    .await?;
    Ok(done(Some(format!("/runs/{run}"))))
}

/// `POST /runs/{id}/agents/{n}/discard`: the agent's work dropped, as `berth run discard
/// --agent N` does.
pub async fn discard(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path((id, n)): Path<(String, AgentNumber)>,
) -> PageResult<axum::Json<serde_json::Value>> {
    admin_only(&viewer)?;
    check_csrf(&viewer, &headers)?;
    let (run, _) = workspace_of(&web, &id, n).await?;
    berth_run::discard(&web.inner.ops, &web.inner.runs, &run, Some(n.index())).await?;
    Ok(done(Some(format!("/runs/{run}"))))
}

#[derive(Deserialize)]
pub struct TellForm {
    text: String,
}

/// `POST /runs/{id}/agents/{n}/tell`: the agent told more, in its own workspace and session,
/// as `berth run tell` does; the run supervised by this server.
pub async fn tell(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path((id, n)): Path<(String, AgentNumber)>,
    axum::Form(form): axum::Form<TellForm>,
) -> PageResult<axum::Json<serde_json::Value>> {
    admin_only(&viewer)?;
    check_csrf(&viewer, &headers)?;
    let run = tell_agent(&web, &id, n, &form.text).await?;
    Ok(done(Some(format!("/runs/{run}"))))
}

#[derive(Deserialize)]
pub struct CommentForm {
    file: String,
    line: u64,
    /// The line as the diff shows it.
    quoted: String,
    text: String,
}

/// `POST /runs/{id}/agents/{n}/comment`: a comment on a line of the agent's diff, told to
/// the agent quoting the file and the line.
pub async fn comment(
    State(web): State<Web>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path((id, n)): Path<(String, AgentNumber)>,
    axum::Form(form): axum::Form<CommentForm>,
) -> PageResult<axum::Json<serde_json::Value>> {
    admin_only(&viewer)?;
    check_csrf(&viewer, &headers)?;
    let quoted: String = form.quoted.chars().take(500).collect();
    let text = format!(
        "A review comment on {} line {}:\n\n> {}\n\n{}",
        form.file,
        form.line,
        quoted.trim_end(),
        form.text.trim()
    );
    let run = tell_agent(&web, &id, n, &text).await?;
    Ok(done(Some(format!("/runs/{run}"))))
}

async fn tell_agent(web: &Web, id: &str, n: AgentNumber, text: &str) -> PageResult<RunId> {
    let id = web.inner.runs.resolve(id).await?;
    let telling = Telling {
        agent: Some(n),
        text,
        ..Telling::default()
    };
    // A running run's agent is told by the run's own supervisor; one that is over, in a
    // turn this server hosts.
    let how = How::Hosted { by: "berth serve" };
    web.inner.lifecycle.tell(&id, telling, how).await?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_names_its_files_as_git_quotes_them_and_shows_an_agents_controls() {
        let patch = "diff --git \"a/evil\\033[2J\\342\\200\\256.txt\" \"b/evil\\033[2J\\342\\200\\256.txt\"\n\
            --- /dev/null\n\
            +++ \"b/evil\\033[2J\\342\\200\\256.txt\"\n\
            @@ -0,0 +1,2 @@\n\
            +ok\x1b]52;c;ZXZpbA==\x07 \u{202e}gnp.exe\n\
            +plain\n\
            +++ b/src/main.rs\n";
        let html = diff_view("/runs/r/agents/1", patch).into_string();
        assert!(
            html.contains(r#"<div class="file">&quot;evil\033[2J\342\200\256.txt&quot;</div>"#),
            "{html}"
        );
        assert!(
            html.contains(r#"data-file="&quot;evil\033[2J\342\200\256.txt&quot;" data-line="1""#),
            "{html}"
        );
        assert!(
            html.contains(r"+ok\x1b]52;c;ZXZpbA==\x07 \u{202e}gnp.exe"),
            "{html}"
        );
        assert!(
            html.contains(r#"<div class="file">src/main.rs</div>"#),
            "{html}"
        );
        assert!(
            !html.chars().any(berth_ops::shown::drives_the_terminal),
            "{html}"
        );
    }

    #[test]
    fn conflicts_name_what_and_the_files_as_git_quotes_them() {
        let seen = AgentForesight {
            agent: 1,
            base: Some("main".into()),
            unjudged: None,
            with: vec![
                berth_run::Conflict {
                    against: Against::Base {
                        branch: "main".into(),
                    },
                    files: vec!["f.txt".into(), "<b>\x1b.txt".into()],
                },
                berth_run::Conflict {
                    against: Against::Agent {
                        run: "0123456789ab".into(),
                        agent: 2,
                        label: "codex".into(),
                    },
                    files: vec!["evil\u{1b}[2J.txt".into()],
                },
            ],
            compared: 1,
            unknown: Vec::new(),
        };
        let html = conflicts_view(&seen).into_string();
        assert!(
            html.contains("with <code>main</code>: <code>f.txt"),
            "{html}"
        );
        assert!(html.contains(r"&quot;&lt;b&gt;\033.txt&quot;"), "{html}");
        assert!(html.contains(r"&quot;evil\033[2J.txt&quot;"), "{html}");
        assert!(
            html.contains(r#"<a href="/runs/0123456789ab">run 0123456789ab agent 2</a> (codex)"#),
            "{html}"
        );
        assert!(
            !html.chars().any(berth_ops::shown::drives_the_terminal),
            "{html}"
        );
    }

    #[test]
    fn a_hunk_header_gives_its_first_new_line() {
        assert_eq!(hunk_start(" -0,0 +1,3 @@"), 1);
        assert_eq!(hunk_start(" -10,4 +12,6 @@ fn main() {"), 12);
        assert_eq!(hunk_start(" nonsense"), 1);
    }
}
