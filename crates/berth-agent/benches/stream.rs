//! Benchmark: 2,000 streamed chunks from a local provider server through the whole agent loop
//! (HTTP, SSE parsing, the Anthropic dialect, the loop, the event channel, the transcript
//! append) to the consumer of the events, beside reading the same response's raw bytes with
//! the same HTTP client in the same run.
//!
//! `cargo bench -p berth-agent --bench stream` (`BENCH_CHUNKS` and `BENCH_ROUNDS` change the
//! sizes). Goal: loop / raw ≤ 1.2.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use berth_agent::{
    Agent, AgentBuilder, AgentEvent, CancellationToken, Decision, PermissionRequest, Permissions,
    TurnRequest, TurnStop,
};
use berth_ops::{CreateSession, CreateWorkspace, Ops, Repository, WorkspaceView};
use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use futures::StreamExt;

struct Refuse;

#[async_trait]
impl Permissions for Refuse {
    async fn decide(&self, _: &PermissionRequest) -> Decision {
        Decision::Reject
    }
}

fn main() {
    let chunks: usize = env_or("BENCH_CHUNKS", 2000);
    let rounds: usize = env_or("BENCH_ROUNDS", 15);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        // On a thread and runtime of its own, so the baseline does not share its threads with
        // the server; and coalescing a burst under Nagle's algorithm, so the baseline reads it in
        // a few large reads, the hardest case for the loop to match.
        let server = ProviderServer::start_in_background();
        server.set_nagle(true);
        let deltas: Vec<String> = (0..chunks).map(|i| format!("token {i:05} ")).collect();
        let reply = || Reply::anthropic(&Turn::new().text(deltas.clone()));
        let expected = deltas.concat();

        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            format!("[providers.claude]\nbase_url = \"{}\"\n", server.url()),
        )
        .unwrap();
        let env = vec![("ANTHROPIC_API_KEY".to_owned(), "bench".to_owned())];
        let ops = berth_ops::open(home.path(), &env).unwrap();
        let ws = ops
            .create_workspace(CreateWorkspace::new(Repository::None))
            .await
            .unwrap();
        let agent = AgentBuilder::new(ops.clone()).build();
        // The same client stack the providers use: reqwest on rustls with ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::new();
        let work = tempfile::tempdir().unwrap();

        let mut raw = Vec::new();
        let mut looped = Vec::new();
        for round in 0..rounds {
            // Alternate which goes first, so neither always pays for the other's leftovers
            // (a connection closing, a transcript's writeback).
            for contender in [round % 2, 1 - round % 2] {
                if contender == 0 {
                    raw.push(read_raw(&server, &client, reply(), chunks).await);
                } else {
                    looped.push(
                        run_loop(&server, &agent, &ops, &ws, work.path(), reply(), &expected).await,
                    );
                }
            }
        }
        let (r, l) = (median(&mut raw), median(&mut looped));
        println!("agent stream benchmark: {chunks} chunks, {rounds} rounds, 2 cores");
        println!("{:<52} {:>10}", "contender", "median");
        println!(
            "{:<52} {:>7.2} ms",
            "raw HTTP read of the stream (baseline)",
            ms(r)
        );
        println!(
            "{:<52} {:>7.2} ms",
            "agent loop to the event channel",
            ms(l)
        );
        println!(
            "ratio loop / raw = {:.2} (goal <= 1.2)",
            l.as_secs_f64() / r.as_secs_f64()
        );
    });
}

/// The baseline: the same response, its bytes read and dropped.
async fn read_raw(
    server: &ProviderServer,
    client: &reqwest::Client,
    reply: Reply,
    chunks: usize,
) -> Duration {
    server.push(reply);
    let start = Instant::now();
    let resp = client
        .post(format!("{}/v1/messages", server.url()))
        .body("{}")
        .send()
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    let mut bytes = 0;
    while let Some(b) = body.next().await {
        bytes += b.unwrap().len();
    }
    let took = start.elapsed();
    assert!(bytes > chunks * 10);
    took
}

/// The loop: a turn in a fresh session (so the history stays one message), its events read
/// until the turn ends. Pieces that arrive together come as one event, so the text is checked
/// whole, not counted.
async fn run_loop(
    server: &ProviderServer,
    agent: &Agent,
    ops: &Ops,
    ws: &WorkspaceView,
    work: &Path,
    reply: Reply,
    expected: &str,
) -> Duration {
    let session = ops
        .create_session(CreateSession {
            workspace: ws.id.to_string(),
            ..CreateSession::default()
        })
        .await
        .unwrap();
    server.push(reply);
    let start = Instant::now();
    let mut turn = agent
        .start_turn(TurnRequest {
            session,
            prompt: "stream".into(),
            images: Vec::new(),
            cwd: work.to_owned(),
            permissions: Arc::new(Refuse),
            cancel: CancellationToken::new(),
            options: Default::default(),
        })
        .await
        .unwrap();
    let mut text = String::new();
    while let Some(event) = turn.next_event().await {
        match event {
            AgentEvent::Text { text: piece } => text.push_str(&piece),
            AgentEvent::TurnEnded { stop, .. } => assert_eq!(stop, TurnStop::EndTurn),
            _ => {}
        }
    }
    let took = start.elapsed();
    assert!(text == expected, "every piece arrived, in order");
    took
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(xs: &mut [Duration]) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
