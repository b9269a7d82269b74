//! `berth binding …`

use berth_core::DeviceId;

use super::Ctx;
use crate::cli::BindingCmd;
use crate::render;

pub async fn run(ctx: &Ctx, cmd: BindingCmd) -> anyhow::Result<()> {
    let m = &ctx.manager;
    match cmd {
        BindingCmd::List(flag) => {
            let all = m.list_bindings().await?;
            if flag.json {
                return Ok(render::json(&all)?);
            }
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|b| vec![render::cell(b.device.as_str()), b.workspace.to_string()])
                .collect();
            render::table(&["DEVICE", "WORKSPACE"], &rows)?;
        }
        BindingCmd::Set { device, workspace } => {
            let device = DeviceId::new(device)?;
            let ws = m.resolve(&workspace).await?;
            match m.bind(&device, &ws).await? {
                Some(old) if old != ws.id => eprintln!("bound {device} to {} (was {old})", ws.id),
                _ => eprintln!("bound {device} to {}", ws.id),
            }
        }
        BindingCmd::Rm { device } => {
            let device = DeviceId::new(device)?;
            let old = m.unbind(&device).await?;
            eprintln!("unbound {device} (was {old})");
        }
        BindingCmd::Resolve { device, json } => {
            let device = DeviceId::new(device)?;
            let ws = m.resolve_device(&device).await?;
            if json.json {
                render::json(&serde_json::json!({ "device": device, "workspace": ws }))?;
            } else {
                render::line(&ws.id)?;
            }
        }
    }
    Ok(())
}
