//! `berth workspace diff` and `berth workspace merge` through the binary, on a clone whose
//! workspaces start from `origin/main` (so "the base" means the local `main`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::{Run, commit, git, run};
use support::Home;

struct Project {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Project {
    fn new() -> Project {
        let tmp = tempfile::tempdir().unwrap();
        let upstream = tmp.path().join("upstream");
        std::fs::create_dir(&upstream).unwrap();
        git(&upstream, &["init", "--quiet", "-b", "main"]);
        commit(&upstream, "shared.txt", "one\ntwo\n");
        git(tmp.path(), &["clone", "--quiet", "upstream", "project"]);
        let root = tmp.path().join("project").canonicalize().unwrap();
        // Merges commit, so the repository has an identity of its own.
        git(&root, &["config", "user.name", "berth-test"]);
        git(&root, &["config", "user.email", "test@berth.invalid"]);
        Project { _tmp: tmp, root }
    }
}

fn berth(home: &Home, dir: &Path, args: &[&str]) -> Run {
    let mut cmd = home.cmd(args);
    cmd.current_dir(dir);
    run(cmd)
}

/// A git workspace `name` of `project`; its worktree.
fn workspace(home: &Home, project: &Project, name: &str) -> PathBuf {
    let r = berth(
        home,
        &project.root,
        &["workspace", "create", name, "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ws: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    PathBuf::from(ws["git"]["worktree"].as_str().unwrap())
}

fn rev(dir: &Path, rev: &str) -> String {
    git(dir, &["rev-parse", rev]).trim().to_owned()
}

#[test]
fn diff_and_merge_bring_a_workspaces_work_into_its_base() {
    let home = Home::new();
    let project = Project::new();
    let wt = workspace(&home, &project, "feat");
    commit(&wt, "feature.txt", "feature\n");
    std::fs::write(wt.join("shared.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(wt.join("notes.md"), "untracked\n").unwrap();
    home.ok(&["session", "new", "-w", "feat", "-t", "the feature"]);

    let d = home.json(&["workspace", "diff", "feat", "--json"]);
    let files: Vec<(&str, &str)> = d["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        files,
        [
            ("feature.txt", "added"),
            ("notes.md", "added"),
            ("shared.txt", "modified")
        ]
    );
    let stat = home.ok(&["workspace", "diff", "feat", "--stat"]);
    assert!(stat.contains("3 file(s) changed, +3 -0"), "{stat}");
    let patch = berth(&home, &project.root, &["workspace", "diff", "feat"]);
    assert!(patch.stdout.contains("+three"), "{}", patch.stdout);

    let r = berth(
        &home,
        &project.root,
        &["workspace", "merge", "feat", "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        report["into"], "main",
        "the base origin/main means the local main"
    );
    assert_eq!(report["commits"], 2);
    // main (checked out in the project, clean) has the work, files included.
    assert_eq!(
        rev(&project.root, "main"),
        report["after"].as_str().unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(project.root.join("notes.md")).unwrap(),
        "untracked\n"
    );
    // The uncommitted work was committed in the workspace, naming its session.
    let message = git(&wt, &["log", "-1", "--format=%B"]);
    assert!(
        message.contains("uncommitted work of workspace") && message.contains("the feature"),
        "{message}"
    );
    assert_eq!(git(&wt, &["status", "--porcelain"]), "");
    // Merged again: nothing to bring.
    let r = berth(&home, &project.root, &["workspace", "merge", "feat"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("nothing to merge"), "{}", r.stdout);
    assert!(!r.stdout.contains("updated the checkout"), "{}", r.stdout);
}

#[test]
fn refusals_change_nothing_and_say_why_with_their_exit_status() {
    let home = Home::new();
    let project = Project::new();
    let wt = workspace(&home, &project, "clash");
    commit(&wt, "shared.txt", "one\nWORKSPACE\n");
    commit(&project.root, "shared.txt", "one\nMAIN\n");
    let main = rev(&project.root, "main");

    // A conflict: exit 6, the file named, both sides as they were.
    let r = berth(
        &home,
        &project.root,
        &["workspace", "merge", "clash", "--squash"],
    );
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert!(
        r.stderr.contains("shared.txt") && r.stderr.contains("nothing was changed"),
        "{}",
        r.stderr
    );
    assert_eq!(rev(&project.root, "main"), main);
    assert_eq!(git(&project.root, &["status", "--porcelain"]), "");

    // The base checked out with an uncommitted change to a tracked file: exit 4, nothing
    // changed.
    let wt2 = workspace(&home, &project, "clean");
    commit(&wt2, "new.txt", "new\n");
    std::fs::write(project.root.join("shared.txt"), "one\nMAIN\nedited\n").unwrap();
    let r = berth(&home, &project.root, &["workspace", "merge", "clean"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("1 uncommitted change"), "{}", r.stderr);
    assert_eq!(rev(&project.root, "main"), main);

    // A plain workspace has nothing to merge: exit 2.
    home.ok(&["workspace", "create", "plain", "--plain"]);
    let r = berth(&home, &project.root, &["workspace", "diff", "plain"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn merge_delete_removes_the_workspace_and_keeps_its_commits_on_a_ref() {
    let home = Home::new();
    let project = Project::new();
    let wt = workspace(&home, &project, "done");
    commit(&wt, "a.txt", "a\n");
    commit(&wt, "b.txt", "b\n");
    let tip = rev(&wt, "HEAD");
    commit(&project.root, "m.txt", "m\n");
    let r = berth(
        &home,
        &project.root,
        &["workspace", "merge", "done", "--rebase", "--delete"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("deleted workspace"), "{}", r.stdout);
    assert!(project.root.join("a.txt").exists() && project.root.join("b.txt").exists());
    assert_eq!(
        git(&project.root, &["rev-list", "--merges", "--count", "main"]).trim(),
        "0"
    );
    assert!(!wt.exists());
    // The workspace's own commits (copied by the rebase) are kept, not lost.
    let kept = git(
        &project.root,
        &["for-each-ref", "--format=%(objectname)", "refs/berth/lost/"],
    );
    assert!(kept.contains(&tip), "{kept}");
}

/// The person's checkout of the base is judged as git's own merge would judge it: an untracked
/// file the merge would overwrite refuses it (exit 4, the file named, nothing moved), one
/// anywhere else is left where it is and the merge goes through.
#[test]
fn an_untracked_file_in_the_base_checkout_refuses_only_what_would_overwrite_it() {
    let home = Home::new();
    let project = Project::new();
    let wt = workspace(&home, &project, "feat");
    commit(&wt, "report.txt", "from the workspace\n");
    std::fs::write(project.root.join("report.txt"), "the person's own\n").unwrap();
    std::fs::write(project.root.join("scratch.txt"), "notes\n").unwrap();
    let (main, work) = (rev(&project.root, "main"), rev(&wt, "HEAD"));

    let r = berth(&home, &project.root, &["workspace", "merge", "feat"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("overwrite 1 untracked or ignored file(s): report.txt;")
            && r.stderr.contains("nothing was changed"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("scratch.txt"), "{}", r.stderr);
    assert_eq!(rev(&project.root, "main"), main);
    assert_eq!(rev(&wt, "HEAD"), work);
    assert_eq!(
        std::fs::read_to_string(project.root.join("report.txt")).unwrap(),
        "the person's own\n"
    );

    // Moved out of the way, the merge goes through; the unrelated file stays untouched.
    std::fs::remove_file(project.root.join("report.txt")).unwrap();
    let r = berth(
        &home,
        &project.root,
        &["workspace", "merge", "feat", "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(rev(&project.root, "main"), work);
    assert_eq!(
        std::fs::read_to_string(project.root.join("report.txt")).unwrap(),
        "from the workspace\n"
    );
    assert_eq!(
        git(&project.root, &["status", "--porcelain"]),
        "?? scratch.txt\n"
    );
}
