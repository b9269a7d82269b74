//! `berth config …`: the template, and the effective config with where each value came from.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Context;
use berth_agent::context::Window;
use berth_core::config::{Config, LoadedConfig, PortSettings, ProviderKind, ServeSettings};
use berth_ops::Ops;

use crate::cli::ConfigCmd;
use crate::render;

pub async fn run(ops: &Ops, cmd: ConfigCmd) -> anyhow::Result<()> {
    match cmd {
        ConfigCmd::Init { force } => {
            let path = ops.init_config(force)?;
            eprintln!("wrote {}", path.display());
        }
        ConfigCmd::Show { workspace, json } => {
            let here = std::env::current_dir().context("cannot read the current folder")?;
            let workspace = ops.workspace_meant(workspace.as_deref(), &here).await?;
            let loaded = ops
                .config_of(workspace.as_ref().map(|w| w.id.as_str()))
                .await?;
            for unknown in &loaded.unknown_keys {
                eprintln!("warning: {unknown}");
            }
            let shown = Effective::of(&loaded)?;
            if json.json {
                return Ok(render::json(&serde_json::json!({
                    "workspace": workspace.as_ref().map(|w| w.id.as_str()),
                    "config": shown.table,
                    "sources": shown.sources(),
                    "provider": loaded.config.provider().as_str(),
                    "model": loaded.config.model(),
                    "layers": loaded.layers,
                    "unknown_keys": loaded.unknown_keys,
                    "forwards": berth_ops::network_forwards(&loaded.config),
                }))?);
            }
            let mut text = String::new();
            if let Some(ws) = &workspace {
                let name = ws.name.as_ref().map_or(ws.id.as_str(), |n| n.as_str());
                writeln!(text, "# workspace: {name}")?;
            }
            writeln!(
                text,
                "# calls: provider {}, model {}",
                loaded.config.provider().as_str(),
                loaded.config.model()
            )?;
            match loaded.layers.is_empty() {
                true => writeln!(text, "# layers: none; every value is berth's default")?,
                false => writeln!(text, "# layers, lowest first: {}", loaded.layers.join("; "))?,
            }
            writeln!(
                text,
                "# forwards: {}",
                berth_ops::network_forwards_said(&loaded.config)
            )?;
            shown.write(&mut text, &shown.table, "")?;
            render::line(text.trim_end())?;
        }
    }
    Ok(())
}

/// Every key berth reads, with its value: what a layer set, else the default the code that
/// reads it uses (its own constant, so this cannot drift from it), and where each came from.
struct Effective<'a> {
    table: toml::Table,
    /// Dotted path to the layer that set it; a path not here is a default.
    set: &'a BTreeMap<String, String>,
    /// Keys with no value and no default, by their table: what leaving them unset means.
    unset: BTreeMap<&'static str, Vec<String>>,
}

const DEFAULT: &str = "default";

impl<'a> Effective<'a> {
    fn of(loaded: &'a LoadedConfig) -> anyhow::Result<Effective<'a>> {
        let config: &Config = &loaded.config;
        // Secrets serialize redacted.
        let mut table = toml::Table::try_from(config)?;
        let mut unset: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        let kind = config.provider();
        fill(&mut table, &["provider"], kind.as_str());
        fill_providers(&mut table, &mut unset, config);
        let git = &config.git;
        fill(
            &mut table,
            &["git", "setup_timeout_secs"],
            secs(berth_ops::DEFAULT_SETUP_TIMEOUT),
        );
        fill(
            &mut table,
            &["git", "spare_worktrees"],
            git.spare_worktrees() as i64,
        );
        fill(&mut table, &["git", "submodules"], git.submodules());
        if git.worktree_dir.is_none() {
            unset.entry("git").or_default().push(
                "worktree_dir: not set; a worktree goes in its workspace's folder, <home>/workspaces/<id>/worktree".to_owned(),
            );
        }
        if config.run.max_agents.is_none() {
            unset
                .entry("run")
                .or_default()
                .push("max_agents: not set; every agent of a `berth run` works at once".to_owned());
        }
        fill(
            &mut table,
            &["run", "max_line_mib"],
            config.run.max_line_mib() as i64,
        );
        if config.store.url.is_none() {
            unset.entry("store").or_default().push(
                "url: not set; records are plain files under the home (or BERTH_STORE_URL)"
                    .to_owned(),
            );
        }
        let max_tokens = config
            .provider_settings(kind)
            .max_tokens
            .unwrap_or(berth_agent::runtime::DEFAULT_MAX_TOKENS);
        fill(
            &mut table,
            &["agent", "max_tool_iterations"],
            i64::from(berth_agent::runtime::DEFAULT_MAX_TOOL_ITERATIONS),
        );
        fill(
            &mut table,
            &["agent", "context_tokens"],
            Window::for_provider(kind, None, max_tokens).total as i64,
        );
        fill(
            &mut table,
            &["mcp", "max_sessions"],
            berth_mcp::DEFAULT_MAX_SESSIONS as i64,
        );
        fill(
            &mut table,
            &["mcp", "session_idle_timeout_secs"],
            secs(berth_mcp::DEFAULT_IDLE),
        );
        fill_service_defaults(&mut table);
        if let Some(toml::Value::Array(servers)) = table.get_mut("mcp_servers") {
            for server in servers.iter_mut().filter_map(toml::Value::as_table_mut) {
                fill(
                    server,
                    &["timeout_secs"],
                    secs(berth_agent::mcp::DEFAULT_CALL_TIMEOUT),
                );
            }
        }
        Ok(Effective {
            table,
            set: &loaded.sources,
            unset,
        })
    }

    /// Where the value at `path` came from.
    fn source(&self, path: &str) -> &str {
        self.set.get(path).map_or(DEFAULT, String::as_str)
    }

    /// Every value's source, by dotted path (arrays as one value), for `--json`.
    fn sources(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut stack = vec![(String::new(), &self.table)];
        while let Some((prefix, table)) = stack.pop() {
            for (key, value) in table {
                let path = join(&prefix, key);
                match value {
                    toml::Value::Table(t) => stack.push((path, t)),
                    _ => {
                        let source = self.source(&path).to_owned();
                        out.insert(path, source);
                    }
                }
            }
        }
        out
    }

    /// `table` as TOML at `prefix`, each value followed by its source: its own values first,
    /// then what is unset in it, then its tables.
    fn write(&self, out: &mut String, table: &toml::Table, prefix: &str) -> std::fmt::Result {
        let values: Vec<(String, String)> = table
            .iter()
            .filter(|(_, v)| !is_table(v) && !is_table_array(v))
            .map(|(k, v)| {
                (
                    format!("{} = {v}", toml_key(k)),
                    self.source(&join(prefix, k)).to_owned(),
                )
            })
            .collect();
        let width = values.iter().map(|(line, _)| line.len()).max().unwrap_or(0);
        for (line, source) in values {
            writeln!(out, "{line:width$}  # {source}")?;
        }
        for note in self.unset.get(prefix).into_iter().flatten() {
            writeln!(out, "# {note}")?;
        }
        for (key, value) in table {
            let path = join(prefix, key);
            match value {
                toml::Value::Table(t) => {
                    // A table of tables only (`[providers]`) needs no header of its own.
                    let own = t.values().any(|v| !is_table(v) && !is_table_array(v))
                        || self.unset.contains_key(path.as_str());
                    if own {
                        writeln!(out, "\n[{}]", dotted(&path))?;
                    }
                    self.write(out, t, &path)?;
                }
                toml::Value::Array(items) if is_table_array(value) => {
                    for item in items.iter().filter_map(toml::Value::as_table) {
                        writeln!(out, "\n[[{}]]  # {}", dotted(&path), self.source(&path))?;
                        let lines: Vec<String> = item
                            .iter()
                            .map(|(k, v)| format!("{} = {v}", toml_key(k)))
                            .collect();
                        for line in lines {
                            writeln!(out, "{line}")?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Each provider's defaults, and the key it has none of.
fn fill_providers(
    table: &mut toml::Table,
    unset: &mut BTreeMap<&'static str, Vec<String>>,
    config: &Config,
) {
    for other in ProviderKind::ALL {
        let env = other.key_variable();
        let name = other.as_str();
        let settings = config.provider_settings(other);
        fill(table, &["providers", name, "model"], other.default_model());
        fill(
            table,
            &["providers", name, "base_url"],
            berth_agent::providers::default_base_url(other),
        );
        fill(
            table,
            &["providers", name, "max_tokens"],
            i64::from(berth_agent::runtime::DEFAULT_MAX_TOKENS),
        );
        if settings.api_key.is_none() {
            unset
                .entry(other.table())
                .or_default()
                .push(format!("api_key: not set (or {env} in the environment)"));
        }
    }
}

/// The defaults of the ports berth hands out, `berth serve` and a pool.
fn fill_service_defaults(table: &mut toml::Table) {
    fill(
        table,
        &["ports", "first"],
        i64::from(PortSettings::DEFAULT_FIRST),
    );
    fill(
        table,
        &["ports", "last"],
        i64::from(PortSettings::DEFAULT_LAST),
    );
    fill(
        table,
        &["ports", "block"],
        i64::from(PortSettings::DEFAULT_BLOCK),
    );
    fill(
        table,
        &["serve", "permission_timeout_secs"],
        ServeSettings::DEFAULT_PERMISSION_TIMEOUT_SECS as i64,
    );
    fill(
        table,
        &["pool", "lease_secs"],
        berth_ops::PoolSettings::DEFAULT_LEASE_SECS as i64,
    );
}

/// Sets `path` to `value` unless a layer set it.
fn fill(table: &mut toml::Table, path: &[&str], value: impl Into<toml::Value>) {
    let (last, parents) = path.split_last().expect("a path");
    let mut at = table;
    for key in parents {
        let entry = at
            .entry((*key).to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let Some(next) = entry.as_table_mut() else {
            return;
        };
        at = next;
    }
    at.entry((*last).to_owned()).or_insert_with(|| value.into());
}

fn secs(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

fn join(prefix: &str, key: &str) -> String {
    match prefix {
        "" => key.to_owned(),
        p => format!("{p}.{key}"),
    }
}

fn is_table(v: &toml::Value) -> bool {
    matches!(v, toml::Value::Table(_))
}

fn is_table_array(v: &toml::Value) -> bool {
    matches!(v, toml::Value::Array(a) if !a.is_empty() && a.iter().all(is_table))
}

/// A key as TOML writes it: bare when it can be, else quoted (a model name in `[prices]`).
fn toml_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match bare {
        true => key.to_owned(),
        false => toml::Value::String(key.to_owned()).to_string(),
    }
}

/// A dotted path as a table header, each part as TOML writes a key. The path's parts are
/// joined with `.`, so a key holding a dot (only `[prices]` has such keys) is split back at
/// the first level below `prices`.
fn dotted(path: &str) -> String {
    match path.split_once('.') {
        Some(("prices", model)) => format!("prices.{}", toml_key(model)),
        _ => path.split('.').map(toml_key).collect::<Vec<_>>().join("."),
    }
}
