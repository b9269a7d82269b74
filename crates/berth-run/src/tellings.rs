//! What the agents of a running run were told while they worked (`berth run tell`, queued by
//! its supervisor): berth's own agent takes them at its next step, beside the step's tool
//! results; what is left when a turn ends is the agent's next prompt, in the same session
//! (an ACP agent's, in the same process). A `--now` tell cuts the agent's current turn
//! (its per-turn token, never the agent's own) and goes first. An agent whose last turn
//! ended takes no more.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use berth_agent::CancellationToken;
use tokio::sync::Notify;

/// Every agent's queue of what it was told.
#[derive(Default)]
pub(crate) struct Tellings {
    queues: Mutex<BTreeMap<usize, Queue>>,
    /// Woken at each tell: an agent that queues prompts itself takes it at once.
    pub(crate) arrived: Notify,
}

/// One agent's queue.
#[derive(Default)]
struct Queue {
    texts: VecDeque<String>,
    /// Its turns are over: nothing more is taken.
    closed: bool,
    /// What cancels its current turn alone (a `--now` tell), while one runs.
    turn: Option<CancellationToken>,
    /// Its current turn was cut by a `--now` tell, which is its next prompt.
    cut: bool,
}

impl Tellings {
    fn with<T>(&self, i: usize, f: impl FnOnce(&mut Queue) -> T) -> T {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        f(queues.entry(i).or_default())
    }

    /// Queues `text` for agent `i`; `false` when its turns are over.
    pub(crate) fn push(&self, i: usize, text: String) -> bool {
        let pushed = self.with(i, |q| {
            if q.closed {
                return false;
            }
            q.texts.push_back(text);
            true
        });
        self.arrived.notify_waiters();
        pushed
    }

    /// Puts `text` first in agent `i`'s queue and cancels its current turn (`--now`): the
    /// turn ends cancelled, the agent goes on, and `text` is its next prompt. `false` when
    /// its turns are over.
    pub(crate) fn push_now(&self, i: usize, text: String) -> bool {
        self.with(i, |q| {
            if q.closed {
                return false;
            }
            q.texts.push_front(text);
            if let Some(turn) = &q.turn {
                q.cut = true;
                turn.cancel();
            }
            true
        })
    }

    /// A token for agent `i`'s next turn: a child of `agent` (a stop of the agent or of the
    /// run still cancels it), which a `--now` tell cancels alone.
    pub(crate) fn turn_token(&self, i: usize, agent: &CancellationToken) -> CancellationToken {
        let token = agent.child_token();
        self.with(i, |q| {
            q.turn = Some(token.clone());
            q.cut = false;
        });
        token
    }

    /// Whether agent `i`'s turn that just ended was cut by a `--now` tell (and not stopped).
    pub(crate) fn was_cut(&self, i: usize) -> bool {
        self.with(i, |q| {
            q.turn = None;
            std::mem::take(&mut q.cut)
        })
    }

    /// Everything queued for agent `i` so far, taken, its turns going on: what berth's own
    /// agent reads at its next step.
    pub(crate) fn take_all(&self, i: usize) -> Vec<String> {
        self.with(i, |q| match q.cut {
            // The turn is being cut: what it was told is the next turn's, not this one's.
            true => Vec::new(),
            false => q.texts.drain(..).collect(),
        })
    }

    /// The next text for agent `i`, else its turns are over from now.
    pub(crate) fn next_or_close(&self, i: usize) -> Option<String> {
        self.with(i, |q| {
            let next = q.texts.pop_front();
            if next.is_none() {
                q.closed = true;
            }
            next
        })
    }

    /// Agent `i` takes no more; what was queued for it is dropped and given back.
    pub(crate) fn close(&self, i: usize) -> Vec<String> {
        self.with(i, |q| {
            q.closed = true;
            q.turn = None;
            q.texts.drain(..).collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tell_now_cuts_only_the_current_turn_and_goes_first() {
        let told = Tellings::default();
        let agent = CancellationToken::new();
        let turn = told.turn_token(0, &agent);
        assert!(told.push(0, "later".into()));
        assert!(told.push_now(0, "at once".into()));
        assert!(turn.is_cancelled() && !agent.is_cancelled());
        assert!(told.was_cut(0));
        assert_eq!(told.next_or_close(0).as_deref(), Some("at once"));
        assert_eq!(told.take_all(0), ["later"]);
        assert_eq!(told.next_or_close(0), None);
        assert!(!told.push(0, "too late".into()));
    }

    #[test]
    fn a_stopped_agent_was_not_cut() {
        let told = Tellings::default();
        let agent = CancellationToken::new();
        let turn = told.turn_token(0, &agent);
        agent.cancel();
        assert!(turn.is_cancelled());
        assert!(!told.was_cut(0));
    }
}
