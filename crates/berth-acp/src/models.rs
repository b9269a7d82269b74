//! The model choice: a session config option (category `model`) whose values are the models
//! the workspace's merged config can call: the configured provider's model, and the model of
//! each other provider that has a key.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
};
use berth_agent::ModelChoice;
use berth_ops::LoadedConfig;

/// The config option's id.
pub const OPTION_ID: &str = "model";

/// Every model the config can call (the rule is berth-agent's, shared with `berth chat`).
pub fn choices(config: &LoadedConfig) -> Vec<ModelChoice> {
    ModelChoice::choices(&config.config)
}

/// How a choice is named in the option's values: `provider/model`.
pub fn value_id(choice: &ModelChoice) -> String {
    choice.to_string()
}

/// The option's values: the config's choices, and `current` (a model typed at `/model` in
/// `berth chat` is none of them).
fn values(config: &LoadedConfig, current: &ModelChoice) -> Vec<ModelChoice> {
    let mut all = choices(config);
    if !all.contains(current) {
        all.push(current.clone());
    }
    all
}

/// The config option, showing `current`.
pub fn option(config: &LoadedConfig, current: &ModelChoice) -> SessionConfigOption {
    let all = values(config, current);
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

/// The choice a value names, if it is one of the option's values.
pub fn parse(config: &LoadedConfig, current: &ModelChoice, value: &str) -> Option<ModelChoice> {
    values(config, current)
        .into_iter()
        .find(|c| value_id(c) == value)
}
