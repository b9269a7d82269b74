//! Diff and merge of a worktree's work against real repositories: every mode, and refusals
//! that change nothing on either side.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::{Path, PathBuf};

use berth_git::{BranchSpec, GitError, MergeMode, MergeRequest, Repo, diff};
use berth_testkit::{commit, git};

/// A repository on `main` (with a git identity of its own, which merges commit with) and a
/// worktree on `berth/w`, started from `main`.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, Repo) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "-b", "main"]);
    git(&root, &["config", "user.name", "berth-test"]);
    git(&root, &["config", "user.email", "test@berth.invalid"]);
    std::fs::write(root.join("shared.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(root.join("gone.txt"), "bye\n").unwrap();
    git(&root, &["add", "."]);
    git(&root, &["commit", "--quiet", "-m", "first"]);
    let repo = Repo::discover(&root).unwrap();
    let wt = tmp.path().join("wt");
    repo.add_worktree(&wt, &BranchSpec::New("berth/w".into()), Some("main"))
        .unwrap();
    (tmp, root, wt, repo)
}

fn head(dir: &Path, rev: &str) -> String {
    git(dir, &["rev-parse", rev]).trim().to_owned()
}

fn status(dir: &Path) -> String {
    git(dir, &["status", "--porcelain"])
}

fn request<'a>(wt: &'a Path, into: &'a str, mode: MergeMode) -> MergeRequest<'a> {
    MergeRequest {
        work: berth_git::Work::Worktree(wt),
        into,
        mode,
        uncommitted_message: "berth: the workspace's uncommitted work",
        message: "Merge workspace w",
    }
}

#[test]
fn diff_shows_committed_uncommitted_and_untracked_work_against_where_it_left_the_base() {
    let (_tmp, root, wt, _repo) = setup();
    commit(&wt, "committed.txt", "c\n");
    std::fs::write(wt.join("shared.txt"), "one\nTWO\nthree\nfour\n").unwrap();
    std::fs::write(wt.join("untracked.txt"), "u\n").unwrap();
    std::fs::remove_file(wt.join("gone.txt")).unwrap();
    std::fs::write(wt.join("blob.bin"), [0u8, 1, 2, 0, 255]).unwrap();
    // The base moving on is not the workspace's change.
    commit(&root, "later.txt", "on main\n");
    let before = status(&wt);

    let d = diff(&wt, "main", true).unwrap();
    let files: Vec<(&str, &str, Option<u64>, Option<u64>)> = d
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.status, f.added, f.removed))
        .collect();
    assert_eq!(
        files,
        [
            ("blob.bin", "added", None, None),
            ("committed.txt", "added", Some(1), Some(0)),
            ("gone.txt", "deleted", Some(0), Some(1)),
            ("shared.txt", "modified", Some(2), Some(1)),
            ("untracked.txt", "added", Some(1), Some(0)),
        ]
    );
    assert_eq!(d.totals(), (4, 2));
    let patch = d.patch.unwrap();
    assert!(patch.contains("+TWO") && patch.contains("-two"), "{patch}");
    assert!(!patch.contains("later.txt"), "{patch}");
    // Reading changed nothing: not the worktree, not its index.
    assert_eq!(status(&wt), before);
}

/// A file rewritten with the same size in the second git last wrote the index matches its
/// entry's stat data; git then reads it again only because the entry is as new as the index
/// ("racily clean"). berth's diff reads through a copy of the index, and the change is still
/// in it. The second is made here by setting the times back (ctime cannot be, so git is told
/// not to trust it).
#[test]
fn a_same_size_rewrite_in_the_indexs_own_second_is_in_the_diff() {
    let (_tmp, root, wt, _repo) = setup();
    git(&root, &["config", "core.trustctime", "false"]);
    let index = PathBuf::from(
        git(
            &wt,
            &["rev-parse", "--path-format=absolute", "--git-path", "index"],
        )
        .trim(),
    );
    let shared = wt.join("shared.txt");
    let set_time = |path: &Path, time: std::time::SystemTime| {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(time).unwrap();
    };
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
    set_time(&shared, past);
    git(&wt, &["update-index", "--refresh"]);
    std::fs::write(&shared, "one\nTWO\nthree\n").unwrap();
    set_time(&shared, past);
    set_time(&index, past);
    assert_eq!(git(&wt, &["diff-files", "--name-only"]), "shared.txt\n");

    let d = diff(&wt, "main", true).unwrap();
    let patch = d.patch.unwrap();
    assert!(patch.contains("+TWO") && patch.contains("-two"), "{patch}");
    let index_time = std::fs::metadata(&index).unwrap().modified().unwrap();
    assert_eq!(
        index_time, past,
        "the worktree's own index is left as it was"
    );
}

#[test]
fn a_merge_brings_commits_and_uncommitted_work_into_the_checked_out_base() {
    let (_tmp, root, wt, repo) = setup();
    commit(&wt, "feature.txt", "feature\n");
    std::fs::write(wt.join("notes.txt"), "uncommitted\n").unwrap();
    commit(&root, "other.txt", "main moved on\n");
    let main_before = head(&root, "main");

    let merged = repo.merge(&request(&wt, "main", MergeMode::Merge)).unwrap();
    assert!(!merged.fast_forward);
    assert_eq!(merged.commits, 2, "the commit and the uncommitted work");
    assert_eq!(
        merged.checkout.as_deref(),
        Some(root.canonicalize().unwrap().as_path())
    );
    // The main checkout's branch and files moved; it is clean.
    assert_eq!(head(&root, "main"), merged.after);
    assert_eq!(head(&root, "main^1"), main_before);
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "uncommitted\n"
    );
    assert_eq!(status(&root), "");
    // The workspace's branch took its uncommitted work as a commit, which main contains.
    let work = merged.uncommitted_commit.unwrap();
    assert_eq!(head(&wt, "HEAD"), work);
    assert_eq!(head(&root, "main^2"), work);
    assert_eq!(status(&wt), "");
}

#[test]
fn a_fast_forward_a_squash_and_a_rebase() {
    // Fast-forward: main has not moved.
    let (_tmp, root, wt, repo) = setup();
    commit(&wt, "a.txt", "a\n");
    let merged = repo.merge(&request(&wt, "main", MergeMode::Merge)).unwrap();
    assert!(merged.fast_forward);
    assert_eq!(head(&root, "main"), head(&wt, "HEAD"));

    // Squash: one new commit on main, the workspace's commits untouched.
    let (_tmp, root, wt, repo) = setup();
    commit(&wt, "a.txt", "a\n");
    commit(&wt, "b.txt", "b\n");
    commit(&root, "m.txt", "m\n");
    let tip = head(&wt, "HEAD");
    let merged = repo
        .merge(&request(&wt, "main", MergeMode::Squash))
        .unwrap();
    assert_eq!(merged.commits, 2);
    assert_eq!(git(&root, &["rev-list", "--count", "main"]).trim(), "3");
    assert_eq!(
        git(&root, &["log", "-1", "--format=%P", "main"])
            .trim()
            .split(' ')
            .count(),
        1
    );
    assert!(root.join("a.txt").exists() && root.join("b.txt").exists());
    assert_eq!(
        head(&wt, "HEAD"),
        tip,
        "the workspace keeps its own commits"
    );

    // Rebase: the work's commits replayed on main, one by one, linear.
    let (_tmp, root, wt, repo) = setup();
    commit(&wt, "a.txt", "a\n");
    commit(&wt, "b.txt", "b\n");
    commit(&root, "m.txt", "m\n");
    let merged = repo
        .merge(&request(&wt, "main", MergeMode::Rebase))
        .unwrap();
    assert_eq!(git(&root, &["rev-list", "--count", "main"]).trim(), "4");
    assert_eq!(
        git(&root, &["rev-list", "--merges", "--count", "main"]).trim(),
        "0"
    );
    assert_eq!(git(&root, &["log", "--format=%s", "-2", "main"]), "b\na\n",);
    assert_eq!(head(&root, "main"), merged.after);
    assert!(root.join("a.txt").exists() && root.join("m.txt").exists());
}

#[test]
fn a_conflict_is_refused_with_its_files_and_nothing_changes_on_either_side() {
    for mode in [MergeMode::Merge, MergeMode::Squash, MergeMode::Rebase] {
        let (_tmp, root, wt, repo) = setup();
        commit(&wt, "shared.txt", "one\nWORKSPACE\nthree\n");
        std::fs::write(wt.join("pending.txt"), "not committed\n").unwrap();
        commit(&root, "shared.txt", "one\nMAIN\nthree\n");
        let (main, work, wt_status) = (head(&root, "main"), head(&wt, "HEAD"), status(&wt));

        let e = repo.merge(&request(&wt, "main", mode)).unwrap_err();
        match &e {
            GitError::MergeConflict { into, files } => {
                assert_eq!(into, "main");
                assert_eq!(files, &["shared.txt"], "{mode:?}");
            }
            other => panic!("{mode:?}: {other}"),
        }
        assert_eq!(head(&root, "main"), main, "{mode:?}");
        assert_eq!(status(&root), "", "{mode:?}");
        assert_eq!(head(&wt, "HEAD"), work, "{mode:?}");
        assert_eq!(
            status(&wt),
            wt_status,
            "{mode:?}: the uncommitted work stays uncommitted"
        );
        assert!(
            git(&root, &["for-each-ref", "refs/berth/"]).is_empty(),
            "{mode:?}: no temporary ref is left"
        );
    }
}

#[test]
fn a_target_checked_out_with_uncommitted_changes_is_refused_and_nothing_changes() {
    let (_tmp, root, wt, repo) = setup();
    commit(&wt, "a.txt", "a\n");
    std::fs::write(root.join("shared.txt"), "edited in the main checkout\n").unwrap();
    let (main, before) = (head(&root, "main"), status(&root));
    let e = repo
        .merge(&request(&wt, "main", MergeMode::Merge))
        .unwrap_err();
    assert!(
        matches!(&e, GitError::TargetDirty { branch, count: 1, .. } if branch == "main"),
        "{e}"
    );
    assert!(e.to_string().contains("nothing was changed"), "{e}");
    assert_eq!(head(&root, "main"), main);
    assert_eq!(status(&root), before);
}

/// An untracked file in the target's checkout is none of the merge's business unless the
/// merge would write over it, as with git's own merge: this one stays, untouched.
#[test]
fn an_untracked_file_elsewhere_in_the_target_checkout_lets_the_merge_through_and_stays() {
    for mode in [MergeMode::Merge, MergeMode::Squash, MergeMode::Rebase] {
        let (_tmp, root, wt, repo) = setup();
        commit(&wt, "a.txt", "a\n");
        commit(&root, "m.txt", "m\n");
        std::fs::write(root.join("scratch.txt"), "mine\n").unwrap();
        let merged = repo.merge(&request(&wt, "main", mode)).unwrap();
        assert_eq!(head(&root, "main"), merged.after, "{mode:?}");
        assert!(root.join("a.txt").exists(), "{mode:?}");
        assert_eq!(
            std::fs::read_to_string(root.join("scratch.txt")).unwrap(),
            "mine\n",
            "{mode:?}"
        );
        assert_eq!(status(&root), "?? scratch.txt\n", "{mode:?}");
    }
}

/// An untracked or ignored file where the merge adds one, or a file where it adds a folder,
/// refuses it, naming them, before anything moves on either side.
/// An agent names the files: a refusal's message quotes each as git quotes it, so nothing of
/// a name (an escape sequence, a C1 CSI, a bidi override) reaches a terminal or a page raw;
/// the error's fields keep the names as they are.
#[test]
fn a_refusal_quotes_the_file_names_an_agent_chose_as_git_does() {
    let evil = "evil\x1b]52;c;ZXZpbA==\x07\u{9b}2J\u{202e}txt";
    let quoted = "\"evil\\033]52;c;ZXZpbA==\\a\\302\\2332J\\342\\200\\256txt\"";
    let (_tmp, root, wt, repo) = setup();
    commit(&wt, evil, "from the workspace\n");
    commit(&root, evil, "from main\n");
    let e = repo
        .merge(&request(&wt, "main", MergeMode::Merge))
        .unwrap_err();
    assert!(
        matches!(&e, GitError::MergeConflict { files, .. } if files == &[evil]),
        "{e:?}"
    );
    assert!(
        e.to_string().contains(&format!("conflicts in: {quoted};")),
        "{e}"
    );

    let (_tmp, root, wt, repo) = setup();
    commit(&wt, evil, "from the workspace\n");
    std::fs::write(root.join(evil), "the person's\n").unwrap();
    let e = repo
        .merge(&request(&wt, "main", MergeMode::Merge))
        .unwrap_err();
    assert!(
        matches!(&e, GitError::TargetUntracked { files, .. } if files == &[evil]),
        "{e:?}"
    );
    assert!(
        e.to_string().contains(&format!("file(s): {quoted};")),
        "{e}"
    );
    assert!(
        !e.to_string()
            .chars()
            .any(berth_core::shown::drives_the_terminal)
    );
}

#[test]
fn an_untracked_or_ignored_file_the_merge_would_overwrite_is_refused_naming_it() {
    for mode in [MergeMode::Merge, MergeMode::Squash, MergeMode::Rebase] {
        let (_tmp, root, wt, repo) = setup();
        commit(&wt, "new.txt", "from the workspace\n");
        std::fs::create_dir_all(wt.join("build")).unwrap();
        std::fs::create_dir_all(wt.join("docs")).unwrap();
        commit(&wt, "build/out.log", "from the workspace\n");
        commit(&wt, "docs/guide.md", "from the workspace\n");
        std::fs::write(wt.join("pending.txt"), "not committed\n").unwrap();
        // main moves on, so a merge and a squash make a commit of their own.
        commit(&root, ".gitignore", "build/\n");
        std::fs::write(root.join("new.txt"), "the person's\n").unwrap();
        std::fs::create_dir(root.join("build")).unwrap();
        std::fs::write(root.join("build/out.log"), "ignored\n").unwrap();
        std::fs::write(root.join("docs"), "a file where a folder comes\n").unwrap();
        let (main, work, wt_status, root_status) = (
            head(&root, "main"),
            head(&wt, "HEAD"),
            status(&wt),
            status(&root),
        );

        let e = repo.merge(&request(&wt, "main", mode)).unwrap_err();
        match &e {
            GitError::TargetUntracked {
                branch,
                path,
                files,
            } => {
                assert_eq!(branch, "main");
                assert_eq!(path, &root);
                assert_eq!(files, &["build/out.log", "docs", "new.txt"], "{mode:?}");
            }
            other => panic!("{mode:?}: {other}"),
        }
        assert!(e.to_string().contains("nothing was changed"), "{e}");
        assert_eq!(head(&root, "main"), main, "{mode:?}");
        assert_eq!(status(&root), root_status, "{mode:?}");
        assert_eq!(
            std::fs::read_to_string(root.join("new.txt")).unwrap(),
            "the person's\n"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("build/out.log")).unwrap(),
            "ignored\n"
        );
        assert_eq!(head(&wt, "HEAD"), work, "{mode:?}");
        assert_eq!(
            status(&wt),
            wt_status,
            "{mode:?}: the uncommitted work stays"
        );
    }
}

#[test]
fn a_branch_checked_out_nowhere_moves_by_its_ref_and_merging_into_itself_is_refused() {
    let (_tmp, root, wt, repo) = setup();
    git(&root, &["branch", "release"]);
    commit(&wt, "a.txt", "a\n");
    let merged = repo
        .merge(&request(&wt, "release", MergeMode::Merge))
        .unwrap();
    assert_eq!(merged.checkout, None);
    assert_eq!(head(&root, "release"), head(&wt, "HEAD"));
    assert!(
        !root.join("a.txt").exists(),
        "main's checkout is not release's"
    );
    let e = repo
        .merge(&request(&wt, "berth/w", MergeMode::Merge))
        .unwrap_err();
    assert!(matches!(e, GitError::MergeIntoItself(_)), "{e}");
    let e = repo
        .merge(&request(&wt, "nope", MergeMode::Merge))
        .unwrap_err();
    assert!(matches!(e, GitError::BranchMissing(_)), "{e}");
}

/// Work that is only commits (a branch another machine pushed, fetched here): its diff
/// against the base reads the commits alone, and it merges like a worktree's, with nothing
/// uncommitted to take and no worktree touched.
#[test]
fn a_fetched_branch_is_diffed_and_merged_from_its_commits() {
    let (tmp, root, _wt, repo) = setup();
    // Elsewhere: a clone where the branch is made and pushed to a bare remote.
    let remote = tmp.path().join("remote.git");
    git(
        tmp.path(),
        &[
            "clone",
            "--bare",
            "--quiet",
            root.to_str().unwrap(),
            remote.to_str().unwrap(),
        ],
    );
    let other = tmp.path().join("other");
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            remote.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    git(&other, &["checkout", "--quiet", "-b", "berth/far"]);
    commit(&other, "far.txt", "from afar\n");
    git(&other, &["push", "--quiet", "origin", "berth/far"]);
    let url = format!("file://{}", remote.display());

    let fetched = repo.fetch_branch(&url, "berth/far").unwrap();
    assert_eq!(fetched, head(&other, "HEAD"));
    let d = berth_git::diff_refs(&root, "main", &fetched, true).unwrap();
    let files: Vec<(&str, &str)> = d
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.status))
        .collect();
    assert_eq!(files, [("far.txt", "added")]);
    assert!(d.patch.unwrap().contains("+from afar"));

    let merged = repo
        .merge(&MergeRequest {
            work: berth_git::Work::Commit(&fetched),
            into: "main",
            mode: MergeMode::Merge,
            uncommitted_message: "",
            message: "Merge workspace far",
        })
        .unwrap();
    assert!(merged.fast_forward && merged.uncommitted_commit.is_none());
    assert_eq!(head(&root, "main"), fetched);
    // The checkout of main followed, clean.
    assert_eq!(
        std::fs::read_to_string(root.join("far.txt")).unwrap(),
        "from afar\n"
    );
    assert_eq!(status(&root), "");
    // A branch the remote does not have is an error that names it, changing nothing.
    let missing = repo.fetch_branch(&url, "berth/none").unwrap_err();
    assert!(missing.to_string().contains("berth/none"), "{missing}");
}
