//! The workspace records: creation, uniqueness of ids and names, what a missing one answers,
//! deletion, the git part, the workspace's own config, and the access time gc reads.

use chrono::{Duration, Utc};

use super::{Backend, named, path, wid};
use crate::error::Error;
use crate::id::{WorkspaceId, WorkspaceName};
use crate::model::{GitInfo, NewWorkspace, StorageScope};
use crate::store::DeleteCondition;

pub async fn workspace_round_trip(b: Backend) {
    let now = Utc::now();
    let ws = b
        .workspaces
        .create(named("ws-1", "alpha"), now)
        .await
        .unwrap();
    assert_eq!(ws.id.as_str(), "ws-1");
    assert_eq!(b.workspaces.load(&ws.id).await.unwrap(), ws);
    let by_name = b
        .workspaces
        .load_by_name(&WorkspaceName::new("alpha").unwrap())
        .await;
    assert_eq!(by_name.unwrap(), ws);
    let generated = b
        .workspaces
        .create(NewWorkspace::default(), now)
        .await
        .unwrap();
    assert!(
        uuid::Uuid::parse_str(generated.id.as_str()).is_ok(),
        "{}",
        generated.id
    );
    let listed = b.workspaces.list().await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(
        listed.windows(2).all(|w| w[0].id < w[1].id),
        "list is sorted by id"
    );
    let mut ids = b.workspaces.list_ids().await.unwrap();
    ids.sort();
    assert_eq!(ids, listed.iter().map(|w| w.id.clone()).collect::<Vec<_>>());

    // The git part survives exactly, paths with quotes, spaces and non-ASCII included.
    let git = GitInfo {
        repo: "/src/my \"proj\" ü".into(),
        branch: "berth/feature.x".into(),
        base_branch: "origin/main".into(),
        branch_created: true,
        worktree: "/wt/ws 'git'".into(),
    };
    let with_git = b
        .workspaces
        .create(
            NewWorkspace {
                git: Some(git.clone()),
                ..named("ws-git", "gitty")
            },
            now,
        )
        .await
        .unwrap();
    assert_eq!(with_git.git.as_ref(), Some(&git));
    assert_eq!(b.workspaces.load(&with_git.id).await.unwrap(), with_git);

    // Text that means something to SQL or TOML is kept as text.
    let quoted = b
        .workspaces
        .create(
            NewWorkspace {
                description: "it's'); DROP TABLE workspaces; --\n\"x\" = 1".into(),
                agent_id: Some("agent \"quoted\" ü".into()),
                ..named("ws-q", "quoted")
            },
            now,
        )
        .await
        .unwrap();
    assert_eq!(b.workspaces.load(&quoted.id).await.unwrap(), quoted);
    assert_eq!(b.workspaces.list().await.unwrap().len(), 4);
}

pub async fn workspace_uniqueness(b: Backend) {
    let now = Utc::now();
    b.workspaces
        .create(named("ws-1", "alpha"), now)
        .await
        .unwrap();
    let dup_id = b
        .workspaces
        .create(named("ws-1", "beta"), now)
        .await
        .unwrap_err();
    assert!(matches!(dup_id, Error::AlreadyExists { .. }), "{dup_id}");
    let dup_name = b
        .workspaces
        .create(named("ws-2", "alpha"), now)
        .await
        .unwrap_err();
    assert!(
        matches!(dup_name, Error::AlreadyExists { .. }),
        "{dup_name}"
    );
    assert!(
        b.workspaces
            .load(&wid("ws-2"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert_eq!(b.workspaces.list().await.unwrap().len(), 1);
}

pub async fn missing_things_are_not_found(b: Backend) {
    assert!(
        b.workspaces
            .load(&wid("nope"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    let name = WorkspaceName::new("nope").unwrap();
    assert!(
        b.workspaces
            .load_by_name(&name)
            .await
            .unwrap_err()
            .is_not_found()
    );
    let scope = StorageScope::Workspace(wid("nope"));
    assert!(
        b.storage
            .read(&scope, &path("a"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        b.storage
            .write(&scope, &path("a"), vec![1])
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        b.workspaces
            .delete(&wid("nope"), DeleteCondition::Always)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

pub async fn delete_frees_id_and_name(b: Backend) {
    let now = Utc::now();
    let ws = b
        .workspaces
        .create(named("ws-1", "alpha"), now)
        .await
        .unwrap();
    let scope = StorageScope::Workspace(ws.id.clone());
    b.storage
        .write(&scope, &path("notes/a.md"), b"x".to_vec())
        .await
        .unwrap();
    assert!(
        b.workspaces
            .delete(&ws.id, DeleteCondition::Always)
            .await
            .unwrap()
    );
    assert!(b.workspaces.load(&ws.id).await.unwrap_err().is_not_found());
    assert!(
        b.storage
            .read(&scope, &path("notes/a.md"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    // Both the id and the name can be used again, and the new workspace starts empty.
    b.workspaces
        .create(named("ws-1", "alpha"), now)
        .await
        .unwrap();
    assert!(b.storage.list(&scope, None).await.unwrap().is_empty());
}

/// The git part of a record can be replaced (a moved repository), and nothing else changes.
pub async fn workspace_set_git(b: Backend) {
    let now = Utc::now();
    let git = GitInfo {
        repo: "/src/old".into(),
        branch: "berth/x".into(),
        base_branch: "main".into(),
        branch_created: true,
        worktree: "/wt/x".into(),
    };
    let ws = b
        .workspaces
        .create(
            NewWorkspace {
                git: Some(git.clone()),
                ..named("ws-1", "alpha")
            },
            now,
        )
        .await
        .unwrap();
    let moved = GitInfo {
        repo: "/src/new 'place' ü".into(),
        ..git
    };
    b.workspaces.set_git(&ws.id, &moved).await.unwrap();
    let loaded = b.workspaces.load(&ws.id).await.unwrap();
    assert_eq!(loaded.git.as_ref(), Some(&moved));
    assert_eq!((loaded.name, loaded.description), (ws.name, ws.description));
    let listed = b.workspaces.list().await.unwrap();
    assert_eq!(listed[0].git.as_ref(), Some(&moved), "listings see it too");
    let err = b
        .workspaces
        .set_git(&wid("nope"), &moved)
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

/// A workspace can be archived and brought back: the time is kept (to the microsecond at
/// least), every other field stays, listings and pages see it, and a missing id is not found.
pub async fn workspace_archive(b: Backend) {
    let now = Utc::now();
    let git = GitInfo {
        repo: "/src/r".into(),
        branch: "berth/a".into(),
        base_branch: "main".into(),
        branch_created: true,
        worktree: "/wt/a".into(),
    };
    let ws = b
        .workspaces
        .create(
            NewWorkspace {
                git: Some(git.clone()),
                ..named("ws-1", "alpha")
            },
            now,
        )
        .await
        .unwrap();
    assert_eq!(ws.archived_at, None, "a new workspace is in use");
    let at = now + Duration::seconds(5);
    let archived = b.workspaces.set_archived(&ws.id, Some(at)).await.unwrap();
    let kept = archived.archived_at.expect("archived");
    assert!(
        (kept - at).abs() < Duration::microseconds(1),
        "{kept} vs {at}"
    );
    let loaded = b.workspaces.load(&ws.id).await.unwrap();
    assert_eq!(loaded, archived, "load shows what set_archived returned");
    assert_eq!(
        crate::model::Workspace {
            archived_at: None,
            ..loaded.clone()
        },
        ws,
        "nothing else changed"
    );
    let listed = b.workspaces.list().await.unwrap();
    assert_eq!(listed[0].archived_at, loaded.archived_at, "listings see it");
    let page = b.workspaces.page(None, 10).await.unwrap();
    assert_eq!(page[0].archived_at, loaded.archived_at, "pages see it");
    let by_name = b
        .workspaces
        .load_by_name(&WorkspaceName::new("alpha").unwrap())
        .await
        .unwrap();
    assert_eq!(by_name.archived_at, loaded.archived_at);

    let back = b.workspaces.set_archived(&ws.id, None).await.unwrap();
    assert_eq!(back, ws, "un-archived: the record as it was made");
    assert_eq!(b.workspaces.load(&ws.id).await.unwrap().archived_at, None);

    let err = b
        .workspaces
        .set_archived(&wid("nope"), Some(at))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

/// A workspace's own config is kept as text, exactly (comments included), and goes with it.
pub async fn workspace_config(b: Backend) {
    let now = Utc::now();
    let ws = b
        .workspaces
        .create(named("ws-1", "alpha"), now)
        .await
        .unwrap();
    assert!(b.workspaces.load_config(&ws.id).await.unwrap().is_none());
    let text = "# mine\nprovider = \"gemini\"  # why\n\n[git]\ncopy = [\".env\"]\n";
    b.workspaces.save_config(&ws.id, text).await.unwrap();
    assert_eq!(
        b.workspaces
            .load_config(&ws.id)
            .await
            .unwrap()
            .unwrap()
            .text,
        text
    );
    b.workspaces
        .save_config(&ws.id, "model = \"m\"\n")
        .await
        .unwrap();
    assert_eq!(
        b.workspaces
            .load_config(&ws.id)
            .await
            .unwrap()
            .unwrap()
            .text,
        "model = \"m\"\n"
    );
    let err = b
        .workspaces
        .save_config(&wid("nope"), "x = 1\n")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(
        b.workspaces
            .load(&wid("nope"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    // A workspace made again under the same id starts without the old one's config.
    b.workspaces
        .delete(&ws.id, DeleteCondition::Always)
        .await
        .unwrap();
    b.workspaces
        .create(named("ws-1", "alpha"), now)
        .await
        .unwrap();
    assert!(b.workspaces.load_config(&ws.id).await.unwrap().is_none());
}

pub async fn access_time_and_gc(b: Backend) {
    let old = Utc::now() - Duration::days(100);
    let stale = b
        .workspaces
        .create(named("stale", "stale"), old)
        .await
        .unwrap();
    b.workspaces
        .create(named("fresh", "fresh"), old)
        .await
        .unwrap();
    b.workspaces
        .create(
            NewWorkspace {
                id: Some(WorkspaceId::default_workspace()),
                ..NewWorkspace::default()
            },
            old,
        )
        .await
        .unwrap();
    let now = Utc::now();
    b.workspaces
        .update_accessed(&wid("fresh"), now)
        .await
        .unwrap();
    // Time never moves backwards.
    b.workspaces
        .update_accessed(&wid("fresh"), old)
        .await
        .unwrap();
    let fresh = b.workspaces.load(&wid("fresh")).await.unwrap();
    assert!(fresh.last_accessed >= now - Duration::seconds(1));
    let cutoff = now - Duration::days(90);
    let candidates = b.workspaces.gc(cutoff).await.unwrap();
    let ids: Vec<_> = candidates.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(
        ids,
        vec!["stale"],
        "default and fresh workspaces are never candidates"
    );
    // The idle condition is checked at removal time.
    assert!(
        !b.workspaces
            .delete(&wid("fresh"), DeleteCondition::IdleSince(cutoff))
            .await
            .unwrap()
    );
    assert!(
        b.workspaces
            .delete(&stale.id, DeleteCondition::IdleSince(cutoff))
            .await
            .unwrap()
    );
}
