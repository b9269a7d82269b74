//! A workspace's network under a real confinement: every confined tree of one workspace
//! shares it (one tree reaches the server another started), its ports are reached from the
//! host while a server of it listens, an `allow_hosts` entry on the host's loopback is
//! forwarded into it for a command with no network, and nothing else of the host's loopback
//! is. As this user and, when this is root, as an unprivileged user too.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::io::{ErrorKind, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use berth_core::config::SandboxSettings;
use berth_sandbox::{Place, Policy, Subject};

mod support;

use berth_testkit::loopback::http_get;

use support::World;

/// How long a test waits for what must happen.
const PATIENCE: Duration = Duration::from_secs(20);

fn place(w: &World, ports: Vec<u16>) -> Place {
    Place {
        work: w.worktree.clone(),
        cwd: w.worktree.clone(),
        workspace_dir: Some(w.workspace.clone()),
        ports,
        protect: vec![],
        readable: vec![],
        hidden: vec![],
    }
}

fn policy(w: &World, allow_hosts: &[String]) -> Policy {
    let settings = SandboxSettings {
        allow_hosts: allow_hosts.to_vec(),
        ..SandboxSettings::default()
    };
    Policy::from_settings(&settings, Some(&w.user_home), &w.berth_home).unwrap()
}

/// A port nothing on the host listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `program args` started confined as a command at `place` under `policy`.
fn spawn(policy: &Policy, place: &Place, program: &str, args: &[&str]) -> Child {
    let confinement = policy
        .confine(place, &Subject::Command)
        .unwrap()
        .expect("the sandbox is on");
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&place.work)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    confinement.apply_std(&mut cmd);
    cmd.spawn()
        .unwrap_or_else(|e| panic!("{}", confinement.spawn_error(program, &e)))
}

/// `program args` run confined to its end: its success and output.
fn run(policy: &Policy, place: &Place, program: &str, args: &[&str]) -> (bool, String) {
    let out = spawn(policy, place, program, args)
        .wait_with_output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// A python script that fetches `http://127.0.0.1:PORT/README`, retrying for a while; it
/// prints the body.
fn fetch_script(port: u16) -> String {
    format!(
        r#"
import time, urllib.request
for _ in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:{port}/README", timeout=5).read().decode())
        break
    except OSError as e:
        last = e
        time.sleep(0.1)
else:
    print("FAILED", last)
"#
    )
}

#[test]
fn trees_share_the_workspaces_network_and_its_ports_reach_the_host() {
    let w = support::world();
    let port = free_port();
    let place = place(&w, vec![port]);
    let policy = policy(&w, &[]);
    // While nothing of the workspace serves there, the port is the host's.
    assert!(run(&policy, &place, "true", &[]).0);
    drop(TcpListener::bind(("127.0.0.1", port)).expect("the port is free on the host"));
    let text = port.to_string();
    let mut server = spawn(
        &policy,
        &place,
        "python3",
        &["-m", "http.server", &text, "--bind", "127.0.0.1"],
    );
    // Another tree of the same workspace reaches it.
    let (_, fetched) = run(&policy, &place, "python3", &["-c", &fetch_script(port)]);
    assert!(fetched.contains("hi"), "{fetched}");
    // So does the host, at the same port.
    let deadline = Instant::now() + PATIENCE;
    let answer = loop {
        match http_get(port, "/README") {
            Ok(answer) => break answer,
            Err(e) if Instant::now() > deadline => panic!("the host got no answer: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    assert!(answer.ends_with("hi\n"), "{answer}");
    // A server gone, its port is closed on the host again.
    server.kill().unwrap();
    server.wait().unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => break,
            _ => assert!(Instant::now() < deadline, "the port stays open"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // And the network closed, the port is closed.
    berth_sandbox::close_network(&w.workspace);
    let refused = TcpStream::connect(("127.0.0.1", port)).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "{refused}");
}

#[test]
fn another_workspace_does_not_share_it() {
    let (a, b) = (support::world(), support::world());
    let port = free_port();
    let policy_a = policy(&a, &[]);
    let text = port.to_string();
    let mut server = spawn(
        &policy_a,
        &place(&a, vec![]),
        "python3",
        &["-m", "http.server", &text, "--bind", "127.0.0.1"],
    );
    let (_, own) = run(
        &policy_a,
        &place(&a, vec![]),
        "python3",
        &["-c", &fetch_script(port)],
    );
    assert!(own.contains("hi"), "{own}");
    let (_, other) = run(
        &policy(&b, &[]),
        &place(&b, vec![]),
        "python3",
        &["-c", &fetch_script(port)],
    );
    assert!(other.contains("FAILED"), "{other}");
    server.kill().unwrap();
    server.wait().unwrap();
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

/// A python script that connects to each port of `ports` on the loopback and prints what it
/// read, or that it was refused.
fn read_script(ports: &[u16]) -> String {
    format!(
        r#"
import socket
for port in {ports:?}:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        print("PORT", port, "READ", s.recv(100).decode())
    except OSError as e:
        print("PORT", port, "REFUSED", e)
"#
    )
}

#[test]
fn the_hosts_loopback_is_reached_only_where_the_allow_list_names_it() {
    let w = support::world();
    let allowed = host_service("FROM-THE-HOST");
    let other = host_service("NOT-FOR-YOU");
    // `network` left off: a command has no way out but the forwards.
    let policy = policy(&w, &[format!("127.0.0.1:{allowed}")]);
    let (_, text) = run(
        &policy,
        &place(&w, vec![]),
        "python3",
        &["-c", &read_script(&[allowed, other])],
    );
    assert!(
        text.contains(&format!("PORT {allowed} READ FROM-THE-HOST")),
        "{text}"
    );
    assert!(text.contains(&format!("PORT {other} REFUSED")), "{text}");
    assert!(!text.contains("NOT-FOR-YOU"), "{text}");
}

/// Finding: past five loopback entries, the forwards were dropped without a word.
#[test]
fn every_loopback_entry_is_forwarded() {
    let w = support::world();
    let ports: Vec<u16> = (0..8).map(|_| host_service("SERVICE")).collect();
    let entries: Vec<String> = ports.iter().map(|p| format!("localhost:{p}")).collect();
    let (_, text) = run(
        &policy(&w, &entries),
        &place(&w, vec![]),
        "python3",
        &["-c", &read_script(&ports)],
    );
    for port in ports {
        assert!(
            text.contains(&format!("PORT {port} READ SERVICE")),
            "{text}"
        );
    }
}

#[test]
fn a_port_the_host_uses_is_an_error_naming_it() {
    let w = support::world();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (policy, place) = (policy(&w, &[]), place(&w, vec![port]));
    let text = port.to_string();
    // Served inside, where a process of the host holds the port: the server of the
    // workspace runs, and its forward is refused, naming the port.
    let mut server = spawn(
        &policy,
        &place,
        "python3",
        &["-m", "http.server", &text, "--bind", "127.0.0.1"],
    );
    let deadline = Instant::now() + PATIENCE;
    let error = loop {
        let forwards = berth_sandbox::network_forwards(&w.workspace);
        if let Some(error) = forwards
            .iter()
            .find(|f| f.inward && f.port == port)
            .and_then(|f| f.error.clone())
        {
            break error;
        }
        assert!(Instant::now() < deadline, "no error: {forwards:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
    server.kill().unwrap();
    server.wait().unwrap();
    berth_sandbox::close_network(&w.workspace);
}

#[test]
fn as_an_unprivileged_user_too() {
    if !support::is_root() {
        return; // This process is unprivileged already: the tests above ran as such a user.
    }
    support::as_test_user(&[
        "trees_share_the_workspaces_network_and_its_ports_reach_the_host",
        "another_workspace_does_not_share_it",
        "the_hosts_loopback_is_reached_only_where_the_allow_list_names_it",
        "every_loopback_entry_is_forwarded",
        "a_port_the_host_uses_is_an_error_naming_it",
    ]);
}
