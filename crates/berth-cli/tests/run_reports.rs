//! What a run says of itself: a check a stop kept from running is `not run`, not failed;
//! Ctrl-C exits 130; and `[[notify]]` hears one notification per run's end (none for a run a
//! person stopped in the foreground), a told turn's end as `told_done`, and each agent's end
//! and failed check only where an entry names them. The real binary, a real repository, the
//! provider stand-in and a notify command that writes each notification to a file.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::run;
use serde_json::Value;
use support::Home;
use support::runs::{berth_run, project, until, write_call};

/// A `[[notify]]` entry whose command appends each notification, one line of JSON, to a file
/// of `dir`; `events` as the entry's list (empty: the default). The file. The line is one
/// write (`printf`), so two notifications sent at once never interleave in it.
fn notified_to(home: &Home, dir: &Path, entries: &[(&str, &[&str])]) -> Vec<PathBuf> {
    let mut config = String::new();
    let mut files = Vec::new();
    for (name, events) in entries {
        let file = dir.join(format!("{name}.jsonl"));
        let events: Vec<String> = events.iter().map(|e| format!("{e:?}")).collect();
        config.push_str(&format!(
            "[[notify]]\ncommand = \"printf '%s\\\\n' \\\"$(cat)\\\" >> '{}'\"\nevents = [{}]\n",
            file.display(),
            events.join(", ")
        ));
        files.push(file);
    }
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    files
}

/// The notifications a file holds.
fn heard(file: &Path) -> Vec<Value> {
    match std::fs::read_to_string(file) {
        Ok(text) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{e}"),
    }
}

fn events_of(notices: &[Value]) -> Vec<String> {
    notices
        .iter()
        .map(|n| n["event"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_two_agent_run_with_a_failing_check_notifies_once_and_a_tell_once_more() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (tmp, root) = project();
    let files = notified_to(
        &home,
        tmp.path(),
        &[("default", &[]), ("each", &["agent_done", "check_failed"])],
    );
    for content in ["one\n", "two\n"] {
        server.push(Reply::anthropic(&write_call(content)).delay_head(Duration::from_millis(1500)));
    }
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
            "false",
        ],
    ));
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.stdout);
    // The command waited for its notifications before it exited.
    let once = heard(&files[0]);
    assert_eq!(events_of(&once), ["failed"], "{once:#?}");
    let summary = once[0]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("2 of 2 agent(s) done; agent 1 ("),
        "{summary}"
    );
    assert!(summary.contains("check failed"), "{summary}");
    assert!(summary.contains("agent 2 ("), "{summary}");
    // Where they are asked for, each agent's end and each failed check.
    let mut each = events_of(&heard(&files[1]));
    each.sort();
    assert_eq!(
        each,
        ["agent_done", "agent_done", "check_failed", "check_failed"]
    );

    // A told turn's end is its own event, once, and not the run's end again.
    let id = home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    server.push(Reply::anthropic(&Turn::new().text(["Nothing more."])));
    let mut tell = berth_run(&home, &server, &root, &[]);
    tell.args(["tell", &id, "--agent", "1", "Anything else?"]);
    let told = run(tell);
    assert_eq!(told.code, 1, "its check still fails: {}", told.stderr);
    let after = heard(&files[0]);
    assert_eq!(events_of(&after), ["failed", "told_done"], "{after:#?}");
    assert_eq!(after[1]["agent"], 1, "{after:#?}");
    assert_eq!(after[1]["run"], id.as_str());
}

#[test]
fn ctrl_c_exits_130_with_the_check_not_run_and_notifies_nothing() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (tmp, root) = project();
    let files = notified_to(&home, tmp.path(), &[("default", &[])]);
    // It changes something, so its check runs.
    server.push(Reply::anthropic(&write_call("work\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let mut cmd = berth_run(
        &home,
        &server,
        &root,
        &[
            "Do it",
            "--allow",
            "write_file",
            "--check",
            "touch check-started && sleep 600",
        ],
    );
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let runs = home.path().join("runs");
    let id = until("the run's record", Duration::from_secs(30), || {
        let entry = std::fs::read_dir(&runs).ok()?.flatten().next()?;
        Some(entry.file_name().to_string_lossy().into_owned())
    });
    let worktree = until("the agent's worktree", Duration::from_secs(30), || {
        home.json(&["run", "show", &id, "--json"])["agents"][0]["worktree"]
            .as_str()
            .map(PathBuf::from)
    });
    until("the check to start", Duration::from_secs(30), || {
        worktree.join("check-started").exists().then_some(())
    });
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(130), "{stderr}\n{stdout}");
    assert!(
        stdout.contains("check `touch check-started && sleep 600` not run"),
        "{stdout}"
    );
    assert!(stdout.contains("not run"), "{stdout}");
    assert!(!stdout.contains("failed"), "{stdout}");
    assert!(stderr.contains("stopped by Ctrl-C"), "{stderr}");
    let ended = home.json(&["run", "show", &id, "--json"]);
    assert_eq!(ended["agents"][0]["summary"]["check"]["not_run"], true);
    let compared = home.json(&["run", "compare", &id, "--json"]);
    assert_eq!(compared["agents"][0]["check_verdict"], "not run");
    // The person who stopped it knows: nothing is sent (the command waits for what it sends
    // before it exits, so anything sent would be in the file by now).
    assert!(heard(&files[0]).is_empty(), "{:#?}", heard(&files[0]));
}

#[test]
fn a_misspelt_subcommand_makes_nothing_and_names_are_short() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    for (args, meant) in [
        (&["lsit"][..], "list"),
        (&["shwo", "0123abcd"][..], "show"),
        (&["comapre", "0123abcd"][..], "compare"),
    ] {
        let r = run(berth_run(&home, &server, &root, args));
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("did you mean `berth run {meant}`?")),
            "{args:?}: {}",
            r.stderr
        );
    }
    // Nothing was made, nothing asked of the model.
    assert_eq!(server.request_count(), 0);
    assert_eq!(home.json(&["run", "list", "--json"]), serde_json::json!([]));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["lsit", "--task-file", "/dev/null"],
    ));
    assert_eq!(r.code, 2, "a task twice: {}", r.stderr);
    // State to write, for no ACP agent: refused, not ignored.
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Do it", "--agent-writable", "/var/tmp/state"],
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--agent-writable is for ACP agents"),
        "{}",
        r.stderr
    );

    // A task in several words is a task; its workspace's name is its first words, short,
    // without the tool syntax.
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "Add",
            "notes",
            "tool:",
            "write_file",
            "path=notes.txt",
            "--json",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let ran = &home.json(&["run", "list", "--json"])[0];
    assert_eq!(
        ran["request"]["task"],
        "Add notes tool: write_file path=notes.txt"
    );
    assert_eq!(
        ran["agents"][0]["workspace_name"], "add-notes-tool-1",
        "{ran:#}"
    );
}

/// An ACP agent that says why on its standard error, then dies at its first message; and one
/// that is refused by the sandbox before it does.
const FAILING_AGENT: &str = r#"
import sys
sys.stdin.readline()
sys.stderr.write("starting the agent\n")
if len(sys.argv) > 1:
    try:
        open(sys.argv[1], "w").write("x")
    except OSError as e:
        sys.stderr.write(f"cannot write my settings: {e}\n")
sys.stderr.write("fatal: no model is configured for this agent\n")
sys.exit(1)
"#;

#[test]
fn a_failed_agent_says_why_from_its_standard_error() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (tmp, root) = project();
    // In the repository, so in the agent's worktree: the sandbox hides the rest of /tmp.
    berth_testkit::commit(&root, "failing_agent.py", FAILING_AGENT);
    let files = notified_to(&home, tmp.path(), &[("default", &[])]);
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Do it", "--agent", "cmd:python3 failing_agent.py"],
    ));
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.stdout);
    // In the summary, under the table.
    assert!(
        r.stdout
            .contains("fatal: no model is configured for this agent"),
        "{}",
        r.stdout
    );
    let id = home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = home.json(&["run", "show", &id, "--json"]);
    let why = shown["agents"][0]["message"].as_str().unwrap();
    assert!(why.contains("ended in the middle of its turn"), "{why}");
    assert!(
        why.contains(
            "its standard error ended:\nstarting the agent\nfatal: no model is configured"
        ),
        "{why}"
    );
    let compared = home.json(&["run", "compare", &id, "--json"]);
    assert!(
        compared["agents"][0]["message"]
            .as_str()
            .unwrap()
            .contains("fatal: no model")
    );
    // The whole of it, kept with the run.
    let logs = home.ok(&["run", "logs", &id, "--stderr"]);
    assert_eq!(
        logs,
        "starting the agent\nfatal: no model is configured for this agent\n"
    );
    // The failed notification's summary line carries it too.
    let notices = heard(&files[0]);
    assert_eq!(events_of(&notices), ["failed"], "{notices:#?}");
    let summary = notices[0]["summary"].as_str().unwrap();
    assert!(
        summary.contains("fatal: no model is configured"),
        "{summary}"
    );

    // Refused by the sandbox: the failure names the path and the option that opens it.
    let outside_dir = berth_testkit::outside_dir();
    let outside = outside_dir.path().to_owned();
    let target = outside.join("settings.json");
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "Do it",
            "--agent",
            &format!("cmd:python3 failing_agent.py {}", target.display()),
        ],
    ));
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.stdout);
    assert!(!target.exists(), "the sandbox let it write");
    let id = home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let why = home.json(&["run", "show", &id, "--json"])["agents"][0]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(why.contains("cannot write my settings"), "{why}");
    assert!(why.contains(&outside.display().to_string()), "{why}");
    assert!(why.contains("writable"), "the option that opens it: {why}");
}

#[test]
fn run_list_pages() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    for task in ["The older task", "The newer task"] {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
        let r = run(berth_run(&home, &server, &root, &[task]));
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let first = home.run(&["run", "list", "--limit", "1"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first.stdout.contains("newer") && !first.stdout.contains("older"),
        "{}",
        first.stdout
    );
    let cursor = first
        .stderr
        .split("--cursor ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no cursor: {}", first.stderr))
        .to_owned();
    let second = home.json(&["run", "list", "--limit", "1", "--cursor", &cursor, "--json"]);
    let tasks: Vec<&str> = second
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["request"]["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["The older task"]);
    let bad = home.run(&["run", "list", "--cursor", "nonsense"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("not a cursor"), "{}", bad.stderr);
    let zero = home.run(&["run", "list", "--limit", "0"]);
    assert_eq!(zero.code, 2, "{}", zero.stderr);
}
