//! A run's workspace network through the real binary: a server an agent's confined command
//! starts on `$BERTH_PORT` answers the host's requests at the same port while it lives, and
//! the port is closed once the run is over; an `allow_hosts` entry on the host's loopback is
//! reached by a confined check with no network, and no other host port is.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::io::{ErrorKind, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use berth_testkit::loopback::{free_port_block, http_get};
use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::wait_ok;
use support::Home;
use support::runs::{berth_run, events, project, write_call};

/// A home whose only block of ports starts at `first`.
fn home_with_block(first: u16, extra: &str) -> Home {
    let home = Home::new();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[ports]\nfirst = {first}\nlast = {}\nblock = 10\n{extra}",
            first + 9
        ),
    )
    .unwrap();
    home
}

#[test]
fn an_agents_server_answers_the_host_while_it_lives() {
    let port = free_port_block(47000);
    let home = home_with_block(port, "");
    let server = ProviderServer::start_in_background();
    // The agent serves its worktree on its port until the host has asked once (the server
    // logs each request), then its command ends, and with it the server.
    let command = r#"python3 -m http.server "$BERTH_PORT" --bind 127.0.0.1 2> served.log &
for i in $(seq 600); do grep -q 'GET /README.md' served.log 2>/dev/null && break; sleep 0.1; done
sleep 0.5; echo "served on $BERTH_PORT""#;
    let args = serde_json::json!({ "command": command }).to_string();
    server.push(Reply::anthropic(&Turn::new().tool_call(
        "c1",
        "run_command",
        [args],
    )));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let (_tmp, root) = project();
    let mut cmd = berth_run(
        &home,
        &server,
        &root,
        &["serve it", "--allow", "run_command", "--json"],
    );
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let run = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        match http_get(port, "/README.md") {
            Ok(answer) if answer.contains("200") => break answer,
            _ if Instant::now() > deadline => panic!("the host never reached the agent's server"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    assert!(answer.ends_with("hello\n"), "{answer}");
    let out = wait_ok(run);
    let started = events(&out);
    let started = started.iter().find(|e| e["event"] == "started").unwrap();
    let worktree = PathBuf::from(started["worktree"].as_str().unwrap());
    assert!(
        std::fs::read_to_string(worktree.join("served.log"))
            .unwrap()
            .contains("GET /README.md"),
    );
    // The run is over: nothing listens there any more, berth included.
    let refused = TcpStream::connect(("127.0.0.1", port)).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "{refused}");
}

/// A confined agent process (not an ACP agent: a script, which is all this needs) that
/// serves its worktree on `$BERTH_PORT` until the host has asked once.
const SERVING_AGENT: &str = r#"#!/bin/sh
python3 -m http.server "$BERTH_PORT" --bind 127.0.0.1 2> served.log &
for i in $(seq 600); do grep -q 'GET /README.md' served.log 2>/dev/null && break; sleep 0.1; done
sleep 0.5
"#;

#[test]
fn a_confined_agent_process_serves_the_host_while_it_lives() {
    use std::os::unix::fs::PermissionsExt;
    let port = free_port_block(47000);
    let home = home_with_block(port, "");
    let server = ProviderServer::start_in_background();
    let (tmp, root) = project();
    let agent = tmp.path().join("serving-agent");
    std::fs::write(&agent, SERVING_AGENT).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = berth_run(
        &home,
        &server,
        &root,
        &["serve it", "--agent-cmd", agent.to_str().unwrap(), "--json"],
    );
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let run = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        match http_get(port, "/README.md") {
            Ok(answer) if answer.contains("200") => break answer,
            _ if Instant::now() > deadline => panic!("the host never reached the agent's server"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    assert!(answer.ends_with("hello\n"), "{answer}");
    // The agent ends (it speaks no ACP: its run fails), and its server with it.
    let _ = run.wait_with_output().unwrap();
    let refused = TcpStream::connect(("127.0.0.1", port)).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "{refused}");
}

/// A host listener that answers each connection with `text`.
fn host_service(text: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let _ = s.write_all(text.as_bytes());
        }
    });
    port
}

#[test]
fn a_check_reaches_the_host_service_the_allow_list_names_and_no_other() {
    let allowed = host_service("FROM-THE-HOST");
    let other = host_service("NOT-FOR-YOU");
    let home = home_with_block(
        free_port_block(47000),
        &format!("[sandbox]\nallow_hosts = [\"127.0.0.1:{allowed}\"]\n"),
    );
    let server = ProviderServer::start_in_background();
    server.push(Reply::anthropic(&write_call("work\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let (_tmp, root) = project();
    let check = format!(
        r#"python3 -c '
import socket
for port in ({allowed}, {other}):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        print("PORT", port, "READ", s.recv(100).decode())
    except OSError as e:
        print("PORT", port, "REFUSED", e)
' > check.out"#
    );
    let mut cmd = berth_run(
        &home,
        &server,
        &root,
        &["work", "--allow", "write_file", "--check", &check, "--json"],
    );
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = wait_ok(cmd.spawn().unwrap());
    let started = events(&out);
    let started = started.iter().find(|e| e["event"] == "started").unwrap();
    let worktree = PathBuf::from(started["worktree"].as_str().unwrap());
    let text = std::fs::read_to_string(worktree.join("check.out")).unwrap();
    assert!(
        text.contains(&format!("PORT {allowed} READ FROM-THE-HOST")),
        "{text}"
    );
    assert!(text.contains(&format!("PORT {other} REFUSED")), "{text}");
}

#[test]
fn doctor_and_config_show_list_the_forwards() {
    let home = home_with_block(
        free_port_block(47000),
        "[sandbox]\nallow_hosts = [\"127.0.0.1:5432\", \"localhost:6379\", \"crates.io\"]\n",
    );
    let shown = home.ok(&["config", "show"]);
    let line = shown
        .lines()
        .find(|l| l.starts_with("# forwards:"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        line.contains("127.0.0.1:5432, localhost:6379") && !line.contains("crates.io"),
        "{line}"
    );
    let json = home.json(&["config", "show", "--json"]);
    assert_eq!(
        json["forwards"],
        serde_json::json!(["127.0.0.1:5432", "localhost:6379"])
    );
    let doctor = home.json(&["doctor", "--json"]);
    let text = doctor.to_string();
    assert!(
        text.contains("from the host's loopback: 127.0.0.1:5432, localhost:6379"),
        "{text}"
    );
}
