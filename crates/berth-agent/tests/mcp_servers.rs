//! External MCP servers as the agent's tools, end to end: the agent against berth-testkit's
//! provider server (Anthropic's real streaming format), and `[[mcp_servers]]` pointing at a
//! small stdio MCP server (tests/fixtures/mcp_fixture.py) that misbehaves on request.
//! berth's own `berth mcp`, on stdio and over HTTP, is exercised from the CLI's tests.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use berth_agent::http::HttpPolicy;
use berth_agent::{
    Agent, AgentBuilder, AgentEvent, CancellationToken, Decision, PermissionRequest, Permissions,
    TurnRequest, TurnStop,
};
use berth_ops::{Ops, Session};
use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use serde_json::Value;

struct World {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    ops: Ops,
    session: Session,
}

fn fixture() -> String {
    format!(
        "{}/tests/fixtures/mcp_fixture.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A home whose config names the provider server and `servers` (TOML `[[mcp_servers]]`).
async fn world(server: &ProviderServer, servers: &str) -> World {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "provider = \"claude\"\n[providers.claude]\nbase_url = \"{}\"\nmodel = \"m\"\n{servers}",
            server.url()
        ),
    )
    .unwrap();
    let env = vec![("ANTHROPIC_API_KEY".to_owned(), "sk-test".to_owned())];
    let ops = berth_ops::open(home.path(), &env).unwrap();
    let (_, session) = common::plain_workspace_with_session(&ops, "w").await;
    World {
        home,
        work: tempfile::tempdir().unwrap(),
        ops,
        session,
    }
}

/// The fixture as server `fx`, its pids written to `pids` in the home.
fn fixture_config(extra: &str) -> String {
    format!(
        "[[mcp_servers]]\nname = \"fx\"\ncommand = \"python3\"\nargs = [\"{}\"]\n{extra}",
        fixture()
    )
}

fn agent(w: &World) -> Agent {
    AgentBuilder::new(w.ops.clone())
        .tools(berth_agent::tools::builtin())
        .http_policy(HttpPolicy {
            backoff: Duration::from_millis(10),
            ..HttpPolicy::default()
        })
        .build()
}

/// Allows everything it is asked, and remembers what.
#[derive(Default)]
struct AllowAll {
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl Permissions for AllowAll {
    async fn decide(&self, request: &PermissionRequest) -> Decision {
        self.asked.lock().unwrap().push(request.tool.clone());
        Decision::AllowOnce
    }
}

async fn run(
    agent: &Agent,
    w: &World,
    prompt: &str,
    permissions: Arc<AllowAll>,
) -> Vec<AgentEvent> {
    let mut turn = agent
        .start_turn(TurnRequest {
            session: w.session.clone(),
            prompt: prompt.to_owned(),
            images: Vec::new(),
            cwd: w.work.path().to_owned(),
            permissions,
            cancel: CancellationToken::new(),
            options: Default::default(),
        })
        .await
        .unwrap();
    let mut events = Vec::new();
    while let Some(e) = turn.next_event().await {
        events.push(e);
    }
    events
}

fn stop_of(events: &[AgentEvent]) -> TurnStop {
    match events.last() {
        Some(AgentEvent::TurnEnded { stop, .. }) => stop.clone(),
        other => panic!("the last event is not TurnEnded: {other:?}"),
    }
}

fn notices(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Notice { message } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// The tool names offered in a recorded request.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The `tool_result` blocks of the last message of a recorded request.
fn results(body: &Value) -> Vec<Value> {
    let messages = body["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .cloned()
        .collect()
}

#[tokio::test]
async fn a_servers_tools_are_offered_and_called_by_their_prefixed_names() {
    let server = ProviderServer::start().await;
    server.push(Reply::anthropic(&Turn::new().tool_call(
        "toolu_1",
        "mcp__fx__echo",
        [r#"{"text": "hi there"}"#],
    )));
    server.push(Reply::anthropic(&Turn::new().text(["done"])));
    let w = world(&server, &fixture_config("")).await;
    let permissions = Arc::new(AllowAll::default());
    let events = run(&agent(&w), &w, "echo", permissions.clone()).await;
    assert_eq!(stop_of(&events), TurnStop::EndTurn, "{events:?}");
    let requests = server.requests();
    let tools = offered(&requests[0].body);
    for name in [
        "read_file",
        "mcp__fx__echo",
        "mcp__fx__fail",
        "mcp__fx__grow",
    ] {
        assert!(tools.contains(&name.to_owned()), "{name} not in {tools:?}");
    }
    let got = results(&requests[1].body);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["tool_use_id"], "toolu_1");
    assert_eq!(got[0]["content"], "echo: hi there");
    assert_eq!(got[0]["is_error"], false);
    // `echo` is marked read-only by its server: no permission was asked.
    assert!(permissions.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn is_error_results_and_slow_calls_reach_the_model_as_errors() {
    let server = ProviderServer::start().await;
    server.push(Reply::anthropic(
        &Turn::new()
            .tool_call("toolu_f", "mcp__fx__fail", ["{}"])
            .tool_call("toolu_s", "mcp__fx__slow", ["{}"]),
    ));
    server.push(Reply::anthropic(&Turn::new().text(["noted"])));
    let w = world(&server, &fixture_config("timeout_secs = 1\n")).await;
    let permissions = Arc::new(AllowAll::default());
    let started = Instant::now();
    let events = run(&agent(&w), &w, "try", permissions.clone()).await;
    assert_eq!(stop_of(&events), TurnStop::EndTurn, "{events:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "a slow server held the turn for {:?}",
        started.elapsed()
    );
    // Tools the server does not mark read-only ask first.
    assert_eq!(
        *permissions.asked.lock().unwrap(),
        ["mcp__fx__fail", "mcp__fx__slow"]
    );
    let got = results(&server.requests()[1].body);
    assert_eq!(got[0]["tool_use_id"], "toolu_f");
    assert_eq!(got[0]["is_error"], true);
    assert_eq!(got[0]["content"], "the fixture failed on purpose");
    assert_eq!(got[1]["tool_use_id"], "toolu_s");
    assert_eq!(got[1]["is_error"], true);
    let slow = got[1]["content"].as_str().unwrap();
    assert!(slow.contains("did not answer slow within 1 s"), "{slow}");
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_once_and_the_turn_goes_on() {
    let server = ProviderServer::start().await;
    server.push(Reply::anthropic(&Turn::new().text(["still here"])));
    server.push(Reply::anthropic(&Turn::new().text(["again"])));
    let servers = "[[mcp_servers]]\nname = \"ghost\"\ncommand = \"/nonexistent/berth-no-such-server\"\n\
                   [[mcp_servers]]\nname = \"bad name!\"\ncommand = \"true\"\n";
    let w = world(&server, servers).await;
    let agent = agent(&w);
    let events = run(&agent, &w, "hi", Arc::new(AllowAll::default())).await;
    assert_eq!(stop_of(&events), TurnStop::EndTurn, "{events:?}");
    let said = notices(&events);
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said[0].contains("\"ghost\"") && said[0].contains("cannot start"),
        "{said:?}"
    );
    assert!(said[1].contains("is not 1-32 letters"), "{said:?}");
    assert!(
        !offered(&server.requests()[0].body)
            .iter()
            .any(|t| t.starts_with("mcp__")),
    );
    // The second turn tries `ghost` once more (a restart) and says so once more at most;
    // the state is visible for `/mcp`.
    let events = run(&agent, &w, "hi", Arc::new(AllowAll::default())).await;
    assert_eq!(stop_of(&events), TurnStop::EndTurn);
    let status = agent.mcp_status();
    assert_eq!(status.len(), 2);
    assert!(
        status[0].state.starts_with("failed: cannot start"),
        "{status:?}"
    );
    assert_eq!(status[0].tools, 0);
}

#[tokio::test]
async fn list_changes_are_followed_and_a_dead_server_is_restarted_once() {
    let server = ProviderServer::start().await;
    let pids = tempfile::NamedTempFile::new().unwrap();
    let config = fixture_config(&format!(
        "env = {{ MCP_FIXTURE_PID_FILE = \"{}\" }}\n",
        pids.path().display()
    ));
    let w = world(&server, &config).await;
    let agent = agent(&w);
    let allow = || Arc::new(AllowAll::default());
    // 1: the server adds a tool, and says so.
    server.push(Reply::anthropic(&Turn::new().tool_call(
        "t1",
        "mcp__fx__grow",
        ["{}"],
    )));
    server.push(Reply::anthropic(&Turn::new().text(["grown"])));
    run(&agent, &w, "grow", allow()).await;
    // 2: the new tool is offered; then the server dies mid-call.
    server.push(Reply::anthropic(&Turn::new().tool_call(
        "t2",
        "mcp__fx__die",
        ["{}"],
    )));
    server.push(Reply::anthropic(&Turn::new().text(["it died"])));
    let events = run(&agent, &w, "die", allow()).await;
    assert_eq!(stop_of(&events), TurnStop::EndTurn, "{events:?}");
    let requests = server.requests();
    assert!(offered(&requests[2].body).contains(&"mcp__fx__extra".to_owned()));
    let died = results(&requests[3].body);
    assert_eq!(died[0]["is_error"], true, "{died:?}");
    // 3: it is started again (a second process), and works.
    server.push(Reply::anthropic(&Turn::new().tool_call(
        "t3",
        "mcp__fx__echo",
        [r#"{"text": "back"}"#],
    )));
    server.push(Reply::anthropic(&Turn::new().text(["ok"])));
    let events = run(&agent, &w, "echo", allow()).await;
    assert!(notices(&events).len() <= 1, "{events:?}");
    let requests = server.requests();
    assert_eq!(results(&requests[5].body)[0]["content"], "echo: back");
    let started = std::fs::read_to_string(pids.path()).unwrap();
    assert_eq!(started.lines().count(), 2, "{started}");
    // 4: it dies again; 5: no third start — its tools are left out, and that is said.
    server.push(Reply::anthropic(&Turn::new().tool_call(
        "t4",
        "mcp__fx__die",
        ["{}"],
    )));
    server.push(Reply::anthropic(&Turn::new().text(["died again"])));
    run(&agent, &w, "die", allow()).await;
    server.push(Reply::anthropic(&Turn::new().text(["without it"])));
    let events = run(&agent, &w, "hi", allow()).await;
    assert_eq!(stop_of(&events), TurnStop::EndTurn);
    let requests = server.requests();
    assert!(
        !offered(&requests[8].body)
            .iter()
            .any(|t| t.starts_with("mcp__fx__")),
        "{:?}",
        offered(&requests[8].body)
    );
    assert_eq!(
        std::fs::read_to_string(pids.path())
            .unwrap()
            .lines()
            .count(),
        2
    );
    assert!(
        notices(&events).iter().any(|n| n.contains("\"fx\"")),
        "{events:?}"
    );
    let _ = &w.home;
}
