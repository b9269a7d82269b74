//! What comes between an agent's turns in a run, the same for berth's own agent and an ACP
//! agent (`acp_agent::Between`): each turn's tokens added up and held to the budget, then the
//! next thing it was told as its next prompt (said as `Told`), or the end of its turns, what
//! was still queued dropped and said.

use std::sync::Mutex;

use berth_agent::{CancellationToken, TurnStop, Usage};

use super::{Running, Spending};
use crate::event::RunEvent;

/// Agent `i`'s turns in a run: their tokens so far, and its budget.
pub(super) struct Turns<'r> {
    run: &'r Running,
    i: usize,
    spending: Mutex<Spending>,
}

impl<'r> Turns<'r> {
    pub(super) fn new(run: &'r Running, i: usize, spending: Spending) -> Turns<'r> {
        Turns {
            run,
            i,
            spending: Mutex::new(spending),
        }
    }

    /// Its budget, and what its turns used before the next.
    pub(super) fn spending(&self) -> Spending {
        *self.spending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tokens of every turn that ended.
    pub(super) fn used(&self) -> Usage {
        self.spending().before
    }
}

#[async_trait::async_trait]
impl crate::acp_agent::Between for Turns<'_> {
    fn turn_cancel(&self) -> CancellationToken {
        self.run
            .told
            .turn_token(self.i, &self.run.stopper.agent(self.i))
    }

    async fn next(&self, stop: &TurnStop, used: Usage) -> Option<String> {
        let (run, i) = (self.run, self.i);
        let crossed = {
            let mut spending = self.spending.lock().unwrap_or_else(|e| e.into_inner());
            let crossed = spending.crossed(used);
            spending.before.input_tokens += used.input_tokens;
            spending.before.output_tokens += used.output_tokens;
            crossed
        };
        // An ACP agent says what it used when its turn ends: held to its budget then.
        let over = match crossed {
            Some(why) => {
                run.over_budget
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .entry(i)
                    .or_insert(why);
                true
            }
            None => false,
        };
        // A turn cut by a `--now` tell goes on with it; one stopped does not.
        let cut = run.told.was_cut(i) && !run.stopper.agent(i).is_cancelled();
        let went_on = match stop {
            TurnStop::EndTurn | TurnStop::MaxTokens | TurnStop::MaxToolIterations => true,
            TurnStop::Cancelled => cut,
            TurnStop::Refusal | TurnStop::Failed { .. } => false,
        };
        if over || !went_on {
            for dropped in run.told.close(i) {
                let how = if over { "budget" } else { stop.as_str() };
                run.send(RunEvent::Notice {
                    agent: i,
                    message: format!(
                        "it was not told {:?}: its turn ended {how}",
                        berth_ops::title_of(&dropped),
                    ),
                })
                .await;
            }
            return None;
        }
        let text = run.told.next_or_close(i)?;
        run.send(RunEvent::Told {
            agent: i,
            text: text.clone(),
        })
        .await;
        Some(text)
    }

    async fn told(&self) -> Vec<String> {
        loop {
            // Registered before the queue is read, so a tell between the two still wakes it.
            let arrived = self.run.told.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            let told = self.run.told.take_all(self.i);
            if !told.is_empty() {
                return told;
            }
            arrived.await;
        }
    }
}
