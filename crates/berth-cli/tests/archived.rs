//! Archived workspaces through the `berth` binary: `workspace archive` keeps the work on its
//! ref and the record with its sessions; listings leave it out unless `--archived`; `show`
//! says so; new work in it is refused; gc and prune leave it alone; delete removes it.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::{commit, git};
use serde_json::Value;
use support::Home;
use support::runs::project;

fn json_in(home: &Home, dir: &Path, args: &[&str]) -> Value {
    let r = home.run_in(dir, args);
    assert_eq!(r.code, 0, "berth {args:?} failed: {}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_archived_git_workspace_keeps_its_sessions_and_is_left_out_until_asked_for() {
    let home = Home::new();
    let (_tmp, repo) = project();
    let made = json_in(&home, &repo, &["workspace", "create", "agent-a", "--json"]);
    let id = made["id"].as_str().unwrap().to_owned();
    let wt = PathBuf::from(made["git"]["worktree"].as_str().unwrap());
    commit(&wt, "lib.rs", "pub fn a() {}\n");
    std::fs::write(wt.join("README.md"), "hello, edited\n").unwrap();
    std::fs::write(wt.join("new.txt"), "brand new\n").unwrap();
    let session = home
        .ok(&["session", "new", "-w", "agent-a", "--title", "plan"])
        .trim()
        .to_owned();
    // One with no session: prune would take its record for one whose worktree went missing.
    json_in(&home, &repo, &["workspace", "create", "agent-b", "--json"]);
    home.ok(&["workspace", "create", "other", "--plain"]);

    let archived = home.json(&["workspace", "archive", "agent-a", "--json"]);
    let lost = format!("refs/berth/lost/{id}");
    assert_eq!(archived["lost_ref"], lost.as_str());
    assert_eq!(archived["already"], false);
    assert!(!wt.exists(), "the worktree is removed");
    assert_eq!(git(&repo, &["branch", "--list", "berth/agent-a"]), "");
    assert_eq!(
        git(&repo, &["show", &format!("{lost}:new.txt")]),
        "brand new\n"
    );
    assert_eq!(
        git(&repo, &["show", &format!("{lost}:lib.rs")]),
        "pub fn a() {}\n"
    );
    let said = home.run(&["workspace", "archive", "agent-b"]);
    assert_eq!(said.code, 0, "{}", said.stderr);
    assert!(said.stderr.contains("refs/berth/lost/"), "{}", said.stderr);

    // Listings leave it out unless asked; the JSON always has archived_at.
    let listed = home.json(&["workspace", "list", "--json"]);
    assert!(!ids(&listed).contains(&id), "{listed}");
    let other = &listed.as_array().unwrap()[0];
    assert!(other["archived_at"].is_null(), "{other}");
    let all = home.json(&["workspace", "list", "--archived", "--json"]);
    let entry = all
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["id"] == id.as_str())
        .expect("listed with --archived");
    assert!(entry["archived_at"].is_string(), "{entry}");
    assert!(entry["git_status"].is_null(), "{entry}");
    let table = home.ok(&["workspace", "list", "--archived"]);
    assert!(
        table.contains("ARCHIVED") && table.contains("agent-a"),
        "{table}"
    );
    assert!(!home.ok(&["workspace", "list"]).contains("agent-a"));

    let sessions = home.json(&["session", "list", "--all", "--json"]);
    assert!(!ids(&sessions).contains(&session), "{sessions}");
    let sessions = home.json(&["session", "list", "--all", "--archived", "--json"]);
    assert!(ids(&sessions).contains(&session), "{sessions}");

    // Shown, saying archived.
    let shown = home.ok(&["session", "show", &session]);
    assert!(shown.contains("archived"), "{shown}");
    let shown = home.json(&["session", "show", &session, "--json"]);
    assert!(shown["workspace_archived_at"].is_string(), "{shown}");
    let ws = home.ok(&["workspace", "show", "agent-a"]);
    assert!(ws.contains("archived") && ws.contains(&lost), "{ws}");
    assert!(home.json(&["workspace", "show", "agent-a", "--json"])["archived_at"].is_string());

    // No new work in it.
    let path = home.fails(&["workspace", "path", "agent-a"]);
    assert!(path.contains("archived"), "{path}");
    let new = home.fails(&["session", "new", "-w", "agent-a"]);
    assert!(new.contains("archived"), "{new}");

    // gc and prune leave both alone; archiving again changes nothing.
    let prune = home.json(&["workspace", "prune", "--dry-run", "--json"]);
    assert_eq!(prune["workspaces"], serde_json::json!([]), "{prune}");
    assert_eq!(prune["kept"], serde_json::json!([]), "{prune}");
    home.ok(&["workspace", "prune", "--yes"]);
    let gc = home.json(&["workspace", "gc", "--max-age", "0", "--yes", "--json"]);
    let removed = ids(&gc["workspaces"]);
    assert!(removed.iter().all(|r| r != &id), "{gc}");
    assert_eq!(removed.len(), 1, "only the plain workspace in use: {gc}");
    assert_eq!(
        ids(&home.json(&["workspace", "list", "--archived", "--json"])).len(),
        2
    );
    let again = home.json(&["workspace", "archive", "agent-a", "--json"]);
    assert_eq!(again["already"], true);
    assert_eq!(again["archived_at"], archived["archived_at"]);

    // Delete removes its record and sessions; a branch of its name made since stays.
    git(&repo, &["branch", "berth/agent-a", "main"]);
    home.ok(&["workspace", "delete", "agent-a", "--yes"]);
    home.fails(&["session", "show", &session]);
    assert!(!ids(&home.json(&["workspace", "list", "--archived", "--json"])).contains(&id));
    assert_ne!(git(&repo, &["branch", "--list", "berth/agent-a"]), "");
    assert!(
        git(&repo, &["rev-parse", &lost]).len() > 1,
        "the work stays on its ref"
    );
}

#[test]
fn an_archived_plain_workspace_keeps_its_folder_and_takes_no_session() {
    let home = Home::new();
    let id = home
        .ok(&["workspace", "create", "notes", "--plain"])
        .trim()
        .to_owned();
    home.ok(&["workspace", "storage", "write", "notes", "a.md", "kept"]);
    let archived = home.json(&["workspace", "archive", "notes", "--json"]);
    assert!(archived["lost_ref"].is_null());
    assert!(home.workspace_dir(&id).is_dir());
    assert_eq!(
        home.ok(&["workspace", "storage", "read", "notes", "a.md"]),
        "kept"
    );
    assert!(
        home.json(&["workspace", "list", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    let new = home.fails(&["session", "new", "-w", "notes"]);
    assert!(new.contains("archived"), "{new}");
    home.ok(&["workspace", "delete", "notes", "--yes"]);
    assert!(!home.workspace_dir(&id).exists());
}
