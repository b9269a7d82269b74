//! Benchmark: N ACP clients at once on `berth serve`'s WebSocket (`/acp`), each a whole turn
//! of a 200-chunk answer from the provider stand-in, at N = 1, 10, 50 and 500.
//!
//! `cargo bench -p berth-cli --bench serve_load` (`BENCH_CLIENTS` = "1,10,50,500",
//! `BENCH_CHUNKS` = 200, `BENCH_CHUNK_MS` = 5: the pause between two chunks of an answer, so a
//! turn takes about a second, as a fast model's does; `BENCH_HEAD_MS` = 0: how long the stand-in
//! waits before an answer's head, so that, at a few seconds, the prompts are measured with no
//! answer streaming beside them).
//!
//! One real `berth serve` process, its limits raised by its own flags for the load
//! (`--max-connections` to the largest N, `--max-prompts-per-minute 0`); each client is the
//! official `agent-client-protocol` crate's client side over its own WebSocket
//! (tokio-tungstenite), one JSON-RPC message per text frame. Each connects, initializes, makes
//! a session, and sends its prompt when all are ready. Printed per N: turns per second (N over
//! the wall time of the whole batch); the p50 time from the word to go to the prompts' frames
//! leaving their clients (the clients' part: they share berth's cores), and to their model
//! calls reaching the provider; the p50 of berth's own part, each prompt's frame to its model
//! call (matched by a mark in the prompt); the p50 and p99 time from the prompt to its first
//! chunk and to its answer, the clients dropped (refused, broken, or a
//! stream not whole and in order), the server's resident memory (VmRSS, and its peak VmHWM)
//! after the batch, and the CPU time the batch cost berth, the clients and the stand-in (all
//! three share the machine's cores). Last, issue 55's goals at N = 500, each met or missed; a
//! client dropped fails the benchmark.
//!
//! Each N runs three times with the same clients: on berth, then on two floors, each started
//! as a process of its own from this executable and each the baseline of the same run. The
//! floor (`serve_floor`) is the least a server must do for the clients (the WebSocket, the
//! JSON-RPC, the model call and the relayed text, nothing kept), written by hand: what the
//! machine gives any server under this load. The parts' floor (`serve_floor::parts`) does the
//! same through the parts berth must use for it, the official ACP SDK's agent side and
//! berth-llm's HTTP client: what is left between it and berth is berth's own work.
//!
//! `BENCH_BERTH` names another `berth` binary to serve (a build to compare, run by the same
//! clients); by default, the one cargo built with this benchmark.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;
mod serve_floor;

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
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "serve-load-bench-token";

/// Issue 55's goals, at [`GOAL_CLIENTS`] clients at once: berth's part (the prompt to its
/// model call) and the first chunk, at the median.
const GOAL_CLIENTS: usize = 500;
const GOAL_MODEL_P50: Duration = Duration::from_millis(50);
const GOAL_FIRST_P50: Duration = Duration::from_millis(100);

fn main() {
    if let Ok(provider) = std::env::var(serve_floor::FLOOR_PROVIDER) {
        return serve_floor::serve(provider);
    }
    if let Ok(provider) = std::env::var(serve_floor::parts::PARTS_PROVIDER) {
        return serve_floor::parts::serve(provider);
    }
    let sizes: Vec<usize> = std::env::var("BENCH_CLIENTS")
        .unwrap_or_else(|_| "1,10,50,500".to_owned())
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
    let head = Duration::from_millis(env_or("BENCH_HEAD_MS", 0) as u64);
    rt.block_on(run(&sizes, chunks, pause, head));
}

/// One client's turn: from its prompt, when the first chunk came and when the answer did, and
/// the moment its prompt's frame was handed to its socket.
struct Timing {
    first: Duration,
    end: Duration,
    framed: Instant,
}

/// What one batch of N clients measured.
struct Batch {
    n: usize,
    wall: Duration,
    /// From the word to go to each model call reaching the provider.
    to_model: Vec<Duration>,
    /// From each prompt's frame leaving its client to its model call reaching the provider:
    /// berth's own part, without the time the clients (on the same cores) took to send.
    berth_part: Vec<Duration>,
    /// From the word to go to each prompt's frame leaving its client: the clients' part.
    framed: Vec<Duration>,
    timings: Vec<Timing>,
    dropped: Vec<String>,
    /// CPU seconds of the batch: berth serve, the clients, the provider stand-in.
    cpu: [f64; 3],
}

async fn run(sizes: &[usize], chunks: usize, pause: Duration, head: Duration) {
    let provider = ProviderServer::start_in_background();
    let home = home_on_provider(provider.url());
    let work = tempfile::tempdir().unwrap();
    let most = sizes.iter().copied().max().unwrap_or(1);
    let berth =
        std::env::var_os("BENCH_BERTH").unwrap_or_else(|| env!("CARGO_BIN_EXE_berth").into());
    let mut berth = tokio::process::Command::new(berth);
    berth
        .args(["serve", "--listen", "127.0.0.1:0"])
        // The limits a person would raise for this load: every client one connection, and
        // one token sending all the prompts.
        .args(["--max-connections", &most.max(1).to_string()])
        .args(["--max-prompts-per-minute", "0"])
        .env("BERTH_HOME", home.path())
        .env("BERTH_SERVE_TOKEN", TOKEN)
        .env("ANTHROPIC_API_KEY", "bench")
        .current_dir(work.path());
    let mut floor = tokio::process::Command::new(std::env::current_exe().unwrap());
    floor.env(serve_floor::FLOOR_PROVIDER, provider.url());
    let mut parts = tokio::process::Command::new(std::env::current_exe().unwrap());
    parts.env(serve_floor::parts::PARTS_PROVIDER, provider.url());
    let servers = [
        Served::start(berth, "berth").await,
        Served::start(floor, "floor").await,
        Served::start(parts, "parts").await,
    ];
    let deltas: Vec<String> = (0..chunks).map(|i| format!("t{i:04} ")).collect();
    let answer = Reply::anthropic(&Turn::new().text(deltas.clone()))
        .pause_between(pause)
        .delay_head(head);
    let expected = Arc::new(deltas.concat());
    println!(
        "berth serve load: {chunks}-chunk answers ({} ms apart, the first after {} ms), {} cores",
        pause.as_millis(),
        head.as_millis(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:>5} {:>4} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>7} {:>7} {:>7} {:>15}",
        "",
        "N",
        "turns/s",
        "sent p50",
        "model p50",
        "berth p50",
        "first p50",
        "first p99",
        "end p50",
        "end p99",
        "dropped",
        "RSS MB",
        "peak MB",
        "CPU s server/cl/st"
    );
    let mut goal = None;
    let mut dropped = Vec::new();
    for &n in sizes {
        let mut batches = Vec::new();
        for server in &servers {
            for _ in 0..n {
                provider.push(answer.clone());
            }
            let mut batch = batch(n, server, work.path(), &expected, &provider).await;
            print_row(server.name, &mut batch, server.pid);
            batches.push(batch);
        }
        let [mut berth, floor, parts] = <[Batch; 3]>::try_from(batches).ok().unwrap();
        // Only berth's drops fail the benchmark; the floors are measures, not products.
        dropped.append(&mut berth.dropped);
        if n == GOAL_CLIENTS {
            goal = Some([berth, floor, parts]);
        }
    }
    if let Some(mut batches) = goal {
        print_goals(&mut batches);
    }
    assert!(dropped.is_empty(), "clients dropped: {dropped:?}");
    println!("every stream arrived whole and in order");
}

/// A server under load: berth serve, or one of the floors.
struct Served {
    name: &'static str,
    address: String,
    pid: u32,
    _process: tokio::process::Child,
}

impl Served {
    /// Starts `command` and waits for its first line naming `ws://` (a warning may come
    /// before it); the rest of its log is read and let go, as a full pipe would stop it.
    async fn start(mut command: tokio::process::Command, name: &'static str) -> Served {
        let mut process = command
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let pid = process.id().unwrap();
        let mut said = tokio::io::BufReader::new(process.stderr.take().unwrap()).lines();
        let mut heard = String::new();
        let address = loop {
            let Some(line) = said.next_line().await.unwrap() else {
                panic!("{name} ended, having said: {heard}")
            };
            if let Some(rest) = line.split("ws://").nth(1) {
                break rest.split('/').next().unwrap_or_default().to_owned();
            }
            heard.push_str(&line);
            heard.push('\n');
        };
        tokio::spawn(async move { while let Ok(Some(_)) = said.next_line().await {} });
        Served {
            name,
            address,
            pid,
            _process: process,
        }
    }
}

/// N clients at once: each makes its session, and when all have, each sends its prompt.
async fn batch(
    n: usize,
    server: &Served,
    work: &std::path::Path,
    expected: &Arc<String>,
    provider: &ProviderServer,
) -> Batch {
    let (address, pid) = (&server.address, server.pid);
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel();
    let (go_tx, go_rx) = watch::channel(false);
    let clients: Vec<_> = (0..n)
        .map(|i| {
            let ready = Ready(Some(ready_tx.clone()));
            let (address, expected, go) = (address.to_owned(), expected.clone(), go_rx.clone());
            let work = work.to_path_buf();
            tokio::spawn(async move { one_client(i, &address, work, expected, ready, go).await })
        })
        .collect();
    for _ in 0..n {
        ready_rx.recv().await.unwrap();
    }
    let requests_before = provider.requests().len();
    let cpu_before = cpu(pid);
    let began = Instant::now();
    go_tx.send(true).unwrap();
    let mut timings = Vec::with_capacity(n);
    let mut framed_at = std::collections::HashMap::new();
    let mut dropped = Vec::new();
    for (i, client) in clients.into_iter().enumerate() {
        match client.await.expect("a client's task") {
            Ok(timing) => {
                framed_at.insert(i, timing.framed);
                timings.push(timing);
            }
            Err(why) => dropped.push(why),
        }
    }
    let wall = began.elapsed();
    let cpu_after = cpu(pid);
    // When each model call of this batch reached the provider, from the word to go: the
    // clients' sending and berth's part together.
    let requests = provider.requests().split_off(requests_before);
    let to_model = requests
        .iter()
        .map(|r| r.received_at.saturating_duration_since(began))
        .collect();
    // Each model call is matched to its client by the prompt's mark in the request's body.
    let berth_part: Vec<Duration> = requests
        .iter()
        .filter_map(|r| {
            let framed = framed_at.get(&prompt_mark(&r.raw_body)?)?;
            Some(r.received_at.saturating_duration_since(*framed))
        })
        .collect();
    // A figure over some of the prompts would not be berth's p50.
    assert_eq!(
        berth_part.len(),
        framed_at.len(),
        "every prompt sent finds its model call by its mark"
    );
    let framed = framed_at
        .values()
        .map(|at| at.saturating_duration_since(began))
        .collect();
    Batch {
        n,
        wall,
        to_model,
        berth_part,
        framed,
        timings,
        dropped,
        cpu: std::array::from_fn(|i| cpu_after[i] - cpu_before[i]),
    }
}

fn print_row(name: &str, batch: &mut Batch, pid: u32) {
    let (rss, peak) = memory(pid);
    let mut first: Vec<Duration> = batch.timings.iter().map(|t| t.first).collect();
    let mut end: Vec<Duration> = batch.timings.iter().map(|t| t.end).collect();
    let [berth, clients, stand_in] = batch.cpu;
    println!(
        "{name:>5} {:>4} {:>8.1} {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>8.1}ms {:>7.0}ms {:>7.0}ms {:>7} {:>7.1} {:>7.1} {:>5.2}/{:.2}/{:.2}",
        batch.n,
        batch.timings.len() as f64 / batch.wall.as_secs_f64(),
        ms(percentile(&mut batch.framed, 50)),
        ms(percentile(&mut batch.to_model, 50)),
        ms(percentile(&mut batch.berth_part, 50)),
        ms(percentile(&mut first, 50)),
        ms(percentile(&mut first, 99)),
        ms(percentile(&mut end, 50)),
        ms(percentile(&mut end, 99)),
        batch.dropped.len(),
        rss,
        peak,
        berth,
        clients,
        stand_in,
    );
}

/// Issue 55's goals at N = 500, each said met or missed, with its ratio to the goal and to
/// the floors' figures in the same run.
fn print_goals([berth, floor, parts]: &mut [Batch; 3]) {
    let first_p50 = |b: &Batch| {
        let mut first: Vec<Duration> = b.timings.iter().map(|t| t.first).collect();
        percentile(&mut first, 50)
    };
    let verdict = |met: bool| if met { "met" } else { "MISSED" };
    println!("issue 55's goals at N = {}:", berth.n);
    let model = [&mut *berth, &mut *floor, &mut *parts].map(|b| percentile(&mut b.berth_part, 50));
    let first = [&*berth, &*floor, &*parts].map(first_p50);
    for (what, [got, floor, parts], goal) in [
        (
            "berth's part (a prompt's frame to its model call) p50",
            model,
            GOAL_MODEL_P50,
        ),
        ("first chunk p50", first, GOAL_FIRST_P50),
    ] {
        let of_goal = |d: Duration| d.as_secs_f64() / goal.as_secs_f64();
        println!(
            "  {what}: {:.1} ms, {:.2}x the goal of {} ms: {}; the floor {:.1} ms ({:.2}x the \
             goal), berth {:.2}x the floor; the parts' floor {:.1} ms ({:.2}x the goal)",
            ms(got),
            of_goal(got),
            goal.as_millis(),
            verdict(got <= goal),
            ms(floor),
            of_goal(floor),
            got.as_secs_f64() / floor.as_secs_f64(),
            ms(parts),
            of_goal(parts),
        );
    }
    println!(
        "  (from the word to go, with the clients' own sending: berth's model calls p50 {:.1} ms, \
         the prompts' frames sent p50 {:.1} ms)",
        ms(percentile(&mut berth.to_model, 50)),
        ms(percentile(&mut berth.framed, 50)),
    );
    println!(
        "  none dropped: {} of {} dropped: {}",
        berth.dropped.len(),
        berth.n,
        verdict(berth.dropped.is_empty())
    );
}

/// A client's word that it is ready to prompt (its session made) or will never be (it
/// failed first): said once, at the latest when it is dropped, so the batch never waits for a
/// client that is gone.
struct Ready(Option<mpsc::UnboundedSender<()>>);

impl Ready {
    fn say(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for Ready {
    fn drop(&mut self) {
        self.say();
    }
}

/// Connects, initializes, makes a session, says it is ready, waits for the word to go, then
/// sends its prompt and times it. An error says why the client was dropped: refused, broken,
/// or an answer's text that is not `expected`, whole and in order.
async fn one_client(
    index: usize,
    address: &str,
    work: std::path::PathBuf,
    expected: Arc<String>,
    mut ready: Ready,
    mut go: watch::Receiver<bool>,
) -> Result<Timing, String> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("ws://{address}/acp").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (socket, _) =
        tokio_tungstenite::connect_async_with_config(request, Some(client_socket()), false)
            .await
            .map_err(|e| format!("connecting to /acp: {e}"))?;
    let (to_server, from_server) = socket.split();
    // When the prompt's frame is handed to the socket: the clients' part ends there.
    let framed = Arc::new(Mutex::new(None::<Instant>));
    let stamp = framed.clone();
    let outgoing = to_server
        .sink_map_err(std::io::Error::other)
        .with(move |line: String| {
            if line.contains(PROMPT_MARK) {
                stamp.lock().unwrap().get_or_insert_with(Instant::now);
            }
            futures::future::ready(Ok::<_, std::io::Error>(Message::text(line)))
        });
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
            ready.say();
            let _ = go.wait_for(|go| *go).await;
            let sent = Instant::now();
            let answer = cx
                .send_request(PromptRequest::new(
                    session,
                    vec![ContentBlock::Text(TextContent::new(format!(
                        "{PROMPT_MARK}{index}."
                    )))],
                ))
                .block_task()
                .await?;
            let end = sent.elapsed();
            let first = first.lock().unwrap().map(|at| at - sent);
            Ok((answer.stop_reason, first, end))
        })
        .await
        .map_err(|e| format!("the connection: {e}"))?;
    let (stop, first, end) = timing;
    if stop != StopReason::EndTurn {
        return Err(format!("the turn ended {stop:?}"));
    }
    let first = first.ok_or("no chunk came")?;
    if *text.lock().unwrap() != *expected {
        return Err("a stream arrived incomplete or out of order".to_owned());
    }
    let framed = framed.lock().unwrap().ok_or("the prompt was never sent")?;
    Ok(Timing { first, end, framed })
}

/// Marks each client's prompt (`bench-prompt-7.`) so its model call is known by its body.
const PROMPT_MARK: &str = "bench-prompt-";

/// The client whose prompt a model call's body carries.
fn prompt_mark(body: &[u8]) -> Option<usize> {
    let body = std::str::from_utf8(body).ok()?;
    let (_, rest) = body.rsplit_once(PROMPT_MARK)?;
    rest.split('.').next()?.parse().ok()
}

/// A client's socket reads into 8 KiB at a time, as berth's end of it does, not into
/// tungstenite's default of 128 KiB, which it zeroes before every read: the clients share
/// berth's two cores, and with the default their zeroing alone was a fifth of the machine's CPU
/// while the prompts went out.
fn client_socket() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(8 * 1024)
}

/// CPU seconds used so far by the server `pid`, by this process's clients (every thread but
/// the stand-in's), and by the provider stand-in's thread.
fn cpu(pid: u32) -> [f64; 3] {
    let mut ours = [0.0; 2];
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let stand_in = stat.contains("(provider-server)");
        ours[usize::from(stand_in)] += stat_seconds(&stat);
    }
    let server = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    [stat_seconds(&server), ours[0], ours[1]]
}

/// utime + stime of a `/proc/…/stat` line, in seconds (Linux's clock ticks are 1/100 s).
fn stat_seconds(stat: &str) -> f64 {
    // The fields after the command's name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are the stat line's 14th and 15th fields; 12th and 13th after the name.
    (tick(11) + tick(12)) / 100.0
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
    match values.len() {
        0 => Duration::ZERO,
        len => values[(len * p / 100).min(len - 1)],
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
