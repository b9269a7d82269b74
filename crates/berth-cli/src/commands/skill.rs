//! `berth skill`: the skills berth's agent is offered in a workspace, as it sees them.

use std::io::Write;

use anyhow::Context;
use berth_ops::Ops;
use berth_ops::skills::Skills;

use crate::cli::SkillCmd;
use crate::render;

pub async fn run(ops: &Ops, cmd: SkillCmd) -> anyhow::Result<()> {
    match cmd {
        SkillCmd::List { workspace, json } => {
            let (label, skills) = gather(ops, workspace.as_deref()).await?;
            warn(&skills);
            let listed = skills.offered().shown.len();
            if json.json {
                return Ok(render::json(&serde_json::json!({
                    "skills": skills.skills,
                    "warnings": skills.warnings,
                    "listed": listed,
                }))?);
            }
            if skills.skills.is_empty() {
                eprintln!(
                    "no skills for {label}: a skill is a folder with a SKILL.md (`berth skill --help` says where they go)"
                );
                return Ok(());
            }
            let rows: Vec<Vec<String>> = skills
                .skills
                .iter()
                .map(|s| {
                    vec![
                        s.name.clone(),
                        s.source.to_string(),
                        render::cell(&s.description),
                    ]
                })
                .collect();
            render::table(&["NAME", "SOURCE", "DESCRIPTION"], &rows)?;
            if listed < skills.skills.len() {
                render::legend(&format!(
                    "{listed} of {} skills fit the list the agent's instructions carry; it finds the others by name with its `skill` tool",
                    skills.skills.len()
                ));
            }
            Ok(())
        }
        SkillCmd::Show {
            name,
            workspace,
            json,
        } => {
            let (_, skills) = gather(ops, workspace.as_deref()).await?;
            warn(&skills);
            let skill = skills.find(&name).map_err(berth_ops::Error::from)?.clone();
            let shown = skill.clone();
            let body = tokio::task::spawn_blocking(move || shown.body())
                .await
                .context("reading the skill failed")?
                .map_err(berth_ops::Error::from)?;
            if json.json {
                let mut value = serde_json::to_value(&skill)?;
                value["body"] = body.into();
                return Ok(render::json(&value)?);
            }
            let mut out = std::io::stdout().lock();
            write!(out, "{}", body)?;
            if !body.ends_with('\n') {
                writeln!(out)?;
            }
            eprintln!(
                "{} ({} skill, {}){}",
                skill.name,
                skill.source,
                skill.dir.display(),
                match skill.files.len() {
                    0 => String::new(),
                    n => format!("; {n} other file(s): {}", skill.files.join(", ")),
                }
            );
            Ok(())
        }
    }
}

/// The skills of the workspace meant (named, else the one this folder is in), else the
/// person's own; with the label a message names.
async fn gather(ops: &Ops, named: Option<&str>) -> anyhow::Result<(String, Skills)> {
    let here = std::env::current_dir().context("cannot read the current folder")?;
    let ws = ops.workspace_meant(named, &here).await?;
    let label = ws
        .as_ref()
        .map_or_else(|| "you (outside every workspace)".to_owned(), |w| w.label());
    Ok((label, ops.skills(ws.as_ref()).await?))
}

fn warn(skills: &Skills) {
    for w in &skills.warnings {
        eprintln!("berth: warning: {w}");
    }
}
