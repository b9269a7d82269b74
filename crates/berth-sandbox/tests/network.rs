//! An agent's network under a real confinement: only its own provider settings and the allow
//! list open hosts (berth's other `*_BASE_URL`s do not), a name that leads to an internal
//! address or a metadata service is refused, and a provider key berth passes never reaches the
//! agent: it gets a stand-in, and berth's proxy puts the key in. As this user and, when this is
//! root, as an unprivileged user too.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use berth_core::config::SandboxSettings;
use berth_sandbox::{MaskedKeys, Place, Policy, Subject};

mod support;

use support::{DIR_VAR, rerun};

/// The provider key in "berth's" environment (this process's, when rerun with it).
const REAL_KEY: &str = "sk-ant-REAL-KEY-4f1c9e";

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    work: PathBuf,
}

fn world() -> World {
    let parent = std::env::var_os(DIR_VAR).map_or_else(support::base, PathBuf::from);
    let dir = tempfile::Builder::new()
        .prefix("berth-network-test-")
        .tempdir_in(parent)
        .unwrap();
    let root = dir.path().to_owned();
    let work = root.join("work");
    for d in [&work, &root.join("home"), &root.join("berth")] {
        std::fs::create_dir_all(d).unwrap();
    }
    World {
        _dir: dir,
        root,
        work,
    }
}

impl World {
    fn policy(&self, allow_hosts: &[&str]) -> Policy {
        let settings = SandboxSettings {
            allow_hosts: allow_hosts.iter().map(|h| (*h).to_owned()).collect(),
            ..SandboxSettings::default()
        };
        Policy::from_settings(
            &settings,
            Some(&self.root.join("home")),
            &self.root.join("berth"),
        )
        .unwrap()
    }

    fn place(&self) -> Place {
        Place {
            work: self.work.clone(),
            cwd: self.work.clone(),
            workspace_dir: None,
            ports: vec![],
            protect: vec![],
            readable: vec![],
            hidden: vec![],
        }
    }

    /// Runs `program` with `args` confined for `subject` (with `keys` kept from it) in the
    /// work folder; its success and output.
    fn run(
        &self,
        policy: &Policy,
        subject: &Subject,
        keys: &MaskedKeys,
        program: &str,
        args: &[&str],
    ) -> (bool, String) {
        let confinement = policy
            .confine_with(&self.place(), subject, keys)
            .unwrap()
            .expect("the sandbox is on");
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(&self.work).stdin(Stdio::null());
        confinement.apply_std(&mut cmd);
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("{}", confinement.spawn_error(program, &e)));
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }
}

fn agent(hosts: Vec<String>, env: Vec<String>) -> Subject {
    Subject::Agent {
        hosts,
        writable: vec![],
        env,
        program: vec![],
        settings: vec![],
        private: vec![],
    }
}

/// A python script that connects to each `host:port` of `direct` itself, then asks the proxy
/// named by `HTTPS_PROXY` to `CONNECT` to each of `through`; one line each, saying how it went.
fn connect_script(direct: &[String], through: &[String]) -> String {
    format!(
        r#"
import os, socket, urllib.parse
for target in {direct:?}:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        print("DIRECT", target, "connected")
    except OSError as e:
        print("DIRECT", target, "refused:", e)
proxy = urllib.parse.urlparse(os.environ["HTTPS_PROXY"])
for target in {through:?}:
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=60)
    s.sendall(f"CONNECT {{target}} HTTP/1.1\r\nHost: {{target}}\r\n\r\n".encode())
    print("PROXY", target, s.recv(400).split(b"\r\n")[0].decode())
"#
    )
}

fn listener() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

fn assert_nothing_reached(listener: &TcpListener, text: &str) {
    if let Ok((mut s, _)) = listener.accept() {
        let mut got = String::new();
        let _ = s.read_to_string(&mut got);
        panic!("a connection reached the listener ({got:?}):\n{text}");
    }
}

#[test]
#[ignore = "run by berths_other_base_urls_open_nothing, with them in berth's environment"]
fn inner_base_urls_in_berths_environment() {
    let w = world();
    let ollama = std::env::var("OLLAMA_BASE_URL").expect("set by the outer test");
    let port = ollama.rsplit(':').next().unwrap().to_owned();
    // What berth-ops does: all of berth's environment, of which only the agent's own
    // provider settings may open a host.
    let env: Vec<(String, String)> = std::env::vars().collect();
    let profile = berth_sandbox::agent_profile("claude-agent-acp");
    let hosts = berth_sandbox::agent_hosts(
        profile,
        env.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        [],
    );
    let subject = agent(
        hosts,
        profile
            .unwrap()
            .env()
            .into_iter()
            .map(str::to_owned)
            .collect(),
    );
    let local = format!("127.0.0.1:{port}");
    let script = connect_script(
        std::slice::from_ref(&local),
        &[local.clone(), "169.254.169.254:80".to_owned()],
    );
    let (_, text) = w.run(
        &w.policy(&[]),
        &subject,
        &MaskedKeys::default(),
        "python3",
        &["-c", &script],
    );
    assert!(text.contains(&format!("DIRECT {local} refused")), "{text}");
    assert!(
        text.contains(&format!("PROXY {local} HTTP/1.1 403")),
        "{text}"
    );
    assert!(
        text.contains("PROXY 169.254.169.254:80 HTTP/1.1 403"),
        "{text}"
    );
}

/// Finding: with `OLLAMA_BASE_URL=http://127.0.0.1:PORT` in berth's environment (not the
/// agent's), the agent reached that host port; with `METADATA_BASE_URL`, the proxy let it
/// `CONNECT` to the metadata service.
#[test]
fn berths_other_base_urls_open_nothing() {
    let (listener, port) = listener();
    let ollama = format!("http://127.0.0.1:{port}");
    rerun(
        "inner_base_urls_in_berths_environment",
        &[
            ("OLLAMA_BASE_URL", &ollama),
            ("METADATA_BASE_URL", "http://169.254.169.254"),
        ],
    );
    assert_nothing_reached(&listener, "");
}

/// This machine's name: it resolves to an address of this machine (loopback, or its own on a
/// private network), never to a public one.
fn own_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_lowercase();
    let addresses: Vec<_> = std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), 80))
        .unwrap_or_else(|e| panic!("this machine's name {name} does not resolve: {e}"))
        .collect();
    assert!(
        addresses.iter().all(|a| {
            let ip = a.ip().to_canonical();
            ip.is_loopback()
                || matches!(ip, std::net::IpAddr::V4(v4) if v4.is_private() || v4.is_link_local())
        }),
        "{name} resolves to {addresses:?}: this test needs a name of this machine that leads inside"
    );
    name
}

#[test]
fn a_name_leads_inside_only_where_the_address_is_named() {
    let w = world();
    let name = own_name();
    let (listener, port) = listener();
    let by_name = format!("{name}:{port}");
    let subject = agent(vec![], vec![]);
    let script = connect_script(
        &[],
        &[
            by_name.clone(),
            "169.254.169.254:80".to_owned(),
            "metadata.google.internal:80".to_owned(),
        ],
    );
    let policy = w.policy(&[&by_name, "*.google.internal:80"]);
    let (_, text) = w.run(
        &policy,
        &subject,
        &MaskedKeys::default(),
        "python3",
        &["-c", &script],
    );
    for refused in [
        &by_name,
        "169.254.169.254:80",
        "metadata.google.internal:80",
    ] {
        assert!(
            text.contains(&format!("PROXY {refused} HTTP/1.1 403")),
            "{refused}:\n{text}"
        );
    }
    assert_nothing_reached(&listener, &text);
    // Named by its address too, the name leads there.
    let address = std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), port))
        .unwrap()
        .next()
        .unwrap();
    let policy = w.policy(&[&by_name, &address.to_string()]);
    let script = connect_script(&[], std::slice::from_ref(&by_name));
    let (_, text) = w.run(
        &policy,
        &subject,
        &MaskedKeys::default(),
        "python3",
        &["-c", &script],
    );
    assert!(
        text.contains(&format!("PROXY {by_name} HTTP/1.1 200")),
        "{text}"
    );
    listener.set_nonblocking(false).unwrap();
    assert!(listener.accept().is_ok());
}

/// A provider stand-in for one request: hands over what it received (head and body), then
/// answers with a stream of two events a second apart.
fn provider_stand_in() -> (u16, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(&stream);
        let mut head = String::new();
        while !head.ends_with("\r\n\r\n") {
            if reader.read_line(&mut head).unwrap() == 0 {
                break;
            }
        }
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(str::to_owned)
            })
            .map_or(0, |l| l.trim().parse().unwrap());
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        tx.send(head + &String::from_utf8_lossy(&body)).unwrap();
        let mut out = &stream;
        out.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\nevent: message_start\ndata: {}\n\n",
        )
        .unwrap();
        std::thread::sleep(Duration::from_secs(1));
        out.write_all(b"event: message_stop\ndata: {}\n\n").unwrap();
    });
    (port, rx)
}

/// The agent: a program named `claude-agent-acp` that writes down its environment as it sees
/// it (`os.environ`, `/proc/self/environ`, and every other process's it can read), then calls
/// its provider at its base URL with its key, and notes when each line of the answer came.
const CLAUDE_AGENT: &str = r#"#!/usr/bin/env python3
import json, os, time, urllib.error, urllib.request
seen = {"env": dict(os.environ), "environ": open("/proc/self/environ", "rb").read().decode()}
others = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    for part in ("environ", "cmdline"):
        try:
            others.append(open(f"/proc/{pid}/{part}", "rb").read().decode(errors="replace"))
        except OSError:
            pass
seen["others"] = others
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=b'{"model":"m","stream":true}',
    headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json"},
)
start, lines = time.monotonic(), []
try:
    with urllib.request.urlopen(request, timeout=30) as answer:
        for line in answer:
            if line.strip():
                lines.append([round(time.monotonic() - start, 3), line.decode().strip()])
except urllib.error.HTTPError as e:
    seen["error"] = f"{e.code} {e.read().decode()}"
seen["answer"] = lines
with open("seen.json", "w") as f:
    json.dump(seen, f)
print("done")
"#;

/// Runs the agent ([`CLAUDE_AGENT`]) confined as berth-ops starts one it knows: the provider
/// variables berth passes it (its key `key`, and its base URL `base`) kept, and stand-ins
/// given. What it saw, which holds no trace of the key.
fn masked_agent_run(w: &World, key: &str, base: &str) -> serde_json::Value {
    let bin = w.work.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let program = bin.join("claude-agent-acp");
    std::fs::write(&program, CLAUDE_AGENT).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let profile = berth_sandbox::agent_profile(program.to_str().unwrap()).unwrap();
    let passed = vec![
        ("ANTHROPIC_API_KEY".to_owned(), key.to_owned()),
        ("ANTHROPIC_BASE_URL".to_owned(), base.to_owned()),
    ];
    let keys = MaskedKeys::for_agent(Some(profile), &passed).unwrap();
    let subject = agent(
        berth_sandbox::agent_hosts(Some(profile), [], []),
        profile.env().into_iter().map(str::to_owned).collect(),
    );
    let (ok, text) = w.run(
        &w.policy(&[]),
        &subject,
        &keys,
        program.to_str().unwrap(),
        &[],
    );
    assert!(ok && text.contains("done"), "{text}");
    let seen = std::fs::read_to_string(w.work.join("seen.json")).unwrap();
    assert!(!seen.contains(key), "the agent saw the key:\n{seen}");
    serde_json::from_str(&seen).unwrap()
}

#[test]
#[ignore = "run by a_provider_key_never_reaches_the_agent, with the key in berth's environment"]
fn inner_masked_key() {
    let w = world();
    let (port, received) = provider_stand_in();
    // The key is in berth's environment (this process's), as a name the agent is passed.
    let key = std::env::var("ANTHROPIC_API_KEY").unwrap();
    assert_eq!(key, REAL_KEY);
    let seen = masked_agent_run(&w, &key, &format!("http://127.0.0.1:{port}"));
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
    assert!(
        seen["others"].as_array().unwrap().len() >= 2,
        "it read other processes' too: {seen}"
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
    assert!(!request.contains("stand-in"), "{request}");
    assert!(
        request.ends_with(r#"{"model":"m","stream":true}"#),
        "{request}"
    );
    // The stream came as it was sent: the first event a second before the last.
    let answer = seen["answer"].as_array().unwrap();
    let at = |event: &str| {
        answer
            .iter()
            .find(|l| l[1] == event)
            .unwrap_or_else(|| panic!("no {event}: {seen}"))[0]
            .as_f64()
            .unwrap()
    };
    let gap = at("event: message_stop") - at("event: message_start");
    assert!(gap >= 0.5, "the stream was held back (gap {gap} s): {seen}");
}

#[test]
fn a_provider_key_never_reaches_the_agent() {
    rerun("inner_masked_key", &[("ANTHROPIC_API_KEY", REAL_KEY)]);
}

/// The tests' own certificate authority, and a certificate it signed for `localhost` and
/// `127.0.0.1` (valid until 2126), with its key: test material, trusted by nothing else.
const TLS_CA: &str = include_str!("tls/ca.pem");
const TLS_CERT: &str = include_str!("tls/server.pem");
const TLS_KEY: &str = include_str!("tls/server-key.pem");

/// A provider stand-in over TLS, as `localhost`, for one connection: hands over the request
/// it received (or why the handshake failed), answers one event.
fn tls_provider_stand_in() -> (u16, mpsc::Receiver<String>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer> = CertificateDer::pem_slice_iter(TLS_CERT.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(TLS_KEY.as_bytes()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let config = std::sync::Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let connection = rustls::ServerConnection::new(config).unwrap();
        let mut tls = rustls::StreamOwned::new(connection, stream);
        // The head, then as much body as it says.
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            match tls.read(&mut byte) {
                Ok(1) => got.push(byte[0]),
                Ok(_) => break,
                Err(e) => return tx.send(format!("handshake failed: {e}")).unwrap(),
            }
        }
        let head = String::from_utf8_lossy(&got).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.strip_prefix("content-length:")
                    .map(|n| n.trim().parse().unwrap())
            })
            .unwrap_or(0);
        let mut body = vec![0; length];
        tls.read_exact(&mut body).unwrap();
        got.extend_from_slice(&body);
        tx.send(String::from_utf8_lossy(&got).into_owned()).unwrap();
        let body = "event: message_stop\ndata: {}\n\n";
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        tls.write_all(answer.as_bytes()).unwrap();
        tls.conn.send_close_notify();
        let _ = tls.flush();
    });
    (port, rx)
}

#[test]
#[ignore = "run by a_provider_over_https_gets_the_key_over_tls, with the tests' CA trusted"]
fn inner_masked_key_over_tls() {
    let w = world();
    let (port, received) = tls_provider_stand_in();
    let seen = masked_agent_run(&w, REAL_KEY, &format!("https://localhost:{port}"));
    let request = received.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        request.starts_with("POST /v1/messages HTTP/1.1\r\nHost: localhost:"),
        "{request}"
    );
    assert!(
        request
            .to_ascii_lowercase()
            .contains(&format!("x-api-key: {}\r\n", REAL_KEY.to_ascii_lowercase())),
        "{request}"
    );
    assert_eq!(seen["answer"][0][1], "event: message_stop", "{seen}");
}

#[test]
fn a_provider_over_https_gets_the_key_over_tls() {
    let parent = std::env::var_os(DIR_VAR).map_or_else(support::base, PathBuf::from);
    let dir = tempfile::tempdir_in(parent).unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, TLS_CA).unwrap();
    rerun(
        "inner_masked_key_over_tls",
        &[("SSL_CERT_FILE", ca.to_str().unwrap())],
    );
}

#[test]
fn a_provider_whose_certificate_is_not_trusted_gets_no_request() {
    let w = world();
    let (port, received) = tls_provider_stand_in();
    let seen = masked_agent_run(&w, REAL_KEY, &format!("https://localhost:{port}"));
    let error = seen["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("502 ") && error.contains("TLS handshake"),
        "{seen}"
    );
    let request = received.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(request.starts_with("handshake failed"), "{request}");
}

/// The tests above again, as the unprivileged user (when this is root).
#[test]
fn as_an_unprivileged_user_too() {
    if !support::is_root() {
        return; // This process is unprivileged already: the tests above ran as such a user.
    }
    support::as_test_user(&[
        "berths_other_base_urls_open_nothing",
        "a_name_leads_inside_only_where_the_address_is_named",
        "a_provider_key_never_reaches_the_agent",
        "a_provider_over_https_gets_the_key_over_tls",
        "a_provider_whose_certificate_is_not_trusted_gets_no_request",
    ]);
}
