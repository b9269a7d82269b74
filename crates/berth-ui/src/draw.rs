//! Draws the model: a header with the tabs, the tab's panes, a status line, the keys, and
//! whatever is open on top. Only the rows that show are built: a list of 10,000 workspaces
//! or a transcript of 50,000 lines costs a frame what a screenful does. Without colour
//! (`NO_COLOR`), selection and emphasis are reverse video and bold.

use berth_run::{AgentRecord, AgentState, RunRecord};
use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table, Wrap};

use crate::keys::{FORM_FIELDS, KEYS};
use crate::lines::{self, Kind, Lines};
use crate::model::{Detail, Input, Model, Overlay, Pane, PickAsked, Question, Tab};

/// Wide enough for the runs beside their agents.
const WIDE: u16 = 120;

/// Styles, in colour or not.
pub(crate) struct Theme {
    color: bool,
}

impl Theme {
    pub(crate) fn fg(&self, color: Color) -> Style {
        match self.color {
            true => Style::new().fg(color),
            false => Style::new(),
        }
    }

    pub(crate) fn selected(&self) -> Style {
        match self.color {
            true => Style::new().bg(Color::Blue).fg(Color::White),
            false => Style::new().add_modifier(Modifier::REVERSED),
        }
    }

    fn focus(&self, focused: bool) -> Style {
        match (focused, self.color) {
            (true, true) => Style::new().fg(Color::Cyan),
            (true, false) => Style::new().add_modifier(Modifier::BOLD),
            (false, _) => Style::new(),
        }
    }

    fn line(&self, kind: Kind) -> Style {
        match kind {
            Kind::Text => Style::new(),
            Kind::Heading => self.fg(Color::Cyan).add_modifier(Modifier::BOLD),
            Kind::Tool => self.fg(Color::Yellow),
            Kind::Bad | Kind::Removed => self.fg(Color::Red),
            Kind::Good => self.fg(Color::Green),
            Kind::Asked => self.fg(Color::Magenta),
            Kind::Quiet => self.fg(Color::DarkGray),
        }
    }

    fn state(&self, state: &str) -> Style {
        match state {
            "done" | "ended" | "merged" | "picked" => self.fg(Color::Green),
            "failed" | "budget" => self.fg(Color::Red),
            "working" | "running" | "starting" => self.fg(Color::Yellow),
            // A person's turn: an answer, or a review.
            "waiting" | "review" => self.fg(Color::Magenta),
            _ => self.fg(Color::DarkGray),
        }
    }
}

/// Most rows a failure's message takes, so that git's own words after its command show.
const FAILURE_ROWS: usize = 5;

/// One row for the status line, or as many as a failure's message needs, up to
/// [`FAILURE_ROWS`]: the reason of a failure is what a person needs to act on.
fn status_rows(model: &Model, width: u16) -> u16 {
    let Some((message, true)) = &model.status else {
        return 1;
    };
    let width = usize::from(width.max(1));
    let rows: usize = status_lines(message)
        .map(|l| l.width().div_ceil(width).max(1))
        .sum();
    rows.clamp(1, FAILURE_ROWS) as u16
}

/// A status message's lines, without the blank ones (git's messages have many) that would
/// take rows from its words.
fn status_lines(message: &str) -> impl Iterator<Item = Line<'static>> {
    message
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .map(|l| Line::from(outside(l)))
}

/// Text from outside (an agent's words, a task, a title, a failure quoting git) as a cell
/// or a line shows it: every control character and bidi control as its escape (berth-core's
/// `shown`), so none drives the terminal or reorders what it shows.
pub(crate) fn outside(text: &str) -> String {
    berth_ops::shown::visible(text, berth_ops::shown::Form::Line).into_owned()
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, model: &Model) {
    let theme = Theme { color: model.color };
    let [header, body, status, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(status_rows(model, frame.area().width)),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    draw_header(frame, header, model, &theme);
    match model.tab {
        Tab::Runs => draw_runs_tab(frame, body, model, &theme),
        Tab::Workspaces => draw_workspaces(frame, body, model, &theme),
        Tab::Sessions => draw_sessions(frame, body, model, &theme),
        Tab::Land => crate::land::draw(frame, body, model, &theme),
    }
    if let Some((message, failed)) = &model.status {
        let style = match failed {
            true => theme.fg(Color::Red).add_modifier(Modifier::BOLD),
            false => theme.fg(Color::Green),
        };
        frame.render_widget(
            Paragraph::new(Text::from_iter(status_lines(message)).style(style))
                .wrap(Wrap { trim: false }),
            status,
        );
    }
    draw_footer(frame, footer, model, &theme);
    if let Some(q) = model.question() {
        draw_question(frame, &q, &theme);
    } else {
        match &model.overlay {
            Some(Overlay::Help) => draw_help(frame, &theme),
            Some(Overlay::Pick(asked)) => draw_pick(frame, asked, &theme),
            Some(Overlay::Edit(choice)) => crate::step_in::draw_choice(frame, choice, &theme),
            Some(Overlay::Confirm { question, .. }) => {
                let text = vec![
                    Line::from(question.as_str()),
                    Line::from(""),
                    Line::from("y yes · n no"),
                ];
                popup(frame, "Sure?", text, 64, &theme);
            }
            _ => {}
        }
    }
    match &model.overlay {
        Some(Overlay::Input { purpose, text }) => {
            let title = match purpose {
                Input::Filter => format!("Filter {}", model.tab.title().to_lowercase()),
                Input::Tell { run, agent } => format!("Tell agent {} of run {run}", agent + 1),
            };
            let lines = vec![
                Line::from(format!("{text}▏")),
                Line::from(""),
                Line::from("Enter gives it · Esc drops it"),
            ];
            popup(frame, &title, lines, 70, &theme);
        }
        Some(Overlay::NewRun { form, field }) => {
            let values = [&form.task, &form.agents, &form.check, &form.allow];
            let mut text: Vec<Line> = FORM_FIELDS
                .iter()
                .zip(values)
                .enumerate()
                .map(|(i, (name, value))| {
                    let cursor = if i == *field { "▏" } else { "" };
                    let style = theme.focus(i == *field);
                    Line::from(vec![
                        Span::styled(format!("{name:>7}: "), style),
                        Span::raw(format!("{value}{cursor}")),
                    ])
                })
                .collect();
            text.push(Line::from(""));
            text.push(Line::from(
                "Agents: a number, or berth, berth:MODEL, codex, … separated by commas",
            ));
            text.push(Line::from(
                "Allow: tools the agents may use (write_file,run_command), or all",
            ));
            text.push(Line::from("Tab next field · Enter start · Esc drop"));
            popup(
                frame,
                "Start a run in this folder's repository",
                text,
                76,
                &theme,
            );
        }
        _ => {}
    }
}

fn draw_header(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let mut spans = vec![Span::styled(
        " berth ",
        theme.fg(Color::Cyan).add_modifier(Modifier::BOLD),
    )];
    for (i, tab) in Tab::ALL.iter().enumerate() {
        let style = match *tab == model.tab {
            true => theme.selected().add_modifier(Modifier::BOLD),
            false => Style::new(),
        };
        spans.push(Span::raw(" "));
        spans.push(Span::styled(format!("{} {}", i + 1, tab.title()), style));
    }
    spans.push(Span::styled(
        format!("   {}", model.place),
        theme.fg(Color::DarkGray),
    ));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_footer(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let keys: &[&str] = match model.tab {
        Tab::Runs => match model.pane {
            Pane::Runs => &[
                "Enter", "/", "d", "l", "p", "L", "x", "v", "s", "r", "c", "t i", "o", "e",
            ],
            _ => &[
                "Esc", "Tab", "d", "l", "t i", "p", "L", "x", "v", "s", "r", "o", "e",
            ],
        },
        Tab::Workspaces => &["1 2 3 4", "j k ↑ ↓", "/", "o", "R"],
        Tab::Sessions => &["Enter", "Esc", "/", "R"],
        Tab::Land => &["Enter", "x", "K J", "o", "R"],
    };
    let table = match model.tab {
        Tab::Land => crate::land::KEYS,
        _ => KEYS,
    };
    let key_style = theme.fg(Color::Cyan).add_modifier(Modifier::BOLD);
    // `? keys q quit` always shows: the keys before it as many as fit.
    let tail = [("?", "keys"), ("q", "quit")];
    let tail_width: usize = tail.iter().map(|(k, w)| k.len() + w.len() + 2).sum();
    let mut used = 0;
    let mut spans = Vec::new();
    for k in keys {
        let Some((key, what)) = table.iter().find(|(key, _)| key == k) else {
            continue;
        };
        // Only the first word.
        let short = what.split([' ', '(']).next().unwrap_or(what);
        let width = key.chars().count() + short.chars().count() + 2;
        if used + width + tail_width > area.width as usize {
            break;
        }
        used += width;
        spans.push(Span::styled(format!(" {key} "), key_style));
        spans.push(Span::raw(short.to_owned()));
    }
    for (key, what) in tail {
        spans.push(Span::styled(format!(" {key} "), key_style));
        spans.push(Span::raw(what));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

pub(crate) fn block<'a>(title: String, focused: bool, theme: &Theme) -> Block<'a> {
    Block::new()
        .borders(Borders::ALL)
        .border_style(theme.focus(focused))
        .title(Span::styled(title, theme.focus(focused)))
}

/// A list's title: its name, how many it shows (`None`: still being read), and the filter.
fn list_title(name: &str, count: Option<String>, filter: Option<&str>) -> String {
    let filter = filter.map(|f| format!(" /{f}")).unwrap_or_default();
    match count {
        Some(n) => format!(" {name} ({n}){filter} "),
        None => format!(" {name} (reading…) "),
    }
}

/// The rows of `shown` that fit in `height` with the selected one (`sel`) among them,
/// marked: only those are built, however long the list.
pub(crate) fn visible_rows<'a>(
    shown: &[usize],
    sel: usize,
    height: usize,
    theme: &Theme,
    row: impl Fn(usize) -> Row<'a>,
) -> Vec<Row<'a>> {
    shown
        .iter()
        .enumerate()
        .skip(first_row(sel, height))
        .take(height)
        .map(|(at, &i)| match at == sel {
            true => row(i).style(theme.selected()),
            false => row(i),
        })
        .collect()
}

/// The first row to show so that `sel` shows in `height` rows.
fn first_row(sel: usize, height: usize) -> usize {
    (sel + 1).saturating_sub(height.max(1))
}

fn draw_runs_tab(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let agents = model.selected_run().map_or(1, |r| r.agents.len()) as u16;
    if area.width >= WIDE {
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(42), Constraint::Percentage(58)])
                .areas(area);
        let [top, bottom] = Layout::vertical([
            Constraint::Length((agents + 3).min(area.height / 2)),
            Constraint::Min(3),
        ])
        .areas(right);
        draw_runs(frame, left, model, theme);
        draw_agents(frame, top, model, theme);
        draw_detail(frame, bottom, model, theme);
    } else if model.pane == Pane::Detail {
        draw_detail(frame, area, model, theme);
    } else {
        let [top, middle, bottom] = Layout::vertical([
            Constraint::Percentage(40),
            Constraint::Length((agents + 3).min(area.height / 3)),
            Constraint::Min(3),
        ])
        .areas(area);
        draw_runs(frame, top, model, theme);
        draw_agents(frame, middle, model, theme);
        draw_detail(frame, bottom, model, theme);
    }
}

fn draw_runs(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let shown = model.shown_runs();
    let more = match &model.runs_next {
        Some(_) => "+",
        None => "",
    };
    let title = list_title(
        "Runs",
        Some(format!("{}{more}", shown.len())),
        model.filter(Tab::Runs),
    );
    let height = area.height.saturating_sub(3) as usize;
    // Where each ran, when the runs may be on several machines (a pool) and there is room.
    let with_node = model.pooled && area.width >= 60;
    let rows = visible_rows(&shown, model.run_sel, height, theme, |i| {
        let r = &model.runs[i];
        let review = r.review();
        let mut cells = vec![
            Cell::new(short_id(r.id.as_str())),
            Cell::new(review.to_string()).style(theme.state(review.stage.as_str())),
            Cell::new(agent_counts(r)),
            Cell::new(age(model.now, r.created_at)),
        ];
        if with_node {
            cells.push(Cell::new(node_of(r)));
        }
        cells.push(Cell::new(outside(&berth_ops::title_of(&r.request.task))));
        Row::new(cells)
    });
    let mut widths = vec![
        Constraint::Length(8),
        // `review 2✓ 1✗`, `picked 1 1✓ 1✗`: what the run needs done.
        Constraint::Length(15),
        Constraint::Length(9),
        Constraint::Length(4),
    ];
    let mut header = vec!["RUN", "STATE", "AGENTS", "AGE"];
    if with_node {
        widths.push(Constraint::Length(12));
        header.push("NODE");
    }
    widths.push(Constraint::Min(10));
    header.push("TASK");
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(theme.fg(Color::DarkGray)))
        .block(block(title, model.pane == Pane::Runs, theme));
    frame.render_widget(table, area);
    if shown.is_empty() {
        let why = match (model.runs_loaded, model.runs.is_empty()) {
            (false, _) => "reading the runs…",
            (true, true) => "no runs yet: c starts one (or `berth run TASK`)",
            (true, false) => "no run matches the filter: / changes it, Esc in it clears it",
        };
        let inner = area.inner(ratatui::layout::Margin::new(2, 2));
        frame.render_widget(Paragraph::new(why).wrap(Wrap { trim: true }), inner);
    }
}

/// The machine a run's agents ran on (the first's), or the one it is queued for.
fn node_of(r: &RunRecord) -> String {
    r.agents
        .iter()
        .find_map(|a| a.node.clone())
        .or_else(|| r.request.pool.as_ref().and_then(|p| p.node.clone()))
        .unwrap_or_else(|| "-".to_owned())
}

/// `2✓ 1✗ 1?`: done, failed or stopped, waiting on a person, and working.
fn agent_counts(r: &RunRecord) -> String {
    let (mut done, mut failed, mut waiting, mut working) = (0, 0, 0, 0);
    for a in &r.agents {
        match a.status.state {
            _ if a.status.waiting.is_some() => waiting += 1,
            AgentState::Done => done += 1,
            AgentState::Failed | AgentState::Stopped | AgentState::Budget => failed += 1,
            _ => working += 1,
        }
    }
    let mut parts = Vec::new();
    for (n, mark) in [(done, "✓"), (failed, "✗"), (waiting, "?"), (working, "…")] {
        if n > 0 {
            parts.push(format!("{n}{mark}"));
        }
    }
    parts.join(" ")
}

pub(crate) fn short_id(id: &str) -> &str {
    &id[..id.len().min(8)]
}

/// `42s`, `5m`, `3h`, `12d`.
fn age(now: DateTime<Utc>, then: DateTime<Utc>) -> String {
    let s = (now - then).num_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

fn draw_agents(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let Some(run) = model.selected_run() else {
        frame.render_widget(block(" Agents ".to_owned(), false, theme), area);
        return;
    };
    let title = format!(
        " Run {} · {} · {} ",
        short_id(run.id.as_str()),
        run.review(),
        outside(&berth_ops::title_of(&run.request.task))
    );
    let rows: Vec<Row> = run
        .agents
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let style = match i == model.agent_sel && model.pane != Pane::Runs {
                true => theme.selected(),
                false => Style::new(),
            };
            agent_row(i, a, model.now, run, theme).style(style)
        })
        .collect();
    let widths = [
        Constraint::Length(2),
        Constraint::Length(14),
        Constraint::Length(8),
        Constraint::Length(9),
        Constraint::Min(12),
        Constraint::Length(7),
        Constraint::Length(6),
        // `not run`.
        Constraint::Length(7),
        Constraint::Length(5),
    ];
    let header = Row::new([
        "#", "AGENT", "STATE", "OUTCOME", "LATEST", "TOKENS", "COST", "CHECK", "TIME",
    ])
    .style(theme.fg(Color::DarkGray));
    let table = Table::new(rows, widths).header(header).block(block(
        title,
        model.pane == Pane::Agents,
        theme,
    ));
    frame.render_widget(table, area);
}

fn agent_row<'a>(
    i: usize,
    a: &'a AgentRecord,
    now: DateTime<Utc>,
    run: &RunRecord,
    theme: &Theme,
) -> Row<'a> {
    let state = match a.status.waiting {
        Some(_) => "waiting",
        None => a.status.state.as_str(),
    };
    let outcome = a.outcome.map_or("", |o| o.as_str());
    let summary = a.summary.as_ref();
    let tokens = a.status.input_tokens + a.status.output_tokens;
    let cost = summary
        .and_then(|s| s.cost_usd)
        .map_or(String::new(), |c| format!("${c:.2}"));
    let check = match a.status.check_passed {
        Some(true) => "pass",
        Some(false) => "fail",
        None if summary
            .and_then(|s| s.check.as_ref())
            .is_some_and(|c| c.not_run) =>
        {
            "not run"
        }
        None => "",
    };
    let time = match a.status.elapsed_ms {
        0 if !a.status.state.is_final() => run.started_at.map_or(String::new(), |t| age(now, t)),
        ms => age(now, now - chrono::Duration::milliseconds(ms as i64)),
    };
    Row::new(vec![
        Cell::new((i + 1).to_string()),
        Cell::new(outside(&a.label)),
        Cell::new(state).style(theme.state(state)),
        Cell::new(outcome).style(theme.state(outcome)),
        Cell::new(outside(a.status.latest.as_deref().unwrap_or_default())),
        Cell::new(lines::tokens(tokens)),
        Cell::new(cost),
        Cell::new(check).style(theme.state(match check {
            "pass" => "done",
            "fail" => "failed",
            _ => "",
        })),
        Cell::new(time),
    ])
}

fn draw_detail(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let focused = model.pane == Pane::Detail;
    if model.selected_run().is_none() {
        frame.render_widget(block(" Transcript ".to_owned(), focused, theme), area);
        return;
    }
    let agent = model.agent_sel;
    let label = model
        .selected_run()
        .and_then(|r| r.agents.get(agent))
        .map_or(String::new(), |a| outside(&a.label));
    match model.detail {
        Detail::Transcript => {
            let following = match model.transcript_scroll.back {
                0 => "following",
                _ => "scrolled: G follows",
            };
            let title = format!(" Agent {} ({label}) · transcript · {following} ", agent + 1);
            let empty = Lines::default();
            let lines = model.followed.agents.get(&agent).unwrap_or(&empty);
            draw_lines(
                frame,
                area,
                lines,
                model.transcript_scroll.back,
                title,
                focused,
                theme,
            );
        }
        Detail::Check => {
            let title = format!(" Agent {} ({label}) · check ", agent + 1);
            let selected = model.selected_agent();
            match &model.check {
                Some(c) if selected == Some((c.run.clone(), c.agent)) => draw_lines(
                    frame,
                    area,
                    &c.lines,
                    model.check_scroll.back,
                    title,
                    focused,
                    theme,
                ),
                _ => frame.render_widget(block(title, focused, theme), area),
            }
        }
        Detail::Diff => {
            let title = format!(" Agent {} ({label}) · diff ", agent + 1);
            let selected = model.selected_agent();
            // What its work conflicts with, above its diff, when there is anything to say.
            let notes = match &model.conflicts {
                Some((run, i, seen)) if selected == Some((run.clone(), *i)) => {
                    lines::of_conflicts(seen)
                }
                _ => Lines::default(),
            };
            let area = match notes.is_empty() {
                true => area,
                false => {
                    let rows = (notes.len() as u16 + 2).min(area.height / 2);
                    let [top, rest] =
                        Layout::vertical([Constraint::Length(rows), Constraint::Min(3)])
                            .areas(area);
                    let title = format!(" Agent {} ({label}) · conflicts ", agent + 1);
                    draw_lines(frame, top, &notes, 0, title, false, theme);
                    rest
                }
            };
            match &model.diff {
                Some((run, i, diff)) if selected == Some((run.clone(), *i)) => match diff {
                    Ok(lines) => draw_lines(
                        frame,
                        area,
                        lines,
                        model.diff_scroll.back,
                        title,
                        focused,
                        theme,
                    ),
                    Err(why) => {
                        let p = Paragraph::new(why.as_str())
                            .wrap(Wrap { trim: true })
                            .block(block(title, focused, theme));
                        frame.render_widget(p, area);
                    }
                },
                _ => {
                    let p = Paragraph::new("reading the diff…").block(block(title, focused, theme));
                    frame.render_widget(p, area);
                }
            }
        }
    }
}

/// `lines` in a box, ending `back` lines before the last, wrapped to the box's width.
fn draw_lines(
    frame: &mut Frame,
    area: Rect,
    lines: &Lines,
    back: usize,
    title: String,
    focused: bool,
    theme: &Theme,
) {
    let b = block(title, focused, theme);
    let inner = b.inner(area);
    let rows = lines::window(lines, inner.width as usize, inner.height as usize, back);
    let text: Vec<Line> = rows
        .into_iter()
        .map(|(kind, text)| Line::styled(text, theme.line(kind)))
        .collect();
    frame.render_widget(b, area);
    frame.render_widget(Paragraph::new(text), inner);
}

fn draw_workspaces(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let [list, detail] = Layout::vertical([Constraint::Min(5), Constraint::Length(6)]).areas(area);
    let shown = model.shown_workspaces();
    let title = list_title(
        "Workspaces",
        model.workspaces_loaded.then(|| shown.len().to_string()),
        model.filter(Tab::Workspaces),
    );
    let height = list.height.saturating_sub(3) as usize;
    let rows = visible_rows(&shown, model.ws_sel, height, theme, |i| {
        let w = &model.workspaces[i];
        let (kind, branch) = match &w.git {
            Some(g) => ("git", g.branch.as_str()),
            None => ("plain", ""),
        };
        let ports = w
            .ports
            .map_or(String::new(), |p| format!("{}-{}", p.first, p.last));
        Row::new(vec![
            Cell::new(w.name.clone().unwrap_or_else(|| w.id.to_string())),
            Cell::new(kind),
            Cell::new(branch.to_owned()),
            Cell::new(worktree_state(model.ws_status.get(w.id.as_str()))),
            Cell::new(ports),
            Cell::new(age(model.now, w.last_accessed)),
        ])
    });
    let widths = [
        Constraint::Fill(2),
        Constraint::Length(5),
        Constraint::Fill(2),
        Constraint::Length(16),
        Constraint::Length(11),
        Constraint::Length(4),
    ];
    let header = Row::new(["NAME", "KIND", "BRANCH", "STATE", "PORTS", "LAST"])
        .style(theme.fg(Color::DarkGray));
    let table = Table::new(rows, widths)
        .header(header)
        .block(block(title, true, theme));
    frame.render_widget(table, list);
    let text = match model.selected_workspace() {
        Some(w) => {
            let mut text = vec![Line::from(format!(
                "{}  {}",
                w.label,
                outside(&w.description)
            ))];
            if let Some(path) = &w.path {
                text.push(Line::from(format!("folder: {}", path.display())));
            }
            if let Some(g) = &w.git {
                text.push(Line::from(format!(
                    "branch {} from {} in {}",
                    g.branch,
                    g.base_branch,
                    g.repo.display()
                )));
            }
            text
        }
        None => vec![Line::from(match model.workspaces_loaded {
            true => "no workspace: `berth workspace create` makes one",
            false => "",
        })],
    };
    frame.render_widget(
        Paragraph::new(text).block(block(" Workspace ".to_owned(), false, theme)),
        detail,
    );
}

/// `clean`, `3 changed, 2 ahead`, or nothing while it is read.
fn worktree_state(status: Option<&Option<berth_ops::WorktreeStatus>>) -> String {
    let Some(Some(s)) = status else {
        return String::new();
    };
    let mut parts = Vec::new();
    if let Some(n) = s.changed_files.filter(|n| *n > 0) {
        parts.push(format!("{n} changed"));
    }
    if let Some(n) = s.ahead.filter(|n| *n > 0) {
        parts.push(format!("{n} ahead"));
    }
    match parts.is_empty() {
        true => "clean".to_owned(),
        false => parts.join(", "),
    }
}

fn draw_sessions(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    if let Some((id, lines)) = &model.session_open {
        let title = format!(" Session {id} · transcript · Esc back ");
        match lines {
            Ok(lines) => draw_lines(
                frame,
                area,
                lines,
                model.session_scroll.back,
                title,
                true,
                theme,
            ),
            Err(why) => frame.render_widget(
                Paragraph::new(why.as_str())
                    .wrap(Wrap { trim: true })
                    .block(block(title, true, theme)),
                area,
            ),
        }
        return;
    }
    let shown = model.shown_sessions();
    let title = list_title(
        "Sessions",
        model.sessions_loaded.then(|| shown.len().to_string()),
        model.filter(Tab::Sessions),
    );
    let height = area.height.saturating_sub(3) as usize;
    let rows = visible_rows(&shown, model.ses_sel, height, theme, |i| {
        let s = &model.sessions[i];
        let title = match s.title.is_empty() {
            true => s.id.to_string(),
            false => outside(&s.title),
        };
        Row::new(vec![
            Cell::new(title),
            Cell::new(
                s.workspace_name
                    .as_deref()
                    .map_or_else(|| s.workspace_id.to_string(), outside),
            ),
            // An ACP agent's session names the agent: no berth model answers in it.
            Cell::new(match &s.agent {
                Some(agent) => format!("agent {}", outside(agent)),
                None => s.model.clone(),
            }),
            Cell::new(lines::tokens(s.usage.input_tokens + s.usage.output_tokens)),
            Cell::new(age(model.now, s.updated_at)),
        ])
    });
    let widths = [
        Constraint::Fill(3),
        Constraint::Fill(2),
        Constraint::Length(22),
        Constraint::Length(7),
        Constraint::Length(4),
    ];
    let header = Row::new(["TITLE", "WORKSPACE", "ANSWERED BY", "TOKENS", "LAST"])
        .style(theme.fg(Color::DarkGray));
    let table = Table::new(rows, widths)
        .header(header)
        .block(block(title, true, theme));
    frame.render_widget(table, area);
}

fn draw_question(frame: &mut Frame, q: &Question, theme: &Theme) {
    let mut text = vec![
        Line::from(format!(
            "Agent {} ({}) of run {} asks:",
            q.agent + 1,
            outside(&q.label),
            short_id(q.run.as_str())
        )),
        Line::from(Span::styled(
            format!("may it {}?", outside(&q.waiting.tool)),
            theme.fg(Color::Magenta).add_modifier(Modifier::BOLD),
        )),
        Line::from(outside(&q.waiting.description)),
        Line::from(format!("task: {}", outside(&q.task))),
    ];
    // What it said in its turn before asking: why it wants the call, in its own words.
    if let Some(said) = q.said.as_deref().filter(|s| !s.is_empty()) {
        let lines: Vec<&str> = said.lines().collect();
        let from = lines.len().saturating_sub(SAID_LINES);
        text.push(Line::from(""));
        text.push(Line::styled(
            "it said:",
            theme.fg(Color::DarkGray).add_modifier(Modifier::BOLD),
        ));
        if from > 0 {
            text.push(Line::styled("…", theme.fg(Color::DarkGray)));
        }
        for line in &lines[from..] {
            text.push(Line::styled(
                format!("  {}", cut(&outside(line), SAID_WIDTH)),
                Style::new().add_modifier(Modifier::ITALIC),
            ));
        }
    }
    text.push(Line::from(""));
    text.push(Line::from("y allow once · a always · n deny · Esc later"));
    popup(frame, "An agent waits for you", text, 72, theme);
}

/// Most lines of what an agent said that its question's dialog quotes (the last ones), and
/// most characters of each: the dialog fits a screen of 24 rows.
const SAID_LINES: usize = 5;
const SAID_WIDTH: usize = 200;

/// `text` cut at `most` characters, marked.
fn cut(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The pick dialog: what a pick does, then each reason against it in berth-run's own
/// words with the key that goes past it.
fn draw_pick(frame: &mut Frame, asked: &PickAsked, theme: &Theme) {
    let n = asked.agent + 1;
    let bad = theme.fg(Color::Red).add_modifier(Modifier::BOLD);
    let mut text = vec![
        Line::from(format!(
            "Merge agent {n} ({}) of run {} into its base branch, and drop the others' workspaces?",
            outside(&asked.label),
            asked.run
        )),
        Line::from(""),
    ];
    let mut keys = Vec::new();
    if let Some(refusal) = &asked.refusal {
        text.push(Line::styled(format!("{}.", outside(refusal)), bad));
        match asked.force {
            true => text.push(Line::from("F given: picked against it")),
            false => keys.push("F picks it anyway"),
        }
    }
    if let Some(winner) = asked.winner {
        text.push(Line::styled(
            format!(
                "run {} has its winner already: agent {} was merged.",
                asked.run,
                winner + 1
            ),
            bad,
        ));
        match asked.also {
            true => text.push(Line::from("A given: merged as well")),
            false => keys.push("A merges it as well, combining their work"),
        }
    }
    text.push(Line::from(""));
    let keys = match keys.is_empty() {
        true => "y pick · n or Esc cancels".to_owned(),
        false => format!("{} · Esc cancels", keys.join(" · ")),
    };
    text.push(Line::styled(keys, theme.fg(Color::Cyan)));
    popup(frame, &format!("Pick agent {n}?"), text, 72, theme);
}

fn draw_help(frame: &mut Frame, theme: &Theme) {
    let key_style = theme.fg(Color::Cyan).add_modifier(Modifier::BOLD);
    let area = frame.area();
    // A screen too short for a key a row (80x24) has two a row, each cut to its half.
    if KEYS.len() + 2 > usize::from(area.height) {
        let half = usize::from(area.width.saturating_sub(4) / 2).saturating_sub(11);
        let text: Vec<Line> = KEYS
            .chunks(2)
            .map(|pair| {
                let mut spans = Vec::new();
                for (key, what) in pair {
                    let what: String = what.chars().take(half).collect();
                    spans.push(Span::styled(format!("{key:>9}  "), key_style));
                    spans.push(Span::raw(format!("{what:<half$}")));
                }
                Line::from(spans)
            })
            .collect();
        return popup(frame, "Keys (any key closes)", text, area.width, theme);
    }
    let text: Vec<Line> = KEYS
        .iter()
        .map(|(key, what)| {
            Line::from(vec![
                Span::styled(format!("{key:>9}  "), key_style),
                Span::raw(*what),
            ])
        })
        .collect();
    popup(frame, "Keys (any key closes)", text, 64, theme);
}

/// A box in the middle of the screen, at most `width` columns, over what is below.
pub(crate) fn popup(frame: &mut Frame, title: &str, text: Vec<Line>, width: u16, theme: &Theme) {
    let screen = frame.area();
    let width = width.min(screen.width.saturating_sub(2)).max(10);
    let inner_width = width.saturating_sub(2).max(1) as usize;
    let rows: usize = text
        .iter()
        .map(|l| l.width().div_ceil(inner_width).max(1))
        .sum();
    let height = (rows as u16 + 2).min(screen.height);
    let area = Rect {
        x: screen.x + (screen.width.saturating_sub(width)) / 2,
        y: screen.y + (screen.height.saturating_sub(height)) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(text).wrap(Wrap { trim: false }).block(block(
            format!(" {title} "),
            true,
            theme,
        )),
        area,
    );
}
