//! The floor under `berth serve`'s load: the least a server must do for the benchmark's
//! clients, run as a process of its own on the same cores, so that berth's figures have a
//! baseline measured in the same run.
//!
//! Per WebSocket it reads JSON-RPC frames and answers `initialize` and `session/new` at once.
//! A `session/prompt` opens a connection to the provider stand-in, sends the prompt as an
//! Anthropic Messages request, and relays the answer's text deltas as `agent_message_chunk`
//! updates, merged in the window berth's relay uses (so the clients get as many updates from
//! either server), then answers `end_turn`. No store, no transcript, no agent, no ACP SDK, no
//! token check: what is left is the wire, which any server pays.
//!
//! [`parts`] is the second floor: the same work through the parts berth must use for it (the
//! official ACP SDK, berth-llm's HTTP client). Both share the WebSocket's settings, the
//! request and the relay.

pub mod parts;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use berth_core::ErrorKind::External;
use futures::{SinkExt, Stream, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// The environment variable that makes the benchmark's own executable this server; its value
/// is the provider stand-in's URL.
pub const FLOOR_PROVIDER: &str = "BENCH_SERVE_FLOOR_PROVIDER";

/// Turns relaying now, for the merge window.
static RELAYING: AtomicUsize = AtomicUsize::new(0);

/// Serves until killed; says its address on stderr as berth serve does (`ws://ADDR/acp`).
pub fn serve(provider: String) {
    let provider: Arc<str> = provider
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .into();
    listen("floor", move |stream| connection(stream, provider.clone()));
}

/// Runs a floor until killed: a port of its own, said on stderr as berth serve says it
/// (`ws://ADDR/acp`), and each connection served by `serve` on a task of its own.
fn listen<F>(name: &str, serve: impl Fn(TcpStream) -> F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        eprintln!(
            "{name} listening on ws://{}/acp",
            listener.local_addr().unwrap()
        );
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(serve(stream));
        }
    });
}

/// The server side's WebSocket settings, both floors'.
fn socket() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(8 * 1024)
}

/// A turn's model call: the prompt's text as an Anthropic Messages request.
fn request_body(text: &str) -> Value {
    json!({
        "model": "bench-model", "max_tokens": 1024, "stream": true,
        "messages": [{"role": "user", "content": text}],
    })
}

async fn connection(stream: TcpStream, provider: Arc<str>) {
    let Ok(socket) = tokio_tungstenite::accept_async_with_config(stream, Some(socket())).await
    else {
        return;
    };
    let (mut to_client, mut from_client) = socket.split();
    let (out, mut outgoing) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Some(line) = outgoing.recv().await {
            if to_client.send(Message::text(line)).await.is_err() {
                return;
            }
        }
    });
    let mut sessions = 0;
    while let Some(Ok(frame)) = from_client.next().await {
        let Message::Text(text) = frame else { continue };
        let Ok(message) = serde_json::from_str::<Value>(text.as_str()) else {
            return;
        };
        let id = message["id"].clone();
        let answer = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
        match message["method"].as_str() {
            Some("initialize") => {
                let _ = out.send(
                    answer(json!({"protocolVersion": 1, "agentCapabilities": {}})).to_string(),
                );
            }
            Some("session/new") => {
                sessions += 1;
                let _ = out.send(answer(json!({"sessionId": format!("s{sessions}")})).to_string());
            }
            Some("session/prompt") => {
                let params = message["params"].clone();
                let (out, provider) = (out.clone(), provider.clone());
                tokio::spawn(async move {
                    // A failed call is the client's error: the benchmark counts it dropped.
                    let answer = match prompt(&params, &provider, &out).await {
                        Ok(()) => json!({"jsonrpc": "2.0", "id": id,
                                         "result": {"stopReason": "end_turn"}}),
                        Err(e) => json!({"jsonrpc": "2.0", "id": id,
                                         "error": {"code": External.json_rpc_code(),
                                                   "message": e.to_string()}}),
                    };
                    let _ = out.send(answer.to_string());
                });
            }
            _ => {}
        }
    }
}

/// One turn: the model call, and its text relayed as updates of the prompt's session.
async fn prompt(
    params: &Value,
    provider: &str,
    out: &mpsc::UnboundedSender<String>,
) -> std::io::Result<()> {
    let session = params["sessionId"].clone();
    let text: String = params["prompt"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect();
    let body = request_body(&text).to_string();
    let mut stream = TcpStream::connect(provider).await?;
    stream.set_nodelay(true)?;
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: {provider}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(format!("{head}{body}").as_bytes()).await?;
    let read = futures::stream::unfold(stream, async |mut stream| {
        let mut chunk = vec![0u8; 8192];
        match stream.read(&mut chunk).await {
            Ok(0) => None,
            Ok(n) => {
                chunk.truncate(n);
                Some((Ok(chunk), stream))
            }
            Err(e) => Some((Err(e), stream)),
        }
    });
    relay(Box::pin(read), |text: &str| {
        let update = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": session,
            "update": {"sessionUpdate": "agent_message_chunk",
                       "content": {"type": "text", "text": text}},
        }});
        let _ = out.send(update.to_string());
    })
    .await
}

/// The bytes of a model call's answer, as they come.
type Answer = Pin<Box<dyn Stream<Item = std::io::Result<Vec<u8>>> + Send>>;

/// Reads the answer's events until `message_stop`, sending its text: the first piece at once,
/// then what came within the window together, as berth's relay does.
async fn relay(answer: Answer, send: impl Fn(&str)) -> std::io::Result<()> {
    RELAYING.fetch_add(1, Ordering::Relaxed);
    let relayed = relay_counted(answer, send).await;
    RELAYING.fetch_sub(1, Ordering::Relaxed);
    relayed
}

async fn relay_counted(mut answer: Answer, send: impl Fn(&str)) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut waiting = String::new();
    let mut last = tokio::time::Instant::now() - Duration::from_secs(1);
    loop {
        let window = berth_acp::merge_window(RELAYING.load(Ordering::Relaxed));
        let read = tokio::select! {
            biased;
            read = answer.next() => read.transpose()?,
            () = tokio::time::sleep_until(last + window), if !waiting.is_empty() => {
                send(&std::mem::take(&mut waiting));
                last = tokio::time::Instant::now();
                continue;
            }
        };
        let Some(read) = read else {
            return Err(std::io::Error::other(
                "the provider closed before message_stop",
            ));
        };
        buf.extend_from_slice(&read);
        while let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=end).collect();
            let Some(data) = line.strip_prefix(b"data: ") else {
                continue;
            };
            let event: Value = serde_json::from_slice(data).unwrap_or(Value::Null);
            match event["type"].as_str() {
                Some("content_block_delta") => {
                    waiting.push_str(event["delta"]["text"].as_str().unwrap_or_default());
                }
                Some("message_stop") => {
                    if !waiting.is_empty() {
                        send(&waiting);
                    }
                    return Ok(());
                }
                _ => {}
            }
        }
        if !waiting.is_empty() && last.elapsed() >= window {
            send(&std::mem::take(&mut waiting));
            last = tokio::time::Instant::now();
        }
    }
}
