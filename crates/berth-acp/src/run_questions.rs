//! An editor following a session a run's agent works in answers that agent's questions: a run
//! started with `--ask` waits on a call its policy does not cover (berth-run's `ask`), and a
//! client that opened the session with `session/load` is asked it as
//! `session/request_permission`; its person's answer goes to the run's supervisor as `berth
//! run answer` sends it (`RunStore::queue_answer_to`), from whichever process or node.
//!
//! The questions come from berth-run (`Runs::questions`, which follows the run's events as
//! they are kept); each is asked once on this connection. Only a client on this machine or with the admin token is asked: a
//! device's token must not widen what a run the server's owner started may do.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    SessionId, ToolCallUpdate, ToolCallUpdateFields,
};
use berth_run::{Answer, Runs};

/// Asks the client, on a task of its own, every question the run's agent working in `session`
/// waits on, until the run is over or the client goes away. Nothing when no running run's
/// agent works there.
pub(crate) fn follow(
    ops: berth_ops::Ops,
    session: String,
    session_id: SessionId,
    cx: ConnectionTo<Client>,
) {
    tokio::spawn(async move {
        let runs = match Runs::open(ops).await {
            Ok(runs) => runs,
            Err(e) => {
                tracing::debug!(%session, "no run's questions are asked here: {e}");
                return;
            }
        };
        let found = runs.store().find_session(&session).await;
        let Ok(Some((record, agent))) = found else {
            return;
        };
        if record.state.is_over() {
            return;
        }
        let id = record.id.clone();
        let mut questions = runs.questions(&id, agent);
        while let Some(asked) = questions.next().await {
            let w = match asked {
                Ok(w) => w,
                Err(e) => {
                    tracing::debug!(run = %id, "the run's questions end here: {e}");
                    return;
                }
            };
            let Some(answer) = ask(&cx, &session_id, &w).await else {
                // The client cannot answer (it went away, or failed): it is not asked
                // again; the run's wait, or another person, decides.
                return;
            };
            let sent = runs
                .store()
                .queue_answer_to(&id, Some(agent), Some(&w.question), answer)
                .await;
            if let Err(e) = sent {
                // Answered meanwhile by someone else, or the run ended: nothing to do.
                tracing::debug!(run = %id, agent = agent + 1, "the client's answer is not taken: {e}");
            }
        }
    });
}

/// The client's person's answer to `w`; `None` when the client gave none.
async fn ask(
    cx: &ConnectionTo<Client>,
    session_id: &SessionId,
    w: &berth_run::Waiting,
) -> Option<Answer> {
    let fields = ToolCallUpdateFields::new().title(format!(
        "The run's agent asks: may it {}? {}",
        w.tool, w.description
    ));
    let request = RequestPermissionRequest::new(
        session_id.clone(),
        ToolCallUpdate::new(format!("run-question-{}", w.question), fields),
        vec![
            PermissionOption::new("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(
                "allow_always",
                format!("Always allow {} in this session", w.tool),
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new("reject_once", "Reject", PermissionOptionKind::RejectOnce),
        ],
    );
    match cx.send_request(request).block_task().await {
        Ok(response) => Some(match response.outcome {
            RequestPermissionOutcome::Selected(s) => match &*s.option_id.0 {
                "allow_once" => Answer::Allow,
                "allow_always" => Answer::AllowAlways,
                _ => Answer::Deny,
            },
            // Cancelled by the client: a refusal.
            _ => Answer::Deny,
        }),
        Err(_) => None,
    }
}
