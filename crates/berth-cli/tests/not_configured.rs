//! A newcomer without an API key, or with an agent command that is not installed: every
//! command that needs a model checks before it makes anything, and says so the same way (exit
//! status 7, the variable to set). Nothing is left behind: no `default` workspace, no
//! session, no run record, no worktree or branch, no check run on an untouched tree.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::Path;

use berth_testkit::{git, run};
use support::Home;
use support::runs::project;

/// What a fresh home and a repository hold, to compare before and after a refused command.
fn made(home: &Home, repo: Option<&Path>) -> String {
    let mut seen = vec![
        format!(
            "workspaces: {}",
            home.json(&["workspace", "list", "--json"])
        ),
        format!("sessions: {}", home.json(&["session", "list", "--json"])),
        format!("runs: {}", home.json(&["run", "list", "--json"])),
    ];
    if let Some(repo) = repo {
        seen.push(format!("branches: {}", git(repo, &["branch", "--list"])));
        seen.push(format!("worktrees: {}", git(repo, &["worktree", "list"])));
    }
    seen.join("\n")
}

#[test]
fn chat_p_without_a_key_makes_nothing_and_names_the_variable() {
    let home = Home::new();
    let before = made(&home, None);
    let r = home.run(&["chat", "-p", "hello"]);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(r.stderr.contains("ANTHROPIC_API_KEY"), "{}", r.stderr);
    assert_eq!(made(&home, None), before, "chat -p left something behind");
    assert!(
        home.json(&["workspace", "list", "--json"])
            .as_array()
            .unwrap()
            .is_empty(),
        "no default workspace is made"
    );
}

#[test]
fn chat_p_with_a_model_whose_provider_has_no_key_is_not_configured_too() {
    let home = Home::new();
    let mut cmd = home.cmd(&["chat", "-p", "hello", "--model", "openai/gpt-test"]);
    cmd.env("ANTHROPIC_API_KEY", "set-but-not-the-one-needed");
    let r = run(cmd);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(r.stderr.contains("OPENAI_API_KEY"), "{}", r.stderr);
    assert_eq!(
        made(&home, None).matches("[]").count(),
        3,
        "{}",
        made(&home, None)
    );
}

#[test]
fn run_without_a_key_makes_no_worktree_branch_record_or_check() {
    let home = Home::new();
    let (_tmp, repo) = project();
    let before = made(&home, Some(&repo));
    let marker = repo.join("check-ran");
    let check = format!("touch {}", marker.display());
    let mut cmd = home.cmd(&["run", "Fix it", "--agents", "2", "--check", &check]);
    cmd.current_dir(&repo);
    let r = run(cmd);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(r.stderr.contains("ANTHROPIC_API_KEY"), "{}", r.stderr);
    assert_eq!(
        made(&home, Some(&repo)),
        before,
        "run left something behind"
    );
    assert!(
        !marker.exists(),
        "the check ran for a run that could not start"
    );
}

#[test]
fn a_detached_run_that_cannot_start_fails_before_it_detaches() {
    let home = Home::new();
    let (_tmp, repo) = project();
    let before = made(&home, Some(&repo));
    let mut cmd = home.cmd(&["run", "Fix it", "--detach", "--json"]);
    cmd.current_dir(&repo);
    let r = run(cmd);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert_eq!(r.stdout, "", "no run id is printed");
    assert_eq!(made(&home, Some(&repo)), before);
}

#[test]
fn an_agent_command_that_is_not_installed_is_named_before_anything_is_made() {
    let home = Home::new();
    let (_tmp, repo) = project();
    let before = made(&home, Some(&repo));
    let mut cmd = home.cmd(&[
        "run",
        "Fix it",
        "--agent-cmd",
        "no-such-acp-agent-4b1e --stdio",
    ]);
    cmd.current_dir(&repo);
    let r = run(cmd);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(
        r.stderr.contains("no-such-acp-agent-4b1e") && r.stderr.contains("PATH"),
        "{}",
        r.stderr
    );
    assert_eq!(made(&home, Some(&repo)), before);
}

#[test]
fn an_agent_the_sandbox_would_hide_is_named_before_anything_is_made() {
    let home = Home::new();
    let (_tmp, repo) = project();
    // A program in a folder of [sandbox] deny_read: found now, but a confined agent process
    // would not find it (it used to end with exit status 127).
    let outside = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    let agent = outside.path().join("my-agent");
    std::fs::write(&agent, "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[sandbox]\ndeny_read = [{:?}]\n",
            outside.path().display().to_string()
        ),
    )
    .unwrap();
    let before = made(&home, Some(&repo));
    let mut cmd = home.cmd(&["run", "Fix it", "--agent-cmd", agent.to_str().unwrap()]);
    cmd.current_dir(&repo);
    let r = run(cmd);
    assert_eq!(r.code, 7, "{}", r.stderr);
    assert!(
        r.stderr.contains("which the sandbox hides")
            && r.stderr.contains(&outside.path().display().to_string()),
        "{}",
        r.stderr
    );
    assert_eq!(made(&home, Some(&repo)), before);
    // In /tmp alone nothing hides it: a confined agent's program and its installation are
    // bound back into its private /tmp, so the check lets the run start.
    std::fs::write(home.path().join("config.toml"), "").unwrap();
    let mut cmd = home.cmd(&[
        "run",
        "Fix it",
        "--agent-cmd",
        agent.to_str().unwrap(),
        "--json",
    ]);
    cmd.current_dir(&repo);
    let r = run(cmd);
    assert!(!r.stderr.contains("sandbox hides"), "{}", r.stderr);
    assert!(
        r.stdout.contains("\"started\""),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn a_repo_that_is_no_repository_is_refused_before_the_run_is_recorded() {
    let home = Home::new();
    let plain = tempfile::tempdir().unwrap();
    let mut cmd = home.cmd(&["run", "Fix it", "--repo", plain.path().to_str().unwrap()]);
    cmd.env("ANTHROPIC_API_KEY", "a-key");
    let r = run(cmd);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no git repository"), "{}", r.stderr);
    assert_eq!(
        made(&home, None).matches("[]").count(),
        3,
        "{}",
        made(&home, None)
    );
}
