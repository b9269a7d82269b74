//! `berth man`: the manual pages, rendered by clap_mangen from the definitions in `cli.rs`, so
//! they say what `--help` says. Answered before a home is opened, as completions are.

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::Cli;

/// Prints the page of `path` (a command and its subcommands; empty: berth's own), or with
/// `out` writes every page into that folder.
pub fn write(path: &[String], out: Option<&Path>) -> anyhow::Result<()> {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    // Built, so each subcommand carries its full name (`berth-workspace-gc`).
    cmd.build();
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let written = every_page(&cmd, dir)
            .with_context(|| format!("cannot write the pages into {}", dir.display()))?;
        eprintln!("wrote {written} manual pages into {}", dir.display());
        return Ok(());
    }
    let mut page = &cmd;
    for name in path {
        page = page.find_subcommand(name).ok_or_else(|| {
            let names: Vec<&str> = page.get_subcommands().map(|c| c.get_name()).collect();
            berth_ops::Error::rule(
                berth_ops::ErrorKind::Invalid,
                format!(
                    "{} has no command {name:?}; its commands are {}",
                    page.get_display_name().unwrap_or(page.get_name()),
                    names.join(", ")
                ),
            )
        })?;
    }
    let mut text = Vec::new();
    man(page)
        .render(&mut text)
        .context("cannot render the page")?;
    crate::render::raw(&String::from_utf8_lossy(&text))?;
    Ok(())
}

/// One command's page, every one saying which berth it describes.
fn man(cmd: &clap::Command) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd.clone())
        .source(format!("berth {}", env!("CARGO_PKG_VERSION")))
        .manual("berth manual")
}

/// Writes the page of `cmd` and of every command beneath it; how many.
fn every_page(cmd: &clap::Command, dir: &Path) -> std::io::Result<usize> {
    let mut written = 0;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        written += every_page(sub, dir)?;
    }
    man(cmd).generate_to(dir)?;
    Ok(written + 1)
}
