//! The floor built from berth's parts: the raw floor's work (`mod.rs`), done with the parts
//! berth serve must use for it. The official ACP SDK's agent side answers the JSON-RPC, and
//! berth-llm's HTTP client (reqwest, with berth's retry policy) makes the model call. The
//! WebSocket, the request and the relayed text are the raw floor's.
//!
//! No store, no transcript, no agent: the distance from the raw floor to this one is what the
//! parts cost under this load, and the distance from this one to berth is berth's own work.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientRequest, ContentBlock, ContentChunk, InitializeResponse, NewSessionResponse,
    PromptRequest, PromptResponse, SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Lines};
use berth_agent::acp::error_of_kind;
use berth_core::ErrorKind;
use berth_llm::CancellationToken;
use berth_llm::http::{Http, HttpPolicy};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

/// The environment variable that makes the benchmark's own executable this server; its value
/// is the provider stand-in's URL.
pub const PARTS_PROVIDER: &str = "BENCH_SERVE_PARTS_PROVIDER";

/// Serves until killed; says its address on stderr as berth serve does (`ws://ADDR/acp`).
pub fn serve(provider: String) {
    let url: Arc<str> = format!("{}/v1/messages", provider.trim_end_matches('/')).into();
    let http = Arc::new(Http::new(HttpPolicy::default()).unwrap());
    let sessions = Arc::new(AtomicUsize::new(0));
    super::listen("parts' floor", move |stream| {
        connection(stream, url.clone(), http.clone(), sessions.clone())
    });
}

async fn connection(stream: TcpStream, url: Arc<str>, http: Arc<Http>, sessions: Arc<AtomicUsize>) {
    let Ok(socket) =
        tokio_tungstenite::accept_async_with_config(stream, Some(super::socket())).await
    else {
        return;
    };
    let (to_client, from_client) = socket.split();
    let outgoing = to_client
        .sink_map_err(std::io::Error::other)
        .with(|line: String| futures::future::ready(Ok(Message::text(line))));
    let incoming = from_client.filter_map(async |frame| match frame {
        Ok(Message::Text(text)) => Some(Ok(text.as_str().to_owned())),
        Ok(_) => None,
        Err(e) => Some(Err(std::io::Error::other(e))),
    });
    let served = Agent
        .v1()
        .name("parts-floor")
        .on_receive_request(
            async move |request: ClientRequest,
                        responder: Responder<Value>,
                        cx: ConnectionTo<Client>| {
                match request {
                    ClientRequest::InitializeRequest(_) => responder.respond_with_result(to_value(
                        InitializeResponse::new(ProtocolVersion::V1),
                    )),
                    ClientRequest::NewSessionRequest(_) => {
                        let n = sessions.fetch_add(1, Ordering::Relaxed);
                        responder
                            .respond_with_result(to_value(NewSessionResponse::new(format!("s{n}"))))
                    }
                    ClientRequest::PromptRequest(prompt) => {
                        let (url, http, cx2) = (url.clone(), http.clone(), cx.clone());
                        cx.spawn(async move {
                            // A failed call is the client's error: the benchmark counts it dropped.
                            let answer = turn(&http, &url, prompt, &cx2)
                                .await
                                .map_err(|e| error_of_kind(ErrorKind::External, e.to_string()));
                            responder.respond_with_result(answer.and_then(to_value))
                        })
                    }
                    _ => responder
                        .respond_with_error(agent_client_protocol::Error::method_not_found()),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(Lines::new(outgoing, incoming))
        .await;
    // The client's end of the connection ends it; nothing is kept to tell.
    drop(served);
}

/// One turn: the model call, and its text relayed as updates of the prompt's session.
async fn turn(
    http: &Http,
    url: &str,
    prompt: PromptRequest,
    cx: &ConnectionTo<Client>,
) -> std::io::Result<PromptResponse> {
    let text: String = prompt
        .prompt
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let response = http
        .post(
            "anthropic",
            url,
            Default::default(),
            &super::request_body(&text),
            &CancellationToken::new(),
        )
        .await
        .map_err(std::io::Error::other)?;
    let body = futures::stream::unfold(response, async |mut response| {
        match response.chunk().await {
            Ok(Some(bytes)) => Some((Ok(bytes.to_vec()), response)),
            Ok(None) => None,
            Err(e) => Some((Err(std::io::Error::other(e)), response)),
        }
    });
    let session = prompt.session_id;
    super::relay(Box::pin(body), |text: &str| {
        let chunk = ContentChunk::new(ContentBlock::Text(TextContent::new(text)));
        let _ = cx.send_notification(SessionNotification::new(
            session.clone(),
            SessionUpdate::AgentMessageChunk(chunk),
        ));
    })
    .await?;
    Ok(PromptResponse::new(StopReason::EndTurn))
}

fn to_value(answer: impl serde::Serialize) -> Result<Value, agent_client_protocol::Error> {
    serde_json::to_value(answer).map_err(|e| error_of_kind(ErrorKind::Io, e.to_string()))
}
