//! Adding settings to a config file a person owns, without rewriting it.
//!
//! berth's config files are people's files: `berth config init` writes a commented template,
//! and people annotate their own. Parsing and re-serializing would drop every comment, so new
//! keys are inserted as lines of text instead: top-level keys before the first table header,
//! a table's keys right under its `[table]` header (or in a new table at the end). The result
//! is then parsed back and must equal the old values plus the new ones exactly; a file whose
//! layout defeats plain insertion (a table written inline, or made by dotted keys) fails that
//! check, and the caller reports those keys for the person to add, never writing a guess.

/// One setting to add: a key path such as `["providers", "claude", "model"]`, and its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Setting {
    pub path: Vec<String>,
    pub value: toml::Value,
}

impl Setting {
    /// `providers.claude.model`.
    pub fn key(&self) -> String {
        self.path.join(".")
    }

    /// Whether the value must never be printed (an API key or a token).
    pub fn is_secret(&self) -> bool {
        self.path
            .last()
            .is_some_and(|k| k == "api_key" || k.ends_with("token"))
    }

    /// The value as a message may show it: TOML, or `<redacted>` for a secret.
    pub fn shown(&self) -> String {
        shown(self, &self.value)
    }
}

/// `value` for `setting`'s key as a message may show it.
pub(crate) fn shown(setting: &Setting, value: &toml::Value) -> String {
    if setting.is_secret() {
        "<redacted>".to_owned()
    } else {
        let text = value.to_string();
        let mut clipped: String = text.chars().take(80).collect();
        if text.chars().count() > 80 {
            clipped.push('…');
        }
        clipped
    }
}

/// The value at `path` in `table`, if there is one.
pub(crate) fn lookup<'a>(table: &'a toml::Table, path: &[String]) -> Option<&'a toml::Value> {
    let (last, parents) = path.split_last()?;
    let mut cur = table;
    for key in parents {
        cur = cur.get(key)?.as_table()?;
    }
    cur.get(last)
}

/// `text` with `settings` added, each preceded by the comment line `# {note}`; `None` if the
/// result would not read back as the old values plus exactly these (see the module docs). The
/// settings must be keys `text` does not set yet.
pub(crate) fn with_settings(text: &str, settings: &[Setting], note: &str) -> Option<String> {
    let before: toml::Table = toml::from_str(text).ok()?;
    let mut expected = before.clone();
    for s in settings {
        insert(&mut expected, &s.path, s.value.clone())?;
    }
    let note = format!("# {}\n", note.replace(['\n', '\r'], " "));
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_owned).collect();
    if let Some(last) = lines.last_mut()
        && !last.ends_with('\n')
    {
        last.push('\n');
    }

    // Top-level keys go before the first table header; table keys under their header.
    let mut root = String::new();
    let mut tables: Vec<(Vec<String>, String)> = Vec::new();
    for s in settings {
        let (key, table) = s.path.split_last()?;
        let line = key_line(key, &s.value)?;
        if table.is_empty() {
            root.push_str(&line);
        } else {
            match tables.iter_mut().find(|(t, _)| t.as_slice() == table) {
                Some((_, block)) => block.push_str(&line),
                None => tables.push((table.to_vec(), line)),
            }
        }
    }
    let mut appended = String::new();
    // Inserting from the bottom up keeps the earlier line numbers valid.
    let mut inserts: Vec<(usize, String)> = Vec::new();
    for (table, block) in tables {
        match lines
            .iter()
            .position(|l| header_of(l).as_deref() == Some(&table[..]))
        {
            Some(at) => inserts.push((at + 1, format!("{note}{block}"))),
            None => {
                let header = table_header(&table)?;
                appended.push_str(&format!("\n{header}\n{note}{block}"));
            }
        }
    }
    if !root.is_empty() {
        let first_header = lines
            .iter()
            .position(|l| l.trim_start().starts_with('['))
            .unwrap_or(lines.len());
        let gap = if first_header < lines.len() { "\n" } else { "" };
        inserts.push((first_header, format!("{note}{root}{gap}")));
    }
    inserts.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    for (at, block) in inserts {
        lines.insert(at, block);
    }
    let mut out: String = lines.concat();
    if !appended.is_empty() {
        if out.is_empty() {
            appended.remove(0);
        }
        out.push_str(&appended);
    }
    let after: toml::Table = toml::from_str(&out).ok()?;
    (after == expected).then_some(out)
}

/// `key = value\n` as TOML writes it (the key quoted if it needs to be).
fn key_line(key: &str, value: &toml::Value) -> Option<String> {
    let mut one = toml::Table::new();
    one.insert(key.to_owned(), value.clone());
    let line = toml::to_string(&one).ok()?;
    // A scalar or an inline array is one line; anything else is not a setting we add.
    (line.lines().count() == 1).then_some(line)
}

/// `[a.b]` with each key quoted as TOML needs.
fn table_header(path: &[String]) -> Option<String> {
    let keys: Option<Vec<String>> = path
        .iter()
        .map(|k| {
            let line = key_line(k, &toml::Value::Boolean(true))?;
            Some(line.trim_end().strip_suffix(" = true")?.to_owned())
        })
        .collect();
    Some(format!("[{}]", keys?.join(".")))
}

/// The table a `[a.b]` header line opens (bare keys only; anything fancier is left to the
/// check by parsing back).
fn header_of(line: &str) -> Option<Vec<String>> {
    let line = line.trim();
    let inner = line.strip_prefix('[')?;
    if inner.starts_with('[') {
        return None; // an array of tables
    }
    let (inner, rest) = inner.split_once(']')?;
    let rest = rest.trim();
    if !(rest.is_empty() || rest.starts_with('#')) {
        return None;
    }
    Some(inner.split('.').map(|k| k.trim().to_owned()).collect())
}

fn insert(table: &mut toml::Table, path: &[String], value: toml::Value) -> Option<()> {
    let (last, parents) = path.split_last()?;
    let mut cur = table;
    for key in parents {
        cur = cur
            .entry(key.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()?;
    }
    cur.insert(last.clone(), value);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(path: &str, value: toml::Value) -> Setting {
        Setting {
            path: path.split('.').map(str::to_owned).collect(),
            value,
        }
    }

    fn s(v: &str) -> toml::Value {
        toml::Value::String(v.to_owned())
    }

    #[test]
    fn keys_go_in_without_touching_comments() {
        let text = "# mine\n# provider = \"x\"\n\n[providers.claude]\n# model = \"m\"\nbase_url = \"u\" # keep\n\n[git]\ncopy = [\".env\"]\n";
        let out = with_settings(
            text,
            &[
                set("provider", s("gemini")),
                set("providers.claude.model", s("opus")),
                set("providers.gemini.model", s("g")),
                set("agent.max_tool_iterations", toml::Value::Integer(25)),
            ],
            "from Aptove",
        )
        .unwrap();
        for kept in ["# mine\n", "# model = \"m\"\n", "base_url = \"u\" # keep\n"] {
            assert!(out.contains(kept), "{out}");
        }
        let t: toml::Table = toml::from_str(&out).unwrap();
        assert_eq!(t["provider"].as_str(), Some("gemini"));
        assert_eq!(t["providers"]["claude"]["model"].as_str(), Some("opus"));
        assert_eq!(t["providers"]["claude"]["base_url"].as_str(), Some("u"));
        assert_eq!(t["providers"]["gemini"]["model"].as_str(), Some("g"));
        assert_eq!(t["agent"]["max_tool_iterations"].as_integer(), Some(25));
        assert_eq!(t["git"]["copy"][0].as_str(), Some(".env"));
        assert!(out.matches("# from Aptove\n").count() >= 3, "{out}");
    }

    #[test]
    fn an_empty_file_gets_a_plain_layout() {
        let out = with_settings(
            "",
            &[
                set("provider", s("openai")),
                set("providers.openai.base_url", s("http://x")),
            ],
            "n",
        )
        .unwrap();
        assert_eq!(
            out,
            "# n\nprovider = \"openai\"\n\n[providers.openai]\n# n\nbase_url = \"http://x\"\n"
        );
    }

    #[test]
    fn a_layout_that_defeats_insertion_is_refused_not_guessed() {
        // The table is made by dotted keys, so a `[providers.claude]` header would redefine it.
        let dotted = "providers.claude.base_url = \"u\"\n";
        assert_eq!(
            with_settings(dotted, &[set("providers.claude.model", s("m"))], "n"),
            None
        );
        let inline = "providers = { claude = { base_url = \"u\" } }\n";
        assert_eq!(
            with_settings(inline, &[set("providers.claude.model", s("m"))], "n"),
            None
        );
        assert_eq!(with_settings("not toml [", &[set("a", s("b"))], "n"), None);
    }

    #[test]
    fn secrets_are_never_shown() {
        let key = set("providers.claude.api_key", s("sk-secret"));
        assert_eq!(key.shown(), "<redacted>");
        assert_eq!(set("model", s("m")).shown(), "\"m\"");
    }
}
