//! `berth doctor`: the checks are berth-ops' (`doctor::diagnose`) and berth-agent's (the MCP
//! servers); this renders the findings and sets the exit status.

use std::path::Path;
use std::time::Duration;

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
