//! Progress on a terminal (tmux): a 20,000-file checkout shows a bar on standard error while
//! it runs, cleared when it is done; with `--json`, or with standard error a pipe, nothing of
//! it is written. Every byte the window got is logged (`pipe-pane`), so a bar drawn and
//! cleared between two looks at the screen is still seen.
//!
//! tmux is required: without it these tests fail (test.sh installs it), they never skip.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::Path;

use berth_testkit::git;
use support::Home;
use support::terminal::Terminal;

const FILES: usize = 20_000;

/// A repository whose one commit holds 20,000 files in 200 folders.
fn big_repo(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("big");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "-b", "main"]);
    for d in 0..200 {
        let folder = root.join(format!("d{d:03}"));
        std::fs::create_dir(&folder).unwrap();
        for f in 0..FILES / 200 {
            std::fs::write(folder.join(format!("f{f:03}.txt")), format!("{d} {f}\n")).unwrap();
        }
    }
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "--quiet", "-m", "20,000 files"]);
    root.canonicalize().unwrap()
}

/// Types `line` and waits for its `EXIT=` mark; the log's new bytes.
fn run_line(t: &Terminal, log: &Path, line: &str, mark: &str) -> String {
    let before = std::fs::read(log).map(|b| b.len()).unwrap_or(0);
    t.type_text(&format!("{line}; echo {mark}=$?"));
    t.send_keys(&["Enter"]);
    let screen = t.wait_for(mark, |s| {
        s.lines().any(|l| l.starts_with(&format!("{mark}=")))
    });
    assert!(
        screen.lines().any(|l| l == format!("{mark}=0")),
        "{line} failed:\n{screen}"
    );
    // pipe-pane writes through a child `cat`: give it a moment to catch up.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let all = std::fs::read(log).unwrap_or_default();
    String::from_utf8_lossy(&all[before.min(all.len())..]).into_owned()
}

#[test]
fn a_big_checkout_shows_progress_on_a_terminal_and_nowhere_else() {
    let home = Home::new();
    let tmp = tempfile::tempdir().unwrap();
    let repo = big_repo(tmp.path());
    let log = tmp.path().join("terminal.log");
    // The bar shows from the start, however fast this machine writes 20,000 files.
    let t = Terminal::bash_with(&home, &repo, &[("GIT_PROGRESS_DELAY", "0")]);
    t.log_output(&log);

    let shown = run_line(&t, &log, "berth workspace create one", "ONE");
    assert!(
        shown.contains("checking out") && shown.contains(&format!("/{FILES}")),
        "no progress on the terminal:\n{shown}"
    );
    let worktree = home.ok(&["workspace", "path", "one"]);
    let files = git(Path::new(worktree.trim()), &["ls-files"])
        .lines()
        .count();
    assert_eq!(files, FILES);
    assert_eq!(
        git(Path::new(worktree.trim()), &["status", "--porcelain"]),
        ""
    );
    // Cleared once done: the screen ends with the id and the prompt, no bar.
    let screen = t.screen();
    assert!(!screen.contains("checking out ["), "{screen}");

    let json = run_line(&t, &log, "berth workspace create two --json", "TWO");
    assert!(
        !json.contains("checking out"),
        "progress with --json:\n{json}"
    );
    assert!(json.contains("\"name\": \"two\""), "{json}");

    let piped = run_line(&t, &log, "berth workspace create three 2>&1 | cat", "THREE");
    assert!(
        !piped.contains("checking out"),
        "progress into a pipe:\n{piped}"
    );
    for name in ["two", "three"] {
        let worktree = home.ok(&["workspace", "path", name]);
        let files = git(Path::new(worktree.trim()), &["ls-files"])
            .lines()
            .count();
        assert_eq!(files, FILES, "{name}");
    }
}
