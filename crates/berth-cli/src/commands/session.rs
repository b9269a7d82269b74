//! `berth session …`

use std::io::Write;

use anyhow::Context;
use berth_core::{Message, NewSession, Role, Session, SessionId, StorageScope, WorkspaceStore};

use super::storage::read_content;
use super::{Ctx, confirm};
use crate::cli::SessionCmd;
use crate::render;

pub async fn run(ctx: &Ctx, cmd: SessionCmd) -> anyhow::Result<()> {
    let m = &ctx.manager;
    match cmd {
        SessionCmd::New {
            workspace,
            title,
            provider,
            model,
            id,
            json,
        } => {
            let ws = m.resolve(&workspace).await?;
            // Record what the agent would actually call for this workspace, unless told.
            let (provider, model) = match (provider, model) {
                (Some(p), Some(m)) => (p, m),
                (p, md) => {
                    let loaded = ctx.config(Some(&ws.id)).await?;
                    let c = loaded.config;
                    (
                        p.unwrap_or_else(|| c.provider().as_str().to_owned()),
                        md.unwrap_or_else(|| c.model().to_owned()),
                    )
                }
            };
            let cwd = ctx
                .store
                .workspace_dir(&ws.id)
                .map(|p| p.display().to_string());
            let new = NewSession {
                id: id.map(SessionId::new).transpose()?,
                workspace: ws.id,
                title,
                provider,
                model,
                cwd,
            };
            let session = m.create_session(new).await?;
            if json.json {
                render::json(&session)?;
            } else {
                render::line(&session.id)?;
            }
        }
        SessionCmd::List { workspace, json } => {
            let ws = match workspace {
                Some(w) => Some(m.resolve(&w).await?.id),
                None => None,
            };
            let sessions = m.sessions().list(ws.as_ref()).await?;
            if json.json {
                return Ok(render::json(&sessions)?);
            }
            let rows: Vec<Vec<String>> = sessions
                .iter()
                .map(|s| {
                    vec![
                        s.id.to_string(),
                        s.workspace_id.to_string(),
                        s.status.as_str().to_owned(),
                        format!("{}/{}", s.provider, s.model),
                        render::time(s.created_at),
                        render::cell(&s.title),
                    ]
                })
                .collect();
            render::table(
                &["ID", "WORKSPACE", "STATUS", "MODEL", "CREATED", "TITLE"],
                &rows,
            )?;
        }
        SessionCmd::Show { session, json } => {
            let s = m.resolve_session(&session).await?;
            let t = m.read_transcript(&s).await?;
            if t.torn_tail > 0 {
                eprintln!(
                    "warning: the transcript ends with {} bytes of an interrupted append; they are ignored",
                    t.torn_tail
                );
            }
            if json.json {
                return Ok(render::json(&serde_json::json!({
                    "session": s,
                    "frontmatter": t.frontmatter,
                    "messages": t.messages,
                }))?);
            }
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            writeln!(out, "session:   {}", s.id)?;
            writeln!(out, "workspace: {}", s.workspace_id)?;
            if !s.title.is_empty() {
                writeln!(out, "title:     {}", render::cell(&s.title))?;
            }
            writeln!(out, "status:    {}", s.status.as_str())?;
            writeln!(
                out,
                "model:     {}/{}",
                t.frontmatter.provider, t.frontmatter.model
            )?;
            writeln!(out, "created:   {}", render::time(s.created_at))?;
            writeln!(out, "messages:  {}", t.messages.len())?;
            for msg in &t.messages {
                writeln!(out, "\n── {} ──", msg.role)?;
                // Rendered for a terminal: control characters other than newline and tab
                // would let a message rewrite the screen.
                let shown: String = msg
                    .content
                    .chars()
                    .map(|c| {
                        if c.is_control() && c != '\n' && c != '\t' {
                            '�'
                        } else {
                            c
                        }
                    })
                    .collect();
                writeln!(out, "{shown}")?;
            }
            out.flush()?;
        }
        SessionCmd::Append {
            session,
            role,
            content,
        } => {
            let role: Role = role.parse().map_err(anyhow::Error::msg)?;
            let s = m.resolve_session(&session).await?;
            let bytes = read_content(content)?;
            let text = String::from_utf8(bytes).context("the message is not valid UTF-8")?;
            m.append_message(&s, &Message::new(role, text)).await?;
        }
        SessionCmd::Clear {
            session,
            confirm: c,
        } => {
            let s = m.resolve_session(&session).await?;
            confirm(
                c.yes,
                &format!("Clear the transcript of session {}?", label(&s)),
            )?;
            m.clear_session(&s).await?;
            eprintln!("cleared session {}", label(&s));
        }
        SessionCmd::Rm {
            session,
            confirm: c,
        } => {
            let s = m.resolve_session(&session).await?;
            confirm(
                c.yes,
                &format!(
                    "Delete session {} with its transcript and storage?",
                    label(&s)
                ),
            )?;
            m.delete_session(&s).await?;
            eprintln!("deleted session {}", label(&s));
        }
        SessionCmd::Storage(cmd) => {
            let s = m.resolve_session(cmd.owner()).await?;
            let scope = StorageScope::Session {
                workspace: s.workspace_id,
                session: s.id,
            };
            super::storage::run(ctx, scope, cmd).await?;
        }
    }
    Ok(())
}

fn label(s: &Session) -> String {
    match s.title.as_str() {
        "" => s.id.to_string(),
        t => format!("{} ({})", s.id, render::cell(t)),
    }
}
