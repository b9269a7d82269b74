//! `berth workspace storage …` and `berth session storage …`: one implementation over either
//! owner.

use std::io::Read;

use anyhow::Context;
use berth_ops::{Ops, Owner};

use crate::cli::StorageCmd;
use crate::render;

pub async fn run(ops: &Ops, owner: Owner, cmd: StorageCmd) -> anyhow::Result<()> {
    let named = match owner {
        Owner::Workspace => super::meant(ops, Some(cmd.owner())).await?,
        Owner::Session => cmd.owner().to_owned(),
    };
    let at = ops.storage(owner, &named).await?;
    match cmd {
        StorageCmd::Read { path, .. } => {
            // An agent may have written it: byte for byte into a pipe or a file, its control
            // characters shown as escapes on a terminal.
            let bytes = ops.read_file(&at, &path).await?;
            render::agents_bytes(&bytes)?;
        }
        StorageCmd::Write { path, content, .. } => {
            let bytes = read_content(content)?;
            let len = bytes.len();
            let path = ops.write_file(&at, &path, bytes).await?;
            eprintln!("wrote {len} bytes to {path}");
        }
        StorageCmd::List { path, json, .. } => {
            let entries = ops.list_files(&at, path.as_deref()).await?;
            if json.json {
                return Ok(render::json(&entries)?);
            }
            let rows: Vec<Vec<String>> = entries
                .iter()
                .map(|e| {
                    vec![
                        e.kind.as_str().to_owned(),
                        e.size.to_string(),
                        render::file_name(&e.path),
                    ]
                })
                .collect();
            render::table(&["KIND", "SIZE", "PATH"], &rows)?;
        }
        StorageCmd::Rm {
            path, recursive, ..
        } => {
            let removed = match ops.remove_file(&at, &path, recursive).await {
                // The library says "recursively" in no front end's words; here it is -r, for a
                // refusal of a folder (not of a path that escapes, or whose parent is a file).
                Err(e)
                    if !recursive
                        && e.kind() == berth_ops::ErrorKind::Refused
                        && ops.list_files(&at, Some(&path)).await.is_ok() =>
                {
                    return Err(berth_ops::Error::refused(format!(
                        "{e}: `-r` removes a folder and everything in it"
                    ))
                    .into());
                }
                removed => removed?,
            };
            eprintln!("removed {removed}");
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
