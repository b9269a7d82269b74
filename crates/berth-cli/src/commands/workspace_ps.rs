//! `berth workspace ps`: what runs for a workspace (the background processes of its
//! sessions, from berth-ops' registry), and `--kill` to end them.

use berth_ops::{BackgroundId, BackgroundProcess, Ops};

use super::meant;
use crate::render;

pub async fn ps(
    ops: &Ops,
    workspace: Option<&str>,
    kill: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let named = meant(ops, workspace).await?;
    let ws = ops.resolve_workspace(&named).await?;
    let Some(kill) = kill else {
        let running = ops.background_processes(&ws.id).await?;
        if json {
            return Ok(render::json(&running)?);
        }
        if running.is_empty() {
            eprintln!(
                "nothing runs in the background for workspace {}",
                ws.label()
            );
            return Ok(());
        }
        return Ok(render::table(
            &["ID", "PID", "STARTED", "SESSION", "COMMAND", "OUTPUT"],
            &running.iter().map(row).collect::<Vec<_>>(),
        )?);
    };
    let id = match kill {
        "" => None,
        id => Some(id.parse::<BackgroundId>()?),
    };
    let killed = ops.kill_background(&ws.id, id.as_ref()).await?;
    if json {
        return Ok(render::json(&killed)?);
    }
    if killed.is_empty() {
        eprintln!("nothing ran in the background for workspace {}", ws.label());
    }
    for p in &killed {
        render::line(format!(
            "killed {} (pid {}): {}",
            p.id,
            p.pid,
            render::cell(&p.command)
        ))?;
    }
    Ok(())
}

fn row(p: &BackgroundProcess) -> Vec<String> {
    vec![
        p.id.to_string(),
        p.pid.to_string(),
        render::time(p.started),
        p.session.clone(),
        render::cell(&p.command),
        render::cell(&p.output.display().to_string()),
    ]
}
