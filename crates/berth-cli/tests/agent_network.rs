//! What an `--agent-cmd` process reaches, as `berth run` starts it: its own provider settings
//! open hosts and berth's other `*_BASE_URL`s do not, and its provider key stays in berth (the
//! agent holds a stand-in; berth's proxy puts the key in on its way to the provider).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use berth_testkit::provider_server::ProviderServer;
use berth_testkit::run;
use support::Home;
use support::runs::{berth_run, events, project};

const REAL_KEY: &str = "sk-ant-REAL-KEY-e2e-77a1";

/// The agent: a program named `claude-agent-acp` (so berth takes it for Claude's adapter)
/// that writes down what it sees and reaches into `seen.json` in its worktree: its
/// environment, `/proc/self/environ`, a direct connection and a proxy's `CONNECT` to each
/// `host:port` its command line names, and its provider's answer at its base URL with its key.
const AGENT: &str = r#"#!/usr/bin/env python3
import json, os, socket, sys, urllib.parse, urllib.request
seen = {"env": dict(os.environ), "environ": open("/proc/self/environ", "rb").read().decode()}
proxy = urllib.parse.urlparse(os.environ["HTTPS_PROXY"])
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        seen["direct " + target] = "connected"
    except OSError as e:
        seen["direct " + target] = str(e)
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=60)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    seen["proxy " + target] = s.recv(400).split(b"\r\n")[0].decode()
if "ANTHROPIC_BASE_URL" in os.environ:
    request = urllib.request.Request(
        os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
        data=b'{"stream":true}',
        headers={"x-api-key": os.environ.get("ANTHROPIC_API_KEY", "")},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            seen["answer"] = answer.read().decode()
    except Exception as e:
        seen["answer"] = "failed: " + str(e)
json.dump(seen, open("seen.json", "w"))
"#;

/// A folder outside `/tmp` (a confined process has a private one) holding the agent on `bin/`,
/// and `PATH` with it first.
fn agent_on_path() -> (tempfile::TempDir, std::ffi::OsString) {
    let scratch = tempfile::tempdir_in("/var/tmp").unwrap();
    let bin = scratch.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let script = bin.join("claude-agent-acp");
    std::fs::write(&script, AGENT).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    (scratch, path)
}

/// Runs `berth run --agent-cmd "claude-agent-acp TARGETS"` with `env` added to berth's
/// environment; what the agent wrote down.
fn seen_by_the_agent(env: &[(&str, &str)], targets: &[&str]) -> serde_json::Value {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (_tmp, root) = project();
    let (_scratch, path) = agent_on_path();
    let agent = format!("claude-agent-acp {}", targets.join(" "));
    let mut cmd = berth_run(
        &home,
        &server,
        &root,
        &["Do it", "--agent-cmd", &agent, "--json"],
    );
    cmd.env("PATH", &path).envs(env.iter().copied());
    let r = run(cmd);
    let events = events(&r.stdout);
    let started = events
        .iter()
        .find(|e| e["event"] == "started")
        .unwrap_or_else(|| panic!("the run did not start: {}\n{}", r.stderr, r.stdout));
    let worktree = PathBuf::from(started["worktree"].as_str().unwrap());
    read_seen(&worktree, &r.stderr)
}

fn read_seen(worktree: &Path, stderr: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(worktree.join("seen.json"))
        .unwrap_or_else(|e| panic!("the agent did not run ({e}): {stderr}"));
    assert!(!text.contains(REAL_KEY), "the agent saw the key:\n{text}");
    serde_json::from_str(&text).unwrap()
}

/// Finding: berth passed all of its environment to the agent's hosts, so an
/// `OLLAMA_BASE_URL` on this machine's loopback and a `METADATA_BASE_URL` that were berth's,
/// not the agent's, were both reachable by it.
#[test]
fn berths_own_base_urls_open_nothing_to_an_agent() {
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    other.set_nonblocking(true).unwrap();
    let port = other.local_addr().unwrap().port();
    let local = format!("127.0.0.1:{port}");
    let seen = seen_by_the_agent(
        &[
            ("OLLAMA_BASE_URL", &format!("http://{local}")),
            ("METADATA_BASE_URL", "http://169.254.169.254"),
        ],
        &[&local, "169.254.169.254:80"],
    );
    assert_ne!(seen[format!("direct {local}")], "connected", "{seen}");
    let refused = |target: &str| {
        seen[format!("proxy {target}")]
            .as_str()
            .unwrap()
            .starts_with("HTTP/1.1 403")
    };
    assert!(refused(&local), "{seen}");
    assert!(refused("169.254.169.254:80"), "{seen}");
    assert!(other.accept().is_err(), "a connection reached the listener");
    assert!(seen["env"].get("OLLAMA_BASE_URL").is_none(), "{seen}");
}

/// A provider stand-in for one request: hands over what it received, answers with a stream.
fn provider_stand_in() -> (u16, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(&stream);
        let mut head = String::new();
        while !head.ends_with("\r\n\r\n") && reader.read_line(&mut head).unwrap() > 0 {}
        let length: usize = head
            .lines()
            .find_map(|l| {
                let l = l.to_ascii_lowercase();
                l.strip_prefix("content-length:")
                    .map(|n| n.trim().parse().unwrap())
            })
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        tx.send(head + &String::from_utf8_lossy(&body)).unwrap();
        (&stream)
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\nevent: message_stop\ndata: {}\n\n")
            .unwrap();
    });
    (port, rx)
}

#[test]
fn an_agents_provider_key_stays_in_berth() {
    let (port, received) = provider_stand_in();
    let seen = seen_by_the_agent(
        &[
            ("ANTHROPIC_API_KEY", REAL_KEY),
            ("ANTHROPIC_BASE_URL", &format!("http://127.0.0.1:{port}")),
        ],
        &[],
    );
    assert_eq!(
        seen["env"]["ANTHROPIC_API_KEY"], "berth-stand-in-ANTHROPIC_API_KEY",
        "{seen}"
    );
    assert_eq!(
        seen["env"]["ANTHROPIC_BASE_URL"], "http://127.0.0.1:3128/berth/anthropic",
        "{seen}"
    );
    let environ = seen["environ"].as_str().unwrap();
    assert!(
        environ.contains("ANTHROPIC_API_KEY=berth-stand-in-ANTHROPIC_API_KEY\0"),
        "{environ:?}"
    );
    assert_eq!(
        seen["answer"], "event: message_stop\ndata: {}\n\n",
        "{seen}"
    );
    let request = received.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        request.starts_with("POST /v1/messages HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(
        request
            .to_ascii_lowercase()
            .contains(&format!("x-api-key: {}\r\n", REAL_KEY.to_ascii_lowercase())),
        "the provider did not get the key:\n{request}"
    );
}
