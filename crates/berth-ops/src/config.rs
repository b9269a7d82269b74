//! Configuration: the global file beside the store, the workspace's overrides in the store,
//! the environment on top.

use std::path::{Path, PathBuf};

use berth_core::config::{ConfigText, LoadedConfig, TEMPLATE};
use berth_core::{Error as CoreError, WorkspaceId};

use crate::error::{Error, Result};
use crate::{ErrorKind, Ops};

/// `<home>/config.toml`.
pub fn global_path(home: &Path) -> PathBuf {
    home.join("config.toml")
}

/// The global config file's text, if there is one. Read directly, not through a store: the
/// store is chosen by it.
pub fn global_text(home: &Path) -> Result<Option<ConfigText>> {
    let origin = global_path(home);
    match std::fs::read(&origin) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Ok(Some(ConfigText { origin, text })),
            Err(e) => Err(CoreError::Config(format!(
                "{} is not valid UTF-8 (byte {})",
                origin.display(),
                e.utf8_error().valid_up_to()
            ))
            .into()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CoreError::io(format!("cannot read {}", origin.display()), e).into()),
    }
}

impl Ops {
    /// The config in force for `workspace` (globally with `None`): the global file, the
    /// workspace's file, then the environment.
    pub async fn config(&self, workspace: Option<&WorkspaceId>) -> Result<LoadedConfig> {
        let global = global_text(&self.home)?;
        Ok(self
            .manager
            .config(global.as_ref(), workspace, self.env.iter().cloned())
            .await?)
    }

    /// The config in force for the workspace `identifier` names, or globally.
    pub async fn config_of(&self, identifier: Option<&str>) -> Result<LoadedConfig> {
        let ws = match identifier {
            Some(i) => Some(self.manager.resolve(i).await?.id),
            None => None,
        };
        self.config(ws.as_ref()).await
    }

    /// Writes the commented template as the global config; an existing file is replaced only
    /// with `force`. Returns the file's path.
    pub fn init_config(&self, force: bool) -> Result<PathBuf> {
        let path = global_path(&self.home);
        if path.exists() && !force {
            return Err(Error::rule(
                ErrorKind::Conflict,
                format!(
                    "{} already exists; pass --force to replace it with the template",
                    path.display()
                ),
            ));
        }
        berth_store_fs::durable::write_atomic(&path, TEMPLATE.as_bytes())
            .map_err(|e| CoreError::io(format!("cannot write {}", path.display()), e))?;
        Ok(path)
    }
}
