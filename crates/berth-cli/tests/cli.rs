//! The `berth` binary, command by command, on temporary homes: output shapes (tables and
//! `--json`), success paths, and the error paths a user will meet.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use serde_json::Value;
use support::{Home, age_workspace};

fn create(home: &Home, args: &[&str]) -> String {
    let mut full = vec!["workspace", "create"];
    full.extend_from_slice(args);
    home.ok(&full).trim().to_owned()
}

#[test]
fn create_prints_a_uuid_and_list_shows_it() {
    let home = Home::new();
    let id = create(&home, &["alpha", "--description", "first one"]);
    assert!(uuid_like(&id), "{id}");
    let unnamed = create(&home, &[]);
    let table = home.ok(&["workspace", "list"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("NAME") && lines[0].contains("ID") && lines[0].contains("DESCRIPTION")
    );
    assert_eq!(lines.len(), 3, "{table}");
    // Named first, by name; the id short, as a prefix that names it.
    assert!(
        lines[1].starts_with("alpha") && lines[2].starts_with('-'),
        "{table}"
    );
    assert!(table.contains(&id[..8]) && !table.contains(&id) && table.contains("first one"));
    // Columns line up: the ID column starts at the same offset on every line.
    let col = lines[0].find("ID").unwrap();
    assert!(lines[1][col..].starts_with(&id[..8]), "{table}");
    assert!(lines[2][col..].starts_with(&unnamed[..8]), "{table}");
    let short = lines[1][col..].split_whitespace().next().unwrap();
    assert_eq!(
        home.ok(&["workspace", "path", short]).trim(),
        home.workspace_dir(&id).to_str().unwrap()
    );

    let json = home.json(&["workspace", "list", "--json"]);
    let arr = json.as_array().unwrap();
    assert_eq!(arr.len(), 2);
    let alpha = arr.iter().find(|w| w["id"] == id.as_str()).unwrap();
    assert_eq!(alpha["name"], "alpha");
    assert_eq!(alpha["description"], "first one");
    assert!(alpha["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(alpha["last_accessed"].is_string());
    assert_eq!(alpha["path"], home.workspace_dir(&id).to_str().unwrap());
    let other = arr.iter().find(|w| w["id"] == unnamed.as_str()).unwrap();
    // Views keep their shape: an unnamed workspace has `"name": null`, not a missing key.
    assert!(other["name"].is_null() && other.get("name").is_some());
    assert_eq!(alpha["label"], format!("alpha ({id})"));
}

#[test]
fn create_with_json_and_given_id_and_layout() {
    let home = Home::new();
    let ws = home.json(&[
        "workspace",
        "create",
        "beta",
        "--id",
        "mobile-123",
        "--agent-id",
        "a1",
        "--json",
    ]);
    assert_eq!(ws["id"], "mobile-123");
    assert_eq!(ws["agent_id"], "a1");
    let dir = home.workspace_dir("mobile-123");
    for sub in [
        "workspace.toml",
        "storage",
        "sessions",
        "mcp",
        "skills",
        "memory",
    ] {
        assert!(dir.join(sub).exists(), "{sub} missing");
    }
    let err = home.fails(&["workspace", "create", "beta"]);
    assert!(
        err.contains("already exists") && err.contains("beta"),
        "{err}"
    );
    let err = home.fails(&["workspace", "create", "--id", "mobile-123"]);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(
        home.json(&["workspace", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn show_by_id_name_and_prefix() {
    let home = Home::new();
    create(&home, &["alpha", "--id", "abcd-1111"]);
    create(&home, &["beta", "--id", "abcd-2222"]);
    home.ok(&["binding", "set", "phone", "alpha"]);
    for ident in ["abcd-1111", "alpha", "abcd-1"] {
        let v = home.json(&["workspace", "show", ident, "--json"]);
        assert_eq!(v["id"], "abcd-1111", "{ident}");
        assert_eq!(v["devices"], serde_json::json!(["phone"]));
    }
    let text = home.ok(&["workspace", "show", "beta"]);
    assert!(
        text.contains("id:") && text.contains("abcd-2222") && text.contains("devices:"),
        "{text}"
    );
    let err = home.fails(&["workspace", "show", "abcd"]);
    assert!(
        err.contains("ambiguous")
            && err.contains("abcd-1111 (alpha)")
            && err.contains("abcd-2222 (beta)"),
        "{err}"
    );
    let err = home.fails(&["workspace", "show", "abc"]);
    assert!(err.contains("not found"), "{err}");
    let err = home.fails(&["workspace", "show", "nothing-here"]);
    assert!(
        err.contains("not found") && err.contains("berth workspace list"),
        "{err}"
    );
}

#[test]
fn path_prints_the_folder() {
    let home = Home::new();
    let id = create(&home, &["alpha"]);
    let path = home.ok(&["workspace", "path", "alpha"]);
    assert_eq!(path.trim(), home.workspace_dir(&id).to_str().unwrap());
}

#[test]
fn delete_needs_confirmation_without_a_terminal() {
    let home = Home::new();
    let id = create(&home, &["alpha"]);
    home.ok(&["binding", "set", "phone", &id]);
    home.ok(&["workspace", "storage", "write", "alpha", "a.txt", "x"]);
    let err = home.fails(&["workspace", "delete", "alpha"]);
    assert!(
        err.contains("--yes") && err.contains("not a terminal"),
        "{err}"
    );
    assert!(
        home.workspace_dir(&id).exists(),
        "refused delete removed nothing"
    );
    let r = home.run(&["workspace", "delete", "alpha", "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("unbound 1 device"), "{}", r.stderr);
    assert!(!home.workspace_dir(&id).exists());
    assert_eq!(
        home.json(&["binding", "list", "--json"]),
        serde_json::json!([])
    );
    let err = home.fails(&["workspace", "delete", "alpha", "--yes"]);
    assert!(err.contains("not found"), "{err}");
    // The name is free again.
    create(&home, &["alpha"]);
}

#[test]
fn gc_removes_only_stale_workspaces() {
    let home = Home::new();
    let old = create(&home, &["old"]);
    let fresh = create(&home, &["fresh"]);
    age_workspace(&home, &old, "2020-01-01T00:00:00Z");
    let dflt = home.json(&["binding", "resolve", "cli-device", "--json"]);
    let dev_ws = dflt["workspace"]["id"].as_str().unwrap().to_owned();
    age_workspace(&home, &dev_ws, "2020-01-01T00:00:00Z");

    let dry = home.json(&["workspace", "gc", "--dry-run", "--json"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["max_age_days"], 90);
    let mut ids: Vec<&str> = dry["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    ids.sort();
    let mut want = vec![old.as_str(), dev_ws.as_str()];
    want.sort();
    assert_eq!(ids, want);
    assert!(home.workspace_dir(&old).exists(), "dry run removes nothing");

    let err = home.fails(&["workspace", "gc"]);
    assert!(err.contains("--yes"), "{err}");
    let out = home.ok(&["workspace", "gc", "--yes"]);
    assert!(out.contains(&old) && out.contains("removed"), "{out}");
    assert!(!home.workspace_dir(&old).exists());
    assert!(home.workspace_dir(&fresh).exists());
    assert_eq!(
        home.json(&["binding", "list", "--json"]),
        serde_json::json!([]),
        "gc unbinds"
    );
    // With a short max-age everything goes except what was just used... and nothing goes
    // when nothing is stale.
    let none = home.json(&["workspace", "gc", "--max-age", "90", "--yes", "--json"]);
    assert_eq!(none["workspaces"], serde_json::json!([]));
}

#[test]
fn storage_commands() {
    let home = Home::new();
    create(&home, &["alpha"]);
    home.ok(&[
        "workspace",
        "storage",
        "write",
        "alpha",
        "notes/today.md",
        "# hello\n",
    ]);
    let r = home.run_stdin(
        &["workspace", "storage", "write", "alpha", "bin/data"],
        &[0, 1, 2, 255],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = home.run_stdin(
        &["workspace", "storage", "write", "alpha", "dash.txt", "-"],
        b"from stdin",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        home.ok(&["workspace", "storage", "read", "alpha", "notes/today.md"]),
        "# hello\n"
    );
    assert_eq!(
        home.ok(&["workspace", "storage", "read", "alpha", "dash.txt"]),
        "from stdin"
    );
    let raw = home
        .cmd(&["workspace", "storage", "read", "alpha", "bin/data"])
        .output()
        .unwrap();
    assert_eq!(raw.stdout, vec![0, 1, 2, 255]);

    let listing = home.json(&["workspace", "storage", "list", "alpha", "--json"]);
    let names: Vec<(&str, &str)> = listing
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        vec![("bin", "dir"), ("dash.txt", "file"), ("notes", "dir")]
    );
    let sub = home.json(&["workspace", "storage", "list", "alpha", "notes", "--json"]);
    assert_eq!(sub[0]["path"], "notes/today.md");
    assert_eq!(sub[0]["size"], 8);
    let table = home.ok(&["workspace", "storage", "list", "alpha"]);
    assert!(
        table.starts_with("KIND") && table.contains("dash.txt"),
        "{table}"
    );

    let err = home.fails(&["workspace", "storage", "rm", "alpha", "notes"]);
    assert!(
        err.contains("not empty") && err.contains("recursive"),
        "{err}"
    );
    home.ok(&["workspace", "storage", "rm", "-r", "alpha", "notes"]);
    home.ok(&["workspace", "storage", "rm", "alpha", "dash.txt"]);
    let err = home.fails(&["workspace", "storage", "read", "alpha", "dash.txt"]);
    assert!(
        err.contains("not found") && err.contains("dash.txt"),
        "{err}"
    );
    let err = home.fails(&["workspace", "storage", "read", "alpha", "bin"]);
    assert!(err.contains("folder"), "{err}");
    let err = home.fails(&["workspace", "storage", "read", "nope", "x"]);
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn binding_commands() {
    let home = Home::new();
    let a = create(&home, &["alpha"]);
    let b = create(&home, &["beta"]);
    home.ok(&["binding", "set", "phone ü 1", "alpha"]);
    home.ok(&["binding", "set", "laptop", "beta"]);
    let r = home.run(&["binding", "set", "laptop", "alpha"]);
    assert!(r.stderr.contains(&format!("(was {b})")), "{}", r.stderr);
    let list = home.json(&["binding", "list", "--json"]);
    assert_eq!(
        list,
        serde_json::json!([
            {"device": "laptop", "workspace": a},
            {"device": "phone ü 1", "workspace": a},
        ])
    );
    let table = home.ok(&["binding", "list"]);
    assert!(
        table.starts_with("DEVICE") && table.contains("phone ü 1"),
        "{table}"
    );
    // resolve returns the bound workspace, or creates and binds a new one.
    assert_eq!(home.ok(&["binding", "resolve", "laptop"]).trim(), a);
    let new = home.ok(&["binding", "resolve", "tablet"]).trim().to_owned();
    assert!(uuid_like(&new) && new != a && new != b);
    assert_eq!(home.ok(&["binding", "resolve", "tablet"]).trim(), new);
    home.ok(&["binding", "rm", "laptop"]);
    let err = home.fails(&["binding", "rm", "laptop"]);
    assert!(
        err.contains("not found") && err.contains("binding list"),
        "{err}"
    );
    let err = home.fails(&["binding", "set", "x", "no-such-workspace"]);
    assert!(err.contains("not found"), "{err}");
    let err = home.fails(&["binding", "set", "bad\u{7}device", "alpha"]);
    assert!(
        err.contains("device id") && err.contains("control"),
        "{err}"
    );
}

#[test]
fn config_init_and_show_layers_and_redaction() {
    let home = Home::new();
    home.ok(&["config", "init"]);
    let path = home.path().join("config.toml");
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("[providers.claude]")
    );
    let err = home.fails(&["config", "init"]);
    assert!(err.contains("--force"), "{err}");
    std::fs::write(
        &path,
        "provider = \"claude\"\nmodle = 1\n[providers.gemini]\nmodel = \"g-1\"\n",
    )
    .unwrap();
    home.ok(&["config", "init", "--force"]);
    std::fs::write(
        &path,
        "provider = \"claude\"\nmodle = 1\n[providers.gemini]\nmodel = \"g-1\"\n",
    )
    .unwrap();

    let id = create(&home, &["alpha"]);
    std::fs::write(
        home.workspace_dir(&id).join("config.toml"),
        "provider = \"gemini\"\n",
    )
    .unwrap();

    let r = home.run(&["config", "show", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("unknown key 'modle'"), "{}", r.stderr);
    let global: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(global["provider"], "claude");

    let mut cmd = home.cmd(&["config", "show", "--workspace", "alpha", "--json"]);
    cmd.env("GEMINI_API_KEY", "secret-gemini-key");
    let r = berth_testkit::run(cmd);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stdout.contains("secret-gemini-key") && !r.stderr.contains("secret-gemini-key"));
    let ws: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(ws["provider"], "gemini");
    assert_eq!(ws["model"], "g-1");
    assert_eq!(ws["config"]["providers"]["gemini"]["api_key"], "<redacted>");
    assert_eq!(ws["layers"].as_array().unwrap().len(), 3);
    // Every key has its effective value, defaults filled in, and says where it came from.
    assert_eq!(ws["config"]["ports"]["first"], 20000);
    assert_eq!(ws["config"]["agent"]["max_tool_iterations"], 50);
    assert_eq!(
        ws["config"]["agent"]["context_tokens"], 1_000_000,
        "gemini's window"
    );
    assert_eq!(ws["sources"]["ports.first"], "default");
    assert_eq!(
        ws["sources"]["providers.gemini.api_key"],
        "environment (GEMINI_API_KEY)"
    );
    let workspace_file = home.workspace_dir(&id).join("config.toml");
    assert_eq!(
        ws["sources"]["provider"],
        workspace_file.display().to_string()
    );
    assert_eq!(
        ws["sources"]["providers.gemini.model"],
        path.display().to_string()
    );

    let mut cmd = home.cmd(&["config", "show", "-w", "alpha"]);
    cmd.env("BERTH_MODEL", "m-override")
        .env("ANTHROPIC_API_KEY", "sk-ant-secret");
    let r = berth_testkit::run(cmd);
    assert!(
        r.stdout.contains("model m-override") && !r.stdout.contains("sk-ant-secret"),
        "{}",
        r.stdout
    );
    let line = |key: &str| {
        r.stdout
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key} in {}", r.stdout))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        line("model ="),
        "model = \"m-override\" # environment (BERTH_MODEL)"
    );
    assert_eq!(
        line("max_tool_iterations ="),
        "max_tool_iterations = 50 # default"
    );
    assert_eq!(line("block ="), "block = 10 # default");

    std::fs::write(&path, "[providers.claude]\napi_key = \"sk-leak\n").unwrap();
    let err = home.fails(&["config", "show"]);
    assert!(
        err.contains("config.toml") && err.contains("line 2") && !err.contains("sk-leak"),
        "{err}"
    );
}

#[test]
fn no_command_needs_an_api_key_and_help_explains() {
    let home = Home::new();
    let help = home.ok(&["--help"]);
    assert!(
        help.contains("workspace") && help.contains("binding") && help.contains("BERTH_HOME"),
        "{help}"
    );
    let help = home.ok(&["workspace", "gc", "--help"]);
    assert!(
        help.contains("--max-age") && help.contains("90") && help.contains("--dry-run"),
        "{help}"
    );
    let r = home.run(&["workspace", "frobnicate"]);
    assert_eq!(r.code, 2, "usage errors exit 2");
    // Everything above ran with every provider key removed from the environment.
    create(&home, &[]);
    home.ok(&["workspace", "list"]);
}

#[test]
fn list_to_a_closed_pipe_is_not_an_error() {
    let home = Home::new();
    for _ in 0..50 {
        create(&home, &[]);
    }
    let mut cmd = home.cmd(&["workspace", "list"]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

fn uuid_like(s: &str) -> bool {
    s.len() == 36 && s.chars().filter(|&c| c == '-').count() == 4
}

#[test]
fn exit_statuses_say_what_kind_of_failure() {
    let home = Home::new();
    let help = home.ok(&["--help"]);
    assert!(help.contains("Exit status:"), "{help}");
    home.ok(&["workspace", "create", "alpha", "--plain"]);
    home.ok(&["workspace", "storage", "write", "alpha", "dir/a.md", "x"]);
    let cases: &[(&[&str], i32)] = &[
        (&["workspace", "show", "nope"], 3),
        (&["workspace", "storage", "read", "alpha", "missing.md"], 3),
        (&["workspace", "show", "../etc"], 2),
        (&["workspace", "storage", "read", "alpha", "../x"], 2),
        (&["workspace", "storage", "read", "alpha", "dir"], 2),
        (&["workspace", "create", "x", "--plain", "--branch", "b"], 2),
        (
            &[
                "workspace",
                "create",
                "x",
                "--branch",
                "a",
                "--checkout",
                "b",
            ],
            2,
        ),
        (
            &["session", "new", "-w", "alpha", "--provider", "mistral"],
            2,
        ),
        (&["workspace", "delete", "alpha"], 4),
        (&["workspace", "storage", "rm", "alpha", "dir"], 4),
        (&["workspace", "create", "alpha", "--plain"], 6),
        (&["config", "init"], 0),
        (&["config", "init"], 6),
    ];
    for (args, code) in cases {
        let r = home.run(args);
        assert_eq!(r.code, *code, "berth {args:?}: {}", r.stderr);
    }
}

#[test]
fn a_storage_error_names_the_workspace_by_its_name() {
    let home = Home::new();
    let id = home.ok(&["workspace", "create", "notes"]).trim().to_owned();
    let r = home.run(&["workspace", "storage", "read", "notes", "missing.md"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("'missing.md' in workspace notes ({id}) storage")),
        "{}",
        r.stderr
    );
}
