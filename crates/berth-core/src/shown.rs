//! What of a text from outside (an agent's file names, output, messages) may reach a
//! terminal: the one function every front end passes such text through before it prints it,
//! so that no agent drives a person's terminal (an OSC 52 clipboard write, a screen clear, a
//! cursor move that hides a line) or makes one name read as another (a bidi override).
//!
//! Nothing is dropped; what would drive the terminal is shown as an escape a person can read:
//!
//! - in a text ([`Form::Line`], [`Form::Lines`]): a C0 control or DEL as `\xHH` (`\x1b` for
//!   ESC, `\x0d` for a carriage return but that of a `\r\n` in lines), a C1 control or a
//!   bidi control as `\u{HEX}`
//!   (`\u{9b}`, `\u{202e}`), and a byte that is not UTF-8 as `\xHH` too (`\x9b` for a lone
//!   0x9B byte, unlike `\u{9b}`, the character). A backslash of the text stays as it is: a
//!   text shown twice reads the same (what is shown has nothing left to escape), and the
//!   exact bytes are for a pipe or `--json`, never the terminal's.
//! - a file's name ([`Form::FileName`]): quoted as git quotes it with `core.quotePath` on,
//!   its default: unchanged when every byte is printable ASCII (a space included); else in
//!   double quotes, with `\a \b \t \n \v \f \r \" \\` and every other control byte or byte
//!   of 0x80 and above in octal (`\033`, `\302\233`). So a name reads the same in berth's
//!   output as in `git status`, and U+202E in a name is `\342\200\256`.

use std::borrow::Cow;
use std::fmt::Write as _;

/// How the text is laid out where it is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// On one line (a table's cell, a line of a list): a line break or a tab is shown as its
    /// escape too.
    Line,
    /// As lines (an agent's standard error, a diff): line breaks (`\n`, and `\r\n`, whose
    /// carriage return hides nothing) and tabs kept.
    Lines,
    /// A file's name, quoted as git quotes it.
    FileName,
}

/// Whether `c`, printed, would drive the terminal or reorder what it shows: C0, DEL and C1
/// controls (an escape sequence, U+009B's CSI), and the bidirectional controls: the
/// overrides and embeddings (U+202A–U+202E), the isolates (U+2066–U+2069) and the marks
/// (U+061C, U+200E, U+200F). Line breaks and tabs are controls too: a caller that keeps them
/// says so.
pub fn drives_the_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{061c}' | '\u{200e}' | '\u{200f}'
        )
}

/// `text` as it may be printed to a terminal in `form`: the one function every front end
/// passes an agent's text through (see the module's doc for the forms). `text` is a `str` or
/// bytes; bytes that are not UTF-8 are shown, not replaced. Borrowed when nothing changes.
pub fn visible<T: AsRef<[u8]> + ?Sized>(text: &T, form: Form) -> Cow<'_, str> {
    let bytes = text.as_ref();
    match form {
        Form::FileName => quoted_as_git_does(bytes),
        Form::Line | Form::Lines => escaped(bytes, form == Form::Lines),
    }
}

/// A text's controls and bytes that are not UTF-8 as escapes; with `keep_breaks`, line
/// breaks and tabs as they are.
fn escaped(bytes: &[u8], keep_breaks: bool) -> Cow<'_, str> {
    // A carriage return is kept only as the start of a `\r\n`, `next` being what follows it.
    let shows = |c: char, next: Option<char>| {
        !drives_the_terminal(c)
            || (keep_breaks && (matches!(c, '\n' | '\t') || (c == '\r' && next == Some('\n'))))
    };
    let all_shown = |text: &str| {
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if !shows(c, chars.peek().copied()) {
                return false;
            }
        }
        true
    };
    if let Ok(text) = std::str::from_utf8(bytes)
        && all_shown(text)
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        let mut chars = chunk.valid().chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                c if shows(c, chars.peek().copied()) => out.push(c),
                c if (c as u32) < 0x80 => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Cow::Owned(out)
}

/// A file's name quoted as git's `quote_c_style` does with `core.quotePath` on.
fn quoted_as_git_does(bytes: &[u8]) -> Cow<'_, str> {
    let plain = |b: u8| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\';
    if bytes.iter().all(|b| plain(*b)) {
        // Printable ASCII only, so UTF-8.
        return String::from_utf8_lossy(bytes);
    }
    let mut out = String::with_capacity(bytes.len() * 2 + 2);
    out.push('"');
    for &b in bytes {
        match b {
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            0x0b => out.push_str("\\v"),
            0x0c => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b if plain(b) => out.push(char::from(b)),
            b => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out.push('"');
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::{Form, drives_the_terminal, visible};

    #[test]
    fn escapes_c1_controls_and_bidi_controls_drive_the_terminal() {
        for c in [
            '\x1b', '\x7f', '\u{9b}', '\u{202e}', '\u{2066}', '\u{200f}', '\u{61c}', '\n', '\t',
        ] {
            assert!(drives_the_terminal(c), "{c:?}");
        }
        for c in ['a', 'é', '→', '\u{200b}', '\u{a0}'] {
            assert!(!drives_the_terminal(c), "{c:?}");
        }
    }

    #[test]
    fn every_class_of_control_is_shown_as_its_escape() {
        let cases = [
            // C0: ESC of OSC 52, a screen clear, a cursor move; NUL, BEL, a carriage return.
            ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),
            ("\x1b[2J\x1b[1A\x1b[2K", "\\x1b[2J\\x1b[1A\\x1b[2K"),
            ("a\0b\rc", "a\\x00b\\x0dc"),
            // DEL.
            ("x\x7fy", "x\\x7fy"),
            // C1: CSI (U+009B), NEL (U+0085), the first and the last.
            (
                "\u{9b}31m\u{85}\u{80}\u{9f}",
                "\\u{9b}31m\\u{85}\\u{80}\\u{9f}",
            ),
            // Bidi: every override, embedding, isolate and mark.
            (
                "\u{202a}\u{202b}\u{202c}\u{202d}\u{202e}",
                "\\u{202a}\\u{202b}\\u{202c}\\u{202d}\\u{202e}",
            ),
            (
                "\u{2066}\u{2067}\u{2068}\u{2069}\u{61c}\u{200e}\u{200f}",
                "\\u{2066}\\u{2067}\\u{2068}\\u{2069}\\u{61c}\\u{200e}\\u{200f}",
            ),
            // What shows as itself: letters, a backslash, a no-break space, a zero-width space.
            ("café → a\\x1b\u{a0}\u{200b}", "café → a\\x1b\u{a0}\u{200b}"),
        ];
        for (text, shown) in cases {
            assert_eq!(visible(text, Form::Line), shown, "{text:?}");
            assert_eq!(visible(text, Form::Lines), shown, "{text:?}");
        }
    }

    #[test]
    fn lines_keep_their_breaks_and_tabs_and_a_line_does_not() {
        let text = "a\tb\nc\r\nd\re\r";
        assert_eq!(visible(text, Form::Lines), "a\tb\nc\r\nd\\x0de\\x0d");
        assert_eq!(
            visible(text, Form::Line),
            "a\\x09b\\x0ac\\x0d\\x0ad\\x0de\\x0d"
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_are_shown_not_replaced() {
        // A lone 0x9B byte (a C1 CSI to a terminal that is not in UTF-8), and a cut character.
        let bytes = b"ok \x9b2J \xe2\x80 end\n";
        assert_eq!(
            visible(&bytes[..], Form::Lines),
            "ok \\x9b2J \\xe2\\x80 end\n"
        );
    }

    #[test]
    fn nothing_to_show_is_borrowed_and_what_is_shown_is_shown_again_unchanged() {
        assert!(matches!(
            visible("plain/name.rs", Form::Line),
            std::borrow::Cow::Borrowed(_)
        ));
        let once = visible("evil\x1b[31m\u{9b}\u{202e}\n", Form::Lines).into_owned();
        assert_eq!(visible(&once, Form::Lines), once);
        assert_eq!(visible(&once, Form::Line), once.replace('\n', "\\x0a"));
    }

    #[test]
    fn a_file_name_is_quoted_as_git_quotes_it() {
        let cases: [(&[u8], &str); 8] = [
            (b"src/main.rs", "src/main.rs"),
            (b"with space.txt", "with space.txt"),
            (b"evil\x1b[31mname.txt", "\"evil\\033[31mname.txt\""),
            (b"a\x07\x08\t\n\x0b\x0c\rz", "\"a\\a\\b\\t\\n\\v\\f\\rz\""),
            (b"q\"b\\s", "\"q\\\"b\\\\s\""),
            (b"del\x7f", "\"del\\177\""),
            // U+009B, U+202E and a letter past ASCII, each byte of them in octal.
            (
                "c1\u{9b}bidi\u{202e}é".as_bytes(),
                "\"c1\\302\\233bidi\\342\\200\\256\\303\\251\"",
            ),
            (b"raw\x9b", "\"raw\\233\""),
        ];
        for (name, quoted) in cases {
            assert_eq!(visible(name, Form::FileName), quoted, "{name:?}");
        }
    }
}
