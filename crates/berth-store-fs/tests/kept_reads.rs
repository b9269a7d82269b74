//! What one store keeps between lock-free reads (records, name entries, storage roots' open
//! handles) never hides a change another process made: two `FsStore`s on one home stand for
//! two processes, and the files are left to settle first, so that the first store keeps them.
//! The workspace that owns a session is kept too, and followed when the session is deleted
//! and made again elsewhere under its id. And a read on the caller's thread never waits on
//! what is not a file.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::time::Duration;

use berth_core::{
    DeleteCondition, Message, NewSession, NewWorkspace, Role, SessionId, StoragePath, StorageScope,
    StorageStore, WorkspaceId, WorkspaceName, WorkspaceStore,
};
use berth_store_fs::FsStore;
use chrono::Utc;

/// Longer than the store waits before it keeps a file it read (files changed within it are
/// read every time).
fn settle() {
    std::thread::sleep(Duration::from_millis(250));
}

fn named(id: &str, name: &str, description: &str) -> NewWorkspace {
    NewWorkspace {
        id: Some(WorkspaceId::new(id).unwrap()),
        name: Some(WorkspaceName::new(name).unwrap()),
        description: description.to_owned(),
        ..NewWorkspace::default()
    }
}

#[tokio::test]
async fn a_name_given_to_another_workspace_by_another_process_is_followed() {
    let home = tempfile::tempdir().unwrap();
    let (this, other) = (
        FsStore::open(home.path()).unwrap(),
        FsStore::open(home.path()).unwrap(),
    );
    let name = WorkspaceName::new("task").unwrap();
    other
        .create(named("first-one", "task", "the first"), Utc::now())
        .await
        .unwrap();
    settle();
    // Read twice, so that the second read is one from what this store keeps.
    for _ in 0..2 {
        assert_eq!(
            this.load_by_name(&name).await.unwrap().description,
            "the first"
        );
    }
    let first = WorkspaceId::new("first-one").unwrap();
    other.delete(&first, DeleteCondition::Always).await.unwrap();
    assert!(this.load_by_name(&name).await.unwrap_err().is_not_found());
    assert!(this.load(&first).await.unwrap_err().is_not_found());
    other
        .create(named("second-one", "task", "the second"), Utc::now())
        .await
        .unwrap();
    settle();
    let found = this.load_by_name(&name).await.unwrap();
    assert_eq!(
        (found.id.as_str(), found.description.as_str()),
        ("second-one", "the second")
    );
}

#[tokio::test]
async fn a_record_rewritten_by_another_process_is_read_again() {
    let home = tempfile::tempdir().unwrap();
    let (this, other) = (
        FsStore::open(home.path()).unwrap(),
        FsStore::open(home.path()).unwrap(),
    );
    let id = WorkspaceId::new("rewritten").unwrap();
    other
        .create(named("rewritten", "rewritten", "d"), Utc::now())
        .await
        .unwrap();
    settle();
    let before = this.load(&id).await.unwrap().last_accessed;
    assert_eq!(this.load(&id).await.unwrap().last_accessed, before);
    let later = before + chrono::Duration::hours(1);
    other.update_accessed(&id, later).await.unwrap();
    assert_eq!(this.load(&id).await.unwrap().last_accessed, later);
}

#[tokio::test]
async fn storage_read_after_its_workspace_was_removed_and_made_again_is_the_new_ones() {
    let home = tempfile::tempdir().unwrap();
    let (this, other) = (
        FsStore::open(home.path()).unwrap(),
        FsStore::open(home.path()).unwrap(),
    );
    let id = WorkspaceId::new("again").unwrap();
    let scope = StorageScope::Workspace(id.clone());
    let notes = StoragePath::new("notes.md").unwrap();
    other
        .create(named("again", "again", "d"), Utc::now())
        .await
        .unwrap();
    other.write(&scope, &notes, b"old".to_vec()).await.unwrap();
    assert_eq!(this.read(&scope, &notes).await.unwrap(), b"old");
    assert_eq!(this.read(&scope, &notes).await.unwrap(), b"old");
    other.delete(&id, DeleteCondition::Always).await.unwrap();
    assert!(this.read(&scope, &notes).await.unwrap_err().is_not_found());
    // The same id again, with a storage folder of its own: the old one's handle must not
    // serve it, whether or not this store let go of it when it saw the workspace gone.
    other
        .create(named("again", "again", "d"), Utc::now())
        .await
        .unwrap();
    assert!(this.read(&scope, &notes).await.unwrap_err().is_not_found());
    other.write(&scope, &notes, b"new".to_vec()).await.unwrap();
    assert_eq!(this.read(&scope, &notes).await.unwrap(), b"new");
}

#[tokio::test]
async fn a_storage_folder_replaced_by_hand_is_read_as_it_is_now() {
    let home = tempfile::tempdir().unwrap();
    let store = FsStore::open(home.path()).unwrap();
    let id = WorkspaceId::new("by-hand").unwrap();
    let scope = StorageScope::Workspace(id.clone());
    let notes = StoragePath::new("notes.md").unwrap();
    store
        .create(named("by-hand", "by-hand", "d"), Utc::now())
        .await
        .unwrap();
    store.write(&scope, &notes, b"old".to_vec()).await.unwrap();
    assert_eq!(store.read(&scope, &notes).await.unwrap(), b"old");
    let root = home.path().join("workspaces/by-hand/storage");
    std::fs::rename(&root, home.path().join("moved-away")).unwrap();
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("notes.md"), "by hand").unwrap();
    assert_eq!(store.read(&scope, &notes).await.unwrap(), b"by hand");
}

/// A FIFO where a workspace's config belongs (made by hand, or by anything that can write the
/// home) is an error at once: the read is made on the caller's (async) thread, which it would
/// otherwise hold until something wrote to the FIFO.
#[tokio::test]
async fn a_fifo_for_a_config_is_refused_without_waiting() {
    let home = tempfile::tempdir().unwrap();
    let store = FsStore::open(home.path()).unwrap();
    let ws = store
        .create(named("fifo-one", "fifo", ""), Utc::now())
        .await
        .unwrap();
    let config = home
        .path()
        .join("workspaces")
        .join(ws.id.as_str())
        .join("config.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&config)
        .status()
        .unwrap();
    assert!(made.success());
    // Were the read to wait, this writer would end it three seconds on, with a config.
    let writer = config.clone();
    std::thread::spawn(move || {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::thread::sleep(Duration::from_secs(3));
        if let Ok(mut fifo) = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&writer)
        {
            let _ = fifo.write_all(b"x = 1\n");
        }
    });
    let start = std::time::Instant::now();
    let read = store.load_config(&ws.id).await;
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    let err = read.unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
}

/// A session `id` in workspace `ws`, titled `title`.
fn session(id: &SessionId, ws: &str, title: &str) -> NewSession {
    NewSession {
        id: Some(id.clone()),
        workspace: WorkspaceId::new(ws).unwrap(),
        title: title.to_owned(),
        provider: berth_core::config::ProviderKind::Gemini,
        model: "m".to_owned(),
        cwd: None,
        agent: None,
    }
}

/// This store knows which workspace owns the session after its first look; another process
/// deletes the session and makes one under the same id in another workspace. This store
/// finds the new one (its record, its transcript, its appends), never the old folder's.
#[tokio::test]
async fn a_session_made_again_elsewhere_by_another_process_is_followed() {
    let home = tempfile::tempdir().unwrap();
    let (this, other) = (
        FsStore::open(home.path()).unwrap(),
        FsStore::open(home.path()).unwrap(),
    );
    for ws in ["first-one", "second-one"] {
        WorkspaceStore::create(&other, named(ws, ws, ""), Utc::now())
            .await
            .unwrap();
    }
    let id = SessionId::new("the-session").unwrap();
    berth_core::SessionStore::create(&other, session(&id, "first-one", "old"), Utc::now())
        .await
        .unwrap();
    // Twice: the second look is from what this store keeps.
    for _ in 0..2 {
        assert_eq!(
            berth_core::SessionStore::load(&this, &id)
                .await
                .unwrap()
                .title,
            "old"
        );
    }
    berth_core::SessionStore::delete(&other, &id).await.unwrap();
    assert!(
        berth_core::SessionStore::load(&this, &id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    berth_core::SessionStore::create(&other, session(&id, "second-one", "new"), Utc::now())
        .await
        .unwrap();
    let found = berth_core::SessionStore::load(&this, &id).await.unwrap();
    assert_eq!(
        (found.title.as_str(), found.workspace_id.as_str()),
        ("new", "second-one")
    );
    berth_core::SessionStore::append(&this, &id, &Message::new(Role::User, "hello"))
        .await
        .unwrap();
    let read = berth_core::SessionStore::read_transcript(&other, &id)
        .await
        .unwrap();
    assert_eq!(read.messages.len(), 1);
    assert_eq!(read.messages[0].content, "hello");
}
