//! The merge of the layers: each file checked on its own (syntax, types, unknown keys, against
//! its own name and line), then the environment as the top layer, then the merged whole.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::{Config, ConfigText, ProviderKind};
use crate::error::{Error, Result, line_of_offset};

/// A key that no part of berth reads, and the layer that set it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnknownKey {
    pub origin: String,
    pub key: String,
}

impl fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown key '{}' in {} (ignored)", self.key, self.origin)
    }
}

#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    pub unknown_keys: Vec<UnknownKey>,
    /// The layers that contributed, lowest first, for `config show`.
    pub layers: Vec<String>,
    /// Where each key that a layer set came from, by its dotted path (`ports.first`,
    /// `providers.claude.api_key`): the file, or `environment (VAR)`. A key not here has its
    /// default.
    pub sources: BTreeMap<String, String>,
}

/// Environment variables that configure the process rather than the config tree.
const PROCESS_VARS: &[&str] = &[
    "BERTH_HOME",
    "BERTH_LOG",
    "BERTH_MCP_TOKEN",
    "BERTH_SERVE_TOKEN",
];

/// `BERTH_PORT` and `BERTH_PORT_<n>`: the ports berth gives a workspace's processes, which
/// may run berth themselves. They configure nothing.
fn is_port_var(name: &str) -> bool {
    name == "BERTH_PORT"
        || name
            .strip_prefix("BERTH_PORT_")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Layers the config. `env` is passed in (rather than read here) so callers and tests decide
/// what the environment is.
pub fn layer(
    global: Option<&ConfigText>,
    workspace: Option<&ConfigText>,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<LoadedConfig> {
    let mut merged = toml::Table::new();
    let mut unknown_keys = Vec::new();
    let mut layers = Vec::new();
    let mut sources = BTreeMap::new();
    for file in [global, workspace].into_iter().flatten() {
        let table = parse_file(file, &mut unknown_keys)?;
        let origin = file.origin.display().to_string();
        record_sources(&table, "", &origin, &mut sources);
        layers.push(origin);
        merge(&mut merged, table);
    }
    let (env_table, env_vars) = env_layer(env)?;
    if !env_table.is_empty() {
        for (name, path) in &env_vars {
            sources.insert(path.clone(), format!("environment ({name})"));
        }
        let env_names: Vec<&str> = env_vars.iter().map(|(name, _)| name.as_str()).collect();
        let origin = format!("environment ({})", env_names.join(", "));
        check_value(
            &origin,
            toml::Value::Table(env_table.clone()),
            &mut unknown_keys,
        )?;
        layers.push(origin);
        merge(&mut merged, env_table);
    }
    let config: Config = toml::Value::Table(merged)
        .try_into()
        .map_err(|e: toml::de::Error| Error::Config(e.message().to_owned()))?;
    config.ports.check()?;
    config.run.check()?;
    config.check_prices()?;
    Ok(LoadedConfig {
        config,
        unknown_keys,
        layers,
        sources,
    })
}

/// Records `origin` for every value `table` sets, by dotted path; a table's keys one by one
/// (tables merge), anything else (an array too: arrays replace) as one value.
fn record_sources(
    table: &toml::Table,
    prefix: &str,
    origin: &str,
    sources: &mut BTreeMap<String, String>,
) {
    for (key, value) in table {
        let path = match prefix {
            "" => key.clone(),
            p => format!("{p}.{key}"),
        };
        match value {
            toml::Value::Table(t) => record_sources(t, &path, origin, sources),
            _ => {
                sources.insert(path, origin.to_owned());
            }
        }
    }
}

/// Parses one file: syntax errors are `Corrupt` with a line; type errors name file and line;
/// unknown keys are collected.
fn parse_file(file: &ConfigText, unknown: &mut Vec<UnknownKey>) -> Result<toml::Table> {
    let corrupt = |e: toml::de::Error| Error::Corrupt {
        file: file.origin.clone(),
        line: e.span().map(|s| line_of_offset(&file.text, s.start)),
        // The message only: toml's Display quotes the offending line, which may hold a secret.
        reason: e.message().trim().to_owned(),
    };
    let table: toml::Table = toml::from_str(&file.text).map_err(corrupt)?;
    let origin = file.origin.display().to_string();
    let de = toml::Deserializer::parse(&file.text).map_err(corrupt)?;
    let mut found = Vec::new();
    serde_ignored::deserialize(de, |path| found.push(path.to_string()))
        .map_err(|e: toml::de::Error| {
            let line = e.span().map(|s| line_of_offset(&file.text, s.start));
            let at = line.map(|l| format!(" line {l}")).unwrap_or_default();
            Error::Config(format!("{origin}{at}: {}", e.message().trim()))
        })
        .map(|_: Config| ())?;
    unknown.extend(found.into_iter().map(|key| UnknownKey {
        origin: origin.clone(),
        key,
    }));
    Ok(table)
}

fn check_value(origin: &str, value: toml::Value, unknown: &mut Vec<UnknownKey>) -> Result<()> {
    let mut found = Vec::new();
    let _: Config = serde_ignored::deserialize(value, |path| found.push(path.to_string()))
        .map_err(|e: toml::de::Error| Error::Config(format!("{origin}: {}", e.message())))?;
    unknown.extend(found.into_iter().map(|key| UnknownKey {
        origin: origin.to_owned(),
        key,
    }));
    Ok(())
}

/// Recursive merge: tables merge key by key, everything else in `top` replaces.
fn merge(base: &mut toml::Table, top: toml::Table) {
    for (key, value) in top {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(t)) => merge(b, t),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

/// The environment layer. Provider keys use their conventional names; `BERTH_A__B=v` sets
/// `a.b = v` (`__` separates levels, names are lowercased). Values that read as an integer or
/// a boolean become one; anything else is a string.
/// Returns the table and, for each variable used, its name and the dotted path it set.
fn env_layer(
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(toml::Table, Vec<(String, String)>)> {
    let mut vars: Vec<(String, String)> = env.into_iter().collect();
    vars.sort();
    let mut table = toml::Table::new();
    let mut names = Vec::new();
    let set: Vec<String> = vars.iter().map(|(k, _)| k.clone()).collect();
    for (name, value) in vars {
        // A provider's key, by the first of its variables that is set.
        let key_of = ProviderKind::ALL.into_iter().find(|kind| {
            let names = kind.key_variables();
            names.iter().position(|n| *n == name).is_some_and(|at| {
                !names[..at]
                    .iter()
                    .any(|before| set.iter().any(|s| s == before))
            })
        });
        let path: Vec<String> = match (key_of, name.as_str()) {
            (Some(kind), _) => vec!["providers".into(), kind.as_str().into(), "api_key".into()],
            // The store's conventional name; `BERTH_STORE__URL` says the same.
            (None, "BERTH_STORE_URL") => vec!["store".into(), "url".into()],
            (None, n)
                if n.starts_with("BERTH_") && !PROCESS_VARS.contains(&n) && !is_port_var(n) =>
            {
                let rest = &n["BERTH_".len()..];
                if rest.is_empty() || rest.split("__").any(str::is_empty) {
                    return Err(Error::Config(format!(
                        "environment variable {n} does not name a config key (use BERTH_KEY or BERTH_TABLE__KEY)"
                    )));
                }
                rest.split("__").map(str::to_ascii_lowercase).collect()
            }
            _ => continue,
        };
        let is_secret = path
            .last()
            .is_some_and(|k| k == "api_key" || k.ends_with("token"));
        let scalar = match value.as_str() {
            _ if is_secret => toml::Value::String(value),
            "true" => toml::Value::Boolean(true),
            "false" => toml::Value::Boolean(false),
            v => v
                .parse::<i64>()
                .map(toml::Value::Integer)
                .unwrap_or(toml::Value::String(value)),
        };
        insert_path(&mut table, &path, scalar).map_err(|conflict| {
            Error::Config(format!(
                "environment variable {name} conflicts with {conflict}"
            ))
        })?;
        names.push((name, path.join(".")));
    }
    Ok((table, names))
}

fn insert_path(
    table: &mut toml::Table,
    path: &[String],
    value: toml::Value,
) -> std::result::Result<(), String> {
    let (last, parents) = path.split_last().expect("non-empty path");
    let mut cur = table;
    for key in parents {
        let entry = cur
            .entry(key.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            _ => return Err(format!("a value already set at '{key}'")),
        };
    }
    cur.insert(last.clone(), value);
    Ok(())
}
