//! HTTP/1.1 messages as a masked provider's endpoint relays them: a head read with what came
//! after it, and a body copied by its framing (`Content-Length`, `chunked`, or to the end), each
//! piece written on as soon as it is read, so that a stream (server-sent events) is never held
//! back.

use std::io::{self, Read, Write};

use super::HEAD_LIMIT;
use super::http::head_end;

/// How long a message's body is (RFC 9112 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body.
    Empty,
    Length(u64),
    Chunked,
    /// Until the sender closes (a response only).
    UntilClose,
}

/// A message head, and what was read after it.
pub(super) struct Message {
    pub head: Vec<u8>,
    pub rest: Vec<u8>,
}

/// Reads a message head from `from`, after `already` (bytes read before). `Ok(None)`: `from`
/// ended first.
pub(super) fn read_head(from: &mut impl Read, already: Vec<u8>) -> io::Result<Option<Message>> {
    let mut bytes = already;
    let mut chunk = [0u8; 8192];
    let mut searched = 0;
    loop {
        if let Some(end) = head_end(&bytes, searched) {
            let rest = bytes.split_off(end);
            return Ok(Some(Message { head: bytes, rest }));
        }
        if bytes.len() >= HEAD_LIMIT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a head longer than 64 KiB",
            ));
        }
        searched = bytes.len().saturating_sub(2);
        let read = match from.read(&mut chunk) {
            Ok(0) => return Ok(None),
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        bytes.extend_from_slice(&chunk[..read]);
    }
}

/// Copies a body of `framing` from `from` to `to`, starting with `prefix` (what was read after
/// its head); each read is written on at once. Whatever follows the body is left unread (or,
/// in `prefix`, dropped).
pub(super) fn relay(
    prefix: &[u8],
    from: &mut impl Read,
    to: &mut impl Write,
    framing: Framing,
) -> io::Result<()> {
    let mut tracker = match framing {
        Framing::Empty => return Ok(()),
        Framing::Length(length) => Tracker::Length(length),
        Framing::Chunked => Tracker::Chunked(Chunked::default()),
        Framing::UntilClose => Tracker::UntilClose,
    };
    let mut buffer = vec![0u8; 16 * 1024];
    let mut pass_on = |tracker: &mut Tracker, bytes: &[u8]| -> io::Result<bool> {
        let take = tracker.feed(bytes)?;
        if take > 0 {
            to.write_all(&bytes[..take])?;
            to.flush()?;
        }
        Ok(tracker.done())
    };
    if pass_on(&mut tracker, prefix)? {
        return Ok(());
    }
    loop {
        let read = match from.read(&mut buffer) {
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // A TLS peer that closes without close_notify: the end, for a body read to it.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
            Err(e) => return Err(e),
        };
        if read == 0 {
            return match tracker {
                Tracker::UntilClose => Ok(()),
                _ => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the body ended before its length",
                )),
            };
        }
        if pass_on(&mut tracker, &buffer[..read])? {
            return Ok(());
        }
    }
}

/// Where a body being copied stands.
enum Tracker {
    Length(u64),
    Chunked(Chunked),
    UntilClose,
}

impl Tracker {
    /// How many of `bytes` belong to the body.
    fn feed(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Tracker::Length(left) => {
                let take = (*left).min(bytes.len() as u64);
                *left -= take;
                Ok(take as usize)
            }
            Tracker::Chunked(chunked) => chunked
                .feed(bytes)
                .map_err(|why| io::Error::new(io::ErrorKind::InvalidData, why)),
            Tracker::UntilClose => Ok(bytes.len()),
        }
    }

    fn done(&self) -> bool {
        match self {
            Tracker::Length(left) => *left == 0,
            Tracker::Chunked(chunked) => chunked.state == State::Done,
            Tracker::UntilClose => false,
        }
    }
}

/// The longest chunk-size or trailer line read.
const LINE_LIMIT: usize = 8 * 1024;

/// A `chunked` body's framing, followed byte by byte: sizes, data, the last chunk, trailers.
#[derive(Debug, Default)]
pub(super) struct Chunked {
    state: State,
    line: Vec<u8>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A chunk's size line (hex digits, then extensions).
    #[default]
    Size,
    Data(u64),
    /// The line end after a chunk's data.
    DataEnd,
    /// Trailer lines, until a blank one.
    Trailer,
    Done,
}

impl Chunked {
    /// How many of `bytes` belong to the body: all of them, until its end.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Result<usize, &'static str> {
        let mut at = 0;
        while at < bytes.len() {
            match self.state {
                State::Done => break,
                State::Data(left) => {
                    let take = left.min((bytes.len() - at) as u64);
                    at += take as usize;
                    self.state = match left - take {
                        0 => State::DataEnd,
                        left => State::Data(left),
                    };
                }
                State::Size | State::DataEnd | State::Trailer => {
                    let byte = bytes[at];
                    at += 1;
                    self.line.push(byte);
                    if self.line.len() > LINE_LIMIT {
                        return Err("a chunk line longer than 8 KiB");
                    }
                    if byte == b'\n' {
                        self.end_line()?;
                    }
                }
            }
        }
        Ok(at)
    }

    fn end_line(&mut self) -> Result<(), &'static str> {
        let line = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.state = match self.state {
            State::Size => {
                let digits = line
                    .split(|&b| b == b';')
                    .next()
                    .unwrap_or_default()
                    .trim_ascii();
                let size = std::str::from_utf8(digits)
                    .ok()
                    .filter(|d| !d.is_empty() && d.len() <= 15)
                    .and_then(|d| u64::from_str_radix(d, 16).ok())
                    .ok_or("a chunk size that is not a hex number")?;
                match size {
                    0 => State::Trailer,
                    size => State::Data(size),
                }
            }
            State::DataEnd if line.is_empty() => State::Size,
            State::DataEnd => return Err("a chunk longer than its size"),
            State::Trailer if line.is_empty() => State::Done,
            other => other,
        };
        self.line.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `body` in pieces of `step` bytes; how many bytes belonged to it.
    fn consumed(body: &[u8], step: usize) -> Result<usize, &'static str> {
        let mut chunked = Chunked::default();
        let mut total = 0;
        for piece in body.chunks(step) {
            let take = chunked.feed(piece)?;
            total += take;
            if take < piece.len() {
                break;
            }
        }
        assert_eq!(
            chunked.state,
            State::Done,
            "{}",
            String::from_utf8_lossy(body)
        );
        Ok(total)
    }

    #[test]
    fn a_chunked_body_ends_where_its_last_chunk_and_trailers_do() {
        let body = b"5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\n";
        for step in [1, 2, 3, 7, body.len()] {
            let mut with_more = body.to_vec();
            with_more.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
            assert_eq!(consumed(&with_more, step), Ok(body.len()), "step {step}");
        }
        assert_eq!(consumed(b"0\n\n", 1), Ok(3), "bare line ends");
    }

    #[test]
    fn a_malformed_chunk_is_an_error() {
        for bad in [
            &b"zz\r\n"[..],
            b"5\r\nhello!!\r\n",
            b"\r\n",
            b"1234567890abcdef0\r\n",
        ] {
            assert!(Chunked::default().feed(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn relay_copies_a_body_by_its_framing_and_no_more() {
        let mut from: &[u8] = b"lo world, and more";
        let mut to = Vec::new();
        relay(b"hel", &mut from, &mut to, Framing::Length(11)).unwrap();
        assert_eq!(to, b"hello world");

        let mut from: &[u8] = b"lo\r\n0\r\n\r\nmore";
        let mut to = Vec::new();
        relay(b"5\r\nhel", &mut from, &mut to, Framing::Chunked).unwrap();
        assert_eq!(to, b"5\r\nhello\r\n0\r\n\r\n");

        let mut from: &[u8] = b"short";
        let ended = relay(b"", &mut from, &mut Vec::new(), Framing::Length(10));
        assert_eq!(ended.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);

        let mut from: &[u8] = b"to the end";
        let mut to = Vec::new();
        relay(b">", &mut from, &mut to, Framing::UntilClose).unwrap();
        assert_eq!(to, b">to the end");
    }

    #[test]
    fn a_head_is_read_with_what_followed_it() {
        let mut from: &[u8] = b"Length: 2\r\n\r\nhi";
        let message = read_head(&mut from, b"HTTP/1.1 200 OK\r\nContent-".to_vec())
            .unwrap()
            .unwrap();
        assert_eq!(
            message.head,
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
        );
        assert_eq!(message.rest, b"hi");
        let mut ended: &[u8] = b"HTTP/1.1 200";
        assert!(read_head(&mut ended, Vec::new()).unwrap().is_none());
    }
}
