//! Layered configuration: global `config.toml` → workspace `config.toml` → environment.
//!
//! Tables merge recursively; scalars and arrays replace. Each file is checked on its own first,
//! so a syntax error, a value of the wrong type or an unknown key is reported against the file
//! (and line) it came from rather than against an anonymous merged blob. Secrets are held in
//! [`Secret`], which never prints or serializes its value.

mod layer;
mod layered;
mod notify;
mod provider;
mod sandbox;
mod secret;
mod settings;
mod template;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub use layer::{LoadedConfig, UnknownKey, layer};
pub use layered::Layered;
pub use notify::{NotifyEvent, NotifyFormat, NotifySettings};
pub use provider::{ProviderKind, ProviderSettings, Providers};
pub use sandbox::{SandboxFallback, SandboxMode, SandboxNetwork, SandboxSettings};
pub use secret::Secret;
pub use settings::{
    AgentEntry, AgentSettings, GitSettings, McpServerSettings, McpSettings, PoolSettings,
    PortSettings, Price, RunSettings, ServeSettings, StoreSettings,
};
pub use template::TEMPLATE;

/// The raw text of one config file and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigText {
    pub origin: PathBuf,
    pub text: String,
}

/// The merged configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Which provider the agent calls; default `claude`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderKind>,
    /// A model that overrides the provider's own `model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub providers: Providers,
    pub git: GitSettings,
    pub store: StoreSettings,
    pub agent: AgentSettings,
    pub mcp: McpSettings,
    pub ports: PortSettings,
    pub run: RunSettings,
    pub pool: PoolSettings,
    pub sandbox: SandboxSettings,
    pub serve: ServeSettings,
    /// What models cost, by model name (`[prices."claude-sonnet-4-5"]`): berth ships no
    /// prices (they change); a model not in the table has no cost shown.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub prices: std::collections::BTreeMap<String, Price>,
    /// External MCP servers for berth's agent (`[[mcp_servers]]`). An array: a higher layer's
    /// list replaces a lower one's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<McpServerSettings>,
    /// Where to tell people what needs them and what is done (`[[notify]]`). An array: a
    /// higher layer's list replaces a lower one's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notify: Vec<NotifySettings>,
    /// ACP agents a run can start by name (`[agents.NAME]`), besides the built-in ones.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub agents: std::collections::BTreeMap<String, AgentEntry>,
}

impl Config {
    pub fn provider(&self) -> ProviderKind {
        self.provider.unwrap_or(ProviderKind::Claude)
    }

    pub fn provider_settings(&self, kind: ProviderKind) -> &ProviderSettings {
        match kind {
            ProviderKind::Claude => &self.providers.claude,
            ProviderKind::Openai => &self.providers.openai,
            ProviderKind::Gemini => &self.providers.gemini,
        }
    }

    /// The model actually called: top-level `model`, else the provider's `model`, else the
    /// provider's default.
    pub fn model(&self) -> &str {
        let kind = self.provider();
        self.model
            .as_deref()
            .or(self.provider_settings(kind).model.as_deref())
            .unwrap_or(kind.default_model())
    }
}

impl Config {
    /// What `usage` of `model` cost, in US dollars, when `[prices]` knows the model.
    pub fn cost(&self, model: &str, usage: crate::model::TokenUsage) -> Option<f64> {
        self.prices.get(model).map(|p| p.cost(usage))
    }

    /// Every price a number of dollars, none negative.
    fn check_prices(&self) -> Result<()> {
        for (model, price) in &self.prices {
            for (what, value) in [("input", price.input), ("output", price.output)] {
                if !value.is_finite() || value < 0.0 {
                    return Err(Error::Config(format!(
                        "[prices.\"{model}\"] {what} must be a price in US dollars per million tokens, 0 or more, not {value}"
                    )));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A config file's text from `origin`, for tests here and in `config/`.
    pub(crate) fn text(origin: &str, text: &str) -> ConfigText {
        ConfigText {
            origin: PathBuf::from(origin),
            text: text.to_owned(),
        }
    }

    #[test]
    fn workspace_overrides_global_and_tables_merge() {
        let g = text(
            "g.toml",
            "provider = \"claude\"\n[providers.gemini]\nmodel = \"a\"\nbase_url = \"u\"\n",
        );
        let w = text(
            "w.toml",
            "provider = \"gemini\"\n[providers.gemini]\nmodel = \"b\"\n",
        );
        let loaded = layer(Some(&g), Some(&w), []).unwrap();
        assert_eq!(loaded.config.provider(), ProviderKind::Gemini);
        assert_eq!(loaded.config.model(), "b");
        assert_eq!(
            loaded.config.providers.gemini.base_url.as_deref(),
            Some("u")
        );
        assert!(loaded.unknown_keys.is_empty());
    }

    #[test]
    fn arrays_replace_rather_than_append() {
        let g = text("g.toml", "[git]\ncopy = [\".env\", \"a\"]\n");
        let w = text("w.toml", "[git]\ncopy = [\"b\"]\n");
        assert_eq!(
            layer(Some(&g), Some(&w), []).unwrap().config.git.copy,
            vec!["b"]
        );
    }

    #[test]
    fn environment_is_the_top_layer() {
        let w = text("w.toml", "provider = \"gemini\"\n");
        let env = vec![
            ("BERTH_PROVIDER".to_owned(), "openai".to_owned()),
            ("OPENAI_API_KEY".to_owned(), "sk-123".to_owned()),
            ("GOOGLE_API_KEY".to_owned(), "g-1".to_owned()),
            (
                "BERTH_PROVIDERS__CLAUDE__MAX_TOKENS".to_owned(),
                "100".to_owned(),
            ),
            ("BERTH_HOME".to_owned(), "/x".to_owned()),
            ("PATH".to_owned(), "/bin".to_owned()),
        ];
        let c = layer(None, Some(&w), env).unwrap().config;
        assert_eq!(c.provider(), ProviderKind::Openai);
        assert_eq!(
            c.providers.openai.api_key.as_ref().unwrap().expose(),
            "sk-123"
        );
        assert_eq!(c.providers.gemini.api_key.as_ref().unwrap().expose(), "g-1");
        assert_eq!(c.providers.claude.max_tokens, Some(100));
    }

    #[test]
    fn gemini_key_wins_over_google_key() {
        let env = vec![
            ("GOOGLE_API_KEY".to_owned(), "google".to_owned()),
            ("GEMINI_API_KEY".to_owned(), "gemini".to_owned()),
        ];
        let c = layer(None, None, env).unwrap().config;
        assert_eq!(c.providers.gemini.api_key.unwrap().expose(), "gemini");
    }

    #[test]
    fn unknown_keys_are_reported_with_their_origin() {
        let g = text(
            "g.toml",
            "provder = \"x\"\n[providers.claude]\nmodle = \"m\"\n",
        );
        let env = vec![("BERTH_COLOUR".to_owned(), "red".to_owned())];
        let loaded = layer(Some(&g), None, env).unwrap();
        let keys: Vec<_> = loaded.unknown_keys.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(keys, vec!["provder", "providers.claude.modle", "colour"]);
        assert_eq!(loaded.unknown_keys[0].origin, "g.toml");
        assert!(loaded.unknown_keys[2].origin.contains("BERTH_COLOUR"));
    }

    #[test]
    fn syntax_error_is_corrupt_with_line_and_no_secret() {
        let g = text(
            "g.toml",
            "[providers.claude]\napi_key = \"sk-secret\nmodel = 1\n",
        );
        let err = layer(Some(&g), None, []).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Corrupt { line: Some(2), .. }), "{msg}");
        assert!(msg.contains("g.toml"), "{msg}");
        assert!(!msg.contains("sk-secret"), "{msg}");
    }

    #[test]
    fn type_error_names_file_and_line() {
        let g = text("g.toml", "\n\nprovider = \"nope\"\n");
        let msg = layer(Some(&g), None, []).unwrap_err().to_string();
        assert!(msg.contains("g.toml line 3"), "{msg}");
    }

    #[test]
    fn secrets_never_print() {
        let env = vec![("ANTHROPIC_API_KEY".to_owned(), "sk-ant-xyz".to_owned())];
        let c = layer(None, None, env).unwrap().config;
        assert!(!format!("{c:?}").contains("sk-ant-xyz"));
        assert!(!toml::to_string(&c).unwrap().contains("sk-ant-xyz"));
        assert!(!serde_json::to_string(&c).unwrap().contains("sk-ant-xyz"));
    }

    #[test]
    fn the_store_url_has_its_own_variable() {
        let env = [(
            "BERTH_STORE_URL".to_owned(),
            "postgres://u:pw@h/db".to_owned(),
        )];
        let loaded = layer(None, None, env).unwrap();
        assert!(loaded.unknown_keys.is_empty(), "{:?}", loaded.unknown_keys);
        let url = loaded.config.store.url.unwrap();
        assert_eq!(url.expose(), "postgres://u:pw@h/db");
    }

    #[test]
    fn ports_default_and_are_checked() {
        let c = layer(None, None, []).unwrap().config;
        assert_eq!(
            c.ports.range(),
            crate::PortRange {
                first: 20000,
                last: 29999,
                block: 10
            }
        );
        let env = [("BERTH_PORTS__BLOCK".to_owned(), "4".to_owned())];
        let w = text("w.toml", "[ports]\nfirst = 30000\nlast = 30003\n");
        let c = layer(None, Some(&w), env).unwrap().config;
        assert_eq!(c.ports.range().block, 4);
        for (bad, says) in [
            (
                "[ports]\nfirst = 30000\nlast = 29999\n",
                "above [ports] last",
            ),
            ("[ports]\nblock = 0\n", "block must be at least 1"),
            (
                "[prices.m]\ninput = -1.0\noutput = 2.0\n",
                "0 or more, not -1",
            ),
            ("[ports]\nfirst = 0\n", "first must be at least 1"),
            (
                "[ports]\nfirst = 100\nlast = 104\nblock = 6\n",
                "fewer than one",
            ),
            (
                "[run]\nmax_line_mib = 0\n",
                "max_line_mib must be 1 to 1024",
            ),
            ("[run]\nmax_line_mib = 4096\n", "not 4096"),
        ] {
            let err = layer(Some(&text("g.toml", bad)), None, []).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::Invalid, "{err}");
            assert!(err.to_string().contains(says), "{bad}: {err}");
        }
        // Not a port number: a type error naming the file and line.
        let err = layer(Some(&text("g.toml", "[ports]\nlast = 70000\n")), None, []).unwrap_err();
        assert!(err.to_string().contains("g.toml line 2"), "{err}");
    }

    #[test]
    fn the_ports_berth_hands_out_are_not_config() {
        let env = [
            ("BERTH_PORT".to_owned(), "20000".to_owned()),
            ("BERTH_PORT_1".to_owned(), "20001".to_owned()),
            ("BERTH_PORT_X".to_owned(), "1".to_owned()),
        ];
        let loaded = layer(None, None, env).unwrap();
        let keys: Vec<_> = loaded.unknown_keys.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(keys, ["port_x"]);
    }

    #[test]
    fn template_is_valid_and_complete() {
        let t = text("t.toml", TEMPLATE);
        let loaded = layer(Some(&t), None, []).unwrap();
        assert_eq!(loaded.config, Config::default());
        // Uncommenting every key must give a config with no unknown keys.
        let uncommented: String = TEMPLATE
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest) if rest.contains(" = ") || rest.starts_with('[') => {
                    rest.split("  ").next().unwrap().to_owned()
                }
                _ => l.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        let loaded = layer(Some(&text("u.toml", &uncommented)), None, []).unwrap();
        assert!(loaded.unknown_keys.is_empty(), "{:?}", loaded.unknown_keys);
        assert_eq!(loaded.config.git.setup, vec!["npm ci"]);
        assert_eq!(loaded.config.ports.block, Some(10));
        assert_eq!(loaded.config.run.max_agents.map(|n| n.get()), Some(4));
        assert_eq!(loaded.config.run.max_line_mib(), 64);
        assert_eq!(loaded.config.sandbox.mode, SandboxMode::On);
        assert_eq!(loaded.config.sandbox.deny_read, ["~/private"]);
        let usage = crate::model::TokenUsage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
        };
        assert_eq!(loaded.config.cost("claude-sonnet-4-5", usage), Some(4.5));
        assert_eq!(loaded.config.cost("gpt-4.1", usage), None);
        let servers = &loaded.config.mcp_servers;
        assert_eq!(servers.len(), 2, "{servers:?}");
        assert_eq!(servers[0].args, ["mcp"]);
        assert_eq!(servers[1].url.as_deref(), Some("http://127.0.0.1:8080/mcp"));
    }
}
