//! Runs that outlive the terminal: `berth run --detach` under a supervisor process, the
//! supervisor or an agent killed mid-turn (SIGKILL), `run stop`, `wait`, `logs`, and `run
//! resume` continuing berth's own agent where it stopped. The real binary, a real
//! repository, and the provider stand-in, whose answers stall so that turns are cut off
//! mid-stream.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::PathBuf;
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::run;
use serde_json::Value;
use support::Home;
use support::runs::{
    berth_run, events, kill9, processes_in, project, transcript, until, write_call,
};

/// An answer that starts, then stalls for ten minutes: a turn that is mid-stream whenever
/// the test cuts it off.
fn stalling() -> Reply {
    Reply::anthropic(&Turn::new().text(["Working on it", " and more"]))
        .pause_after(4, Duration::from_secs(600))
}

fn show(home: &Home, id: &str) -> Value {
    home.json(&["run", "show", id, "--json"])
}

fn states(run: &Value) -> Vec<String> {
    run["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["state"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_killed_supervisor_leaves_everything_and_resume_finishes_the_work() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    server.push(stalling());
    server.push(stalling());
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
            "--detach",
            "--json",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let detached: Value = serde_json::from_str(&r.stdout).unwrap();
    let id = detached["run"].as_str().unwrap().to_owned();
    let supervisor = detached["supervisor"].as_u64().unwrap() as u32;
    assert_ne!(supervisor, 0);

    // Both agents stream, under the supervisor, after the CLI has returned.
    until("both agents' requests", Duration::from_secs(30), || {
        (server.request_count() == 2).then_some(())
    });
    let working = until("both agents working", Duration::from_secs(30), || {
        let run = show(&home, &id);
        (states(&run) == ["working", "working"]).then_some(run)
    });
    assert_eq!(working["state"], "running");
    assert_eq!(working["supervisor"], supervisor);
    let logs = home.ok(&["run", "logs", &id]);
    assert!(
        logs.contains("[1] berth started in workspace write-out-txt-"),
        "{logs}"
    );

    kill9(supervisor);
    let failed = until("the run found failed", Duration::from_secs(10), || {
        let run = show(&home, &id);
        (run["state"] == "failed").then_some(run)
    });
    assert_eq!(states(&failed), ["failed", "failed"], "{failed:#}");
    for a in failed["agents"].as_array().unwrap() {
        assert!(
            a["message"].as_str().unwrap().contains("supervisor"),
            "{a:#}"
        );
        // The workspace and the transcript (the task, as the turn started) are kept.
        let ws = home.json(&[
            "workspace",
            "show",
            a["workspace"].as_str().unwrap(),
            "--json",
        ]);
        assert!(PathBuf::from(ws["git"]["worktree"].as_str().unwrap()).is_dir());
        assert_eq!(
            transcript(&home, a["session"].as_str().unwrap()),
            ["user: Write out.txt"]
        );
    }
    // A run over cannot be stopped; `wait` says it failed.
    let refused = home.run(&["run", "stop", &id]);
    assert_eq!(refused.code, 4, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("is not running"),
        "{}",
        refused.stderr
    );
    let waited = home.run(&["run", "wait", &id]);
    assert_eq!(waited.code, 1, "{}", waited.stderr);

    // Resumed: each agent continues its session: it writes, then answers.
    for _ in 0..2 {
        server.push(
            Reply::anthropic(&write_call("resumed\n")).delay_head(Duration::from_millis(1500)),
        );
    }
    for _ in 0..2 {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
    let r = run(berth_run(&home, &server, &root, &["resume", &id, "--json"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let resumed = events(&r.stdout);
    assert_eq!(resumed.last().unwrap()["event"], "summary");
    let ended = show(&home, &id);
    assert_eq!(ended["state"], "ended");
    assert_eq!(states(&ended), ["done", "done"]);
    for a in ended["agents"].as_array().unwrap() {
        let worktree = PathBuf::from(a["worktree"].as_str().unwrap());
        assert_eq!(
            std::fs::read_to_string(worktree.join("out.txt")).unwrap(),
            "resumed\n"
        );
        let kept = transcript(&home, a["session"].as_str().unwrap());
        assert_eq!(kept.len(), 4, "{kept:#?}");
        assert_eq!(kept[0], "user: Write out.txt");
        assert!(kept[1].starts_with("user: Your earlier turn"), "{kept:#?}");
        assert!(kept[1].ends_with("Write out.txt"), "{kept:#?}");
        assert!(kept[2].starts_with("tool: `write_file`"), "{kept:#?}");
        assert_eq!(kept[3], "assistant: Done.");
    }
    // The resumed turns were sent the sessions' earlier prompt: they continued them.
    let requests = server.requests();
    for request in &requests[2..4] {
        let messages = request.body["messages"].to_string();
        assert!(
            messages.contains("Write out.txt") && messages.contains("Your earlier turn"),
            "{messages}"
        );
    }
    let runs = home.json(&["run", "list", "--json"]);
    assert_eq!(runs.as_array().unwrap().len(), 1);
    let again = home.run(&["run", "resume", &id]);
    assert_eq!(again.code, 4, "{}", again.stderr);
    assert!(
        again.stderr.contains("nothing to resume"),
        "{}",
        again.stderr
    );
}

#[test]
fn an_agent_killed_fails_alone_and_stop_ends_another() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    server.push(stalling());
    server.push(stalling());
    let agent = format!("{} acp", env!("CARGO_BIN_EXE_berth"));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "Think it over",
            "--agents",
            "2",
            "--agent-cmd",
            &agent,
            "--detach",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let id = r.stdout.trim().to_owned();
    until("both agents' requests", Duration::from_secs(30), || {
        (server.request_count() == 2).then_some(())
    });
    let running = show(&home, &id);
    let worktree = |i: usize| PathBuf::from(running["agents"][i]["worktree"].as_str().unwrap());
    let first = until("agent 1's process", Duration::from_secs(10), || {
        processes_in(&worktree(0)).first().copied()
    });
    kill9(first);
    let one_failed = until("agent 1 failed", Duration::from_secs(20), || {
        let run = show(&home, &id);
        (states(&run) == ["failed", "working"]).then_some(run)
    });
    assert_eq!(one_failed["state"], "running");
    let why = one_failed["agents"][0]["message"].as_str().unwrap();
    assert!(
        why.contains("ended in the middle of its turn (signal: 9"),
        "{why}"
    );

    // `run stop --agent 2`: its turn is cancelled; the run then sums up and ends.
    let stopped = home.ok(&["run", "stop", &id, "--agent", "2"]);
    assert_eq!(stopped.trim(), "[2] stopped", "{stopped}");
    let waited = home.run(&["run", "wait", &id, "--json"]);
    assert_eq!(waited.code, 1, "{}", waited.stderr);
    let ended: Value = serde_json::from_str(&waited.stdout).unwrap();
    assert_eq!(ended["state"], "ended");
    assert_eq!(states(&ended), ["failed", "stopped"]);
    assert!(
        processes_in(&worktree(1)).is_empty(),
        "the stopped agent's process is gone"
    );
    let mut before_resume = Vec::new();
    for a in ended["agents"].as_array().unwrap() {
        let kept = transcript(&home, a["session"].as_str().unwrap());
        assert_eq!(kept[0], "user: Think it over", "{kept:#?}");
        before_resume.push(kept);
    }
    // The log shows both ends; `--agent` keeps one agent's lines.
    let logs = home.ok(&["run", "logs", &id]);
    assert!(logs.contains("[1] failed"), "{logs}");
    assert!(logs.contains("[2] stopped"), "{logs}");
    assert!(logs.contains("[2] Working on it\n[2] stopped"), "{logs}");
    let second = home.ok(&["run", "logs", &id, "--agent", "2"]);
    assert!(!second.contains("[1]"), "{second}");
    let json = home.ok(&["run", "logs", &id, "--json"]);
    let kinds: Vec<Value> = events(&json)
        .into_iter()
        .map(|e| e["event"].clone())
        .collect();
    assert_eq!(kinds.last().unwrap(), "summary", "{kinds:?}");

    // Resumed: each ACP agent loads the session it had (session/load) and carries on.
    let agent_sessions: Vec<String> = ended["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["acp_session"].as_str().unwrap().to_owned())
        .collect();
    let before = server.request_count();
    server.push(Reply::anthropic(&Turn::new().text(["Thought over."])));
    server.push(Reply::anthropic(&Turn::new().text(["Thought over."])));
    let r = run(berth_run(&home, &server, &root, &["resume", &id, "--json"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let resumed = events(&r.stdout);
    let loaded: Vec<&str> = resumed
        .iter()
        .filter(|e| e["event"] == "agent_session")
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(loaded.len(), 2, "{resumed:#?}");
    assert!(
        loaded
            .iter()
            .all(|id| agent_sessions.iter().any(|s| s == id))
    );
    assert_eq!(states(&show(&home, &id)), ["done", "done"]);
    // What the agents replayed while loading (their earlier prompt and text) is neither shown
    // again nor recorded again: each transcript grows by the new prompt and its answer only.
    for agent in 0..2 {
        let text: String = resumed
            .iter()
            .filter(|e| e["event"] == "text" && e["agent"] == agent)
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(text, "Thought over.", "{resumed:#?}");
        let kept = transcript(&home, ended["agents"][agent]["session"].as_str().unwrap());
        let (old, new) = kept.split_at(before_resume[agent].len());
        assert_eq!(old, before_resume[agent], "{kept:#?}");
        assert_eq!(new.len(), 2, "{kept:#?}");
        assert!(new[0].starts_with("user: Your earlier turn"), "{kept:#?}");
        assert_eq!(new[1], "assistant: Thought over.");
    }
    // The agents were sent their sessions' earlier prompt: they continued them.
    for request in &server.requests()[before..] {
        let messages = request.body["messages"].to_string();
        assert!(
            messages.contains("Think it over") && messages.contains("Your earlier turn"),
            "{messages}"
        );
    }
}

#[test]
fn logs_follow_a_detached_run_to_its_end() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    server.push(
        Reply::anthropic(&Turn::new().text(["First line\n", "second line"]))
            .pause_after(3, Duration::from_millis(800)),
    );
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Say two lines", "--detach"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let id = r.stdout.trim().to_owned();
    // -f returns by itself once the run is over, with everything it streamed.
    let followed = home.ok(&["run", "logs", &id[..4], "-f"]);
    let lines: Vec<&str> = followed.lines().collect();
    assert!(
        lines[0].starts_with("[1] berth started in workspace say-two-lines-1"),
        "{followed}"
    );
    assert!(
        followed.contains("[1] First line\n[1] second line\n"),
        "{followed}"
    );
    assert!(followed.contains("[1] done (end_turn)"), "{followed}");
    let waited = home.run(&["run", "wait", &id]);
    assert_eq!(waited.code, 0, "{}", waited.stderr);
    assert!(
        waited.stdout.contains("done (end_turn)"),
        "{}",
        waited.stdout
    );
}

#[test]
fn kept_runs_refuse_bad_ids_and_say_what_is_wrong() {
    let home = Home::new();
    let bad = home.run(&["run", "show", "../etc"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("invalid run id"), "{}", bad.stderr);
    let missing = home.run(&["run", "show", "abcdef"]);
    assert_eq!(missing.code, 3, "{}", missing.stderr);
    let listed = home.run(&["run", "list"]);
    assert!(listed.stdout.is_empty() && listed.stderr.contains("no runs yet"));
    // A record that cannot be read is reported, never taken for a missing run.
    let dir = home.path().join("runs").join("0123456789ab");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("run.json"), "{ not json").unwrap();
    let corrupt = home.run(&["run", "show", "0123"]);
    assert_eq!(corrupt.code, 5, "{}", corrupt.stderr);
    assert!(corrupt.stderr.contains("corrupt"), "{}", corrupt.stderr);
    let listed = home.run(&["run", "list"]);
    assert_eq!(listed.code, 5, "{}", listed.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.join("run.json")).unwrap(),
        "{ not json"
    );
}

/// `berth run stop` waited for a running `--check` to finish (up to its timeout, 600 s by
/// default, per worktree). A stop now cuts the check short, and says so in its result.
#[test]
fn a_stop_cuts_a_running_check_short() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // It changes something, so its check runs.
    server.push(Reply::anthropic(&write_call("work\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "Do it",
            "--allow",
            "write_file",
            "--check",
            "touch check-started && sleep 600",
            "--detach",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let id = r.stdout.trim().to_owned();
    let worktree = until("the agent's worktree", Duration::from_secs(30), || {
        show(&home, &id)["agents"][0]["worktree"]
            .as_str()
            .map(PathBuf::from)
    });
    until("the check to start", Duration::from_secs(30), || {
        worktree.join("check-started").exists().then_some(())
    });
    home.ok(&["run", "stop", &id]);
    let ended = until("the run to end", Duration::from_secs(20), || {
        let run = show(&home, &id);
        (run["state"] == "ended").then_some(run)
    });
    // Cut short, it neither passed nor failed.
    let check = &ended["agents"][0]["summary"]["check"];
    assert_eq!(check["passed"], false, "{ended:#}");
    assert_eq!(check["not_run"], true, "{ended:#}");
    assert_eq!(check["outcome"], "stopped before it finished", "{ended:#}");
    assert_eq!(ended["agents"][0]["check_passed"], Value::Null, "{ended:#}");
}

/// An ACP agent that answers nothing once prompted, not even its cancel: it says a word,
/// touches `prompted` in its folder (its worktree), then waits for ever.
const DEAF_AGENT: &str = r#"
import json, sys, pathlib
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    def answer(result):
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\n")
        sys.stdout.flush()
    if method == "initialize":
        answer({"protocolVersion": 1, "agentCapabilities": {}})
    elif method == "session/new":
        answer({"sessionId": "deaf-1"})
    elif method == "session/prompt":
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Working"}}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "session/update",
                                     "params": {"sessionId": "deaf-1", "update": update}}) + "\n")
        sys.stdout.flush()
        pathlib.Path("prompted").touch()
"#;

/// A first Ctrl-C asks every agent to stop; an agent that does not answer held the run for
/// its grace period, and a second Ctrl-C was ignored. It now ends the run at once, recorded
/// failed, with what streamed in its log.
#[test]
fn a_second_ctrl_c_ends_the_run_at_once() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // In the repository, so in the agent's worktree: the sandbox hides the rest of /tmp.
    berth_testkit::commit(&root, "deaf_agent.py", DEAF_AGENT);
    let mut cmd = berth_run(
        &home,
        &server,
        &root,
        &["Do it", "--agent-cmd", "python3 deaf_agent.py", "--json"],
    );
    let mut child = cmd
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
        show(&home, &id)["agents"][0]["worktree"]
            .as_str()
            .map(PathBuf::from)
    });
    until("the agent to be prompted", Duration::from_secs(30), || {
        worktree.join("prompted").exists().then_some(())
    });
    let sigint = || {
        let status = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    sigint();
    std::thread::sleep(Duration::from_millis(300));
    let second = std::time::Instant::now();
    sigint();
    let status = until("berth run to end", Duration::from_secs(20), || {
        child.try_wait().unwrap()
    });
    let took = second.elapsed();
    assert!(
        took < Duration::from_millis(2500),
        "the second Ctrl-C took {took:?} to end the run"
    );
    assert_eq!(status.code(), Some(130), "interrupted");
    let ended = show(&home, &id);
    assert_eq!(ended["state"], "failed", "{ended:#}");
    assert_eq!(states(&ended), ["failed"]);
    let why = ended["agents"][0]["message"].as_str().unwrap();
    assert!(why.contains("second Ctrl-C"), "{why}");
    let logs = home.ok(&["run", "logs", &id]);
    assert!(logs.contains("[1] Working"), "{logs}");
}

#[test]
fn a_queued_agent_stopped_ends_without_starting_and_the_run_goes_on() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    std::fs::write(home.path().join("config.toml"), "[run]\nmax_agents = 1\n").unwrap();
    server.push(stalling());
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Think it over", "--agents", "2", "--detach"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let id = r.stdout.trim().to_owned();
    until(
        "agent 1 working, agent 2 queued",
        Duration::from_secs(30),
        || {
            (server.request_count() == 1 && states(&show(&home, &id)) == ["working", "queued"])
                .then_some(())
        },
    );
    // A queued agent has no session yet: there is no one to tell; nothing changes.
    let early = home.run(&["run", "tell", &id, "--agent", "2", "hi"]);
    assert_eq!(early.code, 4, "{}", early.stderr);
    assert!(early.stderr.contains("never started"), "{}", early.stderr);
    // The queued one is stopped: it ends, having made nothing, and the other works on.
    let stopped = home.ok(&["run", "stop", &id, "--agent", "2"]);
    assert_eq!(stopped.trim(), "[2] stopped", "{stopped}");
    let running = show(&home, &id);
    assert_eq!(states(&running), ["working", "stopped"]);
    assert!(running["agents"][1]["workspace"].is_null(), "{running:#}");
    assert!(
        running["agents"][1]["message"]
            .as_str()
            .unwrap()
            .contains("while queued"),
        "{running:#}"
    );
    assert_eq!(
        server.request_count(),
        1,
        "the queued agent never asked the model"
    );
    home.ok(&["run", "stop", &id]);
    let waited = home.run(&["run", "wait", &id, "--json"]);
    let ended: Value = serde_json::from_str(&waited.stdout).unwrap();
    assert_eq!(states(&ended), ["stopped", "stopped"], "{ended:#}");
    let workspaces = home.json(&["workspace", "list", "--json"]);
    assert_eq!(workspaces.as_array().unwrap().len(), 1, "{workspaces:#}");
}

#[test]
fn tell_gives_an_ended_agent_a_follow_up_in_its_own_session() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    server.push(Reply::anthropic(&write_call("first\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Write out.txt", "--allow", "write_file", "--json"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let id = home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ended = show(&home, &id);
    let session = ended["agents"][0]["session"].as_str().unwrap().to_owned();
    let worktree = PathBuf::from(ended["agents"][0]["worktree"].as_str().unwrap());
    // The machine that ran it is kept, and shown.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(ended["agents"][0]["node"], host.trim(), "{ended:#}");
    let shown = home.ok(&["run", "show", &id]);
    assert!(shown.contains(&format!("node: {}", host.trim())), "{shown}");
    // The session's run is indexed: MCP's status finds it without reading every run.
    let indexed = std::fs::read_to_string(home.path().join("run-sessions").join(&session)).unwrap();
    assert_eq!(indexed, id);

    // The follow-up: the same agent, workspace, session and policy.
    server.push(Reply::anthropic(&write_call("second\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Changed it."])));
    let mut tell = berth_run(&home, &server, &root, &[]);
    tell.args(["tell", &id, "Make it say second", "--json"]);
    let told = run(tell);
    assert_eq!(told.code, 0, "{}\n{}", told.stderr, told.stdout);
    assert_eq!(
        std::fs::read_to_string(worktree.join("out.txt")).unwrap(),
        "second\n"
    );
    let kept = transcript(&home, &session);
    assert_eq!(kept[0], "user: Write out.txt", "{kept:#?}");
    assert_eq!(kept[2], "assistant: Done.", "{kept:#?}");
    assert_eq!(kept[3], "user: Make it say second", "{kept:#?}");
    assert_eq!(kept.last().unwrap(), "assistant: Changed it.", "{kept:#?}");
    let after = show(&home, &id);
    assert_eq!(after["state"], "ended", "{after:#}");
    assert_eq!(states(&after), ["done"]);
    assert_eq!(after["agents"][0]["session"], session.as_str());
    assert_eq!(
        home.json(&["run", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Nothing to say, or an agent the run does not have, is refused.
    let empty = home.run(&["run", "tell", &id, " "]);
    assert_eq!(empty.code, 2, "{}", empty.stderr);
    let none = home.run(&["run", "tell", &id, "--agent", "2", "hi"]);
    assert_eq!(none.code, 2, "{}", none.stderr);
    assert!(none.stderr.contains("has no agent 2"), "{}", none.stderr);
}

#[test]
fn tell_on_a_running_run_is_taken_after_the_agents_current_turn() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // The first answer streams slowly: the tell comes while the agent works.
    server.push(
        Reply::anthropic(&Turn::new().text(["Working", " on", " it."]))
            .delay_head(Duration::from_millis(4000)),
    );
    server.push(Reply::anthropic(&write_call("told\n")));
    server.push(Reply::anthropic(
        &Turn::new().text(["Did what I was told."]),
    ));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "Write out.txt",
            "--allow",
            "write_file",
            "--detach",
            "--json",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let detached: Value = serde_json::from_str(&r.stdout).unwrap();
    let id = detached["run"].as_str().unwrap().to_owned();
    until("the agent working", Duration::from_secs(30), || {
        (states(&show(&home, &id)) == ["working"]).then_some(())
    });
    let told = home.run(&["run", "tell", &id, "Also write told into out.txt", "--json"]);
    assert_eq!(told.code, 0, "{}", told.stderr);
    let queued: Value = serde_json::from_str(&told.stdout).unwrap();
    assert_eq!(queued["queued"], true, "{queued:#}");
    assert_eq!(queued["agent"], 1);
    // The run ends once the told turn has: one session, both prompts, both answers.
    let ended = until("the run over", Duration::from_secs(60), || {
        let run = show(&home, &id);
        (run["state"] == "ended").then_some(run)
    });
    assert_eq!(states(&ended), ["done"]);
    let session = ended["agents"][0]["session"].as_str().unwrap();
    let kept = transcript(&home, session);
    assert_eq!(kept[0], "user: Write out.txt", "{kept:#?}");
    assert_eq!(kept[1], "assistant: Working on it.", "{kept:#?}");
    assert_eq!(kept[2], "user: Also write told into out.txt", "{kept:#?}");
    assert_eq!(
        kept.last().unwrap(),
        "assistant: Did what I was told.",
        "{kept:#?}"
    );
    let worktree = PathBuf::from(ended["agents"][0]["worktree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("out.txt")).unwrap(),
        "told\n"
    );
    // The run's events say what it was told, whole, between the two answers: what every
    // front end shows in the transcript.
    let logged = events(&home.ok(&["run", "logs", &id, "--json"]));
    let at = logged
        .iter()
        .position(|e| e["event"] == "told")
        .unwrap_or_else(|| panic!("no told event: {logged:#?}"));
    assert_eq!(logged[at]["text"], "Also write told into out.txt");
    assert!(logged[..at].iter().any(|e| e["event"] == "text"));
    let lines = home.ok(&["run", "logs", &id]);
    assert!(
        lines.contains("[1] told: Also write told into out.txt"),
        "{lines}"
    );
    // An agent that has ended cannot be told while the run goes on; once over, it can.
    let over = home.run(&["run", "tell", &id, " "]);
    assert_eq!(over.code, 2, "{}", over.stderr);
}
