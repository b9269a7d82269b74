//! berth's lost-work refs against a real repository: each carries when berth made it (not its
//! commit's date), and expires by that time; one with no reflog is timed from when berth
//! first saw it.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use berth_git::{BranchSpec, Repo, WorktreeRef};
use berth_testkit::git;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// Writes `file` in `dir` and commits it, written in 2001.
fn old_commit(dir: &Path, file: &str) {
    std::fs::write(dir.join(file), "old\n").unwrap();
    git(dir, &["add", file]);
    git(
        dir,
        &[
            "commit",
            "--quiet",
            "--date=2001-01-01T00:00:00Z",
            "-m",
            file,
        ],
    );
}

/// A repository with one commit on `main`, and a worktree on `berth/w` holding a commit no
/// other ref has; both commits written in 2001.
fn setup() -> (tempfile::TempDir, PathBuf, Repo) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "-b", "main"]);
    old_commit(&root, "README.md");
    let repo = Repo::discover(&root).unwrap();
    let path = tmp.path().join("wt");
    repo.add_worktree(&path, &BranchSpec::New("berth/w".into()), None)
        .unwrap();
    old_commit(&path, "old.txt");
    (tmp, root, repo)
}

#[test]
fn a_lost_ref_is_timed_by_when_berth_made_it_and_expires_by_that_time() {
    let (tmp, root, repo) = setup();
    let path = tmp.path().join("wt");
    let wt = WorktreeRef {
        path: &path,
        branch: "berth/w",
        base_branch: "main",
        branch_created: true,
    };
    let started = now();
    let kept = repo
        .keep_lost_work(wt, "refs/berth/lost/w")
        .unwrap()
        .unwrap();
    let lost = repo.lost_refs().unwrap();
    assert_eq!(lost.len(), 1);
    assert_eq!(lost[0].name, kept.refname);
    assert_eq!(
        lost[0].target,
        git(&root, &["rev-parse", "refs/berth/lost/w"]).trim()
    );
    // Made now, though its commit is from 2001.
    assert!(git(&root, &["log", "-1", "--format=%ad", &lost[0].target]).contains("2001"));
    assert!(
        lost[0].made_at >= started && lost[0].made_at <= now(),
        "{lost:?}"
    );

    // From its reflog, which berth made with it.
    assert!(!root.join(".git/berth-lost-seen").exists());
    let reflog = git(
        &root,
        &[
            "log",
            "--walk-reflogs",
            "--format=%gs",
            "refs/berth/lost/w",
            "--",
        ],
    );
    assert_eq!(reflog, "berth: kept by a forced removal\n");

    // Younger than a day: kept.
    assert_eq!(repo.expire_lost(DAY).unwrap(), Vec::new());
    assert!(git(&root, &["for-each-ref", "refs/berth/lost/"]).contains("refs/berth/lost/w"));
    // Kept for no time at all: it goes, and only it (a branch is never a lost ref).
    let expired = repo.expire_lost(Duration::ZERO).unwrap();
    assert_eq!(expired, lost);
    assert_eq!(git(&root, &["for-each-ref", "refs/berth/lost/"]), "");
    assert!(repo.has_branch("berth/w") && repo.has_branch("main"));
}

/// A ref an older berth made without a reflog never expires at once: it counts as made when
/// berth first saw it, and that time holds on later looks.
#[test]
fn a_lost_ref_without_a_reflog_counts_from_when_berth_first_saw_it() {
    let (_tmp, root, repo) = setup();
    git(&root, &["update-ref", "refs/berth/lost/old", "berth/w", ""]);
    assert_eq!(
        git(
            &root,
            &["log", "--walk-reflogs", "refs/berth/lost/old", "--"]
        ),
        "",
        "git keeps no reflog for it"
    );
    let started = now();
    let first = repo.lost_refs().unwrap();
    assert_eq!(first.len(), 1);
    assert!(first[0].made_at >= started, "{first:?}");
    let seen = std::fs::read_to_string(root.join(".git/berth-lost-seen")).unwrap();
    assert_eq!(seen, format!("{} refs/berth/lost/old\n", first[0].made_at));

    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(repo.lost_refs().unwrap(), first, "the first sight holds");
    assert_eq!(repo.expire_lost(DAY).unwrap(), Vec::new());

    // A seen file that does not read is an error, never an empty list.
    std::fs::write(root.join(".git/berth-lost-seen"), "garbage\n").unwrap();
    let e = repo.lost_refs().unwrap_err();
    assert!(e.to_string().contains("berth-lost-seen is corrupt"), "{e}");
    std::fs::write(root.join(".git/berth-lost-seen"), seen).unwrap();

    // Expired, its line goes with it.
    assert_eq!(repo.expire_lost(Duration::ZERO).unwrap(), first);
    assert!(!root.join(".git/berth-lost-seen").exists());
}
