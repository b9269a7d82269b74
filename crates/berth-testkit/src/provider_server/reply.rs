//! The scripted answer: a status, headers, and a body written chunk by chunk with pauses and
//! cuts where the test puts them, and how those bytes go on the wire.

use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// How a body's end is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`: each piece is one HTTP chunk; a cut leaves the client
    /// without the final zero-length chunk, which it sees as a broken body.
    Chunked,
    /// `Content-Length` of all the pieces; a cut leaves the body short.
    Length,
    /// Neither: the body ends when the connection closes, so a cut looks like a clean end
    /// to HTTP and only the dialect can tell the answer was not finished.
    Close,
}

#[derive(Debug, Clone)]
enum Piece {
    Bytes(Vec<u8>),
    Pause(Duration),
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    pieces: Vec<Piece>,
    framing: Framing,
    /// Set by a cut: the length of the whole body, of which only a part is written.
    cut: Option<usize>,
    head_delay: Duration,
}

impl Reply {
    /// A reply with `status`, `content_type`, and no body yet (add it with [`Reply::chunk`]).
    pub fn new(status: u16, content_type: &str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            pieces: Vec::new(),
            framing: Framing::Chunked,
            cut: None,
            head_delay: Duration::ZERO,
        }
    }

    /// `200` with `text/event-stream`, chunked, each event (a complete `event:`/`data:` block
    /// with its blank line) written and flushed as one chunk.
    pub fn sse<I, S>(events: I) -> Reply
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        events
            .into_iter()
            .fold(Reply::new(200, "text/event-stream"), |r, e| {
                r.chunk(e.into().into_bytes())
            })
    }

    /// Like [`Reply::sse`], with the chunks given as bytes: to split a UTF-8 character across
    /// chunks, or an event across several.
    pub fn sse_bytes<I>(chunks: I) -> Reply
    where
        I: IntoIterator<Item = Vec<u8>>,
    {
        chunks
            .into_iter()
            .fold(Reply::new(200, "text/event-stream"), Reply::chunk)
    }

    /// `status` with a JSON body, sent with a `Content-Length`.
    pub fn json(status: u16, body: &Value) -> Reply {
        Reply::new(status, "application/json")
            .chunk(body.to_string().into_bytes())
            .framing(Framing::Length)
    }

    /// Adds a header (`Retry-After`, say).
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers
            .push((name.to_ascii_lowercase(), value.to_owned()));
        self
    }

    /// Appends a chunk of body.
    pub fn chunk(mut self, bytes: impl Into<Vec<u8>>) -> Reply {
        self.pieces.push(Piece::Bytes(bytes.into()));
        self
    }

    /// Appends a pause: the next chunk is written `delay` after the previous one.
    pub fn pause(mut self, delay: Duration) -> Reply {
        self.pieces.push(Piece::Pause(delay));
        self
    }

    /// Pauses for `delay` after the first `chunks` chunks.
    pub fn pause_after(mut self, chunks: usize, delay: Duration) -> Reply {
        let at = self.piece_index_after(chunks);
        self.pieces.insert(at, Piece::Pause(delay));
        self
    }

    /// Pauses for `delay` between every two chunks.
    pub fn pause_between(mut self, delay: Duration) -> Reply {
        let mut pieces = Vec::with_capacity(self.pieces.len() * 2);
        for piece in self.pieces {
            if matches!(piece, Piece::Bytes(_)) && !pieces.is_empty() {
                pieces.push(Piece::Pause(delay));
            }
            pieces.push(piece);
        }
        self.pieces = pieces;
        self
    }

    /// Waits `delay` before writing the status line: a slow first byte.
    pub fn delay_head(mut self, delay: Duration) -> Reply {
        self.head_delay = delay;
        self
    }

    /// Writes only the first `chunks` chunks, then closes the connection without ending the
    /// body (see [`Framing`] for what the client sees).
    pub fn cut_after(mut self, chunks: usize) -> Reply {
        let full = self.body_len();
        let at = self.piece_index_after(chunks);
        self.pieces.truncate(at);
        self.cut = Some(self.cut.unwrap_or(full));
        self
    }

    /// How the body's end is marked; [`Framing::Chunked`] unless said otherwise.
    pub fn framing(mut self, framing: Framing) -> Reply {
        self.framing = framing;
        self
    }

    fn body_len(&self) -> usize {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Bytes(b) => b.len(),
                Piece::Pause(_) => 0,
            })
            .sum()
    }

    /// The index in `pieces` just after the `chunks`-th chunk of bytes.
    fn piece_index_after(&self, chunks: usize) -> usize {
        let mut seen = 0;
        for (i, piece) in self.pieces.iter().enumerate() {
            if seen == chunks {
                return i;
            }
            if matches!(piece, Piece::Bytes(_)) {
                seen += 1;
            }
        }
        self.pieces.len()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

pub(super) async fn write_reply(stream: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
    if !reply.head_delay.is_zero() {
        tokio::time::sleep(reply.head_delay).await;
    }
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match reply.framing {
        Framing::Chunked => head.push_str("transfer-encoding: chunked\r\n"),
        Framing::Length => {
            // The length of the whole scripted body, even when a cut writes less of it.
            let length = reply.cut.unwrap_or_else(|| reply.body_len());
            head.push_str(&format!("content-length: {length}\r\n"));
        }
        Framing::Close => {}
    }
    head.push_str("connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await?;
    for piece in &reply.pieces {
        match piece {
            Piece::Pause(d) => tokio::time::sleep(*d).await,
            Piece::Bytes(bytes) => {
                if bytes.is_empty() {
                    // An empty HTTP chunk would end a chunked body early.
                    continue;
                }
                if reply.framing == Framing::Chunked {
                    stream
                        .write_all(format!("{:x}\r\n", bytes.len()).as_bytes())
                        .await?;
                    stream.write_all(bytes).await?;
                    stream.write_all(b"\r\n").await?;
                } else {
                    stream.write_all(bytes).await?;
                }
                stream.flush().await?;
            }
        }
    }
    if reply.framing == Framing::Chunked && reply.cut.is_none() {
        stream.write_all(b"0\r\n\r\n").await?;
    }
    stream.flush().await?;
    stream.shutdown().await
}
