//! Benchmark: what berth's proxy costs an agent's stream. A local server answers each request
//! with a streamed response whose first chunk comes 20 ms after the request (a provider's
//! time to its first token, which in truth is ten times that or more) and the rest 20 ms
//! later. A python client measures, per request, the time from connecting to the
//! first chunk: unconfined, straight to the server, and confined as an agent (its network
//! namespace's only way out is the proxy, reached through the forward of the server's
//! loopback address), in one run. Goal: the confined median at most 1.1 times the direct one.
//!
//! `cargo bench -p berth-sandbox --bench proxy` (`BENCH_ROUNDS`, default 300).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use berth_core::config::SandboxSettings;
use berth_sandbox::{Place, Policy, Subject};

/// The client: ROUNDS requests, each on a new connection; the median time to the first chunk
/// and to the whole answer, in milliseconds.
const CLIENT: &str = r#"
import socket, statistics, sys, time
port, rounds = int(sys.argv[1]), int(sys.argv[2])
first, whole = [], []
for _ in range(rounds):
    t = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    got = s.recv(65536)
    first.append(time.perf_counter() - t)
    while got:
        got = s.recv(65536)
    whole.append(time.perf_counter() - t)
    s.close()
print(f"{statistics.median(first) * 1000:.3f} {statistics.median(whole) * 1000:.3f}")
"#;

fn main() {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in server.incoming().flatten() {
            std::thread::spawn(move || {
                let mut conn = conn;
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf);
                std::thread::sleep(Duration::from_millis(20));
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nevent: message_start\ndata: {}\n\n",
                );
                std::thread::sleep(Duration::from_millis(20));
                let _ = conn.write_all(b"event: message_stop\ndata: {}\n\n");
            });
        }
    });

    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-proxy");
    std::fs::create_dir_all(&base).unwrap();
    let root = tempfile::tempdir_in(&base).unwrap();
    let work = root.path().join("work");
    let home = root.path().join("home");
    let berth_home = root.path().join("berth");
    for d in [&work, &home, &berth_home] {
        std::fs::create_dir_all(d).unwrap();
    }
    let policy =
        Policy::from_settings(&SandboxSettings::default(), Some(&home), &berth_home).unwrap();
    let place = Place {
        work: work.clone(),
        cwd: work.clone(),
        workspace_dir: None,
        ports: vec![],
        protect: vec![],
        readable: vec![],
        hidden: vec![],
    };
    let subject = Subject::Agent {
        hosts: vec![format!("http://127.0.0.1:{port}")],
        writable: vec![],
        env: vec![],
        program: vec![],
        settings: vec![],
        private: vec![],
    };
    let run = |confined: bool| -> (f64, f64) {
        let mut cmd = Command::new("python3");
        cmd.args(["-c", CLIENT, &port.to_string(), &rounds.to_string()])
            .current_dir(&work)
            .stdin(Stdio::null());
        let confinement = policy.confine(&place, &subject).unwrap().unwrap();
        if confined {
            confinement.apply_std(&mut cmd);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let mut it = text.split_whitespace().map(|n| n.parse::<f64>().unwrap());
        (it.next().unwrap(), it.next().unwrap())
    };
    // Interleaved, twice each, so that neither side gets the quieter moment.
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        direct.push(run(false));
        proxied.push(run(true));
    }
    let median = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(|a, b| a.partial_cmp(b).unwrap());
        x[x.len() / 2]
    };
    let (d1, p1) = (median(&direct, |r| r.0), median(&proxied, |r| r.0));
    let (d2, p2) = (median(&direct, |r| r.1), median(&proxied, |r| r.1));
    println!("{rounds} requests per side, medians of 2 interleaved runs");
    println!(
        "{:<28} {:>10} {:>10} {:>7}",
        "", "direct", "proxied", "ratio"
    );
    println!(
        "{:<28} {:>8.3}ms {:>8.3}ms {:>7.2}",
        "connect to first chunk",
        d1,
        p1,
        p1 / d1
    );
    println!(
        "{:<28} {:>8.3}ms {:>8.3}ms {:>7.2}",
        "connect to whole answer",
        d2,
        p2,
        p2 / d2
    );
    println!(
        "added to the first chunk: {:.3} ms; goal: the first chunk at most 1.1 times direct",
        p1 - d1
    );
}
