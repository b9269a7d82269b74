//! A prompt's append (`append_syncing`) runs on the caller's thread only when nothing makes it
//! wait: while another writer holds the transcript's lock it waits for it, on the blocking
//! pool, and a torn tail is mended before it appends, as every append mends one; a long
//! transcript a person ended is read whole there too. A FIFO where the transcript or a lock
//! file belongs is refused at once, never waited on.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use berth_core::{Message, NewSession, NewWorkspace, Role, SessionId, SessionStore, WorkspaceId};
use berth_store_fs::FsStore;
use chrono::Utc;

/// A store with one session in one workspace, and the session's folder.
async fn one_session(home: &std::path::Path) -> (FsStore, SessionId, PathBuf) {
    let store = FsStore::open(home).unwrap();
    let ws = WorkspaceId::new("alpha").unwrap();
    berth_core::WorkspaceStore::create(
        &store,
        NewWorkspace {
            id: Some(ws.clone()),
            ..NewWorkspace::default()
        },
        Utc::now(),
    )
    .await
    .unwrap();
    let id = SessionId::new("s1").unwrap();
    let new = NewSession {
        id: Some(id.clone()),
        workspace: ws,
        title: "t".to_owned(),
        provider: berth_core::config::ProviderKind::Gemini,
        model: "m".to_owned(),
        cwd: None,
        agent: None,
    };
    store.create(new, Utc::now()).await.unwrap();
    let dir = home.join("workspaces/alpha/sessions/s1");
    assert!(
        dir.join("session.md").is_file(),
        "the layout this test knows"
    );
    (store, id, dir)
}

/// A pause that leaves the runtime's threads free (this crate's tokio has no timer).
async fn pause(how_long: Duration) {
    tokio::task::spawn_blocking(move || std::thread::sleep(how_long))
        .await
        .unwrap();
}

/// Appends a prompt as a turn does (`append_syncing`), to its sync; the prompt appended.
async fn append_prompt(store: &FsStore, id: &SessionId) -> Message {
    let prompt = Message::new(Role::User, "the prompt");
    store
        .append_syncing(id, &prompt)
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    prompt
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_append_waits_for_another_writer() {
    let home = tempfile::tempdir().unwrap();
    let (store, id, dir) = one_session(home.path()).await;
    // Another writer (a lock on its own open file, as another process's) holds the
    // transcript.
    let other = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(".transcript.lock"))
        .unwrap();
    other.lock().unwrap();
    let prompt = Message::new(Role::User, "the prompt");
    let append = {
        let (store, id, prompt) = (store.clone(), id.clone(), prompt.clone());
        tokio::spawn(async move { store.append_syncing(&id, &prompt).await?.wait().await })
    };
    pause(Duration::from_millis(300)).await;
    assert!(!append.is_finished(), "the append waits for the lock");
    let text = std::fs::read_to_string(dir.join("session.md")).unwrap();
    assert!(
        !text.contains("the prompt"),
        "nothing is written under another's lock"
    );
    other.unlock().unwrap();
    for _ in 0..100 {
        if append.is_finished() {
            break;
        }
        pause(Duration::from_millis(100)).await;
    }
    assert!(
        append.is_finished(),
        "the append goes on once the lock is free"
    );
    append.await.unwrap().unwrap();
    let transcript = store.read_transcript(&id).await.unwrap();
    assert_eq!(transcript.messages, [prompt]);
}

#[tokio::test]
async fn a_prompt_append_mends_a_torn_tail_first() {
    let home = tempfile::tempdir().unwrap();
    let (store, id, dir) = one_session(home.path()).await;
    let kept = Message::new(Role::User, "kept");
    store.append(&id, &kept).await.unwrap();
    let torn = berth_core::transcript::encode_message(&Message::new(
        Role::Assistant,
        "an answer that never finished",
    ));
    let cut = &torn.as_bytes()[..torn.len() / 2];
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("session.md"))
        .unwrap();
    file.write_all(cut).unwrap();
    drop(file);
    let prompt = append_prompt(&store, &id).await;
    let transcript = store.read_transcript(&id).await.unwrap();
    assert_eq!(transcript.messages, [kept, prompt]);
    assert_eq!(transcript.torn_tail, 0);
    let recovered = std::fs::read(dir.join("session.recovered.md")).unwrap();
    assert!(
        recovered.windows(cut.len() - 1).any(|w| w == &cut[1..]),
        "the torn bytes are kept in session.recovered.md"
    );
}

/// `f` on a thread of its own, which must end within seconds: what never waits, ends.
fn at_once<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("it ended, instead of waiting on a FIFO")
}

#[test]
fn a_fifo_for_the_transcript_or_a_lock_is_refused_at_once() {
    for name in ["session.md", ".transcript.lock", ".turn.lock"] {
        let home = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (store, id, dir) = rt.block_on(one_session(home.path()));
        let path = dir.join(name);
        std::fs::remove_file(&path).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let error = at_once(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(async {
                match name {
                    ".turn.lock" => store.hold_turn(&id).await.map(drop),
                    _ => {
                        let prompt = Message::new(Role::User, "the prompt");
                        store.append_syncing(&id, &prompt).await?.wait().await
                    }
                }
            })
        })
        .expect_err(name);
        let said = error.to_string();
        assert!(said.contains(name), "{name}: {said}");
    }
}

/// A long transcript that does not end with berth's trailer (a person wrote its last block)
/// is read whole before the append, as any such transcript is: the prompt lands after it.
#[tokio::test]
async fn a_prompt_append_after_a_long_block_a_person_wrote() {
    let home = tempfile::tempdir().unwrap();
    let (store, id, dir) = one_session(home.path()).await;
    let long = "a line a person wrote\n".repeat(4000);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("session.md"))
        .unwrap();
    write!(file, "\n## User\n\n{long}").unwrap();
    drop(file);
    assert!(std::fs::metadata(dir.join("session.md")).unwrap().len() > 64 * 1024);
    let prompt = append_prompt(&store, &id).await;
    let transcript = store.read_transcript(&id).await.unwrap();
    assert_eq!(
        transcript.messages.len(),
        2,
        "{:?}",
        transcript.messages.len()
    );
    assert_eq!(transcript.messages[0].content.trim_end(), long.trim_end());
    assert_eq!(transcript.messages[1], prompt);
}
