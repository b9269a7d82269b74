//! `berth import …`: one line per item found in the source, a summary, and an exit status that
//! says whether anything did not come in.

use std::path::PathBuf;

use anyhow::Context;
use berth_import::{ImportReport, Outcome};
use berth_ops::{Error, Ops};

use crate::cli::ImportCmd;
use crate::render;

pub async fn run(ops: &Ops, cmd: ImportCmd) -> anyhow::Result<()> {
    let (report, json) = match cmd {
        ImportCmd::Aptove { dir, dry_run, json } => {
            crate::progress::watch(json.json);
            (
                berth_import::import_aptove(ops, dir.as_deref(), dry_run).await?,
                json.json,
            )
        }
        ImportCmd::Amux {
            repo,
            dry_run,
            json,
        } => {
            let repo = match repo {
                Some(r) => r,
                None => current_dir()?,
            };
            crate::progress::watch(json.json);
            (
                berth_import::import_amux(ops, &repo, dry_run).await?,
                json.json,
            )
        }
    };
    crate::progress::finish_all();
    if json {
        render::json(&report)?;
    } else {
        print(&report)?;
    }
    summarize(&report)
}

fn current_dir() -> anyhow::Result<PathBuf> {
    std::env::current_dir().context("cannot read the current folder")
}

fn print(report: &ImportReport) -> std::io::Result<()> {
    let rows: Vec<Vec<String>> = report
        .items
        .iter()
        .map(|item| {
            let what = match &item.workspace {
                Some(ws) if ws != &item.what => format!("{} (workspace {ws})", item.what),
                _ => item.what.clone(),
            };
            vec![
                item.outcome.as_str().to_owned(),
                item.kind.as_str().to_owned(),
                render::cell(&what),
                render::cell(&item.detail),
            ]
        })
        .collect();
    render::table(&["OUTCOME", "KIND", "WHAT", "DETAIL"], &rows)
}

/// The counts on stderr, and an error (for the exit status) when anything did not come in.
fn summarize(report: &ImportReport) -> anyhow::Result<()> {
    let counts: Vec<String> = [
        Outcome::Imported,
        Outcome::WouldImport,
        Outcome::AlreadyThere,
        Outcome::Skipped,
        Outcome::Conflict,
        Outcome::Refused,
        Outcome::Failed,
    ]
    .into_iter()
    .filter_map(|o| match report.count(o) {
        0 => None,
        n => Some(format!("{n} {}", o.as_str())),
    })
    .collect();
    let source = report.source.display();
    if counts.is_empty() {
        eprintln!("nothing to import from {source}");
    } else {
        let dry = if report.dry_run {
            " (dry run: nothing was written)"
        } else {
            ""
        };
        eprintln!("{} from {source}: {}{dry}", report.from, counts.join(", "));
    }
    match report.failure() {
        None => Ok(()),
        Some(kind) => {
            let missed = report
                .items
                .iter()
                .filter(|i| i.outcome.is_failure())
                .count();
            Err(Error::rule(
                kind,
                format!(
                    "{missed} item(s) did not come in (conflict, refused or failed; each says why above); everything else did"
                ),
            )
            .into())
        }
    }
}
