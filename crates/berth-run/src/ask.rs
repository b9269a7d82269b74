//! Runs that ask a person (`berth run --ask`, `[run] ask = true`): a call the run's `--allow`
//! list does not cover waits for a person's answer instead of being refused at once.
//!
//! The question is an event of the run ([`RunEvent::Asked`]), so every watcher sees it (the
//! record's agent status holds it while it waits, `needs_input` is notified), and an answer
//! comes back as a request to the run's supervisor, from any process or node: `berth run
//! answer`, the review page. Nobody answering within the run's wait is a refusal, said to the
//! model as that; a stop of the agent or of the run refuses at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use berth_agent::{CancellationToken, Decision};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::event::RunEvent;

/// How long a question waits unless the run says otherwise (`--ask-timeout`).
pub const DEFAULT_ASK_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A person's answer to a question of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// Allow this call.
    Allow,
    /// Allow this tool for the rest of the agent's session.
    AllowAlways,
    /// Refuse it.
    Deny,
}

impl Answer {
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Allow => "allow",
            Answer::AllowAlways => "allow_always",
            Answer::Deny => "deny",
        }
    }

    fn decision(self) -> Decision {
        match self {
            Answer::Allow => Decision::AllowOnce,
            Answer::AllowAlways => Decision::AllowAlways,
            Answer::Deny => Decision::Reject,
        }
    }
}

impl std::str::FromStr for Answer {
    type Err = String;

    fn from_str(s: &str) -> Result<Answer, String> {
        match s {
            "allow" => Ok(Answer::Allow),
            "allow_always" | "always" => Ok(Answer::AllowAlways),
            "deny" => Ok(Answer::Deny),
            other => Err(format!(
                "{other:?} is no answer: allow, allow_always or deny"
            )),
        }
    }
}

/// The questions of a run waiting for an answer, by id.
#[derive(Default)]
pub(crate) struct Questions {
    waiting: Mutex<HashMap<String, (usize, oneshot::Sender<Answer>)>>,
}

/// What one agent's asking needs: the run's questions, how long one waits, what stops it.
#[derive(Clone)]
pub(crate) struct Asking {
    pub questions: std::sync::Arc<Questions>,
    pub timeout: Duration,
    pub cancel: CancellationToken,
    pub tx: mpsc::Sender<RunEvent>,
}

impl Asking {
    /// Asks a person whether agent `agent` may make the call `tool` (`description` says
    /// what it does), and waits for the answer, the run's wait, or a stop.
    pub async fn ask(&self, agent: usize, tool: &str, description: &str) -> Decision {
        let question = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let (answer_tx, answer_rx) = oneshot::channel();
        self.questions
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(question.clone(), (agent, answer_tx));
        let _ = self
            .tx
            .send(RunEvent::Asked {
                agent,
                question: question.clone(),
                tool: tool.to_owned(),
                description: description.lines().next().unwrap_or("").to_owned(),
            })
            .await;
        let (decision, said) = tokio::select! {
            answer = answer_rx => match answer {
                Ok(answer) => (answer.decision(), answer.as_str()),
                Err(_) => (Decision::Reject, "cancelled"),
            },
            () = self.cancel.cancelled() => (Decision::Reject, "cancelled"),
            () = tokio::time::sleep(self.timeout) => (Decision::Expired, "expired"),
        };
        self.questions
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&question);
        let _ = self
            .tx
            .send(RunEvent::Answered {
                agent,
                question,
                answer: said.to_owned(),
            })
            .await;
        decision
    }
}

impl Questions {
    /// Answers question `question` of agent `agent`; whether it was waiting.
    pub fn answer(&self, agent: usize, question: &str, answer: Answer) -> bool {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        match waiting.get(question) {
            Some((a, _)) if *a == agent => {}
            _ => return false,
        }
        match waiting.remove(question) {
            Some((_, tx)) => tx.send(answer).is_ok(),
            None => false,
        }
    }
}
