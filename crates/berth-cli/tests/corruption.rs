//! A corrupt file is reported, naming the file, and left byte-for-byte as it was: berth never
//! treats it as missing and never overwrites it.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use support::Home;

const GARBAGE: &[&[u8]] = &[
    b"[bindings\n\"a\" = ",
    b"\xff\xfe not utf-8 \x00",
    b"bindings = 7\n",
    b"[bindings]\n\"dev\" = \"../../etc\"\n",
];

#[test]
fn corrupt_bindings_fail_loudly_and_stay_intact() {
    for garbage in GARBAGE {
        let home = Home::new();
        let id = home.ok(&["workspace", "create", "alpha"]).trim().to_owned();
        let file = home.path().join("bindings.toml");
        std::fs::write(&file, garbage).unwrap();
        for args in [
            vec!["binding", "list"],
            vec!["binding", "set", "dev2", "alpha"],
            vec!["binding", "rm", "dev"],
            vec!["binding", "resolve", "new-device"],
            vec!["workspace", "show", "alpha"],
            vec!["workspace", "delete", "alpha", "--yes"],
        ] {
            let err = home.fails(&args);
            assert!(
                err.contains("bindings.toml") && err.contains("corrupt"),
                "{args:?} on {garbage:?}: {err}"
            );
            assert_eq!(
                std::fs::read(&file).unwrap(),
                *garbage,
                "{args:?} changed bindings.toml"
            );
        }
        assert!(
            home.workspace_dir(&id).exists(),
            "a failed delete removed the workspace"
        );
        // Only the device-creating resolve could have made a workspace; it must not have.
        assert_eq!(
            home.json(&["workspace", "list", "--json"])
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
}

#[test]
fn corrupt_workspace_metadata_fails_loudly_and_stays_intact() {
    let metadata: &[&[u8]] = &[b"id = \"alpha\nname = ", b"\xff\xfe", b"id = 3\n", b"", b"id = \"someone-else\"\ncreated_at = \"2020-01-01T00:00:00Z\"\nlast_accessed = \"2020-01-01T00:00:00Z\"\n"];
    for garbage in metadata {
        let home = Home::new();
        let id = home.ok(&["workspace", "create", "alpha"]).trim().to_owned();
        home.ok(&["workspace", "create", "beta"]);
        let file = home.workspace_dir(&id).join("workspace.toml");
        std::fs::write(&file, garbage).unwrap();
        // A listing reads the index, which holds the record as berth last wrote it: the
        // workspace is listed, never dropped as missing...
        let listed = home.ok(&["workspace", "list"]);
        assert!(listed.contains(&id[..8]), "{listed}");
        // ...and a listing rebuilt from the records fails loudly on it.
        std::fs::remove_file(home.path().join("workspaces.index")).unwrap();
        for args in [
            vec!["workspace", "list"],
            vec!["workspace", "show", id.as_str()],
            vec!["workspace", "path", id.as_str()],
            vec!["workspace", "storage", "write", id.as_str(), "x", "y"],
            vec!["workspace", "storage", "read", id.as_str(), "x"],
            vec!["workspace", "gc", "--yes", "--max-age", "0"],
            vec!["binding", "set", "dev", id.as_str()],
        ] {
            let err = home.fails(&args);
            assert!(
                err.contains("workspace.toml") && err.contains("corrupt") && err.contains(&id),
                "{args:?} on {garbage:?}: {err}"
            );
            assert_eq!(
                std::fs::read(&file).unwrap(),
                *garbage,
                "{args:?} changed workspace.toml"
            );
        }
        // Other workspaces are still usable by name...
        home.ok(&["workspace", "show", "beta"]);
        // ...and deleting the broken one by its full id is how a person repairs the home.
        home.ok(&["workspace", "delete", &id, "--yes"]);
        assert!(!home.workspace_dir(&id).exists());
        home.ok(&["workspace", "list"]);
    }
}

#[test]
fn corrupt_errors_name_the_line() {
    let home = Home::new();
    let id = home.ok(&["workspace", "create", "alpha"]).trim().to_owned();
    let file = home.workspace_dir(&id).join("workspace.toml");
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("broken line without equals\n");
    std::fs::write(&file, &text).unwrap();
    let err = home.fails(&["workspace", "show", &id]);
    let line = text.lines().count();
    assert!(err.contains(&format!("line {line}")), "{err}");
}

#[test]
fn a_corrupt_workspace_record_exits_5_naming_file_and_line() {
    let home = Home::new();
    let id = home
        .ok(&["workspace", "create", "broken", "--plain"])
        .trim()
        .to_owned();
    let file = home.workspace_dir(&id).join("workspace.toml");
    let garbage = "id = \"x\"\nname = [unclosed\n";
    std::fs::write(&file, garbage).unwrap();
    for args in [
        vec!["workspace", "show", "broken"],
        vec!["workspace", "show", &id],
        vec!["workspace", "path", "broken"],
        vec!["workspace", "storage", "read", "broken", "a.md"],
        vec!["workspace", "storage", "write", "broken", "a.md", "x"],
        vec!["session", "new", "-w", "broken"],
        // By name, a corrupt record cannot be deleted: only its full id is sure to name it.
        vec!["workspace", "delete", "broken", "--yes"],
    ] {
        let r = home.run(&args);
        assert_eq!(r.code, 5, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("workspace.toml") && r.stderr.contains("line 2"),
            "{args:?}: {}",
            r.stderr
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), garbage, "{args:?}");
    }
    home.ok(&["workspace", "delete", &id, "--yes"]);
    assert!(!home.workspace_dir(&id).exists());
}
