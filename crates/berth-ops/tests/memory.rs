//! A workspace's memory between two processes (two `Ops` on one home, as two berth
//! processes are): every note either one keeps is there, none lost to the other's write.

use berth_ops::{CreateWorkspace, Repository};

#[tokio::test]
async fn notes_kept_at_once_by_two_processes_are_all_kept() {
    let home = tempfile::tempdir().unwrap();
    let one = berth_ops::open(home.path(), &[]).unwrap();
    let two = berth_ops::open(home.path(), &[]).unwrap();
    one.create_workspace(CreateWorkspace {
        name: Some("shared".into()),
        ..CreateWorkspace::new(Repository::None)
    })
    .await
    .unwrap();
    let ws = one.resolve_workspace("shared").await.unwrap();
    let mut writers = Vec::new();
    for (who, ops) in [("one", one.clone()), ("two", two.clone())] {
        let ws = ws.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..25 {
                ops.remember(&ws, &format!("{who} note {i}")).await.unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let memory = two.memory(&ws).await.unwrap();
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
