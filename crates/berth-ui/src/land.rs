//! The land queue (tab 4): agents queued with `L` on the Runs tab, in the order they will
//! land; Enter (then y) lands them as `berth land RUN:N … --detach` does, in a supervisor
//! process of its own, so the dashboard never waits on a land and quitting it never stops one.
//! Below the queue, the land followed (the one started here, else the newest kept one): each
//! agent's state and its last step, read again on the dashboard's one-second clock while it
//! lands.
//!
//! Its part of the model, its keys and its drawing are here, beside each other; `model.rs`,
//! `keys.rs` and `draw.rs` call in.

use berth_run::{ItemState, LandRecord, LandState, RunId, RunRecord};
use ratatui::Frame;
use ratatui::crossterm::event::KeyCode;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Wrap};

use crate::draw::{Theme, block, outside, short_id, visible_rows};
use crate::model::{Action, Model, Overlay};

/// The keys of the Land tab, as its footer shows them.
pub const KEYS: &[(&str, &str)] = &[
    ("Enter", "land the queue"),
    ("x", "out of the queue"),
    ("K J", "move up, down"),
    ("o", "shell in its worktree"),
    ("R", "reload"),
];

/// One agent waiting in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub run: RunId,
    /// 0-based.
    pub agent: usize,
    pub label: String,
    pub task: String,
}

/// A land as last read, and whether a process drives it now.
pub type FollowedLand = berth_run::SeenLand;

/// The queue, its selection, and the land followed.
#[derive(Debug, Default)]
pub struct LandQueue {
    pub queued: Vec<Queued>,
    pub sel: usize,
    pub land: Option<FollowedLand>,
    /// A read of the land is under way: one at a time.
    pub reading: bool,
    /// The newest kept land was asked for, once, when the tab first opened.
    pub asked_newest: bool,
}

impl LandQueue {
    /// `L` on agent `agent` of `run`: queued, or taken out when it was; another agent of the
    /// same run queued is replaced by it, since a run's agents are alternatives. What the
    /// status line says, and whether it is a refusal.
    pub fn toggle(&mut self, run: &RunRecord, agent: usize) -> (String, bool) {
        let n = agent + 1;
        if let Some(at) = self
            .queued
            .iter()
            .position(|q| q.run == run.id && q.agent == agent)
        {
            self.queued.remove(at);
            self.sel = self.sel.min(self.queued.len().saturating_sub(1));
            return (
                format!(
                    "agent {n} of run {} is out of the land queue ({} in it)",
                    run.id,
                    self.queued.len()
                ),
                false,
            );
        }
        if !run.state.is_over() {
            return (
                format!(
                    "run {} is still running: queue an agent to land once it is over",
                    run.id
                ),
                true,
            );
        }
        let Some(a) = run.agents.get(agent) else {
            return (format!("run {} has no agent {n}", run.id), true);
        };
        if let Some(
            outcome @ (berth_run::AgentOutcome::Merged | berth_run::AgentOutcome::Discarded),
        ) = a.outcome
        {
            let why = match outcome {
                berth_run::AgentOutcome::Merged => "its work is merged already",
                _ => "its work was discarded (`berth run restore` brings it back)",
            };
            return (format!("agent {n} cannot be queued to land: {why}"), true);
        }
        let queued = Queued {
            run: run.id.clone(),
            agent,
            label: a.label.clone(),
            task: berth_ops::title_of(&run.request.task),
        };
        let said = match self.queued.iter().position(|q| q.run == run.id) {
            Some(at) => {
                let before = self.queued[at].agent + 1;
                self.queued[at] = queued;
                format!(
                    "agent {n} of run {} takes agent {before}'s place in the land queue: a run's agents are alternatives",
                    run.id
                )
            }
            None => {
                self.queued.push(queued);
                format!(
                    "agent {n} of run {} queued to land, number {}: 4 shows the queue",
                    run.id,
                    self.queued.len()
                )
            }
        };
        (said, false)
    }

    /// The queue as a land takes it: each run and agent, in order.
    pub fn targets(&self) -> Vec<(RunId, usize)> {
        self.queued
            .iter()
            .map(|q| (q.run.clone(), q.agent))
            .collect()
    }

    /// The followed land read again, while it is landing and no read is under way.
    pub fn wanted(&mut self) -> Option<Action> {
        let land = self.land.as_ref()?;
        if land.record.state != LandState::Landing || self.reading {
            return None;
        }
        self.reading = true;
        Some(Action::LoadLand(Some(land.record.id.clone())))
    }

    /// The newest kept land, when the tab opens first with nothing followed.
    pub fn newest_wanted(&mut self) -> Option<Action> {
        if self.land.is_some() || self.asked_newest || self.reading {
            return None;
        }
        self.asked_newest = true;
        self.reading = true;
        Some(Action::LoadLand(None))
    }

    /// A land read: followed, unless another one is followed now.
    pub fn take(&mut self, record: Option<LandRecord>, driven: bool) {
        self.reading = false;
        let Some(record) = record else {
            return;
        };
        if self.land.as_ref().is_none_or(|l| l.record.id == record.id) {
            self.land = Some(FollowedLand { record, driven });
        }
    }

    /// A land started here: followed, and the queue it took emptied.
    pub fn started(&mut self, record: LandRecord) {
        self.queued.clear();
        self.sel = 0;
        self.reading = false;
        self.land = Some(FollowedLand {
            record,
            driven: true,
        });
    }
}

/// A key on the Land tab.
pub fn key(model: &mut Model, code: KeyCode) -> Vec<Action> {
    let queue = &mut model.land;
    let len = queue.queued.len();
    if let Some(sel) = crate::keys::moved(queue.sel, len, code) {
        queue.sel = sel;
        return Vec::new();
    }
    match code {
        KeyCode::Char('x') | KeyCode::Delete | KeyCode::Backspace if len > 0 => {
            let out = queue.queued.remove(queue.sel);
            queue.sel = queue.sel.min(queue.queued.len().saturating_sub(1));
            model.status = Some((
                format!(
                    "agent {} of run {} is out of the land queue",
                    out.agent + 1,
                    out.run
                ),
                false,
            ));
        }
        KeyCode::Char('K') if queue.sel > 0 => {
            queue.queued.swap(queue.sel, queue.sel - 1);
            queue.sel -= 1;
        }
        KeyCode::Char('J') if queue.sel + 1 < len => {
            queue.queued.swap(queue.sel, queue.sel + 1);
            queue.sel += 1;
        }
        KeyCode::Enter if len == 0 => {
            model.status = Some((
                "the land queue is empty: L on an agent of the Runs tab queues it".to_owned(),
                true,
            ));
        }
        KeyCode::Enter => {
            let order: Vec<String> = queue
                .queued
                .iter()
                .enumerate()
                .map(|(k, q)| {
                    format!(
                        "{}. run {} agent {}",
                        k + 1,
                        short_id(q.run.as_str()),
                        q.agent + 1
                    )
                })
                .collect();
            model.overlay = Some(Overlay::Confirm {
                question: format!(
                    "Land these {len} agent(s) on their base, in this order? {}. Each is brought up to date with the base as it then stands and checked on that combined tree; the base moves only when the check passes, and a conflict or a failing check goes back to its agent (2 turns). It goes on in a process of its own.",
                    order.join(", ")
                ),
                action: Action::Land(queue.targets()),
            });
        }
        _ => {}
    }
    Vec::new()
}

/// The Land tab: the queue above, the land followed below.
pub fn draw(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let queue = &model.land;
    let wanted = queue.queued.len().max(1) as u16 + 3;
    let [top, bottom] = Layout::vertical([
        Constraint::Length(wanted.min(area.height / 2).max(4)),
        Constraint::Min(4),
    ])
    .areas(area);
    draw_queue(frame, top, model, theme);
    draw_land(frame, bottom, model, theme);
}

fn draw_queue(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let queue = &model.land;
    let title = format!(" Land queue ({}) · Enter lands it ", queue.queued.len());
    if queue.queued.is_empty() {
        let p = Paragraph::new("empty: L on an agent of the Runs tab queues it to land")
            .wrap(Wrap { trim: true })
            .block(block(title, true, theme));
        frame.render_widget(p, area);
        return;
    }
    let shown: Vec<usize> = (0..queue.queued.len()).collect();
    let height = area.height.saturating_sub(3) as usize;
    let rows = visible_rows(&shown, queue.sel, height, theme, |i| {
        let q = &queue.queued[i];
        Row::new(vec![
            Cell::new((i + 1).to_string()),
            Cell::new(short_id(q.run.as_str()).to_owned()),
            Cell::new(format!("{} {}", q.agent + 1, outside(&q.label))),
            Cell::new(outside(&q.task)),
        ])
    });
    let widths = [
        Constraint::Length(3),
        Constraint::Length(9),
        Constraint::Length(16),
        Constraint::Min(10),
    ];
    let header = Row::new(["#", "RUN", "AGENT", "TASK"]).style(theme.fg(Color::DarkGray));
    let table = Table::new(rows, widths)
        .header(header)
        .block(block(title, true, theme));
    frame.render_widget(table, area);
}

fn item_style(theme: &Theme, state: ItemState) -> Style {
    match state {
        ItemState::Landed | ItemState::Skipped => theme.fg(Color::Green),
        ItemState::Left => theme.fg(Color::Red),
        ItemState::Landing => theme.fg(Color::Yellow),
        ItemState::Waiting => theme.fg(Color::DarkGray),
    }
}

fn draw_land(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let Some(land) = &model.land.land else {
        let why = match model.land.reading {
            true => "reading the lands…",
            false => "no land yet: Enter on the queue starts one (or `berth land`)",
        };
        let p = Paragraph::new(why).wrap(Wrap { trim: true }).block(block(
            " Land ".to_owned(),
            false,
            theme,
        ));
        frame.render_widget(p, area);
        return;
    };
    let record = &land.record;
    let count = |f: fn(ItemState) -> bool| record.items.iter().filter(|i| f(i.state)).count();
    let to_go = match count(|s| matches!(s, ItemState::Waiting | ItemState::Landing)) {
        0 => String::new(),
        n => format!(", {n} to go"),
    };
    let title = format!(
        " Land {} · {} · {} landed, {} left{to_go} ",
        record.id,
        land.state(),
        count(ItemState::is_done),
        count(|s| s == ItemState::Left),
    );
    let [list, note] = Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(area);
    let rows: Vec<Row> = record
        .items
        .iter()
        .enumerate()
        .map(|(k, item)| {
            let agent = item.agent.map_or(String::new(), |a| {
                let label = model
                    .runs
                    .iter()
                    .find(|r| r.id == item.run)
                    .and_then(|r| r.agents.get(a))
                    .map_or(String::new(), |a| format!(" {}", outside(&a.label)));
                format!("{}{label}", a + 1)
            });
            // Why it was left, else what was done with it last.
            let last = match (item.state, &item.reason) {
                (ItemState::Left, Some(why)) => why.clone(),
                _ => last_step(record, k).unwrap_or_default(),
            };
            Row::new(vec![
                Cell::new((k + 1).to_string()),
                Cell::new(short_id(item.run.as_str()).to_owned()),
                Cell::new(agent),
                Cell::new(item.state.as_str()).style(item_style(theme, item.state)),
                Cell::new(outside(&last)),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(3),
        Constraint::Length(9),
        Constraint::Length(16),
        Constraint::Length(8),
        Constraint::Min(10),
    ];
    let header =
        Row::new(["#", "RUN", "AGENT", "STATE", "LAST STEP"]).style(theme.fg(Color::DarkGray));
    let table = Table::new(rows, widths)
        .header(header)
        .block(block(title, false, theme));
    frame.render_widget(table, list);
    let said = match (land.state(), &record.message) {
        ("cut off", _) => format!(
            "nobody drives it now: `berth land --resume {}` goes on",
            record.id
        ),
        ("stopped", Some(why)) => format!(
            "{}; `berth land --resume {}` goes on",
            outside(why),
            record.id
        ),
        (_, _) => record
            .steps
            .last()
            .map(|s| outside(&s.text))
            .unwrap_or_default(),
    };
    frame.render_widget(Paragraph::new(said).style(theme.fg(Color::DarkGray)), note);
}

/// The text of the last step of item `k`.
fn last_step(record: &LandRecord, k: usize) -> Option<String> {
    record
        .steps
        .iter()
        .rev()
        .find(|s| s.item == Some(k))
        .map(|s| s.text.clone())
}
