//! The environment of a confined process, by allow list: what berth's own environment passes
//! on. A deny list (`*_TOKEN`, `*_API_KEY`) missed `PGPASSWORD`, `MY_DB_PASSWORD` and every
//! other secret with a name nobody thought of; an allow list cannot.
//!
//! What passes, of berth's environment:
//!
//! - the basics of a shell: `PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`, `LANG`, `LC_*`,
//!   `TERM`, `COLORTERM`, `NO_COLOR`, `TZ`, `TMPDIR`;
//! - berth's workspace variables (`BERTH_PORT*`, `BERTH_WORKSPACE*`);
//! - where toolchains live ([`TOOLCHAINS`]);
//! - for an agent process only, its provider's key and base URL (the caller names them);
//! - whatever `[sandbox] env` names.
//!
//! Variables the caller sets on the command itself (a workspace's ports, an agent's state
//! folder, what an ACP agent asks for in a terminal) are set on purpose and pass as they are.

use std::ffi::{OsStr, OsString};

/// The basics of a shell.
const BASICS: [&str; 12] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "TMPDIR",
    "LANGUAGE",
];

/// Where toolchains live: a build needs them to find its compiler, and none holds a secret.
pub const TOOLCHAINS: [&str; 27] = [
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "GOCACHE",
    "GOMODCACHE",
    "GOFLAGS",
    "JAVA_HOME",
    "NVM_DIR",
    "NVM_BIN",
    "NODE_PATH",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "PNPM_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "GEM_HOME",
    "GEM_PATH",
    "RBENV_ROOT",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "VOLTA_HOME",
    "SDKMAN_DIR",
    "PKG_CONFIG_PATH",
];

/// Prefixes that pass.
const PREFIXES: [&str; 3] = ["LC_", "BERTH_PORT", "BERTH_WORKSPACE"];

/// Which of berth's variables a confined process gets.
#[derive(Debug, Clone, Default)]
pub(crate) struct EnvAllow {
    /// Beyond the lists above: `[sandbox] env`, and an agent's provider variables.
    extra: Vec<String>,
    /// Set by the sandbox itself whatever else says (the proxy's variables, the stand-ins of
    /// masked keys).
    fixed: Vec<(String, String)>,
}

impl EnvAllow {
    pub fn new(extra: impl IntoIterator<Item = String>) -> EnvAllow {
        EnvAllow {
            extra: extra.into_iter().collect(),
            fixed: Vec::new(),
        }
    }

    /// Variables the sandbox sets itself, last (after those it set before): the proxy's, and
    /// the stand-ins of an agent's masked keys.
    pub fn set(&mut self, fixed: Vec<(String, String)>) {
        self.fixed.extend(fixed);
    }

    /// Whether berth's variable `name` passes.
    pub fn allows(&self, name: &OsStr) -> bool {
        let Some(name) = name.to_str() else {
            return false;
        };
        BASICS.contains(&name)
            || TOOLCHAINS.contains(&name)
            || PREFIXES.iter().any(|p| name.starts_with(p))
            || self.extra.iter().any(|e| e == name)
    }

    /// Sets `command`'s environment: berth's variables that pass, then what the caller set
    /// on the command (on purpose) as it set it.
    pub fn apply(&self, command: &mut std::process::Command) {
        let explicit: Vec<(OsString, Option<OsString>)> = command
            .get_envs()
            .map(|(k, v)| (k.to_owned(), v.map(OsStr::to_owned)))
            .collect();
        command.env_clear();
        for (name, value) in std::env::vars_os() {
            if self.allows(&name) {
                command.env(name, value);
            }
        }
        for (name, value) in explicit {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        for (name, value) in &self.fixed {
            command.env(name, value);
        }
    }
}

/// The names of the allow list, for the docs and `berth doctor`.
pub fn allowed_names() -> impl Iterator<Item = String> {
    BASICS
        .iter()
        .chain(TOOLCHAINS.iter())
        .map(|n| (*n).to_owned())
        .chain(PREFIXES.iter().map(|p| format!("{p}*")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_with_unforeseen_names_do_not_pass() {
        let allow = EnvAllow::new(["ANTHROPIC_API_KEY".to_owned()]);
        for name in [
            "PATH",
            "LC_ALL",
            "BERTH_PORT_1",
            "CARGO_HOME",
            "ANTHROPIC_API_KEY",
        ] {
            assert!(allow.allows(OsStr::new(name)), "{name}");
        }
        for name in [
            "PGPASSWORD",
            "MY_DB_PASSWORD",
            "GITHUB_TOKEN",
            "BERTH_MCP_TOKEN",
            "OPENAI_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(!allow.allows(OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn the_callers_own_variables_pass_as_set() {
        let mut cmd = std::process::Command::new("true");
        cmd.env("BERTH_PORT", "4000")
            .env("CUSTOM_ON_PURPOSE", "1")
            .env_remove("TERM");
        EnvAllow::default().apply(&mut cmd);
        let envs: Vec<_> = cmd.get_envs().collect();
        assert!(envs.contains(&(OsStr::new("CUSTOM_ON_PURPOSE"), Some(OsStr::new("1")))));
        assert!(!envs.iter().any(|(k, v)| *k == "TERM" && v.is_some()));
        assert!(envs.iter().all(|(k, _)| *k != "GITHUB_TOKEN"));
    }
}
