//! The conversation as berth's agent keeps it, in no provider's dialect: messages made of parts
//! (text, images, thoughts, tool calls, tool results). Each provider translates it to its own wire
//! format and back; opaque provider state (signed thinking, Gemini's `thoughtSignature`)
//! travels in the parts untouched, so it is sent back exactly as received.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said it. Tool results are sent as the user's, as every dialect does in some form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Speaker {
    User,
    Assistant,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub speaker: Speaker,
    pub parts: Vec<Part>,
}

impl ChatMessage {
    pub fn user_text(text: impl Into<String>) -> ChatMessage {
        ChatMessage {
            speaker: Speaker::User,
            parts: vec![Part::Text(text.into())],
        }
    }

    pub fn assistant_text(text: impl Into<String>) -> ChatMessage {
        ChatMessage {
            speaker: Speaker::Assistant,
            parts: vec![Part::Text(text.into())],
        }
    }

    /// The message's text parts, joined.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// A person's message: the images first (the order every provider recommends), then the
    /// text.
    pub fn user_with_images(text: impl Into<String>, images: &[Image]) -> ChatMessage {
        let mut parts: Vec<Part> = images.iter().cloned().map(Part::Image).collect();
        parts.push(Part::Text(text.into()));
        ChatMessage {
            speaker: Speaker::User,
            parts,
        }
    }

    /// The tool calls this (assistant) message makes.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall(c) => Some(c),
            _ => None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Part {
    Text(String),
    /// A picture a person attached to their prompt.
    Image(Image),
    /// The model's reasoning. `opaque` is provider state that must be sent back verbatim
    /// (Anthropic's `signature` or a `redacted_thinking` block's data, Gemini's
    /// `thoughtSignature`).
    Thought {
        text: String,
        opaque: Option<Value>,
    },
    ToolCall(ToolCall),
    ToolResult(ToolResult),
}

/// An image as the model is sent it: base64 data of one of [`Image::MIME_TYPES`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    pub mime_type: String,
    /// Standard base64 (with padding), as ACP and every provider's API carry it.
    pub data: String,
}

impl Image {
    /// The image types Claude, GPT and Gemini all take.
    pub const MIME_TYPES: [&'static str; 4] =
        ["image/png", "image/jpeg", "image/gif", "image/webp"];

    /// The largest image berth sends: Anthropic's limit per image, the lowest of the three.
    pub const MAX_BYTES: usize = 5 * 1024 * 1024;

    /// An image checked as far as berth can without decoding it: a type every provider takes,
    /// base64 text, and at most [`Image::MAX_BYTES`] once decoded. The message says what to
    /// send instead.
    pub fn new(mime_type: &str, data: &str) -> Result<Image, String> {
        let mime_type = mime_type.trim().to_ascii_lowercase();
        if !Image::MIME_TYPES.contains(&mime_type.as_str()) {
            return Err(format!(
                "images of type {mime_type:?} cannot be sent to the model; send PNG, JPEG, GIF or WebP"
            ));
        }
        let data: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        let trimmed = data.trim_end_matches('=');
        if data.is_empty()
            || data.len() - trimmed.len() > 2
            || !trimmed
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        {
            return Err("the image's data is not base64".to_owned());
        }
        let bytes = trimmed.len() * 3 / 4;
        if bytes > Image::MAX_BYTES {
            return Err(format!(
                "the image is {:.1} MB; the model takes images of at most 5 MB",
                bytes as f64 / 1e6
            ));
        }
        Ok(Image { mime_type, data })
    }

    /// Its size once decoded, in bytes.
    pub fn decoded_len(&self) -> usize {
        self.data.trim_end_matches('=').len() * 3 / 4
    }
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (Gemini may give none; the provider then makes one).
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them. When they are not valid JSON, `Err` holds the raw
    /// text, which is reported back to the model as an error result, never run.
    pub arguments: Result<Value, String>,
    /// Provider state attached to the call (Gemini's `thoughtSignature`), sent back verbatim.
    pub opaque: Option<Value>,
}

/// The result of a tool call, tied to its call by id (and by name, for Gemini).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub name: String,
    pub content: String,
    /// The tool failed or was refused: the model sees an error, never a success.
    pub is_error: bool,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its answer.
    EndTurn,
    /// It wants tool results before going on.
    ToolUse,
    /// It ran out of output tokens.
    MaxTokens,
    /// It refused, or a safety filter stopped it.
    Refusal,
    /// Anything else the provider said, as it said it.
    Other(String),
}

/// Tokens counted by the provider, where it counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// A tool as the model is told of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// The JSON schema of the arguments (an object schema).
    pub parameters: Value,
}
