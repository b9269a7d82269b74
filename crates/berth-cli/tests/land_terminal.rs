//! The dashboard's land queue in a real terminal (tmux): `L` on two finished runs' agents
//! queues them, tab 4 shows the queue in that order, Enter then y lands it in a supervisor
//! process of its own (the dashboard goes on answering keys), and the Land tab follows the
//! land to its end, read from the kept land. The real binary, a real repository, the
//! provider stand-in.
//!
//! tmux is required: without it these tests fail (test.sh installs it), they never skip
//! (`support/terminal.rs`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::Path;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::{git, run};
use support::Home;
use support::runs::{berth_run, project};
use support::terminal::Terminal;

/// A finished one-agent run whose agent writes `path`, checked by `test -f PATH`; its id.
fn one_run(home: &Home, server: &ProviderServer, root: &Path, path: &str) -> String {
    let args = serde_json::json!({"path": path, "content": format!("{path}\n")}).to_string();
    server.push(Reply::anthropic(&Turn::new().tool_call(
        "w1",
        "write_file",
        [args],
    )));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let check = format!("test -f {path}");
    let task = format!("Write {path}");
    let r = run(berth_run(
        home,
        server,
        root,
        &[&task, "--allow", "write_file", "--check", &check],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn the_land_queue_lands_two_runs_in_order_in_a_process_of_its_own() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let first = one_run(&home, &server, &root, "a.txt");
    let second = one_run(&home, &server, &root, "b.txt");

    // A person's terminal has a git identity, which a merge commit needs.
    let term = Terminal::start_with(
        &home,
        &root,
        &["ui"],
        &[
            ("GIT_AUTHOR_NAME", "A Person"),
            ("GIT_AUTHOR_EMAIL", "person@example.com"),
            ("GIT_COMMITTER_NAME", "A Person"),
            ("GIT_COMMITTER_EMAIL", "person@example.com"),
        ],
    );
    term.wait_for("both runs listed", |s| {
        s.contains("Write a.txt") && s.contains("Write b.txt")
    });
    // The newest (the second) is selected first: the first run, then the second, queued.
    term.send_keys(&["j"]);
    term.send_keys(&["L"]);
    term.wait_for("the first queued", |s| {
        s.contains("queued to land, number 1")
    });
    term.send_keys(&["k"]);
    term.send_keys(&["L"]);
    term.wait_for("the second queued", |s| {
        s.contains("queued to land, number 2")
    });

    term.send_keys(&["4"]);
    let queue = term.wait_for("the queue", |s| s.contains("Land queue (2)"));
    let row = |id: &str| {
        queue
            .lines()
            .position(|l| l.contains(&id[..8]))
            .unwrap_or_else(|| panic!("{id}:\n{queue}"))
    };
    assert!(row(&first) < row(&second), "{queue}");

    term.send_keys(&["Enter"]);
    term.wait_for("the question", |s| {
        s.contains("Sure?") && s.contains("combined tree")
    });
    term.send_keys(&["y"]);
    let over = term.wait_for("the land over", |s| s.contains("· over · 2 landed, 0 left"));
    assert!(over.contains("started in process"), "{over}");
    assert!(over.matches("landed").count() >= 3, "{over}");

    // Both on main, in the queue's order; each run merged.
    assert_eq!(git(&root, &["show", "main:a.txt"]), "a.txt\n");
    assert_eq!(git(&root, &["show", "main:b.txt"]), "b.txt\n");
    let lands = home.json(&["land", "list", "--json"]);
    let id = lands[0]["id"].as_str().unwrap();
    let land = home.json(&["land", "show", id, "--json"]);
    let order: Vec<&str> = land["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["run"].as_str().unwrap())
        .collect();
    assert_eq!(order, [first.as_str(), second.as_str()]);
    for r in [&first, &second] {
        let shown = home.json(&["run", "show", r, "--json"]);
        assert_eq!(shown["agents"][0]["outcome"], "merged", "{shown:#}");
    }
    // The land was driven by a supervisor process, not the dashboard's.
    let log = std::fs::read_to_string(home.path().join(format!("lands/{id}/supervisor.log")));
    assert!(log.is_ok(), "no supervisor log: {log:?}");

    term.send_keys(&["q"]);
    let (code, _) = term.wait_exit();
    assert_eq!(code, 0);
}
