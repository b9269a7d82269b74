//! A workspace's memory between two processes on one home: every note either one keeps is
//! there, none lost to the other's write. The writers are this test binary run again as
//! children (berth-testkit's `child`), each keeping its notes as fast as it can.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use berth_ops::{CreateWorkspace, Repository};
use berth_testkit::{child, child_role, wait_ok};

#[tokio::test]
async fn notes_kept_at_once_by_two_processes_are_all_kept() {
    let home = tempfile::tempdir().unwrap();
    let one = berth_ops::open(home.path(), &[]).unwrap();
    one.create_workspace(CreateWorkspace {
        name: Some("shared".into()),
        ..CreateWorkspace::new(Repository::None)
    })
    .await
    .unwrap();
    let ws = one.resolve_workspace("shared").await.unwrap();
    let writers: Vec<_> = ["one", "two"]
        .into_iter()
        .map(|who| {
            child("remember_child", who)
                .env("BERTH_HOME", home.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for w in writers {
        wait_ok(w);
    }
    let memory = one.memory(&ws).await.unwrap();
    assert_eq!(memory.notes.len(), 50, "{:?}", memory.notes);
    for who in ["one", "two"] {
        for i in 0..25 {
            let text = format!("{who} note {i}");
            assert!(memory.notes.iter().any(|n| n.text == text), "{text} lost");
        }
    }
    // A note is one line, and an empty one is refused.
    let kept = one.remember(&ws, "  two\nlines  ").await.unwrap();
    assert_eq!(kept.text, "two lines");
    assert!(one.remember(&ws, " \n ").await.is_err());
    // Forgetting needs the note to be one: a part several share is refused, naming them.
    let many = one.forget(&ws, "note 1").await.unwrap_err();
    assert!(many.to_string().contains("notes say"), "{many}");
    let gone = one.forget(&ws, "one note 24").await.unwrap();
    assert_eq!(gone.text, "one note 24");
    assert_eq!(one.memory(&ws).await.unwrap().notes.len(), 50);
}

#[test]
#[ignore = "a child role: run by its parent test"]
fn remember_child() {
    let who = child_role();
    let home = std::path::PathBuf::from(std::env::var("BERTH_HOME").unwrap());
    let ops = berth_ops::open(&home, &[]).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let ws = ops.resolve_workspace("shared").await.unwrap();
        for i in 0..25 {
            ops.remember(&ws, &format!("{who} note {i}")).await.unwrap();
        }
    });
}
