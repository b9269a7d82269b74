//! What the dashboard shows as scrolling text: an agent's transcript folded from its run's
//! events, a session's transcript, and a workspace's diff. Each is a list of styled lines
//! built once as the data arrives, so a frame only slices and wraps the lines it shows, and a
//! transcript of 50,000 lines costs a frame no more than one of 50.

use berth_ops::WorktreeDiff;
use berth_run::{CheckResult, RunEvent};
use unicode_width::UnicodeWidthChar;

/// What a line is, which decides its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The agent's answer, or a message of a session.
    Text,
    /// A heading: who speaks, a file of a diff, a run's start.
    Heading,
    /// A tool call, folded to one line.
    Tool,
    /// A tool call that failed, a refusal, a failed check.
    Bad,
    /// A passed check, an added line.
    Good,
    /// A question waiting for a person.
    Asked,
    /// Something beside the answer: a notice, an end, a hunk header.
    Quiet,
    /// A removed line of a diff.
    Removed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub kind: Kind,
    pub text: String,
}

/// Lines that grow at the end: whole lines, and the one still being written (an answer
/// streams a piece at a time).
#[derive(Debug, Default, Clone)]
pub struct Lines {
    whole: Vec<Line>,
    open: Option<Line>,
}

impl Lines {
    pub fn len(&self) -> usize {
        self.whole.len() + usize::from(self.open.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> Option<&Line> {
        self.whole.get(i).or_else(|| {
            (i == self.whole.len())
                .then_some(self.open.as_ref())
                .flatten()
        })
    }

    /// Every line, in order; for tests and searches.
    pub fn iter(&self) -> impl Iterator<Item = &Line> {
        self.whole.iter().chain(self.open.iter())
    }

    /// A whole line of its own, after whatever was being written.
    pub fn push(&mut self, kind: Kind, text: impl Into<String>) {
        self.close();
        let text: String = text.into();
        for part in text.split('\n') {
            self.whole.push(Line {
                kind,
                text: clean(part),
            });
        }
    }

    /// Streamed text: appended to the open line, each newline closing one.
    pub fn stream(&mut self, kind: Kind, text: &str) {
        let mut parts = text.split('\n');
        if let Some(first) = parts.next() {
            let open = self.open.get_or_insert_with(|| Line {
                kind,
                text: String::new(),
            });
            open.text.push_str(&clean(first));
        }
        for part in parts {
            self.close_always();
            self.open = Some(Line {
                kind,
                text: clean(part),
            });
        }
    }

    /// Ends the line being written, unless it is empty.
    fn close(&mut self) {
        if let Some(open) = self.open.take()
            && !open.text.is_empty()
        {
            self.whole.push(open);
        }
    }

    fn close_always(&mut self) {
        if let Some(open) = self.open.take() {
            self.whole.push(open);
        }
    }

    /// The last whole line of `kind` whose text is `text`, to restyle (a tool that failed).
    fn last_mut(&mut self, kind: Kind, text: &str) -> Option<&mut Line> {
        self.whole
            .iter_mut()
            .rev()
            .take(64)
            .find(|l| l.kind == kind && l.text == text)
    }
}

/// A line as the terminal may show it: a tab is a space, and every other control character
/// (an agent's escape sequence, a bidi override) is shown as its escape (berth-core's
/// `shown`), never sent.
fn clean(text: &str) -> String {
    let spaced = text.replace('\t', " ");
    berth_ops::shown::visible(&spaced, berth_ops::shown::Form::Line).into_owned()
}

/// Takes in one event of an agent: its answer streamed, each tool call one line, and what
/// else a person should see (a refusal, a question, its end, its check).
pub fn take_event(lines: &mut Lines, event: &RunEvent) {
    match event {
        RunEvent::Queued { max_agents, .. } => lines.push(
            Kind::Quiet,
            format!("· waits for a place ({max_agents} agents work at once)"),
        ),
        RunEvent::Started { workspace_name, .. } => {
            lines.push(Kind::Heading, format!("● started in {workspace_name}"))
        }
        RunEvent::Text { text, .. } => lines.stream(Kind::Text, text),
        RunEvent::Tool { name, .. } => lines.push(Kind::Tool, tool_line(name)),
        RunEvent::ToolDone {
            name,
            is_error: true,
            ..
        } => {
            let line = tool_line(name);
            match lines.last_mut(Kind::Tool, &line) {
                Some(l) => {
                    l.kind = Kind::Bad;
                    l.text = format!("{line}  failed");
                }
                None => lines.push(Kind::Bad, format!("{line}  failed")),
            }
        }
        RunEvent::ToolDone { .. } | RunEvent::AgentSession { .. } | RunEvent::Summary { .. } => {}
        RunEvent::Refused {
            tool, description, ..
        } => lines.push(Kind::Bad, format!("⊘ refused {tool}: {description}")),
        RunEvent::Notice { message, .. } => lines.push(Kind::Quiet, format!("· {message}")),
        RunEvent::Told { text, .. } => told(lines, text),
        RunEvent::Asked {
            tool, description, ..
        } => lines.push(
            Kind::Asked,
            format!("? waits for you: may it {tool}? {description}"),
        ),
        RunEvent::Answered { answer, .. } => {
            lines.push(Kind::Quiet, format!("· answered: {answer}"))
        }
        RunEvent::Ended {
            state,
            stop,
            message,
            input_tokens,
            output_tokens,
            ..
        } => {
            let mut text = format!(
                "■ {} ({stop}), {} tokens",
                state.as_str(),
                tokens(input_tokens + output_tokens)
            );
            if let Some(m) = message {
                text.push_str(": ");
                text.push_str(m);
            }
            let kind = match state {
                berth_run::AgentState::Done => Kind::Quiet,
                _ => Kind::Bad,
            };
            lines.push(kind, text);
        }
        RunEvent::Checked { check, .. } => {
            let kind = match (check.not_run, check.passed) {
                (true, _) => Kind::Quiet,
                (false, true) => Kind::Good,
                (false, false) => Kind::Bad,
            };
            lines.push(
                kind,
                format!("check {}: {}", check.verdict(), check.command),
            );
        }
        RunEvent::Pushed { branch, .. } => lines.push(Kind::Quiet, format!("↑ pushed {branch}")),
    }
}

/// A text told to the agent (from the dashboard, the CLI or the web page): whole, as it was
/// typed.
pub fn told(lines: &mut Lines, text: &str) {
    lines.push(Kind::Heading, format!("› told: {text}"));
}

/// A check, as the check pane shows it: how it went and its command, then its output (the
/// whole kept output, or the record's last lines after `note`, which says so).
pub fn of_check(check: &CheckResult, output: Option<&str>, note: Option<&str>) -> Lines {
    let mut lines = Lines::default();
    let kind = match (check.passed, check.not_run) {
        (true, _) => Kind::Good,
        (false, true) => Kind::Quiet,
        (false, false) => Kind::Bad,
    };
    lines.push(
        kind,
        format!("check {}: {}", check.described(), check.command),
    );
    if check.not_run {
        return lines;
    }
    if let Some(note) = note {
        lines.push(Kind::Quiet, format!("· {note}"));
    }
    match output.map(str::trim_end) {
        Some("") => lines.push(Kind::Quiet, "· it printed nothing"),
        Some(out) => lines.push(Kind::Text, out),
        // A passing check's output is kept where it ran, and the record quotes none.
        None if check.passed => {}
        None => lines.push(Kind::Quiet, "· its output is not kept here"),
    }
    lines
}

/// What agent `agent` said last before it asked `question`: the pieces of its answer just
/// before the call it asks about, over the tool calls of the same turn (as many as the
/// model made), up to what it did before (an answer, a question, its start).
pub fn said_before(events: &[RunEvent], agent: usize, question: &str) -> String {
    let asked = events
        .iter()
        .position(|e| {
            matches!(e, RunEvent::Asked { agent: a, question: q, .. } if *a == agent && q == question)
        })
        .unwrap_or(events.len());
    let mut pieces = Vec::new();
    for event in events[..asked].iter().rev() {
        if event.agent() != Some(agent) {
            continue;
        }
        match event {
            RunEvent::Text { text, .. } => pieces.push(text.as_str()),
            RunEvent::Tool { .. } | RunEvent::ToolDone { .. } | RunEvent::Notice { .. }
                if pieces.is_empty() => {}
            _ => break,
        }
    }
    pieces.reverse();
    let said: String = pieces.concat();
    said.trim()
        .lines()
        .map(clean)
        .collect::<Vec<_>>()
        .join("\n")
}

fn tool_line(name: &str) -> String {
    format!("▸ {name}")
}

/// `1234` as `1.2k`.
pub fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// A session's transcript: who speaks as a heading, then what they said; a tool call's
/// record folded to its first line.
pub fn of_messages(messages: &[berth_ops::Message]) -> Lines {
    let mut lines = Lines::default();
    for m in messages {
        match m.role {
            berth_ops::Role::Tool => {
                let first = m.content.lines().next().unwrap_or("");
                lines.push(Kind::Tool, format!("▸ {first}"));
            }
            role => {
                lines.push(Kind::Heading, role.as_str());
                lines.push(Kind::Text, m.content.trim_end());
                lines.push(Kind::Text, "");
            }
        }
    }
    lines
}

/// What an agent's work conflicts with, a line each (none when it merges cleanly with all it
/// was tried against); why it could not be judged, when there was work to judge. Its files
/// named as git quotes them.
pub fn of_conflicts(seen: &berth_run::AgentForesight) -> Lines {
    let mut lines = Lines::default();
    for c in &seen.with {
        lines.push(
            Kind::Bad,
            format!("conflicts with {}: {}", c.against, c.shown_files()),
        );
    }
    for u in &seen.unknown {
        lines.push(
            Kind::Quiet,
            format!(
                "not compared with run {} agent {}: {}",
                u.run, u.agent, u.why
            ),
        );
    }
    if let Some(u) = seen.unjudged.as_ref().filter(|u| u.reason.worth_saying()) {
        lines.push(Kind::Quiet, format!("conflicts not looked for: {}", u.why));
    }
    lines
}

/// A diff: one line per file with its counts, then the patch, each line coloured by what
/// it does.
pub fn of_diff(diff: &WorktreeDiff) -> Lines {
    let mut lines = Lines::default();
    let (added, removed) = diff.totals();
    lines.push(
        Kind::Heading,
        format!(
            "{} file(s) changed against {}, +{added} -{removed}",
            diff.files.len(),
            diff.base
        ),
    );
    for f in &diff.files {
        let counts = match (f.added, f.removed) {
            (Some(a), Some(r)) => format!("+{a} -{r}"),
            _ => "binary".to_owned(),
        };
        lines.push(
            Kind::Text,
            format!(
                "  {:<9} {}  {counts}",
                f.status,
                berth_ops::shown::visible(&f.path, berth_ops::shown::Form::FileName)
            ),
        );
    }
    lines.push(Kind::Text, "");
    for l in diff.patch.as_deref().unwrap_or("").lines() {
        let kind = if l.starts_with("diff --git") {
            Kind::Heading
        } else if l.starts_with("+++") || l.starts_with("---") || l.starts_with("index ") {
            Kind::Quiet
        } else if l.starts_with("@@") {
            Kind::Asked
        } else if l.starts_with('+') {
            Kind::Good
        } else if l.starts_with('-') {
            Kind::Removed
        } else {
            Kind::Text
        };
        lines.push(kind, l);
    }
    lines
}

/// The rows that show `lines` in a box `width` wide and `height` high, ending `back` lines
/// before the last one (or, near the top, starting with the first): each line cut into rows
/// of `width` columns, and only the lines that show are looked at.
pub fn window(lines: &Lines, width: usize, height: usize, back: usize) -> Vec<(Kind, String)> {
    let width = width.max(1);
    let mut rows: Vec<(Kind, String)> = Vec::with_capacity(height);
    let end = lines.len().saturating_sub(back);
    let mut i = end;
    while i > 0 && rows.len() < height {
        i -= 1;
        let Some(line) = lines.get(i) else { break };
        let mut wrapped = wrap(&line.text, width);
        while let Some(row) = wrapped.pop() {
            if rows.len() == height {
                break;
            }
            rows.push((line.kind, row));
        }
    }
    rows.reverse();
    // Scrolled to the top: the lines after fill the box, as a page does.
    let mut next = end;
    while rows.len() < height && next < lines.len() {
        let Some(line) = lines.get(next) else { break };
        for row in wrap(&line.text, width) {
            if rows.len() == height {
                break;
            }
            rows.push((line.kind, row));
        }
        next += 1;
    }
    rows
}

/// `text` cut into rows at most `width` columns wide (by the characters' display width).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut rows = vec![String::new()];
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            rows.push(String::new());
            used = 0;
        }
        if let Some(row) = rows.last_mut() {
            row.push(c);
        }
        used += w;
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_text_makes_lines_and_a_tool_closes_the_open_one() {
        let mut l = Lines::default();
        l.stream(Kind::Text, "Hello, ");
        l.stream(Kind::Text, "world\nsecond");
        l.push(Kind::Tool, "▸ read_file");
        l.stream(Kind::Text, "after\x1b[2J");
        let texts: Vec<&str> = l.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            texts,
            ["Hello, world", "second", "▸ read_file", "after\\x1b[2J"]
        );
    }

    #[test]
    fn what_was_said_before_a_question_is_the_last_answer_over_its_tool_calls() {
        let text = |agent, t: &str| RunEvent::Text {
            agent,
            text: t.to_owned(),
        };
        let asked = |question: &str| RunEvent::Asked {
            agent: 0,
            question: question.to_owned(),
            tool: "write_file".to_owned(),
            description: "write notes.txt".to_owned(),
        };
        let done = RunEvent::ToolDone {
            agent: 0,
            name: "read_file".to_owned(),
            is_error: false,
        };
        let events = vec![
            text(0, "An earlier answer."),
            asked("q-1"),
            RunEvent::Answered {
                agent: 0,
                question: "q-1".to_owned(),
                answer: "allow".to_owned(),
            },
            text(0, "I read it; "),
            text(1, "another agent's words"),
            text(0, "now I will\x1b[2J write\nthe notes."),
            done,
            asked("q-2"),
            text(0, "After."),
        ];
        assert_eq!(
            said_before(&events, 0, "q-2"),
            "I read it; now I will\\x1b[2J write\nthe notes."
        );
        assert_eq!(said_before(&events, 0, "q-1"), "An earlier answer.");
        assert_eq!(said_before(&events[1..], 0, "q-1"), "");
    }

    #[test]
    fn a_window_wraps_only_what_shows_and_ends_where_asked() {
        let mut l = Lines::default();
        for i in 0..1000 {
            l.push(Kind::Text, format!("line {i}"));
        }
        l.push(Kind::Text, "x".repeat(25));
        let rows = window(&l, 10, 4, 0);
        assert_eq!(
            rows.iter().map(|r| r.1.as_str()).collect::<Vec<_>>(),
            ["line 999", "xxxxxxxxxx", "xxxxxxxxxx", "xxxxx"]
        );
        let rows = window(&l, 10, 2, 1);
        assert_eq!(rows[1].1, "line 999");
        assert_eq!(rows[0].1, "line 998");
    }
}
