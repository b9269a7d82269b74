//! `berth config …`

use berth_ops::Ops;

use crate::cli::ConfigCmd;
use crate::render;

pub async fn run(ops: &Ops, cmd: ConfigCmd) -> anyhow::Result<()> {
    match cmd {
        ConfigCmd::Init { force } => {
            let path = ops.init_config(force)?;
            eprintln!("wrote {}", path.display());
        }
        ConfigCmd::Show { workspace, json } => {
            let loaded = ops.config_of(workspace.as_deref()).await?;
            for unknown in &loaded.unknown_keys {
                eprintln!("warning: {unknown}");
            }
            if json.json {
                return Ok(render::json(&serde_json::json!({
                    "config": loaded.config,
                    "provider": loaded.config.provider().as_str(),
                    "model": loaded.config.model(),
                    "layers": loaded.layers,
                    "unknown_keys": loaded.unknown_keys,
                }))?);
            }
            let mut text = String::new();
            text.push_str(&format!(
                "# effective: provider = {}, model = {}\n",
                loaded.config.provider().as_str(),
                loaded.config.model()
            ));
            if loaded.layers.is_empty() {
                text.push_str("# layers: none (built-in defaults)\n");
            }
            for layer in &loaded.layers {
                text.push_str(&format!("# layer: {layer}\n"));
            }
            text.push_str(&toml::to_string(&loaded.config)?);
            render::line(text.trim_end())?;
        }
    }
    Ok(())
}
