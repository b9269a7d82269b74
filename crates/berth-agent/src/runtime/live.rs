//! A turn's hold, and the turn seen from outside while it runs.
//!
//! One turn at a time in a session: the turn's hold (`Ops::hold_turn`, which every process
//! and server on the store respects) is taken before anything reads the session's history or
//! recovers an answer a dead process kept aside. Someone who reopens the session while the
//! turn runs (a phone that reconnects, a second editor) cannot take it; reading the history
//! then shows the turn half-written, and recovering the kept-aside answer would write the
//! live answer twice. So this agent keeps each of its running turns here: what the transcript
//! held before the turn's prompt, the prompt, and every event so far. A follower gets those,
//! then each event as it comes, and shows the turn as its own client did, without anything
//! written to the transcript.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::{Events, Turn};
use crate::events::AgentEvent;

/// The running turns of one agent, by session id.
#[derive(Default)]
pub(super) struct LiveTurns {
    turns: Mutex<HashMap<String, Arc<Mutex<Live>>>>,
}

struct Live {
    /// Messages the transcript held before the turn's prompt.
    before: usize,
    /// The prompt, as the transcript keeps it.
    prompt: String,
    /// Every event the turn sent so far.
    events: Vec<AgentEvent>,
    /// Where each follower's events go.
    followers: Vec<mpsc::UnboundedSender<AgentEvent>>,
    /// The turn's provider, model and context window, as its [`Turn`] says them.
    provider: &'static str,
    model: String,
    context_tokens: u64,
}

/// A running turn, seen by someone else than the client that prompted it.
pub struct Following {
    /// How many messages of the transcript came before the turn's prompt: what is durable
    /// of the session apart from this turn.
    pub before: usize,
    /// The turn's prompt, as the transcript keeps it.
    pub prompt: String,
    /// The turn: its events from its first (those that were sent already come at once) to
    /// its [`AgentEvent::TurnEnded`]. Answering its permission requests or cancelling it is
    /// for the client that prompted it.
    pub turn: Turn,
}

/// A turn's place in [`LiveTurns`], while it runs; dropping it takes the turn out.
pub(super) struct LiveTurn {
    turns: Arc<LiveTurns>,
    session: String,
    live: Arc<Mutex<Live>>,
}

impl LiveTurns {
    /// Puts a turn of `session` in: its hold is taken, so it is the session's only one.
    pub(super) fn begin(
        self: &Arc<Self>,
        session: &str,
        before: usize,
        prompt: String,
        turn: &Turn,
    ) -> LiveTurn {
        let live = Arc::new(Mutex::new(Live {
            before,
            prompt,
            events: Vec::new(),
            followers: Vec::new(),
            provider: turn.provider,
            model: turn.model.clone(),
            context_tokens: turn.context_tokens,
        }));
        lock(&self.turns).insert(session.to_owned(), live.clone());
        LiveTurn {
            turns: self.clone(),
            session: session.to_owned(),
            live,
        }
    }

    /// Follows the turn of `session` this agent runs, if it runs one.
    pub(super) fn follow(&self, session: &str) -> Option<Following> {
        let live = lock(&self.turns).get(session)?.clone();
        let mut live = lock(&live);
        let (tx, rx) = mpsc::unbounded_channel();
        for event in &live.events {
            let _ = tx.send(event.clone());
        }
        // A turn whose end was sent already takes no follower: it has nothing more to say.
        let ended = matches!(live.events.last(), Some(AgentEvent::TurnEnded { .. }));
        if !ended {
            live.followers.push(tx);
        }
        Some(Following {
            before: live.before,
            prompt: live.prompt.clone(),
            turn: Turn {
                events: Events::Followed(rx),
                ended: false,
                provider: live.provider,
                model: live.model.clone(),
                context_tokens: live.context_tokens,
            },
        })
    }
}

impl LiveTurn {
    /// Records an event of the turn and passes it to its followers; a follower gone is
    /// forgotten.
    pub(super) fn publish(&self, event: &AgentEvent) {
        let mut live = lock(&self.live);
        live.events.push(event.clone());
        live.followers.retain(|f| f.send(event.clone()).is_ok());
    }
}

impl Drop for LiveTurn {
    fn drop(&mut self) {
        let mut turns = lock(&self.turns.turns);
        if turns
            .get(&self.session)
            .is_some_and(|l| Arc::ptr_eq(l, &self.live))
        {
            turns.remove(&self.session);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
