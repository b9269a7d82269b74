//! The sizes the code keeps (ARCHITECTURE.md's standards): no Rust file of a crate (its
//! sources, tests or benchmarks) over 1,000 lines, and no function of a crate's sources over
//! 100 lines, from the line of its `fn` to the line of its closing brace. A long test file is
//! split by topic; a long function into named steps. The tree is read as it is, so a file or a
//! function that grows past its size fails here, naming it.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 1_000;
const MAX_FUNCTION_LINES: usize = 100;

/// Functions allowed over the size, as (file under the workspace root, function name, why).
/// Each entry must still be over it: one that shrank is taken off.
const LONG_FUNCTIONS_ALLOWED: &[(&str, &str, &str)] = &[];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, sorted, so the failures read in a stable order.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crates' files of one kind (`src`, `tests` or `benches`), relative to the root.
fn crate_files(kind: &str) -> Vec<(String, String)> {
    let root = root();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    crates.sort();
    let mut files = Vec::new();
    for dir in crates {
        rust_files(&dir.join(kind), &mut files);
    }
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.strip_prefix(&root).unwrap().to_string_lossy();
            (name.into_owned(), text)
        })
        .collect()
}

/// The source with comments, strings and character literals blanked out (newlines kept, so
/// lines still count), leaving the braces and keywords of the code alone.
fn code_only(source: &str) -> Vec<u8> {
    let bytes = source.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    while i < bytes.len() {
        let end = literal_or_comment_end(bytes, i);
        if end > i {
            for b in &mut out[i..end] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// Where the comment or literal that starts at `i` ends, or `i` when none starts there.
fn literal_or_comment_end(b: &[u8], i: usize) -> usize {
    let at = |s: &[u8]| b[i..].starts_with(s);
    let after_word = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    if at(b"//") {
        return b[i..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |p| i + p);
    }
    if at(b"/*") {
        return block_comment_end(b, i);
    }
    if !after_word {
        let prefix = if at(b"br") || at(b"cr") {
            2
        } else {
            usize::from(at(b"r"))
        };
        if prefix > 0 {
            let hashes = b[i + prefix..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + prefix + hashes) == Some(&b'"') {
                return raw_string_end(b, i + prefix + hashes + 1, hashes);
            }
        }
        if at(b"b\"") || at(b"c\"") {
            return string_end(b, i + 2);
        }
        if at(b"b'") {
            return char_end(b, i + 1).unwrap_or(i);
        }
    }
    match b[i] {
        b'"' => string_end(b, i + 1),
        b'\'' => char_end(b, i).unwrap_or(i),
        _ => i,
    }
}

fn block_comment_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if b[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

fn raw_string_end(b: &[u8], mut i: usize, hashes: usize) -> usize {
    while i < b.len() {
        if b[i] == b'"'
            && b[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == b'#')
                .count()
                == hashes
        {
            return i + 1 + hashes;
        }
        i += 1;
    }
    b.len()
}

fn string_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// The end of a character literal starting at the quote `i`; none for a lifetime (`'a`).
fn char_end(b: &[u8], i: usize) -> Option<usize> {
    let rest = &b[i + 1..];
    if rest.first() == Some(&b'\\') {
        let close = rest.iter().skip(2).position(|&c| c == b'\'')?;
        return Some(i + 1 + 2 + close + 1);
    }
    // One character, which may take several bytes in UTF-8, then the closing quote.
    let width = match rest.first()? {
        c if *c < 0x80 => 1,
        c if *c >= 0xF0 => 4,
        c if *c >= 0xE0 => 3,
        _ => 2,
    };
    (rest.get(width) == Some(&b'\'')).then_some(i + 1 + width + 1)
}

/// Each function with a body in `source`: its name, the line of its `fn` and its length in
/// lines, to its closing brace. A declaration without a body (in a trait) is no function here.
fn functions(source: &str) -> Vec<(String, usize, usize)> {
    let code = code_only(source);
    let line_at = |at: usize| code[..at].iter().filter(|&&c| c == b'\n').count() + 1;
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(p) = code[i..].windows(3).position(|w| w == b"fn ") {
        let start = i + p;
        i = start + 3;
        if start > 0 && word(code[start - 1]) {
            continue;
        }
        let name: String = code[i..]
            .iter()
            .skip_while(|c| c.is_ascii_whitespace())
            .take_while(|&&c| word(c))
            .map(|&c| char::from(c))
            .collect();
        if name.is_empty() {
            continue;
        }
        if let Some(close) = body_end(&code, i) {
            found.push((name, line_at(start), line_at(close) - line_at(start) + 1));
        }
    }
    found
}

/// The closing brace of the body of the function whose signature starts at `i`, if it has
/// one: the first `{` outside parentheses and brackets opens it, a `;` before it ends a
/// declaration.
fn body_end(code: &[u8], i: usize) -> Option<usize> {
    let mut nesting = 0i32;
    let mut open = None;
    for (k, &c) in code.iter().enumerate().skip(i) {
        match c {
            b'(' | b'[' => nesting += 1,
            b')' | b']' => nesting -= 1,
            b';' if nesting == 0 => return None,
            b'{' if nesting == 0 => {
                open = Some(k);
                break;
            }
            _ => {}
        }
    }
    let mut depth = 0;
    for (k, &c) in code.iter().enumerate().skip(open?) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

#[test]
fn no_file_of_a_crate_is_over_a_thousand_lines() {
    let mut long = Vec::new();
    let mut count = 0;
    for kind in ["src", "tests", "benches"] {
        for (name, text) in crate_files(kind) {
            count += 1;
            let lines = text.lines().count();
            if lines > MAX_FILE_LINES {
                long.push(format!("{name}: {lines} lines"));
            }
        }
    }
    assert!(count > 300, "read only {count} files");
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them by topic; a test file's shared helpers \
         go to its support module):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_function_of_a_crates_sources_is_over_a_hundred_lines() {
    let mut long = Vec::new();
    let mut allowed_seen = Vec::new();
    let mut count = 0;
    for (name, text) in crate_files("src") {
        for (function, line, lines) in functions(&text) {
            count += 1;
            if lines <= MAX_FUNCTION_LINES {
                continue;
            }
            let allowed = LONG_FUNCTIONS_ALLOWED
                .iter()
                .any(|(file, f, _)| *file == name && *f == function);
            if allowed {
                allowed_seen.push((name.clone(), function));
            } else {
                long.push(format!("{name}:{line}: fn {function}, {lines} lines"));
            }
        }
    }
    assert!(count > 2_000, "found only {count} functions");
    let stale: Vec<_> = LONG_FUNCTIONS_ALLOWED
        .iter()
        .filter(|(file, f, _)| !allowed_seen.iter().any(|(n, g)| n == file && g == f))
        .collect();
    assert!(
        stale.is_empty(),
        "allowed long functions that are no longer over {MAX_FUNCTION_LINES} lines (take them \
         off LONG_FUNCTIONS_ALLOWED): {stale:?}"
    );
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split each into named steps):\n{}",
        long.join("\n")
    );
}

/// The counting itself, on code whose sizes are known: strings, comments, characters and
/// lifetimes holding braces or `fn` must not move a function's end.
#[test]
fn functions_are_measured_from_fn_to_their_closing_brace() {
    let source = r##"
trait T { fn declared(&self) -> u8; }
fn short<'a>(x: &'a str) -> &'a str {
    let _ = "} fn fake() {";
    let _ = r#"}"#;
    let _ = '}';
    let _ = b'{';
    // }
    /* } /* nested } */ */
    x
}
pub(crate) async fn generic<F: Fn(u8) -> u8>(f: F) -> [u8; 2] where F: Copy {
    [f(1), f(2)]
}
"##;
    assert_eq!(
        functions(source),
        vec![("short".to_owned(), 3, 9), ("generic".to_owned(), 12, 3)]
    );
}
