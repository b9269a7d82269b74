//! The provider berth's config names, made from its settings: the dialects themselves (and
//! their constructors from a base URL and a key) are berth-llm's, re-exported here under
//! their old paths.

use std::sync::Arc;

use berth_core::config::{Config, ProviderKind};

use crate::http::Http;
use crate::provider::Provider;

pub use berth_llm::providers::{anthropic, gemini, openai};

/// Why no provider could be made from the config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    #[error(
        "no API key for {provider}: set {env} in the environment, or api_key under [providers.{table}] in berth's config"
    )]
    MissingKey {
        provider: &'static str,
        env: &'static str,
        table: &'static str,
    },
    #[error("[providers.{table}] base_url {url:?} is not an http(s) URL")]
    BadBaseUrl { table: &'static str, url: String },
    #[error("{0}")]
    Http(String),
}

/// Where a provider is called when its `base_url` is not set.
pub fn default_base_url(kind: ProviderKind) -> &'static str {
    kind.default_base_url()
}

/// The provider the merged config names (`provider`, else Claude), with its key and base URL,
/// over `http` (one client for all: building one loads the system's root certificates). The
/// key comes from the config's layers, where the environment (`ANTHROPIC_API_KEY`,
/// `OPENAI_API_KEY`, `GEMINI_API_KEY` or `GOOGLE_API_KEY`) is the top one.
pub fn from_config(config: &Config, http: &Http) -> Result<Arc<dyn Provider>, SetupError> {
    let kind = config.provider();
    let settings = config.provider_settings(kind);
    let (env, table) = (kind.key_variable(), kind.as_str());
    let key = settings
        .api_key
        .as_ref()
        .map(|k| k.expose().to_owned())
        .filter(|k| !k.is_empty())
        .ok_or(SetupError::MissingKey {
            provider: kind.as_str(),
            env,
            table,
        })?;
    let base_url = match &settings.base_url {
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
            url.trim_end_matches('/').to_owned()
        }
        Some(url) => {
            return Err(SetupError::BadBaseUrl {
                table,
                url: url.clone(),
            });
        }
        None => default_base_url(kind).to_owned(),
    };
    let http = http.clone();
    Ok(match kind {
        ProviderKind::Claude => Arc::new(anthropic::Anthropic::new(http, base_url, key)),
        ProviderKind::Openai => Arc::new(openai::OpenAi::new(http, base_url, key)),
        ProviderKind::Gemini => Arc::new(gemini::Gemini::new(http, base_url, key)),
    })
}

impl berth_core::Kinded for SetupError {
    fn kind(&self) -> berth_core::ErrorKind {
        match self {
            SetupError::MissingKey { .. } => berth_core::ErrorKind::NotConfigured,
            SetupError::BadBaseUrl { .. } => berth_core::ErrorKind::Invalid,
            SetupError::Http(_) => berth_core::ErrorKind::Io,
        }
    }
}
