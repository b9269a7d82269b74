//! Which models a session can call, shared by every front end that lets a person switch (ACP's
//! model option, `berth chat`'s `/model`): the one the workspace's config names, the other
//! providers that have a key, and what a name a person types means.

use std::fmt;

use berth_core::config::Config;
use berth_ops::ProviderKind;

use crate::runtime::ModelChoice;

const PROVIDERS: [ProviderKind; 3] = [
    ProviderKind::Claude,
    ProviderKind::Openai,
    ProviderKind::Gemini,
];

impl ModelChoice {
    /// What the config names: its provider and the model it calls.
    pub fn configured(config: &Config) -> ModelChoice {
        ModelChoice {
            provider: config.provider(),
            model: config.model().to_owned(),
        }
    }

    /// Every model the config can call: the configured one first, then the model of each other
    /// provider that has a key.
    pub fn choices(config: &Config) -> Vec<ModelChoice> {
        let mut out = vec![ModelChoice::configured(config)];
        for kind in PROVIDERS {
            let settings = config.provider_settings(kind);
            let has_key = settings
                .api_key
                .as_ref()
                .is_some_and(|k| !k.expose().is_empty());
            if kind == config.provider() || !has_key {
                continue;
            }
            out.push(ModelChoice {
                provider: kind,
                model: provider_model(config, kind),
            });
        }
        out
    }

    /// The model a person names, switching from `current`:
    ///
    /// - `provider/model` (`openai/gpt-4.1`) when the part before the first `/` is a provider;
    /// - a provider alone (`gemini`): that provider with the model the config names for it,
    ///   else its default;
    /// - anything else is a model of the current provider, `/` included (an OpenAI-compatible
    ///   server's `library/qwen2.5`).
    ///
    /// Whether the provider has a key is not checked here: a turn that starts says so.
    pub fn parse(text: &str, current: &ModelChoice, config: &Config) -> berth_ops::Result<Self> {
        let text = text.trim();
        if text.is_empty() || text.chars().any(char::is_whitespace) {
            return Err(berth_ops::Error::invalid(format!(
                "{text:?} is not a model name: give a model (claude-sonnet-4-5), a provider \
                 (gemini) or both (openai/gpt-4.1)"
            )));
        }
        if let Some((provider, model)) = text.split_once('/')
            && let Ok(kind) = provider.parse::<ProviderKind>()
        {
            if model.is_empty() {
                return Err(berth_ops::Error::invalid(format!(
                    "{text:?} names no model after the provider"
                )));
            }
            return Ok(ModelChoice {
                provider: kind,
                model: model.to_owned(),
            });
        }
        if let Ok(kind) = text.parse::<ProviderKind>() {
            let model = if kind == config.provider() {
                config.model().to_owned()
            } else {
                provider_model(config, kind)
            };
            return Ok(ModelChoice {
                provider: kind,
                model,
            });
        }
        Ok(ModelChoice {
            provider: current.provider,
            model: text.to_owned(),
        })
    }
}

/// `provider/model`, the way [`ModelChoice::parse`] reads it back.
impl fmt::Display for ModelChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// The model the config names for a provider other than its own, else the provider's default.
fn provider_model(config: &Config, kind: ProviderKind) -> String {
    config
        .provider_settings(kind)
        .model
        .clone()
        .unwrap_or_else(|| kind.default_model().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_core::config::Secret;

    fn config() -> Config {
        let mut c = Config {
            provider: Some(ProviderKind::Claude),
            ..Config::default()
        };
        c.providers.claude.model = Some("claude-x".into());
        c.providers.openai.api_key = Some(Secret::new("k"));
        c.providers.openai.model = Some("gpt-y".into());
        c.providers.gemini.model = Some("gemini-z".into());
        c
    }

    fn choice(provider: ProviderKind, model: &str) -> ModelChoice {
        ModelChoice {
            provider,
            model: model.into(),
        }
    }

    #[test]
    fn choices_are_the_configured_model_and_providers_with_a_key() {
        let c = config();
        assert_eq!(
            ModelChoice::choices(&c),
            vec![
                choice(ProviderKind::Claude, "claude-x"),
                choice(ProviderKind::Openai, "gpt-y")
            ]
        );
    }

    #[test]
    fn a_name_is_a_model_a_provider_or_both() {
        let c = config();
        let current = choice(ProviderKind::Openai, "gpt-y");
        let parse = |t: &str| ModelChoice::parse(t, &current, &c).unwrap();
        assert_eq!(parse("gpt-5"), choice(ProviderKind::Openai, "gpt-5"));
        assert_eq!(parse(" gpt-5 "), choice(ProviderKind::Openai, "gpt-5"));
        assert_eq!(
            parse("claude/claude-opus"),
            choice(ProviderKind::Claude, "claude-opus")
        );
        assert_eq!(
            parse("anthropic/claude-opus"),
            choice(ProviderKind::Claude, "claude-opus")
        );
        assert_eq!(parse("gemini"), choice(ProviderKind::Gemini, "gemini-z"));
        assert_eq!(parse("claude"), choice(ProviderKind::Claude, "claude-x"));
        // Not a provider before the slash: a model of the current provider.
        assert_eq!(
            parse("library/qwen2.5"),
            choice(ProviderKind::Openai, "library/qwen2.5")
        );
        for bad in ["", "  ", "gpt 5", "openai/"] {
            let e = ModelChoice::parse(bad, &current, &c).unwrap_err();
            assert_eq!(e.kind(), berth_ops::ErrorKind::Invalid, "{bad:?}");
        }
    }

    #[test]
    fn display_reads_back() {
        let c = config();
        let m = choice(ProviderKind::Gemini, "gemini-2.5-pro");
        assert_eq!(m.to_string(), "gemini/gemini-2.5-pro");
        let current = ModelChoice::configured(&c);
        assert_eq!(ModelChoice::parse(&m.to_string(), &current, &c).unwrap(), m);
    }
}
