//! berth-git against real repositories made in temp dirs.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::{Path, PathBuf};

use berth_git::{BranchSpec, GitError, Health, Repo, WorktreeRef};
use berth_testkit::{commit, git};

/// A repository with one commit on `branch`.
fn repo_on(branch: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "-b", branch]);
    std::fs::write(root.join("README.md"), "hello\n").unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
    git(&root, &["add", "."]);
    git(&root, &["commit", "--quiet", "-m", "first"]);
    (tmp, root)
}

/// A clone of `origin` at `<dir>/clone`, so `origin/*` branches and `origin/HEAD` exist.
fn clone_of(origin: &Path, dir: &Path) -> PathBuf {
    let clone = dir.join("clone");
    git(
        dir,
        &[
            "clone",
            "--quiet",
            origin.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    clone
}

fn wt<'a>(path: &'a Path, branch: &'a str, base: &'a str, created: bool) -> WorktreeRef<'a> {
    WorktreeRef {
        path,
        branch,
        base_branch: base,
        branch_created: created,
    }
}

#[test]
fn discover_finds_the_main_checkout_from_anywhere() {
    let (tmp, root) = repo_on("main");
    let root = root.canonicalize().unwrap();
    assert_eq!(Repo::discover(&root.join("src")).unwrap().root(), root);
    let repo = Repo::discover(&root).unwrap();
    let path = tmp.path().join("wt");
    repo.add_worktree(&path, &BranchSpec::New("berth/a".into()), None)
        .unwrap();
    // From inside a linked worktree, the repository is still the main checkout.
    assert_eq!(Repo::discover(&path).unwrap().root(), root);
    let plain = tempfile::tempdir().unwrap();
    assert!(matches!(
        Repo::discover(plain.path()),
        Err(GitError::NotARepository(_))
    ));
    // A bare repository is a repository too: its own folder, from inside it or from inside
    // one of its worktrees.
    let bare = tmp.path().join("bare.git");
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            "--bare",
            root.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    let bare = bare.canonicalize().unwrap();
    let repo = Repo::discover(&bare).unwrap();
    assert!(repo.is_bare());
    assert_eq!(repo.root(), bare);
    assert_eq!(repo.default_base().unwrap(), "main", "its HEAD");
    let path = tmp.path().join("bare-wt");
    repo.add_worktree(&path, &BranchSpec::New("berth/b".into()), None)
        .unwrap();
    assert_eq!(Repo::discover(&path.join("src")).unwrap().root(), bare);
    assert_eq!(Repo::open(&bare).unwrap().root(), bare);
    assert_eq!(berth_git::linked_worktree(&path).unwrap().repo.root(), bare);
    let r = wt(&path, "berth/b", "main", true);
    assert_eq!(repo.status(r).health, Health::Ok);
    std::fs::write(path.join("wip"), "x").unwrap();
    assert!(matches!(
        repo.remove_worktree(r, false),
        Err(GitError::Dirty { .. })
    ));
    std::fs::remove_file(path.join("wip")).unwrap();
    repo.remove_worktree(r, false).unwrap();
    assert!(!path.exists() && !repo.has_branch("berth/b"));
}

#[test]
fn new_branch_from_the_default_base() {
    let (tmp, root) = repo_on("main");
    let repo = Repo::discover(&root).unwrap();
    let path = tmp.path().join("wt");
    let added = repo
        .add_worktree(&path, &BranchSpec::New("berth/feature".into()), None)
        .unwrap();
    assert_eq!(added.branch, "berth/feature");
    assert_eq!(added.base_branch, "main");
    assert!(added.branch_created);
    assert_eq!(
        std::fs::read_to_string(path.join("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert_eq!(
        git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "berth/feature"
    );
    let status = repo.status(wt(&path, "berth/feature", "main", true));
    assert_eq!(status.health, Health::Ok);
    assert_eq!(
        (status.ahead, status.behind, status.changed_files),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!(status.last_commit.unwrap().subject, "first");

    // Ahead, behind and changed files follow real work.
    commit(&path, "a.txt", "work in the worktree");
    commit(&root, "b.txt", "work on main");
    commit(&root, "c.txt", "more work on main");
    std::fs::write(path.join("untracked.txt"), "x").unwrap();
    std::fs::write(path.join("README.md"), "changed\n").unwrap();
    let status = repo.status(wt(&path, "berth/feature", "main", true));
    assert_eq!(
        (status.ahead, status.behind, status.changed_files),
        (Some(1), Some(2), Some(2))
    );
    assert_eq!(status.last_commit.unwrap().subject, "work in the worktree");
}

#[test]
fn base_detection() {
    // master when there is no main.
    let (tmp, root) = repo_on("master");
    assert_eq!(
        Repo::discover(&root).unwrap().default_base().unwrap(),
        "master"
    );
    // main wins over master; otherwise the current branch.
    let (_t2, other) = repo_on("trunk");
    assert_eq!(
        Repo::discover(&other).unwrap().default_base().unwrap(),
        "trunk"
    );
    git(&other, &["branch", "master"]);
    assert_eq!(
        Repo::discover(&other).unwrap().default_base().unwrap(),
        "master"
    );
    git(&other, &["branch", "main"]);
    assert_eq!(
        Repo::discover(&other).unwrap().default_base().unwrap(),
        "main"
    );
    // A clone's origin/HEAD comes first.
    let clone = clone_of(&root, tmp.path());
    git(&clone, &["branch", "main"]);
    assert_eq!(
        Repo::discover(&clone).unwrap().default_base().unwrap(),
        "origin/master"
    );
    // A detached HEAD with no main or master still has a base.
    let (_t3, detached) = repo_on("work");
    git(&detached, &["checkout", "--quiet", "--detach"]);
    git(&detached, &["branch", "-D", "work"]);
    assert_eq!(
        Repo::discover(&detached).unwrap().default_base().unwrap(),
        "HEAD"
    );
}

#[test]
fn explicit_base_and_existing_branches() {
    let (tmp, root) = repo_on("main");
    git(&root, &["branch", "release"]);
    commit(&root, "later.txt", "later");
    let repo = Repo::discover(&root).unwrap();
    let p1 = tmp.path().join("from-release");
    let a = repo
        .add_worktree(&p1, &BranchSpec::New("berth/r".into()), Some("release"))
        .unwrap();
    assert_eq!(a.base_branch, "release");
    assert!(
        !p1.join("later.txt").exists(),
        "branched from release, not main"
    );

    // An existing local branch is checked out, and is not berth's to delete.
    git(&root, &["branch", "feature"]);
    let p2 = tmp.path().join("feature");
    let b = repo
        .add_worktree(&p2, &BranchSpec::Existing("feature".into()), None)
        .unwrap();
    assert!(!b.branch_created);
    repo.remove_worktree(wt(&p2, "feature", "main", false), false)
        .unwrap();
    assert!(
        repo.has_branch("feature"),
        "a branch berth did not create survives removal"
    );

    // origin/<name> is tracked as a new local branch, which berth did create.
    git(&root, &["branch", "remote-only"]);
    let clone = clone_of(&root, tmp.path());
    let cloned = Repo::discover(&clone).unwrap();
    let p3 = tmp.path().join("remote-only");
    let c = cloned
        .add_worktree(&p3, &BranchSpec::Existing("remote-only".into()), None)
        .unwrap();
    assert!(c.branch_created);
    assert_eq!(
        git(&p3, &["rev-parse", "--abbrev-ref", "@{upstream}"]).trim(),
        "origin/remote-only"
    );

    let missing = repo.add_worktree(
        &tmp.path().join("x"),
        &BranchSpec::Existing("nope".into()),
        None,
    );
    assert!(matches!(missing, Err(GitError::BranchMissing(_))));
    assert!(!tmp.path().join("x").exists());
}

#[test]
fn failed_creates_leave_nothing_behind() {
    let (tmp, root) = repo_on("main");
    let repo = Repo::discover(&root).unwrap();
    let worktrees_before = git(&root, &["worktree", "list", "--porcelain"]);
    let branches_before = git(&root, &["branch", "--list"]);

    let exists = repo.add_worktree(&tmp.path().join("a"), &BranchSpec::New("main".into()), None);
    assert!(
        matches!(exists, Err(GitError::BranchExists(_))),
        "{exists:?}"
    );
    let bad_base = repo.add_worktree(
        &tmp.path().join("b"),
        &BranchSpec::New("berth/b".into()),
        Some("no-such-base"),
    );
    assert!(
        matches!(bad_base, Err(GitError::BadBase(_))),
        "{bad_base:?}"
    );
    let bad_name = repo.add_worktree(
        &tmp.path().join("c"),
        &BranchSpec::New("bad..name".into()),
        None,
    );
    assert!(bad_name.is_err());
    // git itself fails midway: the target folder is not empty.
    let occupied = tmp.path().join("occupied");
    std::fs::create_dir(&occupied).unwrap();
    std::fs::write(occupied.join("keep.txt"), "mine").unwrap();
    let midway = repo.add_worktree(&occupied, &BranchSpec::New("berth/d".into()), None);
    assert!(
        matches!(midway, Err(GitError::Command { .. })),
        "{midway:?}"
    );

    for p in ["a", "b", "c"] {
        assert!(!tmp.path().join(p).exists(), "{p} left behind");
    }
    assert_eq!(
        std::fs::read_to_string(occupied.join("keep.txt")).unwrap(),
        "mine",
        "a folder berth did not make is kept"
    );
    assert_eq!(
        git(&root, &["worktree", "list", "--porcelain"]),
        worktrees_before
    );
    assert_eq!(git(&root, &["branch", "--list"]), branches_before);
}

#[test]
fn removal_refuses_to_lose_work() {
    let (tmp, root) = repo_on("main");
    let repo = Repo::discover(&root).unwrap();
    let path = tmp.path().join("wt");
    repo.add_worktree(&path, &BranchSpec::New("berth/w".into()), None)
        .unwrap();
    let r = wt(&path, "berth/w", "main", true);

    std::fs::write(path.join("new.txt"), "uncommitted").unwrap();
    let dirty = repo.remove_worktree(r, false).unwrap_err();
    assert!(matches!(dirty, GitError::Dirty { count: 1, .. }), "{dirty}");
    assert!(dirty.to_string().contains("commit or stash"), "{dirty}");
    git(&path, &["add", "new.txt"]);
    git(
        &path,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "--quiet",
            "-m",
            "unpushed",
        ],
    );
    let unmerged = repo.remove_worktree(r, false).unwrap_err();
    assert!(
        matches!(unmerged, GitError::Unmerged { count: 1, .. }),
        "{unmerged}"
    );
    let short = git(&path, &["rev-parse", "--short", "HEAD"]);
    assert!(
        unmerged
            .to_string()
            .contains(&format!("{} unpushed", short.trim())),
        "the refusal names the commit: {unmerged}"
    );
    assert!(
        path.exists() && repo.has_branch("berth/w"),
        "refusals change nothing"
    );

    // Merged into the base, the branch may go.
    git(&root, &["merge", "--quiet", "--ff-only", "berth/w"]);
    repo.remove_worktree(r, false).unwrap();
    assert!(!path.exists());
    assert!(
        !repo.has_branch("berth/w"),
        "berth deletes the branch it created"
    );
}

#[test]
fn force_removes_dirty_and_unmerged_work() {
    let (tmp, root) = repo_on("main");
    let repo = Repo::discover(&root).unwrap();
    let path = tmp.path().join("wt");
    repo.add_worktree(&path, &BranchSpec::New("berth/f".into()), None)
        .unwrap();
    commit(&path, "x.txt", "unmerged");
    std::fs::write(path.join("y.txt"), "dirty").unwrap();
    repo.remove_worktree(wt(&path, "berth/f", "main", true), true)
        .unwrap();
    assert!(!path.exists() && !repo.has_branch("berth/f"));
}

#[test]
fn pushed_work_counts_as_safe() {
    let (tmp, origin) = repo_on("main");
    let clone = clone_of(&origin, tmp.path());
    let repo = Repo::discover(&clone).unwrap();
    let path = tmp.path().join("wt");
    repo.add_worktree(&path, &BranchSpec::New("berth/p".into()), None)
        .unwrap();
    commit(&path, "p.txt", "pushed work");
    git(&path, &["push", "--quiet", "-u", "origin", "berth/p"]);
    repo.remove_worktree(wt(&path, "berth/p", "origin/main", true), false)
        .unwrap();
}

#[test]
fn a_worktree_deleted_by_hand_is_pruned() {
    let (tmp, root) = repo_on("main");
    let repo = Repo::discover(&root).unwrap();
    let path = tmp.path().join("wt");
    repo.add_worktree(&path, &BranchSpec::New("berth/h".into()), None)
        .unwrap();
    std::fs::remove_dir_all(&path).unwrap();
    let status = repo.status(wt(&path, "berth/h", "main", true));
    assert_eq!(status.health, Health::WorktreeMissing);
    assert_eq!(status.ahead, Some(0), "branch facts are still known");
    repo.remove_worktree(wt(&path, "berth/h", "main", true), false)
        .unwrap();
    assert!(
        !git(&root, &["worktree", "list"]).contains("wt"),
        "git's record is pruned"
    );
    assert!(!repo.has_branch("berth/h"));
}

#[test]
fn a_moved_repository_and_a_missing_branch_show_in_health() {
    let (tmp, root) = repo_on("main");
    let repo = Repo::discover(&root).unwrap();
    let path = tmp.path().join("wt");
    repo.add_worktree(&path, &BranchSpec::New("berth/m".into()), None)
        .unwrap();
    assert_eq!(
        repo.status(wt(&path, "berth/gone", "main", true)).health,
        Health::BranchMissing
    );
    std::fs::rename(&root, tmp.path().join("moved")).unwrap();
    let status = repo.status(wt(&path, "berth/m", "main", true));
    assert_eq!(status.health, Health::RepoMissing);
    assert_eq!(status.changed_files, None);
}

#[test]
fn two_worktrees_of_one_repo_at_once() {
    let (tmp, root) = repo_on("main");
    let repo = Repo::discover(&root).unwrap();
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let repo = repo.clone();
                let path = tmp.path().join(format!("wt{i}"));
                s.spawn(move || {
                    repo.add_worktree(&path, &BranchSpec::New(format!("berth/c{i}")), None)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, r) in results.iter().enumerate() {
        let added = r.as_ref().unwrap_or_else(|e| panic!("worktree {i}: {e}"));
        assert!(added.path.join("README.md").exists());
    }
    assert_eq!(git(&root, &["worktree", "list"]).lines().count(), 5);
}

#[test]
fn linked_worktrees_are_found_and_everything_else_refused() {
    let (tmp, root) = repo_on("main");
    let root = root.canonicalize().unwrap();
    let path = tmp.path().join("by-hand");
    git(
        &root,
        &[
            "worktree",
            "add",
            "--quiet",
            "-b",
            "feat",
            path.to_str().unwrap(),
        ],
    );
    let path = path.canonicalize().unwrap();
    // From its top folder or from inside it: the worktree, its repository and its branch.
    for start in [path.clone(), path.join("src")] {
        let found = berth_git::linked_worktree(&start).unwrap();
        assert_eq!(found.path, path);
        assert_eq!(found.repo.root(), root);
        assert_eq!(found.branch, "feat");
    }
    // A detached HEAD is recorded as such, never as a branch.
    let detached = tmp.path().join("detached");
    git(
        &root,
        &[
            "worktree",
            "add",
            "--quiet",
            "--detach",
            detached.to_str().unwrap(),
        ],
    );
    assert_eq!(
        berth_git::linked_worktree(&detached).unwrap().branch,
        berth_git::DETACHED_HEAD
    );
    let plain = tempfile::tempdir().unwrap();
    for refused in [
        root.clone(),
        root.join("src"),
        plain.path().to_owned(),
        tmp.path().join("nothing-here"),
    ] {
        let err = berth_git::linked_worktree(&refused).unwrap_err();
        assert!(
            matches!(err, GitError::NotALinkedWorktree { .. }),
            "{}: {err}",
            refused.display()
        );
    }
    let main = berth_git::linked_worktree(&root).unwrap_err().to_string();
    assert!(main.contains("main checkout"), "{main}");
}

#[test]
fn a_detached_worktree_reports_its_own_head() {
    let (tmp, root) = repo_on("main");
    let repo = Repo::discover(&root).unwrap();
    let path = tmp.path().join("detached");
    git(
        &root,
        &[
            "worktree",
            "add",
            "--quiet",
            "--detach",
            path.to_str().unwrap(),
        ],
    );
    commit(&path, "new.txt", "only on the detached HEAD");
    let head = berth_testkit::git(&path, &["rev-parse", "HEAD"]);
    let detached = wt(&path, berth_git::DETACHED_HEAD, "main", false);
    assert_eq!(repo.tip(detached).as_deref(), Some(head.trim()));
    let status = repo.status(detached);
    assert_eq!(status.health, Health::Ok);
    assert_eq!((status.ahead, status.behind), (Some(1), Some(0)));
    assert_eq!(status.last_commit.unwrap().sha, head.trim());
    // Its commit is on no branch: removing the worktree would lose it.
    let err = repo.check_removable(detached).unwrap_err();
    assert!(matches!(err, GitError::Unreferenced { .. }), "{err}");
    std::fs::remove_dir_all(&path).unwrap();
    assert_eq!(repo.status(detached).health, Health::WorktreeMissing);
}

#[test]
fn a_worktree_switched_to_another_branch_is_seen_as_it_is() {
    let (tmp, root) = repo_on("main");
    let repo = Repo::discover(&root).unwrap();
    let path = tmp.path().join("wt");
    repo.add_worktree(&path, &BranchSpec::New("berth/s".into()), None)
        .unwrap();
    let recorded = wt(&path, "berth/s", "main", true);
    git(&path, &["switch", "--quiet", "-c", "elsewhere"]);
    commit(&path, "e.txt", "elsewhere");
    let status = repo.status(recorded);
    assert_eq!(status.branch, "elsewhere");
    assert!(!status.detached);
    assert_eq!(
        (status.ahead, status.unreferenced_commits),
        (Some(1), Some(0))
    );
    // Its commit is on a branch berth did not make: removing the worktree loses nothing.
    repo.check_removable(recorded).unwrap();
    git(&path, &["switch", "--quiet", "--detach"]);
    commit(&path, "d.txt", "detached");
    let status = repo.status(recorded);
    assert!(status.detached);
    assert_eq!(status.branch, berth_git::DETACHED_HEAD);
    assert_eq!(status.unreferenced_commits, Some(1));
    let err = repo.check_removable(recorded).unwrap_err();
    assert!(
        matches!(&err, GitError::Unreferenced { count: 1, commits, .. } if commits[0].ends_with(" detached")),
        "{err}"
    );
}

#[test]
fn keep_lost_work_puts_everything_a_forced_removal_loses_on_a_ref() {
    let (tmp, root) = repo_on("main");
    let repo = Repo::discover(&root).unwrap();
    let path = tmp.path().join("wt");
    repo.add_worktree(&path, &BranchSpec::New("berth/k".into()), None)
        .unwrap();
    let r = wt(&path, "berth/k", "main", true);
    assert_eq!(repo.keep_lost_work(r, "refs/berth/lost/k").unwrap(), None);
    assert!(!repo.has_branch("refs/berth/lost/k"));

    // Only a commit on berth's branch: the ref is the branch's tip.
    commit(&path, "k.txt", "unmerged");
    let tip = git(&path, &["rev-parse", "HEAD"]);
    let kept = repo
        .keep_lost_work(r, "refs/berth/lost/k")
        .unwrap()
        .unwrap();
    assert_eq!(
        (kept.refname.as_str(), kept.commits, kept.uncommitted),
        ("refs/berth/lost/k", 1, 0)
    );
    assert_eq!(git(&root, &["rev-parse", "refs/berth/lost/k"]), tip);

    // Uncommitted work too: a commit on the HEAD holding the worktree as it is, and the
    // worktree's own index untouched. The name is taken, so the next one is used.
    std::fs::write(path.join("src/main.rs"), "fn main() { changed() }\n").unwrap();
    std::fs::write(path.join("untracked.txt"), "new\n").unwrap();
    git(&path, &["add", "src/main.rs"]);
    let index_before = git(&path, &["diff", "--cached", "--name-only"]);
    let kept = repo
        .keep_lost_work(r, "refs/berth/lost/k")
        .unwrap()
        .unwrap();
    assert_eq!(
        (kept.refname.as_str(), kept.commits, kept.uncommitted),
        ("refs/berth/lost/k-2", 1, 2)
    );
    assert_eq!(
        git(&path, &["diff", "--cached", "--name-only"]),
        index_before
    );
    assert_eq!(git(&root, &["rev-parse", "refs/berth/lost/k-2^"]), tip);
    assert_eq!(
        git(&root, &["show", "refs/berth/lost/k-2:untracked.txt"]),
        "new\n"
    );
    assert_eq!(
        git(&root, &["show", "refs/berth/lost/k-2:src/main.rs"]),
        "fn main() { changed() }\n"
    );
    repo.remove_worktree(r, true).unwrap();
    assert!(!repo.has_branch("berth/k"));
    assert_eq!(
        git(&root, &["rev-parse", "refs/berth/lost/k"]),
        tip,
        "the commit survives"
    );
}

#[test]
fn a_moved_repository_strands_its_worktrees_until_repaired() {
    let (tmp, root) = repo_on("main");
    let repo = Repo::discover(&root).unwrap();
    let path = tmp.path().join("wt");
    repo.add_worktree(&path, &BranchSpec::New("berth/r".into()), None)
        .unwrap();
    assert_eq!(repo.stranded_worktrees(), Vec::new());
    let old = root.canonicalize().unwrap();
    let moved = tmp.path().join("moved");
    std::fs::rename(&root, &moved).unwrap();
    let repo = Repo::discover(&moved).unwrap();
    assert_eq!(
        repo.stranded_worktrees(),
        vec![(path.canonicalize().unwrap(), old)]
    );
    assert!(
        repo.owns_worktree(&path, &path),
        "git's record here names it"
    );
    let other = tempfile::tempdir().unwrap();
    assert!(!repo.owns_worktree(other.path(), other.path()));
    repo.repair_worktrees(&[]).unwrap();
    assert_eq!(repo.stranded_worktrees(), Vec::new());
    let found = berth_git::linked_worktree(&path).unwrap();
    assert_eq!(found.repo.root(), moved.canonicalize().unwrap());
    assert_eq!(
        repo.status(wt(&path, "berth/r", "main", true)).health,
        Health::Ok
    );
}
