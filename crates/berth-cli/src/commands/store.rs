//! `berth store …`: which store this home uses, and copying its records into another.

use berth_import::{MigrateOutcome, MigrateReport};
use berth_ops::{Error, ErrorKind, Ops};

use crate::cli::StoreCmd;
use crate::render;

pub async fn run(ops: &Ops, cmd: StoreCmd) -> anyhow::Result<()> {
    match cmd {
        StoreCmd::Show { json } => {
            let store = ops.store_description();
            if json.json {
                render::json(&serde_json::json!({ "store": store, "home": ops.home() }))?;
            } else {
                println!("{store}");
            }
            Ok(())
        }
        StoreCmd::Migrate { to, dry_run, json } => {
            crate::progress::watch(json.json);
            let report = berth_import::migrate_store(ops, &to, dry_run).await;
            crate::progress::finish_all();
            let report = report?;
            if json.json {
                render::json(&report)?;
            } else {
                print(&report)?;
            }
            summarize(&report)
        }
    }
}

/// What changed or did not come in, item by item (what was already there is only counted),
/// then the counts.
fn print(report: &MigrateReport) -> std::io::Result<()> {
    let rows: Vec<Vec<String>> = report
        .items
        .iter()
        .filter(|i| i.outcome != MigrateOutcome::AlreadyThere)
        .map(|i| {
            vec![
                i.outcome.as_str().to_owned(),
                i.kind.as_str().to_owned(),
                render::cell(&i.what),
                render::cell(&i.detail),
            ]
        })
        .collect();
    if !rows.is_empty() {
        render::table(&["OUTCOME", "KIND", "WHAT", "DETAIL"], &rows)?;
        println!();
    }
    let rows: Vec<Vec<String>> = report
        .counts
        .iter()
        .map(|c| {
            vec![
                c.kind.as_str().to_owned(),
                c.source.to_string(),
                c.verified.map_or("-".to_owned(), |v| v.to_string()),
            ]
        })
        .collect();
    render::table(&["KIND", "IN SOURCE", "SAME IN TARGET"], &rows)
}

fn summarize(report: &MigrateReport) -> anyhow::Result<()> {
    let counts: Vec<String> = [
        MigrateOutcome::Copied,
        MigrateOutcome::WouldCopy,
        MigrateOutcome::Updated,
        MigrateOutcome::WouldUpdate,
        MigrateOutcome::AlreadyThere,
        MigrateOutcome::Conflict,
        MigrateOutcome::Skipped,
    ]
    .into_iter()
    .filter_map(|o| match report.count(o) {
        0 => None,
        n => Some(format!("{n} {}", o.as_str())),
    })
    .collect();
    let what = if counts.is_empty() {
        "nothing to copy".to_owned()
    } else {
        counts.join(", ")
    };
    if report.dry_run {
        eprintln!(
            "{} -> {}: {what} (dry run: nothing was written)",
            report.from, report.to
        );
        return Ok(());
    }
    eprintln!(
        "{} -> {}: {what}; {} messages",
        report.from, report.to, report.messages
    );
    let conflicts = report.count(MigrateOutcome::Conflict);
    if report.complete() {
        eprintln!("verified: the target holds every item of the source, the same");
        return Ok(());
    }
    let (kind, why) = if conflicts > 0 {
        (
            ErrorKind::Conflict,
            format!(
                "{conflicts} item(s) are held differently by the target and were kept (each is listed above)"
            ),
        )
    } else {
        (
            ErrorKind::Io,
            "the target does not hold everything the source does (counts above); run it again"
                .to_owned(),
        )
    };
    Err(Error::rule(kind, format!("not verified: {why}")).into())
}
