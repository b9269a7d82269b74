//! `/acp` over a WebSocket (plain HTTP is `acp_http`'s): one ACP connection per WebSocket, one JSON-RPC message per text frame, served by
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

use axum::Extension;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use berth_agent::Agent;
use berth_agent::CancellationToken;
use berth_ops::Ops;
use futures::{SinkExt, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::ServeOptions;
use crate::acp_http::Connections;
use crate::guard::Principal;
use crate::rate::PromptRate;
use crate::tokens::{Role, TokenRecord, TokenStore};

/// What a connection's socket reads into at a time. tungstenite zeroes the whole buffer before
/// every read, and makes a new one after each message while the last message's text is still
/// held; its default of 128 KiB made that zeroing a fifth of the server's CPU while 500 clients'
/// prompts came in, and held 64 MB for them. A larger message still arrives whole, read 8 KiB
/// at a time.
const READ_BUFFER: usize = 8 * 1024;

/// How often an open connection of a device looks whether its token is still live.
pub(crate) const TOKEN_RECHECK: Duration = Duration::from_secs(1);

/// What every `/acp` connection shares.
#[derive(Clone)]
pub struct AcpEndpoint {
    ops: Ops,
    agent: Agent,
    tokens: TokenStore,
    /// One permit per open connection.
    slots: Arc<Semaphore>,
    prompts: Arc<PromptRate>,
    max_message_bytes: usize,
    ping_every: Duration,
    /// The connections over plain HTTP (`acp_http`), and how long one's client may be silent.
    connections: Arc<Connections>,
    http_idle: Duration,
    /// Cancelled when the server shuts down: the connections over HTTP end.
    closing: CancellationToken,
}

impl AcpEndpoint {
    /// `prompts` is the rate the web page's prompts count against too.
    pub fn new(
        ops: Ops,
        agent: Agent,
        tokens: TokenStore,
        prompts: Arc<PromptRate>,
        options: &ServeOptions,
    ) -> AcpEndpoint {
        AcpEndpoint {
            ops,
            agent,
            tokens,
            slots: Arc::new(Semaphore::new(options.max_connections)),
            prompts,
            max_message_bytes: options.max_message_bytes,
            ping_every: options.ping_every,
            connections: Arc::default(),
            http_idle: options.acp_http_idle,
            closing: CancellationToken::new(),
        }
    }

    /// Ends every connection over plain HTTP: the server is shutting down.
    pub fn close(&self) {
        self.closing.cancel();
    }

    pub(crate) async fn closing(&self) {
        self.closing.cancelled().await
    }

    pub(crate) fn tokens(&self) -> &TokenStore {
        &self.tokens
    }

    pub(crate) fn http_idle(&self) -> Duration {
        self.http_idle
    }

    pub(crate) fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    pub(crate) fn connections(&self) -> &Connections {
        &self.connections
    }

    /// A connection slot, when one is free.
    pub(crate) fn slot(&self) -> Option<OwnedSemaphorePermit> {
        match self.slots.clone().try_acquire_owned() {
            Ok(slot) => Some(slot),
            // Every slot is taken (the caller answers 503), or the server is closing.
            Err(e) => {
                tracing::debug!("no connection slot: {e}");
                None
            }
        }
    }

    /// The ACP server of one connection for `principal`: acting for its device, or as the
    /// admin; its prompts held to the token's rate (answered with an error, never reaching
    /// the agent, over it). With the token of the store to look up again while it lasts: an
    /// admin token of `token create --admin` as a device's, so revoking it cuts its open
    /// connections.
    pub(crate) fn server_for(
        &self,
        principal: &Principal,
    ) -> (berth_acp::Server, Option<TokenRecord>) {
        let counted_as = principal.counted_as();
        let (caller, token) = match principal {
            Principal::Admin(record) => (berth_acp::Caller::Trusted, record.clone()),
            Principal::Device(record) => match &record.role {
                Role::Device { device } => (
                    berth_acp::Caller::Device(device.clone()),
                    Some(record.clone()),
                ),
                Role::Admin => (berth_acp::Caller::Trusted, Some(record.clone())),
            },
        };
        let prompts = self.prompts.clone();
        let gate: berth_acp::PromptGate = Arc::new(move || match prompts.admit(&counted_as) {
            true => Ok(()),
            false => Err(prompts.refusal()),
        });
        let server = berth_acp::Server::for_caller(self.ops.clone(), self.agent.clone(), caller)
            .with_prompt_gate(gate);
        (server, token)
    }

    /// Serves one connection for `principal` until the peer closes it, goes silent, or
    /// breaks it, or (a device's) its token is revoked or expires.
    async fn connection(self, socket: WebSocket, principal: Principal) {
        let (server, token) = self.server_for(&principal);
        let (to_peer, mut from_peer) = socket.split();
        let (out_tx, out_rx) = mpsc::channel::<Message>(256);
        let writer = tokio::spawn(write_out(to_peer, out_rx));
        let (in_tx, mut in_rx) = mpsc::channel::<io::Result<String>>(256);
        let pings = out_tx.clone();
        let ping_every = self.ping_every;
        let tokens = self.tokens.clone();
        let reader = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(ping_every);
            ticks.tick().await;
            let mut recheck = tokio::time::interval(TOKEN_RECHECK);
            let mut heard = Instant::now();
            loop {
                tokio::select! {
                    _ = recheck.tick(), if token.is_some() => {
                        let live = token.as_ref().is_some_and(|t| tokens.still_live(t).unwrap_or(false));
                        if !live {
                            // A revoked token's connection ends now, not when it next asks.
                            return;
                        }
                    }
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
                            tracing::info!("a WebSocket connection failed: {e}");
                            // The ACP side may be gone already: then there is nobody to tell.
                            if in_tx.send(Err(io::Error::other(e))).await.is_err() {
                                tracing::debug!("the connection's ACP side ended first");
                            }
                            return;
                        }
                    },
                    _ = ticks.tick() => {
                        if heard.elapsed() > ping_every * 3 {
                            return;
                        }
                        if pings.send(Message::Ping(Default::default())).await.is_err() {
                            // The writer is gone: so is the connection.
                            return;
                        }
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
        if let Err(e) = berth_acp::serve_connection(server, transport).await {
            tracing::warn!("an ACP connection over a WebSocket ended with an error: {e}");
        }
        // The connection is over: stop reading (its ping sender with it), so the writer,
        // its last sender gone, sends what is queued and closes the socket.
        reader.abort();
        if let Err(e) = writer.await {
            tracing::warn!("a WebSocket's writer failed: {e}");
        }
    }
}

/// `GET /acp`: upgrades to a WebSocket and serves ACP on it; 503 when every connection slot
/// is taken.
pub async fn upgrade(
    State(acp): State<AcpEndpoint>,
    Extension(principal): Extension<Principal>,
    ws: WebSocketUpgrade,
) -> Response {
    let Some(slot) = acp.slot() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "this berth server has as many ACP connections as it takes (--max-connections)\n",
        )
            .into_response();
    };
    let max = acp.max_message_bytes;
    ws.max_message_size(max)
        .max_frame_size(max)
        .read_buffer_size(READ_BUFFER)
        .on_upgrade(move |socket| async move {
            let _slot = slot;
            acp.connection(socket, principal).await;
        })
}

/// Sends what the connection queues to its peer until the queue closes or the peer is gone;
/// then closes the socket.
async fn write_out(
    mut to_peer: futures::stream::SplitSink<WebSocket, Message>,
    mut out_rx: mpsc::Receiver<Message>,
) {
    while let Some(message) = out_rx.recv().await {
        // The messages queued behind it go out with it, in one flush: under load (many
        // turns streaming at once) a burst costs one write, not one each.
        let mut next = Some(message);
        let mut sent = Ok(());
        while let Some(message) = next.take() {
            sent = to_peer.feed(message).await;
            if sent.is_err() {
                break;
            }
            // Nothing queued, or every sender gone: the burst ends here either way.
            if let Ok(queued) = out_rx.try_recv() {
                next = Some(queued);
            }
        }
        let sent = match sent {
            Ok(()) => to_peer.flush().await,
            failed => failed,
        };
        if let Err(e) = sent {
            tracing::debug!("a WebSocket's peer is gone: {e}");
            break;
        }
    }
    if let Err(e) = to_peer.close().await {
        tracing::debug!("a WebSocket did not close cleanly: {e}");
    }
}
