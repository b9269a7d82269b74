//! What an ACP agent sends that berth's protocol version does not read. Claude's adapter
//! (claude-agent-acp 0.23.1) sends a `usage_update` whose `size` is `null` when its model has
//! no context window it knows: the SDK's handler failed on it, and the person's terminal showed
//! the SDK's "Handler errored" and "Ignoring message-processing error because there is no
//! request to answer", as berth's own words, naming nothing. Such an update is dropped, said
//! at debug with its method, its kind and the agent; the run goes on.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use berth_testkit::provider_server::ProviderServer;
use support::Home;
use support::runs::{berth_run, events, project, transcript};

/// An ACP agent on raw JSON-RPC lines: at its prompt, a `usage_update` as claude-agent-acp
/// sends it without a context window, then its answer.
const AGENT: &str = r#"
import json, sys
def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()
def update(u):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "u-1", "update": u}})
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": mid, "result": {"sessionId": "u-1"}})
    elif method == "session/prompt":
        update({"sessionUpdate": "usage_update", "used": 1200, "size": None,
                "cost": {"amount": 0.01, "currency": "USD"}})
        update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Done."}})
        send({"jsonrpc": "2.0", "id": mid, "result": {"stopReason": "end_turn"}})
"#;

#[test]
fn an_update_berth_does_not_read_is_dropped_at_debug_naming_it() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    berth_testkit::commit(&root, "agent.py", AGENT);
    let run = |log: Option<&str>| {
        let mut cmd = berth_run(
            &home,
            &server,
            &root,
            &["Do it", "--agent-cmd", "python3 agent.py", "--json"],
        );
        cmd.env_remove("RUST_LOG");
        if let Some(log) = log {
            cmd.env("RUST_LOG", log);
        }
        berth_testkit::run(cmd)
    };
    // A person's run: nothing of it on the terminal, and the answer kept.
    let plain = run(None);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(
        !plain.stderr.contains("Handler errored"),
        "{}",
        plain.stderr
    );
    assert!(
        !plain.stderr.contains("no request to answer"),
        "{}",
        plain.stderr
    );
    let started = events(&plain.stdout);
    let started = started.iter().find(|e| e["event"] == "started").unwrap();
    let kept = transcript(&home, started["session"].as_str().unwrap());
    assert_eq!(kept.last().unwrap(), "assistant: Done.", "{kept:#?}");
    // At debug, the line says what was dropped, and whose.
    let debug = run(Some("berth_run=debug"));
    assert_eq!(debug.code, 0, "{}", debug.stderr);
    let line = debug
        .stderr
        .lines()
        .find(|l| l.contains("berth does not read"))
        .unwrap_or_else(|| panic!("{}", debug.stderr));
    assert!(
        line.contains("agent 1")
            && line.contains("`session/update`")
            && line.contains("`usage_update`"),
        "{line}"
    );
}
