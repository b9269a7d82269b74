//! A session's config options (`session/set_config_option`): its model, the one option berth
//! offers, kept with the session so every later turn calls it.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionValue, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
};

use berth_ops::{LoadedConfig, SessionModel};

use super::{Open, Result, Server};
use crate::{errors, models};

impl Server {
    /// The session's options: its model, as `Ops::session_model` resolves it.
    pub(super) async fn config_options(&self, open: &Open) -> Result<Vec<SessionConfigOption>> {
        let (config, current) = self.model_of(open).await?;
        Ok(vec![models::option(&config, &current.choice)])
    }

    /// The workspace's config, and the session's model as it resolves there.
    async fn model_of(&self, open: &Open) -> Result<(LoadedConfig, SessionModel)> {
        let config = self
            .ops
            .config(Some(&open.session.workspace_id))
            .await
            .map_err(errors::ops)?;
        let current = self
            .ops
            .session_model_in(&open.session, &config.config)
            .await
            .map_err(errors::ops)?;
        Ok((config, current))
    }

    pub(super) async fn set_config_option(
        &self,
        request: SetSessionConfigOptionRequest,
    ) -> Result<SetSessionConfigOptionResponse> {
        let open = self.open(&request.session_id)?;
        if &*request.config_id.0 != models::OPTION_ID {
            return Err(errors::invalid(format!(
                "berth has no session option {:?}; its option is {:?}",
                request.config_id.0,
                models::OPTION_ID
            )));
        }
        let SessionConfigOptionValue::ValueId { value } = &request.value else {
            return Err(errors::invalid("the model option takes one of its values"));
        };
        let (config, current) = self.model_of(&open).await?;
        let choice = models::parse(&config, &current.choice, &value.0).ok_or_else(|| {
            errors::invalid(format!(
                "{:?} is not a model this workspace's config offers: {}",
                value.0,
                models::choices(&config)
                    .iter()
                    .map(models::value_id)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        // Kept with the session, so every later turn, in any process and front end, calls it.
        self.ops
            .choose_session_model(&open.session, &choice)
            .await
            .map_err(errors::ops)?;
        // The choice is one the config offers, so it is the session's model now: no need
        // to read both again.
        Ok(SetSessionConfigOptionResponse::new(vec![models::option(
            &config, &choice,
        )]))
    }
}
