//! The model choice: a session config option (category `model`) whose values are the models
//! the workspace's merged config can call: the configured provider's model, and the model of
//! each other provider that has a key.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
};
use berth_agent::ModelChoice;
use berth_ops::{LoadedConfig, ProviderKind};

/// The config option's id.
pub const OPTION_ID: &str = "model";

const PROVIDERS: [ProviderKind; 3] = [
    ProviderKind::Claude,
    ProviderKind::Openai,
    ProviderKind::Gemini,
];

/// What the config names: its provider's model first.
pub fn configured(config: &LoadedConfig) -> ModelChoice {
    ModelChoice {
        provider: config.config.provider(),
        model: config.config.model().to_owned(),
    }
}

/// Every model the config can call.
pub fn choices(config: &LoadedConfig) -> Vec<ModelChoice> {
    let c = &config.config;
    let mut out = vec![configured(config)];
    for kind in PROVIDERS {
        let settings = c.provider_settings(kind);
        let has_key = settings
            .api_key
            .as_ref()
            .is_some_and(|k| !k.expose().is_empty());
        if kind == c.provider() || !has_key {
            continue;
        }
        out.push(ModelChoice {
            provider: kind,
            model: settings
                .model
                .clone()
                .unwrap_or_else(|| kind.default_model().to_owned()),
        });
    }
    out
}

/// How a choice is named in the option's values: `provider/model`.
pub fn value_id(choice: &ModelChoice) -> String {
    format!("{}/{}", choice.provider, choice.model)
}

/// The config option, showing `current`.
pub fn option(config: &LoadedConfig, current: &ModelChoice) -> SessionConfigOption {
    let mut all = choices(config);
    if !all.contains(current) {
        all.push(current.clone());
    }
    let values = all
        .iter()
        .map(|c| {
            SessionConfigSelectOption::new(value_id(c), format!("{} ({})", c.model, c.provider))
        })
        .collect::<Vec<_>>();
    SessionConfigOption::select(OPTION_ID, "Model", value_id(current), values)
        .category(SessionConfigOptionCategory::Model)
        .description(
            "The model berth's agent calls: the workspace's configured one, or another provider's that has a key"
                .to_owned(),
        )
}

/// The choice a value names, if the config offers it.
pub fn parse(config: &LoadedConfig, value: &str) -> Option<ModelChoice> {
    choices(config).into_iter().find(|c| value_id(c) == value)
}
