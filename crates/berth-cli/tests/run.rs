//! `berth run` end to end: the real binary, a real repository, berth's own agents against the
//! local provider stand-in (Anthropic's streaming format).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::run;
use serde_json::Value;
use support::Home;
use support::runs::{berth_run, events, project, transcript, write_call};

#[test]
fn three_agents_work_side_by_side_each_in_its_own_worktree() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    std::fs::write(
        home.path().join("config.toml"),
        "[prices.\"test-model\"]\ninput = 3.0\noutput = 15.0\n",
    )
    .unwrap();
    // Each agent's first request gets a write (answered slowly, so all three first requests
    // arrive before any second one), then each gets its closing text.
    for _ in 0..3 {
        server.push(
            Reply::anthropic(&write_call("from an agent\n"))
                .delay_head(Duration::from_millis(1500)),
        );
    }
    for _ in 0..3 {
        server.push(Reply::anthropic(&Turn::new().text(["Done."]).usage(10, 5)));
    }
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "Write out.txt",
            "--agents",
            "3",
            "--allow",
            "write_file",
            "--check",
            "test -f out.txt",
            "--json",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let events = events(&r.stdout);
    let started: Vec<&Value> = events.iter().filter(|e| e["event"] == "started").collect();
    assert_eq!(started.len(), 3, "{events:#?}");
    let mut names: Vec<&str> = started
        .iter()
        .map(|e| e["workspace_name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["write-out-txt-1", "write-out-txt-2", "write-out-txt-3"]
    );
    for e in &started {
        // Each agent's file is in its own worktree, and nowhere else.
        let worktree = PathBuf::from(e["worktree"].as_str().unwrap());
        assert_eq!(
            std::fs::read_to_string(worktree.join("out.txt")).unwrap(),
            "from an agent\n"
        );
        // The whole transcript: the task, the tool call with its result, the answer.
        let kept = transcript(&home, e["session"].as_str().unwrap());
        assert_eq!(kept.len(), 3, "{kept:#?}");
        assert_eq!(kept[0], "user: Write out.txt");
        assert!(
            kept[1].starts_with("tool: `write_file` {") && kept[1].contains("\n\nresult:"),
            "{kept:#?}"
        );
        assert_eq!(kept[2], "assistant: Done.");
    }
    // The run is kept: `run list` and `run show` find it ended, each agent done.
    let runs = home.json(&["run", "list", "--json"]);
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs:#}");
    assert_eq!(runs[0]["state"], "ended");
    let id = runs[0]["id"].as_str().unwrap();
    let shown = home.json(&["run", "show", &id[..6], "--json"]);
    let agents = shown["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 3);
    for e in &started {
        let a = &agents[e["agent"].as_u64().unwrap() as usize];
        assert_eq!(a["state"], "done", "{a:#}");
        assert_eq!(a["session"], e["session"], "{a:#}");
        assert_eq!(a["summary"]["check"]["passed"], true, "{a:#}");
    }
    assert!(
        !root.join("out.txt").exists(),
        "the main checkout is untouched"
    );
    assert_eq!(events.iter().filter(|e| e["event"] == "checked").count(), 3);
    let summary = events.last().unwrap();
    assert_eq!(summary["event"], "summary");
    for a in summary["agents"].as_array().unwrap() {
        assert_eq!(a["state"], "done", "{a}");
        assert_eq!(a["check"]["passed"], true, "{a}");
        assert_eq!(a["files_changed"], 1, "{a}");
        assert_eq!(a["added"], 1, "{a}");
        assert!(a["output_tokens"].as_u64().unwrap() > 0, "{a}");
        // The session kept the turn's tokens, and the summary prices them by [prices].
        let shown = home.json(&["session", "show", a["session"].as_str().unwrap(), "--json"]);
        let usage = &shown["session"]["usage"];
        assert_eq!(usage["input_tokens"], a["input_tokens"], "{shown}");
        assert_eq!(usage["output_tokens"], a["output_tokens"], "{shown}");
        let want = (usage["input_tokens"].as_f64().unwrap() * 3.0
            + usage["output_tokens"].as_f64().unwrap() * 15.0)
            / 1e6;
        assert!(want > 0.0);
        assert!(
            (a["cost_usd"].as_f64().unwrap() - want).abs() < 1e-12,
            "{a}"
        );
        assert_eq!(shown["cost_usd"], a["cost_usd"], "{shown}");
    }
    assert_eq!(server.pending_replies(), 0);
}

#[test]
fn a_write_the_policy_does_not_allow_is_refused_shown_and_fails_the_run() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    server.push(Reply::anthropic(&write_call("nope\n")));
    server.push(Reply::anthropic(
        &Turn::new().text(["I could not write it."]),
    ));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "Write out.txt",
            "--check",
            "test -f out.txt",
            "--name",
            "policy",
        ],
    ));
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.stdout);
    assert!(
        r.stdout
            .contains("[1] refused write_file (allow it with --allow write_file"),
        "{}",
        r.stdout
    );
    // Nothing changed, so nothing was checked: no evidence, and the run fails.
    assert!(
        r.stdout
            .contains("check `test -f out.txt` not run (the agent changed nothing)"),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("not every agent"), "{}", r.stderr);
    let worktree = home.json(&["workspace", "show", "policy-1", "--json"])["git"]["worktree"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!Path::new(&worktree).join("out.txt").exists());
    // The model was told its call was refused.
    let requests = server.requests();
    let result = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"][0]
        .clone();
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["is_error"], true, "{result}");
}

#[test]
fn bad_requests_are_refused_before_anything_is_made() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    for (args, says) in [
        (vec!["   "], "the task is empty"),
        (vec!["task", "--agents", "0"], "1 to 32"),
        (vec!["task", "--agents", "claude:x"], "NAME:COUNT"),
        (vec!["task", "--name", "no/slash"], "workspace name"),
    ] {
        let r = run(berth_run(&home, &server, &root, &args));
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
    // Outside a repository: refused before any workspace is made.
    let plain = tempfile::tempdir().unwrap();
    let r = run(berth_run(
        &home,
        &server,
        plain.path(),
        &["task", "--agents", "2"],
    ));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("in no git repository"), "{}", r.stderr);
    assert_eq!(
        home.json(&["workspace", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

/// An ACP agent by its command: `berth acp` itself, driven over its stdio. Its file write
/// comes back to berth as `fs/write_text_file` (berth offers the client's file system), lands
/// in its own worktree, and the run records the task and the answer.
#[test]
fn an_acp_agent_by_its_command_works_in_its_worktree() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // Text before the call, so the transcript's order (text, record, text) is put to the test.
    let args = serde_json::json!({"path": "out.txt", "content": "from berth acp\n"}).to_string();
    server.push(Reply::anthropic(
        &Turn::new()
            .text(["Writing ", "it."])
            .tool_call("w1", "write_file", [args]),
    ));
    server.push(Reply::anthropic(&Turn::new().text(["Written."])));
    let agent = format!("{} acp", env!("CARGO_BIN_EXE_berth"));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "Write out.txt",
            "--agent-cmd",
            &agent,
            "--allow",
            "write_file",
            "--json",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let events = events(&r.stdout);
    let started = events.iter().find(|e| e["event"] == "started").unwrap();
    let worktree = PathBuf::from(started["worktree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("out.txt")).unwrap(),
        "from berth acp\n"
    );
    assert!(!root.join("out.txt").exists());
    let text: String = events
        .iter()
        .filter(|e| e["event"] == "text")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Writing it.Written.");
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "tool" && e["kind"] == "edit"),
        "{events:#?}"
    );
    let summary = events.last().unwrap();
    assert_eq!(summary["agents"][0]["state"], "done", "{summary}");
    assert_eq!(summary["agents"][0]["files_changed"], 1, "{summary}");
    // The run's transcript of an ACP agent: the task, the text it streamed before its tool
    // call (written before the record, not merged with the text after it), the call as the
    // agent reported it (title, input, result), then the rest of its answer.
    let kept = transcript(&home, started["session"].as_str().unwrap());
    assert_eq!(kept.len(), 4, "{kept:#?}");
    assert_eq!(kept[0], "user: Write out.txt");
    assert_eq!(kept[1], "assistant: Writing it.");
    assert!(
        kept[2].starts_with("tool: `write_file out.txt` {\"path\":\"out.txt\"")
            && kept[2].contains("result:")
            && kept[2].contains("Wrote 'out.txt'"),
        "{kept:#?}"
    );
    assert_eq!(kept[3], "assistant: Written.");
}

#[test]
fn max_agents_keeps_the_others_queued_until_a_place_frees() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    std::fs::write(home.path().join("config.toml"), "[run]\nmax_agents = 2\n").unwrap();
    // Slow answers, so agents would overlap if nothing held them back.
    for _ in 0..4 {
        server.push(
            Reply::anthropic(&Turn::new().text(["Done."]).usage(10, 5))
                .delay_head(Duration::from_millis(700)),
        );
    }
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Look around", "--agents", "4", "--json"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let events = events(&r.stdout);
    // The events come in the order things happened: count the agents working at each one.
    let (mut working, mut most) = (0, 0);
    let mut queued = Vec::new();
    for e in &events {
        match e["event"].as_str().unwrap() {
            "queued" => {
                assert_eq!(e["max_agents"], 2, "{e}");
                queued.push(e["agent"].as_u64().unwrap());
            }
            "started" => {
                working += 1;
                most = most.max(working);
            }
            "ended" => working -= 1,
            _ => {}
        }
    }
    assert_eq!(
        most, 2,
        "never more than two at once, and two did work together: {events:#?}"
    );
    assert_eq!(
        queued,
        [2, 3],
        "the agents past the two places waited, in order"
    );
    let summary = events.last().unwrap();
    let states: Vec<&str> = summary["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["done"; 4]);
    assert_eq!(server.pending_replies(), 0);
}

#[test]
fn a_repository_by_url_is_cloned_fetched_and_given_its_branches_back() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let tmp = tempfile::tempdir().unwrap();
    let url = berth_testkit::bare_remote(tmp.path());
    let remote = tmp.path().join("remote.git");
    // Each agent's first request gets a write (answered slowly, so both first requests arrive
    // before either second one), then each gets its closing text.
    for _ in 0..2 {
        server.push(
            Reply::anthropic(&write_call("from an agent\n"))
                .delay_head(Duration::from_millis(1500)),
        );
    }
    for _ in 0..2 {
        server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    }
    // Run from a folder in no repository: the URL names it.
    let r = run(berth_run(
        &home,
        &server,
        tmp.path(),
        &[
            "Write out.txt",
            "--repo",
            &url,
            "--agents",
            "2",
            "--allow",
            "write_file",
            "--json",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let pushed: Vec<String> = events(&r.stdout)
        .iter()
        .filter(|e| e["event"] == "pushed")
        .map(|e| e["branch"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(pushed.len(), 2, "{}", r.stdout);
    // Each branch is on the remote, holding its agent's file, committed on top of main.
    for branch in &pushed {
        let file = berth_testkit::git(&remote, &["show", &format!("{branch}:out.txt")]);
        assert_eq!(file, "from an agent\n", "{branch}");
        let main = berth_testkit::git(&remote, &["rev-parse", "main"]);
        let parent = berth_testkit::git(&remote, &["rev-parse", &format!("{branch}^")]);
        assert_eq!(parent, main, "{branch} starts at the remote's main");
    }
    // The clone is berth's, under the home; a new commit on the remote is fetched by the next
    // run, whose worktree starts there.
    let clones: Vec<_> = std::fs::read_dir(home.path().join("repos"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".git"))
        .collect();
    assert_eq!(clones.len(), 1, "one clone per URL");
    let seed = tmp.path().join("seed");
    berth_testkit::commit(&seed, "NEWS.md", "moved on\n");
    berth_testkit::git(
        &seed,
        &["push", "--quiet", remote.to_str().unwrap(), "main"],
    );
    // It changes something, so its check runs.
    server.push(Reply::anthropic(&write_call("looked\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Nothing more to do."])));
    let r = run(berth_run(
        &home,
        &server,
        tmp.path(),
        // git works in the worktree, confined: it reads berth's clone of the URL.
        &[
            "Look",
            "--repo",
            &url,
            "--allow",
            "write_file",
            "--check",
            "git log -1 --format=%s",
            "--json",
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let started = events(&r.stdout)
        .into_iter()
        .find(|e| e["event"] == "started")
        .unwrap();
    let worktree = PathBuf::from(started["worktree"].as_str().unwrap());
    assert!(
        worktree.join("NEWS.md").exists(),
        "the run started from the fetched main"
    );
}

#[test]
fn compare_shows_the_agents_side_by_side() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // Two agents: one writes one line, the other two (which gets which is the race's).
    for content in ["one\n", "one\ntwo\n"] {
        server.push(Reply::anthropic(&write_call(content)).delay_head(Duration::from_millis(1500)));
    }
    for _ in 0..2 {
        server.push(Reply::anthropic(&Turn::new().text(["Done."]).usage(10, 5)));
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
        ],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let runs = home.json(&["run", "list", "--json"]);
    let id = runs[0]["id"].as_str().unwrap();
    let compared = home.json(&["run", "compare", id, "--json"]);
    assert_eq!(compared["state"], "ended", "{compared:#}");
    let agents = compared["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2);
    let mut added: Vec<u64> = agents
        .iter()
        .map(|a| {
            assert_eq!(a["state"], "done");
            assert_eq!(a["check_passed"], true);
            // Both requests' tokens: the write's and the closing text's (10 + 5).
            let tokens = a["input_tokens"].as_u64().unwrap() + a["output_tokens"].as_u64().unwrap();
            assert!(tokens > 15, "{a:#}");
            let files = a["files"].as_array().unwrap();
            assert_eq!(files.len(), 1, "{a:#}");
            assert_eq!(files[0]["path"], "out.txt");
            assert_eq!(files[0]["status"], "added");
            a["added"].as_u64().unwrap()
        })
        .collect();
    added.sort();
    assert_eq!(added, [1, 2]);
    // On a terminal: the agents as columns, a row per measure and per file.
    let table = home.ok(&["run", "compare", &id[..6]]);
    assert!(
        table.contains("1 write-out-txt-1") && table.contains("2 write-out-txt-2"),
        "{table}"
    );
    let file_row = table.lines().find(|l| l.starts_with("out.txt")).unwrap();
    assert!(
        file_row.contains("+1 -0") && file_row.contains("+2 -0"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("check") && l.matches("passed").count() == 2),
        "{table}"
    );
}

#[test]
fn an_agent_past_its_token_budget_is_stopped_and_recorded_as_budget() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (tmp, root) = project();
    let told = tmp.path().join("notified.json");
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[[notify]]\ncommand = \"cat > '{}'\"\nevents = [\"budget\"]\n",
            told.display()
        ),
    )
    .unwrap();
    // The first answer costs 30 tokens and asks for a tool: past a budget of 20, the agent is
    // stopped before the tool runs or the model is asked again.
    server.push(Reply::anthropic(&write_call("never\n").usage(20, 10)));
    server.push(Reply::anthropic(&Turn::new().text(["Not reached."])));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &[
            "Write out.txt",
            "--allow",
            "write_file",
            "--max-tokens",
            "20",
            "--json",
        ],
    ));
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.stdout);
    let events = events(&r.stdout);
    let ended = events.iter().find(|e| e["event"] == "ended").unwrap();
    assert_eq!(ended["state"], "budget", "{ended:#}");
    assert!(
        ended["message"]
            .as_str()
            .unwrap()
            .contains("30 tokens, over the 20 allowed"),
        "{ended:#}"
    );
    assert_eq!(server.request_count(), 1);
    let worktree = PathBuf::from(
        events.iter().find(|e| e["event"] == "started").unwrap()["worktree"]
            .as_str()
            .unwrap(),
    );
    assert!(!worktree.join("out.txt").exists());
    let runs = home.json(&["run", "list", "--json"]);
    assert_eq!(runs[0]["agents"][0]["state"], "budget", "{runs:#}");
    // The run's end said so, as `budget`.
    let notice: Value = serde_json::from_str(&std::fs::read_to_string(&told).unwrap()).unwrap();
    assert_eq!(notice["event"], "budget", "{notice:#}");
    assert!(
        notice["summary"].as_str().unwrap().starts_with("0 of 1"),
        "{notice:#}"
    );
}
