//! What a check printed, kept within bounds: its first [`HEAD`] bytes (where a build says
//! what it is doing) and its last [`TAIL`] bytes (where a test run says what failed),
//! standard output and standard error as one stream in the order written, as a person at a
//! terminal would have seen them.

use std::collections::VecDeque;

/// The beginning kept whole.
pub const HEAD: usize = 64 * 1024;
/// The end kept whole.
pub const TAIL: usize = 1 << 20;
/// Lines of the end a failed check's record quotes (`run show`, `compare`, the summary).
pub const QUOTED_LINES: usize = 20;

/// A check's output, bounded: memory and the kept file never pass `HEAD + TAIL` bytes
/// however much it prints.
#[derive(Debug, Default)]
pub struct KeptOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Everything it printed, counted.
    total: u64,
}

impl KeptOutput {
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < HEAD {
            let take = bytes.len().min(HEAD - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= TAIL {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - TAIL..]);
            return;
        }
        let over = (self.tail.len() + bytes.len()).saturating_sub(TAIL);
        self.tail.drain(..over);
        self.tail.extend(bytes);
    }

    /// Bytes printed between the head and the tail that were not kept.
    pub fn cut(&self) -> u64 {
        self.total - self.head.len() as u64 - self.tail.len() as u64
    }

    /// What is kept, as the file holds it: the head, a line saying how much was cut when
    /// something was, and the tail.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.head.len() + self.tail.len() + 64);
        out.extend_from_slice(&self.head);
        let cut = self.cut();
        if cut > 0 {
            if !out.ends_with(b"\n") {
                out.push(b'\n');
            }
            out.extend_from_slice(
                format!("[berth: {cut} bytes of the check's output cut here]\n").as_bytes(),
            );
        }
        out.extend(self.tail.iter());
        out
    }

    /// Its last `n` lines that say something, as a record quotes a failed check
    /// ([`crate::stderr::quoted_lines`]).
    pub fn last_lines(&self, n: usize) -> String {
        let end: Vec<u8> = match self.tail.is_empty() {
            true => self.head.clone(),
            false => self.tail.iter().copied().collect(),
        };
        crate::stderr::quoted_lines(&String::from_utf8_lossy(&end), n).join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_head_and_the_tail_and_says_what_was_cut() {
        let mut out = KeptOutput::default();
        out.push(b"first line\n");
        for i in 0..200_000 {
            out.push(format!("line {i}\n").as_bytes());
        }
        out.push(b"last line\n");
        let bytes = out.bytes();
        assert!(bytes.len() <= HEAD + TAIL + 100, "{}", bytes.len());
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.starts_with("first line\nline 0\n"));
        assert!(text.ends_with("line 199999\nlast line\n"));
        assert!(text.contains(&format!("[berth: {} bytes", out.cut())));
        assert_eq!(out.last_lines(2), "line 199999\nlast line");
    }

    #[test]
    fn a_short_output_is_kept_whole_and_its_control_characters_are_quoted_as_escapes() {
        let mut out = KeptOutput::default();
        out.push(b"ok\n\x1b[31mFAILED\x1b[0m x\n\n");
        assert_eq!(out.bytes(), b"ok\n\x1b[31mFAILED\x1b[0m x\n\n");
        assert_eq!(out.cut(), 0);
        assert_eq!(out.last_lines(20), "ok\n\\x1b[31mFAILED\\x1b[0m x");
    }

    #[test]
    fn one_write_longer_than_the_tail_keeps_its_end() {
        let mut out = KeptOutput::default();
        out.push(&vec![b'a'; HEAD]);
        let mut big = vec![b'b'; TAIL + 10];
        big.extend_from_slice(b"end\n");
        out.push(&big);
        assert_eq!(out.cut(), 14);
        assert!(out.bytes().ends_with(b"bbbend\n"));
    }
}
