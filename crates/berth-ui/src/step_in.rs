//! Stepping into an agent's work from the dashboard: `o` opens the person's own shell in the
//! selected agent's worktree (or the selected workspace's folder), `e` their editor on a file
//! of the agent's diff, and the dashboard steps aside (raw mode off, the alternate screen left)
//! until it exits, then comes back redrawn. `berth run attach` opens the dashboard on one
//! agent's live view ([`Attach`]).
//!
//! What is opened is the person's, unconfined: it runs as them, with their environment, in a
//! folder an agent wrote. So the line printed as it opens says so (an `.envrc` there, or an
//! editor modeline, runs as them), and a file of the diff that leads out of the worktree (a
//! link the agent made) is not opened.
//!
//! The keys that open one are only ever taken in from the key thread, and the loop (`app.rs`)
//! lets that thread read its next key only once the shell or editor exits: nothing of berth
//! reads the terminal while the person's program does.
//!
//! Its part of the model, its keys and its drawing are here; `keys.rs`, `draw.rs` and `app.rs`
//! call in. [`suspend`] is the one function here that does I/O.

use std::path::{Path, PathBuf};

use berth_run::RunId;
use ratatui::crossterm::event::KeyCode;
use ratatui::text::Line;
use ratatui::{DefaultTerminal, Frame};

use crate::draw::{Theme, outside, popup, short_id};
use crate::model::{Action, Detail, Model, Overlay, Pane, Tab};

/// What `o` or `e` opens once the dashboard has stepped aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepIn {
    /// The folder it opens in: an agent's worktree, or a workspace's folder.
    pub dir: PathBuf,
    /// The file `e` opens, as the diff names it (relative to `dir`); `None`: the shell.
    pub file: Option<String>,
    /// How the printed line and the status line name the folder (`agent 1's worktree of
    /// run 3f2a9c0d`).
    pub what: String,
    /// Whether it is an agent's worktree (else a workspace's folder, which may be one's).
    pub agent: bool,
}

/// The file chooser `e` opens: the files of the selected agent's diff that are there to edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditChoice {
    pub dir: PathBuf,
    pub what: String,
    /// Paths as the diff names them, relative to `dir`.
    pub files: Vec<String>,
    pub sel: usize,
}

/// The agent `berth run attach` opens the dashboard on: its run, and which agent (0-based;
/// `None`: the run's agents, to choose from, unless it has one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attach {
    pub run: RunId,
    pub agent: Option<usize>,
}

/// The diff's files kept beside its lines, of which run's agent: what `e` chooses from.
pub type DiffFiles = (RunId, usize, Vec<berth_ops::FileDiff>);

/// `o`: the selected agent's worktree on the Runs tab (and of the land queue), the selected
/// workspace's folder on the Workspaces tab.
pub(crate) fn open_key(model: &mut Model) -> Vec<Action> {
    let step = match model.tab {
        Tab::Runs => match agent_dir(model, "o") {
            Ok((dir, what)) => StepIn {
                dir,
                file: None,
                what,
                agent: true,
            },
            Err(why) => return refuse(model, why),
        },
        Tab::Workspaces => {
            let Some(ws) = model.selected_workspace() else {
                return refuse(model, "no workspace is selected".to_owned());
            };
            let Some(dir) = ws.work_dir() else {
                let why = format!("workspace {} keeps no folder here", outside(&ws.label));
                return refuse(model, why);
            };
            StepIn {
                dir: dir.to_owned(),
                file: None,
                what: format!("workspace {}", outside(&ws.label)),
                agent: false,
            }
        }
        Tab::Land => match queued_dir(model) {
            Ok((dir, what)) => StepIn {
                dir,
                file: None,
                what,
                agent: true,
            },
            Err(why) => return refuse(model, why),
        },
        Tab::Sessions => {
            let why = "o opens a shell in an agent's worktree (tabs 1 and 4) or a workspace's folder (tab 2)";
            return refuse(model, why.to_owned());
        }
    };
    vec![Action::StepIn(step)]
}

/// `e`: the chooser of the selected agent's changed files, once its diff is read (it is
/// asked for first when it is not, and the chooser opens when it comes).
pub(crate) fn edit_key(model: &mut Model) -> Vec<Action> {
    if model.tab != Tab::Runs {
        return refuse(
            model,
            "e edits a file of an agent's diff (tab 1)".to_owned(),
        );
    }
    let (dir, what) = match agent_dir(model, "e") {
        Ok(found) => found,
        Err(why) => return refuse(model, why),
    };
    let Some(selected) = model.selected_agent() else {
        return Vec::new();
    };
    match &model.diff_files {
        Some((run, agent, files)) if (run.clone(), *agent) == selected => {
            let files = editable(files);
            if files.is_empty() {
                let n = selected.1 + 1;
                return refuse(
                    model,
                    format!("agent {n} changed no file that is there to edit"),
                );
            }
            model.overlay = Some(Overlay::Edit(EditChoice {
                dir,
                what,
                files,
                sel: 0,
            }));
            Vec::new()
        }
        _ => {
            // Its diff is shown and read; the chooser opens when it comes.
            model.detail = Detail::Diff;
            model.pane = Pane::Detail;
            model.edit_pending = Some(selected);
            model.status = Some((
                "reading the diff: its files to choose from…".to_owned(),
                false,
            ));
            model.detail_wanted()
        }
    }
}

/// A diff came: when it is the one `e` waits on, its chooser opens (unless something else
/// opened on top meanwhile); a diff that could not be read says why in its pane.
pub(crate) fn diff_came(model: &mut Model) {
    let Some(wanted) = model.edit_pending.take() else {
        return;
    };
    let read = matches!(&model.diff_files, Some((r, i, _)) if (r, *i) == (&wanted.0, wanted.1));
    if model.selected_agent() != Some(wanted) || !read || model.overlay.is_some() {
        return;
    }
    model.status = None;
    edit_key(model);
}

/// The files of a diff there to edit: not those it deletes.
fn editable(files: &[berth_ops::FileDiff]) -> Vec<String> {
    files
        .iter()
        .filter(|f| f.status != "deleted")
        .map(|f| f.path.clone())
        .collect()
}

/// A key in the chooser: j k move, Enter opens the file, Esc leaves it.
pub(crate) fn choice_key(model: &mut Model, mut choice: EditChoice, code: KeyCode) -> Vec<Action> {
    if let Some(sel) = crate::keys::moved(choice.sel, choice.files.len(), code) {
        choice.sel = sel;
        model.overlay = Some(Overlay::Edit(choice));
        return Vec::new();
    }
    match code {
        KeyCode::Enter => match choice.files.get(choice.sel) {
            Some(file) => vec![Action::StepIn(StepIn {
                file: Some(file.clone()),
                dir: choice.dir,
                what: choice.what,
                agent: true,
            })],
            None => Vec::new(),
        },
        KeyCode::Esc | KeyCode::Char('q') => Vec::new(),
        _ => {
            model.overlay = Some(Overlay::Edit(choice));
            Vec::new()
        }
    }
}

/// The selected agent's worktree and how to name it, or why there is none to open. `key`
/// names the key in the refusal of a run of several agents.
fn agent_dir(model: &Model, key: &str) -> Result<(PathBuf, String), String> {
    let Some(run) = model.selected_run() else {
        return Err("no run is selected".to_owned());
    };
    if model.pane == Pane::Runs && run.agents.len() > 1 {
        return Err(format!(
            "this run has several agents: Enter, choose one, then {key}"
        ));
    }
    let agent = model.agent_sel.min(run.agents.len().saturating_sub(1));
    let Some(a) = run.agents.get(agent) else {
        return Err(format!("run {} has no agent", run.id));
    };
    let what = format!(
        "agent {}'s worktree of run {}",
        agent + 1,
        short_id(run.id.as_str())
    );
    match &a.worktree {
        Some(dir) => Ok((dir.clone(), what)),
        None => Err(format!("agent {} has no worktree yet", agent + 1)),
    }
}

/// The worktree of the agent selected in the land queue (tab 4), from its run as last read.
fn queued_dir(model: &Model) -> Result<(PathBuf, String), String> {
    let Some(q) = model.land.queued.get(model.land.sel) else {
        return Err("the land queue is empty: o opens a queued agent's worktree".to_owned());
    };
    let what = format!(
        "agent {}'s worktree of run {}",
        q.agent + 1,
        short_id(q.run.as_str())
    );
    let worktree = model
        .runs
        .iter()
        .find(|r| r.id == q.run)
        .and_then(|r| r.agents.get(q.agent))
        .and_then(|a| a.worktree.clone());
    match worktree {
        Some(dir) => Ok((dir, what)),
        None => Err(format!("{what} is not known here")),
    }
}

fn refuse(model: &mut Model, why: String) -> Vec<Action> {
    model.status = Some((why, true));
    Vec::new()
}

impl Model {
    /// `berth run attach`'s agent, once the run is among those read: selected, and its live
    /// view open (the run's agents, when it has several and none was named); the next page
    /// asked for while it is not there yet.
    pub(crate) fn attached(&mut self) -> Vec<Action> {
        let Some(attach) = self.attach.clone() else {
            return Vec::new();
        };
        let shown = self.shown_runs();
        let Some(at) = shown.iter().position(|&i| self.runs[i].id == attach.run) else {
            return match self.runs_next.clone() {
                Some(cursor) if self.attach_asked.as_ref() != Some(&cursor) => {
                    self.attach_asked = Some(cursor.clone());
                    vec![Action::MoreRuns(cursor)]
                }
                Some(_) => Vec::new(),
                None => {
                    self.attach = None;
                    let why = format!("run {} is not among the runs read", attach.run);
                    self.status = Some((why, true));
                    Vec::new()
                }
            };
        };
        self.attach = None;
        self.tab = Tab::Runs;
        self.run_sel = at;
        let actions = self.follow_selected();
        let count = self.runs[shown[at]].agents.len();
        match attach.agent.or((count == 1).then_some(0)) {
            Some(agent) => {
                self.agent_sel = agent.min(count.saturating_sub(1));
                self.detail = Detail::Transcript;
                self.pane = Pane::Detail;
            }
            None => self.pane = Pane::Agents,
        }
        actions
    }
}

/// The chooser, on top.
pub(crate) fn draw_choice(frame: &mut Frame, choice: &EditChoice, theme: &Theme) {
    let mut text = vec![Line::from(format!("In {}:", choice.what)), Line::from("")];
    for (i, file) in choice.files.iter().enumerate() {
        let shown = berth_ops::shown::visible(file, berth_ops::shown::Form::FileName);
        text.push(match i == choice.sel {
            true => Line::styled(format!("▸ {shown}"), theme.selected()),
            false => Line::from(format!("  {shown}")),
        });
    }
    text.push(Line::from(""));
    text.push(Line::from(
        "j k move · Enter opens it in $EDITOR · Esc leaves it",
    ));
    popup(frame, "Edit a file of its work", text, 76, theme);
}

/// Steps aside for the person's shell or editor, and comes back once it exits: what the
/// status line then says, and whether it is a failure. Nothing is left when it cannot start:
/// the checks come before the screen is left, and the screen comes back whatever happened.
pub(crate) async fn suspend(terminal: &mut DefaultTerminal, step: &StepIn) -> (String, bool) {
    let (program, target) = match ready(step) {
        Ok(ready) => ready,
        Err(why) => return (why, true),
    };
    if let Err(e) = leave(terminal) {
        let _ = come_back(terminal);
        return (format!("cannot give the terminal over: {e}"), true);
    }
    // Ctrl-C typed in a program that shares berth's process group (a shell run without job
    // control) is that program's: berth takes SIGINT from here on instead of dying of it
    // (tokio keeps its handler for the process's life; in raw mode the dashboard reads
    // Ctrl-C as a key anyway).
    #[cfg(unix)]
    let _held = [
        tokio::signal::unix::SignalKind::interrupt(),
        tokio::signal::unix::SignalKind::quit(),
    ]
    .map(|kind| tokio::signal::unix::signal(kind).ok());
    println!("berth: {}", opening_line(step, &program, &target));
    let holds = match step.agent {
        true => "the folder holds an agent's work",
        false => "a workspace's folder may hold an agent's work",
    };
    println!(
        "berth: {holds}: its direnv files (.envrc) and editor modelines run as you. The dashboard comes back when it exits."
    );
    let dir = step.dir.clone();
    let shell = step.file.is_none();
    let ran = tokio::task::spawn_blocking(move || {
        let mut cmd = match shell {
            true => std::process::Command::new(&program),
            // As git runs it: `EDITOR` may carry arguments (`code -w`).
            false => {
                let mut cmd = std::process::Command::new("/bin/sh");
                cmd.arg("-c")
                    .arg(format!("{} \"$@\"", program.display()))
                    .arg(&program)
                    .arg(&target);
                cmd
            }
        };
        cmd.current_dir(&dir).env("PWD", &dir).status()
    })
    .await;
    let back = come_back(terminal);
    let said = match (ran, shell) {
        (Ok(Ok(_)), true) => (format!("back from the shell in {}", step.what), false),
        (Ok(Ok(status)), false) if status.success() => {
            (format!("back from the editor, in {}", step.what), false)
        }
        (Ok(Ok(status)), false) => (format!("the editor ended: {status}"), true),
        (Ok(Err(e)), true) => (
            format!("cannot start the shell: {e} (is $SHELL right?)"),
            true,
        ),
        (Ok(Err(e)), false) => (
            format!("cannot start the editor: {e} (is $EDITOR right?)"),
            true,
        ),
        (Err(e), _) => (format!("the shell or editor was lost: {e}"), true),
    };
    match back {
        Ok(()) => said,
        Err(e) => (
            format!("{}; the terminal did not come back whole: {e}", said.0),
            true,
        ),
    }
}

/// The program to start (`$SHELL`, else /bin/sh; `$EDITOR`, else vi) and the path it opens,
/// once the folder is there and the file is a plain file in it.
fn ready(step: &StepIn) -> Result<(PathBuf, PathBuf), String> {
    let gone = |e: std::io::Error| {
        format!(
            "{} is not here ({}: {e}): its work was merged or dropped, or it ran on another machine",
            step.what,
            step.dir.display()
        )
    };
    let root = step.dir.canonicalize().map_err(gone)?;
    if !root.is_dir() {
        return Err(format!("{} is not a folder: {}", step.what, root.display()));
    }
    let var = |name: &str, otherwise: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map_or_else(|| PathBuf::from(otherwise), PathBuf::from)
    };
    let Some(file) = &step.file else {
        return Ok((var("SHELL", "/bin/sh"), root));
    };
    Ok((var("EDITOR", "vi"), inside(&root, file, &step.what)?))
}

/// `file` of the worktree `root`, as a plain file inside it: a link the agent made that
/// leads out (to a file of the person's home, say) is not opened for them to edit.
fn inside(root: &Path, file: &str, what: &str) -> Result<PathBuf, String> {
    let shown = berth_ops::shown::visible(file, berth_ops::shown::Form::FileName);
    let path = root.join(file);
    let real = path
        .canonicalize()
        .map_err(|e| format!("{shown} is not in {what} now: {e}"))?;
    if !real.starts_with(root) {
        return Err(format!(
            "{shown} leads out of {what}, to {}: berth does not open it (open it yourself if you mean to)",
            real.display()
        ));
    }
    if !real.is_file() {
        return Err(format!("{shown} is not a plain file: nothing to edit"));
    }
    Ok(real)
}

fn opening_line(step: &StepIn, program: &Path, target: &Path) -> String {
    match step.file {
        None => format!(
            "{} in {}: {} (exit comes back)",
            program.display(),
            step.what,
            target.display()
        ),
        Some(_) => format!(
            "{} on {}, in {}",
            program.display(),
            target.display(),
            step.what
        ),
    }
}

/// The terminal handed over as the person's shell expects it: out of raw mode, off the
/// alternate screen, the cursor showing.
fn leave(terminal: &mut DefaultTerminal) -> std::io::Result<()> {
    terminal.show_cursor()?;
    ratatui::crossterm::terminal::disable_raw_mode()?;
    ratatui::crossterm::execute!(
        std::io::stdout(),
        ratatui::crossterm::terminal::LeaveAlternateScreen
    )
}

/// The dashboard's terminal again, drawn whole at the next frame.
fn come_back(terminal: &mut DefaultTerminal) -> std::io::Result<()> {
    ratatui::crossterm::execute!(
        std::io::stdout(),
        ratatui::crossterm::terminal::EnterAlternateScreen
    )?;
    ratatui::crossterm::terminal::enable_raw_mode()?;
    terminal.clear()
}
