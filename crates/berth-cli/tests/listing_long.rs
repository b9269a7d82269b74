//! A listing long enough for its fast paths, through the real binary: an index over 256 KiB,
//! parsed in runs of lines on several threads, and a `workspace list --json` of over 2,000
//! workspaces, formatted in runs. Both must give what one pass gives: every workspace once, in
//! id order, with what its record says, as the same JSON document every time.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use serde_json::Value;
use support::Home;

const REBUILD: &str = "rebuilding the workspace index";
const COUNT: usize = 2_400;

/// Writes `COUNT` workspace records (every other named) as a restore from a backup would:
/// files berth did not write, which its first listing indexes.
fn restore_workspaces(home: &Home) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..COUNT {
        let id = format!("restored-{i:05}");
        let dir = home.path().join("workspaces").join(&id);
        std::fs::create_dir_all(&dir).unwrap();
        let name = match i % 2 {
            0 => format!("name = \"r-{i}\"\n"),
            _ => String::new(),
        };
        let record = format!(
            "id = \"{id}\"\n{name}description = \"restored workspace {i} {}\"\n\
             created_at = \"2026-01-01T00:00:00Z\"\nlast_accessed = \"2026-01-02T00:00:{:02}Z\"\n",
            "x".repeat(i % 50),
            i % 60
        );
        std::fs::write(dir.join("workspace.toml"), record).unwrap();
        if i % 2 == 0 {
            std::fs::write(home.path().join("names").join(format!("r-{i}")), &id).unwrap();
        }
        ids.push(id);
    }
    ids
}

fn listing(home: &Home) -> (String, String) {
    let run = home.run(&["workspace", "list", "--json"]);
    assert_eq!(run.code, 0, "list failed: {}", run.stderr);
    (run.stdout, run.stderr)
}

#[test]
fn a_long_listing_is_every_workspace_once_in_order() {
    let home = Home::new();
    home.ok(&["workspace", "create", "first"]);
    let mut ids = restore_workspaces(&home);
    let (rebuilt, err) = listing(&home);
    assert!(err.contains(REBUILD), "{err}");
    let index = std::fs::metadata(home.path().join("workspaces.index")).unwrap();
    assert!(index.len() > 256 << 10, "{} bytes", index.len());

    // From the index now, parsed and written in runs: the same document, byte for byte.
    let (read, err) = listing(&home);
    assert!(!err.contains(REBUILD), "{err}");
    assert_eq!(read, rebuilt);
    let all: Value = serde_json::from_str(&read).unwrap();
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), COUNT + 1);
    let listed: Vec<&str> = all.iter().map(|w| w["id"].as_str().unwrap()).collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "in id order");
    for w in all.iter().filter(|w| w["name"] != "first") {
        let i: usize = w["id"].as_str().unwrap()[9..].parse().unwrap();
        assert_eq!(
            w["description"].as_str().unwrap().len(),
            20 + i.to_string().len() + i % 50
        );
        assert_eq!(w["name"].is_null(), i % 2 == 1, "{w}");
        let used = format!("2026-01-02T00:00:{:02}Z", i % 60);
        assert_eq!(w["last_accessed"], used.as_str());
    }

    // Writes by other processes after the index exists: seen without a rebuild.
    let gone = ids.remove(COUNT / 2);
    home.ok(&["workspace", "delete", &gone, "--yes"]);
    home.ok(&["workspace", "archive", "r-0"]);
    home.ok(&["workspace", "create", "last"]);
    let (read, err) = listing(&home);
    assert!(!err.contains(REBUILD), "{err}");
    let all: Value = serde_json::from_str(&read).unwrap();
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["name"].as_str())
        .collect();
    assert!(
        names.contains(&"last") && !names.contains(&"r-0"),
        "archived listed"
    );
    assert!(!read.contains(&format!("\"{gone}\"")), "deleted listed");
    assert_eq!(all.as_array().unwrap().len(), COUNT + 1 - 2 + 1);
    let shown = home.json(&["workspace", "show", "r-2", "--json"]);
    assert_eq!(shown["id"], "restored-00002");
}
