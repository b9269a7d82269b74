//! The workspace listing index (`workspaces.index`) through the real binary: kept current by
//! every write, rebuilt (with a message) when it cannot be trusted, never hiding a workspace
//! that exists or showing one that does not.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::io::Write;

use serde_json::Value;
use support::{Home, age_workspace};

const REBUILD: &str = "rebuilding the workspace index";

/// `workspace list --json`: the ids, and stderr.
fn list(home: &Home) -> (Vec<String>, String) {
    let run = home.run(&["workspace", "list", "--json"]);
    assert_eq!(run.code, 0, "list failed: {}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let ids = v
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap().to_owned())
        .collect();
    (ids, run.stderr)
}

/// The ids as the records say, sorted like the listing.
fn ids_on_disk(home: &Home) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(home.path().join("workspaces"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    ids.sort();
    ids
}

fn index(home: &Home) -> std::path::PathBuf {
    home.path().join("workspaces.index")
}

#[test]
fn every_write_keeps_the_index_current() {
    let home = Home::new();
    let a = home.ok(&["workspace", "create", "alpha"]).trim().to_owned();
    home.ok(&["workspace", "create", "beta"]);
    let (ids, err) = list(&home);
    assert_eq!(ids, ids_on_disk(&home));
    // A new home's first create starts the index: its first list reads it, without a word.
    assert!(index(&home).exists());
    assert!(!err.contains(REBUILD), "{err}");
    // Uses are recorded at most once a minute, so alpha is made old first (by hand, which
    // needs a rebuild).
    age_workspace(&home, &a, "2026-01-01T00:00:00Z");
    let (_, err) = list(&home);
    assert!(err.contains(REBUILD), "{err}");
    // Creates, a delete and a use after the index exists: no rebuild, and all of them seen.
    let g = home.ok(&["workspace", "create", "gamma"]).trim().to_owned();
    home.ok(&["workspace", "delete", "beta", "--yes"]);
    let before = home.json(&["workspace", "show", &a, "--json"])["last_accessed"].clone();
    home.ok(&["workspace", "storage", "write", &a, "note.txt", "hi"]);
    let (ids, err) = list(&home);
    assert!(!err.contains(REBUILD), "{err}");
    assert_eq!(ids, ids_on_disk(&home));
    assert!(
        ids.contains(&g) && ids.contains(&a) && ids.len() == 2,
        "{ids:?}"
    );
    let listed = home.json(&["workspace", "list", "--json"]);
    let alpha = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == a.as_str())
        .unwrap();
    assert_ne!(alpha["last_accessed"], before, "the use was not indexed");
    assert_eq!(
        alpha["last_accessed"],
        home.json(&["workspace", "show", &a, "--json"])["last_accessed"]
    );
}

#[test]
fn a_workspace_removed_or_added_behind_berths_back_is_noticed() {
    let home = Home::new();
    let a = home.ok(&["workspace", "create", "alpha"]).trim().to_owned();
    let b = home.ok(&["workspace", "create", "beta"]).trim().to_owned();
    list(&home);
    // A person removes a workspace folder by hand.
    std::fs::remove_dir_all(home.workspace_dir(&a)).unwrap();
    let (ids, err) = list(&home);
    assert!(err.contains(REBUILD), "{err}");
    assert!(!ids.contains(&a) && ids.contains(&b), "{ids:?}");
    // And copies one back in (as a restore from a backup would).
    let copy = home.path().join("workspaces").join(&a);
    std::fs::create_dir(&copy).unwrap();
    let record = std::fs::read_to_string(home.workspace_dir(&b).join("workspace.toml"))
        .unwrap()
        .replace(&b, &a)
        .replace("name = \"beta\"", "name = \"alpha\"");
    std::fs::write(copy.join("workspace.toml"), record).unwrap();
    let (ids, err) = list(&home);
    assert!(err.contains(REBUILD), "{err}");
    assert_eq!(ids, ids_on_disk(&home));
    // A berth create after the hand change must not make the index look current.
    std::fs::remove_dir_all(home.workspace_dir(&a)).unwrap();
    home.ok(&["workspace", "create", "gamma"]);
    let (ids, err) = list(&home);
    assert!(err.contains(REBUILD), "{err}");
    assert_eq!(ids, ids_on_disk(&home));
}

/// The state a writer leaves when it dies after rewriting a record but before indexing it: a
/// `dirty` mark, then the new record. Readers must read that record from disk.
#[test]
fn a_writer_that_died_mid_update_is_covered_by_its_dirty_mark() {
    let home = Home::new();
    let a = home.ok(&["workspace", "create", "alpha"]).trim().to_owned();
    list(&home);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(index(&home))
        .unwrap();
    writeln!(f, "{{\"dirty\":\"{a}\"}}").unwrap();
    drop(f);
    let file = home.workspace_dir(&a).join("workspace.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace(
            "name = \"alpha\"",
            "name = \"alpha\"\ndescription = \"updated\"",
        ),
    )
    .unwrap();
    let (_, err) = list(&home);
    assert!(!err.contains(REBUILD), "{err}");
    let listed = home.json(&["workspace", "list", "--json"]);
    let alpha = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == a.as_str())
        .unwrap()
        .clone();
    assert_eq!(alpha["description"], "updated");
}

#[test]
fn an_unreadable_or_foreign_index_is_rebuilt_not_trusted() {
    let home = Home::new();
    home.ok(&["workspace", "create", "alpha"]);
    list(&home);
    let good = std::fs::read_to_string(index(&home)).unwrap();
    let (header, rest) = good.split_once('\n').unwrap();
    for (what, text) in [
        ("garbage line", format!("{good}not json\n")),
        ("no header", rest.to_owned()),
        (
            "another boot",
            format!(
                "{}\n{rest}",
                header.replace("\"boot\":\"", "\"boot\":\"00000000-")
            ),
        ),
        ("empty", String::new()),
    ] {
        std::fs::write(index(&home), &text).unwrap();
        let (ids, err) = list(&home);
        assert!(err.contains(REBUILD), "{what}: {err}");
        assert_eq!(ids, ids_on_disk(&home), "{what}");
        let (_, err) = list(&home);
        assert!(!err.contains(REBUILD), "{what}: rebuilt twice: {err}");
    }
}

/// A record broken by hand is not hidden: the listing keeps showing the workspace as last
/// indexed, `show` reports the corruption, and a rebuild (the index removed) fails loudly.
#[test]
fn a_record_corrupted_by_hand_is_never_listed_as_missing() {
    let home = Home::new();
    let a = home.ok(&["workspace", "create", "alpha"]).trim().to_owned();
    list(&home);
    let file = home.workspace_dir(&a).join("workspace.toml");
    std::fs::write(&file, "id = \"alpha\nname = ").unwrap();
    let (ids, _) = list(&home);
    assert!(ids.contains(&a), "{ids:?}");
    let err = home.fails(&["workspace", "show", &a]);
    assert!(
        err.contains("corrupt") && err.contains("workspace.toml"),
        "{err}"
    );
    std::fs::remove_file(index(&home)).unwrap();
    let err = home.fails(&["workspace", "list"]);
    assert!(
        err.contains("corrupt") && err.contains("workspace.toml"),
        "{err}"
    );
}

/// Many processes creating, using and deleting at once: the index agrees with the records.
#[test]
fn concurrent_writers_leave_an_index_that_matches_the_records() {
    let home = Home::new();
    list(&home);
    std::thread::scope(|scope| {
        for w in 0..6 {
            let home = &home;
            scope.spawn(move || {
                for i in 0..8 {
                    let id = home
                        .ok(&["workspace", "create", &format!("w{w}-{i}")])
                        .trim()
                        .to_owned();
                    home.ok(&["workspace", "storage", "write", &id, "f", "x"]);
                    if i % 2 == 0 {
                        home.ok(&["workspace", "delete", &id, "--yes"]);
                    }
                }
            });
        }
    });
    let (ids, err) = list(&home);
    assert!(!err.contains(REBUILD), "{err}");
    assert_eq!(ids, ids_on_disk(&home));
    assert_eq!(ids.len(), 6 * 4, "{ids:?}");
}

/// What a library logs (here, berth-store-fs rebuilding its index) reaches a person as one
/// `berth: …` line, and `RUST_LOG` chooses how much: `off` silences it.
#[test]
fn a_librarys_log_line_reads_as_berths_and_rust_log_chooses() {
    let home = Home::new();
    let a = home.ok(&["workspace", "create", "alpha"]).trim().to_owned();
    list(&home);
    std::fs::remove_dir_all(home.workspace_dir(&a)).unwrap();
    let mut quiet = home.cmd(&["workspace", "list"]);
    quiet.env("RUST_LOG", "off");
    let r = berth_testkit::run(quiet);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains(REBUILD), "{}", r.stderr);
    // Rebuilt quietly; the next one is said again.
    let b = home.ok(&["workspace", "create", "beta"]).trim().to_owned();
    std::fs::remove_dir_all(home.workspace_dir(&b)).unwrap();
    let (_, err) = list(&home);
    let line = err
        .lines()
        .find(|l| l.contains(REBUILD))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(line.starts_with(&format!("berth: {REBUILD}")), "{line}");
}
