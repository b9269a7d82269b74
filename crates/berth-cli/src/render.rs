//! Output for people (aligned tables, short times) and for scripts (JSON). Commands build
//! rows or serializable values; this module decides how they look.

use std::io::{self, IsTerminal, Write};

use berth_core::shown::{self, Form};

use chrono::{DateTime, Utc};
use serde::Serialize;

/// Prints `value` as pretty JSON on stdout, through a 64 KiB buffer: stdout is line-buffered,
/// and pretty JSON of a big list would otherwise cost a syscall per line, while building the
/// whole document first (4 MB for 10,000 workspaces) costs its growth and a copy.
pub fn json<T: Serialize + ?Sized>(value: &T) -> io::Result<()> {
    let mut out = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, value).map_err(io::Error::other)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Prints an aligned table; the last column is left unpadded so long text does not push the
/// line with trailing spaces.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> io::Result<()> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = io::BufWriter::new(io::stdout().lock());
    let header_row: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header_row).chain(rows) {
        let last = row.len().saturating_sub(1);
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i == last {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(widths[i] - cell.chars().count() + 2));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    out.flush()
}

/// A timestamp as a person reads it, in UTC.
pub fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// Writes `text` to stdout as it is (data for a pager or a script, not a cell).
pub fn raw(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Writes one line to stdout.
pub fn line(text: impl std::fmt::Display) -> io::Result<()> {
    writeln!(io::stdout().lock(), "{text}")
}

/// Text from outside shown in a table cell or on one line: every control character (a line
/// break and a tab too) shown as its escape (berth-core's `shown`), so none drives the
/// terminal.
pub fn cell(text: &str) -> String {
    shown::visible(text, Form::Line).into_owned()
}

/// Text from outside shown as lines (an agent's standard error): its line breaks and tabs
/// kept, every other control character shown as its escape.
pub fn lines(text: &(impl AsRef<[u8]> + ?Sized)) -> String {
    shown::visible(text, Form::Lines).into_owned()
}

/// A file's name as git quotes it (`"evil\033[31m.txt"`), wherever one is shown.
pub fn file_name(path: &str) -> String {
    shown::visible(path, Form::FileName).into_owned()
}

/// An agent's bytes written out: into a pipe or a file as they are, byte for byte; on a
/// terminal as lines with every control character shown as its escape.
pub fn agents_bytes(bytes: &[u8]) -> io::Result<()> {
    let terminal = io::stdout().is_terminal();
    let mut out = io::stdout().lock();
    match terminal {
        true => out.write_all(lines(bytes).as_bytes())?,
        false => out.write_all(bytes)?,
    }
    out.flush()
}

/// A unified diff written out: into a pipe or a file as it is, byte for byte (for `git
/// apply`); on a terminal, each line coloured by what it does (unless `NO_COLOR`) and the
/// agent's bytes in it shown as escapes, so no line of it can hide another.
pub fn patch(text: &str) -> io::Result<()> {
    let terminal = io::stdout().is_terminal();
    let mut out = io::BufWriter::new(io::stdout().lock());
    if !terminal {
        out.write_all(text.as_bytes())?;
        return out.flush();
    }
    let colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut in_hunk = false;
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        // A file's header ends at its first hunk; inside one, `---` is a removed line.
        if body.starts_with("diff ") {
            in_hunk = false;
        } else if body.starts_with("@@") {
            in_hunk = true;
        }
        let code = match body.as_bytes().first() {
            _ if !colour => "",
            Some(b'@') if in_hunk && body.starts_with("@@") => "36",
            Some(b'+') if in_hunk => "32",
            Some(b'-') if in_hunk => "31",
            Some(_) if !in_hunk => "1",
            _ => "",
        };
        // Shown with its line break, so a `\r\n` stays one; the break goes after the colour.
        let shown = lines(line);
        let body = shown.strip_suffix('\n').unwrap_or(&shown);
        match code {
            "" => write!(out, "{body}{end}")?,
            code => write!(out, "\x1b[{code}m{body}\x1b[0m{end}")?,
        }
    }
    out.flush()
}

/// The shortest prefix of each id, 8 characters or more, that no other id of `ids` starts
/// with: a table's ID column, short like git's, and still a prefix berth resolves (4+). An id
/// of 8 characters or fewer is shown whole.
pub fn short_ids(ids: &[&str]) -> Vec<String> {
    const SHORT: usize = 8;
    let mut sorted: Vec<&str> = ids.to_vec();
    sorted.sort_unstable();
    // Two ids share the longest prefix with a neighbour in sorted order.
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    ids.iter()
        .map(|id| {
            let at = sorted.partition_point(|s| s < id);
            let shared = [at.checked_sub(1), Some(at + 1)]
                .into_iter()
                .flatten()
                .filter_map(|i| sorted.get(i))
                .map(|other| common(id, other))
                .max()
                .unwrap_or(0);
            let len = (shared + 1).max(SHORT);
            match id.char_indices().nth(len) {
                Some((cut, _)) => id[..cut].to_owned(),
                None => (*id).to_owned(),
            }
        })
        .collect()
}

/// A line under a table that says what its symbols mean; on standard error with the other
/// notes for people, so a script reading the table sees rows only.
pub fn legend(text: &str) {
    eprintln!("{text}");
}

#[cfg(test)]
mod tests {
    #[test]
    fn lines_keep_their_breaks_and_show_escape_sequences() {
        assert_eq!(
            super::lines("a\tb\n\x1b]52;c;ZXZpbA==\x07c\r\n"),
            "a\tb\n\\x1b]52;c;ZXZpbA==\\x07c\r\n"
        );
    }

    #[test]
    fn a_cell_shows_escapes_c1_controls_and_bidi_overrides() {
        assert_eq!(
            super::cell("evil\x1b[31mname\u{9b}2J\u{202e}txt.exe\u{2066}"),
            "evil\\x1b[31mname\\u{9b}2J\\u{202e}txt.exe\\u{2066}"
        );
        assert_eq!(super::cell("plain/name.rs"), "plain/name.rs");
    }

    use super::short_ids;

    #[test]
    fn short_ids_are_unique_prefixes_of_eight_or_more() {
        let ids = [
            "c3ca70ae-7bf6-411d-abcc-3c8c52bccd37",
            "c3ca70ae-1111-411d-abcc-3c8c52bccd37",
            "51e4550a-1677-486f-bfbe-cf8e8448bee5",
            "default",
        ];
        assert_eq!(
            short_ids(&ids),
            ["c3ca70ae-7", "c3ca70ae-1", "51e4550a", "default"]
        );
    }
}
