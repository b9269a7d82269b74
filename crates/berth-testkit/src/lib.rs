//! berth-testkit: the helpers shared by berth's tests. It is a dev-only crate: test and bench
//! targets take it as a `[dev-dependencies]` entry, and it is never a dependency of a shipped
//! crate (it is not published).
//!
//! - [`git`] and [`commit`] drive the real git binary on repositories made in temp dirs,
//!   isolated from the environment the tests run in.
//! - [`run`], [`Run`] and [`wait_ok`] run a process and collect what it printed.
//! - [`child`], [`child_role`], [`Jitter`] and [`kill_after_first_ack`] are the multi-process
//!   harness: a test re-runs its own test binary as child processes that play a role (race,
//!   append, get SIGKILLed at a random moment).
//! - [`snapshot`] captures a folder's files for "nothing changed" assertions.
//! - [`outside_dir`] is a folder a confined process has no private copy of, to try to write
//!   "outside the sandbox" to.
//! - [`postgres`] names the throwaway Postgres server `./test.sh` starts, and makes a fresh
//!   database on it per test.
//! - [`provider_server`] is the local stand-in for the LLM providers that the agent tests talk
//!   to: a real HTTP/1.1 server on 127.0.0.1 that records each request and answers from a
//!   script, with builders for the Anthropic, OpenAI and Gemini streaming wire formats.

#![forbid(unsafe_code)]
// Test support: a helper that cannot do its job panics, and that is the test failing.
#![allow(clippy::unwrap_used)]

mod git;
pub mod loopback;
mod planted;
pub mod postgres;
mod process;
pub mod provider_server;

use std::path::{Path, PathBuf};

pub use git::{bare_remote, commit, git};
pub use planted::{dirty, plant_nested_repository};
pub use process::{
    CHILD_ROLE, Jitter, Run, child, child_role, kill_after_first_ack, processes_with, run, wait_ok,
};

/// A fresh folder outside `/tmp` and `/var/tmp`, both of which a confined process has a
/// private copy of, wherever the checkout is (a clone in `/tmp`): where a test tries to write
/// "outside the sandbox". `/var/lib/berth-tests` (mode 1777, so the unprivileged user the
/// sandbox tests also run as can use it) where this user may make it, as root; else
/// `~/.cache/berth-tests`.
pub fn outside_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let system = Path::new("/var/lib/berth-tests");
    let base = if std::fs::create_dir_all(system).is_ok()
        && std::fs::set_permissions(system, std::fs::Permissions::from_mode(0o1777)).is_ok()
    {
        system.to_owned()
    } else {
        let home = std::env::var_os("HOME").expect("HOME, for ~/.cache/berth-tests");
        let base = PathBuf::from(home).join(".cache/berth-tests");
        std::fs::create_dir_all(&base).unwrap();
        base
    };
    tempfile::Builder::new()
        .prefix("outside-")
        .tempdir_in(base)
        .unwrap()
}

/// Every file under `root` with its bytes, sorted by path, for "nothing changed" assertions.
/// A symlink is recorded as the bytes `<symlink>` and not followed.
pub fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let ty = entry.file_type().unwrap();
            if ty.is_dir() {
                stack.push(entry.path());
            } else if ty.is_file() {
                out.push((entry.path(), std::fs::read(entry.path()).unwrap()));
            } else {
                out.push((entry.path(), b"<symlink>".to_vec()));
            }
        }
    }
    out.sort();
    out
}
