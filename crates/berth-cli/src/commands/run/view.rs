//! How a run is shown as it goes: a table redrawn in place on a terminal, a line per event
//! otherwise (with the answers' text for `run logs`), or JSON for scripts.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use berth_run::{AgentStatus, RunEvent, RunRecord};

use super::summary::ended_as;
use crate::render;

/// How a run is shown as it goes.
pub(super) trait View {
    fn event(&mut self, event: &RunEvent) -> std::io::Result<()>;
    fn tick(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    /// The events are over: say what is still held back.
    fn end(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One JSON object per event, for scripts.
pub(super) struct Json;

impl View for Json {
    fn event(&mut self, event: &RunEvent) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, event).map_err(std::io::Error::other)?;
        out.write_all(b"\n")?;
        out.flush()
    }
}

/// Of an agent's text, the most held back waiting for the end of its line.
const HELD_LINE: usize = 64 * 1024;

/// A line per event; with the answers' text (`run logs`), each agent's text line by line,
/// a line shown once it is whole.
#[derive(Default)]
pub(super) struct Lines {
    /// Each agent's text since its last whole line, when text is shown.
    text: Option<BTreeMap<usize, String>>,
    /// The run's id, for the commands a line names; `RUN` until known.
    run: Option<String>,
}

impl Lines {
    /// Without the answers' text, for the run `run`.
    pub(super) fn of(run: &str) -> Lines {
        Lines {
            text: None,
            run: Some(run.to_owned()),
        }
    }

    /// With the answers' text, for the run `run`.
    pub(super) fn with_text(run: &str) -> Lines {
        Lines {
            text: Some(BTreeMap::new()),
            run: Some(run.to_owned()),
        }
    }

    /// Shows agent `agent`'s text up to its last line break; with `all`, the rest too.
    fn flush(&mut self, agent: usize, all: bool) -> std::io::Result<()> {
        let Some(pending) = self.text.as_mut().and_then(|t| t.get_mut(&agent)) else {
            return Ok(());
        };
        let whole_lines = pending.rfind('\n').map_or(0, |i| i + 1);
        // A line that goes on and on is shown as it is so far: what is held stays small.
        let cut = match all || pending.len() - whole_lines > HELD_LINE {
            true => pending.len(),
            false => whole_lines,
        };
        let whole: String = pending.drain(..cut).collect();
        for line in whole.lines() {
            render::line(format!("[{}] {}", agent + 1, render::cell(line)))?;
        }
        Ok(())
    }
}

impl View for Lines {
    fn end(&mut self) -> std::io::Result<()> {
        let agents: Vec<usize> = self.text.iter().flat_map(|t| t.keys().copied()).collect();
        for agent in agents {
            self.flush(agent, true)?;
        }
        Ok(())
    }

    fn event(&mut self, event: &RunEvent) -> std::io::Result<()> {
        if let (Some(pending), RunEvent::Text { agent, text }) = (self.text.as_mut(), event) {
            pending.entry(*agent).or_default().push_str(text);
            return self.flush(*agent, false);
        }
        // Whatever the agent said before this is shown before it.
        if let Some(agent) = event.agent() {
            self.flush(agent, true)?;
        }
        let line = match event {
            RunEvent::Queued { agent, max_agents } => format!(
                "[{}] queued: {max_agents} agents work at once ([run] max_agents)",
                agent + 1
            ),
            RunEvent::Started {
                agent,
                label,
                workspace_name,
                session,
                ..
            } => format!(
                "[{}] {label} started in workspace {workspace_name}, session {session}",
                agent + 1
            ),
            RunEvent::Tool { agent, name, .. } => format!("[{}] → {name}", agent + 1),
            RunEvent::ToolDone {
                agent,
                name,
                is_error: true,
            } => format!("[{}] ✗ {name} failed", agent + 1),
            RunEvent::Refused { agent, tool, .. } => format!(
                "[{}] refused {tool} (allow it with --allow {tool} or --allow-all)",
                agent + 1
            ),
            RunEvent::Notice { agent, message } => format!("[{}] berth: {message}", agent + 1),
            RunEvent::Told { agent, text } => {
                format!("[{}] told: {}", agent + 1, berth_ops::title_of(text))
            }
            RunEvent::Ended {
                agent,
                state,
                stop,
                message,
                ..
            } => {
                let ended = ended_as(state.as_str(), Some(stop.as_str()));
                match message {
                    Some(m) => format!("[{}] {ended}: {m}", agent + 1),
                    None => format!("[{}] {ended}", agent + 1),
                }
            }
            RunEvent::Pushed { agent, branch } => {
                format!("[{}] pushed {branch} to origin", agent + 1)
            }
            RunEvent::Asked {
                agent,
                tool,
                description,
                ..
            } => format!(
                "[{}] waits for you: may it {tool}? {description} (`berth run answer {} --agent {} allow|deny`)",
                agent + 1,
                self.run.as_deref().unwrap_or("RUN"),
                agent + 1
            ),
            RunEvent::Answered { agent, answer, .. } => {
                format!("[{}] answered: {answer}", agent + 1)
            }
            RunEvent::Checked { agent, check } => format!(
                "[{}] check `{}` {}",
                agent + 1,
                check.command,
                check.described()
            ),
            RunEvent::Text { .. }
            | RunEvent::ToolDone { .. }
            | RunEvent::AgentSession { .. }
            | RunEvent::Summary { .. } => {
                return Ok(());
            }
        };
        // A reason of several lines (an agent's standard error) goes on indented.
        for (i, part) in line.lines().enumerate() {
            match i {
                0 => render::line(render::cell(part))?,
                _ => render::line(format!("    {}", render::cell(part)))?,
            }
        }
        Ok(())
    }
}

/// A table redrawn in place: one row per agent.
pub(super) struct Table {
    rows: Vec<Row>,
    drawn: usize,
}

struct Row {
    label: String,
    /// The agent as berth-run folds its events.
    status: AgentStatus,
    started: Instant,
}

impl Table {
    /// One row per agent of the run, as kept (a resumed run's finished agents as they
    /// ended).
    pub(super) fn new(record: &RunRecord) -> Table {
        let rows = record
            .agents
            .iter()
            .map(|a| Row {
                label: a.label.clone(),
                status: a.status.clone(),
                started: Instant::now(),
            })
            .collect();
        Table { rows, drawn: 0 }
    }

    fn draw(&mut self) -> std::io::Result<()> {
        let mut lines = vec![format!(
            "{:<4} {:<18} {:<30} {:<9} {:<24} {:>8} {:>7}",
            "#", "AGENT", "WORKSPACE", "STATE", "LAST TOOL", "TOKENS", "TIME"
        )];
        for (i, r) in self.rows.iter().enumerate() {
            let s = &r.status;
            let elapsed = match s.stop {
                Some(_) => Duration::from_millis(s.elapsed_ms),
                None => r.started.elapsed(),
            };
            lines.push(format!(
                "{:<4} {:<18} {:<30} {:<9} {:<24} {:>8} {:>6}s",
                i + 1,
                clip(&render::cell(&r.label), 18),
                clip(
                    &render::cell(s.workspace_name.as_deref().unwrap_or("-")),
                    30
                ),
                s.state.as_str(),
                clip(&render::cell(s.latest.as_deref().unwrap_or("-")), 24),
                s.input_tokens + s.output_tokens,
                elapsed.as_secs()
            ));
        }
        let mut out = std::io::stdout().lock();
        if self.drawn > 0 {
            write!(out, "\x1b[{}A", self.drawn)?;
        }
        for line in &lines {
            writeln!(out, "\x1b[2K{line}")?;
        }
        self.drawn = lines.len();
        out.flush()
    }
}

impl View for Table {
    fn event(&mut self, event: &RunEvent) -> std::io::Result<()> {
        if let Some(agent) = event.agent() {
            self.rows[agent].status.apply(event);
        }
        self.draw()
    }

    fn tick(&mut self) -> std::io::Result<()> {
        self.draw()
    }
}

fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}
