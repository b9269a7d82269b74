//! berth-acp: berth's agent for editors (Zed, JetBrains, neovim) and phone apps (through a
//! bridge) over the Agent Client Protocol.
//!
//! Its one job is translation: ACP requests become calls of berth's operations (`berth-ops`:
//! which workspace and session, transcripts, bindings, config) and turns of berth's agent
//! runtime (`berth-agent`); the runtime's events become `session/update` notifications, in the
//! order they happen. There is no agent logic here: `berth chat -p` and `berth acp` run the same
//! turns, and nothing about a session lives only in this process (an ACP session id *is* a
//! berth session id; `session/load` in a new process replays the transcript from disk).
//!
//! - [`serve`] and [`serve_stdio`]: one connection, with the `agent-client-protocol` crate's
//!   typed handlers (`server.rs`).
//! - `turn.rs`: a prompt's turn: events to updates, permission requests in order with them,
//!   stop reasons.
//! - `client.rs`: the client's reach the runtime uses when the client offers it: its files
//!   (`fs/read_text_file`, `fs/write_text_file`) and its terminals (`terminal/*`).
//! - `content.rs`: prompt blocks to the model's input; transcripts to replayed chunks.
//! - `commands.rs`: berth's slash commands (`berth_agent::slash`) offered to the editor and
//!   run when a prompt is one.
//! - `models.rs`: the model choice, a session config option from the workspace's config.
//! - `errors.rs`: berth's error kinds as ACP errors, in one place.
//! - `transport.rs`: standard I/O under the crate's line transport, writing bursts at once.

#![forbid(unsafe_code)]

mod client;
mod commands;
mod content;
mod errors;
mod models;
mod run_questions;
mod server;
mod transport;
mod turn;

use std::sync::Arc;

use agent_client_protocol::{Agent as AcpAgent, Client, ConnectTo};
use berth_agent::Agent;
use berth_ops::Ops;

pub use server::{Caller, PromptGate, Server};
pub use turn::{MERGE_WINDOW, merge_window};

/// Serves one ACP client over standard input and output until it closes standard input.
/// Standard output carries the protocol only; messages waiting together go out in one write
/// (`transport.rs`).
pub async fn serve_stdio(ops: Ops, agent: Agent) -> Result<(), agent_client_protocol::Error> {
    let (lines, writer) = transport::stdio();
    let served = serve(ops, agent, lines).await;
    transport::finish(writer);
    served
}

/// Serves one ACP client over `transport` (standard I/O, or an in-memory channel in tests).
pub async fn serve(
    ops: Ops,
    agent: Agent,
    transport: impl ConnectTo<AcpAgent> + 'static,
) -> Result<(), agent_client_protocol::Error> {
    serve_connection(Server::new(ops, agent), transport).await
}

/// Serves one ACP client with `server` (`berth serve`: one acting for a device's token or
/// the admin, its prompts held to the token's rate) over `transport`.
pub async fn serve_connection(
    server: Server,
    transport: impl ConnectTo<AcpAgent> + 'static,
) -> Result<(), agent_client_protocol::Error> {
    server::builder(Arc::new(server))
        .connect_to(transport)
        .await
}

/// One connection of `server`, for a transport that runs connections itself (the HTTP
/// transport's server, which calls a factory per connection). `watch` runs beside it; when it
/// ends with an error, the connection closes (a revoked token, a client gone silent).
pub fn connection<W, F>(server: Arc<Server>, watch: W) -> impl ConnectTo<Client> + 'static
where
    W: FnOnce(Arc<Server>) -> F + Send + 'static,
    F: std::future::Future<Output = Result<(), agent_client_protocol::Error>> + Send + 'static,
{
    let watched = server.clone();
    server::builder(server).with_spawned(move |_cx| watch(watched))
}
