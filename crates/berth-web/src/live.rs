//! The live part of a session's page: turns asked for from the page, and what every page
//! watching the session is told while one runs.
//!
//! The transcript is the truth: a watching page is sent each message once it is in the
//! transcript (whoever appended it: this server's turn, the CLI, an editor over ACP), found
//! by looking at the transcript a few times a second. What a turn says before its messages
//! land (the answer as it streams, a tool starting, a permission request, the end) goes out
//! through the session's channel here, to every page watching it, and is only a preview: the
//! message that follows replaces it.
//!
//! A permission request waits here for an answer from any page watching the session (the
//! first answer counts), or for the turn's cancel; a page opened later is shown the requests
//! still waiting.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use berth_agent::{
    AgentEvent, CancellationToken, Decision, PermissionRequest, Permissions, Turn, TurnStop,
};
use serde::Serialize;
use tokio::sync::{broadcast, oneshot};

/// The sessions somebody watched or prompted since the server started.
#[derive(Default)]
pub struct Hub {
    sessions: Mutex<HashMap<String, Arc<SessionLive>>>,
}

impl Hub {
    /// The live state of the session `id`, made on first use. Sessions nobody watches, runs
    /// or holds any more are forgotten on the way, so the map does not grow with every
    /// session ever opened; one still held (a handler between finding it and subscribing)
    /// stays, so two pages never watch two states of one session.
    pub fn session(&self, id: &str) -> Arc<SessionLive> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, live| Arc::strong_count(live) > 1 || !live.is_idle());
        sessions
            .entry(id.to_owned())
            .or_insert_with(|| {
                Arc::new(SessionLive {
                    tx: broadcast::channel(1024).0,
                    running: Mutex::default(),
                    pending: Mutex::default(),
                })
            })
            .clone()
    }
}

/// What a page watching a session is told, besides new messages.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Live {
    /// The turn began (asked for by some page).
    Started,
    /// A piece of the answer.
    Text { text: String },
    /// A tool call began.
    Tool { name: String, kind: String },
    /// A call waits for an answer.
    Permission {
        id: String,
        tool: String,
        description: String,
    },
    /// A waiting call was answered (here or on another page), or its turn ended.
    Settled { id: String },
    /// Something a person should know that is not the answer.
    Notice { message: String },
    /// The turn ended; `message` says why when it did not end well.
    Ended {
        stop: String,
        message: Option<String>,
    },
}

/// One session's live state.
pub struct SessionLive {
    tx: broadcast::Sender<Live>,
    /// The running turn's cancel, while a turn asked for here runs.
    running: Mutex<Option<CancellationToken>>,
    /// Permission requests waiting, by id.
    pending: Mutex<HashMap<String, Waiting>>,
}

struct Waiting {
    shown: Live,
    answer: oneshot::Sender<Decision>,
}

impl SessionLive {
    pub fn subscribe(&self) -> broadcast::Receiver<Live> {
        self.tx.subscribe()
    }

    fn send(&self, event: Live) {
        // Nobody watching is fine: the transcript keeps what matters.
        let _ = self.tx.send(event);
    }

    /// The requests waiting now, for a page that starts watching.
    pub fn waiting(&self) -> Vec<Live> {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.values().map(|w| w.shown.clone()).collect()
    }

    /// Nobody watches it, and no turn of the page's runs or waits in it.
    fn is_idle(&self) -> bool {
        self.tx.receiver_count() == 0
            && !self.is_running()
            && self
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
    }

    /// Whether a turn asked for here is running.
    pub fn is_running(&self) -> bool {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Marks a turn as running, with its cancel; `None` when one already is.
    pub fn begin(&self) -> Option<CancellationToken> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.is_some() {
            return None;
        }
        let cancel = CancellationToken::new();
        *running = Some(cancel.clone());
        Some(cancel)
    }

    /// Gives back a turn's place (it could not start, or it ended).
    pub fn finish(&self) {
        *self.running.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Cancels the running turn; whether there was one.
    pub fn cancel(&self) -> bool {
        match &*self.running.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(cancel) => {
                cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Answers the waiting request `id`; whether it was waiting.
    pub fn answer(&self, id: &str, decision: Decision) -> bool {
        let waiting = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        match waiting {
            Some(w) => {
                let _ = w.answer.send(decision);
                self.send(Live::Settled { id: id.to_owned() });
                true
            }
            None => false,
        }
    }

    /// Tells every page what `turn` does until it ends, then gives the turn's place back.
    pub async fn relay(self: Arc<Self>, mut turn: Turn) {
        self.send(Live::Started);
        while let Some(event) = turn.next_event().await {
            match event {
                AgentEvent::Text { text } => self.send(Live::Text { text }),
                AgentEvent::ToolStarted { name, kind, .. } => self.send(Live::Tool {
                    name,
                    kind: serde_json::to_value(kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                }),
                AgentEvent::Notice { message } => self.send(Live::Notice { message }),
                // The page's own turns take no word mid-turn: nothing is ever told here.
                AgentEvent::Told { .. } => {}
                AgentEvent::TurnEnded { stop, .. } => {
                    let message = match &stop {
                        TurnStop::Failed { message } => Some(message.clone()),
                        _ => None,
                    };
                    self.drop_waiting();
                    self.finish();
                    self.send(Live::Ended {
                        stop: stop.as_str().to_owned(),
                        message,
                    });
                }
                AgentEvent::Thought { .. }
                | AgentEvent::Usage { .. }
                | AgentEvent::PermissionAsked { .. }
                | AgentEvent::ToolFinished { .. }
                | AgentEvent::Plan { .. } => {}
            }
        }
    }

    /// Requests of an ended turn wait no more.
    fn drop_waiting(&self) {
        let ids: Vec<String> = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(id, _)| id)
            .collect();
        for id in ids {
            self.send(Live::Settled { id });
        }
    }
}

/// The page's side of a turn's permissions: the request is shown on every page watching the
/// session, and the first answer from one of them counts. A turn cancelled meanwhile is
/// answered "reject", which its cancel then ends; a request nobody answers within `timeout`
/// (`[serve] permission_timeout_secs`) is answered `Expired`, so no turn holds its session
/// forever for a page nobody looks at.
pub struct PagePermissions {
    pub live: Arc<SessionLive>,
    pub cancel: CancellationToken,
    pub timeout: std::time::Duration,
    /// Whose `[[notify]]` entries hear that a request waits, and for which session.
    pub ops: berth_ops::Ops,
    pub session: berth_ops::Session,
}

#[async_trait]
impl Permissions for PagePermissions {
    async fn decide(&self, request: &PermissionRequest) -> Decision {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let shown = Live::Permission {
            id: id.clone(),
            tool: request.tool.clone(),
            description: request.description.clone(),
        };
        let (answer, answered) = oneshot::channel();
        self.live
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id.clone(),
                Waiting {
                    shown: shown.clone(),
                    answer,
                },
            );
        self.live.send(shown);
        // Somebody is told, unless a page shows it already.
        let watched = self.live.tx.receiver_count() > 0;
        self.ops
            .notify(request.needs_input(&self.session, &id, watched));
        tokio::select! {
            decision = answered => decision.unwrap_or(Decision::Reject),
            _ = self.cancel.cancelled() => {
                self.live.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                self.live.send(Live::Settled { id });
                Decision::Reject
            }
            _ = tokio::time::sleep(self.timeout) => {
                self.live.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                self.live.send(Live::Settled { id });
                Decision::Expired
            }
        }
    }
    // No `allow_unconfined`: the first page to answer counts, and that may be a device's,
    // whose token must not lift the sandbox the server's owner set.
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(hub: &Hub) -> Vec<String> {
        let mut ids: Vec<String> = hub.sessions.lock().unwrap().keys().cloned().collect();
        ids.sort();
        ids
    }

    #[test]
    fn the_hub_forgets_sessions_nobody_holds_watches_or_runs() {
        let hub = Hub::default();
        let held = hub.session("held");
        let watched = hub.session("watched");
        let _watching = watched.subscribe();
        drop(watched);
        let running = hub.session("running");
        assert!(running.begin().is_some());
        drop(running);
        drop(hub.session("idle"));
        // Looked up again: the same state while it is held.
        assert!(Arc::ptr_eq(&held, &hub.session("held")));
        assert_eq!(known(&hub), ["held", "running", "watched"]);
        // A turn cannot start twice in one session.
        assert!(hub.session("running").begin().is_none());
        hub.session("running").finish();
        drop(held);
        drop(hub.session("other"));
        assert_eq!(known(&hub), ["other", "watched"]);
    }

    /// A home with a session, for the asker's notices (none are set up: nothing is sent).
    async fn session() -> (tempfile::TempDir, berth_ops::Ops, berth_ops::Session) {
        let home = tempfile::tempdir().unwrap();
        let ops = berth_ops::open(home.path(), &[]).unwrap();
        ops.create_workspace(berth_ops::CreateWorkspace {
            name: Some("w".into()),
            ..berth_ops::CreateWorkspace::new(berth_ops::Repository::None)
        })
        .await
        .unwrap();
        let session = ops
            .create_session(berth_ops::CreateSession {
                workspace: "w".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        (home, ops, session)
    }

    fn asked(call_id: &str, tool: &str, description: &str) -> PermissionRequest {
        PermissionRequest {
            call_id: call_id.into(),
            tool: tool.into(),
            arguments: serde_json::json!({}),
            description: description.into(),
            change: None,
        }
    }

    /// A request nobody answers no longer holds the session's turn forever.
    #[tokio::test]
    async fn a_permission_nobody_answers_expires() {
        let (_home, ops, session) = session().await;
        let hub = Hub::default();
        let live = hub.session("s");
        let asker = PagePermissions {
            live: live.clone(),
            cancel: CancellationToken::new(),
            timeout: std::time::Duration::from_millis(50),
            ops,
            session,
        };
        let request = asked("c", "write_file", "write a.txt");
        let decided =
            tokio::time::timeout(std::time::Duration::from_secs(10), asker.decide(&request))
                .await
                .expect("the request expires");
        assert_eq!(decided, Decision::Expired);
        assert!(live.waiting().is_empty());
    }

    #[tokio::test]
    async fn a_permission_waits_for_the_first_answer_or_the_cancel() {
        let (_home, ops, session) = session().await;
        let hub = Hub::default();
        let live = hub.session("s");
        let mut seen = live.subscribe();
        let cancel = CancellationToken::new();
        let asker = PagePermissions {
            live: live.clone(),
            cancel: cancel.clone(),
            timeout: std::time::Duration::from_secs(600),
            ops: ops.clone(),
            session: session.clone(),
        };
        let request = asked("c", "write_file", "write a.txt");
        let asking = tokio::spawn(async move { asker.decide(&request).await });
        let Live::Permission { id, .. } = seen.recv().await.unwrap() else {
            panic!("not a permission request")
        };
        assert_eq!(live.waiting().len(), 1);
        assert!(live.answer(&id, Decision::AllowOnce));
        // The second answer finds nothing waiting.
        assert!(!live.answer(&id, Decision::Reject));
        assert_eq!(asking.await.unwrap(), Decision::AllowOnce);

        let asker = PagePermissions {
            live: live.clone(),
            cancel: cancel.clone(),
            timeout: std::time::Duration::from_secs(600),
            ops,
            session,
        };
        let request = asked("d", "run_command", "rm -rf");
        let asking = tokio::spawn(async move { asker.decide(&request).await });
        while !matches!(seen.recv().await.unwrap(), Live::Permission { .. }) {}
        cancel.cancel();
        assert_eq!(asking.await.unwrap(), Decision::Reject);
        assert!(live.waiting().is_empty());
    }
}
