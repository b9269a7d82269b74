//! Benchmark: what reaching an agent's server from the host through its workspace's network
//! costs. One python server answers each connection with a small HTTP response; it runs
//! twice at once, unconfined on the host (the baseline) and confined in a workspace whose port
//! berth forwards from the host's loopback. A python client on the host measures, per request
//! on a new connection, the time to the whole answer, against each; one line per way, their
//! ratio and the time the forward adds, measured in the same run. Goal: the forward adds at
//! most 0.5 ms to a new connection's median exchange. (A ratio says little here: the
//! baseline, a tenth of a millisecond on loopback, is all fixed cost, and a forward is one
//! more connection, a socket made in the namespace and a relay of two threads.)
//!
//! `cargo bench -p berth-sandbox --bench ports` (`BENCH_ROUNDS`, default 500).

#![allow(clippy::unwrap_used)] // a benchmark: a panic is the failure it reports

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use berth_core::config::SandboxSettings;
use berth_sandbox::{Place, Policy, Subject};

const SERVER: &str = r#"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(128)
while True:
    c, _ = s.accept()
    c.recv(4096)
    c.sendall(b"HTTP/1.0 200 OK\r\ncontent-length: 5\r\n\r\nhello")
    c.close()
"#;

/// ROUNDS requests, each on a new connection; the median and the 90th percentile, in ms.
const CLIENT: &str = r#"
import socket, statistics, sys, time
port, rounds = int(sys.argv[1]), int(sys.argv[2])
took = []
for _ in range(rounds):
    t = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    got = b""
    while True:
        part = s.recv(4096)
        if not part:
            break
        got += part
    took.append(time.perf_counter() - t)
    s.close()
    assert got.endswith(b"hello"), got
took.sort()
print(f"{statistics.median(took) * 1000:.3f} {took[int(len(took) * 0.9)] * 1000:.3f}")
"#;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The client's median and 90th percentile against `port`.
fn measure(port: u16, rounds: usize) -> (f64, f64) {
    let out = Command::new("python3")
        .args(["-c", CLIENT, &port.to_string(), &rounds.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut parts = text.split_whitespace().map(|p| p.parse::<f64>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

/// Waits until `port` on the host's loopback answers a request.
fn until_served(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Command::new("python3")
        .args(["-c", CLIENT, &port.to_string(), "1"])
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        assert!(Instant::now() < deadline, "port {port} never answered");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-ports");
    std::fs::create_dir_all(&base).unwrap();
    let root = tempfile::tempdir_in(&base).unwrap();
    let work = root.path().join("work");
    let home = root.path().join("home");
    let berth_home = root.path().join("berth");
    for d in [&work, &home, &berth_home] {
        std::fs::create_dir_all(d).unwrap();
    }
    let (direct, forwarded) = (free_port(), free_port());
    let policy =
        Policy::from_settings(&SandboxSettings::default(), Some(&home), &berth_home).unwrap();
    let place = Place {
        work: work.clone(),
        cwd: work.clone(),
        workspace_dir: None,
        ports: vec![forwarded],
        protect: vec![],
        readable: vec![],
        hidden: vec![],
    };
    let mut host: Child = Command::new("python3")
        .args(["-c", SERVER, &direct.to_string()])
        .spawn()
        .unwrap();
    let confinement = policy
        .confine(&place, &Subject::Command)
        .unwrap()
        .expect("the sandbox is on");
    let mut cmd = Command::new("python3");
    cmd.args(["-c", SERVER, &forwarded.to_string()])
        .current_dir(&work);
    confinement.apply_std(&mut cmd);
    let mut confined = cmd.spawn().unwrap();
    until_served(direct);
    until_served(forwarded);
    let (d50, d90) = measure(direct, rounds);
    let (f50, f90) = measure(forwarded, rounds);
    println!("{rounds} requests, each on a new connection, to the whole answer:");
    println!("  direct to a server on the host:      median {d50:.3} ms, p90 {d90:.3} ms");
    println!("  forwarded into a workspace's network: median {f50:.3} ms, p90 {f90:.3} ms");
    println!(
        "  ratio (forwarded / direct): median {:.2}x, p90 {:.2}x; added: median {:.3} ms (goal: <= 0.5 ms)",
        f50 / d50,
        f90 / d90,
        f50 - d50
    );
    let _ = host.kill();
    let _ = confined.kill();
    let _ = host.wait();
    let _ = confined.wait();
}
