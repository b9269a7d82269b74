//! The turn, in no dialect: what a model answered (text, thinking, tool calls, why it
//! stopped, usage), built by a test and spelled out by each provider's module.

/// Why the model stopped, in no dialect; each dialect spells it its own way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    EndTurn,
    ToolUse,
    MaxTokens,
    Refusal,
    /// Sent as it is (`"pause_turn"`, `"RECITATION"`, …).
    Raw(String),
}

/// One part of a model's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Visible text in pieces. `signature` is Gemini's `thoughtSignature` on a text part (on
    /// the last piece); the other dialects ignore it.
    Text {
        deltas: Vec<String>,
        signature: Option<String>,
    },
    /// Reasoning in pieces, with Anthropic's `signature` (Gemini: the `thoughtSignature` of
    /// the last thought part; OpenAI-compatible servers stream it as `reasoning_content` and
    /// have no signature).
    Thinking {
        deltas: Vec<String>,
        signature: String,
    },
    /// Anthropic's `redacted_thinking` block; the other dialects leave it out.
    RedactedThinking { data: String },
    /// A tool call whose arguments are streamed in `pieces` (Anthropic `input_json_delta`s,
    /// OpenAI `arguments` deltas). Gemini sends a call whole, so there the pieces are joined
    /// and must make JSON. An empty `id` is left out where the dialect allows (Gemini).
    /// `signature` is Gemini's `thoughtSignature` on the call's part.
    ToolCall {
        id: String,
        name: String,
        pieces: Vec<String>,
        signature: Option<String>,
    },
}

/// A model's answer in no dialect, built with the chained methods.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub blocks: Vec<Block>,
    /// `None`: `ToolUse` when the turn has tool calls, else `EndTurn`.
    pub stop: Option<Stop>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub model: String,
}

impl Default for Turn {
    fn default() -> Turn {
        Turn::new()
    }
}

fn strings<I, S>(items: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    items.into_iter().map(Into::into).collect()
}

impl Turn {
    pub fn new() -> Turn {
        Turn {
            blocks: Vec::new(),
            stop: None,
            input_tokens: 12,
            output_tokens: 7,
            model: "test-model".into(),
        }
    }

    /// Text, streamed as `deltas`.
    pub fn text<I, S>(mut self, deltas: I) -> Turn
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.blocks.push(Block::Text {
            deltas: strings(deltas),
            signature: None,
        });
        self
    }

    /// Text whose last part carries Gemini's `thoughtSignature`.
    pub fn signed_text<I, S>(mut self, deltas: I, signature: &str) -> Turn
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.blocks.push(Block::Text {
            deltas: strings(deltas),
            signature: Some(signature.into()),
        });
        self
    }

    /// Reasoning, streamed as `deltas`, signed with `signature`.
    pub fn thinking<I, S>(mut self, deltas: I, signature: &str) -> Turn
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.blocks.push(Block::Thinking {
            deltas: strings(deltas),
            signature: signature.into(),
        });
        self
    }

    /// An Anthropic `redacted_thinking` block.
    pub fn redacted_thinking(mut self, data: &str) -> Turn {
        self.blocks
            .push(Block::RedactedThinking { data: data.into() });
        self
    }

    /// A tool call with its JSON arguments streamed in `pieces`.
    pub fn tool_call<I, S>(mut self, id: &str, name: &str, pieces: I) -> Turn
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.blocks.push(Block::ToolCall {
            id: id.into(),
            name: name.into(),
            pieces: strings(pieces),
            signature: None,
        });
        self
    }

    /// A tool call whose part carries Gemini's `thoughtSignature`.
    pub fn signed_tool_call<I, S>(
        mut self,
        id: &str,
        name: &str,
        pieces: I,
        signature: &str,
    ) -> Turn
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.blocks.push(Block::ToolCall {
            id: id.into(),
            name: name.into(),
            pieces: strings(pieces),
            signature: Some(signature.into()),
        });
        self
    }

    pub fn stop(mut self, stop: Stop) -> Turn {
        self.stop = Some(stop);
        self
    }

    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Turn {
        self.input_tokens = input_tokens;
        self.output_tokens = output_tokens;
        self
    }

    fn has_tool_calls(&self) -> bool {
        self.blocks
            .iter()
            .any(|b| matches!(b, Block::ToolCall { .. }))
    }

    pub(super) fn stop_or_default(&self) -> Stop {
        self.stop.clone().unwrap_or(if self.has_tool_calls() {
            Stop::ToolUse
        } else {
            Stop::EndTurn
        })
    }
}
