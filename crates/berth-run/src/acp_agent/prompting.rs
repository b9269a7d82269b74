//! One turn of a run's ACP agent: its prompt sent (`session/prompt`) and answered, a cut
//! of the turn sent as `session/cancel` with a grace period to answer it. An agent that says
//! in `initialize` that it queues prompts itself (claude-agent-acp:
//! `agentCapabilities._meta.claudeCode.promptQueueing`) is sent each word it is told while it
//! works at once, as a prompt of its own, recorded where it was sent; the prompts that
//! overlapped are one turn, which ends once each is answered, and whose tokens are counted
//! once: the most any of their answers reports, not their sum (such an agent answers the
//! prompts it folded together with the same work).

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, PromptRequest, PromptResponse, SessionId, TextContent,
};
use agent_client_protocol::{Agent, Error};
use berth_agent::{CancellationToken, TurnStop, Usage};
use berth_ops::{Message, Role};
use futures::StreamExt;
use futures::stream::FuturesUnordered;

use super::{Between, CANCEL_GRACE, Shared};
use crate::event::RunEvent;

/// What a turn is asked through.
pub(super) struct Asked<'a> {
    pub cx: &'a ConnectionTo<Agent>,
    pub session: &'a SessionId,
    pub shared: &'a Shared,
    pub between: &'a dyn Between,
    /// The agent queues prompts itself: what it is told goes to it at once.
    pub queues: bool,
}

impl Asked<'_> {
    /// The turn on `task` (recorded already), answered: how it ended and its tokens; `None`
    /// when `turn` was cancelled (`session/cancel` sent) and the agent did not answer within
    /// the grace period.
    pub(super) async fn turn(
        &self,
        task: String,
        turn: &CancellationToken,
    ) -> Result<Option<(TurnStop, Usage)>, Error> {
        let mut pending = FuturesUnordered::new();
        pending.push(self.prompt(task));
        let mut ended = None;
        loop {
            tokio::select! {
                answered = pending.next() => match answered {
                    Some(answer) => {
                        ended = Some(counted_once(ended, &answer?));
                        if pending.is_empty() {
                            break;
                        }
                    }
                    None => break,
                },
                () = turn.cancelled() => {
                    self.cx
                        .send_notification(CancelNotification::new(self.session.clone()))?;
                    let answers = async {
                        while let Some(answer) = pending.next().await {
                            ended = Some(counted_once(ended, &answer?));
                        }
                        Ok::<_, Error>(())
                    };
                    match tokio::time::timeout(CANCEL_GRACE, answers).await {
                        Ok(answered) => answered?,
                        Err(_) => return Ok(None),
                    }
                    break;
                }
                told = self.between.told(), if self.queues => {
                    for text in told {
                        // Where it joined: after what the agent said so far.
                        self.shared.flush_answer("").await;
                        let message = Message::new(Role::User, text.clone());
                        let said = match self.shared.ops.append_message(&self.shared.session, &message).await {
                            Ok(()) => RunEvent::Told { agent: self.shared.agent, text: text.clone() },
                            // Not sent, as a prompt that cannot be recorded is not; said.
                            Err(e) => RunEvent::Notice {
                                agent: self.shared.agent,
                                message: format!("it was not told {:?}: it could not be recorded ({e})", berth_ops::title_of(&text)),
                            },
                        };
                        let sent = matches!(said, RunEvent::Told { .. });
                        let _ = self.shared.tx.send(said).await;
                        if sent {
                            pending.push(self.prompt(text));
                        }
                    }
                }
            }
        }
        Ok(ended.map(|(stop, usage)| (berth_agent::acp::turn_stop_of(stop), usage)))
    }

    /// `text` sent as a prompt of the session; its answer.
    fn prompt(&self, text: String) -> impl Future<Output = Result<PromptResponse, Error>> + use<> {
        self.cx
            .send_request(PromptRequest::new(
                self.session.clone(),
                vec![ContentBlock::Text(TextContent::new(text))],
            ))
            .block_task()
    }
}

/// Whether the agent says it queues prompts itself (claude-agent-acp:
/// `_meta.claudeCode.promptQueueing`): what it is told is then sent at once, while it works,
/// rather than after its turn.
pub(super) fn queues_prompts(
    capabilities: &agent_client_protocol::v1::schema::AgentCapabilities,
) -> bool {
    capabilities
        .meta
        .as_ref()
        .and_then(|m| m.get("claudeCode"))
        .and_then(|c| c.get("promptQueueing"))
        .and_then(serde_json::Value::as_bool)
        == Some(true)
}

/// The turn so far with one more answer: its stop reason (the last answer's), and its tokens
/// counted once (the most an answer reports).
fn counted_once(
    so_far: Option<(agent_client_protocol::v1::schema::StopReason, Usage)>,
    answer: &PromptResponse,
) -> (agent_client_protocol::v1::schema::StopReason, Usage) {
    let usage = answer
        .usage
        .as_ref()
        .map_or_else(Usage::default, |u| Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
        });
    let most = match so_far {
        Some((_, before))
            if before.input_tokens + before.output_tokens
                > usage.input_tokens + usage.output_tokens =>
        {
            before
        }
        _ => usage,
    };
    (answer.stop_reason, most)
}
