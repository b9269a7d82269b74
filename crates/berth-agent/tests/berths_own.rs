//! A plain workspace's folder is its agent's working folder and berth's own at once: beside the
//! work it keeps the workspace's record, its config layer and its sessions, which berth obeys
//! when it reads them back (a config layer's provider URL, an answer kept aside and recovered
//! as the model's). The file tools write the work, never those; the sandbox keeps a confined
//! command off them the same way.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use std::os::unix::fs::symlink;
use std::path::PathBuf;

use berth_agent::CancellationToken;
use berth_agent::tools::files::{EditFile, WriteFile};
use berth_agent::tools::{Tool, ToolContext};
use serde_json::json;

/// A plain workspace with a session, and the context of a turn working in its folder.
async fn in_plain_workspace() -> (tempfile::TempDir, ToolContext, PathBuf) {
    let home = tempfile::tempdir().unwrap();
    let ops = berth_ops::open(home.path(), &[]).unwrap();
    let (ws, session) = common::plain_workspace_with_session(&ops, "own").await;
    let work = ws.work_dir().unwrap().to_path_buf();
    let kept = PathBuf::from("sessions")
        .join(session.id.as_str())
        .join("storage/.berth/answer.partial");
    let cx = ToolContext::new(work, ops, session, CancellationToken::new());
    (home, cx, kept)
}

#[tokio::test]
async fn the_file_tools_do_not_write_berths_own_files_in_a_plain_workspace() {
    let (_home, cx, kept) = in_plain_workspace().await;
    let work = cx.cwd.clone();
    let record = std::fs::read(work.join("workspace.toml")).unwrap();
    // The person's config layer (the sandbox makes it, empty, when a command first runs).
    std::fs::write(work.join("config.toml"), "# the person's\n").unwrap();
    // Reached by name, through a symlink to the file, and through a symlink to a folder on
    // the way (each made as a confined command could make them in the work folder).
    symlink("config.toml", work.join("settings.toml")).unwrap();
    symlink("sessions", work.join("notes")).unwrap();
    let through_folder = PathBuf::from("notes").join(kept.strip_prefix("sessions").unwrap());
    for path in [
        PathBuf::from("config.toml"),
        PathBuf::from("settings.toml"),
        kept.clone(),
        through_folder,
        PathBuf::from("workspace.toml"),
    ] {
        let written = WriteFile
            .call(
                json!({"path": path, "content": "[providers.claude]\nbase_url = \"http://127.0.0.1:9\"\n"}),
                &cx,
            )
            .await;
        let why = written.expect_err(&format!("{} was written", path.display()));
        assert!(why.contains("berth's own"), "{}: {why}", path.display());
    }
    let edited = EditFile
        .call(
            json!({"path": "workspace.toml", "old_text": "id", "new_text": "di"}),
            &cx,
        )
        .await;
    assert!(edited.unwrap_err().contains("berth's own"));
    // Nothing of it landed.
    assert_eq!(
        std::fs::read_to_string(work.join("config.toml")).unwrap(),
        "# the person's\n"
    );
    assert!(!work.join(&kept).exists());
    assert_eq!(std::fs::read(work.join("workspace.toml")).unwrap(), record);
    // The work itself is the agent's, beside them.
    WriteFile
        .call(
            json!({"path": "src/main.rs", "content": "fn main() {}\n"}),
            &cx,
        )
        .await
        .unwrap();
    EditFile
        .call(
            json!({"path": "src/main.rs", "old_text": "{}", "new_text": "{ }"}),
            &cx,
        )
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(work.join("src/main.rs")).unwrap(),
        "fn main() { }\n"
    );
}

#[tokio::test]
async fn berths_own_entries_are_named_wherever_a_path_resolves_to_them() {
    let (home, cx, kept) = in_plain_workspace().await;
    let work = cx.cwd.clone();
    let ops = &cx.ops;
    assert_eq!(
        ops.berths_own_entry(&work.join(&kept)),
        Some(work.canonicalize().unwrap().join("sessions"))
    );
    assert!(ops.berths_own_entry(&work.join("config.toml")).is_some());
    assert!(
        ops.berths_own_entry(&work.join("memory/MEMORY.md"))
            .is_some()
    );
    // A name like an entry's, deeper in the work, is the work's.
    assert_eq!(ops.berths_own_entry(&work.join("src/config.toml")), None);
    assert_eq!(ops.berths_own_entry(&work.join("docs/sessions/a.md")), None);
    // Outside berth's workspaces, nothing is berth's by this rule.
    let elsewhere = tempfile::tempdir().unwrap();
    assert_eq!(
        ops.berths_own_entry(&elsewhere.path().join("config.toml")),
        None
    );
    // A folder outside that leads back in is followed.
    symlink(&work, elsewhere.path().join("back")).unwrap();
    assert!(
        ops.berths_own_entry(&elsewhere.path().join("back/workspace.toml"))
            .is_some()
    );
    drop(home);
}
