//! Several tasks at once: `berth run --tasks FILE` starts one run per task as one batch,
//! `run list --batch` reads it back in the file's order, and a batch that cannot start
//! makes nothing. The real binary, a real repository, berth's own agents against the local
//! provider stand-in.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::{Run, run};
use serde_json::Value;
use support::Home;
use support::runs::{berth_run, project, transcript};

const TASKS: &str = "\
# This week

For the agents, one run each.

- [ ] Write the changelog
- Fix the parser
  so that it reads tabs
- Tidy the docs
";

/// `berth run ARGS` in `dir` with `input` on standard input.
fn berth_run_stdin(
    home: &Home,
    server: &ProviderServer,
    dir: &Path,
    args: &[&str],
    input: &str,
) -> Run {
    let mut cmd = berth_run(home, server, dir, args);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    Run::from(child.wait_with_output().unwrap())
}

fn ids(listed: &Value) -> Vec<String> {
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_markdown_file_starts_one_run_per_item_in_one_batch() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (tmp, root) = project();
    for _ in 0..4 {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
    let file = tmp.path().join("tasks.md");
    std::fs::write(&file, TASKS).unwrap();
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "--tasks",
            file.to_str().unwrap(),
            "--allow",
            "write_file",
            "--check-timeout",
            "77",
            "--json",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let started: Value = serde_json::from_str(&r.stdout).unwrap();
    let batch = started["batch"].as_str().unwrap().to_owned();
    assert_eq!(batch.len(), 12, "{started:#}");
    let runs = started["runs"].as_array().unwrap();
    let tasks: Vec<&str> = runs.iter().map(|r| r["task"].as_str().unwrap()).collect();
    let wanted = [
        "Write the changelog",
        "Fix the parser\nso that it reads tabs",
        "Tidy the docs",
    ];
    assert_eq!(tasks, wanted);
    let started_ids: Vec<String> = runs
        .iter()
        .map(|r| r["run"].as_str().unwrap().to_owned())
        .collect();
    assert!(runs.iter().all(|r| r["supervisor"].as_u64().is_some()));

    // Each runs to its end under a supervisor of its own, with the batch's options.
    for (i, id) in started_ids.iter().enumerate() {
        let waited = home.run(&["run", "wait", id, "--json"]);
        assert_eq!(waited.code, 0, "{}\n{}", waited.stderr, waited.stdout);
        let record: Value = serde_json::from_str(&waited.stdout).unwrap();
        assert_eq!(record["state"], "ended");
        assert_eq!(record["agents"][0]["state"], "done", "{record:#}");
        let request = &record["request"];
        assert_eq!(request["task"], wanted[i]);
        assert_eq!(request["allow"], serde_json::json!(["write_file"]));
        assert_eq!(request["check_timeout_secs"], 77);
        assert_eq!(request["batch"]["id"], batch.as_str());
        assert_eq!(request["batch"]["index"], i);
        // The agent was given that task, whole.
        let session = record["agents"][0]["session"].as_str().unwrap();
        assert_eq!(
            transcript(&home, session)[0],
            format!("user: {}", wanted[i])
        );
    }

    // Read back by a prefix of the batch's id, in the file's order.
    let listed = home.json(&["run", "list", "--batch", &batch[..6], "--json"]);
    assert_eq!(ids(&listed), started_ids);
    let table = home.ok(&["run", "list", "--batch", &batch]);
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{table}");
    for (row, id) in rows.iter().zip(&started_ids) {
        assert!(row.starts_with(id.as_str()), "{table}");
    }
    assert!(rows[1].contains("Fix the parser") && rows[1].contains("review"));
    let shown = home.ok(&["run", "show", &started_ids[1]]);
    assert!(
        shown.contains(&format!("batch: {batch} (task 2 of 3")),
        "{shown}"
    );

    // A second batch, from standard input, one task per line: its id alone on standard
    // output, a line per run on standard error; the first batch is left as it was.
    let r = berth_run_stdin(&home, &server, &root, &["--tasks", "-"], "Add a README\n");
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let second = r.stdout.trim();
    assert!(second.len() == 12 && second != batch, "{}", r.stdout);
    assert!(
        r.stderr.contains(": Add a README") && r.stderr.contains("1 run from standard input"),
        "{}",
        r.stderr
    );
    let listed = home.json(&["run", "list", "--batch", second, "--json"]);
    assert_eq!(listed[0]["request"]["task"], "Add a README");
    home.ok(&["run", "wait", listed[0]["id"].as_str().unwrap()]);
    assert_eq!(
        ids(&home.json(&["run", "list", "--batch", &batch, "--json"])),
        started_ids
    );
    assert_eq!(server.request_count(), 4);
}

#[test]
fn a_batch_that_cannot_start_makes_nothing() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (tmp, root) = project();
    let file = tmp.path().join("tasks.md");
    std::fs::write(&file, TASKS).unwrap();
    let file = file.to_str().unwrap();
    let nothing_made = |what: &str| {
        assert_eq!(
            home.json(&["run", "list", "--json"]),
            serde_json::json!([]),
            "{what}"
        );
        assert_eq!(
            home.json(&["workspace", "list", "--json"]),
            serde_json::json!([]),
            "{what}"
        );
    };
    let refused = |args: &[&str], input: &str, code: i32, says: &str| {
        let r = berth_run_stdin(&home, &server, &root, args, input);
        assert_eq!(r.code, code, "{args:?}: {}\n{}", r.stderr, r.stdout);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        assert_eq!(r.stdout, "", "{args:?}");
        nothing_made(&format!("{args:?}"));
    };
    // An agent whose program is missing, or a spec that is no agent's.
    refused(
        &["--tasks", file, "--agent", "cmd:no-such-agent-7f3a"],
        "",
        7,
        "no-such-agent-7f3a",
    );
    refused(
        &["--tasks", file, "--agents", "nonsense:2"],
        "",
        2,
        "nonsense",
    );
    // The tenth task's workspace name would be too long: refused before the first nine
    // are started.
    let ten: String = (1..=10).map(|i| format!("Task number {i}\n")).collect();
    let name = "n".repeat(57);
    refused(&["--tasks", "-", "--name", &name], &ten, 2, "-10-");
    // No task, too many, one that looks like a misspelt subcommand.
    refused(
        &["--tasks", "-"],
        "# A title\n\nA paragraph.\n- [ ]\n",
        2,
        "no task",
    );
    let many = "task\n".repeat(101);
    refused(&["--tasks", "-"], &many, 2, "101 tasks");
    refused(&["--tasks", "-"], "Fix the parser\nlsit\n", 2, "line 2");
    // Conflicting ways to give a task.
    refused(&["--tasks", file, "Fix it"], "", 2, "cannot be used with");
    refused(
        &["--tasks", file, "--task-file", file],
        "",
        2,
        "cannot be used with",
    );
    assert_eq!(server.request_count(), 0);

    // A batch nobody has.
    let r = home.run(&["run", "list", "--batch", "abcd12345678"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("berth run list --batch"), "{}", r.stderr);
    assert_eq!(home.run(&["run", "list", "--batch", "xyz"]).code, 2);
    // Give it a moment: a supervisor started by mistake would have recorded its run.
    std::thread::sleep(Duration::from_millis(200));
    nothing_made("at the end");
}

#[test]
fn a_batch_is_queued_for_a_pool_in_one_go() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (tmp, root) = project();
    let url = format!("sqlite://{}", tmp.path().join("berth.db").display());
    let origin = format!("file://{}", root.display());
    let mut cmd = berth_run(
        &home,
        &server,
        &root,
        &[
            "--tasks", "-", "--queue", "--repo", &origin, "--node", "n1", "--json",
        ],
    );
    cmd.env("BERTH_STORE_URL", &url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"1. First task\n2. Second task\n")
        .unwrap();
    let r = Run::from(child.wait_with_output().unwrap());
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let queued: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(queued["queued"], true);
    let batch = queued["batch"].as_str().unwrap();
    let mut list = home.cmd(&["run", "list", "--batch", batch, "--json"]);
    list.env("BERTH_STORE_URL", &url);
    let listed = run(list);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    let runs = listed.as_array().unwrap();
    let tasks: Vec<&str> = runs
        .iter()
        .map(|r| r["request"]["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["First task", "Second task"]);
    for (i, (run, started)) in runs
        .iter()
        .zip(queued["runs"].as_array().unwrap())
        .enumerate()
    {
        assert_eq!(run["id"], started["run"]);
        assert_eq!(started["supervisor"], Value::Null);
        assert_eq!(run["state"], "queued", "{run:#}");
        assert_eq!(run["request"]["pool"]["node"], "n1");
        assert_eq!(run["request"]["pool"]["repo_url"], origin.as_str());
        assert_eq!(run["request"]["batch"]["index"], i);
        assert_eq!(run["request"]["batch"]["count"], 2);
    }
    // Nothing was made here: a worker makes each run's workspaces when it takes it.
    let mut workspaces = home.cmd(&["workspace", "list", "--json"]);
    workspaces.env("BERTH_STORE_URL", &url);
    assert_eq!(run(workspaces).stdout.trim(), "[]");
}
