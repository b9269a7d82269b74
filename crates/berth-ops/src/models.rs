//! The model a session calls: one choice per session, held in one place and resolved by one
//! function, for every front end (interactive chat's `/model`, `chat -p`, ACP's model option,
//! and whatever comes next).
//!
//! - **Where it is held.** A session follows its workspace's merged config until a person
//!   chooses another model for it; that choice is kept in the session's storage
//!   (`.berth/model`, one line `provider/model`), so any later process, any front end, calls
//!   it too. The session record's `provider`/`model` say what the session was created with;
//!   nothing reads them to decide what to call.
//! - **How it is resolved.** [`Ops::session_model`]: the kept choice while the config still
//!   offers its provider (the configured provider, or one with a key), else the configured
//!   model, with [`SessionModel::warning`] saying that the kept choice was set aside.
//! - **What a typed name means.** [`ModelChoice::parse`].

use std::fmt;

use berth_core::config::{Config, ProviderKind};
use berth_core::{Found, Session, StoragePath, StorageScope};

use crate::Ops;
use crate::error::{Error, Result};

/// A provider and one of its models.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelChoice {
    pub provider: ProviderKind,
    pub model: String,
}

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
        for kind in ProviderKind::ALL {
            if kind == config.provider() || !has_key(config, kind) {
                continue;
            }
            out.push(ModelChoice {
                provider: kind,
                model: provider_model(config, kind),
            });
        }
        out
    }

    /// Whether the config still offers this choice: its provider is the configured one or has
    /// a key. Any model of such a provider counts (a person may type one the list does not
    /// show); a provider whose key is gone does not.
    pub fn offered_by(&self, config: &Config) -> bool {
        self.provider == config.provider() || has_key(config, self.provider)
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
    pub fn parse(text: &str, current: &ModelChoice, config: &Config) -> Result<Self> {
        let text = text.trim();
        if text.is_empty() || text.chars().any(char::is_whitespace) {
            return Err(Error::invalid(format!(
                "{text:?} is not a model name: give a model (claude-sonnet-4-5), a provider \
                 (gemini) or both (openai/gpt-4.1)"
            )));
        }
        if let Some((provider, model)) = text.split_once('/')
            && let Ok(kind) = provider.parse::<ProviderKind>()
        {
            if model.is_empty() {
                return Err(Error::invalid(format!(
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

fn has_key(config: &Config, kind: ProviderKind) -> bool {
    config
        .provider_settings(kind)
        .api_key
        .as_ref()
        .is_some_and(|k| !k.expose().is_empty())
}

/// The model the config names for a provider other than its own, else the provider's default.
fn provider_model(config: &Config, kind: ProviderKind) -> String {
    config
        .provider_settings(kind)
        .model
        .clone()
        .unwrap_or_else(|| kind.default_model().to_owned())
}

/// The model a session calls, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionModel {
    /// What the session's next turn calls.
    pub choice: ModelChoice,
    /// What the workspace's config names.
    pub configured: ModelChoice,
    /// Whether `choice` was chosen for this session (and so outlives a config change).
    pub kept: bool,
    /// A choice kept for the session that the config no longer offers, set aside.
    pub set_aside: Option<ModelChoice>,
}

impl SessionModel {
    /// The one wording of "the kept choice was set aside", for every front end.
    pub fn warning(&self) -> Option<String> {
        self.set_aside.as_ref().map(|old| {
            format!(
                "this session's chosen model {old} is not offered by the workspace's config any more (no key for {}); calling {} instead",
                old.provider, self.choice
            )
        })
    }
}

/// Where a session keeps the model a person chose for it, in its own storage.
pub fn session_model_path() -> StoragePath {
    StoragePath::new(".berth/model").expect("a valid storage path")
}

/// A session's own storage.
pub(crate) fn session_scope(session: &Session) -> StorageScope {
    StorageScope::Session {
        workspace: session.workspace_id.clone(),
        session: session.id.clone(),
    }
}

impl Ops {
    /// The model `session` calls: its kept choice while the workspace's config offers it,
    /// else the configured model (see the module's doc).
    pub async fn session_model(&self, session: &Session) -> Result<SessionModel> {
        let config = self.config(Some(&session.workspace_id)).await?.config;
        self.session_model_in(session, &config).await
    }

    /// What the session's tokens cost, in US dollars, at the price `[prices]` gives its model:
    /// the one chosen for it (`/model`, an editor's option, `--model`), else the one it was
    /// made with; `None` when the table does not know the model. Not the configured model of
    /// the moment: a config changed since must not reprice what was spent. `None` for an ACP
    /// agent's session: the agent calls a model berth does not know, so no price of berth's
    /// model is its cost.
    pub async fn session_cost(&self, session: &Session) -> Result<Option<f64>> {
        if session.agent.is_some() {
            return Ok(None);
        }
        let config = self.config(Some(&session.workspace_id)).await?.config;
        let model = match self.kept_model(session).await? {
            Some(choice) => choice.model,
            None => session.model.clone(),
        };
        Ok(config.cost(&model, session.usage))
    }

    /// [`Ops::session_model`] with the workspace's merged config already read.
    pub async fn session_model_in(
        &self,
        session: &Session,
        config: &Config,
    ) -> Result<SessionModel> {
        let configured = ModelChoice::configured(config);
        let kept = self.kept_model(session).await?;
        Ok(match kept {
            Some(choice) if choice.offered_by(config) => SessionModel {
                choice,
                configured,
                kept: true,
                set_aside: None,
            },
            set_aside => SessionModel {
                choice: configured.clone(),
                configured,
                kept: false,
                set_aside,
            },
        })
    }

    /// The choice kept in the session's storage; `None` when none was made (or the line
    /// cannot be read as one: a hand-edited file does not stop the session).
    async fn kept_model(&self, session: &Session) -> Result<Option<ModelChoice>> {
        let Some(bytes) = self
            .manager
            .read_storage(&session_scope(session), &session_model_path())
            .await
            .found()?
        else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&bytes);
        let Some((provider, model)) = text.trim().split_once('/') else {
            return Ok(None);
        };
        Ok(provider
            .parse()
            .ok()
            .filter(|_| !model.is_empty())
            .map(|provider| ModelChoice {
                provider,
                model: model.to_owned(),
            }))
    }

    /// Keeps `choice` as the model `session` calls, in any process and front end from now on.
    pub async fn choose_session_model(
        &self,
        session: &Session,
        choice: &ModelChoice,
    ) -> Result<()> {
        if choice.model.is_empty() || choice.model.contains(['\n', '\r']) {
            return Err(Error::invalid("a model name is one non-empty line"));
        }
        self.manager
            .write_storage(
                &session_scope(session),
                &session_model_path(),
                format!("{choice}\n").into_bytes(),
            )
            .await?;
        Ok(())
    }
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
            assert_eq!(e.kind(), crate::ErrorKind::Invalid, "{bad:?}");
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
