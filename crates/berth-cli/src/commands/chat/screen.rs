//! How `berth chat` shows a conversation on a terminal: the answer as it streams, thoughts and
//! tool activity set apart from it (dimmed, or with a prefix when there is no colour), and the
//! lines of the chat itself (errors, permission questions, command output). What the model
//! or a tool wrote is shown through berth-core's `shown`: its control characters as escapes,
//! never sent to the terminal; only the screen's own colours are.

use std::io::{self, Write};

use berth_agent::{PlanStep, StepStatus};
use serde_json::Value;

/// A plan as a checklist: `plan:`, then a line per step, `[x]` done, `[>]` under way, `[ ]` to
/// do.
pub fn plan_text(steps: &[PlanStep]) -> String {
    let mut text = String::from("plan:");
    for s in steps {
        let mark = match s.status {
            StepStatus::Completed => "[x]",
            StepStatus::InProgress => "[>]",
            StepStatus::Pending => "[ ]",
        };
        text.push_str(&format!("\n  {mark} {}", s.step));
    }
    text
}

/// Tool arguments are shown on one line, cut after this many characters.
const ARGUMENTS_SHOWN: usize = 160;

/// What was written last, to know where a new kind of output starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    Nothing,
    Text,
    Thought,
}

pub struct Screen<W: Write> {
    out: W,
    color: bool,
    last: Last,
    /// Whether the cursor is at the start of a line.
    line_start: bool,
}

impl<W: Write> Screen<W> {
    /// `color`: dim and colour with ANSI codes; without it, plain text with prefixes.
    pub fn new(out: W, color: bool) -> Screen<W> {
        Screen {
            out,
            color,
            last: Last::Nothing,
            line_start: true,
        }
    }

    /// A piece of the answer, as it streams.
    pub fn text(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        if self.last == Last::Thought {
            self.end_line()?;
        }
        self.last = Last::Text;
        self.write(&crate::render::lines(text))
    }

    /// A piece of the model's reasoning: dimmed, or after `thinking: ` when plain.
    pub fn thought(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        if self.last != Last::Thought {
            self.end_line()?;
            self.last = Last::Thought;
            if !self.color {
                self.write("thinking: ")?;
            }
        }
        let text = crate::render::lines(text);
        if self.color {
            self.write(&format!("\x1b[2m{text}\x1b[0m"))
        } else {
            self.write(&text)
        }
    }

    /// The model called a tool: `→ name {arguments}`, dimmed.
    pub fn tool_started(&mut self, name: &str, arguments: &Value) -> io::Result<()> {
        let shown = match arguments {
            Value::Null => String::new(),
            v => format!(" {}", cut(&v.to_string(), ARGUMENTS_SHOWN)),
        };
        self.activity(&format!("→ {name}{shown}"))
    }

    /// A tool finished: `✓ name` with its one-line output, or `✗ name: why`.
    pub fn tool_finished(&mut self, name: &str, output: &str, is_error: bool) -> io::Result<()> {
        let first = output.trim().lines().next().unwrap_or("");
        let line = if is_error {
            format!("✗ {name}: {}", cut(first, ARGUMENTS_SHOWN))
        } else if output.trim().lines().count() == 1 {
            format!("✓ {name}: {}", cut(first, ARGUMENTS_SHOWN))
        } else {
            format!("✓ {name}")
        };
        self.activity(&line)
    }

    /// The model's plan, as a checklist.
    pub fn plan(&mut self, steps: &[PlanStep]) -> io::Result<()> {
        self.say(&plan_text(steps))
    }

    /// A line about the turn rather than of it (a tool call, a notice), dimmed.
    pub fn activity(&mut self, line: &str) -> io::Result<()> {
        self.end_line()?;
        let line = self.paint("2", &crate::render::lines(line));
        self.write(&format!("{line}\n"))
    }

    /// Text of the chat itself (command output, a question), its control characters shown as
    /// escapes.
    pub fn say(&mut self, text: &str) -> io::Result<()> {
        self.end_line()?;
        self.write(&crate::render::lines(text))?;
        if !text.is_empty() && !text.ends_with('\n') {
            self.write("\n")?;
        }
        Ok(())
    }

    /// `error: message`, in red.
    pub fn error(&mut self, message: &str) -> io::Result<()> {
        self.end_line()?;
        let line = self.paint("31", &format!("error: {}", crate::render::lines(message)));
        self.write(&format!("{line}\n"))
    }

    /// What a tool asks to do (a command line, a file and its diff), diff lines coloured.
    pub fn request(&mut self, description: &str) -> io::Result<()> {
        self.end_line()?;
        for line in description.lines() {
            let code = if line.starts_with("+++") || line.starts_with("---") {
                "1"
            } else if line.starts_with('+') {
                "32"
            } else if line.starts_with('-') {
                "31"
            } else if line.starts_with("@@") {
                "36"
            } else {
                ""
            };
            let line = self.paint(code, &crate::render::lines(line));
            self.write(&format!("{line}\n"))?;
        }
        Ok(())
    }

    /// Ends the line in progress, if any: before a prompt or another kind of output.
    pub fn end_line(&mut self) -> io::Result<()> {
        if !self.line_start {
            self.write("\n")?;
        }
        self.last = Last::Nothing;
        Ok(())
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color && !code.is_empty() {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    fn write(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.out.write_all(text.as_bytes())?;
        self.out.flush()?;
        self.line_start = text.ends_with('\n');
        Ok(())
    }
}

/// `text` on one line, at most `max` characters (then `…`).
fn cut(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one_line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shown(
        color: bool,
        draw: impl FnOnce(&mut Screen<&mut Vec<u8>>) -> io::Result<()>,
    ) -> String {
        let mut out = Vec::new();
        let mut screen = Screen::new(&mut out, color);
        draw(&mut screen).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn plain_output_sets_thoughts_and_tools_apart_with_prefixes() {
        let out = shown(false, |s| {
            s.thought("Let me ")?;
            s.thought("look.")?;
            s.tool_started("read_file", &json!({"path": "a.rs"}))?;
            s.tool_finished("read_file", "line 1\nline 2\n", false)?;
            s.text("It is ")?;
            s.text("fine.")?;
            s.end_line()
        });
        assert_eq!(
            out,
            "thinking: Let me look.\n→ read_file {\"path\":\"a.rs\"}\n✓ read_file\nIt is fine.\n"
        );
        assert!(!out.contains('\x1b'));
    }

    #[test]
    fn colour_dims_thoughts_and_activity_but_not_the_answer() {
        let out = shown(true, |s| {
            s.thought("hmm")?;
            s.text("Answer")?;
            s.tool_finished("write_file", "Created 'a' (1 bytes, 1 lines)", false)?;
            s.tool_finished("run_command", "exit status 1\nboom", true)
        });
        assert_eq!(
            out,
            "\x1b[2mhmm\x1b[0m\nAnswer\n\x1b[2m✓ write_file: Created 'a' (1 bytes, 1 lines)\x1b[0m\n\
             \x1b[2m✗ run_command: exit status 1\x1b[0m\n"
        );
    }

    #[test]
    fn lines_start_on_a_line_of_their_own() {
        let out = shown(false, |s| {
            s.text("partial")?;
            s.error("it broke")?;
            s.say("next")?;
            s.text("done\n")?;
            s.end_line()
        });
        assert_eq!(out, "partial\nerror: it broke\nnext\ndone\n");
    }

    #[test]
    fn long_arguments_are_cut_to_one_line() {
        let long = "x".repeat(500);
        let out = shown(false, |s| {
            s.tool_started("write_file", &json!({"content": format!("a\nb{long}")}))
        });
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(out.trim_end().ends_with('…'), "{out}");
        assert!(out.chars().count() < ARGUMENTS_SHOWN + 20, "{out}");
    }

    #[test]
    fn a_diff_is_coloured_by_line() {
        let diff = "edit_file 'a'\n--- a\n+++ a\n@@ -1 +1 @@\n-old\n+new\n";
        assert_eq!(shown(false, |s| s.request(diff)), diff);
        let out = shown(true, |s| s.request(diff));
        assert!(out.contains("\x1b[31m-old\x1b[0m"), "{out:?}");
        assert!(out.contains("\x1b[32m+new\x1b[0m"), "{out:?}");
        assert!(out.starts_with("edit_file 'a'\n"), "{out:?}");
    }

    #[test]
    fn the_models_escapes_are_shown_and_only_the_screens_own_colours_are_sent() {
        let evil = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\u{9b}1A\u{202e}";
        let out = shown(true, |s| {
            s.text(&format!("answer {evil}\n"))?;
            s.thought(evil)?;
            s.request(&format!("+added {evil}"))?;
            s.error(evil)
        });
        assert!(out.contains("answer \\x1b]52;c;ZXZpbA==\\x07\\x1b[2J\\u{9b}1A\\u{202e}\n"));
        for sent in ["\x1b]", "\x1b[2J", "\u{9b}", "\u{202e}", "\x07"] {
            assert!(
                !out.contains(sent),
                "{sent:?} reached the terminal: {out:?}"
            );
        }
        assert!(out.contains("\x1b[32m+added \\x1b]52"), "{out:?}");
    }
}
