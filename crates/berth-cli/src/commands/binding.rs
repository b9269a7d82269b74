//! `berth binding …`

use berth_ops::Ops;

use crate::cli::BindingCmd;
use crate::render;

pub async fn run(ops: &Ops, cmd: BindingCmd) -> anyhow::Result<()> {
    match cmd {
        BindingCmd::List(flag) => {
            let all = ops.list_bindings().await?;
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
            let (device, ws, old) = ops.bind(&device, &workspace).await?;
            let device = render::cell(device.as_str());
            match old {
                Some(old) if old != ws.id => eprintln!("bound {device} to {} (was {old})", ws.id),
                _ => eprintln!("bound {device} to {}", ws.id),
            }
        }
        BindingCmd::Rm { device } => {
            let (device, old) = ops.unbind(&device).await?;
            eprintln!("unbound {} (was {old})", render::cell(device.as_str()));
        }
        BindingCmd::Resolve { device, json } => {
            let (device, ws) = ops.resolve_device(&device).await?;
            if json.json {
                render::json(&serde_json::json!({
                    "device": device,
                    "workspace": ops.view(&ws, None),
                }))?;
            } else {
                render::line(&ws.id)?;
            }
        }
    }
    Ok(())
}
