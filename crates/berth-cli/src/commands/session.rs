//! `berth session …`

use std::io::Write;

use anyhow::Context;
use berth_ops::{CreateSession, Message, Ops, Owner, Role, SessionView, session_label};

use super::confirm;
use super::storage::read_content;
use crate::cli::SessionCmd;
use crate::render;

pub async fn run(ops: &Ops, cmd: SessionCmd) -> anyhow::Result<()> {
    match cmd {
        SessionCmd::New {
            workspace,
            title,
            provider,
            model,
            id,
            json,
        } => {
            let request = CreateSession {
                workspace: super::meant(ops, workspace.as_deref()).await?,
                title,
                provider,
                model,
                id,
                cwd: None,
                agent: None,
            };
            create(ops, request, json.json).await
        }
        SessionCmd::Fork {
            session,
            workspace,
            title,
            json,
        } => fork(ops, &session, workspace.as_deref(), title, json.json).await,
        SessionCmd::List {
            workspace,
            all,
            archived,
            json,
        } => list(ops, workspace.as_deref(), all, archived, json.json).await,
        SessionCmd::Show { session, json } => show(ops, &session, json.json).await,
        SessionCmd::Append {
            session,
            role,
            content,
        } => append(ops, &session, &role, content).await,
        SessionCmd::Clear {
            session,
            confirm: c,
        } => clear(ops, &session, c.yes).await,
        SessionCmd::Rm {
            session,
            confirm: c,
        } => delete(ops, &session, c.yes).await,
        SessionCmd::Storage(cmd) => super::storage::run(ops, Owner::Session, cmd).await,
    }
}

async fn create(ops: &Ops, request: CreateSession, json: bool) -> anyhow::Result<()> {
    let session = ops.create_session(request).await?;
    made(ops, &session, json).await
}

async fn fork(
    ops: &Ops,
    session: &str,
    workspace: Option<&str>,
    title: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let from = ops.resolve_session(session).await?;
    let forked = ops.fork_session(&from, workspace, None, title).await?;
    made(ops, &forked, json).await
}

async fn list(
    ops: &Ops,
    workspace: Option<&str>,
    all: bool,
    archived: bool,
    json: bool,
) -> anyhow::Result<()> {
    let workspace = match all {
        true => None,
        false => {
            let here = std::env::current_dir().context("cannot read the current folder")?;
            ops.workspace_meant(workspace, &here).await?
        }
    };
    let sessions = ops
        .list_sessions_including(workspace.map(|w| w.id.to_string()).as_deref(), archived)
        .await?;
    if json {
        return Ok(render::json(&sessions)?);
    }
    if sessions.is_empty() {
        eprintln!(
            "no sessions yet: `berth session new` makes one, `berth chat` starts one and talks in it"
        );
        return Ok(());
    }
    // Short ids, as `session show` takes them; --json keeps them whole.
    let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .zip(render::short_ids(&ids))
        .map(|(s, id)| {
            vec![
                id,
                render::cell(s.workspace_label()),
                s.status.as_str().to_owned(),
                render::cell(&s.answered_by()),
                render::time(s.created_at),
                render::cell(&s.title),
            ]
        })
        .collect();
    render::table(
        &[
            "ID",
            "WORKSPACE",
            "STATUS",
            "ANSWERED BY",
            "CREATED",
            "TITLE",
        ],
        &rows,
    )?;
    Ok(())
}

async fn show(ops: &Ops, session: &str, json: bool) -> anyhow::Result<()> {
    let s = ops.resolve_session(session).await?;
    let t = ops.transcript(&s).await?;
    if t.torn_tail > 0 {
        eprintln!(
            "warning: the transcript ends with {} bytes of an append that did not finish; \
             they are not a message, and the next append moves them to {}",
            t.torn_tail,
            recovery_path(&t)
        );
    }
    let cost = ops.session_cost(&s).await?;
    let workspace = ops.resolve_workspace(s.workspace_id.as_str()).await?;
    let view = SessionView::in_workspace(&s, workspace.name.as_ref());
    if json {
        return Ok(render::json(&serde_json::json!({
            "session": view,
            "workspace_archived_at": workspace.archived_at,
            "cost_usd": cost,
            "frontmatter": t.frontmatter,
            "messages": t.messages,
            "torn_tail": t.torn_tail,
            "recovery_file": t.recovery_file,
        }))?);
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    writeln!(out, "session:   {}", s.id)?;
    let archived = workspace.archived_at.map_or_else(String::new, |at| {
        format!(", archived {} (no new turn)", render::time(at))
    });
    match &workspace.name {
        Some(name) => writeln!(out, "workspace: {name} ({}){archived}", s.workspace_id)?,
        None => writeln!(out, "workspace: {}{archived}", s.workspace_id)?,
    }
    if !s.title.is_empty() {
        writeln!(out, "title:     {}", render::cell(&s.title))?;
    }
    writeln!(out, "status:    {}", s.status.as_str())?;
    // An ACP agent's session names the agent: no berth model answers in it.
    match &s.agent {
        Some(agent) => writeln!(out, "agent:     {}", render::cell(agent))?,
        None => writeln!(out, "model:     {}/{}", s.provider, render::cell(&s.model))?,
    }
    writeln!(out, "created:   {}", render::time(s.created_at))?;
    writeln!(out, "messages:  {}", t.messages.len())?;
    if !s.usage.is_zero() {
        let cost = cost.map_or_else(String::new, |c| format!(", ${c:.4}"));
        writeln!(
            out,
            "tokens:    {} in, {} out{cost}",
            s.usage.input_tokens, s.usage.output_tokens
        )?;
    }
    if let Some(file) = &t.recovery_file {
        writeln!(
            out,
            "recovered: {} (bytes of unfinished appends, cut from the transcript)",
            file.display()
        )?;
    }
    for msg in &t.messages {
        writeln!(out, "\n── {} ──", msg.role)?;
        // An agent's words: a control character other than a line break or a tab would let
        // a message rewrite the screen, so each is shown as its escape.
        writeln!(out, "{}", render::lines(&msg.content))?;
    }
    out.flush()?;
    Ok(())
}

async fn append(
    ops: &Ops,
    session: &str,
    role: &str,
    content: Option<String>,
) -> anyhow::Result<()> {
    let role: Role = role.parse().map_err(anyhow::Error::msg)?;
    let s = ops.resolve_session(session).await?;
    let bytes = read_content(content)?;
    let text = String::from_utf8(bytes).context("the message is not valid UTF-8")?;
    ops.append_message(&s, &Message::new(role, text)).await?;
    Ok(())
}

async fn clear(ops: &Ops, session: &str, yes: bool) -> anyhow::Result<()> {
    let s = ops.resolve_session(session).await?;
    confirm(
        yes,
        &format!("Clear the transcript of session {}?", label(&s)),
    )?;
    ops.clear_session(&s).await?;
    eprintln!("cleared session {}", label(&s));
    Ok(())
}

async fn delete(ops: &Ops, session: &str, yes: bool) -> anyhow::Result<()> {
    let s = ops.resolve_session(session).await?;
    confirm(
        yes,
        &format!(
            "Delete session {} with its transcript and storage?",
            label(&s)
        ),
    )?;
    ops.delete_session(&s).await?;
    eprintln!("deleted session {}", label(&s));
    Ok(())
}

/// A session's label for the terminal: its title may hold control characters.
fn label(s: &berth_ops::Session) -> String {
    render::cell(&session_label(s))
}

/// Where the store keeps (or will keep) cut tails, for the warning.
fn recovery_path(t: &berth_ops::Transcript) -> String {
    t.recovery_file.as_ref().map_or_else(
        || "session.recovered.md beside the transcript".to_owned(),
        |p| p.display().to_string(),
    )
}

/// A session just made: its id, or with --json its view.
async fn made(ops: &Ops, session: &berth_ops::Session, json: bool) -> anyhow::Result<()> {
    if json {
        let workspace = ops.resolve_workspace(session.workspace_id.as_str()).await?;
        render::json(&SessionView::in_workspace(session, workspace.name.as_ref()))?;
    } else {
        render::line(&session.id)?;
    }
    Ok(())
}
