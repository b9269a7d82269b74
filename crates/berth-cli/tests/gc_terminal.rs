//! `berth workspace gc` in a real terminal (tmux): work that appears in a worktree while the
//! question is on the screen is not lost when the user answers yes. The workspace is kept, and
//! the screen says so and why.
//!
//! tmux is required: without it these tests fail (test.sh installs it), they never skip
//! (`support/terminal.rs`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::{commit, git, run};
use support::Home;
use support::terminal::Terminal;

/// A repository with one commit on `main`, in its own temp dir.
struct Repo {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("project");
        std::fs::create_dir(&root).unwrap();
        git(&root, &["init", "--quiet", "-b", "main"]);
        commit(&root, "README.md", "hello\n");
        let root = root.canonicalize().unwrap();
        Repo { _tmp: tmp, root }
    }
}

/// `berth ARGS` run inside `dir`, insisting on success; returns stdout.
fn ok_in(home: &Home, dir: &Path, args: &[&str]) -> String {
    let mut cmd = home.cmd(args);
    cmd.current_dir(dir);
    let r = run(cmd);
    assert_eq!(r.code, 0, "berth {args:?} failed: {}", r.stderr);
    r.stdout
}

/// Whether `screen` has `word` as a whole word, ignoring case.
fn has_word(screen: &str, word: &str) -> bool {
    screen
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w == word)
}

/// A git workspace `old-one` made from `repo`, idle enough for `gc --max-age 0`; returns its
/// worktree folder.
fn old_workspace(home: &Home, repo: &Repo) -> PathBuf {
    let id = ok_in(home, &repo.root, &["workspace", "create", "old-one"]);
    assert!(!id.trim().is_empty(), "workspace create printed no id");
    let worktree = PathBuf::from(home.ok(&["workspace", "path", "old-one"]).trim());
    assert!(worktree.join("README.md").is_file(), "{worktree:?}");
    worktree
}

/// Starts `berth workspace gc --max-age 0` in a terminal in `repo` and waits for its question.
fn gc_asking(home: &Home, repo: &Repo) -> Terminal {
    let term = Terminal::start(home, &repo.root, &["workspace", "gc", "--max-age", "0"]);
    term.wait_for("the question `Delete 1 workspace(s)`", |s| {
        s.contains("Delete 1 workspace(s)")
    });
    term
}

#[test]
fn gc_keeps_a_worktree_that_got_uncommitted_work_while_asking() {
    let home = Home::new();
    let repo = Repo::new();
    let worktree = old_workspace(&home, &repo);
    let term = gc_asking(&home, &repo);

    // An agent writes into the worktree while the question is on the screen.
    std::fs::write(worktree.join("agent-work.txt"), "the agent's work\n").unwrap();
    term.send_keys(&["y", "Enter"]);
    let (code, screen) = term.wait_exit();

    assert_eq!(
        std::fs::read_to_string(worktree.join("agent-work.txt")).ok(),
        Some("the agent's work\n".to_owned()),
        "the new file was lost (exit {code}); the screen:\n{screen}"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("README.md")).unwrap(),
        "hello\n"
    );
    assert_kept(&home, &screen, code, "uncommitted changes", |s| {
        s.contains("uncommitted")
    });
}

#[test]
fn gc_keeps_a_branch_that_got_a_commit_while_asking() {
    let home = Home::new();
    let repo = Repo::new();
    let worktree = old_workspace(&home, &repo);
    let shown = home.json(&["workspace", "show", "old-one", "--json"]);
    let branch = shown["git"]["branch"]
        .as_str()
        .unwrap_or_else(|| panic!("no git branch in {shown}"))
        .to_owned();
    let term = gc_asking(&home, &repo);

    // An agent commits on the workspace's branch while the question is on the screen.
    git(
        &worktree,
        &["commit", "--quiet", "--allow-empty", "-m", "more"],
    );
    let head = git(&worktree, &["rev-parse", "HEAD"]).trim().to_owned();
    term.send_keys(&["y", "Enter"]);
    let (code, screen) = term.wait_exit();

    assert!(
        worktree.join("README.md").is_file(),
        "the worktree was removed (exit {code}); the screen:\n{screen}"
    );
    let tip = git(
        &repo.root,
        &["branch", "--list", &branch, "--format=%(objectname)"],
    );
    assert_eq!(
        tip.trim(),
        head,
        "branch {branch} lost its commit (exit {code}); the screen:\n{screen}"
    );
    // "commit", "commits" or "commit(s)"; "uncommitted" does not count.
    assert_kept(&home, &screen, code, "a commit", |s| {
        s.split(|c: char| !c.is_alphanumeric())
            .any(|w| w.starts_with("commit"))
    });
}

/// The workspace's record is still there, and the screen says it was kept and why (`why`
/// is given the screen in lower case).
fn assert_kept(home: &Home, screen: &str, code: i32, reason: &str, why: impl Fn(&str) -> bool) {
    let r = home.run(&["workspace", "show", "old-one"]);
    assert_eq!(
        r.code, 0,
        "the record is gone: {}; the screen:\n{screen}",
        r.stderr
    );
    assert!(
        has_word(screen, "kept"),
        "the screen does not say the workspace was kept (exit {code}):\n{screen}"
    );
    assert!(
        why(&screen.to_lowercase()),
        "the screen does not say why ({reason}) (exit {code}):\n{screen}"
    );
}
