//! `berth run`: starts a run (berth-run) and shows it: a live table on a terminal, a line per
//! event otherwise, or one JSON object per event with `--json`; then the summary.

use std::io::{IsTerminal, Read, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use berth_agent::AgentBuilder;
use berth_ops::{Ops, Repository};
use berth_run::{AgentState, AgentStatus, AgentSummary, Policy, RunEvent, RunRequest};

use crate::cli::RunArgs;
use crate::render;

pub async fn run(ops: Ops, args: RunArgs) -> anyhow::Result<()> {
    let task = match (&args.task, &args.task_file) {
        (Some(t), _) if t == "-" => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the task from standard input")?;
            text
        }
        (Some(t), _) => t.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the task from {}", path.display()))?,
        (None, None) => bail!("give the task as an argument, - for standard input, or --task-file"),
    };
    let agents = berth_run::parse_agents(
        &args.agents,
        args.model.as_deref(),
        args.agent_cmd.as_deref(),
    )?;
    let repository = match &args.repo {
        Some(repo) => Repository::Named(repo.clone()),
        None => {
            Repository::Around(std::env::current_dir().context("cannot read the current folder")?)
        }
    };
    let request = RunRequest {
        task,
        repository,
        workspace: None,
        agents,
        name: args.name.clone(),
        policy: Policy::new(&args.allow, args.allow_all),
        check: args.check.clone(),
        check_timeout: Duration::from_secs(args.check_timeout),
    };
    let agent = AgentBuilder::new(ops.clone())
        .tools(berth_agent::tools::builtin())
        .build();
    let mut run = berth_run::start(ops, agent, request.clone())?;
    let mut view: Box<dyn View> = if args.json {
        Box::new(Json)
    } else if std::io::stdout().is_terminal() {
        Box::new(Table::new(&request))
    } else {
        Box::new(Lines)
    };
    let mut ticks = tokio::time::interval(Duration::from_millis(500));
    let mut stopping = false;
    let summary = loop {
        tokio::select! {
            event = run.events.recv() => match event {
                Some(RunEvent::Summary { agents }) => {
                    view.event(&RunEvent::Summary { agents: agents.clone() })?;
                    break agents;
                }
                Some(event) => view.event(&event)?,
                None => bail!("the run ended without its summary"),
            },
            _ = tokio::signal::ctrl_c(), if !stopping => {
                stopping = true;
                run.stop();
                eprintln!("stopping every agent (what streamed is kept)…");
            }
            _ = ticks.tick() => view.tick()?,
        }
    };
    if !args.json {
        print_summary(&summary)?;
    }
    let finished = summary
        .iter()
        .all(|a| a.state == AgentState::Done && a.check.as_ref().is_none_or(|c| c.passed));
    if !finished {
        bail!("not every agent finished its answer and passed the check; the summary says which");
    }
    Ok(())
}

/// How a run is shown as it goes.
trait View {
    fn event(&mut self, event: &RunEvent) -> std::io::Result<()>;
    fn tick(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One JSON object per event, for scripts.
struct Json;

impl View for Json {
    fn event(&mut self, event: &RunEvent) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, event).map_err(std::io::Error::other)?;
        out.write_all(b"\n")?;
        out.flush()
    }
}

/// A line per event (the answer's text is in the transcript, not here).
struct Lines;

impl View for Lines {
    fn event(&mut self, event: &RunEvent) -> std::io::Result<()> {
        let line = match event {
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
            RunEvent::Ended {
                agent,
                state,
                stop,
                message,
                ..
            } => match message {
                Some(m) => format!("[{}] {} ({stop}): {m}", agent + 1, state.as_str()),
                None => format!("[{}] {} ({stop})", agent + 1, state.as_str()),
            },
            RunEvent::Checked { agent, check } => format!(
                "[{}] check `{}` {}",
                agent + 1,
                check.command,
                if check.passed { "passed" } else { "failed" }
            ),
            RunEvent::Text { .. } | RunEvent::ToolDone { .. } | RunEvent::Summary { .. } => {
                return Ok(());
            }
        };
        render::line(render::cell(&line))
    }
}

/// A table redrawn in place: one row per agent.
struct Table {
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
    fn new(request: &RunRequest) -> Table {
        let rows = request
            .agents
            .iter()
            .map(|a| Row {
                label: a.label(),
                status: AgentStatus::default(),
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
                clip(&r.label, 18),
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

fn print_summary(agents: &[AgentSummary]) -> std::io::Result<()> {
    let rows: Vec<Vec<String>> = agents
        .iter()
        .map(|a| {
            let check = match &a.check {
                None => "-".to_owned(),
                Some(c) if c.passed => "passed".to_owned(),
                Some(c) => format!("failed ({})", c.outcome.as_deref().unwrap_or("?")),
            };
            vec![
                (a.agent + 1).to_string(),
                render::cell(a.workspace_name.as_deref().unwrap_or("-")),
                match &a.message {
                    Some(m) => format!("{} ({}: {})", a.state.as_str(), a.stop, render::cell(m)),
                    None => format!("{} ({})", a.state.as_str(), a.stop),
                },
                format!("{} +{} -{}", a.files_changed, a.added, a.removed),
                check,
                (a.input_tokens + a.output_tokens).to_string(),
                format!("{:.1}s", a.elapsed_ms as f64 / 1000.0),
                a.session.clone().unwrap_or_else(|| "-".to_owned()),
            ]
        })
        .collect();
    render::line("")?;
    render::table(
        &[
            "#",
            "WORKSPACE",
            "ENDED",
            "FILES",
            "CHECK",
            "TOKENS",
            "TIME",
            "SESSION",
        ],
        &rows,
    )?;
    render::line(
        "review with `berth workspace diff NAME`, bring back with `berth workspace merge NAME`",
    )
}
