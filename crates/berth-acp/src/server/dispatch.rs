//! The connection's one table of requests: each answered in the dispatch loop when it must be
//! ordered with the messages after it, else from a task of its own.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    CancelNotification, ClientRequest, SessionId, SessionNotification, SessionUpdate,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent as AcpAgent, Client};
use serde_json::Value;

use super::{Result, Server};
use crate::errors;

/// The connection's handlers over `server`: every request through [`Server::dispatch`], and
/// the one notification berth takes, `session/cancel`.
pub fn builder(
    server: Arc<Server>,
) -> agent_client_protocol::v1::Builder<
    AcpAgent,
    impl agent_client_protocol::HandleDispatchFrom<Client>,
> {
    let cancels = server.clone();
    AcpAgent
        .v1()
        .name("berth")
        .on_receive_request(
            async move |request: ClientRequest,
                        responder: Responder<Value>,
                        cx: ConnectionTo<Client>| {
                server.dispatch(request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx: ConnectionTo<Client>| {
                cancels.heard();
                cancels.cancel(&notification);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
}

impl Server {
    /// The table of requests. It runs in the connection's dispatch loop: what is quick and
    /// must be ordered with the messages after it (initialize, close, marking a session busy
    /// before its next prompt is read) answers here; everything that waits answers from a
    /// task of its own ([`answer_later`]).
    fn dispatch(
        self: &Arc<Self>,
        request: ClientRequest,
        responder: Responder<Value>,
        cx: ConnectionTo<Client>,
    ) -> Result<()> {
        self.heard();
        let s = self.clone();
        match request {
            ClientRequest::InitializeRequest(r) => answer(responder, Ok(self.initialize(r))),
            ClientRequest::CloseSessionRequest(r) => answer(responder, self.close_session(&r)),
            ClientRequest::NewSessionRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    let answer = s.new_session(r).await;
                    // Once the editor knows the session: the commands its prompt offers.
                    let tell = match &answer {
                        Ok(a) => s.commands_of(&a.session_id).await,
                        Err(_) => None,
                    };
                    (answer, tell)
                })
            }
            ClientRequest::ForkSessionRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    let answer = s.fork_session(r).await;
                    let tell = match &answer {
                        Ok(a) => s.commands_of(&a.session_id).await,
                        Err(_) => None,
                    };
                    (answer, tell)
                })
            }
            ClientRequest::LoadSessionRequest(r) => {
                answer_later(&cx, responder, move |cx| async move {
                    (s.load_session(r, &cx).await, None)
                })
            }
            ClientRequest::ResumeSessionRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    let id = r.session_id.clone();
                    let answer = s.resume_session(r).await;
                    let tell = match answer.is_ok() {
                        true => s.commands_of(&id).await,
                        false => None,
                    };
                    (answer, tell)
                })
            }
            ClientRequest::DeleteSessionRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    (s.delete_session(r).await, None)
                })
            }
            ClientRequest::ListSessionsRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    (s.list_sessions(r).await, None)
                })
            }
            ClientRequest::SetSessionConfigOptionRequest(r) => {
                answer_later(&cx, responder, move |_| async move {
                    (s.set_config_option(r).await, None)
                })
            }
            ClientRequest::PromptRequest(r) => {
                if let Some(gate) = &self.gate
                    && let Err(why) = gate()
                {
                    return responder.respond_with_error(errors::refused(why));
                }
                // Busy from now: a prompt read next is refused, not queued.
                let (open, cancel) = match self.begin_prompt(&r.session_id) {
                    Ok(begun) => begun,
                    Err(e) => return responder.respond_with_error(e),
                };
                answer_later(&cx, responder, move |cx| async move {
                    let answer = s.prompt(&open, r, cancel, &cx).await;
                    // Free before answering: the client may send its next prompt the moment
                    // it reads this answer.
                    *open.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
                    // A skill added or removed meanwhile: the editor's menu follows.
                    let tell = s.commands_if_changed(&open).await;
                    (answer, tell)
                })
            }
            other => responder.respond_with_error(
                agent_client_protocol::v1::schema::Error::method_not_found()
                    .data(format!("berth does not handle {}", request_method(&other)))
                    .into(),
            ),
        }
    }
}

/// Answers a request now.
fn answer<T: serde::Serialize>(responder: Responder<Value>, answer: Result<T>) -> Result<()> {
    responder.respond_with_result(answer.and_then(to_value))
}

/// Answers a request from a task of its own: `work` gives the answer and, when the client
/// should then be told the commands a session's prompt offers, that session's id and them.
fn answer_later<T, F, Fut>(
    cx: &ConnectionTo<Client>,
    responder: Responder<Value>,
    work: F,
) -> Result<()>
where
    T: serde::Serialize,
    F: FnOnce(ConnectionTo<Client>) -> Fut,
    Fut: std::future::Future<Output = (Result<T>, Option<(SessionId, SessionUpdate)>)>
        + Send
        + 'static,
{
    let cx2 = cx.clone();
    let work = work(cx.clone());
    cx.spawn(async move {
        let (result, tell_commands) = work.await;
        let _ = responder.respond_with_result(result.and_then(to_value));
        if let Some((id, commands)) = tell_commands {
            let _ = cx2.send_notification(SessionNotification::new(id, commands));
        }
        // An error here would close the connection; the request was answered.
        Ok(())
    })
}

fn to_value<T: serde::Serialize>(answer: T) -> Result<Value> {
    serde_json::to_value(answer)
        .map_err(|e| errors::of_kind(berth_ops::ErrorKind::Io, e.to_string()))
}

/// The method of a request berth does not handle, for its error.
fn request_method(request: &ClientRequest) -> String {
    request.method().to_owned()
}
