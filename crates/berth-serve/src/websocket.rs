//! `/acp`: one ACP connection per WebSocket, one JSON-RPC message per text frame, served by
//! berth-acp exactly as `berth acp` serves standard I/O (the crate's `Lines` transport over
//! the socket's frames instead of the lines of a pipe).
//!
//! A writer task owns the socket's sending half, so answers and pings never interleave a
//! frame; a reader task hands text frames to the connection and pings the peer every
//! `ping_every`. A peer heard from neither by a frame nor by a pong for three pings is dead:
//! its connection ends as if it had closed. Binary frames are not ACP and are ignored.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use berth_agent::Agent;
use berth_ops::Ops;
use futures::{SinkExt, StreamExt};
use tokio::sync::{Semaphore, mpsc};

use crate::ServeOptions;

/// What every `/acp` connection shares.
#[derive(Clone)]
pub struct AcpEndpoint {
    ops: Ops,
    agent: Agent,
    /// One permit per open connection.
    slots: Arc<Semaphore>,
    max_message_bytes: usize,
    ping_every: Duration,
}

impl AcpEndpoint {
    pub fn new(ops: Ops, agent: Agent, options: &ServeOptions) -> AcpEndpoint {
        AcpEndpoint {
            ops,
            agent,
            slots: Arc::new(Semaphore::new(options.max_connections)),
            max_message_bytes: options.max_message_bytes,
            ping_every: options.ping_every,
        }
    }

    /// Serves one connection until the peer closes it, goes silent, or breaks it.
    async fn connection(self, socket: WebSocket) {
        let (mut to_peer, mut from_peer) = socket.split();
        let (out_tx, mut out_rx) = mpsc::channel::<Message>(256);
        let writer = tokio::spawn(async move {
            while let Some(message) = out_rx.recv().await {
                if to_peer.send(message).await.is_err() {
                    break;
                }
            }
            let _ = to_peer.close().await;
        });
        let (in_tx, mut in_rx) = mpsc::channel::<io::Result<String>>(256);
        let pings = out_tx.clone();
        let ping_every = self.ping_every;
        let reader = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(ping_every);
            ticks.tick().await;
            let mut heard = Instant::now();
            loop {
                tokio::select! {
                    frame = from_peer.next() => match frame {
                        Some(Ok(Message::Text(text))) => {
                            heard = Instant::now();
                            if in_tx.send(Ok(text.as_str().to_owned())).await.is_err() {
                                return;
                            }
                        }
                        Some(Ok(Message::Binary(_) | Message::Ping(_) | Message::Pong(_))) => {
                            heard = Instant::now();
                        }
                        Some(Ok(Message::Close(_))) | None => return,
                        Some(Err(e)) => {
                            let _ = in_tx.send(Err(io::Error::other(e))).await;
                            return;
                        }
                    },
                    _ = ticks.tick() => {
                        if heard.elapsed() > ping_every * 3 {
                            return;
                        }
                        let _ = pings.send(Message::Ping(Default::default())).await;
                    }
                }
            }
        });
        let outgoing = futures::sink::unfold(out_tx, async |tx, line: String| {
            tx.send(Message::Text(line.into()))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the WebSocket closed"))?;
            Ok::<_, io::Error>(tx)
        });
        let incoming = futures::stream::poll_fn(move |cx| in_rx.poll_recv(cx));
        let transport = agent_client_protocol::Lines::new(outgoing, incoming);
        let _ = berth_acp::serve(self.ops, self.agent, transport).await;
        // The connection is over: stop reading (its ping sender with it), so the writer,
        // its last sender gone, sends what is queued and closes the socket.
        reader.abort();
        let _ = writer.await;
    }
}

/// `GET /acp`: upgrades to a WebSocket and serves ACP on it; 503 when every connection slot
/// is taken.
pub async fn upgrade(State(acp): State<AcpEndpoint>, ws: WebSocketUpgrade) -> Response {
    let Ok(slot) = acp.slots.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "this berth server has as many ACP connections as it takes (--max-connections)\n",
        )
            .into_response();
    };
    let max = acp.max_message_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| async move {
            let _slot = slot;
            acp.connection(socket).await;
        })
}
