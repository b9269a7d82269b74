//! What berth holds of an ACP agent's turn while it runs, bounded whatever the agent sends:
//! the answer is written to the transcript in pieces of about [`ANSWER_PIECE`] as it
//! streams; an event carries at most [`EVENT_TEXT`] of one chunk (the transcript has the
//! rest); a tool call not yet over keeps at most [`CALL_TEXT`] of its input, its output and
//! its content each, and at most [`OPEN_CALLS`] are kept at once.

use agent_client_protocol::v1::schema::{ContentBlock, ToolCallContent};

/// The answer's text held before it is written to the transcript: a longer answer is
/// written as several messages, each about this long (one chunk is never split).
pub(super) const ANSWER_PIECE: usize = 1 << 20;

/// Of one chunk of the answer, what its event carries (`run logs`, the dashboard).
pub(super) const EVENT_TEXT: usize = 1 << 20;

/// Of a tool call's input, output and content, what its record keeps of each.
pub(super) const CALL_TEXT: usize = 64 * 1024;

/// Of a tool call's title or name, what is kept and shown.
pub(super) const CALL_NAME: usize = 1024;

/// Tool calls not yet over that are kept at once; the agent's next ones are shown but not
/// recorded until some end.
pub(super) const OPEN_CALLS: usize = 64;

/// `text` cut to at most `max` bytes (at a character boundary), saying how much was cut,
/// and its memory given back.
pub(super) fn clip(mut text: String, max: usize, cut_says: &str) -> String {
    if text.len() <= max {
        return text;
    }
    let mut at = max;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let cut = text.len() - at;
    text.truncate(at);
    text.push_str(&format!("\n[berth: {cut} more bytes {cut_says}]\n"));
    text.shrink_to_fit();
    text
}

/// `text` in consecutive pieces of at most `max` bytes (at least one character each).
pub(super) fn pieces(text: &str, max: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut at = rest.len().min(max);
        while !rest.is_char_boundary(at) {
            at -= 1;
        }
        if at == 0 {
            at = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        let (piece, after) = rest.split_at(at);
        rest = after;
        Some(piece)
    })
}

/// What the event of one chunk of the answer carries: the chunk, or its first
/// [`EVENT_TEXT`] bytes.
pub(super) fn event_text(chunk: &str) -> String {
    let mut at = chunk.len().min(EVENT_TEXT);
    while !chunk.is_char_boundary(at) {
        at -= 1;
    }
    let mut shown = chunk[..at].to_owned();
    if at < chunk.len() {
        shown.push_str(&format!(
            "\n[berth: {} more bytes of this piece are in the session's transcript]\n",
            chunk.len() - at
        ));
    }
    shown
}

/// What the agent said of one tool call so far, each part clipped as it arrives.
#[derive(Default)]
pub(super) struct Call {
    pub title: String,
    pub name: Option<String>,
    /// Its input, as JSON.
    pub input: Option<String>,
    /// Its raw output, the record's output when it has no content.
    pub output: Option<String>,
    /// Its content's text, what its diffs and terminals were.
    pub content: Option<String>,
}

impl Call {
    pub fn set_title(&mut self, title: String) {
        self.title = clip(title, CALL_NAME, "of its title");
    }

    pub fn set_name(&mut self, name: Option<String>) {
        if let Some(name) = name {
            self.name = Some(clip(name, CALL_NAME, "of its name"));
        }
    }

    pub fn set_input(&mut self, input: Option<serde_json::Value>) {
        if let Some(input) = input {
            self.input = Some(clip(input.to_string(), CALL_TEXT, "of its input"));
        }
    }

    pub fn set_output(&mut self, output: Option<serde_json::Value>) {
        if let Some(output) = output {
            let text = match output {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            self.output = Some(clip(text, CALL_TEXT, "of its output"));
        }
    }

    /// Its content's text: text blocks as they are, a diff or a terminal named.
    pub fn set_content(&mut self, content: Vec<ToolCallContent>) {
        let mut parts = Vec::new();
        for c in content {
            match c {
                ToolCallContent::Content(c) => {
                    if let ContentBlock::Text(t) = c.content {
                        parts.push(t.text);
                    }
                }
                ToolCallContent::Diff(d) => {
                    parts.push(format!("(a change of {})", d.path.display()))
                }
                ToolCallContent::Terminal(t) => {
                    parts.push(format!("(terminal {})", t.terminal_id.0))
                }
                _ => {}
            }
            if parts.iter().map(String::len).sum::<usize>() > CALL_TEXT {
                break;
            }
        }
        self.content = Some(clip(parts.join("\n"), CALL_TEXT, "of its content"));
    }

    /// The call's output as the record keeps it: its content, else its raw output.
    pub fn output_text(&self) -> String {
        match (&self.content, &self.output) {
            (Some(content), _) if !content.is_empty() => content.clone(),
            (_, Some(output)) => output.clone(),
            _ => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_is_clipped_at_a_character_and_says_so() {
        assert_eq!(clip("short".into(), 10, "x"), "short");
        let clipped = clip("ééééé".into(), 5, "of it");
        assert_eq!(clipped, "éé\n[berth: 6 more bytes of it]\n");
        let shown = event_text(&"a".repeat(EVENT_TEXT + 3));
        assert!(shown.starts_with(&"a".repeat(EVENT_TEXT)));
        assert!(shown.ends_with("3 more bytes of this piece are in the session's transcript]\n"));
        assert_eq!(event_text("whole"), "whole");
        let split: Vec<&str> = pieces("aéb€c", 3).collect();
        assert_eq!(split, ["aé", "b", "€", "c"]);
        assert_eq!(split.concat(), "aéb€c");
    }

    #[test]
    fn a_call_keeps_a_bounded_record() {
        let mut call = Call::default();
        call.set_title("t".repeat(CALL_NAME * 2));
        call.set_input(Some(
            serde_json::json!({ "text": "i".repeat(CALL_TEXT * 2) }),
        ));
        call.set_output(Some(serde_json::Value::String("o".repeat(CALL_TEXT * 2))));
        assert!(call.title.len() < CALL_NAME + 64);
        assert!(call.input.as_ref().unwrap().len() < CALL_TEXT + 64);
        assert!(call.output_text().starts_with("ooo"));
        assert!(call.output_text().len() < CALL_TEXT + 64);
    }
}
