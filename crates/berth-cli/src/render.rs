//! Output for people (aligned tables, short times) and for scripts (JSON). Commands build
//! rows or serializable values; this module decides how they look.

use std::io::{self, Write};

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

/// Writes `text` to stdout as it is (a patch: data for a pager or `git apply`, not a cell).
pub fn raw(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Writes one line to stdout.
pub fn line(text: impl std::fmt::Display) -> io::Result<()> {
    writeln!(io::stdout().lock(), "{text}")
}

/// Text from outside shown in a table cell: control characters would garble the terminal.
pub fn cell(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '�' } else { c })
        .collect()
}
