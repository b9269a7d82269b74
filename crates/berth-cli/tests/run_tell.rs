//! A word mid-turn: `berth run tell` to an agent of a run while it works, from another
//! `berth` process than the run's supervisor. berth's own agent takes the text at its next
//! step, beside that step's tool results, in the same turn; an ACP agent (`berth acp`, a real
//! ACP agent process) takes it as its next prompt once its turn ends, in the same process, and
//! `--now` cuts its current turn first. The real binary, a real repository, and the provider
//! stand-in speaking Anthropic's streaming format.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::PathBuf;
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::run;
use serde_json::Value;
use support::Home;
use support::runs::{berth_run, events, processes_in, project, transcript, until};

fn show(home: &Home, id: &str) -> Value {
    home.json(&["run", "show", id, "--json"])
}

/// `berth run ARGS --detach --json` on the stand-in: the run's id.
fn detached(home: &Home, server: &ProviderServer, root: &std::path::Path, args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.extend(["--detach", "--json"]);
    let r = run(berth_run(home, server, root, &all));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let started: Value = serde_json::from_str(&r.stdout).unwrap();
    started["run"].as_str().unwrap().to_owned()
}

/// Tells agent 1 of run `id` `text` (with `more` options) and insists it was queued.
fn tell(home: &Home, id: &str, text: &str, more: &[&str]) {
    let mut args = vec!["run", "tell", id, text, "--json"];
    args.extend_from_slice(more);
    let told = home.run(&args);
    assert_eq!(told.code, 0, "{}", told.stderr);
    let queued: Value = serde_json::from_str(&told.stdout).unwrap();
    assert_eq!(queued["queued"], true, "{queued:#}");
}

/// The run, once it is over.
fn ended(home: &Home, id: &str) -> Value {
    until("the run over", Duration::from_secs(90), || {
        let run = show(home, id);
        (run["state"] == "ended").then_some(run)
    })
}

/// The run's events of kind `event`.
fn logged<'a>(all: &'a [Value], event: &str) -> Vec<&'a Value> {
    all.iter().filter(|e| e["event"] == event).collect()
}

/// The text of each content block of an Anthropic request's message, tool results as
/// `result:ID:CONTENT`.
fn blocks(message: &Value) -> Vec<String> {
    match &message["content"] {
        Value::String(text) => vec![text.clone()],
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b["type"].as_str().unwrap() {
                "tool_result" => format!(
                    "result:{}:{}",
                    b["tool_use_id"].as_str().unwrap(),
                    b["content"].as_str().unwrap_or_default()
                ),
                "text" => b["text"].as_str().unwrap().to_owned(),
                other => other.to_owned(),
            })
            .collect(),
        other => panic!("no content: {other}"),
    }
}

/// A tell while berth's agent runs a step's commands (two calls at once: one slow) reaches
/// the model in the same turn, with both results, as the person's words beside them; it
/// waited for the turn's end before, and was the prompt of a second turn.
#[test]
fn a_tell_during_a_command_joins_the_turn_beside_its_results() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let slow = serde_json::json!({"command": "sleep 6; echo slept"}).to_string();
    let quick = serde_json::json!({"command": "echo quick"}).to_string();
    server.push(Reply::anthropic(
        &Turn::new()
            .tool_call("c1", "run_command", [slow])
            .tool_call("c2", "run_command", [quick]),
    ));
    server.push(Reply::anthropic(
        &Turn::new().text(["Handled the empty case too."]),
    ));
    let id = detached(
        &home,
        &server,
        &root,
        &["Fix the parser", "--allow", "run_command"],
    );
    until("the slow command to start", Duration::from_secs(30), || {
        let logs = events(&home.ok(&["run", "logs", &id, "--json"]));
        (logged(&logs, "tool").len() == 2).then_some(())
    });
    tell(&home, &id, "Also handle the empty case", &[]);
    let over = ended(&home, &id);
    assert_eq!(over["agents"][0]["state"], "done", "{over:#}");

    // One turn: the model was asked twice, the second time with both results and the words.
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "a new turn started");
    let messages = requests[1].body["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    let said = blocks(last);
    assert_eq!(said.len(), 3, "{said:#?}");
    assert!(
        said[0].starts_with("result:c1:") && said[0].contains("slept"),
        "{said:#?}"
    );
    assert!(
        said[1].starts_with("result:c2:") && said[1].contains("quick"),
        "{said:#?}"
    );
    assert_eq!(said[2], "Also handle the empty case");
    // The first request knew nothing of it.
    assert!(!requests[0].body.to_string().contains("empty case"));

    // The transcript shows the words where they joined: after the step's tool records,
    // before the answer that read them; the run's events say so in the same place.
    let session = over["agents"][0]["session"].as_str().unwrap();
    let kept = transcript(&home, session);
    assert_eq!(kept[0], "user: Fix the parser", "{kept:#?}");
    let at = kept
        .iter()
        .position(|m| m == "user: Also handle the empty case")
        .unwrap_or_else(|| panic!("not in the transcript: {kept:#?}"));
    assert_eq!(
        kept[1..at]
            .iter()
            .filter(|m| m.starts_with("tool:"))
            .count(),
        2,
        "{kept:#?}"
    );
    assert_eq!(kept[at + 1], "assistant: Handled the empty case too.");
    assert_eq!(kept.len(), at + 2, "{kept:#?}");
    let all = events(&home.ok(&["run", "logs", &id, "--json"]));
    let told = all.iter().position(|e| e["event"] == "told").unwrap();
    assert_eq!(all[told]["text"], "Also handle the empty case");
    assert_eq!(logged(&all[..told], "tool_done").len(), 2, "{all:#?}");
    assert!(logged(&all[..told], "text").is_empty(), "{all:#?}");
    assert_eq!(logged(&all[told..], "text").len(), 1, "{all:#?}");
    assert_eq!(logged(&all, "ended").len(), 1, "{all:#?}");
}

/// `--now` to berth's own agent cuts its current turn (here, an answer that stalls) without
/// stopping it: the text is its next turn, and the run ends done.
#[test]
fn tell_now_cuts_berths_own_agents_turn_and_it_goes_on() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    server.push(
        Reply::anthropic(&Turn::new().text(["Going the long way", " round"]))
            .pause_after(4, Duration::from_secs(600)),
    );
    server.push(Reply::anthropic(&Turn::new().text(["Short way taken."])));
    let id = detached(&home, &server, &root, &["Do it"]);
    until("the first request", Duration::from_secs(30), || {
        (server.request_count() == 1).then_some(())
    });
    tell(&home, &id, "Take the short way", &["--now"]);
    let over = ended(&home, &id);
    assert_eq!(over["agents"][0]["state"], "done", "{over:#}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(blocks(messages.last().unwrap()), ["Take the short way"]);
    let all = events(&home.ok(&["run", "logs", &id, "--json"]));
    assert_eq!(logged(&all, "told").len(), 1, "{all:#?}");
    assert_eq!(logged(&all, "ended").len(), 1, "{all:#?}");
}

/// The ACP agent's process (`berth acp`) and its worktree, once it is prompted.
fn agent_process(home: &Home, server: &ProviderServer, id: &str) -> (PathBuf, u32) {
    until("the agent's first request", Duration::from_secs(30), || {
        (server.request_count() == 1).then_some(())
    });
    let worktree = PathBuf::from(show(home, id)["agents"][0]["worktree"].as_str().unwrap());
    let pid = until("the agent's process", Duration::from_secs(10), || {
        processes_in(&worktree).first().copied()
    });
    (worktree, pid)
}

/// A tell to a working ACP agent was refused ("still running: stop it first"). It is now
/// queued and sent as the agent's next prompt once its turn ends, in the same run, the same
/// ACP session and the same process: the second answer reads the first.
#[test]
fn a_tell_to_a_working_acp_agent_is_its_next_turn_in_the_same_process() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    server.push(
        Reply::anthropic(&Turn::new().text(["Working", " on it."]))
            .delay_head(Duration::from_millis(6000)),
    );
    // Slow enough to see the process that asks for it.
    server.push(
        Reply::anthropic(&Turn::new().text(["Told, and done."]))
            .delay_head(Duration::from_millis(2000)),
    );
    let agent = format!("{} acp", env!("CARGO_BIN_EXE_berth"));
    let id = detached(
        &home,
        &server,
        &root,
        &["Think it over", "--agent-cmd", &agent],
    );
    let (worktree, pid) = agent_process(&home, &server, &id);
    // `--detach`: the dashboard's `t`, the same path (`Runs::tell` with `How::Detached`).
    tell(&home, &id, "Also say when you are done", &["--detach"]);
    until("the told turn's request", Duration::from_secs(30), || {
        (server.request_count() == 2).then_some(())
    });
    assert_eq!(
        processes_in(&worktree),
        [pid],
        "the agent was started again"
    );
    let over = ended(&home, &id);
    assert_eq!(over["agents"][0]["state"], "done", "{over:#}");
    // The same ACP session: its second request carries the first prompt and answer.
    let second = server.requests()[1].body.to_string();
    assert!(second.contains("Think it over"), "{second}");
    assert!(second.contains("Working on it."), "{second}");
    assert!(second.contains("Also say when you are done"), "{second}");
    let kept = transcript(&home, over["agents"][0]["session"].as_str().unwrap());
    assert_eq!(
        kept,
        [
            "user: Think it over",
            "assistant: Working on it.",
            "user: Also say when you are done",
            "assistant: Told, and done."
        ],
        "{kept:#?}"
    );
    let all = events(&home.ok(&["run", "logs", &id, "--json"]));
    assert_eq!(logged(&all, "told").len(), 1, "{all:#?}");
    assert_eq!(logged(&all, "agent_session").len(), 1, "{all:#?}");
    // Its turns over, its process is ended.
    until(
        "the agent's process to end",
        Duration::from_secs(10),
        || processes_in(&worktree).is_empty().then_some(()),
    );
}

/// `--now` cancels only the ACP agent's current turn (`session/cancel`): the agent goes on in
/// the same process with the text, then with what it was told before, which is kept.
#[test]
fn tell_now_cuts_the_acp_agents_turn_and_keeps_its_queue() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // The first answer starts, then stalls for ten minutes: only a cancel ends it.
    server.push(
        Reply::anthropic(&Turn::new().text(["Going the long way", " round"]))
            .pause_after(4, Duration::from_secs(600)),
    );
    server.push(Reply::anthropic(&Turn::new().text(["Short way taken."])));
    server.push(Reply::anthropic(&Turn::new().text(["Tests added."])));
    let agent = format!("{} acp", env!("CARGO_BIN_EXE_berth"));
    let id = detached(&home, &server, &root, &["Do it", "--agent-cmd", &agent]);
    let (worktree, pid) = agent_process(&home, &server, &id);
    tell(&home, &id, "Then add tests", &[]);
    tell(&home, &id, "Stop: take the short way", &["--now"]);
    let over = ended(&home, &id);
    assert_eq!(over["agents"][0]["state"], "done", "{over:#}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let last_prompt = |i: usize| {
        let messages = requests[i].body["messages"].as_array().unwrap();
        blocks(messages.last().unwrap()).join(" ")
    };
    assert_eq!(last_prompt(1), "Stop: take the short way");
    assert_eq!(last_prompt(2), "Then add tests");
    let kept = transcript(&home, over["agents"][0]["session"].as_str().unwrap());
    assert_eq!(kept[0], "user: Do it", "{kept:#?}");
    assert!(
        kept[1].starts_with("assistant: Going the long way"),
        "{kept:#?}"
    );
    assert_eq!(
        kept[2..],
        [
            "user: Stop: take the short way",
            "assistant: Short way taken.",
            "user: Then add tests",
            "assistant: Tests added."
        ],
        "{kept:#?}"
    );
    let all = events(&home.ok(&["run", "logs", &id, "--json"]));
    let told: Vec<&Value> = logged(&all, "told")
        .into_iter()
        .map(|e| &e["text"])
        .collect();
    assert_eq!(told, ["Stop: take the short way", "Then add tests"]);
    assert_eq!(
        logged(&all, "agent_session").len(),
        1,
        "started once: {all:#?}"
    );
    assert!(processes_in(&worktree).iter().all(|p| *p == pid));
}

/// An ACP agent that queues prompts itself, as claude-agent-acp says it does: it holds its
/// first prompt until a second comes, then answers both, each with the same tokens (the work
/// it folded them into).
const QUEUEING_AGENT: &str = r#"
import json, sys, pathlib
held = None
def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()
def say(text):
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "q-1", "update": update}})
done = {"stopReason": "end_turn", "usage": {"totalTokens": 110, "inputTokens": 100, "outputTokens": 10}}
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        caps = {"_meta": {"claudeCode": {"promptQueueing": True}}}
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1, "agentCapabilities": caps}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "q-1"}})
    elif method == "session/prompt" and held is None:
        held = mid
        say("Working")
        pathlib.Path("prompted").touch()
    elif method == "session/prompt":
        say("Folded it in.")
        send({"jsonrpc": "2.0", "id": held, "result": done})
        send({"jsonrpc": "2.0", "id": mid, "result": done})
"#;

/// An agent that says in `initialize` that it queues prompts itself gets what it is told at
/// once, as a prompt, while its first is still unanswered (this agent answers neither before
/// the second comes); the two answers are one turn, whose tokens count once.
#[test]
fn an_agent_that_queues_prompts_is_told_at_once_and_counted_once() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // In the repository, so in the agent's worktree: the sandbox hides the rest of /tmp.
    berth_testkit::commit(&root, "queueing_agent.py", QUEUEING_AGENT);
    let id = detached(
        &home,
        &server,
        &root,
        &["Do it", "--agent-cmd", "python3 queueing_agent.py"],
    );
    let worktree = until("the agent's worktree", Duration::from_secs(30), || {
        show(&home, &id)["agents"][0]["worktree"]
            .as_str()
            .map(PathBuf::from)
    });
    until("the agent to be prompted", Duration::from_secs(30), || {
        worktree.join("prompted").exists().then_some(())
    });
    tell(&home, &id, "Fold this in", &[]);
    let over = ended(&home, &id);
    let agent = &over["agents"][0];
    assert_eq!(agent["state"], "done", "{over:#}");
    assert_eq!(agent["input_tokens"], 100, "{over:#}");
    assert_eq!(agent["output_tokens"], 10, "{over:#}");
    let kept = transcript(&home, agent["session"].as_str().unwrap());
    assert_eq!(
        kept,
        [
            "user: Do it",
            "assistant: Working",
            "user: Fold this in",
            "assistant: Folded it in."
        ],
        "{kept:#?}"
    );
    let all = events(&home.ok(&["run", "logs", &id, "--json"]));
    let told = all.iter().position(|e| e["event"] == "told").unwrap();
    assert_eq!(all[told]["text"], "Fold this in");
    assert_eq!(logged(&all, "ended").len(), 1, "{all:#?}");
}
