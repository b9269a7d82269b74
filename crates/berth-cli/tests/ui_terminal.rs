//! `berth ui` in a real terminal (tmux): a home with a finished 2-agent run and a detached
//! slow one. The runs are listed, the finished one for review; the slow agent's transcript
//! grows on screen; `d` shows the finished agent's diff; `p` then `y` merges agent 1 into the
//! base branch and the outcomes and the run's state (`picked 1`) change on screen; a `--ask` run started meanwhile shows its question as a dialog, and `y`
//! lets its agent go on; `q` gives the terminal back as it was. The real binary, a real
//! repository, the provider stand-in.
//!
//! tmux is required: without it these tests fail (test.sh installs it), they never skip
//! (`support/terminal.rs`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::{git, run};
use support::Home;
use support::runs::{berth_run, project, until, write_call};
use support::terminal::Terminal;

/// The highest `chunk-N` on the screen.
fn last_chunk(screen: &str) -> Option<u32> {
    screen
        .split("chunk-")
        .skip(1)
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .max()
}

#[test]
fn the_dashboard_follows_diffs_picks_answers_and_quits_cleanly() {
    let home = Home::new();
    let (_tmp, root) = project();

    // A finished run of two agents, each of which wrote out.txt.
    let done = ProviderServer::start_in_background();
    for content in ["first version\n", "second version\n"] {
        done.push(Reply::anthropic(&write_call(content)).delay_head(Duration::from_millis(1500)));
    }
    for _ in 0..2 {
        done.push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
    let r = run(berth_run(
        &home,
        &done,
        &root,
        &["Write out.txt", "--agents", "2", "--allow", "write_file"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);

    // A slow run, detached: its answer streams a chunk every 300 ms.
    let slow = ProviderServer::start_in_background();
    let chunks: Vec<String> = (1..=150).map(|i| format!("chunk-{i}\n")).collect();
    slow.push(
        Reply::anthropic(&Turn::new().text(chunks)).pause_between(Duration::from_millis(300)),
    );
    let r = run(berth_run(
        &home,
        &slow,
        &root,
        &["Explain the code slowly", "--detach"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let slow_id = r.stdout.trim().to_owned();

    // A person's terminal has a git identity, which a merge commit needs.
    let term = Terminal::bash_with(
        &home,
        &root,
        &[
            ("GIT_AUTHOR_NAME", "A Person"),
            ("GIT_AUTHOR_EMAIL", "person@example.com"),
            ("GIT_COMMITTER_NAME", "A Person"),
            ("GIT_COMMITTER_EMAIL", "person@example.com"),
        ],
    );
    term.type_text("echo before-ui; berth ui");
    term.send_keys(&["Enter"]);
    // Each says what it needs: the finished one a review, the slow one is running.
    term.wait_for("both runs listed", |s| {
        s.contains("Write out.txt")
            && s.contains("Explain the code slowly")
            && s.lines()
                .any(|l| l.contains("Write out.txt") && l.contains("review"))
    });

    // The slow run is the newest, selected first: its agent's transcript grows.
    term.send_keys(&["Enter"]);
    term.send_keys(&["Enter"]);
    let first = term.wait_for("the slow agent's answer", |s| {
        s.contains("transcript · following") && last_chunk(s).is_some()
    });
    let first = last_chunk(&first).unwrap();
    let later = term.wait_for("more of it", |s| last_chunk(s).is_some_and(|n| n > first));
    assert!(later.contains("Explain the code slowly"), "{later}");

    // The finished run: its first agent's diff names the file and shows an added line.
    term.send_keys(&["Escape"]);
    term.send_keys(&["Escape"]);
    term.wait_for("the runs' keys", |s| s.contains("Enter open"));
    term.send_keys(&["j"]);
    term.send_keys(&["Enter"]);
    term.send_keys(&["d"]);
    let diff = term.wait_for("the diff", |s| {
        s.contains("out.txt") && s.contains("+++ b/out.txt")
    });
    assert!(
        diff.contains("+first version") || diff.contains("+second version"),
        "{diff}"
    );

    // p, then y: agent 1 merged into main, agent 2's work dropped, both on screen.
    term.send_keys(&["p"]);
    term.wait_for("the question before a pick", |s| {
        s.contains("Merge agent 1")
    });
    term.send_keys(&["y"]);
    let picked = term.wait_for("the outcomes", |s| {
        s.contains("merged")
            && s.contains("discarded")
            && s.lines()
                .any(|l| l.contains("Write out.txt") && l.contains("picked 1"))
    });
    assert!(picked.contains("picked agent 1 of run"), "{picked}");
    let merged = git(&root, &["show", "main:out.txt"]);
    assert!(merged.ends_with("version\n"), "{merged}");

    // A run that asks, started while the dashboard is open: its question is a dialog.
    let asks = ProviderServer::start_in_background();
    asks.push(Reply::anthropic(&write_call("asked for\n")));
    asks.push(Reply::anthropic(&Turn::new().text(["Written."])));
    let r = run(berth_run(
        &home,
        &asks,
        &root,
        &["Write asked.txt", "--ask", "--detach"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let ask_id = r.stdout.trim().to_owned();
    term.wait_for("the question", |s| {
        s.contains("An agent waits for you") && s.contains("may it write_file?")
    });
    term.send_keys(&["y"]);
    let record = until("the asked run to end", Duration::from_secs(30), || {
        let run = home.json(&["run", "show", &ask_id, "--json"]);
        (run["state"] == "ended").then_some(run)
    });
    assert_eq!(record["agents"][0]["state"], "done", "{record:#}");
    let worktree = record["agents"][0]["worktree"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(worktree).join("out.txt")).unwrap(),
        "asked for\n"
    );
    term.wait_for("the dialog gone", |s| !s.contains("An agent waits for you"));

    // q: the shell's screen is back, and the terminal is in its usual mode.
    term.send_keys(&["q"]);
    term.wait_for("the dashboard gone", |s| {
        s.contains("before-ui") && !s.contains("1 Runs")
    });
    term.type_text("stty -a | tr ' ;' '\\n\\n' | grep -xE -- '-?(icanon|echo)'; echo after-ui");
    term.send_keys(&["Enter"]);
    let after = term.wait_for("the shell again", |s| {
        s.lines().any(|l| l.trim() == "after-ui")
    });
    assert!(after.contains("before-ui"), "{after}");
    assert!(!after.contains("1 Runs"), "the dashboard is gone:\n{after}");
    let modes: Vec<&str> = after
        .lines()
        .map(str::trim)
        .filter(|l| matches!(*l, "icanon" | "-icanon" | "echo" | "-echo"))
        .collect();
    assert_eq!(modes, ["icanon", "echo"], "{after}");

    home.run(&["run", "stop", &slow_id]);
}

#[test]
fn berth_alone_is_the_dashboard_on_a_terminal_and_the_help_elsewhere() {
    let home = Home::new();
    let (_tmp, root) = project();
    let term = Terminal::start(&home, &root, &[]);
    term.wait_for("the dashboard, with no runs", |s| {
        s.contains("1 Runs") && s.contains("no runs yet")
    });
    term.send_keys(&["q"]);
    let (code, _) = term.wait_exit();
    assert_eq!(code, 0);

    // Not a terminal: the help and status 2, as before; `berth ui` says why it cannot.
    let r = home.run(&[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("Usage: berth"), "{}", r.stderr);
    let r = home.run(&["ui"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("needs a terminal"), "{}", r.stderr);
}
