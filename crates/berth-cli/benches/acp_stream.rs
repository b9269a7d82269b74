//! Benchmark: 2,000 streamed chunks relayed by `berth acp` from a local provider server to an
//! ACP client, beside the same client reading the provider server's stream directly, in the
//! same run; then how fast a cancel ends a long answer.
//!
//! `cargo bench -p berth-cli --bench acp_stream` (`BENCH_CHUNKS`, `BENCH_ROUNDS` and
//! `BENCH_CANCELS` change the sizes). Goals (issue 13): relay / direct ≤ 1.5, every chunk in
//! order; a cancel answered `cancelled` within 100 ms.
//!
//! One client program does both: the official `agent-client-protocol` crate as the client of a
//! real `berth acp` process (its stdio, newline-delimited JSON-RPC), and a plain HTTP/1.1
//! request over TCP to the same provider server (berth-testkit's, speaking Anthropic's real
//! server-sent events) for the direct read. The relay figure is a whole prompt: a fresh
//! session's `session/prompt` sent, the agent's HTTP request, parsing, the agent loop, 2,000
//! `session/update` notifications parsed by the client, and the transcript written, until the
//! prompt's answer arrives. The direct figure is the request and the read of the whole
//! stream. Both are measured twice: with Nagle's algorithm left on in the provider server, so
//! that a burst of events reaches the direct reader in a few large reads (the goal is judged
//! here, where the baseline is fastest), and with the server sending each event at once
//! (`TCP_NODELAY`, as the providers' own servers do), where the direct reader is woken for
//! every event. The server runs on a thread and runtime of its own. `berth acp` merges pieces that arrive within `MERGE_WINDOW` (10 ms) of its last update, so the
//! client gets the 2,000 chunks' text in fewer notifications; their number is printed, and
//! the text is checked whole and in order every round.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest,
    SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use common::{env_or, home_on_provider};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

fn main() {
    let chunks: usize = env_or("BENCH_CHUNKS", 2000);
    let rounds: usize = env_or("BENCH_ROUNDS", 15);
    let cancels: usize = env_or("BENCH_CANCELS", 10);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(chunks, rounds, cancels));
}

/// What the client saw of the agent's answers.
#[derive(Default)]
struct Seen {
    text: String,
    chunks: usize,
    /// Chunks of every prompt, never reset.
    total: usize,
}

async fn run(chunks: usize, rounds: usize, cancels: usize) {
    // On a thread and runtime of its own: the direct reader must not share its runtime with
    // the server it reads from, any more than `berth acp` does.
    let server = Arc::new(ProviderServer::start_in_background());
    let deltas: Vec<String> = (0..chunks).map(|i| format!("token {i:05} ")).collect();
    let expected: String = deltas.concat();
    let home = home_on_provider(server.url());
    let work = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_berth"))
        .arg("acp")
        .env("BERTH_HOME", home.path())
        .env("ANTHROPIC_API_KEY", "bench")
        .current_dir(work.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start berth acp");
    let transport = ByteStreams::new(
        child.stdin.take().unwrap().compat_write(),
        child.stdout.take().unwrap().compat(),
    );

    let seen = Arc::new(Mutex::new(Seen::default()));
    let (count_tx, count_rx) = watch::channel(0usize);
    let handler_seen = seen.clone();
    let work_dir = work.path().to_path_buf();
    Client
        .v1()
        .on_receive_notification(
            async move |n: SessionNotification, _cx: ConnectionTo<Agent>| {
                if let SessionUpdate::AgentMessageChunk(chunk) = n.update
                    && let ContentBlock::Text(t) = chunk.content
                {
                    let mut seen = handler_seen.lock().unwrap();
                    seen.text.push_str(&t.text);
                    seen.chunks += 1;
                    seen.total += 1;
                    count_tx.send_replace(seen.total);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            let reply = || Reply::anthropic(&Turn::new().text(deltas.clone()));
            // Each server mode: events leave one by one (TCP_NODELAY, as the providers' servers
            // send them), then coalesced under Nagle's algorithm (a burst read in a few big
            // reads, the easiest case for the direct reader).
            let mut modes = Vec::new();
            for nagle in [true, false] {
                server.set_nagle(nagle);
                let mut direct = Vec::new();
                let mut relayed = Vec::new();
                let mut updates = Vec::new();
                // From the start to the moment the provider had the whole request.
                let mut direct_asked = Vec::new();
                let mut relay_asked = Vec::new();
                for round in 0..rounds {
                    // Alternate which goes first, so neither always pays for the other's leftovers.
                    for contender in [round % 2, 1 - round % 2] {
                        if contender == 0 {
                            server.push(reply());
                            let start = Instant::now();
                            direct.push(read_direct(server.url(), chunks).await);
                            let asked = server.requests().last().unwrap().received_at;
                            direct_asked.push(asked.saturating_duration_since(start));
                        } else {
                            let session = cx
                                .send_request(NewSessionRequest::new(work_dir.clone()))
                                .block_task()
                                .await?
                                .session_id;
                            reset(&seen);
                            server.push(reply());
                            let start = Instant::now();
                            let answer = cx
                                .send_request(PromptRequest::new(session, vec![text("stream")]))
                                .block_task()
                                .await?;
                            let took = start.elapsed();
                            let asked = server.requests().last().unwrap().received_at;
                            relay_asked.push(asked.saturating_duration_since(start));
                            assert_eq!(answer.stop_reason, StopReason::EndTurn);
                            let seen = seen.lock().unwrap();
                            assert!(seen.text == expected, "every chunk arrived, in order");
                            updates.push(seen.chunks);
                            relayed.push(took);
                        }
                    }
                }
                modes.push((nagle, direct, relayed, updates, direct_asked, relay_asked));
            }
            server.set_nagle(false);

            // Cancel: a long answer (its chunks 20 ms apart), cancelled once it is streaming.
            let mut latencies = Vec::new();
            for _ in 0..cancels {
                let session = cx
                    .send_request(NewSessionRequest::new(work_dir.clone()))
                    .block_task()
                    .await?
                    .session_id;
                reset(&seen);
                let mut count = count_rx.clone();
                let base = *count.borrow_and_update();
                let slow: Vec<String> = (0..500).map(|i| format!("w{i} ")).collect();
                server.push(
                    Reply::anthropic(&Turn::new().text(slow))
                        .pause_between(Duration::from_millis(20)),
                );
                let pending =
                    cx.send_request(PromptRequest::new(session.clone(), vec![text("talk")]));
                count.wait_for(|n| *n >= base + 3).await.unwrap();
                let start = Instant::now();
                cx.send_notification(CancelNotification::new(session))?;
                let answer = pending.block_task().await?;
                latencies.push(start.elapsed());
                assert_eq!(answer.stop_reason, StopReason::Cancelled);
            }

            println!(
                "ACP stream benchmark: {chunks} chunks, {rounds} rounds, {} cores",
                std::thread::available_parallelism().map_or(0, |n| n.get())
            );
            println!("{:<60} {:>10}", "contender", "median");
            for (nagle, mut direct, mut relayed, mut updates, mut direct_asked, mut relay_asked) in
                modes
            {
                let (d, r) = (median(&mut direct), median(&mut relayed));
                let mode = if nagle {
                    "server coalescing events (Nagle)"
                } else {
                    "server sending each event at once (TCP_NODELAY)"
                };
                println!("{mode}:");
                println!(
                    "{:<60} {:>7.2} ms",
                    "  client reads the provider's stream directly (baseline)",
                    ms(d)
                );
                println!(
                    "{:<60} {:>7.2} ms",
                    "  client gets it relayed by berth acp (session/update)",
                    ms(r)
                );
                // The goal is judged where the direct reader has it easiest: a burst in a few
                // big reads. Event by event, the direct reader is woken for every segment.
                println!(
                    "  ratio relay / direct = {:.2} ({}); every chunk's text arrived, in order",
                    r.as_secs_f64() / d.as_secs_f64(),
                    if nagle { "goal <= 1.5" } else { "for comparison" }
                );
                // Where berth's share goes: before the provider has the request (the prompt
                // read, the session's setup, the connection), or after (the stream relayed,
                // the answer kept, the prompt answered).
                let (da, ra) = (median(&mut direct_asked), median(&mut relay_asked));
                println!(
                    "  until the provider had the request: direct {:.2} ms, relay {:.2} ms; after it: direct {:.2} ms, relay {:.2} ms",
                    ms(da),
                    ms(ra),
                    ms(d.saturating_sub(da)),
                    ms(r.saturating_sub(ra))
                );
                updates.sort_unstable();
                println!(
                    "  the {chunks} chunks came as {}..{} session/update notifications (pieces within {} ms of the last update are merged)",
                    updates[0],
                    updates[updates.len() - 1],
                    berth_acp::MERGE_WINDOW.as_millis()
                );
            }
            latencies.sort();
            println!(
                "cancel latency ({cancels} cancels): median {:.1} ms, max {:.1} ms (goal <= 100 ms)",
                ms(latencies[latencies.len() / 2]),
                ms(*latencies.last().unwrap())
            );
            Ok(())
        })
        .await
        .expect("the ACP client failed");
    drop(child);
}

fn reset(seen: &Mutex<Seen>) {
    let mut seen = seen.lock().unwrap();
    seen.text.clear();
    seen.chunks = 0;
}

fn text(s: &str) -> ContentBlock {
    ContentBlock::Text(TextContent::new(s))
}

/// The baseline: one HTTP/1.1 request to the provider server and its whole event stream read,
/// over a fresh connection as the agent's request makes one.
async fn read_direct(url: &str, chunks: usize) -> Duration {
    let addr = url.trim_start_matches("http://");
    let start = Instant::now();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let body = "{}";
    let request = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        // Only the new bytes (and the few before them a marker may straddle) are searched:
        // a baseline that rescanned all it had read would be slow of its own making.
        let from = received.len().saturating_sub(b"message_stop".len());
        received.extend_from_slice(&buf[..n]);
        if received.ends_with(b"\n\n") && contains(&received[from..], b"message_stop") {
            break;
        }
    }
    let took = start.elapsed();
    let deltas = count(&received, b"text_delta");
    assert_eq!(deltas, chunks, "the direct read saw every chunk");
    took
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

fn median(xs: &mut [Duration]) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
