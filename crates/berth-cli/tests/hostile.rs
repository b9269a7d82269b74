//! Hostile identifiers and storage paths, through the CLI and through the library: each is
//! refused with a message that says why, and nothing outside the home is touched.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::os::unix::fs::symlink;

use berth_core::{StoragePath, StorageScope, StorageStore, WorkspaceId, WorkspaceManager};
use berth_store_fs::FsStore;
use berth_testkit::snapshot;
use support::Home;

const BAD_IDS: &[&str] = &[
    "..",
    "../x",
    "a/../../x",
    "/etc/passwd",
    ".",
    "",
    "-rf",
    "a\\b",
];
const BAD_PATHS: &[&str] = &[
    "..",
    "../x",
    "a/../../x",
    "/etc/passwd",
    "",
    ".",
    "./",
    "../storageX/secret",
    "C:\\x",
];

/// A home with one workspace, plus a sibling folder outside the home holding a secret.
struct Setup {
    home: Home,
    outside: tempfile::TempDir,
    id: String,
}

fn setup() -> Setup {
    let home = Home::new();
    let id = home.ok(&["workspace", "create", "alpha"]).trim().to_owned();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "do not touch").unwrap();
    // The sibling-prefix trap: a folder named like the storage root plus a suffix.
    let sibling = home.workspace_dir(&id).join("storageX");
    std::fs::create_dir(&sibling).unwrap();
    std::fs::write(sibling.join("secret"), "sibling").unwrap();
    Setup { home, outside, id }
}

#[test]
fn hostile_workspace_ids_are_refused_by_the_cli() {
    let s = setup();
    let before = snapshot(s.outside.path());
    for bad in BAD_IDS {
        for args in [
            vec!["workspace", "show", bad],
            vec!["workspace", "path", bad],
            vec!["workspace", "delete", bad, "--yes"],
            vec!["workspace", "storage", "read", bad, "x"],
            vec!["workspace", "storage", "write", bad, "x", "y"],
            vec!["workspace", "create", "--id", bad],
            vec!["workspace", "create", bad],
            vec!["binding", "set", "dev", bad],
        ] {
            let err = s.home.fails(&args);
            // `.` names the workspace whose worktree holds the current folder: here, none.
            let here = *bad == "." && err.contains("in no workspace's worktree");
            assert!(
                err.contains("invalid") || err.contains("unexpected argument") || here,
                "{args:?}: {err}"
            );
        }
    }
    assert_eq!(snapshot(s.outside.path()), before);
    assert_eq!(
        s.home
            .json(&["workspace", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn hostile_storage_paths_are_refused_by_the_cli() {
    let s = setup();
    let before_outside = snapshot(s.outside.path());
    let before_ws = snapshot(&s.home.workspace_dir(&s.id));
    for bad in BAD_PATHS {
        for args in [
            vec!["workspace", "storage", "read", "alpha", bad],
            vec!["workspace", "storage", "write", "alpha", bad, "pwned"],
            vec!["workspace", "storage", "rm", "-r", "alpha", bad],
        ] {
            let err = s.home.fails(&args);
            assert!(err.contains("invalid storage path"), "{args:?}: {err}");
        }
        if !bad.is_empty() && *bad != "." && *bad != "./" {
            let err = s
                .home
                .fails(&["workspace", "storage", "list", "alpha", bad]);
            assert!(err.contains("invalid storage path"), "{bad}: {err}");
        }
    }
    assert_eq!(snapshot(s.outside.path()), before_outside);
    assert_eq!(
        snapshot(&s.home.workspace_dir(&s.id)),
        before_ws,
        "the root itself and the sibling are untouched"
    );
}

#[test]
fn symlinks_out_of_storage_are_refused() {
    let s = setup();
    let storage = s.home.workspace_dir(&s.id).join("storage");
    symlink(s.outside.path(), storage.join("out")).unwrap();
    symlink(s.outside.path().join("secret"), storage.join("secret-link")).unwrap();
    std::fs::create_dir(storage.join("inside")).unwrap();
    std::fs::write(storage.join("inside/ok.txt"), "fine").unwrap();
    symlink("inside/ok.txt", storage.join("inner-link")).unwrap();
    let before = snapshot(s.outside.path());

    for args in [
        vec!["workspace", "storage", "read", "alpha", "out/secret"],
        vec!["workspace", "storage", "read", "alpha", "secret-link"],
        vec!["workspace", "storage", "write", "alpha", "out/new", "pwned"],
        vec![
            "workspace",
            "storage",
            "write",
            "alpha",
            "out/secret",
            "pwned",
        ],
        vec![
            "workspace",
            "storage",
            "write",
            "alpha",
            "out/sub/new",
            "pwned",
        ],
        vec!["workspace", "storage", "list", "alpha", "out"],
        vec!["workspace", "storage", "rm", "alpha", "out/secret"],
    ] {
        let err = s.home.fails(&args);
        assert!(
            err.contains("outside") || err.contains("not a folder") || err.contains("is a file"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        snapshot(s.outside.path()),
        before,
        "nothing outside the home changed"
    );
    // A symlink that stays inside the root is followed.
    assert_eq!(
        s.home
            .ok(&["workspace", "storage", "read", "alpha", "inner-link"]),
        "fine"
    );
    // Removing a link removes the link, never its target.
    s.home
        .ok(&["workspace", "storage", "rm", "alpha", "secret-link"]);
    assert_eq!(snapshot(s.outside.path()), before);
    let kinds = s
        .home
        .json(&["workspace", "storage", "list", "alpha", "--json"]);
    assert!(
        kinds
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "out" && e["kind"] == "symlink")
    );
    // Even recursively, and even spelled as a folder, removal stops at the link.
    s.home
        .ok(&["workspace", "storage", "rm", "-r", "alpha", "out/"]);
    assert!(storage.join("out").symlink_metadata().is_err());
    assert_eq!(snapshot(s.outside.path()), before);
}

#[test]
fn a_storage_root_replaced_by_a_symlink_is_refused() {
    let s = setup();
    let storage = s.home.workspace_dir(&s.id).join("storage");
    std::fs::remove_dir(&storage).unwrap();
    symlink(s.outside.path(), &storage).unwrap();
    let before = snapshot(s.outside.path());
    let err = s
        .home
        .fails(&["workspace", "storage", "write", "alpha", "x", "pwned"]);
    assert!(err.contains("not a plain folder"), "{err}");
    let err = s
        .home
        .fails(&["workspace", "storage", "read", "alpha", "secret"]);
    assert!(err.contains("not a plain folder"), "{err}");
    assert_eq!(snapshot(s.outside.path()), before);
}

#[test]
fn the_library_refuses_the_same_inputs() {
    let s = setup();
    let storage = s.home.workspace_dir(&s.id).join("storage");
    symlink(s.outside.path(), storage.join("out")).unwrap();
    let store = FsStore::open(s.home.path()).unwrap();
    let manager: WorkspaceManager = store.manager();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        for bad in BAD_IDS {
            assert!(WorkspaceId::new(*bad).is_err(), "{bad:?}");
            let err = manager.resolve(bad).await.unwrap_err();
            assert!(
                err.to_string().contains("invalid workspace id"),
                "{bad:?}: {err}"
            );
        }
        assert!(WorkspaceId::new("a\0b").is_err());
        for bad in BAD_PATHS.iter().chain(&["a\0b", "x/\0"]) {
            let err = StoragePath::new(bad).unwrap_err().to_string();
            assert!(err.contains("invalid storage path"), "{bad:?}: {err}");
        }
        let scope = StorageScope::Workspace(WorkspaceId::new(s.id.as_str()).unwrap());
        let escape = StoragePath::new("out/secret").unwrap();
        let err = store.read(&scope, &escape).await.unwrap_err().to_string();
        assert!(err.contains("outside"), "{err}");
        let err = store
            .write(&scope, &escape, b"x".to_vec())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside"), "{err}");
    });
    assert_eq!(
        std::fs::read_to_string(s.outside.path().join("secret")).unwrap(),
        "do not touch"
    );
}
