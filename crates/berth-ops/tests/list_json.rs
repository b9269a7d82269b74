//! `Ops::write_workspaces_json` (`berth workspace list --json`), written from the records' JSON
//! text, is byte for byte the pretty JSON of the `WorkspaceView`s that
//! `Ops::list_workspaces_including` builds, for every field a view has: names and none, text
//! that JSON escapes, an agent, ports, a git workspace in use (with its worktree's state) and
//! archived ones; on the filesystem store (its index read as it is, and a record marked dirty
//! read from disk) and on SQLite (the records serialized by the trait's default).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::Path;

use berth_ops::{CreateWorkspace, Ops, Repository};
use berth_testkit::{commit, git};

/// What the listing was before it was written from the records' text.
async fn by_view(ops: &Ops, archived: bool) -> String {
    let views = ops.list_workspaces_including(archived).await.unwrap();
    serde_json::to_string_pretty(&views).unwrap() + "\n"
}

async fn from_text(ops: &Ops, archived: bool) -> String {
    let mut out = Vec::new();
    ops.write_workspaces_json(archived, &mut out).await.unwrap();
    String::from_utf8(out).unwrap()
}

/// Workspaces with every field a view shows, one of them git (in `repo`), two archived.
async fn populate(ops: &Ops, repo: &Path) {
    let plain = |name: Option<&str>, description: &str| CreateWorkspace {
        name: name.map(str::to_owned),
        description: description.to_owned(),
        ..CreateWorkspace::new(Repository::None)
    };
    assert_eq!(from_text(ops, false).await, "[]\n", "an empty home");
    assert_eq!(from_text(ops, false).await, by_view(ops, false).await);
    ops.create_workspace(plain(None, "")).await.unwrap();
    ops.create_workspace(plain(
        Some("quoted"),
        "say \"hi\"\\ \n\ttab \u{1b}[31m é 🚀 \u{7f}",
    ))
    .await
    .unwrap();
    ops.create_workspace(CreateWorkspace {
        agent_id: Some("agent \"x\"".to_owned()),
        ..plain(Some("with-agent"), "an agent's")
    })
    .await
    .unwrap();
    let ported = ops
        .create_workspace(plain(Some("ported"), "ports"))
        .await
        .unwrap();
    ops.workspace_ports(ported.id.as_str()).await.unwrap();
    ops.create_workspace(plain(Some("put-away"), "archived"))
        .await
        .unwrap();
    ops.archive_workspace("put-away").await.unwrap();
    ops.create_workspace(CreateWorkspace {
        name: Some("in-git".into()),
        ..CreateWorkspace::new(Repository::Named(repo.to_path_buf()))
    })
    .await
    .unwrap();
    let old = ops
        .create_workspace(CreateWorkspace {
            name: Some("git-away".into()),
            ..CreateWorkspace::new(Repository::Named(repo.to_path_buf()))
        })
        .await
        .unwrap();
    // Work left in the worktree, so its state says something.
    std::fs::write(old.git.unwrap().worktree.join("new.txt"), "x").unwrap();
    ops.archive_workspace("git-away").await.unwrap();
}

fn repository(dir: &Path) -> std::path::PathBuf {
    let repo = dir.join("project");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "--quiet", "-b", "main"]);
    commit(&repo, "README.md", "hello\n");
    repo.canonicalize().unwrap()
}

#[tokio::test]
async fn the_list_from_the_index_is_the_list_of_the_views_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path());
    let home = tmp.path().join("home");
    let ops = berth_ops::open(&home, &[]).unwrap();
    populate(&ops, &repo).await;
    let worktree = ops
        .show_workspace("in-git")
        .await
        .unwrap()
        .git
        .unwrap()
        .worktree;
    std::fs::write(worktree.join("changed.txt"), "x").unwrap();
    for archived in [false, true] {
        let listed = from_text(&ops, archived).await;
        assert_eq!(
            listed,
            by_view(&ops, archived).await,
            "archived: {archived}"
        );
        assert_eq!(listed.contains("put-away"), archived);
        assert!(listed.contains("\"changed_files\": 1"), "{listed}");
    }

    // A record marked dirty in the index (its writer at work, or dead) is read from disk.
    let index = home.join("workspaces.index");
    let id = ops.show_workspace("quoted").await.unwrap().id;
    let mut log = std::fs::read_to_string(&index).unwrap();
    log.push_str(&format!("{{\"dirty\":\"{id}\"}}\n"));
    std::fs::write(&index, log).unwrap();
    let listed = from_text(&ops, true).await;
    assert_eq!(listed, by_view(&ops, true).await);
    assert!(listed.contains("say \\\"hi\\\""), "{listed}");
}

/// A corrupt index is neither trusted nor taken as empty: the listing rebuilds it from the
/// records (as every reader of the index does) and lists them all.
#[tokio::test]
async fn a_corrupt_index_is_rebuilt_from_the_records_not_listed_as_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let ops = berth_ops::open(&home, &[]).unwrap();
    for name in ["one", "two", "three"] {
        ops.create_workspace(CreateWorkspace {
            name: Some(name.into()),
            ..CreateWorkspace::new(Repository::None)
        })
        .await
        .unwrap();
    }
    let whole = from_text(&ops, false).await;
    let index = home.join("workspaces.index");
    let log = std::fs::read_to_string(&index).unwrap();
    // A record's line torn in the middle, a line that is not JSON, and one whose id is not
    // an id: each read as it is would drop or garble a workspace.
    let first_put = log.find("{\"put\"").unwrap();
    for broken in [
        format!("{}{{\"put\":{{\"id\":\"x\n", &log[..first_put]),
        format!("{log}not json\n"),
        log.replacen("{\"put\":{\"id\":\"", "{\"put\":{\"id\":\"../", 1),
        String::new(),
    ] {
        std::fs::write(&index, &broken).unwrap();
        assert_eq!(from_text(&ops, false).await, whole, "{broken}");
        let rebuilt = std::fs::read_to_string(&index).unwrap();
        assert_eq!(rebuilt.matches("{\"put\"").count(), 3, "rebuilt: {rebuilt}");
    }
}

#[tokio::test]
async fn the_list_from_sqlite_is_the_list_of_the_views_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path());
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let db = tmp.path().join("berth.db");
    std::fs::write(
        home.join("config.toml"),
        format!("[store]\nurl = \"sqlite://{}\"\n", db.display()),
    )
    .unwrap();
    let ops = berth_ops::open(&home, &[]).unwrap();
    populate(&ops, &repo).await;
    assert!(db.exists(), "the records are in SQLite");
    for archived in [false, true] {
        assert_eq!(
            from_text(&ops, archived).await,
            by_view(&ops, archived).await
        );
    }
}
