//! Archiving and restoring workspaces through `Ops`, against real git: the work kept on its
//! ref, the worktree gone and the record, sessions and storage kept; restored as it was; and
//! what each refuses.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::{Path, PathBuf};

use berth_ops::{CreateSession, CreateWorkspace, ErrorKind, Ops, Owner, Repository};
use berth_testkit::{commit, git};

/// A home on files, and a repository on `main` with one commit.
fn setup() -> (tempfile::TempDir, Ops, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("project");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "--quiet", "-b", "main"]);
    commit(&repo, "README.md", "hello\n");
    commit(&repo, "old.txt", "to be deleted\n");
    let ops = berth_ops::open(&tmp.path().join("home"), &[]).unwrap();
    (tmp, ops, repo.canonicalize().unwrap())
}

fn status(dir: &Path) -> String {
    git(dir, &["status", "--porcelain=v1", "--untracked-files=all"])
}

#[tokio::test]
async fn an_archived_git_workspace_keeps_its_record_and_comes_back_as_it_was() {
    let (_tmp, ops, repo) = setup();
    let ws = ops
        .create_workspace(CreateWorkspace {
            name: Some("agent".into()),
            ..CreateWorkspace::new(Repository::Named(repo.clone()))
        })
        .await
        .unwrap();
    let git_view = ws.git.clone().unwrap();
    let wt = git_view.worktree.clone();
    commit(&wt, "lib.rs", "pub fn a() {}\n");
    std::fs::write(wt.join("README.md"), "hello, edited\n").unwrap();
    std::fs::remove_file(wt.join("old.txt")).unwrap();
    std::fs::write(wt.join("new.txt"), "brand new\n").unwrap();
    let status_before = status(&wt);
    let head_before = git(&wt, &["rev-parse", "HEAD"]);
    let session = ops
        .create_session(CreateSession {
            workspace: "agent".into(),
            ..CreateSession::default()
        })
        .await
        .unwrap();
    let storage = ops.storage(Owner::Workspace, "agent").await.unwrap();
    ops.write_file(&storage, "notes.md", b"kept".to_vec())
        .await
        .unwrap();

    let archived = ops.archive_workspace("agent").await.unwrap();
    let lost = format!("refs/berth/lost/{}", ws.id);
    assert_eq!(archived.lost_ref.as_deref(), Some(lost.as_str()));
    assert!(!archived.already);
    assert!(!wt.exists(), "the worktree is removed");
    assert_eq!(
        git(&repo, &["branch", "--list", &git_view.branch]),
        "",
        "the branch berth made is removed"
    );
    assert_eq!(
        git(&repo, &["show", &format!("{lost}:new.txt")]),
        "brand new\n"
    );
    // The record, its git part, its session and its storage stay.
    let shown = ops.show_workspace("agent").await.unwrap();
    assert!(shown.archived_at.is_some());
    assert!(
        shown.git_status.is_none(),
        "no git status for what has no worktree"
    );
    assert_eq!(shown.git.as_ref().unwrap().branch, git_view.branch);
    assert_eq!(
        shown.git.as_ref().unwrap().base_branch,
        git_view.base_branch
    );
    assert_eq!(
        ops.resolve_session(session.id.as_str()).await.unwrap().id,
        session.id
    );
    assert_eq!(ops.read_file(&storage, "notes.md").await.unwrap(), b"kept");

    // Hidden from listings but for whoever asks; refused for new work.
    let ids = |views: Vec<berth_ops::WorkspaceView>| -> Vec<String> {
        views.into_iter().map(|v| v.id.to_string()).collect()
    };
    assert!(!ids(ops.list_workspaces().await.unwrap()).contains(&ws.id.to_string()));
    assert!(ids(ops.list_workspaces_including(true).await.unwrap()).contains(&ws.id.to_string()));
    assert!(
        ops.workspace_page(None, None, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(ops.list_sessions(None).await.unwrap().is_empty());
    assert_eq!(
        ops.list_sessions_including(None, true).await.unwrap().len(),
        1
    );
    let refused = ops
        .create_session(CreateSession {
            workspace: "agent".into(),
            ..CreateSession::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Refused, "{refused}");
    assert!(refused.to_string().contains("archived"), "{refused}");
    let path = ops.workspace_path("agent").await.unwrap_err();
    assert!(path.to_string().contains("archived"), "{path}");
    // Archiving again changes nothing.
    let again = ops.archive_workspace("agent").await.unwrap();
    assert!(again.already);
    assert_eq!(again.archived_at, archived.archived_at);

    let restored = ops.restore_workspace("agent", &lost).await.unwrap();
    assert!(restored.archived_at.is_none());
    assert!(restored.git_status.is_some());
    assert_eq!(git(&wt, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(status(&wt), status_before);
    assert_eq!(
        std::fs::read_to_string(wt.join("README.md")).unwrap(),
        "hello, edited\n"
    );
    assert!(
        ops.list_workspaces()
            .await
            .unwrap()
            .iter()
            .any(|v| v.id == ws.id)
    );
    ops.create_session(CreateSession {
        workspace: "agent".into(),
        ..CreateSession::default()
    })
    .await
    .unwrap();

    let not_archived = ops.restore_workspace("agent", &lost).await.unwrap_err();
    assert_eq!(not_archived.kind(), ErrorKind::Refused, "{not_archived}");
}

#[tokio::test]
async fn restore_refuses_a_missing_ref_and_a_taken_branch_and_the_default_is_never_archived() {
    let (_tmp, ops, repo) = setup();
    let ws = ops
        .create_workspace(CreateWorkspace {
            name: Some("agent".into()),
            ..CreateWorkspace::new(Repository::Named(repo.clone()))
        })
        .await
        .unwrap();
    let git_view = ws.git.clone().unwrap();
    commit(&git_view.worktree, "lib.rs", "pub fn a() {}\n");
    let archived = ops.archive_workspace("agent").await.unwrap();
    let lost = archived.lost_ref.unwrap();

    let missing = ops
        .restore_workspace("agent", "refs/berth/lost/nothing-here")
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    git(&repo, &["branch", &git_view.branch, "main"]);
    let taken = ops.restore_workspace("agent", &lost).await.unwrap_err();
    assert_eq!(taken.kind(), ErrorKind::Refused, "{taken}");
    assert!(taken.to_string().contains("exists at"), "{taken}");
    assert!(
        ops.show_workspace("agent")
            .await
            .unwrap()
            .archived_at
            .is_some(),
        "a refused restore leaves it archived"
    );
    // Deleting the archived workspace removes its record only: the branch of its name that
    // someone made since is theirs.
    let plan = ops.plan_delete("agent", false).await.unwrap();
    ops.delete_workspace(plan).await.unwrap();
    assert!(
        ops.resolve_workspace("agent")
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert_ne!(git(&repo, &["branch", "--list", &git_view.branch]), "");

    ops.default_workspace().await.unwrap();
    let default = ops.archive_workspace("default").await.unwrap_err();
    assert_eq!(default.kind(), ErrorKind::Refused, "{default}");
}

#[tokio::test]
async fn a_plain_workspace_is_only_marked() {
    let (_tmp, ops, _repo) = setup();
    let ws = ops
        .create_workspace(CreateWorkspace {
            name: Some("notes".into()),
            ..CreateWorkspace::new(Repository::None)
        })
        .await
        .unwrap();
    let folder = ws.path.clone().unwrap();
    let archived = ops.archive_workspace("notes").await.unwrap();
    assert_eq!(archived.lost_ref, None);
    assert!(folder.is_dir(), "a plain workspace keeps its folder");
    assert!(ops.list_workspaces().await.unwrap().is_empty());
    let back = ops.restore_workspace("notes", "unused").await.unwrap();
    assert!(back.archived_at.is_none());
    assert_eq!(ops.list_workspaces().await.unwrap().len(), 1);
}
