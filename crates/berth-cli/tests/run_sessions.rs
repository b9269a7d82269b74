//! What a run's sessions say answers in them: an ACP agent's session names that agent, in
//! `session show` (JSON and text) and `session list`, never berth's configured model, which
//! does not answer there; berth's own agent's session names its model and no agent. The real
//! binary, a real repository, the provider stand-in, and an ACP agent that is a committed
//! script which speaks nothing and exits (its session is made before it starts).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::run;
use support::Home;
use support::runs::{berth_run, project};

/// Reads its first line and exits: no ACP answer, so the agent fails, its session kept.
const SILENT_AGENT: &str = "import sys\nsys.stdin.readline()\nsys.exit(1)\n";

/// The session of the only agent of the only run in `home`.
fn the_session(home: &Home) -> String {
    let runs = home.json(&["run", "list", "--json"]);
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs:#}");
    let shown = home.json(&["run", "show", runs[0]["id"].as_str().unwrap(), "--json"]);
    shown["agents"][0]["session"].as_str().unwrap().to_owned()
}

#[test]
fn an_acp_agents_session_names_the_agent_not_berths_model() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // In the repository, so in the agent's worktree: the sandbox hides the rest of /tmp.
    berth_testkit::commit(&root, "silent_agent.py", SILENT_AGENT);
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Do it", "--agent", "cmd:python3 silent_agent.py"],
    ));
    assert_eq!(r.code, 1, "{}\n{}", r.stderr, r.stdout);
    let session = the_session(&home);

    let shown = home.json(&["session", "show", &session, "--json"]);
    assert_eq!(
        shown["session"]["agent"], "python3 silent_agent.py",
        "{shown:#}"
    );
    // No price of berth's model is the agent's cost.
    assert!(shown["cost_usd"].is_null(), "{shown:#}");

    let text = home.ok(&["session", "show", &session]);
    assert!(
        text.contains("agent:     python3 silent_agent.py\n"),
        "{text}"
    );
    assert!(!text.contains("model:"), "{text}");
    assert!(!text.contains("claude/"), "{text}");
    assert!(!text.contains("test-model"), "{text}");

    let listed = home.ok(&["session", "list"]);
    assert!(listed.contains("agent python3 silent_agent.py"), "{listed}");
    assert!(!listed.contains("claude/"), "{listed}");
    let listed = home.json(&["session", "list", "--json"]);
    assert_eq!(listed[0]["agent"], "python3 silent_agent.py", "{listed:#}");
}

#[test]
fn berths_own_agents_session_names_its_model_and_no_agent() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let r = run(berth_run(&home, &server, &root, &["Say done"]));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let session = the_session(&home);

    let shown = home.json(&["session", "show", &session, "--json"]);
    assert!(shown["session"]["agent"].is_null(), "{shown:#}");
    // Present, though null: a reader tells "berth's own" from "not said".
    assert!(
        shown["session"].as_object().unwrap().contains_key("agent"),
        "{shown:#}"
    );
    assert_eq!(shown["session"]["model"], "test-model", "{shown:#}");

    let text = home.ok(&["session", "show", &session]);
    assert!(text.contains("model:     claude/test-model\n"), "{text}");
    assert!(!text.contains("agent:"), "{text}");
    let listed = home.ok(&["session", "list"]);
    assert!(listed.contains("claude/test-model"), "{listed}");
}
