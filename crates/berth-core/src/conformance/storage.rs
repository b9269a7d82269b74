//! A workspace's storage: files written, read, appended to, listed and removed by path, the
//! folders they make, and what is refused (a folder read as a file, a file too big).

use chrono::Utc;

use super::{Backend, named, path};
use crate::error::Error;
use crate::model::{EntryKind, StorageScope};
use crate::storage_path::StoragePath;
use crate::store::StorageStore;

/// One workspace's storage, taken through its steps in order: each step starts from the files
/// the one before left.
pub async fn storage(b: Backend) {
    let ws = b
        .workspaces
        .create(named("w1", "one"), Utc::now())
        .await
        .unwrap();
    let scope = StorageScope::Workspace(ws.id.clone());
    let s = &*b.storage;
    write_read_and_append(s, &scope).await;
    list_and_remove(s, &scope).await;
    files_and_folders(s, &scope).await;
    hostile_names_and_size_limit(s, &scope).await;
}

/// Writes replace, reads give back the bytes, appends extend; leaves `context.md` and
/// `notes/deep/a.bin`.
async fn write_read_and_append(s: &dyn StorageStore, scope: &StorageScope) {
    s.write(scope, &path("context.md"), b"# ctx\n".to_vec())
        .await
        .unwrap();
    s.write(scope, &path("notes/deep/a.bin"), vec![0, 159, 255])
        .await
        .unwrap();
    s.write(scope, &path("notes/deep/a.bin"), vec![7])
        .await
        .unwrap();
    assert_eq!(
        s.read(scope, &path("notes/deep/a.bin")).await.unwrap(),
        vec![7]
    );
    // Appends go on the end of a file `write` made; a file not there is not found, and a
    // folder is not a file.
    s.append_unsynced(scope, &path("notes/deep/a.bin"), vec![8, 9])
        .await
        .unwrap();
    assert_eq!(
        s.read(scope, &path("notes/deep/a.bin")).await.unwrap(),
        vec![7, 8, 9]
    );
    assert!(
        s.append_unsynced(scope, &path("notes/none.bin"), vec![1])
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        s.append_unsynced(scope, &path("notes/deep"), vec![1])
            .await
            .is_err()
    );
    s.write(scope, &path("notes/deep/a.bin"), vec![7])
        .await
        .unwrap();
    // An unsynced write makes its folders and replaces the file whole, shorter or longer;
    // appends follow it; a folder is not a file.
    let kept = path("kept/.berth/answer");
    s.write_unsynced(scope, &kept, b"a longer first".to_vec())
        .await
        .unwrap();
    s.write_unsynced(scope, &kept, b"short".to_vec())
        .await
        .unwrap();
    s.append_unsynced(scope, &kept, b"er".to_vec())
        .await
        .unwrap();
    assert_eq!(s.read(scope, &kept).await.unwrap(), b"shorter");
    assert!(
        s.write_unsynced(scope, &path("notes/deep"), vec![1])
            .await
            .is_err()
    );
    s.remove(scope, &path("kept"), true).await.unwrap();
    assert_eq!(
        s.read(scope, &path("./context.md")).await.unwrap(),
        b"# ctx\n"
    );
}

/// Listing a folder, the refusals of treating a folder as a file and back, and removal;
/// leaves the storage empty.
async fn list_and_remove(s: &dyn StorageStore, scope: &StorageScope) {
    let root = s.list(scope, None).await.unwrap();
    let names: Vec<_> = root
        .iter()
        .map(|e| (e.name.as_str(), e.kind, e.size))
        .collect();
    assert_eq!(
        names,
        vec![
            ("context.md", EntryKind::File, 6),
            ("notes", EntryKind::Dir, 0)
        ]
    );
    let deep = s.list(scope, Some(&path("notes/deep"))).await.unwrap();
    assert_eq!(deep[0].path, "notes/deep/a.bin");
    // Reading a folder or listing a file is a clear error, not garbage.
    let onto_folder = s
        .write(scope, &path("notes"), b"x".to_vec())
        .await
        .unwrap_err();
    assert!(matches!(onto_folder, Error::IsFolder(_)), "{onto_folder}");
    assert!(matches!(
        s.read(scope, &path("notes")).await,
        Err(Error::IsFolder(_))
    ));
    assert!(matches!(
        s.list(scope, Some(&path("context.md"))).await,
        Err(Error::Refused(_))
    ));
    assert!(
        s.read(scope, &path("missing"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    let err = s.remove(scope, &path("notes"), false).await.unwrap_err();
    assert!(matches!(err, Error::Refused(_)), "{err}");
    s.remove(scope, &path("notes"), true).await.unwrap();
    s.remove(scope, &path("context.md"), false).await.unwrap();
    assert!(s.list(scope, None).await.unwrap().is_empty());
    assert!(
        s.remove(scope, &path("context.md"), false)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

/// Where files and folders may be, empty folders, and a recursive removal; leaves `f`,
/// `tree-x`, `tree0` and `treeX/y`.
async fn files_and_folders(s: &dyn StorageStore, scope: &StorageScope) {
    // A file cannot be written where a folder is, nor under a file.
    s.write(scope, &path("f"), vec![]).await.unwrap();
    let under_file = s.write(scope, &path("f/g"), vec![]).await.unwrap_err();
    assert!(matches!(under_file, Error::Refused(_)), "{under_file}");
    assert_eq!(s.read(scope, &path("f")).await.unwrap(), Vec::<u8>::new());
    let read_under_file = s.read(scope, &path("f/g")).await.unwrap_err();
    assert!(
        matches!(read_under_file, Error::Refused(_)),
        "{read_under_file}"
    );
    // An empty folder stays until removed, and is listed as a folder.
    s.write(scope, &path("d/x"), b"1".to_vec()).await.unwrap();
    s.remove(scope, &path("d/x"), false).await.unwrap();
    let kinds: Vec<_> = s
        .list(scope, None)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("d".to_owned(), EntryKind::Dir),
            ("f".to_owned(), EntryKind::File)
        ]
    );
    assert!(s.list(scope, Some(&path("d"))).await.unwrap().is_empty());
    s.remove(scope, &path("d"), false).await.unwrap();
    assert!(
        s.list(scope, Some(&path("d")))
            .await
            .unwrap_err()
            .is_not_found()
    );
    // A recursive removal takes what is beneath, and nothing that merely shares the prefix.
    for p in ["tree/a", "tree/b/c", "tree-x", "tree0", "treeX/y"] {
        s.write(scope, &path(p), p.as_bytes().to_vec())
            .await
            .unwrap();
    }
    s.remove(scope, &path("tree"), true).await.unwrap();
    let left: Vec<_> = s
        .list(scope, None)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(left, vec!["f", "tree-x", "tree0", "treeX"]);
    assert_eq!(s.read(scope, &path("treeX/y")).await.unwrap(), b"treeX/y");
}

/// Names that mean something elsewhere are kept as names; a file over the limit is refused.
async fn hostile_names_and_size_limit(s: &dyn StorageStore, scope: &StorageScope) {
    // Names that mean something to a shell or a database are just names.
    for hostile in ["it's; DROP TABLE files; --", "100%_x", "a\"b", "ü/ñ.md"] {
        let Ok(p) = StoragePath::new(hostile) else {
            continue;
        };
        s.write(scope, &p, hostile.as_bytes().to_vec())
            .await
            .unwrap();
        assert_eq!(s.read(scope, &p).await.unwrap(), hostile.as_bytes());
    }
    // Over the size limit is refused before anything is written.
    let big = vec![0u8; crate::storage_path::MAX_FILE_BYTES as usize + 1];
    let too_big = s.write(scope, &path("big"), big).await.unwrap_err();
    assert!(matches!(too_big, Error::Refused(_)), "{too_big}");
    assert!(
        s.read(scope, &path("big"))
            .await
            .unwrap_err()
            .is_not_found()
    );
}
