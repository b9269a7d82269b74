//! Review: a run's winner picked on evidence, a check's own words wherever the run is shown,
//! and nothing lost. A run of three agents (an ACP agent that crashes having changed nothing,
//! and two of berth's own, one whose work fails the check and one whose work passes it):
//! the crash is not checked, pick refuses the crash and the failure naming why and
//! `--force`, main stays as it was until the passing agent is picked; every session is read
//! after the pick; a dropped agent is restored; the pick is undone. Then the checks' timing,
//! review states, clean of unreviewed runs, delete, and a pick beside an untracked file. The
//! real binary, a real repository and the provider stand-in.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::Path;
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::{commit, git, run};
use serde_json::Value;
use support::Home;
use support::runs::{berth_run, events, project, write_call};

/// An ACP agent that dies at its first message, having changed nothing.
const CRASHING_AGENT: &str =
    "import sys\nsys.stdin.readline()\nsys.stderr.write('fatal: out of memory\\n')\nsys.exit(3)\n";

/// A check that says something first, prints the file and thirty numbered lines, and passes
/// only when the file says `good`.
const CHECK: &str = "echo check-starts-here; cat out.txt; seq 1 30; grep -q good out.txt";

fn show(home: &Home, id: &str) -> Value {
    home.json(&["run", "show", id, "--json"])
}

fn last_run(home: &Home) -> String {
    home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The three-agent run; its id, and which of berth's agents (0-based) got the good work and
/// which the bad (the race between them decides).
fn mixed_run(home: &Home, server: &ProviderServer, root: &Path) -> (String, usize, usize) {
    commit(root, "crash.py", CRASHING_AGENT);
    // Held back so that each of berth's agents' first request gets a write.
    server.push(Reply::anthropic(&write_call("good\n")).delay_head(Duration::from_millis(1500)));
    server.push(Reply::anthropic(&write_call("bad\n")).delay_head(Duration::from_millis(1500)));
    for _ in 0..2 {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
    let r = run(berth_run(
        home,
        server,
        root,
        &[
            "Write out.txt",
            "--agent",
            "cmd:python3 crash.py",
            "--agent",
            "berth",
            "--agent",
            "berth",
            "--allow",
            "write_file",
            "--check",
            CHECK,
        ],
    ));
    // Not every agent finished and passed: the run's own exit status says so.
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.stdout);
    let id = last_run(home);
    let record = show(home, &id);
    let content = |i: usize| {
        let wt = record["agents"][i]["worktree"].as_str().unwrap();
        std::fs::read_to_string(Path::new(wt).join("out.txt")).unwrap()
    };
    let (good, bad) = match content(1).as_str() {
        "good\n" => (1, 2),
        _ => (2, 1),
    };
    assert_eq!(content(good), "good\n");
    assert_eq!(content(bad), "bad\n");
    // The summary under the table quotes the failed check's last lines, not "exit status".
    assert!(r.stdout.contains("failed (exit 1)"), "{}", r.stdout);
    assert!(!r.stdout.contains("failed (exit status"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "`berth run logs {id} --agent {} --check`",
            bad + 1
        )),
        "{}",
        r.stdout
    );
    (id, good, bad)
}

#[test]
fn pick_is_on_evidence_and_nothing_is_lost() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let (id, good, bad) = mixed_run(&home, &server, &root);
    let main_before = git(&root, &["rev-parse", "main"]);
    let record = show(&home, &id);
    let agents = record["agents"].as_array().unwrap();
    assert_eq!(agents[0]["state"], "failed", "{record:#}");

    // The crash was not checked: `not run`, with why.
    let crash_check = &agents[0]["summary"]["check"];
    assert_eq!(crash_check["not_run"], true, "{record:#}");
    assert_eq!(crash_check["outcome"], "the agent failed", "{record:#}");
    assert_eq!(agents[good]["summary"]["check"]["passed"], true);
    let failed = &agents[bad]["summary"]["check"];
    assert_eq!(failed["passed"], false);
    assert_eq!(failed["outcome"], "exit 1", "{record:#}");
    // The record quotes the last 20 lines: the end, not the beginning.
    let quoted = failed["output"].as_str().unwrap();
    assert!(quoted.ends_with("30"), "{quoted}");
    assert!(!quoted.contains("check-starts-here"), "{quoted}");
    assert_eq!(quoted.lines().count(), 20, "{quoted}");
    assert_eq!(record["review"]["stage"], "review", "{record:#}");

    // The check's whole output, first and last lines, in order.
    let bad_n = (bad + 1).to_string();
    let logs = home.ok(&["run", "logs", &id, "--agent", &bad_n, "--check"]);
    assert!(logs.starts_with("check-starts-here\nbad\n1\n2\n"), "{logs}");
    assert!(logs.ends_with("29\n30\n"), "{logs}");
    // `run show` shows its last lines; `compare` says why each is not picked.
    let shown = home.ok(&["run", "show", &id]);
    assert!(shown.contains("failed (exit 1)"), "{shown}");
    assert!(shown.contains("    30"), "{shown}");
    assert!(
        shown.contains("check not run (the agent failed)"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("run {id}  review 1✓ 1✗")),
        "{shown}"
    );
    let compared = home.ok(&["run", "compare", &id]);
    assert!(compared.contains("failed (exit 1)"), "{compared}");
    assert!(
        compared.contains("[1] not picked without --force: agent 1 failed"),
        "{compared}"
    );
    // The crash has no check output to show, and says why.
    let none = home.run(&["run", "logs", &id, "--agent", "1", "--check"]);
    assert_eq!(none.code, 3, "{}", none.stderr);
    assert!(
        none.stderr.contains("not run (the agent failed)"),
        "{}",
        none.stderr
    );
    // Waiting for review.
    let listed = home.ok(&["run", "list", "--review"]);
    assert!(listed.contains(&id), "{listed}");

    // The crash and the failure are refused, with why and --force; main does not move.
    let crash = home.run(&["run", "pick", &id, "1"]);
    assert_eq!(crash.code, 4, "{}", crash.stderr);
    assert!(crash.stderr.contains("agent 1 failed"), "{}", crash.stderr);
    assert!(crash.stderr.contains("--force"), "{}", crash.stderr);
    let failing = home.run(&["run", "pick", &id, &bad_n]);
    assert_eq!(failing.code, 4, "{}", failing.stderr);
    assert!(
        failing
            .stderr
            .contains(&format!("agent {bad_n}'s check failed (exit 1)")),
        "{}",
        failing.stderr
    );
    assert!(failing.stderr.contains("--force"), "{}", failing.stderr);
    assert_eq!(git(&root, &["rev-parse", "main"]), main_before);
    assert!(
        show(&home, &id)["agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a.get("outcome").is_none())
    );

    // `best` is the agent that passed, and says why.
    let picked = home.json(&["run", "pick", &id, "best", "--json"]);
    assert_eq!(picked["agent"], good + 1, "{picked:#}");
    let why = picked["why"].as_str().unwrap();
    assert!(why.contains("passed its check"), "{why}");
    assert_eq!(git(&root, &["show", "main:out.txt"]), "good\n");
    // The commit: the task once as its subject, then the run, the agent and its check.
    let message = git(&root, &["log", "-1", "--format=%B", "main"]);
    assert_eq!(message.matches("Write out.txt").count(), 1, "{message}");
    assert!(message.starts_with("Write out.txt\n\n"), "{message}");
    assert!(
        message.contains(&format!("berth run {id}, agent {}", good + 1)),
        "{message}"
    );
    assert!(message.contains("passed"), "{message}");
    // A second winner needs --also.
    let again = home.run(&["run", "pick", &id, &bad_n, "--force"]);
    assert_eq!(again.code, 4, "{}", again.stderr);

    // Every session of the run is still read, the winner's and the dropped ones'.
    let after = show(&home, &id);
    assert_eq!(after["review"]["stage"], "picked", "{after:#}");
    for a in after["agents"].as_array().unwrap() {
        let session = a["session"].as_str().unwrap();
        home.ok(&["session", "show", session]);
    }
    let listed = home.ok(&["run", "list"]);
    assert!(listed.contains(&format!("picked {}", good + 1)), "{listed}");
    let review = home.ok(&["run", "list", "--review"]);
    assert!(!review.contains(&id), "{review}");

    // A dropped agent comes back: its workspace, the same id, with its work to diff.
    let dropped_ws = after["agents"][bad]["workspace"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(after["agents"][bad]["lost_ref"].is_string(), "{after:#}");
    let restored = home.json(&["run", "restore", &id, &bad_n, "--json"]);
    assert_eq!(
        restored["workspace"]["id"],
        dropped_ws.as_str(),
        "{restored:#}"
    );
    let diff = home.ok(&["workspace", "diff", &dropped_ws]);
    assert!(diff.contains("+bad"), "{diff}");
    assert_eq!(show(&home, &id)["agents"][bad]["outcome"], "kept");

    // The pick undone: main is back where it was, and the winner's work is kept.
    let undone = home.json(&["run", "pick", &id, "--undo", "--json"]);
    assert_eq!(undone["agent"], good + 1, "{undone:#}");
    assert_eq!(git(&root, &["rev-parse", "main"]), main_before);
    assert!(!root.join("out.txt").exists());
    let kept_on = undone["lost_ref"].as_str().unwrap();
    assert_eq!(
        git(&root, &["show", &format!("{kept_on}:out.txt")]),
        "good\n"
    );
    let last = show(&home, &id);
    assert!(last["agents"][good].get("outcome").is_none(), "{last:#}");
    // Nothing to undo any more.
    let twice = home.run(&["run", "pick", &id, "--undo"]);
    assert_eq!(twice.code, 4, "{}", twice.stderr);
}

#[test]
fn each_check_starts_when_its_agent_ends() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // One agent's first answer comes after 1.5 seconds, the other's after 5.
    // Held back so that both first requests are in before either answer.
    server.push(Reply::anthropic(&write_call("fast\n")).delay_head(Duration::from_millis(1500)));
    server.push(Reply::anthropic(&write_call("slow\n")).delay_head(Duration::from_secs(5)));
    for _ in 0..2 {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "Write out.txt",
            "--agents",
            "2",
            "--allow",
            "write_file",
            "--check",
            "test -f out.txt",
            "--json",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let order: Vec<String> = events(&r.stdout)
        .iter()
        .filter(|e| e["event"] == "ended" || e["event"] == "checked")
        .map(|e| format!("{} {}", e["event"].as_str().unwrap(), e["agent"]))
        .collect();
    assert_eq!(order.len(), 4, "{order:?}");
    let first = order[0].strip_prefix("ended ").unwrap().to_owned();
    let other = if first == "0" { "1" } else { "0" };
    let checked_first = order
        .iter()
        .position(|e| *e == format!("checked {first}"))
        .unwrap();
    let other_ended = order
        .iter()
        .position(|e| *e == format!("ended {other}"))
        .unwrap();
    assert!(checked_first < other_ended, "{order:?}");
}

/// A one-agent run that writes out.txt, over and not reviewed; its id.
fn one_agent_run(home: &Home, server: &ProviderServer, root: &Path, content: &str) -> String {
    server.push(Reply::anthropic(&write_call(content)));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let r = run(berth_run(
        home,
        server,
        root,
        &["Write out.txt", "--allow", "write_file"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    last_run(home)
}

#[test]
fn clean_older_than_drops_unreviewed_runs_and_keeps_their_sessions() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let id = one_agent_run(&home, &server, &root, "one\n");
    let record = show(&home, &id);
    let ws = record["agents"][0]["workspace"]
        .as_str()
        .unwrap()
        .to_owned();
    let session = record["agents"][0]["session"].as_str().unwrap().to_owned();
    let worktree = record["agents"][0]["worktree"].as_str().unwrap().to_owned();
    // Without --older-than, a run nobody reviewed is left alone.
    let plain = home.run(&["run", "clean", "--dry-run"]);
    assert!(
        plain.stderr.contains("nothing to clean"),
        "{}",
        plain.stderr
    );
    std::thread::sleep(Duration::from_millis(1100));
    let cleaned = home.json(&["run", "clean", "--older-than", "1s", "--yes", "--json"]);
    assert_eq!(cleaned[0]["run"], id.as_str(), "{cleaned:#}");
    assert!(!Path::new(&worktree).exists());
    // Archived: gone from the list, its session and its work kept.
    let listed = home.json(&["workspace", "list", "--json"]);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["id"] != ws.as_str()),
        "{listed:#}"
    );
    home.ok(&["session", "show", &session]);
    let after = show(&home, &id);
    assert_eq!(after["agents"][0]["outcome"], "discarded", "{after:#}");
    let kept_on = after["agents"][0]["lost_ref"].as_str().unwrap();
    assert_eq!(
        git(&root, &["show", &format!("{kept_on}:out.txt")]),
        "one\n"
    );
    // A bad duration is said as such.
    let bad = home.run(&["run", "clean", "--older-than", "soon"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

#[test]
fn a_run_is_deleted_once_over_and_its_sessions_stay_unless_asked() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let first = one_agent_run(&home, &server, &root, "one\n");
    let session = show(&home, &first)["agents"][0]["session"]
        .as_str()
        .unwrap()
        .to_owned();
    home.ok(&["run", "delete", &first, "--yes"]);
    let gone = home.run(&["run", "show", &first]);
    assert_eq!(gone.code, 3, "{}", gone.stderr);
    home.ok(&["session", "show", &session]);

    let second = one_agent_run(&home, &server, &root, "two\n");
    let record = show(&home, &second);
    let session = record["agents"][0]["session"].as_str().unwrap().to_owned();
    home.ok(&["run", "discard", &second, "--yes"]);
    // Discarded, its session is still read.
    home.ok(&["session", "show", &session]);
    let deleted = home.json(&[
        "run",
        "delete",
        &second,
        "--with-sessions",
        "--yes",
        "--json",
    ]);
    assert_eq!(
        deleted["sessions"],
        serde_json::json!([session]),
        "{deleted:#}"
    );
    let gone = home.run(&["session", "show", &session]);
    assert_eq!(gone.code, 3, "{}", gone.stderr);
}

#[test]
fn pick_merges_beside_an_untracked_file_of_the_checkout() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let id = one_agent_run(&home, &server, &root, "one\n");
    std::fs::write(root.join("scratch.txt"), "mine\n").unwrap();
    // Without a check there is no evidence for `best`.
    let best = home.run(&["run", "pick", &id, "best"]);
    assert_eq!(best.code, 4, "{}", best.stderr);
    assert!(best.stderr.contains("no check"), "{}", best.stderr);
    home.ok(&["run", "pick", &id, "1"]);
    assert_eq!(git(&root, &["show", "main:out.txt"]), "one\n");
    assert_eq!(
        std::fs::read_to_string(root.join("out.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("scratch.txt")).unwrap(),
        "mine\n"
    );
}

#[test]
fn runs_waiting_for_review_come_a_page_at_a_time() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let oldest = one_agent_run(&home, &server, &root, "one\n");
    let middle = one_agent_run(&home, &server, &root, "two\n");
    let newest = one_agent_run(&home, &server, &root, "three\n");
    home.ok(&["run", "discard", &middle, "--yes"]);
    let ids = |listed: &Value| -> Vec<String> {
        listed
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = home.run(&["run", "list", "--review", "--limit", "1", "--json"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(ids(&serde_json::from_str(&first.stdout).unwrap()), [newest]);
    // The cursor leads past the discarded run to the next one waiting, and none is lost.
    let cursor = first
        .stderr
        .split("--cursor ")
        .nth(1)
        .and_then(|c| c.split('`').next())
        .unwrap_or_else(|| panic!("no cursor: {}", first.stderr))
        .to_owned();
    let second = home.json(&[
        "run", "list", "--review", "--limit", "1", "--cursor", &cursor, "--json",
    ]);
    assert_eq!(ids(&second), [oldest]);
    let all = home.json(&["run", "list", "--review", "--json"]);
    assert_eq!(all.as_array().unwrap().len(), 2, "{all:#}");
}
