//! A file of tasks (`berth run --tasks FILE`), read into one task per run: one per line, or,
//! when the file is a Markdown list, one per top-level list item with the more-indented
//! lines under it. Pure: the text in, the tasks out, with the line each began on.
//!
//! The rule is what a person reading the rendered Markdown sees as the list's items:
//! - a file with a list item at the start of a line (`- `, `* `, `+ `, `1. `, `1) `, up to
//!   three spaces in) is a Markdown list; any other file has one task per non-blank line;
//! - an item's task is its text (a task-list checkbox, `[ ]` or `[x]`, taken off) and every
//!   following line more indented than its marker, blank lines between them kept, the
//!   common indentation taken off (a nested list keeps its shape); a line directly under the
//!   item's text that is not indented continues it, as Markdown's lazy continuation does;
//! - what is not in an item is no task: the lines before the first (a title, a paragraph),
//!   headings, paragraphs after a blank line, top-level fenced code blocks;
//! - a heading (`# Title`) is never a task, in either form;
//! - an item or line with no text is skipped, as a blank line is.

use berth_ops::ErrorKind;

/// The most tasks one file may hold: each is a run, and every run starts at once.
pub const TASKS_MAX: usize = 100;

/// One task of a file, in the file's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileTask {
    /// The line it begins on, counted from 1.
    pub line: usize,
    pub text: String,
}

/// Why a file of tasks gives no runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TasksError {
    #[error("it holds no task: write one task per line, or a Markdown list with one task per item")]
    NoTasks,
    #[error(
        "it holds {count} tasks, and a batch starts at most {TASKS_MAX} runs at once: split it into several files"
    )]
    TooMany { count: usize },
}

impl TasksError {
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Invalid
    }
}

/// The tasks of `text`, a file's whole content: refused when it holds none, or more than
/// [`TASKS_MAX`].
pub fn parse_tasks(text: &str) -> Result<Vec<FileTask>, TasksError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.lines().collect();
    let is_list = lines.iter().any(|l| {
        let (indent, rest) = indentation(l);
        indent <= 3 && list_item(rest).is_some()
    });
    let tasks: Vec<FileTask> = match is_list {
        true => list_items(&lines),
        false => one_per_line(&lines),
    }
    .into_iter()
    .filter(|t| !t.text.trim().is_empty())
    .collect();
    match tasks.len() {
        0 => Err(TasksError::NoTasks),
        count if count > TASKS_MAX => Err(TasksError::TooMany { count }),
        _ => Ok(tasks),
    }
}

/// Every non-blank line that is not a heading, trimmed.
fn one_per_line(lines: &[&str]) -> Vec<FileTask> {
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !is_heading(l))
        .map(|(i, l)| FileTask {
            line: i + 1,
            text: l.trim().to_owned(),
        })
        .collect()
}

/// An item being read: where it began, its marker's indentation, its first line's text,
/// and the lines under it (their indentation, `None` for a lazy continuation, and text).
struct Item<'a> {
    line: usize,
    indent: usize,
    first: &'a str,
    under: Vec<(Option<usize>, &'a str)>,
    /// Whether a line that is not indented would continue its last paragraph.
    lazy: bool,
}

impl Item<'_> {
    fn task(self) -> FileTask {
        let mut under = self.under;
        while under.last().is_some_and(|(_, text)| text.is_empty()) {
            under.pop();
        }
        let common = under
            .iter()
            .filter(|(_, text)| !text.is_empty())
            .filter_map(|(indent, _)| *indent)
            .min()
            .unwrap_or(0);
        let mut text = self.first.trim().to_owned();
        for (indent, line) in under {
            text.push('\n');
            if !line.is_empty() {
                let extra = indent.map_or(0, |i| i - common);
                text.extend(std::iter::repeat_n(' ', extra));
                text.push_str(line.trim_end());
            }
        }
        FileTask {
            line: self.line,
            text: text.trim().to_owned(),
        }
    }
}

/// The top-level items of a Markdown list, as the module's rule reads them.
fn list_items(lines: &[&str]) -> Vec<FileTask> {
    let mut tasks = Vec::new();
    let mut current: Option<Item> = None;
    // The fence that opened a top-level code block, while in one.
    let mut fence: Option<Fence> = None;
    for (i, raw) in lines.iter().enumerate() {
        let (indent, rest) = indentation(raw);
        if let Some(open) = &fence {
            if indent <= 3 && open.closed_by(rest) {
                fence = None;
            }
            continue;
        }
        if rest.trim().is_empty() {
            if let Some(item) = &mut current {
                item.under.push((Some(indent), ""));
                item.lazy = false;
            }
            continue;
        }
        if let Some(item) = &mut current
            && indent > item.indent
        {
            item.under.push((Some(indent), rest));
            item.lazy = true;
            continue;
        }
        if indent <= 3
            && let Some(text) = list_item(rest)
        {
            tasks.extend(current.take().map(Item::task));
            current = Some(Item {
                line: i + 1,
                indent,
                first: text,
                under: Vec::new(),
                lazy: !text.trim().is_empty(),
            });
            continue;
        }
        let opens = (indent <= 3).then(|| Fence::opened_by(rest)).flatten();
        if opens.is_some() || is_heading(raw) {
            tasks.extend(current.take().map(Item::task));
            fence = opens;
            continue;
        }
        match &mut current {
            Some(item) if item.lazy => item.under.push((None, rest)),
            // A paragraph outside the list (after a blank line), or before it.
            _ => tasks.extend(current.take().map(Item::task)),
        }
    }
    tasks.extend(current.map(Item::task));
    tasks
}

/// A line's indentation (a tab to the next multiple of four columns) and the rest of it.
fn indentation(line: &str) -> (usize, &str) {
    let mut width = 0;
    for (at, c) in line.char_indices() {
        match c {
            ' ' => width += 1,
            '\t' => width += 4 - width % 4,
            _ => return (width, &line[at..]),
        }
    }
    (width, "")
}

/// The text of a list item's line (`rest`, its indentation taken off), its checkbox taken
/// off; `None` when the line is no item. A thematic break (`---`, `* * *`) is none.
fn list_item(rest: &str) -> Option<&str> {
    let after_marker = match rest.chars().next()? {
        '-' | '*' | '+' => &rest[1..],
        '0'..='9' => {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            let after = &rest[digits..];
            if digits > 9 || !(after.starts_with('.') || after.starts_with(')')) {
                return None;
            }
            &after[1..]
        }
        _ => return None,
    };
    if !(after_marker.is_empty() || after_marker.starts_with([' ', '\t'])) {
        return None;
    }
    if is_thematic_break(rest) {
        return None;
    }
    let text = after_marker.trim_start();
    let unchecked = ["[ ]", "[x]", "[X]"]
        .iter()
        .find_map(|box_| text.strip_prefix(box_))
        .filter(|after| after.is_empty() || after.starts_with([' ', '\t']));
    Some(unchecked.map_or(text, str::trim_start))
}

/// `---`, `***`, `- - -`: three or more of one of `-`, `*`, `_`, and spaces.
fn is_thematic_break(rest: &str) -> bool {
    let marks: Vec<char> = rest.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3 && ['-', '*', '_'].contains(&marks[0]) && marks.iter().all(|c| *c == marks[0])
}

/// `# Title` to `###### Title`, up to three spaces in.
fn is_heading(line: &str) -> bool {
    let (indent, rest) = indentation(line);
    let hashes = rest.bytes().take_while(|b| *b == b'#').count();
    indent <= 3
        && (1..=6).contains(&hashes)
        && (rest.len() == hashes || rest[hashes..].starts_with([' ', '\t']))
}

/// A fenced code block's opening: three or more backticks or tildes.
#[derive(Debug)]
struct Fence {
    mark: char,
    length: usize,
}

impl Fence {
    fn opened_by(rest: &str) -> Option<Fence> {
        let mark = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
        let length = rest.chars().take_while(|c| *c == mark).count();
        (length >= 3).then_some(Fence { mark, length })
    }

    fn closed_by(&self, rest: &str) -> bool {
        let length = rest.chars().take_while(|c| *c == self.mark).count();
        length >= self.length && rest[length * self.mark.len_utf8()..].trim().is_empty()
    }
}

impl berth_ops::Kinded for TasksError {
    fn kind(&self) -> berth_ops::ErrorKind {
        TasksError::kind(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<String> {
        parse_tasks(text)
            .unwrap()
            .into_iter()
            .map(|t| t.text)
            .collect()
    }

    fn lines(text: &str) -> Vec<usize> {
        parse_tasks(text)
            .unwrap()
            .into_iter()
            .map(|t| t.line)
            .collect()
    }

    #[test]
    fn a_plain_file_has_one_task_per_line_blank_lines_and_headings_skipped() {
        let file = "Fix the parser\n\n  Add a test for tabs  \r\n# not a task\n#123 is one\n";
        assert_eq!(
            texts(file),
            ["Fix the parser", "Add a test for tabs", "#123 is one"]
        );
        assert_eq!(lines(file), [1, 3, 5]);
        // A byte order mark is no part of the first task.
        assert_eq!(texts("\u{feff}One\nTwo"), ["One", "Two"]);
    }

    #[test]
    fn a_markdown_list_has_one_task_per_top_level_item_with_its_indented_lines() {
        let file = "\
# Sprint 12

These are for the agents.

- Fix the parser
  so that it reads tabs:

      code kept indented

  and says where it failed.
* Add a test
  - for tabs
    and spaces
  - for nothing
+ [ ] Tidy the docs
1. [x] Bump the version
2) Write the changelog
";
        assert_eq!(
            texts(file),
            [
                "Fix the parser\nso that it reads tabs:\n\n    code kept indented\n\nand says where it failed.",
                "Add a test\n- for tabs\n  and spaces\n- for nothing",
                "Tidy the docs",
                "Bump the version",
                "Write the changelog",
            ]
        );
        assert_eq!(lines(file), [5, 11, 15, 16, 17]);
    }

    #[test]
    fn what_is_outside_the_items_is_no_task() {
        let file = "\
Title line
- One
lazily continued
- Two

A paragraph after the list.
## Later
- Three
```
- not an item: code
```
---
- Four
";
        assert_eq!(
            texts(file),
            ["One\nlazily continued", "Two", "Three", "Four"]
        );
        // An item no more indented than the one before is the next (up to three spaces in);
        // more indented, it is nested; a tab counts to the next four columns.
        assert_eq!(texts("  - a\n - b\n\tnested c"), ["a", "b\nnested c"]);
        assert_eq!(texts("  - a\n   - b"), ["a\n- b"]);
    }

    #[test]
    fn markers_need_a_space_and_breaks_are_no_items() {
        // No list item here: one task per line, whatever their first characters.
        assert_eq!(
            texts("-5 degrees\n*bold* claim\n1.5 litres\n+1 for this"),
            ["-5 degrees", "*bold* claim", "1.5 litres", "+1 for this"]
        );
        assert_eq!(texts("- - -\n- real"), ["real"]);
        assert_eq!(texts("1234567890. nine digits at most\n- real"), ["real"]);
    }

    #[test]
    fn empty_items_are_skipped_and_an_empty_file_is_refused() {
        assert_eq!(texts("- [ ]\n-\n- real\n- [x]   "), ["real"]);
        assert_eq!(
            texts("-\n  under an empty marker"),
            ["under an empty marker"]
        );
        for empty in ["", "\n\n  \n", "# Only a title\n", "Intro\n\n- \n- [ ]\n"] {
            assert_eq!(parse_tasks(empty), Err(TasksError::NoTasks), "{empty:?}");
        }
        assert_eq!(TasksError::NoTasks.kind(), ErrorKind::Invalid);
    }

    #[test]
    fn more_than_the_most_tasks_is_refused() {
        let most = "task\n".repeat(TASKS_MAX);
        assert_eq!(parse_tasks(&most).unwrap().len(), TASKS_MAX);
        let more = format!("{most}- one more\n");
        // A list item makes it a list: one task, not 101.
        assert_eq!(texts(&more), ["one more"]);
        let more = format!("{most}one more\n");
        assert_eq!(
            parse_tasks(&more),
            Err(TasksError::TooMany {
                count: TASKS_MAX + 1
            })
        );
    }
}
