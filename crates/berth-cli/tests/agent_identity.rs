//! berth is known by its file, not its name: an `--agent-cmd` whose program is called `berth`
//! but is not the running berth binary is confined like any other agent process.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use berth_testkit::provider_server::ProviderServer;
use berth_testkit::run;
use support::Home;
use support::runs::{berth_run, events, project};

/// A script named `berth`, first on `PATH`, run as `--agent-cmd "berth acp"`: it may write in
/// its worktree (so it is seen to have run) but not outside it. berth used to take any program
/// of that name for itself, and leave it unconfined.
#[test]
fn a_program_named_berth_that_is_not_berth_is_confined() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // Outside /tmp and /var/tmp (where a confined process has private tmpfs) and outside the
    // repository, so that the target of its write is a real one.
    let scratch = berth_testkit::outside_dir();
    let bin = scratch.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let outside = scratch.path().join("outside.txt");
    let script = bin.join("berth");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho ran > ran.txt\n{{ echo escaped > '{}'; }} 2> refused.txt\necho $? >> ran.txt\n",
            outside.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let mut cmd = berth_run(
        &home,
        &server,
        &root,
        &["Do it", "--agent-cmd", "berth acp", "--json"],
    );
    cmd.env("PATH", &path);
    let r = run(cmd);
    let events = events(&r.stdout);
    let started = events
        .iter()
        .find(|e| e["event"] == "started")
        .unwrap_or_else(|| panic!("the run did not start: {}\n{}", r.stderr, r.stdout));
    let worktree = PathBuf::from(started["worktree"].as_str().unwrap());
    let ran = std::fs::read_to_string(worktree.join("ran.txt"))
        .unwrap_or_else(|e| panic!("the script did not run ({e}): {}", r.stderr));
    assert!(ran.starts_with("ran\n"), "{ran}");
    assert!(
        !outside.exists(),
        "the fake berth wrote outside its worktree: it ran unconfined"
    );
    let refused = std::fs::read_to_string(worktree.join("refused.txt")).unwrap();
    assert!(
        refused.contains("Permission denied") || refused.contains("Read-only"),
        "{refused}"
    );
    assert_ne!(ran.lines().nth(1), Some("0"), "{ran}");
    // The run records the agent as failed (the script is no ACP agent), not as berth.
    let summary = events.last().unwrap();
    assert_eq!(summary["agents"][0]["state"], "failed", "{summary}");
}
