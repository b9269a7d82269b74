//! Saying which rule stopped a confined command, from what it printed.
//!
//! The kernel tells a refused process only an errno ("Permission denied", "Read-only file
//! system", "Network is unreachable"); the agent needs to know it met the sandbox, which rule,
//! and how a person opens it. The paths a failing line names are checked against the rules
//! the process ran under, so the note names the rule that matches, never a guess.

use std::path::{Path, PathBuf};

use crate::Confinement;
use crate::plan::Net;

/// How a note of [`explain`] starts. It tells the agent (and a person reading the output) that
/// the sandbox refused something; it is never a signal to act on, since a command can print
/// the same line: the offer to run a command once more without the sandbox comes from the
/// note the caller of [`explain`] got, never from a search of the output.
pub const NOTE_MARK: &str = "[berth sandbox]";

/// Errors the kernel gives a confined process where a rule refused it.
const REFUSALS: [&str; 4] = [
    "Permission denied",
    "Read-only file system",
    "Operation not permitted",
    "EACCES",
];

/// What a process without network prints.
const NO_NETWORK: [&str; 7] = [
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Could not resolve host",
    "Name or service not known",
    "getaddrinfo",
    "ENETUNREACH",
    "EAI_AGAIN",
];

/// A note for the agent on the rules that refused what `output` shows, if any did.
pub fn explain(output: &str, confinement: &Confinement) -> Option<String> {
    let rules = confinement.rules();
    let mut notes: Vec<String> = Vec::new();
    let mut push = |note: String| {
        if !notes.contains(&note) {
            notes.push(note);
        }
    };
    for line in output.lines() {
        // A hidden path reads as missing (an empty folder stands in its place): said only for
        // paths the sandbox does hide, never for a file that is simply not there.
        // dash says "Directory nonexistent" where bash says "No such file or directory".
        if line.contains("No such file or directory")
            || line.contains("ENOENT")
            || line.contains("Directory nonexistent")
        {
            for path in paths_in(line) {
                if let Some(note) = hidden_note(&path, rules) {
                    push(note);
                }
            }
        }
        if REFUSALS.iter().any(|r| line.contains(r)) {
            for path in paths_in(line) {
                push(path_note(&path, rules));
            }
            if line.contains("kill") || line.contains("signal") {
                push("signals to processes outside the sandbox are refused".into());
            }
        }
        if let Net::Proxied { allow, .. } = &rules.net
            && (NO_NETWORK.iter().any(|n| line.contains(n))
                || line.contains("Connection refused")
                || line.contains("403 Forbidden"))
        {
            push(format!(
                "the only way out is berth's proxy (HTTPS_PROXY), which lets through {} by name ([sandbox] allow_hosts adds hosts, network = \"full\" opens everything)",
                if allow.is_empty() {
                    "nothing".to_owned()
                } else {
                    allow.join(", ")
                }
            ));
        }
        if rules.net == Net::Isolated
            && (NO_NETWORK.iter().any(|n| line.contains(n))
                || (line.contains("Connection refused") && line.contains("127.0.0.1")))
        {
            push("commands have no way out: they run in their workspace's network namespace, where only the workspace's own servers and the host's loopback services `allow_hosts` names are ([sandbox] allow_hosts = [\"127.0.0.1:PORT\"] brings one in; network = \"proxy\" with allow_hosts reaches hosts by name, network = \"full\" everything)".into());
        }
    }
    if notes.is_empty() {
        return None;
    }
    tracing::debug!(notes = %notes.join("; "), "the sandbox refused something a command tried");
    Some(format!(
        "{NOTE_MARK} {}. A person can change this in berth's config ([sandbox], see docs/sandbox.md); work inside the workspace folder meanwhile.",
        notes.join("; ")
    ))
}

/// What the rules say of `path`.
/// Why `path` is hidden from the process, if the sandbox hides it.
fn hidden_note(path: &Path, rules: &crate::plan::Rules) -> Option<String> {
    let shown = path.display();
    if let Some(d) = rules.deny.iter().find(|d| path.starts_with(d)) {
        return Some(format!(
            "{shown} is hidden: {} is on the sandbox's deny list ([sandbox] deny_read)",
            d.display()
        ));
    }
    let kept = |p: &Path| {
        p.starts_with(&rules.work)
            || rules.writable.iter().any(|w| p.starts_with(w))
            || rules.readable.iter().any(|r| p.starts_with(r))
    };
    if path.starts_with(&rules.berth_home) && !kept(path) {
        return Some(format!(
            "{shown} is hidden: berth's home is out of reach but for this workspace's own folder"
        ));
    }
    if let Some(home) = &rules.home
        && path.starts_with(home)
        && !kept(path)
    {
        return Some(format!(
            "{shown} is hidden: $HOME ({}) is an empty folder to a confined process but for toolchains' folders ([sandbox] readable adds paths)",
            home.display()
        ));
    }
    let system = crate::plan::view::SYSTEM
        .iter()
        .chain(&["/tmp", "/var/tmp", "/dev", "/proc"])
        .any(|s| path.starts_with(s));
    if path.is_absolute() && !kept(path) && !system {
        return Some(format!(
            "{shown} is not in the sandbox's view: a confined process sees only the system's folders, toolchains, its workspace and [sandbox] readable, and writes only its workspace, /tmp and [sandbox] writable"
        ));
    }
    None
}

fn path_note(path: &Path, rules: &crate::plan::Rules) -> String {
    let shown = path.display();
    if path.starts_with(&rules.work) && path.components().any(|c| c.as_os_str() == ".git") {
        return format!(
            "{shown} is read-only: nothing in a workspace may change git's pointer, config or hooks, and agents do not commit (berth commits the work when it is merged)"
        );
    }
    if let Some(note) = hidden_note(path, rules) {
        return note;
    }
    let writable = std::iter::once(&rules.work)
        .chain(&rules.writable)
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "writing {shown} is refused: a confined process may write only in {writable} and /tmp ([sandbox] writable adds paths)"
    )
}

/// The absolute paths a line names (quoted or not).
fn paths_in(line: &str) -> Vec<PathBuf> {
    line.split(|c: char| c.is_whitespace() || "'\"`‘’“”,;()[]".contains(c))
        .map(|w| w.trim_end_matches(':'))
        .filter(|w| w.starts_with('/') && w.len() > 1)
        .map(PathBuf::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_found_however_quoted() {
        assert_eq!(
            paths_in("touch: cannot touch '/etc/x': Permission denied"),
            [PathBuf::from("/etc/x")]
        );
        assert_eq!(
            paths_in("sh: 1: cannot create /outside/f.txt: Permission denied"),
            [PathBuf::from("/outside/f.txt")]
        );
        assert_eq!(
            paths_in("PermissionError: [Errno 13] Permission denied: '/root/.ssh/id'"),
            [PathBuf::from("/root/.ssh/id")]
        );
    }
}
