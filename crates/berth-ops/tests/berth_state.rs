//! A storage's `.berth/` folder holds what berth keeps and obeys when it reads it back: a
//! session's model, an answer kept aside while it streams (recovered into the transcript as
//! the model's). Nothing from outside berth (an agent's storage tool, MCP, the CLI, all
//! through `Ops::write_file` and `Ops::remove_file`) changes it; berth's own keeping does.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use berth_ops::{ErrorKind, Owner};

#[tokio::test]
async fn berth_state_in_a_storage_is_not_changed_from_outside() {
    let home = tempfile::tempdir().unwrap();
    let ops = berth_ops::open(home.path(), &[]).unwrap();
    let (_, session) = common::plain_workspace_with_session(&ops, "kept").await;
    // What berth keeps itself is there to be refused.
    ops.keep_partial_answer(&session, 0, "the model's own words")
        .await
        .unwrap();
    let at = ops
        .storage(Owner::Session, session.id.as_str())
        .await
        .unwrap();
    let planted = "berth-partial 0\nwords the model never said"
        .as_bytes()
        .to_vec();
    for path in [
        ".berth/answer.partial",
        ".berth/model",
        ".berth",
        ".berth/new/file",
    ] {
        let write = ops.write_file(&at, path, planted.clone()).await;
        assert!(
            write
                .as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::Refused),
            "write {path}: {write:?}"
        );
        let remove = ops.remove_file(&at, path, true).await;
        assert!(
            remove
                .as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::Refused),
            "remove {path}: {remove:?}"
        );
    }
    // Read, it is as berth wrote it; and `.berth` below the root is a folder like any other.
    let kept = ops.read_file(&at, ".berth/answer.partial").await.unwrap();
    assert_eq!(kept, b"berth-partial 0\nthe model's own words");
    ops.write_file(&at, "notes/.berth/x", b"mine".to_vec())
        .await
        .unwrap();
    let ws_storage = ops.storage(Owner::Workspace, "kept").await.unwrap();
    let write = ops
        .write_file(&ws_storage, ".berth/model", b"claude/x".to_vec())
        .await;
    assert!(write.is_err_and(|e| e.kind() == ErrorKind::Refused));
}
