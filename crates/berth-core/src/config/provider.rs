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

    /// Every variable a key of it is in, for berth and for the agents that call it
    /// (claude-agent-acp, codex, gemini): [`ProviderKind::key_variables`] first, then the
    /// agents' own. berth's sandbox keeps these from an agent, or masks them.
    pub fn agent_key_variables(self) -> &'static [&'static str] {
        match self {
            ProviderKind::Claude => &[
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "CLAUDE_CODE_OAUTH_TOKEN",
            ],
            ProviderKind::Openai => &["OPENAI_API_KEY", "CODEX_API_KEY"],
            ProviderKind::Gemini => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        }
    }

    /// The variable its clients (and the agents that call it) read its base URL from.
    pub fn base_url_variable(self) -> &'static str {
        match self {
            ProviderKind::Claude => "ANTHROPIC_BASE_URL",
            ProviderKind::Openai => "OPENAI_BASE_URL",
            ProviderKind::Gemini => "GOOGLE_GEMINI_BASE_URL",
        }
    }

    /// Where it is called when its `base_url` is not set, as its clients read
    /// [`ProviderKind::base_url_variable`] (OpenAI's ends in `/v1`): berth-llm's wire formats
    /// call it there.
    pub const fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Claude => "https://api.anthropic.com",
            ProviderKind::Openai => "https://api.openai.com/v1",
            ProviderKind::Gemini => "https://generativelanguage.googleapis.com",
        }
    }

    /// Where its API is, scheme and host (its default base URL without a path): what an agent
    /// that calls it may reach.
    pub fn origin(self) -> &'static str {
        let url = self.default_base_url();
        let host_start = url.find("://").map_or(0, |i| i + 3);
        match url[host_start..].find('/') {
            Some(path) => &url[..host_start + path],
            None => url,
        }
    }

    /// Its table in the config, `providers.claude`.
    pub fn table(self) -> &'static str {
        match self {
            ProviderKind::Claude => "providers.claude",
            ProviderKind::Openai => "providers.openai",
            ProviderKind::Gemini => "providers.gemini",
        }
    }

    /// The names of all, for a message: "claude, openai and gemini".
    pub fn names() -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|k| k.as_str()).collect();
        match names.split_last() {
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_providers_facts_agree() {
        for kind in ProviderKind::ALL {
            // berth's own key variables are the agents' first ones, in the same order.
            let own = kind.key_variables();
            assert_eq!(&kind.agent_key_variables()[..own.len()], own, "{kind}");
            assert_eq!(kind.table(), format!("providers.{kind}"));
            assert_eq!(kind.as_str().parse::<ProviderKind>().unwrap(), kind);
            assert!(kind.origin().starts_with("https://"), "{kind}");
            assert!(kind.default_base_url().starts_with(kind.origin()), "{kind}");
        }
        assert_eq!(ProviderKind::names(), "claude, openai and gemini");
        assert_eq!(ProviderKind::Openai.origin(), "https://api.openai.com");
        assert_eq!(
            ProviderKind::Gemini.origin(),
            ProviderKind::Gemini.default_base_url()
        );
    }
}
