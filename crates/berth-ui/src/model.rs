//! The dashboard's one in-memory picture: the runs, the followed run's transcripts, a diff,
//! the workspaces and the sessions, and what is open on top (a question, a confirmation, an
//! input line). The feed changes it by [`Update`]s, one at a time; keys change it through
//! `keys.rs`; `draw.rs` only reads it. Nothing here does I/O, so every tab can be drawn and
//! every key tried against a model built in a test.

use std::collections::{BTreeMap, BTreeSet};

use berth_ops::{SessionView, WorkspaceView, WorktreeDiff, WorktreeStatus};
use berth_run::{AgentForesight, LandId, LandRecord, RunEvent, RunId, RunRecord};
use chrono::{DateTime, Utc};

use crate::land::LandQueue;
use crate::lines::{self, Lines};
use crate::step_in::{Attach, DiffFiles, EditChoice, StepIn};

/// The four tabs, in the order of their keys (1, 2, 3, 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Runs,
    Workspaces,
    Sessions,
    /// The land queue, and the land followed (`land.rs`).
    Land,
}

impl Tab {
    pub const ALL: [Tab; 4] = [Tab::Runs, Tab::Workspaces, Tab::Sessions, Tab::Land];

    pub fn title(self) -> &'static str {
        match self {
            Tab::Runs => "Runs",
            Tab::Workspaces => "Workspaces",
            Tab::Sessions => "Sessions",
            Tab::Land => "Land",
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
    /// The agent's check: its output when it ran, why not when it did not.
    Check,
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
    /// What an agent's work conflicts with, by a trial merge (`berth_run::Foresight`).
    Conflicts {
        run: RunId,
        agent: usize,
        seen: AgentForesight,
    },
    /// A check's whole output as kept beside the run (`None`: not kept on this machine).
    Check {
        run: RunId,
        agent: usize,
        kept: Result<Option<String>, String>,
    },
    /// What an agent said in the turn before it asked `question`.
    Said {
        run: RunId,
        agent: usize,
        question: String,
        text: String,
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
    /// A land read (`None`: there is none yet), and whether a process drives it now.
    Land {
        record: Option<LandRecord>,
        driven: bool,
    },
    /// A land of the queue was started, in supervisor process `pid`.
    LandStarted {
        record: LandRecord,
        pid: u32,
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
    LoadCheck {
        run: RunId,
        agent: usize,
    },
    /// What the agent's work conflicts with: its base as it stands, other runs' agents.
    LoadConflicts {
        run: RunId,
        agent: usize,
    },
    /// What the agent said before it asked `question`, for the question's dialog.
    LoadSaid {
        run: RunId,
        agent: usize,
        question: String,
    },
    LoadWorkspaces,
    LoadWorkspaceStatus(String),
    LoadSessions,
    LoadSessionTranscript(String),
    Pick {
        run: RunId,
        agent: usize,
        /// Merged though the evidence is against it (`berth_run::pick_refusal`).
        force: bool,
        /// Merged though another agent of the run was merged already.
        also: bool,
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
    /// Read the land (`None`: the newest kept one).
    LoadLand(Option<LandId>),
    /// Land these agents (0-based), in this order, in a supervisor process of its own.
    Land(Vec<(RunId, usize)>),
    /// The dashboard steps aside for the person's shell or editor (`step_in.rs`): only ever
    /// asked for by a key, so the key thread is not reading while it runs.
    StepIn(StepIn),
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
    /// A pick asked about: the evidence against it and a winner already are said, and each
    /// needs its own key (F, A) before y picks.
    Pick(PickAsked),
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
    /// `e`'s chooser: a file of the agent's diff to open in the person's editor.
    Edit(EditChoice),
}

/// What the pick dialog says, and which of its keys were given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickAsked {
    pub run: RunId,
    pub agent: usize,
    pub label: String,
    /// Why it is not picked without being forced (`berth_run::pick_refusal`).
    pub refusal: Option<String>,
    /// The agent merged already (0-based), when the run has its winner.
    pub winner: Option<usize>,
    pub force: bool,
    pub also: bool,
}

impl PickAsked {
    /// Whether every key its reasons need was given.
    pub fn ready(&self) -> bool {
        (self.refusal.is_none() || self.force) && (self.winner.is_none() || self.also)
    }

    pub fn action(&self) -> Action {
        Action::Pick {
            run: self.run.clone(),
            agent: self.agent,
            force: self.force,
            also: self.also,
        }
    }
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
    /// What the agent said in its turn before asking, once read.
    pub said: Option<String>,
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
    /// The shown diff's files, for `e` to choose from.
    pub diff_files: Option<DiffFiles>,
    /// The agent whose diff `e` waits on, to open its chooser when it comes.
    pub edit_pending: Option<(RunId, usize)>,
    /// The agent `berth run attach` opens on, until its run is read; and the page of runs
    /// asked for while looking for it.
    pub attach: Option<Attach>,
    pub attach_asked: Option<String>,
    /// The diff being read (of which run's agent), and when it was asked for: one read at a
    /// time, and a working agent's read again at most once a second.
    pub diff_reading: Option<(RunId, usize)>,
    pub diff_asked: DateTime<Utc>,
    /// What the diff's agent's work conflicts with, once read (again each time its diff is).
    pub conflicts: Option<(RunId, usize, AgentForesight)>,
    /// The check shown.
    pub check: Option<CheckShown>,
    pub check_scroll: Scroll,
    /// What each asking agent said before its question, by the question's id; and the
    /// questions whose words were asked for.
    pub said: BTreeMap<String, String>,
    pub said_asked: BTreeSet<String>,

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

    /// The land queue and the land followed.
    pub land: LandQueue,

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
            diff_files: None,
            edit_pending: None,
            attach: None,
            attach_asked: None,
            diff_reading: None,
            diff_asked: DateTime::<Utc>::MIN_UTC,
            conflicts: None,
            check: None,
            check_scroll: Scroll::default(),
            said: BTreeMap::new(),
            said_asked: BTreeSet::new(),
            workspaces: Vec::new(),
            workspaces_loaded: false,
            ws_sel: 0,
            ws_status: BTreeMap::new(),
            sessions: Vec::new(),
            sessions_loaded: false,
            ses_sel: 0,
            session_open: None,
            session_scroll: Scroll::default(),
            land: LandQueue::default(),
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
            Update::Runs { runs, next } => self.take_runs(runs, next),
            Update::MoreRuns { runs, next } => {
                for r in runs {
                    if !self.runs.iter().any(|have| have.id == r.id) {
                        self.runs.push(r);
                    }
                }
                self.runs_next = next;
                self.more_loaded = true;
                self.attached()
            }
            Update::Events {
                run,
                events,
                from_start,
            } => self.take_events(run, events, from_start),
            Update::Diff { run, agent, diff } => self.take_diff(run, agent, diff),
            Update::Conflicts { run, agent, seen } => {
                self.conflicts = Some((run, agent, seen));
                Vec::new()
            }
            Update::Check { run, agent, kept } => {
                self.take_check(run, agent, kept);
                Vec::new()
            }
            Update::Said {
                run,
                agent,
                question,
                text,
            } => {
                self.said.insert(said_key(&run, agent, &question), text);
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
            Update::Land { record, driven } => {
                self.land.take(record, driven);
                Vec::new()
            }
            Update::LandStarted { record, pid } => {
                self.status = Some((
                    format!(
                        "land {} started in process {pid}: the Land tab (4) follows it",
                        record.id
                    ),
                    false,
                ));
                self.land.started(record);
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

    /// A fresh first page of runs, keeping the selection and what it wants loaded.
    fn take_runs(&mut self, runs: Vec<RunRecord>, next: Option<String>) -> Vec<Action> {
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
        let mut actions = self.reselect_run(selected);
        actions.extend(self.attached());
        actions.extend(self.detail_wanted());
        actions.extend(self.said_wanted());
        actions
    }

    /// Events of the followed run, taken into its agents' lines.
    fn take_events(&mut self, run: RunId, events: Vec<RunEvent>, from_start: bool) -> Vec<Action> {
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

    /// An agent's diff, shown if that agent is still the selected one.
    fn take_diff(
        &mut self,
        run: RunId,
        agent: usize,
        diff: Result<WorktreeDiff, String>,
    ) -> Vec<Action> {
        let read = (run, agent);
        if self.diff_reading.as_ref() == Some(&read) {
            self.diff_reading = None;
        }
        // An answer for an agent no longer selected is dropped: the pane shows the
        // selected agent's diff, read now if it is not being read.
        if self.selected_agent().as_ref() != Some(&read) {
            return self.diff_wanted();
        }
        let (run, agent) = read;
        let again = matches!(&self.diff, Some((r, i, _)) if *r == run && *i == agent);
        // Work that is finished is tried against what it would land beside, each time
        // its diff is read (a working agent's is not: it is still changing).
        let done = self
            .selected_run()
            .and_then(|r| r.agents.get(agent))
            .is_some_and(|a| a.status.state == berth_run::AgentState::Done);
        let actions = match (done, &diff) {
            (true, Ok(_)) => vec![Action::LoadConflicts {
                run: run.clone(),
                agent,
            }],
            _ => Vec::new(),
        };
        self.diff_files = diff
            .as_ref()
            .ok()
            .map(|d| (run.clone(), agent, d.files.clone()));
        self.diff = Some((run, agent, diff.map(|d| lines::of_diff(&d))));
        // Read again while the agent works: where the person scrolled to stays.
        if !again {
            self.diff_scroll = Scroll::default();
        }
        crate::step_in::diff_came(self);
        actions
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

    /// A check's kept output read: the check pane shows it, when its agent is still the
    /// selected one; the record's last lines, saying so, when it is not kept here.
    fn take_check(&mut self, run: RunId, agent: usize, kept: Result<Option<String>, String>) {
        let Some(record) = self.selected_run() else {
            return;
        };
        let Some(check) = record.agents.get(agent).and_then(|a| a.check()) else {
            return;
        };
        if record.id != run || agent != self.agent_sel {
            return;
        }
        let lines = match &kept {
            Ok(Some(whole)) => lines::of_check(check, Some(whole), None),
            Ok(None) => lines::of_check(
                check,
                check.output.as_deref(),
                check.output.as_ref().map(|_| {
                    "the last lines the record quotes (the whole output is kept where the check ran)"
                }),
            ),
            Err(e) => lines::of_check(
                check,
                check.output.as_deref(),
                Some(&format!(
                    "cannot read the kept output ({e}): its last lines, as the record quotes them"
                )),
            ),
        };
        self.check = Some(CheckShown {
            run,
            agent,
            ran: true,
            lines,
        });
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
        self.check = None;
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
                        said: self
                            .said
                            .get(&said_key(&r.id, i, &waiting.question))
                            .cloned(),
                        waiting,
                    })
                })
            })
            .find(|q| !self.put_aside.contains(&q.waiting.question))
    }

    /// The words of the question on top, when not asked for yet.
    pub fn said_wanted(&mut self) -> Vec<Action> {
        let Some(q) = self.question() else {
            return Vec::new();
        };
        match self
            .said_asked
            .insert(said_key(&q.run, q.agent, &q.waiting.question))
        {
            true => vec![Action::LoadSaid {
                run: q.run,
                agent: q.agent,
                question: q.waiting.question,
            }],
            false => Vec::new(),
        }
    }

    /// The selected run's id and the selected agent, when there is one.
    pub fn selected_agent(&self) -> Option<(RunId, usize)> {
        let run = self.selected_run()?;
        (self.agent_sel < run.agents.len()).then(|| (run.id.clone(), self.agent_sel))
    }

    /// Time passed: what it asks for (a working agent's diff read again, a land under way
    /// read again).
    pub fn tick(&mut self, now: DateTime<Utc>) -> Vec<Action> {
        self.now = now;
        let mut actions = self.diff_wanted();
        actions.extend(self.land.wanted());
        actions
    }

    /// What the detail pane needs read: the selected agent's diff or check.
    pub fn detail_wanted(&mut self) -> Vec<Action> {
        let mut actions = self.diff_wanted();
        actions.extend(self.check_wanted());
        actions
    }

    /// The selected agent's diff, when the diff pane shows and it is not the one shown or
    /// being read; again once a second while the agent works.
    pub fn diff_wanted(&mut self) -> Vec<Action> {
        if self.tab != Tab::Runs || self.detail != Detail::Diff {
            return Vec::new();
        }
        let Some(run) = self.selected_run() else {
            return Vec::new();
        };
        let agent = self.agent_sel;
        let Some(a) = run.agents.get(agent) else {
            return Vec::new();
        };
        let id = run.id.clone();
        let read = (id.clone(), agent);
        if self.diff_reading.as_ref() == Some(&read) {
            return Vec::new();
        }
        let shown = matches!(&self.diff, Some((r, i, _)) if *r == id && *i == agent);
        let stale = !a.status.state.is_final()
            && self.now - self.diff_asked >= chrono::Duration::seconds(1);
        if shown && !stale {
            return Vec::new();
        }
        match a.workspace.clone() {
            Some(workspace) => {
                self.diff_reading = Some(read);
                self.diff_asked = self.now;
                vec![Action::LoadDiff {
                    run: id,
                    agent,
                    workspace,
                }]
            }
            None => {
                let why = format!("agent {} has no workspace yet", agent + 1);
                self.diff = Some((id, agent, Err(why)));
                Vec::new()
            }
        }
    }

    /// The selected agent's check, when the check pane shows: what the record says at once,
    /// and its whole kept output asked for when it ran.
    pub fn check_wanted(&mut self) -> Vec<Action> {
        if self.tab != Tab::Runs || self.detail != Detail::Check {
            return Vec::new();
        }
        let Some(run) = self.selected_run() else {
            return Vec::new();
        };
        let agent = self.agent_sel;
        let Some(a) = run.agents.get(agent) else {
            return Vec::new();
        };
        let id = run.id.clone();
        let check = a.check().cloned();
        if self
            .check
            .as_ref()
            .is_some_and(|c| c.run == id && c.agent == agent && c.ran == check.is_some())
        {
            return Vec::new();
        }
        let n = agent + 1;
        let (lines, actions) = match &check {
            None => {
                let why = match (&run.request.check, a.status.state.is_final()) {
                    (None, _) => format!("run {id} has no check (`berth run --check CMD`)"),
                    (Some(_), false) => format!("agent {n}'s check runs once it ends"),
                    (Some(_), true) => format!("agent {n}'s check has not told its result yet"),
                };
                let mut lines = Lines::default();
                lines.push(lines::Kind::Quiet, why);
                (lines, Vec::new())
            }
            Some(c) if c.not_run => (lines::of_check(c, None, None), Vec::new()),
            Some(c) => (
                lines::of_check(c, c.output.as_deref(), None),
                vec![Action::LoadCheck {
                    run: id.clone(),
                    agent,
                }],
            ),
        };
        self.check = Some(CheckShown {
            run: id,
            agent,
            ran: check.is_some(),
            lines,
        });
        self.check_scroll = Scroll::default();
        actions
    }
}

/// The check the check pane shows, of which run's agent; `ran` when the record had its
/// result (a check that had not run is looked at again once it has).
#[derive(Debug)]
pub struct CheckShown {
    pub run: RunId,
    pub agent: usize,
    pub ran: bool,
    pub lines: Lines,
}

/// A question's key: its run, its agent, and its id.
fn said_key(run: &RunId, agent: usize, question: &str) -> String {
    format!("{run}/{agent}/{question}")
}

/// Whether every word of `filter` is in one of `fields`, ignoring case.
fn matches(filter: &str, fields: &[&str]) -> bool {
    let fields: Vec<String> = fields.iter().map(|f| f.to_lowercase()).collect();
    filter
        .to_lowercase()
        .split_whitespace()
        .all(|word| fields.iter().any(|f| f.contains(word)))
}
