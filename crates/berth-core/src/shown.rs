//! What of a text from outside (an agent's file names, output, messages) may reach a
//! terminal: the one rule every front end that prints such text applies, so no agent drives a
//! person's terminal or makes one name read as another.

/// Whether `c`, printed, would drive the terminal or reorder what it shows: C0, DEL and C1
/// controls (an escape sequence, U+009B's CSI), and the bidirectional overrides and isolates
/// (U+202A–U+202E, U+2066–U+2069). Line breaks and tabs are controls too: a caller that keeps
/// them says so.
pub fn drives_the_terminal(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::drives_the_terminal;

    #[test]
    fn escapes_c1_controls_and_bidi_overrides_drive_the_terminal() {
        for c in ['\x1b', '\x7f', '\u{9b}', '\u{202e}', '\u{2066}', '\n', '\t'] {
            assert!(drives_the_terminal(c), "{c:?}");
        }
        for c in ['a', 'é', '→', '\u{200b}'] {
            assert!(!drives_the_terminal(c), "{c:?}");
        }
    }
}
