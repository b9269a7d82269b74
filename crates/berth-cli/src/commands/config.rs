//! `berth config …`

use anyhow::{Context, bail};
use berth_core::config::TEMPLATE;
use berth_store_fs::durable::write_atomic;

use super::Ctx;
use crate::cli::ConfigCmd;
use crate::render;

pub async fn run(ctx: &Ctx, cmd: ConfigCmd) -> anyhow::Result<()> {
    match cmd {
        ConfigCmd::Init { force } => {
            let path = ctx.store.global_config_path();
            if path.exists() && !force {
                bail!(
                    "{} already exists; pass --force to replace it with the template",
                    path.display()
                );
            }
            write_atomic(&path, TEMPLATE.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        ConfigCmd::Show { workspace, json } => {
            let ws = match workspace {
                Some(w) => Some(ctx.manager.resolve(&w).await?.id),
                None => None,
            };
            let loaded = ctx.config(ws.as_ref()).await?;
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
