//! Shell completions. `berth completions SHELL` prints the script that registers them with the
//! shell; the shell then asks berth itself for each completion (`COMPLETE=SHELL berth …`, clap's
//! dynamic completion), so subcommands and flags come from the same definitions as `--help`,
//! and workspace names and session ids from the home as it is at that moment.

use std::ffi::OsStr;

use clap_complete::CompletionCandidate;
use clap_complete::env::{Bash, Elvish, EnvCompleter, Fish, Powershell, Zsh};

/// Writes the registration script for `shell` to standard output.
pub fn print_registration(shell: crate::cli::Shell) -> std::io::Result<()> {
    let completer: &dyn EnvCompleter = match shell {
        crate::cli::Shell::Bash => &Bash,
        crate::cli::Shell::Zsh => &Zsh,
        crate::cli::Shell::Fish => &Fish,
        crate::cli::Shell::Powershell => &Powershell,
        crate::cli::Shell::Elvish => &Elvish,
    };
    let mut out = std::io::stdout().lock();
    completer.write_registration("COMPLETE", "berth", "berth", "berth", &mut out)
}

/// Workspace names (and the ids of unnamed ones) that start with what is typed.
pub fn workspaces(typed: &OsStr) -> Vec<CompletionCandidate> {
    let typed = typed.to_string_lossy();
    let found = in_home(async |ops| {
        let views = ops.list_workspaces().await.ok()?;
        Some(
            views
                .into_iter()
                .map(|w| w.name.unwrap_or_else(|| w.id.to_string()))
                .collect(),
        )
    });
    candidates(found, &typed)
}

/// Session ids that start with what is typed.
pub fn sessions(typed: &OsStr) -> Vec<CompletionCandidate> {
    let typed = typed.to_string_lossy();
    let found = in_home(async |ops| {
        let ids = ops.session_ids().await.ok()?;
        Some(ids.into_iter().map(|id| id.to_string()).collect())
    });
    candidates(found, &typed)
}

fn candidates(found: Vec<String>, typed: &str) -> Vec<CompletionCandidate> {
    let mut names: Vec<String> = found.into_iter().filter(|n| n.starts_with(typed)).collect();
    names.sort();
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// What `list` finds in the home the command line names (`--home`, `BERTH_HOME`, else the
/// default); nothing when the home cannot be read: a completion never fails loudly.
fn in_home(list: impl AsyncFnOnce(&berth_ops::Ops) -> Option<Vec<String>>) -> Vec<String> {
    let Some(home) = crate::commands::home(home_from_args()) else {
        return Vec::new();
    };
    let Ok(ops) = berth_ops::open(&home, &berth_ops::environment()) else {
        return Vec::new();
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    runtime.block_on(list(&ops)).unwrap_or_default()
}

/// `--home PATH` (or `--home=PATH`) in the words being completed.
fn home_from_args() -> Option<std::path::PathBuf> {
    let words: Vec<String> = std::env::args().collect();
    words.iter().enumerate().find_map(|(i, w)| {
        if w == "--home" {
            words.get(i + 1).map(Into::into)
        } else {
            w.strip_prefix("--home=").map(Into::into)
        }
    })
}
