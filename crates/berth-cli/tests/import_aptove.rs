//! `berth import aptove` through the real binary, on an Aptove data folder built with Aptove's
//! own file formats (agent-storage-fs: `workspace.toml`, `bindings.toml`, `session.md`, and
//! `config.toml` as `AgentConfig::save` writes it): good workspaces come in with their ids,
//! names, times, settings, sessions and bindings; corrupt and hostile ones are reported and
//! the rest imported; a second run imports nothing twice; a dry run writes nothing; and the
//! source is never written.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::snapshot;
use serde_json::Value;
use support::Home;

const FEATURE: &str = "6f1c2b9e-8d4a-4c1e-9b7a-2f3e4d5c6b7a";
const PHONE: &str = "0b9a8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d";
const CORRUPT: &str = "c0ffee00-1111-4222-8333-444455556666";
const LEAKY: &str = "1eaf1eaf-2222-4333-8444-555566667777";

/// Aptove's global config as `AgentConfig::save` writes it (`toml::to_string_pretty` of the
/// whole struct): every section, defaults included.
const APTOVE_CONFIG: &str = r#"provider = "claude"
mcp_servers = []

[providers.claude]
api_key = "sk-ant-aptove-secret"
model = "claude-sonnet-4-20250514"

[providers.openai]
model = "gpt-4o"
base_url = "https://llm.example.com/v1"

[agent]
max_tool_iterations = 25

[agent.retry]
max_retries = 3
base_delay_ms = 1000
max_delay_ms = 30000
backoff_multiplier = 2.0

[system_prompt]
default = "You are a helpful AI coding assistant."

[system_prompt.modes]

[serve]
port = 8765
bind_addr = "0.0.0.0"
tls = true
keep_alive = false

[identity]
agent_id = "9d3f0a4e-1b2c-4d5e-8f90-a1b2c3d4e5f6"
auth_token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

[transports.local]
enabled = true
port = 8765
tls = true

[transports.tailscale-serve]
enabled = false
port = 8766

[state]
last_tab = "Chat"
tailscale_enabled = false
cloudflare_enabled = false
active_transport = "local"
active_transport_url = ""
"#;

/// A session as Aptove's `serialize_session` writes it: the frontmatter, then
/// `"## Role\n\n{text}\n\n"` per message, with no marks of berth's.
const FEATURE_SESSION: &str = "---
provider: gemini
model: gemini-2.5-pro
created_at: 2026-01-10T09:00:05.250+00:00
---

## User

Add JWT auth to the login endpoint.

## Assistant

Here is the plan:

### Steps
1. Add the `jsonwebtoken` crate.
2. Sign tokens in `login()`.

```rust
let token = encode(&header, &claims, &key)?;
```

## User

Looks good, go ahead.

## Assistant

Done: tokens are signed and checked.

";

/// A data folder laid out as Aptove's `FsWorkspaceStore` makes it.
struct Aptove {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    /// Outside the data folder: what symlinks in it point at.
    outside: PathBuf,
}

impl Aptove {
    fn new() -> Aptove {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("Aptove");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(dir.join("workspaces")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(dir.join("config.toml"), APTOVE_CONFIG).unwrap();
        let a = Aptove {
            _tmp: tmp,
            dir,
            outside,
        };

        // A named workspace with its own provider, overrides and a conversation.
        a.workspace(
            FEATURE,
            "name = \"feature-auth\"\ncreated_at = \"2026-01-10T09:00:00.123456789+00:00\"\nlast_accessed = \"2026-02-01T12:30:00+00:00\"\nprovider = \"gemini\"\n",
            Some(FEATURE_SESSION),
        );
        std::fs::write(
            a.ws(FEATURE).join("config.toml"),
            "[providers.gemini]\nmodel = \"gemini-2.5-pro\"\n\n[[mcp_servers]]\nname = \"bash\"\ncommand = \"mcp-server-bash\"\nargs = []\n",
        )
        .unwrap();
        // A device's workspace: a name berth cannot use, and the empty session.md Aptove makes
        // with every workspace.
        a.workspace(
            PHONE,
            "name = \"My Phone\"\ncreated_at = \"2026-01-20T08:00:00+00:00\"\nlast_accessed = \"2026-01-21T08:00:00+00:00\"\n",
            Some(""),
        );
        // Aptove's default workspace, as `WorkspaceManager::default` creates it.
        a.workspace(
            "default",
            "name = \"default\"\ncreated_at = \"2025-12-01T00:00:00+00:00\"\nlast_accessed = \"2026-02-02T00:00:00+00:00\"\n",
            Some("---\nprovider: claude\nmodel: claude-sonnet-4-20250514\ncreated_at: 2025-12-01T00:00:00+00:00\n---\n\n## User\n\nhi\n\n## Assistant\n\nhello\n\n"),
        );
        // A corrupt workspace.toml.
        let corrupt = a.ws(CORRUPT);
        std::fs::create_dir_all(&corrupt).unwrap();
        std::fs::write(
            corrupt.join("workspace.toml"),
            format!("uuid = \"{CORRUPT}\"\nname = \ncreated_at = 7\n"),
        )
        .unwrap();
        // Hostile entries: a name that is not an id, a uuid that tries to become a path, a
        // symlinked workspace, and a session.md that is a symlink out of the folder.
        a.workspace_raw(
            ".hidden",
            "uuid = \".hidden\"\ncreated_at = \"2026-01-01T00:00:00Z\"\nlast_accessed = \"2026-01-01T00:00:00Z\"\n",
        );
        a.workspace_raw(
            "sneaky",
            "uuid = \"../../etc\"\ncreated_at = \"2026-01-01T00:00:00Z\"\nlast_accessed = \"2026-01-01T00:00:00Z\"\n",
        );
        let elsewhere = a.outside.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(
            elsewhere.join("workspace.toml"),
            "uuid = \"linked\"\ncreated_at = \"2026-01-01T00:00:00Z\"\nlast_accessed = \"2026-01-01T00:00:00Z\"\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(&elsewhere, a.dir.join("workspaces/linked")).unwrap();
        std::fs::write(a.outside.join("secret.md"), "## User\n\nsecret\n").unwrap();
        a.workspace(
            LEAKY,
            "created_at = \"2026-01-05T00:00:00Z\"\nlast_accessed = \"2026-01-06T00:00:00Z\"\n",
            None,
        );
        std::os::unix::fs::symlink(a.outside.join("secret.md"), a.ws(LEAKY).join("session.md"))
            .unwrap();

        std::fs::write(
            a.dir.join("bindings.toml"),
            format!(
                "[bindings]\n\"iphone-15\" = \"{PHONE}\"\n\"laptop\" = \"{FEATURE}\"\n\"tablet\" = \"{CORRUPT}\"\n\"old-phone\" = \"3b3b3b3b-0000-4000-8000-000000000000\"\n"
            ),
        )
        .unwrap();
        a
    }

    fn ws(&self, id: &str) -> PathBuf {
        self.dir.join("workspaces").join(id)
    }

    /// A workspace folder as `FsWorkspaceStore::create` makes it, with `fields` after the uuid.
    fn workspace(&self, id: &str, fields: &str, session: Option<&str>) {
        self.workspace_raw(id, &format!("uuid = \"{id}\"\n{fields}"));
        for sub in ["mcp", "skills", "memory"] {
            std::fs::create_dir_all(self.ws(id).join(sub)).unwrap();
        }
        if let Some(text) = session {
            std::fs::write(self.ws(id).join("session.md"), text).unwrap();
        }
    }

    fn workspace_raw(&self, folder: &str, toml: &str) {
        let dir = self.ws(folder);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("workspace.toml"), toml).unwrap();
    }
}

fn import(home: &Home, dir: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["import", "aptove", dir.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let run = home.run(&args);
    let json = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}\n{}", run.stdout, run.stderr));
    (run.code, json)
}

/// The outcome of the item of `kind` whose `what` is `what`; for settings, the global one.
fn outcome<'a>(report: &'a Value, kind: &str, what: &str) -> &'a Value {
    let found: Vec<&Value> = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == kind && i["what"] == what)
        .filter(|i| kind != "config" || i["workspace"].is_null())
        .collect();
    assert_eq!(found.len(), 1, "{kind} {what}: {report:#}");
    &found[0]["outcome"]
}

/// The outcome of the setting `key` of workspace `ws`.
fn setting<'a>(report: &'a Value, ws: &str, key: &str) -> &'a Value {
    let found: Vec<&Value> = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "config" && i["what"] == key && i["workspace"] == ws)
        .collect();
    assert_eq!(found.len(), 1, "{ws} {key}: {report:#}");
    &found[0]["outcome"]
}

fn outcomes(report: &Value) -> Vec<(String, String, String)> {
    report["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["kind"].as_str().unwrap().to_owned(),
                i["what"].as_str().unwrap().to_owned(),
                i["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn time(v: &Value) -> chrono::DateTime<chrono::Utc> {
    v.as_str().unwrap().parse().unwrap()
}

fn rfc3339(s: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(s).unwrap().into()
}

#[test]
fn an_aptove_folder_comes_in_item_by_item() {
    let aptove = Aptove::new();
    let before = snapshot(&aptove.dir);
    let home = Home::new();

    let (code, report) = import(&home, &aptove.dir, &[]);
    // Refusals and a corrupt file: two kinds of problem, so the general failure status.
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["from"], "aptove");
    assert_eq!(report["dry_run"], false);

    // The workspaces, with Aptove's ids, names and times.
    assert_eq!(outcome(&report, "workspace", FEATURE), "imported");
    let feature = home.json(&["workspace", "show", FEATURE, "--json"]);
    assert_eq!(feature["name"], "feature-auth");
    assert_eq!(
        time(&feature["created_at"]),
        rfc3339("2026-01-10T09:00:00.123456789+00:00")
    );
    assert_eq!(
        time(&feature["last_accessed"]),
        rfc3339("2026-02-01T12:30:00+00:00")
    );
    assert_eq!(outcome(&report, "workspace", PHONE), "imported");
    let phone = home.json(&["workspace", "show", PHONE, "--json"]);
    assert_eq!(phone["name"], Value::Null, "'My Phone' is no berth name");
    assert_eq!(phone["description"], "My Phone");
    assert_eq!(outcome(&report, "workspace", "default"), "imported");
    assert_eq!(
        home.json(&["workspace", "show", "default", "--json"])["name"],
        "default"
    );

    // Corrupt and hostile entries are reported, each with what is wrong, and left out.
    let corrupt = &report["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["what"] == CORRUPT && i["kind"] == "workspace")
        .unwrap();
    assert_eq!(corrupt["outcome"], "failed");
    assert_eq!(corrupt["error"], "corrupt");
    let detail = corrupt["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("{CORRUPT}/workspace.toml")) && detail.contains("line 2"),
        "{detail}"
    );
    for hostile in [".hidden", "sneaky", "linked"] {
        assert_eq!(
            outcome(&report, "workspace", hostile),
            "refused",
            "{hostile}"
        );
    }
    let sneaky = home.fails(&["workspace", "show", "sneaky"]);
    assert!(sneaky.contains("not found"), "{sneaky}");
    // The session.md that is a symlink out is refused, its workspace imported.
    assert_eq!(outcome(&report, "workspace", LEAKY), "imported");
    assert_eq!(outcome(&report, "session", LEAKY), "refused");
    let listed: Vec<String> = home
        .json(&["workspace", "list", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap().to_owned())
        .collect();
    let mut expected = vec![FEATURE, PHONE, "default", LEAKY];
    expected.sort();
    assert_eq!(listed, expected);
    assert!(
        !format!("{report}").contains("secret"),
        "nothing of the target is read"
    );

    // The conversation, read from Aptove's format, with the workspace's session id.
    assert_eq!(outcome(&report, "session", FEATURE), "imported");
    let session = home.json(&["session", "show", FEATURE, "--json"]);
    assert_eq!(session["session"]["workspace_id"], FEATURE);
    assert_eq!(session["session"]["provider"], "gemini");
    assert_eq!(session["session"]["model"], "gemini-2.5-pro");
    let messages: Vec<(String, String)> = session["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(messages.len(), 4, "{session:#}");
    assert_eq!(
        messages[0],
        (
            "user".to_owned(),
            "Add JWT auth to the login endpoint.".to_owned()
        )
    );
    assert_eq!(messages[1].0, "assistant");
    assert!(
        messages[1]
            .1
            .starts_with("Here is the plan:\n\n### Steps\n1.")
            && messages[1]
                .1
                .ends_with("let token = encode(&header, &claims, &key)?;\n```"),
        "{:?}",
        messages[1].1
    );
    assert_eq!(messages[3].1, "Done: tokens are signed and checked.");
    assert_eq!(
        outcome(&report, "session", PHONE),
        "skipped",
        "an empty session.md"
    );
    assert_eq!(
        home.json(&["session", "show", "default", "--json"])["messages"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // Settings: the ones berth has, into berth's files; the rest listed as skipped.
    let global = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    let global: toml::Table = toml::from_str(&global).unwrap();
    assert_eq!(global["provider"].as_str(), Some("claude"));
    assert_eq!(
        global["providers"]["claude"]["api_key"].as_str(),
        Some("sk-ant-aptove-secret")
    );
    assert_eq!(
        global["providers"]["openai"]["base_url"].as_str(),
        Some("https://llm.example.com/v1")
    );
    assert_eq!(
        global["agent"]["max_tool_iterations"].as_integer(),
        Some(25)
    );
    for key in [
        "identity",
        "transports",
        "state",
        "serve",
        "agent.retry",
        "system_prompt",
    ] {
        assert_eq!(outcome(&report, "config", key), "skipped", "{key}");
    }
    assert!(
        !report.to_string().contains("sk-ant-aptove-secret")
            && !report.to_string().contains("0123456789abcdef"),
        "secrets stay out of the report"
    );
    assert_eq!(setting(&report, FEATURE, "provider"), "imported");
    assert_eq!(
        setting(&report, FEATURE, "providers.gemini.model"),
        "imported"
    );
    assert_eq!(setting(&report, FEATURE, "mcp_servers"), "skipped");
    let shown = home.json(&["config", "show", "--workspace", FEATURE, "--json"]);
    assert_eq!(shown["provider"], "gemini", "workspace.toml's provider");
    assert_eq!(shown["model"], "gemini-2.5-pro");

    // Bindings whose workspace came in.
    let bindings: Vec<(String, String)> = home
        .json(&["binding", "list", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["device"].as_str().unwrap().to_owned(),
                b["workspace"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        bindings,
        vec![
            ("iphone-15".to_owned(), PHONE.to_owned()),
            ("laptop".to_owned(), FEATURE.to_owned())
        ]
    );
    assert_eq!(
        outcome(&report, "binding", "tablet"),
        "refused",
        "its workspace is corrupt"
    );
    assert_eq!(
        outcome(&report, "binding", "old-phone"),
        "skipped",
        "a stale binding"
    );

    // Again: nothing twice. What came in is already there; the rest is reported the same way.
    let home_before = snapshot(home.path());
    let (code, again) = import(&home, &aptove.dir, &[]);
    assert_eq!(code, 1);
    for ((kind, what, first), (kind2, what2, second)) in
        outcomes(&report).into_iter().zip(outcomes(&again))
    {
        assert_eq!((&kind, &what), (&kind2, &what2));
        let expected = if first == "imported" {
            "already_there".to_owned()
        } else {
            first
        };
        assert_eq!(second, expected, "{kind} {what}");
    }
    assert_eq!(outcomes(&report).len(), outcomes(&again).len());
    assert_eq!(
        snapshot(home.path()),
        home_before,
        "a second import changes nothing"
    );

    // The source was only read.
    assert_eq!(snapshot(&aptove.dir), before);
}

#[test]
fn a_dry_run_writes_nothing() {
    let aptove = Aptove::new();
    let home = Home::new();
    home.ok(&["workspace", "list"]); // the home's own folders exist before the snapshot
    let before = snapshot(home.path());
    let (code, report) = import(&home, &aptove.dir, &["--dry-run"]);
    assert_eq!(code, 1);
    assert_eq!(report["dry_run"], true);
    assert_eq!(outcome(&report, "workspace", FEATURE), "would_import");
    assert_eq!(outcome(&report, "session", FEATURE), "would_import");
    assert_eq!(outcome(&report, "binding", "laptop"), "would_import");
    assert_eq!(outcome(&report, "config", "provider"), "would_import");
    assert_eq!(snapshot(home.path()), before);
    // The plan is the run: what a dry run would import, the real one imports.
    let (_, real) = import(&home, &aptove.dir, &[]);
    let planned: Vec<_> = outcomes(&report)
        .into_iter()
        .map(|(k, w, o)| (k, w, o.replace("would_import", "imported")))
        .collect();
    assert_eq!(planned, outcomes(&real));
}

#[test]
fn berth_settings_and_workspaces_are_never_overwritten() {
    let aptove = Aptove::new();
    let home = Home::new();
    let mine = "# my settings\nprovider = \"openai\"  # keep this\n\n[providers.claude]\n# model = \"m\"\nbase_url = \"https://proxy.example.com\"\n";
    std::fs::write(home.path().join("config.toml"), mine).unwrap();
    // A workspace of berth's own under an id Aptove uses, and a binding of berth's own.
    home.ok(&["workspace", "create", "--id", PHONE, "mine"]);
    home.ok(&["binding", "set", "laptop", "mine"]);

    let (code, report) = import(&home, &aptove.dir, &[]);
    assert_ne!(code, 0);
    assert_eq!(outcome(&report, "config", "provider"), "conflict");
    assert_eq!(outcome(&report, "workspace", PHONE), "conflict");
    assert_eq!(outcome(&report, "binding", "laptop"), "conflict");
    assert_eq!(outcome(&report, "binding", "iphone-15"), "refused");
    // What berth had is as it was; what it lacked was added around it, comments kept.
    let text = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(text.starts_with("# my settings\n"), "{text}");
    assert!(
        text.contains("provider = \"openai\"  # keep this\n"),
        "{text}"
    );
    assert!(text.contains("# model = \"m\"\n"), "{text}");
    let table: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(
        table["providers"]["claude"]["base_url"].as_str(),
        Some("https://proxy.example.com")
    );
    assert_eq!(
        table["providers"]["claude"]["model"].as_str(),
        Some("claude-sonnet-4-20250514")
    );
    let phone = home.json(&["workspace", "show", PHONE, "--json"]);
    assert_eq!(phone["name"], "mine");
    let laptop = home.json(&["binding", "list", "--json"]);
    assert_eq!(laptop[0]["device"], "laptop");
    assert_eq!(laptop[0]["workspace"], PHONE);
}

#[test]
fn what_is_not_an_aptove_folder_is_refused_as_a_whole() {
    let home = Home::new();
    let empty = tempfile::tempdir().unwrap();
    let err = home.fails(&["import", "aptove", empty.path().to_str().unwrap()]);
    assert!(
        err.contains("does not look like Aptove's data folder"),
        "{err}"
    );
    let missing = empty.path().join("nope");
    let r = home.run(&["import", "aptove", missing.to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("no Aptove data folder"), "{}", r.stderr);
    // A berth home inside the source would be written into: refused before anything is read.
    let aptove = Aptove::new();
    let before = snapshot(&aptove.dir);
    let inside = aptove.dir.join("berth-home");
    let mut cmd = home.cmd(&["import", "aptove", aptove.dir.to_str().unwrap()]);
    cmd.env("BERTH_HOME", &inside);
    let r = berth_testkit::run(cmd);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("which an import only reads"),
        "{}",
        r.stderr
    );
    std::fs::remove_dir_all(&inside).unwrap(); // the home itself, made when berth opened it
    assert_eq!(snapshot(&aptove.dir), before);
}

#[test]
fn a_session_continued_in_aptove_gets_its_new_messages() {
    let aptove = Aptove::new();
    let home = Home::new();
    import(&home, &aptove.dir, &[]);
    // Aptove's `append`: one more block at the end of the file.
    let file = aptove.ws(FEATURE).join("session.md");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("## User\n\nAnd the refresh tokens?\n\n");
    std::fs::write(&file, text).unwrap();
    let (_, again) = import(&home, &aptove.dir, &[]);
    assert_eq!(outcome(&again, "session", FEATURE), "imported");
    let messages = home.json(&["session", "show", FEATURE, "--json"])["messages"].clone();
    assert_eq!(messages.as_array().unwrap().len(), 5);
    assert_eq!(messages[4]["content"], "And the refresh tokens?");
    // Continued in berth instead: the transcripts differ, and berth's is kept.
    home.ok(&["session", "append", FEATURE, "a berth-only message"]);
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("## Assistant\n\nSure.\n\n");
    std::fs::write(&file, text).unwrap();
    let (code, third) = import(&home, &aptove.dir, &[]);
    assert_ne!(code, 0);
    assert_eq!(outcome(&third, "session", FEATURE), "conflict");
    let kept = home.json(&["session", "show", FEATURE, "--json"])["messages"].clone();
    assert_eq!(kept[5]["content"], "a berth-only message");
}
