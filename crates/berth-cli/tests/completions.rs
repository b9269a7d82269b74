//! Shell completions in a real bash (tmux): `berth completions bash` is valid bash, and,
//! sourced, completes a subcommand from the definitions and a workspace name from the home.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::process::Command;

use support::Home;
use support::terminal::{Terminal, last_line};

#[test]
fn the_bash_script_parses_and_completes_commands_and_workspace_names() {
    let home = Home::new();
    home.ok(&["workspace", "create", "feature-x", "--plain"]);
    let script = home.ok(&["completions", "bash"]);
    let checked = Command::new("bash")
        .args(["-n", "-c", &script])
        .status()
        .unwrap();
    assert!(checked.success(), "bash -n refused the script:\n{script}");

    let t = Terminal::bash(&home, home.path());
    t.type_text("source <(berth completions bash)");
    t.send_keys(&["Enter"]);
    t.type_text("berth workspace sh");
    t.send_keys(&["Tab"]);
    t.wait_for("`sh` completed to `show`", |s| {
        last_line(s).ends_with("berth workspace show")
    });
    t.type_text("fea");
    t.send_keys(&["Tab"]);
    t.wait_for("the workspace's name", |s| {
        last_line(s).ends_with("berth workspace show feature-x")
    });
    // And what it completed runs.
    t.send_keys(&["Enter"]);
    t.wait_for("the workspace shown", |s| {
        s.lines()
            .any(|l| l.starts_with("name:") && l.ends_with("feature-x"))
    });
}

#[test]
fn every_shell_gets_a_script() {
    let home = Home::new();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let script = home.ok(&["completions", shell]);
        assert!(script.contains("COMPLETE"), "{shell}: {script}");
    }
    let bad = home.run(&["completions", "tcsh"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}
