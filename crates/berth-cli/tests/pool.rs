//! A pool of nodes on one Postgres: `berth run --queue` puts a run in the shared store,
//! `berth serve --worker` on each node takes runs (woken by the database), and each agent's
//! work comes back as a branch pushed to a bare repository. A node SIGKILLed mid-turn loses
//! its run to another once its lease lapses, and, restarted, does not touch it again.
//!
//! Each node is its own home (its own clone, worktrees and provider stand-in) on one database
//! from the throwaway server `test.sh` starts; these tests fail without it.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use berth_testkit::provider_server::{Reply, Turn};
use serde_json::Value;
use support::pool::{Node, queue, script, wait_ended};
use support::runs::{kill9, messages, until};

#[test]
fn two_nodes_take_queued_runs_and_push_every_agents_branch() {
    let url = berth_testkit::postgres::fresh_database_blocking();
    let tmp = tempfile::tempdir().unwrap();
    let remote_url = berth_testkit::bare_remote(tmp.path());
    let remote = tmp.path().join("remote.git");
    let mut alpha = Node::new("alpha", &url, "30");
    let mut beta = Node::new("beta", &url, "30");
    script(&alpha, 4, Duration::from_millis(1200));
    script(&beta, 4, Duration::from_millis(1200));
    alpha.start_worker();
    beta.start_worker();

    // Queued from a folder in no repository: the URL names it. Each prints its id at once.
    let ids: Vec<String> = (0..4)
        .map(|n| queue(&alpha, &format!("Write out.txt ({n})"), &remote_url, &[]))
        .collect();
    let mut nodes = Vec::new();
    for id in &ids {
        let run = wait_ended(&beta, id, Duration::from_secs(120));
        assert_eq!(
            run["state"],
            "ended",
            "{run:#}\n{}\n{}",
            alpha.said(),
            beta.said()
        );
        let agent = &run["agents"][0];
        assert_eq!(agent["state"], "done", "{run:#}");
        let node = agent["node"].as_str().unwrap().to_owned();
        // Its branch is on the remote, holding the file its node's agent wrote, on top of
        // the remote's main.
        let branch = until("the pushed branch", Duration::from_secs(5), || {
            let logs = berth_testkit::run(alpha.cmd(&["run", "logs", id, "--json"]));
            logs.stdout
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|e| e["event"] == "pushed")
                .map(|e| e["branch"].as_str().unwrap().to_owned())
        });
        let file = berth_testkit::git(&remote, &["show", &format!("{branch}:out.txt")]);
        assert!(file.starts_with(&format!("{node} ")), "{branch}: {file}");
        let main = berth_testkit::git(&remote, &["rev-parse", "main"]);
        let parent = berth_testkit::git(&remote, &["rev-parse", &format!("{branch}^")]);
        assert_eq!(parent, main, "{branch} starts at the remote's main");
        nodes.push(node);
    }
    // Both nodes took work.
    assert!(nodes.contains(&"alpha".to_owned()), "{nodes:?}");
    assert!(nodes.contains(&"beta".to_owned()), "{nodes:?}");

    // From another machine: a person's own clone of the project, where no worktree of the
    // run is (the node's is moved away here, as it would be on another machine). `workspace
    // diff` and `merge` read the branch the node pushed.
    let run = alpha.json(&["run", "show", &ids[0], "--json"]);
    let agent = &run["agents"][0];
    let (ws, node) = (
        agent["workspace"].as_str().unwrap(),
        agent["node"].as_str().unwrap(),
    );
    let worktree = PathBuf::from(agent["worktree"].as_str().unwrap());
    std::fs::rename(&worktree, tmp.path().join("moved-away")).unwrap();
    let checkout = tmp.path().join("checkout");
    berth_testkit::git(
        tmp.path(),
        &["clone", "--quiet", &remote_url, checkout.to_str().unwrap()],
    );
    let mut diff = alpha.cmd(&["workspace", "diff", ws, "--json"]);
    diff.current_dir(&checkout);
    let diff = berth_testkit::run(diff);
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    let diff: Value = serde_json::from_str(&diff.stdout).unwrap();
    assert_eq!(diff["files"][0]["path"], "out.txt", "{diff:#}");
    assert_eq!(diff["files"][0]["status"], "added", "{diff:#}");
    let mut merge = alpha.cmd(&["workspace", "merge", ws, "--json"]);
    merge.current_dir(&checkout);
    let merged = berth_testkit::run(merge);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let content = std::fs::read_to_string(checkout.join("out.txt")).unwrap();
    assert!(content.starts_with(&format!("{node} ")), "{content}");
    // Deleting it from here is refused: its folder is the other machine's.
    let mut delete = alpha.cmd(&["workspace", "merge", ws, "--delete"]);
    delete.current_dir(&checkout);
    let refused = berth_testkit::run(delete);
    assert_eq!(refused.code, 4, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("another machine"),
        "{}",
        refused.stderr
    );
    // Every node's `run list` shows every run, and `run show` names the node.
    for node in [&alpha, &beta] {
        let listed: Vec<String> = node
            .json(&["run", "list", "--json"])
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect();
        for id in &ids {
            assert!(listed.contains(id), "{} lists {listed:?}", node.name);
        }
        let shown = berth_testkit::run(node.cmd(&["run", "show", &ids[0]]));
        assert!(shown.stdout.contains("node: "), "{}", shown.stdout);
    }
}

#[test]
fn a_node_killed_mid_turn_loses_its_run_to_another_and_does_not_touch_it_again() {
    let url = berth_testkit::postgres::fresh_database_blocking();
    let tmp = tempfile::tempdir().unwrap();
    let remote_url = berth_testkit::bare_remote(tmp.path());
    let mut alpha = Node::new("alpha", &url, "3");
    let mut beta = Node::new("beta", &url, "3");
    // Alpha's agent starts an answer, then stalls: alpha is killed in the middle of it.
    alpha.server.push(
        Reply::anthropic(&Turn::new().text(["Working on it", " and more"]))
            .pause_after(4, Duration::from_secs(600)),
    );
    script(&beta, 1, Duration::from_millis(100));
    alpha.start_worker();
    let id = queue(&alpha, "Write out.txt", &remote_url, &[]);
    let working = until("alpha's agent at work", Duration::from_secs(60), || {
        let run = alpha.json(&["run", "show", &id, "--json"]);
        (run["agents"][0]["state"] == "working" && alpha.server.request_count() == 1).then_some(run)
    });
    assert_eq!(working["agents"][0]["node"], "alpha");
    let first_session = working["agents"][0]["session"].as_str().unwrap().to_owned();
    kill9(alpha.worker.as_ref().unwrap().id());
    let _ = alpha.worker.take().unwrap().wait();
    let killed = std::time::Instant::now();

    // Beta, started now, takes the run over once alpha's lease (3 s) lapsed.
    beta.start_worker();
    let ended = wait_ended(&beta, &id, Duration::from_secs(60));
    let took = killed.elapsed();
    eprintln!("the run ended on beta {took:?} after alpha was killed, with a 3 s lease");
    assert!(took < Duration::from_secs(3 + 12), "took {took:?}");
    assert_eq!(ended["state"], "ended", "{ended:#}\n{}", beta.said());
    let agent = &ended["agents"][0];
    assert_eq!(agent["state"], "done", "{ended:#}");
    assert_eq!(agent["node"], "beta");
    // The agent went on in a new session carrying the shared transcript: the task, the
    // notice of the move, and a whole answer.
    let session = agent["session"].as_str().unwrap();
    assert_ne!(session, first_session);
    let kept = messages(&beta.json(&["session", "show", session, "--json"]));
    assert_eq!(kept[0], "user: Write out.txt", "{kept:#?}");
    assert!(
        kept.iter()
            .any(|m| m.starts_with("user: Your earlier turn")),
        "{kept:#?}"
    );
    assert!(
        kept.iter().any(|m| m.starts_with("tool: `write_file`")),
        "{kept:#?}"
    );
    assert_eq!(kept.last().unwrap(), "assistant: Done.", "{kept:#?}");
    assert!(beta.said().contains("took over run"), "{}", beta.said());

    // Alpha comes back: it never writes to the run again. A run pinned to alpha, queued
    // after, is the event that says alpha's worker has looked at the runs since.
    let before = beta.json(&["run", "show", &id, "--json"]);
    script(&alpha, 1, Duration::from_millis(10));
    alpha.start_worker();
    let marker = queue(
        &alpha,
        "Write out.txt again",
        &remote_url,
        &["--node", "alpha"],
    );
    let marked = wait_ended(&alpha, &marker, Duration::from_secs(60));
    assert_eq!(marked["agents"][0]["node"], "alpha", "{marked:#}");
    let after = beta.json(&["run", "show", &id, "--json"]);
    assert_eq!(before, after, "the run changed after alpha came back");
    assert_eq!(
        alpha.server.request_count(),
        1 + 2,
        "alpha worked the run again (its first request, then the marker's two)"
    );
}

#[test]
fn a_queued_run_stopped_before_a_worker_takes_it_never_starts() {
    let url = berth_testkit::postgres::fresh_database_blocking();
    let tmp = tempfile::tempdir().unwrap();
    let remote_url = berth_testkit::bare_remote(tmp.path());
    let mut gamma = Node::new("gamma", &url, "30");
    script(&gamma, 1, Duration::from_millis(10));
    // Pinned to a node whose worker is not up: it waits, queued.
    let id = queue(&gamma, "Write out.txt", &remote_url, &["--node", "gamma"]);
    let queued = gamma.json(&["run", "show", &id, "--json"]);
    assert_eq!(queued["state"], "queued");
    let shown = berth_testkit::run(gamma.cmd(&["run", "show", &id]));
    assert!(
        shown.stdout.contains("queued for node gamma"),
        "{}",
        shown.stdout
    );
    let stopped = berth_testkit::run(gamma.cmd(&["run", "stop", &id]));
    assert_eq!(stopped.code, 0, "{}", stopped.stderr);
    let run = gamma.json(&["run", "show", &id, "--json"]);
    assert_eq!(run["state"], "ended", "{run:#}");
    assert_eq!(run["agents"][0]["state"], "stopped", "{run:#}");
    // The node's worker, up now, leaves it be: nothing is made, nobody is asked. A run
    // queued after it, and worked, is the event that says the worker has looked since.
    gamma.start_worker();
    let marker = queue(
        &gamma,
        "Write out.txt again",
        &remote_url,
        &["--node", "gamma"],
    );
    let marked = wait_ended(&gamma, &marker, Duration::from_secs(60));
    assert_eq!(marked["agents"][0]["state"], "done", "{marked:#}");
    assert_eq!(
        gamma.server.request_count(),
        2,
        "only the marker's two requests"
    );
    assert_eq!(gamma.json(&["run", "show", &id, "--json"]), run);
}

#[test]
fn a_worker_on_sqlite_takes_queued_runs_on_one_machine() {
    // SQLite cannot wake a worker: it looks every second instead.
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", tmp.path().join("berth.db").display());
    let remote_url = berth_testkit::bare_remote(tmp.path());
    let mut solo = Node::new("solo", &url, "30");
    script(&solo, 4, Duration::from_millis(10));
    solo.start_worker();
    let mut ids: Vec<String> = (0..2)
        .map(|n| queue(&solo, &format!("Write out.txt ({n})"), &remote_url, &[]))
        .collect();
    // A run of more agents than the worker's one place: taken when the worker is idle,
    // its second agent queued until the first is done.
    ids.push(queue(
        &solo,
        "Write out.txt (pair)",
        &remote_url,
        &["--agents", "2"],
    ));
    for id in &ids {
        let run = wait_ended(&solo, id, Duration::from_secs(60));
        for agent in run["agents"].as_array().unwrap() {
            assert_eq!(agent["state"], "done", "{run:#}\n{}", solo.said());
            assert_eq!(agent["node"], "solo");
        }
    }
    let logs = berth_testkit::run(solo.cmd(&["run", "logs", &ids[2], "--json"]));
    assert!(logs.stdout.contains("\"queued\""), "{}", logs.stdout);
}

/// One HTTP/1.1 request to `addr`, as the page's script sends it (same origin, the page's
/// CSRF header when given): the status and the body.
fn http(addr: &str, method: &str, path: &str, csrf: Option<&str>) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\nConnection: close\r\nContent-Length: 0\r\n"
    );
    if let Some(token) = csrf {
        request.push_str(&format!("x-berth-csrf: {token}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not HTTP: {answer}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

#[test]
fn the_web_pages_merge_of_an_agent_another_node_made_merges_it() {
    let url = berth_testkit::postgres::fresh_database_blocking();
    let tmp = tempfile::tempdir().unwrap();
    let remote_url = berth_testkit::bare_remote(tmp.path());
    let alpha = Node::new("alpha", &url, "30");
    let mut beta = Node::new("beta", &url, "30");
    script(&beta, 1, Duration::from_millis(10));
    beta.start_worker();
    let id = queue(&alpha, "Write out.txt", &remote_url, &["--node", "beta"]);
    let run = wait_ended(&beta, &id, Duration::from_secs(60));
    assert_eq!(
        run["agents"][0]["state"],
        "done",
        "{run:#}\n{}",
        beta.said()
    );
    // On another machine, beta's worktree is not here.
    let worktree = PathBuf::from(run["agents"][0]["worktree"].as_str().unwrap());
    std::fs::rename(&worktree, tmp.path().join("moved-away")).unwrap();

    // Alpha's page, served from a person's clone of the project.
    let checkout = tmp.path().join("checkout");
    berth_testkit::git(
        tmp.path(),
        &["clone", "--quiet", &remote_url, checkout.to_str().unwrap()],
    );
    let log_path = tmp.path().join("alpha-serve.log");
    let mut serve = alpha.cmd(&["serve", "--open", "--listen", "127.0.0.1:0"]);
    serve
        .current_dir(&checkout)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap());
    let mut child = serve.spawn().unwrap();
    let addr = until("alpha's page", Duration::from_secs(30), || {
        let said = std::fs::read_to_string(&log_path).unwrap_or_default();
        let at = said.find("web page at http://")?;
        let rest = &said[at + "web page at http://".len()..];
        Some(rest[..rest.find('/')?].to_owned())
    });
    let (status, page) = http(&addr, "GET", &format!("/runs/{id}"), None);
    assert_eq!(status, 200, "{page}");
    let csrf = page
        .split("name=\"berth-csrf\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let (status, body) = http(
        &addr,
        "POST",
        &format!("/runs/{id}/agents/1/merge"),
        Some(&csrf),
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200, "{body}");
    // Beta's pushed branch, merged into the clone the page is served from.
    let merged = berth_testkit::git(&checkout, &["show", "HEAD:out.txt"]);
    assert!(merged.starts_with("beta "), "{merged}");
    let log = berth_testkit::git(&checkout, &["log", "-1", "--format=%B"]);
    assert!(log.contains("Write out.txt"), "{log}");
    let shown = alpha.json(&["run", "show", &id, "--json"]);
    assert_eq!(shown["agents"][0]["outcome"], "merged", "{shown:#}");
}
