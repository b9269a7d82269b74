//! Standard input and output for the connection, through the crate's line transport (`Lines`:
//! it still does all of the JSON-RPC). The difference from the crate's own `Stdio` is on the
//! way out: it writes and flushes each message separately, through a round trip to a blocking
//! thread, which cost ~40 µs a message and made a fast answer's 2,000 chunks nine times slower
//! to relay than to read. Here one writer thread takes every message that is waiting and
//! writes them with one write: a lone message goes out at once, a burst in as few writes as
//! the pipe allows, and each message is still its own line, in order.

use std::io::{self, BufRead, Write};
use std::sync::mpsc;

use agent_client_protocol::Lines;
use futures::{Sink, Stream};

/// The most bytes gathered into one write.
const MAX_BATCH: usize = 1 << 20;

/// The transport, and the writer thread: join it (see [`finish`]) once the connection is over,
/// so its last answers are written before the process exits.
pub fn stdio() -> (
    Lines<
        impl Sink<String, Error = io::Error> + Send + 'static,
        impl Stream<Item = io::Result<String>> + Send + 'static,
    >,
    std::thread::JoinHandle<()>,
) {
    let (out_tx, out_rx) = mpsc::channel::<String>();
    let writer = std::thread::Builder::new()
        .name("acp-stdout".into())
        .spawn(move || write_lines(out_rx, io::stdout().lock()))
        .expect("start the thread that writes standard output");
    let outgoing = futures::sink::unfold(out_tx, async |tx, line: String| {
        tx.send(line)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "standard output is closed"))?;
        Ok(tx)
    });

    let (in_tx, in_rx) = futures::channel::mpsc::unbounded();
    std::thread::Builder::new()
        .name("acp-stdin".into())
        .spawn(move || {
            let mut stdin = io::stdin().lock();
            loop {
                let mut line = String::new();
                let read = stdin.read_line(&mut line);
                let done = !matches!(read, Ok(1..));
                let item = match read {
                    Ok(0) => break,
                    Ok(_) => {
                        if line.ends_with('\n') {
                            line.pop();
                            if line.ends_with('\r') {
                                line.pop();
                            }
                        }
                        Ok(line)
                    }
                    Err(e) => Err(e),
                };
                if in_tx.unbounded_send(item).is_err() || done {
                    break;
                }
            }
        })
        .expect("start the thread that reads standard input");
    (Lines::new(outgoing, in_rx), writer)
}

/// Waits (a second at most) for the writer to write what is queued: it ends when the
/// connection has dropped its sending side.
pub fn finish(writer: std::thread::JoinHandle<()>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while !writer.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    if writer.is_finished() {
        let _ = writer.join();
    }
}

/// Writes each line with its newline, gathering the lines already waiting into one write.
fn write_lines(lines: mpsc::Receiver<String>, mut out: impl Write) {
    let mut buf = Vec::with_capacity(64 * 1024);
    while let Ok(first) = lines.recv() {
        buf.clear();
        buf.extend_from_slice(first.as_bytes());
        buf.push(b'\n');
        while buf.len() < MAX_BATCH {
            let Ok(more) = lines.try_recv() else { break };
            buf.extend_from_slice(more.as_bytes());
            buf.push(b'\n');
        }
        if out.write_all(&buf).and_then(|()| out.flush()).is_err() {
            // The reader went away; the sending side sees the channel close.
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_their_order_and_their_own_line() {
        let (tx, rx) = mpsc::channel();
        for i in 0..1000 {
            tx.send(format!("{{\"n\":{i}}}")).unwrap();
        }
        drop(tx);
        let mut out = Vec::new();
        write_lines(rx, &mut out);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1000);
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(*l, format!("{{\"n\":{i}}}"));
        }
        assert!(text.ends_with('\n'));
    }
}
