//! Runs that ask a person (`berth run --ask`): a call the policy does not cover waits, a
//! `needs_input` notification goes out, `berth run answer` lets it go on; nobody answering is
//! a refusal the model is told of as that; a run without `--ask` refuses by its policy and says
//! so to the model (not "the user refused"); and `run tell --allow` widens the told turn. The
//! real binary, a real repository, the provider stand-in.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::PathBuf;
use std::time::Duration;

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::run;
use serde_json::Value;
use support::Home;
use support::runs::{berth_run, project, until, write_call};

fn show(home: &Home, id: &str) -> Value {
    home.json(&["run", "show", id, "--json"])
}

/// What the model was sent last, as text.
fn last_sent(server: &ProviderServer) -> String {
    server.requests().last().unwrap().body.to_string()
}

#[test]
fn a_call_waits_for_a_person_and_goes_on_when_allowed() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // A webhook: a local server that records what it is sent.
    let hook = ProviderServer::start_in_background();
    hook.push(Reply::json(200, &serde_json::json!({})));
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[[notify]]\nurl = \"{}/hook\"\nevents = [\"needs_input\"]\n",
            hook.url()
        ),
    )
    .unwrap();
    server.push(Reply::anthropic(&write_call("asked for\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Written."])));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Write out.txt", "--ask", "--detach"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let id = r.stdout.trim().to_owned();
    // The write waits, and says on what.
    let waiting = until("the agent to wait", Duration::from_secs(30), || {
        let run = show(&home, &id);
        run["agents"][0]["waiting"].is_object().then_some(run)
    });
    assert_eq!(
        waiting["agents"][0]["waiting"]["tool"], "write_file",
        "{waiting:#}"
    );
    assert_eq!(waiting["state"], "running");
    let worktree = PathBuf::from(waiting["agents"][0]["worktree"].as_str().unwrap());
    assert!(
        !worktree.join("out.txt").exists(),
        "not before it is allowed"
    );
    // A person is told, by the webhook.
    let notice = until("needs_input", Duration::from_secs(10), || {
        hook.requests().first().map(|r| r.body.clone())
    });
    assert_eq!(notice["event"], "needs_input");
    assert_eq!(notice["run"], id.as_str());
    assert!(
        notice["summary"].as_str().unwrap().contains("write_file"),
        "{notice}"
    );
    // Answered: it goes on, and the run ends done.
    let answered = home.json(&["run", "answer", &id, "allow", "--json"]);
    assert_eq!(answered["tool"], "write_file", "{answered}");
    let waited = home.run(&["run", "wait", &id]);
    assert_eq!(waited.code, 0, "{}\n{}", waited.stderr, waited.stdout);
    assert_eq!(
        std::fs::read_to_string(worktree.join("out.txt")).unwrap(),
        "asked for\n"
    );
    let logs = home.ok(&["run", "logs", &id]);
    assert!(
        logs.contains("[1] waits for you: may it write_file?"),
        "{logs}"
    );
    assert!(logs.contains("[1] answered: allow"), "{logs}");
    // Nothing waits now: a second answer is refused, naming why; one notification in all.
    let again = home.run(&["run", "answer", &id, "allow"]);
    assert_ne!(again.code, 0);
    assert_eq!(hook.request_count(), 1);
    assert_eq!(hook.requests()[0].path, "/hook");
}

#[test]
fn nobody_answering_is_a_refusal_and_a_policy_refusal_says_so() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    // Asked, and nobody answers within its second.
    server.push(Reply::anthropic(&write_call("never\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Understood."])));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Write out.txt", "--ask", "--ask-timeout", "1", "--json"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    assert!(r.stdout.contains(r#""answer":"expired""#), "{}", r.stdout);
    assert!(last_sent(&server).contains("nobody answered the request"));
    // Without --ask: refused by the policy, and the model is told it was the policy.
    server.push(Reply::anthropic(&write_call("refused\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Understood."])));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Write out.txt", "--json"],
    ));
    assert!(r.stdout.contains(r#""event":"refused""#), "{}", r.stdout);
    let told = last_sent(&server);
    assert!(
        told.contains("the run's policy does not allow write_file"),
        "{told}"
    );
    assert!(!told.contains("the user refused"), "{told}");
    let id = home.json(&["run", "list", "--json"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let worktree = PathBuf::from(show(&home, &id)["agents"][0]["worktree"].as_str().unwrap());
    // Told again with the tool allowed for that turn: it writes.
    server.push(Reply::anthropic(&write_call("allowed now\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Written."])));
    let mut tell = berth_run(&home, &server, &root, &[]);
    tell.args(["tell", &id, "--allow", "write_file", "Write it now"]);
    let told = run(tell);
    assert_eq!(told.code, 0, "{}\n{}", told.stderr, told.stdout);
    assert_eq!(
        std::fs::read_to_string(worktree.join("out.txt")).unwrap(),
        "allowed now\n"
    );
    // The run's own policy is as it was.
    assert_eq!(show(&home, &id)["request"]["allow"], serde_json::json!([]));
}
