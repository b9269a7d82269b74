//! Benchmark: what berth's proxy costs an agent's stream. A local server answers each request
//! with a streamed response whose first chunk comes 20 ms after the request (a provider's
//! time to its first token, which in truth is ten times that or more) and the rest 20 ms
//! later. A python client measures, per request, the time from connecting to the
//! first chunk: unconfined, straight to the server; confined as an agent (its network
//! namespace's only way out is the proxy, reached through the forward of the server's
//! loopback address); and confined as an agent whose key berth keeps (the masked provider:
//! the request goes to berth's proxy at `/berth/anthropic`, which puts the key in and
//! forwards it), in one run. Goal: each confined median at most 1.1 times the direct one.
//!
//! `cargo bench -p berth-sandbox --bench proxy` (`BENCH_ROUNDS`, default 300).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use berth_core::config::SandboxSettings;
use berth_sandbox::{MaskedKeys, PROXY_PORT, Place, Policy, Subject};

/// The client: ROUNDS requests, each on a new connection; the median time to the first chunk
/// and to the whole answer, in milliseconds.
const CLIENT: &str = r#"
import socket, statistics, sys, time
port, rounds, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
first, whole = [], []
for _ in range(rounds):
    t = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nx-api-key: berth-stand-in-ANTHROPIC_API_KEY\r\nContent-Length: 2\r\n\r\n{{}}".encode())
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
    let claude = berth_sandbox::agent_profile("claude-agent-acp");
    let keys = MaskedKeys::for_agent(
        claude,
        &[
            ("ANTHROPIC_API_KEY".to_owned(), "bench-key".to_owned()),
            (
                "ANTHROPIC_BASE_URL".to_owned(),
                format!("http://127.0.0.1:{port}"),
            ),
        ],
    )
    .unwrap();
    let masked = Subject::Agent {
        hosts: vec![],
        writable: vec![],
        env: claude
            .unwrap()
            .env()
            .into_iter()
            .map(str::to_owned)
            .collect(),
        program: vec![],
        settings: vec![],
        private: vec![],
    };
    let run = |how: How| -> (f64, f64) {
        let (target, path) = match how {
            How::Masked => (PROXY_PORT, "/berth/anthropic/v1/messages"),
            _ => (port, "/v1/messages"),
        };
        let mut cmd = Command::new("python3");
        cmd.args(["-c", CLIENT, &target.to_string(), &rounds.to_string(), path])
            .current_dir(&work)
            .stdin(Stdio::null());
        let confinement = match how {
            How::Direct => None,
            How::Forwarded => policy.confine(&place, &subject).unwrap(),
            How::Masked => policy.confine_with(&place, &masked, &keys).unwrap(),
        };
        if let Some(confinement) = &confinement {
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
    // Interleaved, twice each, so that no side gets the quieter moment.
    let (mut direct, mut forwarded, mut masked) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..2 {
        direct.push(run(How::Direct));
        forwarded.push(run(How::Forwarded));
        masked.push(run(How::Masked));
    }
    let median = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(|a, b| a.partial_cmp(b).unwrap());
        x[x.len() / 2]
    };
    println!("{rounds} requests per side, medians of 2 interleaved runs");
    println!(
        "{:<42} {:>10} {:>10} {:>7}",
        "", "direct", "confined", "ratio"
    );
    for (name, confined) in [("forwarded", &forwarded), ("masked provider", &masked)] {
        for (what, f) in [
            (
                "first chunk",
                (|r: &(f64, f64)| r.0) as fn(&(f64, f64)) -> f64,
            ),
            ("whole answer", |r: &(f64, f64)| r.1),
        ] {
            let (d, c) = (median(&direct, f), median(confined, f));
            println!(
                "{:<42} {:>8.3}ms {:>8.3}ms {:>7.2}",
                format!("{name}: connect to {what}"),
                d,
                c,
                c / d
            );
        }
    }
    let first = |v: &[(f64, f64)]| median(v, |r| r.0);
    println!(
        "added to the first chunk: {:.3} ms forwarded, {:.3} ms masked; goal: the first chunk at most 1.1 times direct",
        first(&forwarded) - first(&direct),
        first(&masked) - first(&direct)
    );
}

/// How the client reaches the server.
#[derive(Clone, Copy)]
enum How {
    Direct,
    /// Confined, through the forward of the server's loopback address.
    Forwarded,
    /// Confined, through the masked provider's endpoint on berth's proxy.
    Masked,
}
