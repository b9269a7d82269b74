//! Benchmark: N ACP clients at once on `berth serve`'s WebSocket (`/acp`), each a whole turn
//! of a 200-chunk answer from the provider stand-in, at N = 1, 10 and 50.
//!
//! `cargo bench -p berth-cli --bench serve_load` (`BENCH_CLIENTS` = "1,10,50", `BENCH_CHUNKS`
//! = 200, `BENCH_CHUNK_MS` = 5: the pause between two chunks of an answer, so a turn takes
//! about a second, as a fast model's does).
//!
//! One real `berth serve` process; each client is the official `agent-client-protocol`
//! crate's client side over its own WebSocket (tokio-tungstenite), one JSON-RPC message per
//! text frame. Each connects, initializes, makes a session, and sends its prompt when all
//! are ready. Printed per N: turns per second (N over the wall time of the whole batch), the
//! p50 time from the prompts to their model calls reaching the provider (berth's own part of
//! the first chunk), the p50 and p99 time from the prompt to its first chunk and to its answer, and the server's
//! resident memory (VmRSS, and its peak VmHWM) after the batch. Every stream is checked whole
//! and in order: a stream that is not fails the benchmark.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest, SessionNotification,
    SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::{Agent, Client, Lines};
use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use common::{env_or, home_on_provider};
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncBufReadExt;
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "serve-load-bench-token";

fn main() {
    let sizes: Vec<usize> = std::env::var("BENCH_CLIENTS")
        .unwrap_or_else(|_| "1,10,50".to_owned())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let chunks = env_or("BENCH_CHUNKS", 200);
    let pause = Duration::from_millis(env_or("BENCH_CHUNK_MS", 5) as u64);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(&sizes, chunks, pause));
}

/// One client's turn: from its prompt, when the first chunk came and when the answer did.
struct Timing {
    first: Duration,
    end: Duration,
}

async fn run(sizes: &[usize], chunks: usize, pause: Duration) {
    let provider = ProviderServer::start_in_background();
    let home = home_on_provider(provider.url());
    let work = tempfile::tempdir().unwrap();
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_berth"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--max-prompts-per-minute",
            "0",
        ])
        .env("BERTH_HOME", home.path())
        .env("BERTH_SERVE_TOKEN", TOKEN)
        .env("ANTHROPIC_API_KEY", "bench")
        .current_dir(work.path())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start berth serve");
    let pid = server.id().unwrap();
    let mut said = tokio::io::BufReader::new(server.stderr.take().unwrap()).lines();
    let line = said.next_line().await.unwrap().unwrap_or_default();

    let address = line
        .split("ws://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("berth serve said: {line}"))
        .to_owned();
    let deltas: Vec<String> = (0..chunks).map(|i| format!("t{i:04} ")).collect();
    let expected = Arc::new(deltas.concat());
    println!(
        "berth serve load: {chunks}-chunk answers ({} ms apart), {} cores",
        pause.as_millis(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:>4} {:>10} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "N",
        "turns/s",
        "model p50",
        "first p50",
        "first p99",
        "end p50",
        "end p99",
        "RSS MB",
        "peak MB"
    );
    for &n in sizes {
        for _ in 0..n {
            provider.push(Reply::anthropic(&Turn::new().text(deltas.clone())).pause_between(pause));
        }
        let start = Arc::new(tokio::sync::Barrier::new(n + 1));
        let clients: Vec<_> = (0..n)
            .map(|_| {
                let (address, expected, start) = (address.clone(), expected.clone(), start.clone());
                let work = work.path().to_path_buf();
                tokio::spawn(async move { one_client(&address, work, expected, start).await })
            })
            .collect();
        start.wait().await;
        let began = Instant::now();
        let mut timings = Vec::with_capacity(n);
        for client in clients {
            timings.push(client.await.expect("a client's task"));
        }
        let wall = began.elapsed();
        // When each model call of this batch reached the provider: berth's own time before
        // the model is asked (the turn's setup, its durable prompt).
        let requests = provider.requests();
        let mut to_model: Vec<Duration> = requests[requests.len() - n..]
            .iter()
            .map(|r| r.received_at.saturating_duration_since(began))
            .collect();
        let (rss, peak) = memory(pid);
        let mut first: Vec<Duration> = timings.iter().map(|t| t.first).collect();
        let mut end: Vec<Duration> = timings.iter().map(|t| t.end).collect();
        println!(
            "{n:>4} {:>10.1} {:>10.1}ms {:>10.1}ms {:>10.1}ms {:>10.1}ms {:>10.1}ms {:>10.1} {:>10.1}",
            n as f64 / wall.as_secs_f64(),
            ms(percentile(&mut to_model, 50)),
            ms(percentile(&mut first, 50)),
            ms(percentile(&mut first, 99)),
            ms(percentile(&mut end, 50)),
            ms(percentile(&mut end, 99)),
            rss,
            peak
        );
    }
    println!("every stream arrived whole and in order");
    let _ = server.start_kill();
}

/// Connects, initializes, makes a session, waits for the others, then sends its prompt and
/// times it; panics unless the answer's text is `expected`, whole and in order.
async fn one_client(
    address: &str,
    work: std::path::PathBuf,
    expected: Arc<String>,
    start: Arc<tokio::sync::Barrier>,
) -> Timing {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{address}/acp").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("connect to /acp");
    let (to_server, from_server) = socket.split();
    let outgoing = to_server
        .sink_map_err(std::io::Error::other)
        .with(async |line: String| Ok::<_, std::io::Error>(Message::text(line)));
    let incoming = from_server.filter_map(async |frame| match frame {
        Ok(Message::Text(text)) => Some(Ok(text.as_str().to_owned())),
        Ok(_) => None,
        Err(e) => Some(Err(std::io::Error::other(e))),
    });
    let transport = Lines::new(outgoing, incoming);
    let text = Arc::new(Mutex::new(String::new()));
    let first = Arc::new(Mutex::new(None::<Instant>));
    let (seen_text, seen_first) = (text.clone(), first.clone());
    let timing = Client
        .v1()
        .on_receive_notification(
            async move |n: SessionNotification, _cx: ConnectionTo<Agent>| {
                if let SessionUpdate::AgentMessageChunk(chunk) = n.update
                    && let ContentBlock::Text(t) = chunk.content
                {
                    seen_first.lock().unwrap().get_or_insert_with(Instant::now);
                    seen_text.lock().unwrap().push_str(&t.text);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let session = cx
                .send_request(NewSessionRequest::new(work))
                .block_task()
                .await?
                .session_id;
            start.wait().await;
            let sent = Instant::now();
            let answer = cx
                .send_request(PromptRequest::new(
                    session,
                    vec![ContentBlock::Text(TextContent::new("stream".to_owned()))],
                ))
                .block_task()
                .await?;
            let end = sent.elapsed();
            assert_eq!(answer.stop_reason, StopReason::EndTurn);
            let first = first.lock().unwrap().expect("a first chunk") - sent;
            Ok(Timing { first, end })
        })
        .await
        .expect("the client's connection");
    assert!(
        *text.lock().unwrap() == *expected,
        "a stream arrived incomplete or out of order"
    );
    timing
}

/// The server's resident memory now and at its peak, in MB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn percentile(values: &mut [Duration], p: usize) -> Duration {
    values.sort();
    values[(values.len() * p / 100).min(values.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
