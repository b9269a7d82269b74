//! The dashboard's one in-memory picture: the runs, the followed run's transcripts, a diff,
//! the workspaces and the sessions, and what is open on top (a question, a confirmation, an
//! input line). The feed changes it by [`Update`]s, one at a time; keys change it through
//! `keys.rs`; `draw.rs` only reads it. Nothing here does I/O, so every tab can be drawn and
//! every key tried against a model built in a test.

use std::collections::{BTreeMap, BTreeSet};

use berth_ops::{SessionView, WorkspaceView, WorktreeDiff, WorktreeStatus};
use berth_run::{RunEvent, RunId, RunRecord};
use chrono::{DateTime, Utc};

use crate::lines::{self, Lines};

/// The three tabs, in the order of their keys (1, 2, 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Runs,
    Workspaces,
    Sessions,
}

impl Tab {
    pub const ALL: [Tab; 3] = [Tab::Runs, Tab::Workspaces, Tab::Sessions];

    pub fn title(self) -> &'static str {
        match self {
            Tab::Runs => "Runs",
            Tab::Workspaces => "Workspaces",
            Tab::Sessions => "Sessions",
        }
    }
}

/// Where the keys go on the Runs tab: the list of runs, the selected run's agents, or the
/// selected agent's transcript or diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Runs,
    Agents,
    Detail,
}

/// What the detail pane shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    Transcript,
    Diff,
}

/// Something that changed, from the feed or from an action's end.
#[derive(Debug)]
pub enum Update {
    /// The first page of runs, newest first, and the cursor of the next.
    Runs {
        runs: Vec<RunRecord>,
        next: Option<String>,
    },
    /// A further page, asked for by moving past the last run.
    MoreRuns {
        runs: Vec<RunRecord>,
        next: Option<String>,
    },
    /// Events of the followed run; `from_start` when they are all of them.
    Events {
        run: RunId,
        events: Vec<RunEvent>,
        from_start: bool,
    },
    /// The diff of an agent's workspace, or why there is none.
    Diff {
        run: RunId,
        agent: usize,
        diff: Result<WorktreeDiff, String>,
    },
    Workspaces(Vec<WorkspaceView>),
    WorkspaceStatus {
        id: String,
        status: Option<WorktreeStatus>,
    },
    Sessions(Vec<SessionView>),
    SessionTranscript {
        id: String,
        messages: Result<Vec<berth_ops::Message>, String>,
    },
    /// An action ended: what it did, for the status line.
    Done(String),
    /// Something failed: why, for the status line.
    Failed(String),
}

/// What the model asks the app to do: load something, or act through berth-run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Follow this run's events (and no other's).
    Follow(Option<RunId>),
    MoreRuns(String),
    LoadDiff {
        run: RunId,
        agent: usize,
        workspace: String,
    },
    LoadWorkspaces,
    LoadWorkspaceStatus(String),
    LoadSessions,
    LoadSessionTranscript(String),
    Pick {
        run: RunId,
        agent: usize,
    },
    Discard {
        run: RunId,
        agent: Option<usize>,
    },
    Stop {
        run: RunId,
        agent: Option<usize>,
    },
    Resume(RunId),
    Tell {
        run: RunId,
        agent: usize,
        text: String,
    },
    Answer {
        run: RunId,
        agent: usize,
        question: String,
        answer: berth_run::Answer,
    },
    Start(NewRun),
    Quit,
}

/// The new-run form's fields, as typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewRun {
    pub task: String,
    /// A number of agents, or agent specs separated by commas (`berth,codex`).
    pub agents: String,
    pub check: String,
    /// Tools the agents may use without asking (comma-separated), or `all`.
    pub allow: String,
}

/// What is open on top of the tabs; keys go to it first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    Help,
    /// y does `action`, n or Esc does not.
    Confirm {
        question: String,
        action: Action,
    },
    /// A line typed: for what.
    Input {
        purpose: Input,
        text: String,
    },
    /// The new-run form; `field` is the one typed into.
    NewRun {
        form: NewRun,
        field: usize,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Filter,
    Tell { run: RunId, agent: usize },
}

/// A question an agent waits on, as the dialog shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub run: RunId,
    pub agent: usize,
    pub label: String,
    pub task: String,
    pub waiting: berth_run::Waiting,
}

/// The followed run's agents' transcripts, folded from its events.
#[derive(Debug, Default)]
pub struct Followed {
    pub run: Option<RunId>,
    pub agents: BTreeMap<usize, Lines>,
}

/// A scrolled text: how many lines back from the end it shows (0 follows the end).
#[derive(Debug, Default, Clone, Copy)]
pub struct Scroll {
    pub back: usize,
}

/// Everything the dashboard shows.
pub struct Model {
    pub tab: Tab,
    pub pane: Pane,
    pub detail: Detail,
    pub now: DateTime<Utc>,
    /// Colours, unless `NO_COLOR` says not to.
    pub color: bool,
    /// Where the runs are kept, for the header.
    pub place: String,
    /// Whether the runs are a pool's, run on several machines: the list names each one's node.
    pub pooled: bool,

    pub runs: Vec<RunRecord>,
    pub runs_next: Option<String>,
    /// Whether pages past the first were loaded.
    pub more_loaded: bool,
    /// Whether the first page came in: until then the list is being read, not empty.
    pub runs_loaded: bool,
    pub run_sel: usize,
    pub agent_sel: usize,
    pub followed: Followed,
    pub transcript_scroll: Scroll,
    /// The diff shown, of which run's agent.
    pub diff: Option<(RunId, usize, Result<Lines, String>)>,
    pub diff_scroll: Scroll,

    pub workspaces: Vec<WorkspaceView>,
    pub workspaces_loaded: bool,
    pub ws_sel: usize,
    pub ws_status: BTreeMap<String, Option<WorktreeStatus>>,

    pub sessions: Vec<SessionView>,
    pub sessions_loaded: bool,
    pub ses_sel: usize,
    /// The session whose transcript is open.
    pub session_open: Option<(String, Result<Lines, String>)>,
    pub session_scroll: Scroll,

    /// What each tab's list is filtered by (`/`).
    pub filters: BTreeMap<&'static str, String>,
    pub overlay: Option<Overlay>,
    /// Questions put aside with Esc: not asked again until another comes.
    pub put_aside: BTreeSet<String>,
    /// The last action's outcome, and whether it failed.
    pub status: Option<(String, bool)>,
    pub quit: bool,
}

impl Model {
    pub fn new(place: impl Into<String>, color: bool) -> Model {
        Model {
            tab: Tab::Runs,
            pane: Pane::Runs,
            detail: Detail::Transcript,
            now: Utc::now(),
            color,
            place: place.into(),
            pooled: false,
            runs: Vec::new(),
            runs_next: None,
            more_loaded: false,
            runs_loaded: false,
            run_sel: 0,
            agent_sel: 0,
            followed: Followed::default(),
            transcript_scroll: Scroll::default(),
            diff: None,
            diff_scroll: Scroll::default(),
            workspaces: Vec::new(),
            workspaces_loaded: false,
            ws_sel: 0,
            ws_status: BTreeMap::new(),
            sessions: Vec::new(),
            sessions_loaded: false,
            ses_sel: 0,
            session_open: None,
            session_scroll: Scroll::default(),
            filters: BTreeMap::new(),
            overlay: None,
            put_aside: BTreeSet::new(),
            status: None,
            quit: false,
        }
    }

    /// Takes in one update; what the app should do next (follow another run, load a diff).
    pub fn apply(&mut self, update: Update) -> Vec<Action> {
        match update {
            Update::Runs { runs, next } => {
                self.runs_loaded = true;
                let selected = self.selected_run().map(|r| r.id.clone());
                match self.more_loaded {
                    // Pages loaded further down stay below the fresh first one.
                    true => {
                        let oldest = runs.last().map(|r| r.created_at);
                        let below: Vec<RunRecord> = self
                            .runs
                            .drain(..)
                            .filter(|r| oldest.is_some_and(|o| r.created_at < o))
                            .filter(|r| !runs.iter().any(|n| n.id == r.id))
                            .collect();
                        self.runs = runs;
                        self.runs.extend(below);
                    }
                    false => {
                        self.runs = runs;
                        self.runs_next = next;
                    }
                }
                self.reselect_run(selected)
            }
            Update::MoreRuns { runs, next } => {
                for r in runs {
                    if !self.runs.iter().any(|have| have.id == r.id) {
                        self.runs.push(r);
                    }
                }
                self.runs_next = next;
                self.more_loaded = true;
                Vec::new()
            }
            Update::Events {
                run,
                events,
                from_start,
            } => {
                if self.followed.run.as_ref() != Some(&run) {
                    return Vec::new();
                }
                if from_start {
                    self.followed.agents.clear();
                }
                for event in &events {
                    if let Some(i) = event.agent() {
                        lines::take_event(self.followed.agents.entry(i).or_default(), event);
                    }
                }
                Vec::new()
            }
            Update::Diff { run, agent, diff } => {
                self.diff = Some((run, agent, diff.map(|d| lines::of_diff(&d))));
                self.diff_scroll = Scroll::default();
                Vec::new()
            }
            Update::Workspaces(list) => {
                self.workspaces = list;
                self.workspaces_loaded = true;
                self.ws_sel = self.ws_sel.min(self.workspaces.len().saturating_sub(1));
                self.workspace_status_wanted()
            }
            Update::WorkspaceStatus { id, status } => {
                self.ws_status.insert(id, status);
                Vec::new()
            }
            Update::Sessions(list) => {
                self.sessions = list;
                self.sessions_loaded = true;
                self.ses_sel = self.ses_sel.min(self.sessions.len().saturating_sub(1));
                Vec::new()
            }
            Update::SessionTranscript { id, messages } => {
                self.session_open = Some((id, messages.map(|m| lines::of_messages(&m))));
                self.session_scroll = Scroll::default();
                Vec::new()
            }
            Update::Done(message) => {
                self.status = Some((message, false));
                Vec::new()
            }
            Update::Failed(message) => {
                self.status = Some((message, true));
                Vec::new()
            }
        }
    }

    /// The selection kept on the same run when the list changes under it.
    fn reselect_run(&mut self, selected: Option<RunId>) -> Vec<Action> {
        let shown = self.shown_runs();
        if let Some(id) = selected
            && let Some(at) = shown.iter().position(|&i| self.runs[i].id == id)
        {
            self.run_sel = at;
        }
        self.run_sel = self.run_sel.min(shown.len().saturating_sub(1));
        self.follow_selected()
    }

    /// Follows the selected run, when it is not followed already.
    pub fn follow_selected(&mut self) -> Vec<Action> {
        let id = self.selected_run().map(|r| r.id.clone());
        if self.followed.run == id {
            return Vec::new();
        }
        self.followed = Followed {
            run: id.clone(),
            agents: BTreeMap::new(),
        };
        self.transcript_scroll = Scroll::default();
        self.diff = None;
        let agents = self.selected_run().map_or(0, |r| r.agents.len());
        self.agent_sel = self.agent_sel.min(agents.saturating_sub(1));
        vec![Action::Follow(id)]
    }

    /// The indexes into `runs` of those the filter lets through.
    pub fn shown_runs(&self) -> Vec<usize> {
        let filter = self.filter(Tab::Runs);
        self.runs
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                filter
                    .is_none_or(|f| matches(f, &[r.id.as_str(), &r.request.task, r.state.as_str()]))
            })
            .map(|(i, _)| i)
            .collect()
    }

    pub fn shown_workspaces(&self) -> Vec<usize> {
        let filter = self.filter(Tab::Workspaces);
        self.workspaces
            .iter()
            .enumerate()
            .filter(|(_, w)| {
                filter.is_none_or(|f| {
                    let branch = w.git.as_ref().map_or("", |g| g.branch.as_str());
                    matches(
                        f,
                        &[
                            w.id.as_str(),
                            w.name.as_deref().unwrap_or(""),
                            branch,
                            &w.description,
                        ],
                    )
                })
            })
            .map(|(i, _)| i)
            .collect()
    }

    pub fn shown_sessions(&self) -> Vec<usize> {
        let filter = self.filter(Tab::Sessions);
        self.sessions
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                filter.is_none_or(|f| {
                    matches(
                        f,
                        &[
                            s.id.as_str(),
                            &s.title,
                            &s.model,
                            s.agent.as_deref().unwrap_or_default(),
                            s.workspace_name
                                .as_deref()
                                .unwrap_or(s.workspace_id.as_str()),
                        ],
                    )
                })
            })
            .map(|(i, _)| i)
            .collect()
    }

    pub fn filter(&self, tab: Tab) -> Option<&str> {
        self.filters
            .get(tab.title())
            .map(String::as_str)
            .filter(|f| !f.is_empty())
    }

    pub fn selected_run(&self) -> Option<&RunRecord> {
        let shown = self.shown_runs();
        shown.get(self.run_sel).map(|&i| &self.runs[i])
    }

    pub fn selected_workspace(&self) -> Option<&WorkspaceView> {
        let shown = self.shown_workspaces();
        shown.get(self.ws_sel).map(|&i| &self.workspaces[i])
    }

    pub fn selected_session(&self) -> Option<&SessionView> {
        let shown = self.shown_sessions();
        shown.get(self.ses_sel).map(|&i| &self.sessions[i])
    }

    /// The selected workspace's worktree state, when not known yet.
    pub fn workspace_status_wanted(&self) -> Vec<Action> {
        match self.selected_workspace() {
            Some(w) if w.git.is_some() && !self.ws_status.contains_key(w.id.as_str()) => {
                vec![Action::LoadWorkspaceStatus(w.id.to_string())]
            }
            _ => Vec::new(),
        }
    }

    /// The first question an agent of a listed run waits on that was not put aside: the
    /// dialog on top of everything.
    pub fn question(&self) -> Option<Question> {
        self.runs
            .iter()
            .filter(|r| !r.state.is_over())
            .flat_map(|r| {
                r.agents.iter().enumerate().filter_map(move |(i, a)| {
                    let waiting = a.status.waiting.clone()?;
                    Some(Question {
                        run: r.id.clone(),
                        agent: i,
                        label: a.label.clone(),
                        task: berth_ops::title_of(&r.request.task),
                        waiting,
                    })
                })
            })
            .find(|q| !self.put_aside.contains(&q.waiting.question))
    }
}

/// Whether every word of `filter` is in one of `fields`, ignoring case.
fn matches(filter: &str, fields: &[&str]) -> bool {
    let fields: Vec<String> = fields.iter().map(|f| f.to_lowercase()).collect();
    filter
        .to_lowercase()
        .split_whitespace()
        .all(|word| fields.iter().any(|f| f.contains(word)))
}
