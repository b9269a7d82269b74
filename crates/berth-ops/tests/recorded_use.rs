//! A use of a workspace is recorded at most once a minute, so a process that recorded one
//! lately skips loading the record on the next (see `WorkspaceManager::touch`). What the load
//! also told, that the workspace is still there, must hold without it: a workspace deleted
//! meanwhile, by this process or another, is gone to every use of its storage and sessions.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod common;

use berth_ops::{Message, Ops, Owner, Role};

async fn workspace_in_use(ops: &Ops) -> (berth_ops::StorageRef, berth_ops::Session) {
    let (_, session) = common::plain_workspace_with_session(ops, "used").await;
    let session_storage = ops
        .storage(Owner::Session, session.id.as_str())
        .await
        .unwrap();
    // Uses that record the workspace's use, so it is known fresh from here on.
    ops.write_file(&session_storage, "note.md", b"one".to_vec())
        .await
        .unwrap();
    ops.append_message(&session, &Message::new(Role::User, "hello"))
        .await
        .unwrap();
    (session_storage, session)
}

async fn assert_gone(
    ops: &Ops,
    at: &berth_ops::StorageRef,
    session: &berth_ops::Session,
    home: &std::path::Path,
) {
    let write = ops.write_file(at, "note.md", b"two".to_vec()).await;
    assert!(
        write.as_ref().is_err_and(|e| e.is_not_found()),
        "a write to a deleted workspace's session storage: {write:?}"
    );
    let read = ops.read_file(at, "note.md").await;
    assert!(
        read.as_ref().is_err_and(|e| e.is_not_found()),
        "a read of a deleted workspace's session storage: {read:?}"
    );
    let append = ops
        .append_message(session, &Message::new(Role::User, "again"))
        .await;
    assert!(
        append.as_ref().is_err_and(|e| e.is_not_found()),
        "an append to a deleted workspace's session: {append:?}"
    );
    let left: Vec<_> = std::fs::read_dir(home.join("workspaces"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| !n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(left.is_empty(), "a deleted workspace came back: {left:?}");
}

#[tokio::test]
async fn a_workspace_deleted_by_this_process_is_gone_to_its_next_use() {
    let home = tempfile::tempdir().unwrap();
    let ops = berth_ops::open(home.path(), &[]).unwrap();
    let (at, session) = workspace_in_use(&ops).await;
    let plan = ops.plan_delete("used", false).await.unwrap();
    ops.delete_workspace(plan).await.unwrap();
    assert_gone(&ops, &at, &session, home.path()).await;
}

#[tokio::test]
async fn a_workspace_deleted_by_another_process_is_gone_to_its_next_use() {
    let home = tempfile::tempdir().unwrap();
    let ops = berth_ops::open(home.path(), &[]).unwrap();
    let (at, session) = workspace_in_use(&ops).await;
    let other = berth_ops::open(home.path(), &[]).unwrap();
    let plan = other.plan_delete("used", false).await.unwrap();
    other.delete_workspace(plan).await.unwrap();
    assert_gone(&ops, &at, &session, home.path()).await;
}
