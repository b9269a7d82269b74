//! The agent's stdio as the ACP SDK's transport, with berth's bounds on what it reads: the
//! SDK's own byte transport reads a line of any length and parses any JSON, and a line of
//! 1.5 GB once made berth 4.6 GB.
//!
//! - **A line is at most `[run] max_line_mib`.** It is read into one buffer that never grows
//!   past the limit; a longer line fails the agent ([`Broken`] says why), and nothing of it
//!   reaches the SDK.
//! - **Its parse is bounded too.** Before the SDK sees it, one pass that allocates nothing
//!   (serde_json over the bytes, every value ignored) counts its JSON values: a line of more
//!   than [`MAX_LINE_VALUES`] fails the agent, since each value costs the parse far more
//!   than its bytes (`[0,0,…]` of 8 MiB took a gigabyte). A line that is not JSON, or not an
//!   object, becomes the SDK's malformed frame with a stand-in of its text, never a copy.
//! - **The reader is never far ahead of the handlers.** The SDK queues parsed messages
//!   without bound, and dispatches them one at a time, each copied several times over while
//!   its handler runs. So after every [`AHEAD`] bytes the reader sends a probe behind them
//!   (a notification only berth's [`Probes`] handler claims, with a key the agent does not
//!   know) and reads nothing more until the probe is dispatched, i.e. until every message
//!   before it was handled. At most one line's parse then meets one message's handling.

use std::cell::Cell;
use std::fmt;
use std::sync::{Arc, Mutex};

use agent_client_protocol::{
    Agent, Channel, ConnectionTo, Dispatch, HandleDispatchFrom, Handled, RawJsonRpcMessage,
    RawJsonRpcNotification, RawJsonRpcParams, TransportFrame,
};
use futures::StreamExt;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The JSON values one line may hold (numbers, strings, arrays, objects, each counted): a
/// value costs the SDK's parse about a hundred bytes, three times over.
pub(crate) const MAX_LINE_VALUES: u64 = 1 << 16;

/// Bytes the reader may be ahead of the handlers before it waits for them.
const AHEAD: usize = 1 << 20;

/// The method of the reader's probe.
const PROBE: &str = "_berth/dispatched";

/// Why berth stopped reading the agent, when it did: the turn's failure says it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Broken(Arc<Mutex<Option<String>>>);

impl Broken {
    fn set(&self, why: String) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(why);
    }

    /// Why, once it broke.
    pub(crate) fn why(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The agent's stdio, bounded: the SDK's end (`channel`), the handler that answers the
/// reader's probes (first in the chain), why reading stopped, and the tasks that read and
/// write.
pub(crate) struct Wire {
    pub channel: Channel,
    pub probes: Probes,
    pub broken: Broken,
    pub tasks: Tasks,
}

/// The reading and the writing task, ended when this is dropped.
pub(crate) struct Tasks([JoinHandle<()>; 2]);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Starts reading `stdout` (lines of at most `max_line` bytes) and writing `stdin` for the
/// SDK.
pub(crate) fn start(
    stdin: impl AsyncWrite + Unpin + Send + 'static,
    stdout: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    max_line: u64,
) -> Wire {
    let (sdk, ours) = Channel::duplex();
    let (incoming, outgoing) = ours.into_parts();
    let (dispatched_tx, dispatched) = mpsc::unbounded_channel();
    let key = uuid::Uuid::new_v4().to_string();
    let broken = Broken::default();
    let reader = Reader {
        lines: BufReader::with_capacity(64 * 1024, stdout),
        max_line,
        to_sdk: outgoing,
        key: key.clone(),
        dispatched,
        broken: broken.clone(),
    };
    let tasks = Tasks([
        tokio::spawn(reader.run()),
        tokio::spawn(write(stdin, incoming)),
    ]);
    Wire {
        channel: sdk,
        probes: Probes {
            key,
            dispatched: dispatched_tx,
        },
        broken,
        tasks,
    }
}

/// Writes each message the SDK sends, one line each, until it sends no more: then the
/// agent's standard input closes.
async fn write(
    mut stdin: impl AsyncWrite + Unpin,
    mut frames: futures::channel::mpsc::UnboundedReceiver<TransportFrame>,
) {
    while let Some(frame) = frames.next().await {
        let Ok(mut line) = frame.to_json() else {
            continue;
        };
        line.push('\n');
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}

/// The reading half: lines to frames for the SDK, probes behind them.
struct Reader<R> {
    lines: BufReader<R>,
    max_line: u64,
    to_sdk: futures::channel::mpsc::UnboundedSender<TransportFrame>,
    key: String,
    dispatched: mpsc::UnboundedReceiver<u64>,
    broken: Broken,
}

impl<R: tokio::io::AsyncRead + Unpin> Reader<R> {
    /// Reads until the agent's output ends or breaks a bound; then the SDK's transport
    /// closes (`to_sdk` dropped), which ends the conversation.
    async fn run(mut self) {
        let mut ahead = 0;
        let mut probes = 0u64;
        loop {
            let line = match read_line(&mut self.lines, self.max_line).await {
                Ok(Some(line)) => line,
                Ok(None) => return,
                Err(why) => return self.broken.set(why),
            };
            ahead += line.len();
            let frame = match frame_of(line) {
                Ok(frame) => frame,
                Err(why) => return self.broken.set(why),
            };
            if self.to_sdk.unbounded_send(frame).is_err() {
                return;
            }
            if ahead < AHEAD {
                continue;
            }
            ahead = 0;
            probes += 1;
            if self
                .to_sdk
                .unbounded_send(probe(probes, &self.key))
                .is_err()
            {
                return;
            }
            loop {
                match self.dispatched.recv().await {
                    Some(n) if n >= probes => break,
                    Some(_) => {}
                    None => return,
                }
            }
        }
    }
}

/// The next line of `reader` without its line break; `None` at the end of the output; why
/// not when it passes `max` bytes (then nothing more is read).
async fn read_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    max: u64,
) -> Result<Option<Vec<u8>>, String> {
    let mut line = Vec::new();
    loop {
        let buf = reader
            .fill_buf()
            .await
            .map_err(|e| format!("its output could not be read: {e}"))?;
        if buf.is_empty() {
            return Ok((!line.is_empty()).then_some(line));
        }
        let (take, end) = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => (at, true),
            None => (buf.len(), false),
        };
        if (line.len() + take) as u64 > max {
            return Err(format!(
                "it wrote a line longer than {} MiB, the limit of [run] max_line_mib",
                max >> 20
            ));
        }
        line.extend_from_slice(&buf[..take]);
        reader.consume(take + usize::from(end));
        if end {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Some(line));
        }
    }
}

/// The SDK's frame of one line: its message, or a malformed frame standing in for a line
/// that is not one; why the agent fails when the line holds too many values.
fn frame_of(line: Vec<u8>) -> Result<TransportFrame, String> {
    match scan(&line) {
        Scanned::TooMany => {
            return Err(format!(
                "it wrote a line of more than {MAX_LINE_VALUES} JSON values, more than berth parses in one message"
            ));
        }
        Scanned::NotJson => {
            return Ok(malformed(
                false,
                agent_client_protocol::Error::parse_error(),
            ));
        }
        Scanned::NotObject => {
            return Ok(malformed(
                false,
                agent_client_protocol::Error::invalid_request(),
            ));
        }
        Scanned::Object => {}
    }
    // Valid JSON is valid UTF-8 (serde_json checked it); the buffer becomes the text as is.
    let Ok(text) = String::from_utf8(line) else {
        return Ok(malformed(
            false,
            agent_client_protocol::Error::parse_error(),
        ));
    };
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(_) => {
            return Ok(malformed(
                false,
                agent_client_protocol::Error::parse_error(),
            ));
        }
    };
    drop(text);
    let response_shaped = value.as_object().is_some_and(|o| {
        !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error"))
    });
    Ok(match serde_json::from_value::<RawJsonRpcMessage>(value) {
        Ok(message) => TransportFrame::Single(message),
        Err(_) => malformed(
            response_shaped,
            agent_client_protocol::Error::invalid_request(),
        ),
    })
}

/// A malformed frame whose text is a stand-in of the shape the SDK decides by (whether it
/// looks like a response, which gets no answer), so a long line is never copied for it.
fn malformed(response_shaped: bool, error: agent_client_protocol::Error) -> TransportFrame {
    let raw = match response_shaped {
        true => r#"{"result":null}"#,
        false => "{}",
    };
    TransportFrame::Malformed {
        raw: raw.to_owned(),
        error,
    }
}

/// The reader's probe number `n`.
fn probe(n: u64, key: &str) -> TransportFrame {
    let mut params = serde_json::Map::new();
    params.insert("n".into(), n.into());
    params.insert("key".into(), key.into());
    TransportFrame::Single(RawJsonRpcMessage::Notification(RawJsonRpcNotification {
        method: Arc::from(PROBE),
        params: Some(RawJsonRpcParams::Object(params)),
    }))
}

/// The handler of the reader's probes, first in the chain: a probe dispatched tells the
/// reader that every message before it was handled. One with another key (the agent's own)
/// is dropped.
pub(crate) struct Probes {
    key: String,
    dispatched: mpsc::UnboundedSender<u64>,
}

impl HandleDispatchFrom<Agent> for Probes {
    async fn handle_dispatch_from(
        &mut self,
        message: Dispatch,
        _cx: ConnectionTo<Agent>,
    ) -> Result<Handled<Dispatch>, agent_client_protocol::Error> {
        let Dispatch::Notification(notification) = &message else {
            return Ok(Handled::No {
                message,
                retry: false,
            });
        };
        if notification.method != PROBE {
            return Ok(Handled::No {
                message,
                retry: false,
            });
        }
        let params = &notification.params;
        if params["key"].as_str() == Some(self.key.as_str())
            && let Some(n) = params["n"].as_u64()
        {
            let _ = self.dispatched.send(n);
        }
        Ok(Handled::Yes)
    }

    fn describe_chain(&self) -> impl fmt::Debug {
        "berth's transport probes"
    }
}

/// What one pass over a line found.
#[derive(Debug, PartialEq, Eq)]
enum Scanned {
    Object,
    NotObject,
    NotJson,
    TooMany,
}

/// Checks that `line` is JSON and counts its values, allocating nothing but serde_json's
/// scratch for a string with escapes.
fn scan(line: &[u8]) -> Scanned {
    let count = Count {
        values: &Cell::new(0),
        over: &Cell::new(false),
    };
    let mut de = serde_json::Deserializer::from_slice(line);
    let parsed = count.deserialize(&mut de).and_then(|()| de.end());
    match parsed {
        _ if count.over.get() => Scanned::TooMany,
        Err(_) => Scanned::NotJson,
        Ok(()) if line.trim_ascii_start().starts_with(b"{") => Scanned::Object,
        Ok(()) => Scanned::NotObject,
    }
}

/// Counts the values it is given, refusing past [`MAX_LINE_VALUES`].
#[derive(Clone, Copy)]
struct Count<'a> {
    values: &'a Cell<u64>,
    over: &'a Cell<bool>,
}

impl Count<'_> {
    fn one<E: serde::de::Error>(&self) -> Result<(), E> {
        self.values.set(self.values.get() + 1);
        if self.values.get() > MAX_LINE_VALUES {
            self.over.set(true);
            return Err(E::custom("too many values"));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.one()
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.one()
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.one()
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.one()
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.one()
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.one()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.one()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.one()?;
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_read_whole_up_to_the_limit_and_refused_past_it() {
        let text = b"{\"a\":1}\r\nshort\n0123456789\nlast without a break".to_vec();
        let mut reader = BufReader::with_capacity(4, std::io::Cursor::new(text));
        assert_eq!(
            read_line(&mut reader, 10).await.unwrap().unwrap(),
            b"{\"a\":1}"
        );
        assert_eq!(read_line(&mut reader, 10).await.unwrap().unwrap(), b"short");
        // Exactly the limit is a line; one byte more is not.
        assert_eq!(
            read_line(&mut reader, 10).await.unwrap().unwrap(),
            b"0123456789"
        );
        let why = read_line(&mut reader, 10).await.unwrap_err();
        assert!(why.contains("[run] max_line_mib"), "{why}");
        let mut reader = BufReader::new(std::io::Cursor::new(b"tail".to_vec()));
        assert_eq!(read_line(&mut reader, 10).await.unwrap().unwrap(), b"tail");
        assert_eq!(read_line(&mut reader, 10).await.unwrap(), None);
    }

    #[test]
    fn a_line_is_scanned_for_its_shape_and_its_values() {
        assert_eq!(scan(br#" {"a":[1,"x\n",{"b":null}]}"#), Scanned::Object);
        assert_eq!(scan(b"[1,2]"), Scanned::NotObject);
        assert_eq!(scan(b"17"), Scanned::NotObject);
        assert_eq!(scan(b"{\"a\":"), Scanned::NotJson);
        assert_eq!(scan(b"{} {}"), Scanned::NotJson);
        assert_eq!(scan(b"not json"), Scanned::NotJson);
        let values = |n: u64| {
            let mut line = String::from("{\"a\":[");
            line.push_str(&"0,".repeat(n as usize));
            line.push_str("0]}");
            line
        };
        // The object, the array and its numbers.
        assert_eq!(
            scan(values(MAX_LINE_VALUES - 3).as_bytes()),
            Scanned::Object
        );
        assert_eq!(
            scan(values(MAX_LINE_VALUES - 2).as_bytes()),
            Scanned::TooMany
        );
    }

    #[test]
    fn a_line_that_is_not_a_message_stands_in_without_its_text() {
        let long = format!("{{\"jsonrpc\":\"2.0\",\"x\":\"{}\"}}", "a".repeat(1000));
        let TransportFrame::Malformed { raw, .. } = frame_of(long.into_bytes()).unwrap() else {
            panic!("not a message");
        };
        assert_eq!(raw, "{}");
        let answer = br#"{"jsonrpc":"1.0","id":1,"result":"x"}"#.to_vec();
        let TransportFrame::Malformed { raw, .. } = frame_of(answer).unwrap() else {
            panic!("not a message");
        };
        assert_eq!(raw, r#"{"result":null}"#);
        let note = br#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#.to_vec();
        assert!(matches!(
            frame_of(note).unwrap(),
            TransportFrame::Single(RawJsonRpcMessage::Notification(_))
        ));
    }
}
