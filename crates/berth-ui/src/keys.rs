//! What each key does: the model changed, and what the app is asked to do. What is typed
//! goes first to a line being typed, then to a question an agent waits on, then to what is
//! open on top, then to the tab.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::model::{Action, Detail, Input, Model, NewRun, Overlay, Pane, PickAsked, Scroll, Tab};

/// Rows a page key moves.
const PAGE: usize = 20;

/// The keys, as `?` and the footer show them.
pub const KEYS: &[(&str, &str)] = &[
    ("Enter", "open"),
    ("Esc", "back"),
    ("Tab", "next pane"),
    (
        "1 2 3 4",
        "tabs: runs, workspaces, sessions, the land queue",
    ),
    ("j k ↑ ↓", "move (PgUp PgDn g G)"),
    ("/", "filter"),
    ("d", "diff"),
    ("l", "transcript"),
    ("v", "check: its output, or why it did not run"),
    ("t i", "tell the agent more"),
    ("o", "shell in its worktree, or the workspace's folder"),
    ("e", "edit a file of its diff in $EDITOR"),
    ("p", "pick it (merge): y, F against its evidence, A also"),
    ("L", "queue the agent to land (again: out of the queue)"),
    ("x", "discard"),
    ("s", "stop"),
    ("r", "resume"),
    ("c", "start a run"),
    ("4 Enter", "land the queue (y), in a process of its own"),
    ("4 x K J", "take out of the queue, move up, down"),
    ("R", "reload"),
    ("?", "these keys"),
    ("q", "quit"),
];

/// Takes in one key.
pub fn key(model: &mut Model, key: KeyEvent) -> Vec<Action> {
    if key.kind == KeyEventKind::Release {
        return Vec::new();
    }
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return vec![Action::Quit];
    }
    // A terminal sends Esc and a key typed right after it as one Alt-key (`ESC j`): both
    // were meant, in that order. No key of the dashboard is an Alt-key.
    if key.modifiers.contains(KeyModifiers::ALT) {
        let mut actions = self::key(model, KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        let mut plain = key;
        plain.modifiers.remove(KeyModifiers::ALT);
        actions.extend(self::key(model, plain));
        return actions;
    }
    match model.overlay.take() {
        Some(Overlay::Input { purpose, text }) => return typed(model, purpose, text, key),
        Some(Overlay::NewRun { form, field }) => return form_key(model, form, field, key),
        other => model.overlay = other,
    }
    if let Some(actions) = question_key(model, key) {
        return actions;
    }
    match model.overlay.take() {
        Some(Overlay::Help) => {
            // Any key closes the help; q quits too.
            if key.code == KeyCode::Char('q') {
                return vec![Action::Quit];
            }
            return Vec::new();
        }
        Some(Overlay::Pick(asked)) => return pick_key(model, asked, key.code),
        Some(Overlay::Edit(choice)) => {
            return crate::step_in::choice_key(model, choice, key.code);
        }
        Some(Overlay::Confirm { action, question }) => {
            return match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => vec![action],
                KeyCode::Char('n') | KeyCode::Esc => {
                    model.status = Some(("left as it was".to_owned(), false));
                    Vec::new()
                }
                _ => {
                    model.overlay = Some(Overlay::Confirm { question, action });
                    Vec::new()
                }
            };
        }
        other => model.overlay = other,
    }
    model.status = None;
    tab_key(model, key)
}

/// A key while a question of an agent waits: y, a or n answer it, Esc puts it aside. What it
/// did, or none when the key is for the rest of the dashboard (only q gets through).
fn question_key(model: &mut Model, key: KeyEvent) -> Option<Vec<Action>> {
    let q = model.question()?;
    let answer = match key.code {
        KeyCode::Char('y') => Some(berth_run::Answer::Allow),
        KeyCode::Char('a') => Some(berth_run::Answer::AllowAlways),
        KeyCode::Char('n') => Some(berth_run::Answer::Deny),
        KeyCode::Esc => {
            model.put_aside.insert(q.waiting.question);
            // The next question's words, when another waits.
            return Some(model.said_wanted());
        }
        _ => None,
    };
    if let Some(answer) = answer {
        // Not asked again while the answer makes its way to the agent.
        model.put_aside.insert(q.waiting.question.clone());
        let mut actions = vec![Action::Answer {
            run: q.run,
            agent: q.agent,
            question: q.waiting.question,
            answer,
        }];
        actions.extend(model.said_wanted());
        return Some(actions);
    }
    if key.code != KeyCode::Char('q') {
        return Some(Vec::new());
    }
    None
}

/// A key of the dashboard itself, with no overlay open: the tabs, reload, filter, a new run,
/// and what the current tab does with it.
fn tab_key(model: &mut Model, key: KeyEvent) -> Vec<Action> {
    match key.code {
        KeyCode::Char('q') => vec![Action::Quit],
        KeyCode::Char('?') => {
            model.overlay = Some(Overlay::Help);
            Vec::new()
        }
        KeyCode::Char('1') => switch(model, Tab::Runs),
        KeyCode::Char('2') => switch(model, Tab::Workspaces),
        KeyCode::Char('3') => switch(model, Tab::Sessions),
        KeyCode::Char('4') => switch(model, Tab::Land),
        KeyCode::Char('/') => {
            let text = model.filters.get(model.tab.title()).cloned();
            model.overlay = Some(Overlay::Input {
                purpose: Input::Filter,
                text: text.unwrap_or_default(),
            });
            Vec::new()
        }
        KeyCode::Char('R') => match model.tab {
            Tab::Runs => {
                // The followed run's events read again from the start.
                model.followed.agents.clear();
                vec![Action::Follow(model.followed.run.clone())]
            }
            Tab::Workspaces => {
                model.ws_status.clear();
                vec![Action::LoadWorkspaces]
            }
            Tab::Sessions => vec![Action::LoadSessions],
            Tab::Land => {
                let id = model.land.land.as_ref().map(|l| l.record.id.clone());
                model.land.reading = true;
                vec![Action::LoadLand(id)]
            }
        },
        // Handled by the loop as `q` is: the key thread reads nothing while the shell or
        // editor runs.
        KeyCode::Char('o') => crate::step_in::open_key(model),
        KeyCode::Char('e') => crate::step_in::edit_key(model),
        KeyCode::Char('c') => {
            model.overlay = Some(Overlay::NewRun {
                form: NewRun {
                    agents: "1".to_owned(),
                    ..NewRun::default()
                },
                field: 0,
            });
            Vec::new()
        }
        _ => match model.tab {
            Tab::Runs => runs_key(model, key),
            Tab::Workspaces => workspaces_key(model, key),
            Tab::Sessions => sessions_key(model, key),
            Tab::Land => crate::land::key(model, key.code),
        },
    }
}

fn switch(model: &mut Model, tab: Tab) -> Vec<Action> {
    model.tab = tab;
    match tab {
        Tab::Workspaces if !model.workspaces_loaded => vec![Action::LoadWorkspaces],
        Tab::Sessions if !model.sessions_loaded => vec![Action::LoadSessions],
        Tab::Land => model.land.newest_wanted().into_iter().collect(),
        _ => Vec::new(),
    }
}

/// A move of a selection among `len` rows; `None` for a key that is not a move.
pub(crate) fn moved(sel: usize, len: usize, code: KeyCode) -> Option<usize> {
    let last = len.saturating_sub(1);
    Some(match code {
        KeyCode::Char('j') | KeyCode::Down => (sel + 1).min(last),
        KeyCode::Char('k') | KeyCode::Up => sel.saturating_sub(1),
        KeyCode::PageDown => (sel + PAGE).min(last),
        KeyCode::PageUp => sel.saturating_sub(PAGE),
        KeyCode::Char('g') | KeyCode::Home => 0,
        KeyCode::Char('G') | KeyCode::End => last,
        _ => return None,
    })
}

/// A scroll of text `len` lines long; `back` 0 follows its end.
fn scrolled(scroll: &mut Scroll, len: usize, code: KeyCode) -> bool {
    let most = len.saturating_sub(1);
    scroll.back = match code {
        KeyCode::Char('k') | KeyCode::Up => (scroll.back + 1).min(most),
        KeyCode::Char('j') | KeyCode::Down => scroll.back.saturating_sub(1),
        KeyCode::PageUp => (scroll.back + PAGE).min(most),
        KeyCode::PageDown => scroll.back.saturating_sub(PAGE),
        KeyCode::Char('g') | KeyCode::Home => most,
        KeyCode::Char('G') | KeyCode::End => 0,
        _ => return false,
    };
    true
}

/// A key on the Runs tab; then what the detail pane needs read for what is selected now
/// (the selected agent's diff or check, whatever moved).
fn runs_key(model: &mut Model, key: KeyEvent) -> Vec<Action> {
    let mut actions = runs_pane_key(model, key);
    actions.extend(model.detail_wanted());
    actions
}

fn runs_pane_key(model: &mut Model, key: KeyEvent) -> Vec<Action> {
    let code = key.code;
    if model.pane == Pane::Detail {
        let len = match model.detail {
            Detail::Transcript => model
                .followed
                .agents
                .get(&model.agent_sel)
                .map_or(0, |l| l.len()),
            Detail::Diff => match &model.diff {
                Some((_, _, Ok(lines))) => lines.len(),
                _ => 0,
            },
            Detail::Check => model.check.as_ref().map_or(0, |c| c.lines.len()),
        };
        let scroll = match model.detail {
            Detail::Transcript => &mut model.transcript_scroll,
            Detail::Diff => &mut model.diff_scroll,
            Detail::Check => &mut model.check_scroll,
        };
        if scrolled(scroll, len, code) {
            return Vec::new();
        }
    }
    match code {
        KeyCode::Enter => {
            model.pane = match model.pane {
                Pane::Runs if model.selected_run().is_some() => Pane::Agents,
                Pane::Agents => {
                    model.detail = Detail::Transcript;
                    Pane::Detail
                }
                pane => pane,
            };
            return Vec::new();
        }
        KeyCode::Esc => {
            model.pane = match model.pane {
                Pane::Detail => Pane::Agents,
                _ => Pane::Runs,
            };
            return Vec::new();
        }
        KeyCode::Tab => {
            model.pane = match model.pane {
                Pane::Runs => Pane::Agents,
                Pane::Agents => Pane::Detail,
                Pane::Detail => Pane::Runs,
            };
            return Vec::new();
        }
        KeyCode::BackTab => {
            model.pane = match model.pane {
                Pane::Runs => Pane::Detail,
                Pane::Agents => Pane::Runs,
                Pane::Detail => Pane::Agents,
            };
            return Vec::new();
        }
        _ => {}
    }
    match model.pane {
        Pane::Runs => {
            let shown = model.shown_runs().len();
            if let Some(sel) = moved(model.run_sel, shown, code) {
                model.run_sel = sel;
                let mut actions = model.follow_selected();
                // Past the last run of the pages loaded: the next page.
                if sel + 1 >= shown
                    && let Some(cursor) = &model.runs_next
                {
                    actions.push(Action::MoreRuns(cursor.clone()));
                }
                return actions;
            }
        }
        Pane::Agents => {
            let agents = model.selected_run().map_or(0, |r| r.agents.len());
            if let Some(sel) = moved(model.agent_sel, agents, code) {
                if sel != model.agent_sel {
                    model.agent_sel = sel;
                    model.transcript_scroll = Scroll::default();
                }
                return Vec::new();
            }
        }
        Pane::Detail => {}
    }
    run_action(model, code)
}

/// The keys that act on the selected run, or on its selected agent once the agents pane
/// (or the detail) has the keys.
fn run_action(model: &mut Model, code: KeyCode) -> Vec<Action> {
    let Some(run) = model.selected_run() else {
        return Vec::new();
    };
    let id = run.id.clone();
    let count = run.agents.len();
    let on_agent = model.pane != Pane::Runs || count == 1;
    let agent = model.agent_sel.min(count.saturating_sub(1));
    let over = run.state.is_over();
    let label = run
        .agents
        .get(agent)
        .map(|a| a.label.clone())
        .unwrap_or_default();
    match code {
        KeyCode::Char('l') => {
            model.detail = Detail::Transcript;
            model.pane = Pane::Detail;
            Vec::new()
        }
        KeyCode::Char('d') => {
            model.detail = Detail::Diff;
            model.pane = Pane::Detail;
            Vec::new()
        }
        KeyCode::Char('v') => {
            model.detail = Detail::Check;
            model.pane = Pane::Detail;
            Vec::new()
        }
        KeyCode::Char('p') => {
            if agent >= count {
                return Vec::new();
            }
            // berth-run's rules, said before anything is done: why it cannot be picked at
            // all, or the evidence against it, and a winner already.
            let pickable = berth_run::pickable(run, agent);
            let winner = berth_run::merged(run).into_iter().find(|w| *w != agent);
            if !over {
                model.status = Some((
                    format!(
                        "run {id} is still running: pick an agent once it is over (s stops it)"
                    ),
                    true,
                ));
                return Vec::new();
            }
            if let Some(closed) = pickable.closed {
                model.status = Some((
                    format!("agent {} cannot be picked: {closed}", agent + 1),
                    true,
                ));
                return Vec::new();
            }
            model.overlay = Some(Overlay::Pick(PickAsked {
                run: id,
                agent,
                label,
                refusal: pickable.refusal,
                winner,
                force: false,
                also: false,
            }));
            Vec::new()
        }
        KeyCode::Char('x') => ask_discard(model, id, on_agent.then_some(agent), &label),
        KeyCode::Char('s') => vec![Action::Stop {
            run: id,
            agent: (model.pane != Pane::Runs).then_some(agent),
        }],
        KeyCode::Char('r') => vec![Action::Resume(id)],
        KeyCode::Char('L') => toggle_land(model, agent, on_agent),
        KeyCode::Char(key @ ('t' | 'i')) => {
            if !on_agent {
                model.status = Some((
                    format!("this run has several agents: Enter, choose one, then {key}"),
                    true,
                ));
                return Vec::new();
            }
            model.overlay = Some(Overlay::Input {
                purpose: Input::Tell { run: id, agent },
                text: String::new(),
            });
            Vec::new()
        }
        _ => Vec::new(),
    }
}

/// Asks before dropping the work of one agent of a run, or of every agent not merged.
fn ask_discard(
    model: &mut Model,
    id: berth_run::RunId,
    agent: Option<usize>,
    label: &str,
) -> Vec<Action> {
    let question = match agent {
        Some(i) => format!("Drop the work of agent {} ({label}) of run {id}?", i + 1),
        None => format!("Drop the work of every agent of run {id} not merged?"),
    };
    model.overlay = Some(Overlay::Confirm {
        question,
        action: Action::Discard { run: id, agent },
    });
    Vec::new()
}

/// Puts the selected agent on the land queue, or takes it off: one agent, not a whole run.
fn toggle_land(model: &mut Model, agent: usize, on_agent: bool) -> Vec<Action> {
    if !on_agent {
        model.status = Some((
            "this run has several agents: Enter, choose one, then L".to_owned(),
            true,
        ));
        return Vec::new();
    }
    if let Some(run) = model.selected_run().cloned() {
        model.status = Some(model.land.toggle(&run, agent));
    }
    Vec::new()
}

/// A key in the pick dialog: y picks when nothing stands against it; F forces it past
/// the evidence and A merges it beside a winner, each said on its own, and the pick is
/// asked for once every key its reasons need was given.
fn pick_key(model: &mut Model, mut asked: PickAsked, code: KeyCode) -> Vec<Action> {
    match code {
        KeyCode::Char('y') | KeyCode::Char('Y') if asked.ready() => return vec![asked.action()],
        KeyCode::Char('F') if asked.refusal.is_some() => asked.force = true,
        KeyCode::Char('A') if asked.winner.is_some() => asked.also = true,
        KeyCode::Char('n') | KeyCode::Esc => {
            model.status = Some(("left as it was".to_owned(), false));
            return Vec::new();
        }
        _ => {}
    }
    if asked.ready() && (asked.force || asked.also) {
        return vec![asked.action()];
    }
    model.overlay = Some(Overlay::Pick(asked));
    Vec::new()
}

fn workspaces_key(model: &mut Model, key: KeyEvent) -> Vec<Action> {
    let shown = model.shown_workspaces().len();
    if let Some(sel) = moved(model.ws_sel, shown, key.code) {
        model.ws_sel = sel;
        return model.workspace_status_wanted();
    }
    Vec::new()
}

fn sessions_key(model: &mut Model, key: KeyEvent) -> Vec<Action> {
    if let Some((_, lines)) = &model.session_open {
        let len = lines.as_ref().map_or(0, |l| l.len());
        if key.code == KeyCode::Esc {
            model.session_open = None;
            return Vec::new();
        }
        scrolled(&mut model.session_scroll, len, key.code);
        return Vec::new();
    }
    let shown = model.shown_sessions().len();
    if let Some(sel) = moved(model.ses_sel, shown, key.code) {
        model.ses_sel = sel;
        return Vec::new();
    }
    match (key.code, model.selected_session()) {
        (KeyCode::Enter | KeyCode::Char('l'), Some(s)) => {
            vec![Action::LoadSessionTranscript(s.id.to_string())]
        }
        _ => Vec::new(),
    }
}

/// A key while a line is typed: Enter gives it, Esc drops it.
fn typed(model: &mut Model, purpose: Input, mut text: String, key: KeyEvent) -> Vec<Action> {
    match key.code {
        KeyCode::Esc => {
            if purpose == Input::Filter {
                model.filters.remove(model.tab.title());
            }
            Vec::new()
        }
        KeyCode::Enter => match purpose {
            Input::Filter => {
                model.filters.insert(model.tab.title(), text);
                model.run_sel = 0;
                model.ws_sel = 0;
                model.ses_sel = 0;
                let mut actions = model.follow_selected();
                actions.extend(model.workspace_status_wanted());
                actions
            }
            Input::Tell { run, agent } if !text.trim().is_empty() => {
                vec![Action::Tell { run, agent, text }]
            }
            Input::Tell { .. } => Vec::new(),
        },
        code => {
            edit(&mut text, code);
            if purpose == Input::Filter {
                // The list narrows as it is typed.
                model.filters.insert(model.tab.title(), text.clone());
                model.run_sel = 0;
                model.ws_sel = 0;
                model.ses_sel = 0;
            }
            model.overlay = Some(Overlay::Input { purpose, text });
            Vec::new()
        }
    }
}

/// The new-run form's fields, in the order Tab moves through them.
pub const FORM_FIELDS: [&str; 4] = ["Task", "Agents", "Check", "Allow"];

fn form_key(model: &mut Model, mut form: NewRun, mut field: usize, key: KeyEvent) -> Vec<Action> {
    match key.code {
        KeyCode::Esc => return Vec::new(),
        KeyCode::Enter if !form.task.trim().is_empty() => return vec![Action::Start(form)],
        KeyCode::Enter => {
            model.status = Some(("a run needs a task".to_owned(), true));
            field = 0;
        }
        KeyCode::Tab | KeyCode::Down => field = (field + 1) % FORM_FIELDS.len(),
        KeyCode::BackTab | KeyCode::Up => {
            field = (field + FORM_FIELDS.len() - 1) % FORM_FIELDS.len()
        }
        code => {
            let text = match field {
                0 => &mut form.task,
                1 => &mut form.agents,
                2 => &mut form.check,
                _ => &mut form.allow,
            };
            edit(text, code);
        }
    }
    model.overlay = Some(Overlay::NewRun { form, field });
    Vec::new()
}

fn edit(text: &mut String, code: KeyCode) {
    match code {
        KeyCode::Backspace => {
            text.pop();
        }
        KeyCode::Char(c) => text.push(c),
        _ => {}
    }
}
