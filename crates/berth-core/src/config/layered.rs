//! Configs layered before, kept by what they were layered from. A server layers the same files
//! for every prompt and every new session (the global file, a workspace's, the environment),
//! and a TOML parse with its checks costs far more than comparing the texts. The files are
//! still read each time, so an edit is seen at once: only the parse of the same text is
//! skipped.

use std::sync::{Mutex, PoisonError};

use super::{ConfigText, LoadedConfig, layer};
use crate::error::Result;

/// Inputs kept at most; past it the oldest goes (a server holds a handful of distinct
/// workspace configs at a time).
const MAX_KEPT: usize = 64;

/// What one config was layered from.
struct Inputs {
    global: Option<ConfigText>,
    workspace: Option<ConfigText>,
    env: Vec<(String, String)>,
}

/// [`layer`], remembering its last results.
#[derive(Default)]
pub struct Layered {
    kept: Mutex<Vec<(Inputs, LoadedConfig)>>,
}

impl Layered {
    /// What [`layer`] gives for these inputs: kept from an earlier call with the same texts,
    /// origins and environment, else layered now. A config that fails is not kept: it says
    /// why again next time.
    pub fn layer(
        &self,
        global: Option<&ConfigText>,
        workspace: Option<&ConfigText>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<LoadedConfig> {
        let env: Vec<(String, String)> = env.into_iter().collect();
        let same = |inputs: &Inputs| {
            inputs.global.as_ref() == global
                && inputs.workspace.as_ref() == workspace
                && inputs.env == env
        };
        if let Some((_, loaded)) = self.lock().iter().find(|(inputs, _)| same(inputs)) {
            return Ok(loaded.clone());
        }
        let loaded = layer(global, workspace, env.iter().cloned())?;
        let mut kept = self.lock();
        if kept.len() >= MAX_KEPT {
            kept.remove(0);
        }
        kept.push((
            Inputs {
                global: global.cloned(),
                workspace: workspace.cloned(),
                env,
            },
            loaded.clone(),
        ));
        Ok(loaded)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Inputs, LoadedConfig)>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::text;

    #[test]
    fn the_same_inputs_give_the_same_config_and_a_change_to_any_is_seen() {
        let layered = Layered::default();
        let global = text("/h/config.toml", "model = \"a\"\n");
        let env = || vec![("HOME".to_owned(), "/h".to_owned())];
        let first = layered.layer(Some(&global), None, env()).unwrap();
        assert_eq!(first.config.model.as_deref(), Some("a"));
        let again = layered.layer(Some(&global), None, env()).unwrap();
        assert_eq!(again.config, first.config);
        assert_eq!(again.layers, first.layers);
        assert_eq!(
            layered.lock().len(),
            1,
            "the same inputs were layered again"
        );
        // An edited file, a workspace's file, the environment: each gives its own config.
        let edited = text("/h/config.toml", "model = \"b\"\n");
        let model = |l: LoadedConfig| l.config.model;
        assert_eq!(
            model(layered.layer(Some(&edited), None, env()).unwrap()).as_deref(),
            Some("b")
        );
        let ws = text("/h/w/config.toml", "model = \"c\"\n");
        assert_eq!(
            model(layered.layer(Some(&global), Some(&ws), env()).unwrap()).as_deref(),
            Some("c")
        );
        let set = vec![("BERTH_MODEL".to_owned(), "d".to_owned())];
        assert_eq!(
            model(layered.layer(Some(&global), None, set).unwrap()).as_deref(),
            Some("d")
        );
        // The same text from another file names that file as its source.
        let moved = text("/elsewhere/config.toml", "model = \"a\"\n");
        let from = layered.layer(Some(&moved), None, env()).unwrap();
        assert_eq!(from.layers, ["/elsewhere/config.toml"]);
    }

    #[test]
    fn a_config_that_fails_is_not_kept() {
        let layered = Layered::default();
        let bad = text("/h/config.toml", "model = [\n");
        assert!(layered.layer(Some(&bad), None, Vec::new()).is_err());
        assert!(layered.layer(Some(&bad), None, Vec::new()).is_err());
        assert!(layered.lock().is_empty());
    }

    #[test]
    fn no_more_than_max_kept_inputs_are_kept() {
        let layered = Layered::default();
        for n in 0..MAX_KEPT + 5 {
            let t = text("/h/config.toml", &format!("model = \"m{n}\"\n"));
            layered.layer(Some(&t), None, Vec::new()).unwrap();
        }
        assert_eq!(layered.lock().len(), MAX_KEPT);
    }
}
