//! The LLM providers berth's agent can call (`provider`, `[providers.X]`), and the model each
//! calls when no layer names one.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Secret;

/// The LLM providers berth's agent can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    #[serde(alias = "anthropic")]
    Claude,
    Openai,
    #[serde(alias = "google")]
    Gemini,
}

impl std::str::FromStr for ProviderKind {
    type Err = crate::InvalidInput;

    /// The names config files take, aliases included (`anthropic`, `google`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "claude" | "anthropic" => Ok(ProviderKind::Claude),
            "openai" => Ok(ProviderKind::Openai),
            "gemini" | "google" => Ok(ProviderKind::Gemini),
            _ => Err(crate::InvalidInput::new(
                "provider",
                s,
                "must be claude (or anthropic), openai, or gemini (or google)",
            )),
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Each provider's facts, once: its name (and its table, `[providers.NAME]`), the variables its
/// key is read from, and its default model. Its default base URL is its wire format's
/// (berth-llm), and berth-agent's `providers::default_base_url` names it.
impl ProviderKind {
    pub const ALL: [ProviderKind; 3] = [
        ProviderKind::Claude,
        ProviderKind::Openai,
        ProviderKind::Gemini,
    ];

    /// The name, and the table of its settings: `[providers.claude]`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Claude => "claude",
            ProviderKind::Openai => "openai",
            ProviderKind::Gemini => "gemini",
        }
    }

    /// The variables its key is read from, by their conventional names: the first wins when
    /// several are set (`GOOGLE_API_KEY` counts only without `GEMINI_API_KEY`).
    pub fn key_variables(self) -> &'static [&'static str] {
        match self {
            ProviderKind::Claude => &["ANTHROPIC_API_KEY"],
            ProviderKind::Openai => &["OPENAI_API_KEY"],
            ProviderKind::Gemini => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        }
    }

    /// The variable a message names when its key is missing.
    pub fn key_variable(self) -> &'static str {
        self.key_variables()[0]
    }

    /// The model used when no layer names one.
    pub fn default_model(self) -> &'static str {
        match self {
            ProviderKind::Claude => "claude-sonnet-4-5",
            ProviderKind::Openai => "gpt-4.1",
            ProviderKind::Gemini => "gemini-2.5-flash",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<Secret>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Providers {
    pub claude: ProviderSettings,
    pub openai: ProviderSettings,
    pub gemini: ProviderSettings,
}
