//! The context window: how many tokens a conversation takes (an estimate, per provider), and
//! compaction that makes it fit by dropping the oldest exchanges.
//!
//! Compaction works on units, never on single messages: an assistant message that calls tools
//! and the message carrying their results are one unit, so no request ever carries a tool
//! result without its call (every provider rejects that) or a call without its result. The
//! system prompt, which holds the workspace's context file, is never dropped, and neither is
//! the newest unit (the prompt being answered, or the tool round in progress).

use std::collections::HashSet;

use berth_core::config::ProviderKind;

use crate::conversation::{ChatMessage, Part, Speaker, ToolSpec};

/// The note that takes the place of what was dropped.
pub const DROPPED_NOTE: &str =
    "[Earlier messages of this conversation were left out to fit the context window.]";

/// Tokens an image is counted as: the most any of the providers charges for one.
const IMAGE_TOKENS: u64 = 1_600;

/// A model's context window and how text is counted in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Tokens in the window.
    pub total: u64,
    /// Tokens kept free for the answer.
    pub reserve: u64,
    /// Characters per token, on average, for this provider's tokenizer.
    pub chars_per_token: f64,
}

impl Window {
    /// The window of `kind`'s models (or `tokens`, from config), keeping `max_tokens` free.
    pub fn for_provider(kind: ProviderKind, tokens: Option<u64>, max_tokens: u32) -> Window {
        let (total, chars_per_token) = match kind {
            ProviderKind::Claude => (200_000, 3.5),
            ProviderKind::Openai => (128_000, 4.0),
            ProviderKind::Gemini => (1_000_000, 4.0),
        };
        Window {
            total: tokens.unwrap_or(total),
            reserve: u64::from(max_tokens),
            chars_per_token,
        }
    }

    /// Tokens `chars` characters take, rounded up.
    pub fn tokens(&self, chars: usize) -> u64 {
        (chars as f64 / self.chars_per_token).ceil() as u64
    }

    /// Tokens a message takes: its text, thoughts, calls and results, plus a little framing.
    pub fn message_tokens(&self, message: &ChatMessage) -> u64 {
        let chars: usize = message
            .parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.len(),
                // Providers count an image by its pixels (Claude: width × height / 750, at
                // most about 1,600 tokens); its size is unknown here, so the most it costs.
                Part::Image(_) => (IMAGE_TOKENS as f64 * self.chars_per_token) as usize,
                Part::Thought { text, opaque } => text.len() + opaque.as_ref().map_or(0, json_len),
                Part::ToolCall(c) => {
                    c.name.len()
                        + match &c.arguments {
                            Ok(v) => json_len(v),
                            Err(raw) => raw.len(),
                        }
                }
                Part::ToolResult(r) => r.name.len() + r.content.len(),
            })
            .sum();
        self.tokens(chars) + 4
    }
}

/// The messages to send: `history` as it is when it fits in `window` beside the system prompt
/// and the tool definitions, else without its oldest units and with [`DROPPED_NOTE`] first.
pub fn compact(
    history: &[ChatMessage],
    system: &str,
    tools: &[ToolSpec],
    window: &Window,
) -> Vec<ChatMessage> {
    let units = units(history);
    let fixed = fixed_tokens(system, tools, window);
    let budget = window.total.saturating_sub(window.reserve + fixed);
    let sizes: Vec<u64> = units
        .iter()
        .map(|u| u.iter().map(|m| window.message_tokens(m)).sum())
        .collect();
    let mut total: u64 = sizes.iter().sum();
    let mut first = 0;
    // The newest unit always stays, even alone over the budget: without it there is nothing
    // to answer.
    while total > budget && first + 1 < units.len() {
        total -= sizes[first];
        first += 1;
    }
    let mut out = Vec::new();
    if first > 0 {
        out.push(ChatMessage::user_text(DROPPED_NOTE));
    }
    out.extend(units[first..].iter().flatten().cloned());
    out
}

/// Tokens the system prompt and the tool definitions take in every request.
fn fixed_tokens(system: &str, tools: &[ToolSpec], window: &Window) -> u64 {
    window.tokens(system.len())
        + tools
            .iter()
            .map(|t| window.tokens(t.name.len() + t.description.len() + json_len(&t.parameters)))
            .sum::<u64>()
}

/// The length of `value` written as JSON, counted without writing it: estimates run on every
/// request of a turn, over every tool's schema and every call of the history.
fn json_len(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` cannot fail, and `Count` never does.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// How full the window is: what a request would carry of a conversation, estimated (a
/// front end's `/context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fill {
    /// Messages of the conversation.
    pub messages: usize,
    /// Of those, the newest ones that fit; the others would be left out.
    pub in_window: usize,
    /// Estimated tokens of the request: the system prompt, the tool definitions and the
    /// messages in the window (with the note that replaces the others).
    pub tokens: u64,
    /// Tokens in the window.
    pub window: u64,
    /// Of those, the tokens kept free for the answer.
    pub reserve: u64,
}

/// How much of `window` the conversation `history` fills, compacted as a request would be.
pub fn fill(history: &[ChatMessage], system: &str, tools: &[ToolSpec], window: &Window) -> Fill {
    let sent = compact(history, system, tools, window);
    let note = usize::from(history.first() != sent.first() && has_note(&sent));
    Fill {
        messages: history.len(),
        in_window: sent.len() - note,
        tokens: fixed_tokens(system, tools, window)
            + sent.iter().map(|m| window.message_tokens(m)).sum::<u64>(),
        window: window.total,
        reserve: window.reserve,
    }
}

fn has_note(sent: &[ChatMessage]) -> bool {
    sent.first()
        .is_some_and(|m| m.speaker == Speaker::User && m.text() == DROPPED_NOTE)
}

/// `history` cut into units: an assistant message with tool calls together with the message
/// that answers them; every other message alone. Results whose call is not in the unit before
/// them (a history cut by hand) are left out: a result without its call is refused by every
/// provider.
fn units(history: &[ChatMessage]) -> Vec<Vec<ChatMessage>> {
    let mut units: Vec<Vec<ChatMessage>> = Vec::new();
    let mut open_calls: HashSet<&str> = HashSet::new();
    for message in history {
        let has_results = message
            .parts
            .iter()
            .any(|p| matches!(p, Part::ToolResult(_)));
        if message.speaker == Speaker::User && has_results {
            let parts: Vec<Part> = message
                .parts
                .iter()
                .filter(|p| match p {
                    Part::ToolResult(r) => open_calls.contains(r.call_id.as_str()),
                    _ => true,
                })
                .cloned()
                .collect();
            open_calls.clear();
            if parts.is_empty() {
                continue;
            }
            let answered = ChatMessage {
                speaker: Speaker::User,
                parts,
            };
            // Joined to the calls it answers, if they are the unit before.
            match units.last_mut() {
                Some(unit)
                    if unit.len() == 1
                        && unit[0].tool_calls().next().is_some()
                        && answered
                            .parts
                            .iter()
                            .any(|p| matches!(p, Part::ToolResult(_))) =>
                {
                    unit.push(answered)
                }
                _ => units.push(vec![answered]),
            }
            continue;
        }
        open_calls = message.tool_calls().map(|c| c.id.as_str()).collect();
        units.push(vec![message.clone()]);
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{ToolCall, ToolResult};
    use proptest::prelude::*;
    use serde_json::json;

    fn call(id: &str) -> Part {
        Part::ToolCall(ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: Ok(json!({"path": "a"})),
            opaque: None,
        })
    }

    fn result(id: &str, size: usize) -> Part {
        Part::ToolResult(ToolResult {
            call_id: id.into(),
            name: "read_file".into(),
            content: "x".repeat(size),
            is_error: false,
        })
    }

    /// A history of turns: a prompt, some tool rounds of random sizes, an answer.
    fn history() -> impl Strategy<Value = Vec<ChatMessage>> {
        let round = (1usize..4, 0usize..4000).prop_map(|(calls, size)| (calls, size));
        let turn = (
            0usize..2000,
            prop::collection::vec(round, 0..4),
            0usize..2000,
        );
        prop::collection::vec(turn, 1..8).prop_map(|turns| {
            let mut out = Vec::new();
            let mut n = 0;
            for (prompt, rounds, answer) in turns {
                out.push(ChatMessage::user_text("p".repeat(prompt)));
                for (calls, size) in rounds {
                    let ids: Vec<String> = (0..calls)
                        .map(|_| {
                            n += 1;
                            format!("c{n}")
                        })
                        .collect();
                    out.push(ChatMessage {
                        speaker: Speaker::Assistant,
                        parts: ids.iter().map(|i| call(i)).collect(),
                    });
                    out.push(ChatMessage {
                        speaker: Speaker::User,
                        parts: ids.iter().map(|i| result(i, size)).collect(),
                    });
                }
                out.push(ChatMessage::assistant_text("a".repeat(answer)));
            }
            out
        })
    }

    /// Every result's call is in the message right before it, and every call is answered
    /// (except in the newest message, which may be calls awaiting results).
    fn well_formed(messages: &[ChatMessage]) -> Result<(), String> {
        for (i, m) in messages.iter().enumerate() {
            for p in &m.parts {
                if let Part::ToolResult(r) = p {
                    let called = i > 0 && messages[i - 1].tool_calls().any(|c| c.id == r.call_id);
                    if !called {
                        return Err(format!("result {} without its call at {i}", r.call_id));
                    }
                }
            }
            let calls: Vec<&str> = m.tool_calls().map(|c| c.id.as_str()).collect();
            if !calls.is_empty() && i + 1 < messages.len() {
                let next = &messages[i + 1];
                for c in calls {
                    let answered = next
                        .parts
                        .iter()
                        .any(|p| matches!(p, Part::ToolResult(r) if r.call_id == c));
                    if !answered {
                        return Err(format!("call {c} without its result at {i}"));
                    }
                }
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn compaction_never_separates_a_call_from_its_result(
            h in history(),
            total in 100u64..20_000,
        ) {
            let window = Window { total, reserve: 50, chars_per_token: 4.0 };
            let out = compact(&h, "system", &[], &window);
            prop_assert!(well_formed(&out).is_ok(), "{:?}", well_formed(&out));
            // The newest message always survives.
            prop_assert_eq!(out.last(), h.last());
            // Nothing is dropped when it fits; when something is, the note says so.
            let dropped = out.first().map(|m| m.text()) == Some(DROPPED_NOTE.to_owned());
            if !dropped {
                prop_assert_eq!(&out, &h);
            }
        }
    }

    #[test]
    fn a_result_whose_call_was_cut_away_is_left_out() {
        let h = vec![
            ChatMessage {
                speaker: Speaker::User,
                parts: vec![result("gone", 3)],
            },
            ChatMessage::user_text("hello"),
        ];
        let window = Window::for_provider(ProviderKind::Claude, None, 1000);
        assert_eq!(
            compact(&h, "", &[], &window),
            vec![ChatMessage::user_text("hello")]
        );
    }

    #[test]
    fn fill_counts_what_a_request_would_carry() {
        let window = Window {
            total: 1500,
            reserve: 100,
            chars_per_token: 4.0,
        };
        let empty = fill(&[], "sys!", &[], &window);
        assert_eq!(
            empty,
            Fill {
                messages: 0,
                in_window: 0,
                tokens: 1,
                window: 1500,
                reserve: 100
            }
        );
        let small = vec![
            ChatMessage::user_text("a".repeat(40)),
            ChatMessage::assistant_text("b".repeat(40)),
        ];
        let f = fill(&small, "", &[], &window);
        assert_eq!((f.messages, f.in_window, f.tokens), (2, 2, 28));
        let big = vec![
            ChatMessage::user_text("a".repeat(4000)),
            ChatMessage::assistant_text("b".repeat(4000)),
            ChatMessage::user_text("now"),
        ];
        let f = fill(&big, "", &[], &window);
        // The oldest message is left out; the note that replaces it is not counted.
        assert_eq!((f.messages, f.in_window), (3, 2), "{f:?}");
        assert!(f.tokens < window.total - window.reserve, "{f:?}");
    }

    #[test]
    fn the_oldest_units_go_first() {
        let h = vec![
            ChatMessage::user_text("a".repeat(4000)),
            ChatMessage::assistant_text("b".repeat(4000)),
            ChatMessage::user_text("now"),
        ];
        let window = Window {
            total: 1500,
            reserve: 100,
            chars_per_token: 4.0,
        };
        let out = compact(&h, "", &[], &window);
        assert_eq!(out[0].text(), DROPPED_NOTE);
        assert_eq!(out.last().unwrap().text(), "now");
        assert_eq!(out.len(), 3, "{out:?}");
    }
}
