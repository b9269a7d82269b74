//! `/acp` over plain HTTP: ACP's other remote transport, POST for the client's messages and
//! server-sent events for the agent's (`Acp-Connection-Id` names the connection). Served by
//! the official transport's own server (`agent-client-protocol-http`), behind the same guard
//! as everything else, with the same rules as a WebSocket connection:
//!
//! - the token decides who the connection acts for, and its prompts count against the token's
//!   rate (`berth_acp::PromptGate`, asked before each prompt whatever the transport);
//! - connections count against `--max-connections` (503 on `initialize` when all are taken);
//! - a connection's id answers only to the token that opened it (another's gets 404);
//! - a request body over `--max-message-bytes` gets 413;
//! - a connection ends when its token is revoked, when its client has been silent for
//!   `--acp-http-idle` with no prompt running (a client that vanished never sends `DELETE`),
//!   and when the server shuts down (an open event stream would hold the shutdown).
//!
//! A `GET` that asks for a WebSocket is berth's own WebSocket endpoint (`websocket`): one path,
//! both transports.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use agent_client_protocol_http::{AcpHttpServer, ServerOptions};
use axum::Extension;
use axum::Router;
use axum::body::Body;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use berth_ops::ErrorKind;
use tokio::sync::OwnedSemaphorePermit;

use crate::guard::Principal;
use crate::tokens::TokenRecord;
use crate::websocket::{self, AcpEndpoint, TOKEN_RECHECK};

const CONNECTION_ID: &str = "acp-connection-id";

/// What the factory of the transport's server needs for the connection an `initialize`
/// opens. The factory takes no arguments and runs inside the `initialize` request, so it is
/// handed over in a task-local value of that request.
struct Opening {
    acp: AcpEndpoint,
    principal: Principal,
    slot: Mutex<Option<OwnedSemaphorePermit>>,
    /// The connection's server, once made: what the connection id is bound to.
    made: Mutex<Option<Weak<berth_acp::Server>>>,
}

tokio::task_local! {
    static OPENING: Arc<Opening>;
}

/// The connections this server opened over HTTP: each id with the token it answers to, while
/// its server lives.
#[derive(Default)]
pub struct Connections {
    by_id: Mutex<HashMap<String, (String, Weak<berth_acp::Server>)>>,
}

impl Connections {
    fn bind(&self, id: String, counted_as: String, server: Weak<berth_acp::Server>) {
        let mut by_id = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        // Ended connections go as new ones come: the map holds about the open ones.
        by_id.retain(|_, (_, s)| s.strong_count() > 0);
        by_id.insert(id, (counted_as, server));
    }

    fn answers_to(&self, id: &str, counted_as: &str) -> bool {
        let by_id = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        by_id.get(id).is_some_and(|(owner, _)| owner == counted_as)
    }

    fn forget(&self, id: &str) {
        let mut by_id = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        by_id.remove(id);
    }
}

/// The router of `/acp`: berth's WebSocket endpoint for upgrades, the transport's server for
/// the rest.
pub fn router(acp: AcpEndpoint) -> Router {
    let transport = AcpHttpServer::new(|| {
        let opening = OPENING
            .try_with(Arc::clone)
            .expect("every request to the ACP HTTP router passes through `split`");
        connection(&opening)
    })
    .with_options(
        ServerOptions::default()
            .with_path("/acp")
            .with_health_endpoint(false),
    )
    .into_router();
    transport.layer(axum::middleware::from_fn_with_state(acp, split))
}

/// The connection an `initialize` opens: the endpoint's server for the principal, watched.
fn connection(
    opening: &Opening,
) -> impl agent_client_protocol::ConnectTo<agent_client_protocol::Client> + use<> {
    let (server, token) = opening.acp.server_for(&opening.principal);
    let server = Arc::new(server);
    *opening.made.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::downgrade(&server));
    let slot = opening
        .slot
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    let acp = opening.acp.clone();
    berth_acp::connection(server, move |server| watch(acp, server, token, slot))
}

/// Ends the connection (with an error, which closes it) when its token is no longer live,
/// its client has gone silent, or the server shuts down; holds its connection slot till then.
async fn watch(
    acp: AcpEndpoint,
    server: Arc<berth_acp::Server>,
    token: Option<TokenRecord>,
    slot: Option<OwnedSemaphorePermit>,
) -> Result<(), agent_client_protocol::Error> {
    let _slot = slot;
    let mut ticks = tokio::time::interval(TOKEN_RECHECK);
    // Why the connection ends, as an error of berth's kinds (its code from berth-core's table).
    let end = |kind, why: &str| Err(berth_agent::acp::error_of_kind(kind, why));
    loop {
        tokio::select! {
            _ = acp.closing() => return end(ErrorKind::External, "the server is shutting down"),
            _ = ticks.tick() => {
                if let Some(t) = &token
                    && !acp.tokens().still_live(t).unwrap_or(false)
                {
                    return end(ErrorKind::Refused, "the connection's token was revoked or has expired");
                }
                if server.idle_for().is_some_and(|idle| idle > acp.http_idle()) {
                    return end(ErrorKind::Refused, "the client was silent too long (--acp-http-idle)");
                }
            }
        }
    }
}

/// The middleware in front of the transport's server: WebSocket upgrades to berth's own
/// endpoint; bodies held to the size limit; `initialize` given a connection slot and its
/// principal; every other request's connection id checked against the token that opened it.
async fn split(State(acp): State<AcpEndpoint>, request: Request, next: Next) -> Response {
    let Some(principal) = request.extensions().get::<Principal>().cloned() else {
        return (StatusCode::UNAUTHORIZED, "no token\n").into_response();
    };
    let (mut parts, body) = request.into_parts();
    if parts.method == Method::GET && parts.headers.contains_key(axum::http::header::UPGRADE) {
        return match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
            Ok(ws) => websocket::upgrade(State(acp), Extension(principal), ws).await,
            Err(rejection) => rejection.into_response(),
        };
    }
    let counted_as = principal.counted_as();
    let id = parts
        .headers
        .get(CONNECTION_ID)
        .and_then(crate::guard::header_text)
        .map(str::to_owned);
    if let Some(id) = &id
        && !acp.connections().answers_to(id, &counted_as)
    {
        // As the transport answers an id it does not know: nothing says the id exists.
        return (StatusCode::NOT_FOUND, "no such ACP connection\n").into_response();
    }
    if parts.method == Method::DELETE {
        let response = next.run(Request::from_parts(parts, body)).await;
        if let Some(id) = &id {
            acp.connections().forget(id);
        }
        return response;
    }
    if parts.method != Method::POST {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let bytes = match axum::body::to_bytes(body, acp.max_message_bytes()).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                "the message is over this server's --max-message-bytes\n",
            )
                .into_response();
        }
    };
    let initialize = id.is_none()
        && serde_json::from_slice::<serde_json::Value>(&bytes).is_ok_and(|m| {
            m.get("method").and_then(|m| m.as_str()) == Some("initialize") && m.get("id").is_some()
        });
    let request = Request::from_parts(parts, Body::from(bytes));
    if !initialize {
        return next.run(request).await;
    }
    let Some(slot) = acp.slot() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "this berth server has as many ACP connections as it takes (--max-connections)\n",
        )
            .into_response();
    };
    let opening = Arc::new(Opening {
        acp: acp.clone(),
        principal,
        slot: Mutex::new(Some(slot)),
        made: Mutex::new(None),
    });
    let response = OPENING.scope(opening.clone(), next.run(request)).await;
    let made = opening
        .made
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let (Some(id), Some(server)) = (
        response
            .headers()
            .get(CONNECTION_ID)
            .and_then(crate::guard::header_text),
        made,
    ) {
        acp.connections().bind(id.to_owned(), counted_as, server);
    }
    response
}
