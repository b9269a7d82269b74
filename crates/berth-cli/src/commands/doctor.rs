//! `berth doctor`: the checks are berth-ops' (`doctor::diagnose`) and berth-agent's (the MCP
//! servers); this renders the findings and sets the exit status.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use berth_ops::doctor::{Report, Status};
use serde::Serialize;

use crate::render;

#[derive(Serialize)]
struct Json<'a> {
    home: &'a Path,
    /// No errors.
    ok: bool,
    errors: usize,
    warnings: usize,
    findings: &'a [berth_ops::doctor::Finding],
}

pub async fn run(home: &Path, mcp_timeout: u64, json: bool) -> anyhow::Result<()> {
    let mut report: Report = berth_ops::doctor::diagnose(home, &berth_ops::environment()).await;
    let mcp = berth_agent::mcp::doctor(
        report.mcp_servers.as_deref(),
        Duration::from_secs(mcp_timeout),
    )
    .await;
    report.findings.extend(mcp);
    let errors = report.errors();
    if json {
        render::json(&Json {
            home: &report.home,
            ok: errors == 0,
            errors,
            warnings: report.count(Status::Warn),
            findings: &report.findings,
        })?;
    } else {
        let width = report
            .findings
            .iter()
            .map(|f| f.check.chars().count())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for f in &report.findings {
            out.push_str(&format!(
                "{:<7} {:width$}  {}\n",
                f.status.as_str(),
                f.check,
                f.message
            ));
            if let Some(fix) = &f.fix {
                out.push_str(&format!("{:<7} {:width$}  → {fix}\n", "", ""));
            }
        }
        render::raw(&out)?;
    }
    if errors > 0 {
        anyhow::bail!("{errors} problem(s) found; each error above says what to do");
    }
    Ok(())
}

/// `berth doctor --fix`: installs berth's AppArmor profile where AppArmor's policy is what
/// refuses user namespaces, through sudo, saying first what it runs; `dry_run` only says it.
pub fn fix(dry_run: bool) -> anyhow::Result<()> {
    let support = berth_ops::doctor::sandbox_support();
    let Some(fix) = support.apparmor_fix() else {
        let why = match support.userns_fix() {
            Some(fix) => format!("user namespaces are refused, and berth cannot fix that itself: {fix}"),
            None if support.namespaces.is_err() => "user namespaces are refused for a reason berth cannot fix itself (see `berth doctor`)".to_owned(),
            None => "nothing to fix: this kernel lets berth make user namespaces".to_owned(),
        };
        render::raw(&format!("{why}\n"))?;
        return Ok(());
    };
    let mut out = format!(
        "AppArmor's policy refuses user namespaces to berth. This profile, at {}, lets berth's binary make them:\n\n{}\n",
        fix.path, fix.profile
    );
    for command in &fix.commands {
        out.push_str(&format!("  {command}\n"));
    }
    render::raw(&out)?;
    if dry_run {
        render::raw("(--dry-run: nothing was run)\n")?;
        return Ok(());
    }
    let mut tee = std::process::Command::new("sudo")
        .args(["tee", &fix.path])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .context("cannot run sudo")?;
    std::io::Write::write_all(
        tee.stdin.as_mut().context("sudo's input")?,
        fix.profile.as_bytes(),
    )?;
    drop(tee.stdin.take());
    if !tee.wait()?.success() {
        anyhow::bail!("`sudo tee {}` failed; nothing else was run", fix.path);
    }
    let loaded = std::process::Command::new("sudo")
        .args(["apparmor_parser", "-r", &fix.path])
        .status()
        .context("cannot run sudo")?;
    if !loaded.success() {
        anyhow::bail!(
            "`sudo apparmor_parser -r {}` failed: the profile is written but not loaded",
            fix.path
        );
    }
    render::raw("done: run `berth doctor` again to see the sandbox in force\n")?;
    Ok(())
}
