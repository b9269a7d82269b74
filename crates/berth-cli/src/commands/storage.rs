//! `berth workspace storage …` and `berth session storage …`: one implementation over a
//! resolved `StorageScope`.

use std::io::{Read, Write};

use anyhow::Context;
use berth_core::{StoragePath, StorageScope};

use super::Ctx;
use crate::cli::StorageCmd;
use crate::render;

pub async fn run(ctx: &Ctx, scope: StorageScope, cmd: StorageCmd) -> anyhow::Result<()> {
    let m = &ctx.manager;
    match cmd {
        StorageCmd::Read { path, .. } => {
            let bytes = m.read_storage(&scope, &StoragePath::new(&path)?).await?;
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)?;
            out.flush()?;
        }
        StorageCmd::Write { path, content, .. } => {
            let path = StoragePath::new(&path)?;
            let bytes = read_content(content)?;
            let len = bytes.len();
            m.write_storage(&scope, &path, bytes).await?;
            eprintln!("wrote {len} bytes to {path}");
        }
        StorageCmd::List { path, json, .. } => {
            let path = path.map(|p| StoragePath::new(&p)).transpose()?;
            let entries = m.list_storage(&scope, path.as_ref()).await?;
            if json.json {
                return Ok(render::json(&entries)?);
            }
            let rows: Vec<Vec<String>> = entries
                .iter()
                .map(|e| {
                    vec![
                        e.kind.as_str().to_owned(),
                        e.size.to_string(),
                        render::cell(&e.path),
                    ]
                })
                .collect();
            render::table(&["KIND", "SIZE", "PATH"], &rows)?;
        }
        StorageCmd::Rm {
            path, recursive, ..
        } => {
            let path = StoragePath::new(&path)?;
            m.remove_storage(&scope, &path, recursive).await?;
            eprintln!("removed {path}");
        }
    }
    Ok(())
}

/// Content given as an argument, or standard input when it is absent or `-`.
pub fn read_content(content: Option<String>) -> anyhow::Result<Vec<u8>> {
    match content.as_deref() {
        None | Some("-") => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .context("cannot read standard input")?;
            Ok(buf)
        }
        Some(text) => Ok(text.as_bytes().to_vec()),
    }
}
