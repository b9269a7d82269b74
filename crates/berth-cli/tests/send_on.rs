//! `berth workspace push` and `berth workspace pr`: the work committed with a message naming
//! the session, the branch pushed (to a bare repository standing in for GitHub: the remote's
//! `url` is GitHub's, its `pushurl` the bare one), and the pull request opened and then
//! updated by a fake `gh` on `PATH` that records its arguments; without one, the compare URL.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::{commit, git, run};
use support::Home;

struct World {
    home: Home,
    _dirs: tempfile::TempDir,
    bare: PathBuf,
    worktree: PathBuf,
    session: String,
    /// A folder for `PATH`: `git` alone, and the fake `gh` when a test puts it there.
    bin: PathBuf,
}

fn world() -> World {
    let home = Home::new();
    let dirs = tempfile::tempdir().unwrap();
    let repo = dirs.path().join("app");
    let bare = dirs.path().join("remote.git");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    commit(&repo, "README.md", "hello\n");
    git(
        dirs.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(
        &repo,
        &["remote", "add", "origin", "https://github.com/acme/app.git"],
    );
    git(
        &repo,
        &["config", "remote.origin.pushurl", bare.to_str().unwrap()],
    );
    let mut create = home.cmd(&["workspace", "create", "login-fix", "--json"]);
    create.current_dir(&repo);
    let made = run(create);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let made: serde_json::Value = serde_json::from_str(&made.stdout).unwrap();
    let worktree = PathBuf::from(made["git"]["worktree"].as_str().unwrap());
    let session = home
        .ok(&[
            "session",
            "new",
            "-w",
            "login-fix",
            "-t",
            "Fix the login bug",
        ])
        .trim()
        .to_owned();
    home.ok(&[
        "session",
        "append",
        &session,
        "Fix the login bug in auth.rs",
    ]);
    home.ok(&[
        "session",
        "append",
        &session,
        "-r",
        "assistant",
        "I fixed the null check in auth.rs.",
    ]);
    std::fs::write(worktree.join("auth.rs"), "fn login() {}\n").unwrap();
    let bin = dirs.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let real_git = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    std::os::unix::fs::symlink(real_git.trim(), bin.join("git")).unwrap();
    World {
        home,
        _dirs: dirs,
        bare,
        worktree,
        session,
        bin,
    }
}

/// `berth ARGS` with `PATH` holding only `w.bin`.
fn berth(w: &World, args: &[&str]) -> berth_testkit::Run {
    let mut cmd = w.home.cmd(args);
    cmd.env("PATH", &w.bin);
    run(cmd)
}

/// A fake `gh`: signed in; `pr view` finds a request once `pr create` has made one; every
/// call's arguments recorded in `record`, arguments ended by NUL, calls by RS (a body has
/// lines).
fn fake_gh(bin: &Path, record: &Path) {
    let script = format!(
        r#"#!/bin/sh
printf '%s\0' "$@" >> '{record}'
printf '\036' >> '{record}'
case "$1 $2" in
  "auth status") exit 0 ;;
  "pr view") [ -f '{record}.made' ] && echo https://github.com/acme/app/pull/7 && exit 0; exit 1 ;;
  "pr create") : > '{record}.made'; echo https://github.com/acme/app/pull/7 ;;
  "pr edit") echo https://github.com/acme/app/pull/7 ;;
esac
"#,
        record = record.display()
    );
    let path = bin.join("gh");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn calls(record: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(record)
        .unwrap()
        .split('\u{1e}')
        .filter(|call| !call.is_empty())
        .map(|call| {
            call.split('\0')
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

fn arg_after<'a>(call: &'a [String], flag: &str) -> &'a str {
    let at = call.iter().position(|a| a == flag).unwrap();
    &call[at + 1]
}

#[test]
fn push_commits_with_the_sessions_name_and_pushes_the_branch() {
    let w = world();
    let r = berth(&w, &["workspace", "push", "login-fix", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let pushed: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(pushed["branch"], "berth/login-fix");
    assert_eq!(pushed["base"], "main");
    assert!(pushed["commit"].is_string(), "{pushed:#}");
    assert_eq!(
        pushed["compare_url"],
        "https://github.com/acme/app/compare/main...berth/login-fix?expand=1"
    );
    let subject = git(&w.worktree, &["log", "-1", "--format=%s"]);
    assert_eq!(
        subject.trim(),
        format!("Fix the login bug (berth session {})", w.session)
    );
    // The remote has the branch, and the branch the agent's file.
    let shown = git(&w.bare, &["show", "berth/login-fix:auth.rs"]);
    assert_eq!(shown, "fn login() {}\n");
    // Nothing new to commit: pushed again, no commit made.
    let again = berth(&w, &["workspace", "push", "login-fix", "--json"]);
    let again: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
    assert!(again["commit"].is_null(), "{again:#}");
    // A remote that is not there is named.
    let r = berth(
        &w,
        &["workspace", "push", "login-fix", "--remote", "upstream"],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("no remote \"upstream\""), "{}", r.stderr);
}

#[test]
fn pr_opens_then_updates_with_gh_saying_the_task_and_the_summary() {
    let w = world();
    let record = w.bin.join("gh-calls");
    fake_gh(&w.bin, &record);
    let r = berth(&w, &["workspace", "pr", "login-fix", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(out["pull_request"]["outcome"], "opened", "{out:#}");
    assert_eq!(out["pull_request"]["tool"], "gh");
    assert_eq!(
        out["pull_request"]["url"],
        "https://github.com/acme/app/pull/7"
    );
    let made = calls(&record);
    let create = made
        .iter()
        .find(|c| c[..2] == ["pr", "create"])
        .expect("gh pr create was called");
    assert_eq!(arg_after(create, "--head"), "berth/login-fix");
    assert_eq!(arg_after(create, "--base"), "main");
    assert_eq!(arg_after(create, "--title"), "Fix the login bug");
    let body = arg_after(create, "--body");
    assert!(
        body.contains("## Task\n\nFix the login bug in auth.rs"),
        "{body}"
    );
    assert!(
        body.contains("## Summary\n\nI fixed the null check in auth.rs."),
        "{body}"
    );
    assert!(body.contains(&w.session), "{body}");
    // The branch was pushed before the request was made.
    git(&w.bare, &["rev-parse", "--verify", "berth/login-fix"]);

    // Again, with a title: the request the branch has is updated, not a second one made.
    let r = berth(
        &w,
        &[
            "workspace",
            "pr",
            "login-fix",
            "--title",
            "Login: null check",
            "--json",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(out["pull_request"]["outcome"], "updated", "{out:#}");
    let all = calls(&record);
    let edit = all.iter().find(|c| c[..2] == ["pr", "edit"]).unwrap();
    assert_eq!(edit[2], "berth/login-fix");
    assert_eq!(arg_after(edit, "--title"), "Login: null check");
    assert_eq!(all.iter().filter(|c| c[..2] == ["pr", "create"]).count(), 1);
}

#[test]
fn without_gh_pr_pushes_and_prints_the_compare_url() {
    let w = world();
    let r = berth(&w, &["workspace", "pr", "login-fix"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout.trim(),
        "open it at https://github.com/acme/app/compare/main...berth/login-fix?expand=1"
    );
    assert!(r.stderr.contains("neither gh nor glab"), "{}", r.stderr);
    git(&w.bare, &["rev-parse", "--verify", "berth/login-fix"]);
}
