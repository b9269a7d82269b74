//! Trial merges against real repositories: a worktree's work as one commit whose id is the
//! same for the same work, made without changing the worktree or its index; and the files a
//! merge would conflict on, exactly as git names them, or none.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use berth_git::{BranchSpec, FileName, Repo, work_commit};
use berth_testkit::{commit, git};

/// A repository on `main` whose `f.txt` has three lines, and two worktrees started from it
/// (`berth/a`, `berth/b`).
fn setup() -> (tempfile::TempDir, PathBuf, [PathBuf; 2], Repo) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "-b", "main"]);
    commit(&root, "f.txt", "one\ntwo\nthree\n");
    let repo = Repo::discover(&root).unwrap();
    let worktrees = ["a", "b"].map(|name| {
        let wt = tmp.path().join(name);
        repo.add_worktree(&wt, &BranchSpec::New(format!("berth/{name}")), Some("main"))
            .unwrap();
        wt
    });
    (tmp, root, worktrees, repo)
}

fn rev(dir: &Path, rev: &str) -> String {
    git(dir, &["rev-parse", rev]).trim().to_owned()
}

/// What a look at a worktree could have changed: its status, its index file's bytes, and the
/// files in its git folder.
fn state(wt: &Path) -> (String, Vec<u8>, Vec<String>) {
    let git_dir = PathBuf::from(git(wt, &["rev-parse", "--absolute-git-dir"]).trim());
    let mut files: Vec<String> = std::fs::read_dir(&git_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    (
        git(wt, &["status", "--porcelain", "--untracked-files=all"]),
        std::fs::read(git_dir.join("index")).unwrap(),
        files,
    )
}

#[test]
fn the_same_work_is_the_same_commit_and_looking_changes_nothing() {
    let (_tmp, _root, [a, b], _repo) = setup();
    // Nothing uncommitted: the HEAD itself.
    assert_eq!(work_commit(&a).unwrap(), rev(&a, "HEAD"));

    // The same changes in two worktrees on the same commit, one of them staged: one id,
    // whenever it is asked for.
    for wt in [&a, &b] {
        std::fs::write(wt.join("f.txt"), "ONE\ntwo\nthree\n").unwrap();
        std::fs::write(wt.join("new.txt"), "untracked\n").unwrap();
    }
    git(&b, &["add", "f.txt"]);
    let before = state(&a);
    let first = work_commit(&a).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(work_commit(&a).unwrap(), first);
    assert_eq!(work_commit(&b).unwrap(), first);
    assert_eq!(
        state(&a),
        before,
        "the worktree, its index or its git folder changed"
    );

    // It holds the work, on top of the HEAD; no ref names it.
    assert_ne!(first, rev(&a, "HEAD"));
    assert_eq!(rev(&a, &format!("{first}^")), rev(&a, "HEAD"));
    assert_eq!(
        git(&a, &["show", &format!("{first}:new.txt")]),
        "untracked\n"
    );
    assert_eq!(
        git(&a, &["show", &format!("{first}:f.txt")]),
        "ONE\ntwo\nthree\n"
    );
    assert_eq!(git(&a, &["for-each-ref", "--points-at", &first]), "");

    // Other work, another id.
    std::fs::write(a.join("new.txt"), "changed\n").unwrap();
    assert_ne!(work_commit(&a).unwrap(), first);
}

#[test]
fn a_trial_names_the_files_that_conflict_or_none() {
    let (_tmp, root, [a, b], repo) = setup();
    // main changes line 1 since the worktrees left it; `a` changes it too (uncommitted), `b`
    // changes line 3 and adds a file.
    commit(&root, "f.txt", "uno\ntwo\nthree\n");
    std::fs::write(a.join("f.txt"), "ONE\ntwo\nthree\n").unwrap();
    std::fs::write(b.join("f.txt"), "one\ntwo\nTHREE\n").unwrap();
    std::fs::write(b.join("other.txt"), "b\n").unwrap();
    let main = repo.branch_tip("main").unwrap();
    let (work_a, work_b) = (work_commit(&a).unwrap(), work_commit(&b).unwrap());
    let before = (state(&a), state(&root), rev(&root, "main"));

    assert_eq!(
        repo.trial_merge(&main, &work_a).unwrap(),
        [FileName::from("f.txt")]
    );
    assert_eq!(repo.trial_merge(&main, &work_b).unwrap(), []);
    // Two agents' work against each other: line 1 against line 3 merges.
    assert_eq!(repo.trial_merge(&work_a, &work_b).unwrap(), []);
    // Nothing moved: no branch, no checkout, no index.
    assert_eq!((state(&a), state(&root), rev(&root, "main")), before);

    // Two conflicting files, one named with a tab and a byte that is not UTF-8: the exact
    // bytes, in git's order, quoted as git quotes them when shown.
    let odd = b"tab\there-\xff.txt";
    let odd_path = Path::new(std::ffi::OsStr::from_bytes(odd));
    std::fs::write(root.join(odd_path), "main\n").unwrap();
    git(&root, &["add", "--all"]);
    git(&root, &["commit", "--quiet", "-m", "odd on main"]);
    std::fs::write(a.join(odd_path), "agent\n").unwrap();
    let main = repo.branch_tip("main").unwrap();
    let files = repo.trial_merge(&main, &work_commit(&a).unwrap()).unwrap();
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[0], FileName::from("f.txt"));
    assert_eq!(files[1].as_bytes(), odd);
    assert_eq!(files[1].shown(), "\"tab\\there-\\377.txt\"");
}

#[test]
fn a_trial_that_git_cannot_make_is_an_error_and_a_base_names_its_local_branch() {
    let (_tmp, root, [a, _], repo) = setup();
    // Histories with nothing in common.
    git(&root, &["checkout", "--quiet", "--orphan", "alone"]);
    commit(&root, "f.txt", "other\n");
    let alone = repo.branch_tip("alone").unwrap();
    let err = repo
        .trial_merge(&alone, &work_commit(&a).unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("merge-tree"), "{err}");

    assert_eq!(repo.local_base("main").as_deref(), Some("main"));
    assert_eq!(repo.local_base("origin/main").as_deref(), Some("main"));
    assert_eq!(repo.local_base("origin/nowhere"), None);
    assert!(repo.branch_tip("nowhere").is_err());
}
