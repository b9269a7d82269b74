//! Git workspaces of repositories that are not a plain checkout in place: worktrees deleted by
//! hand, a repository moved away and repaired, bare repositories, and submodules checked out
//! from the main repository's module store.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::{commit, git};
use support::Home;
use support::git_project::{Project, fails_in, in_dir, ok_in, wait_for_spares};

#[test]
fn worktree_deleted_by_hand_and_repository_moved_away() {
    let home = Home::new();
    let project = Project::new();
    ok_in(&home, &project.root, &["workspace", "create", "gone"]);
    let wt = PathBuf::from(home.ok(&["workspace", "path", "gone"]).trim());
    std::fs::remove_dir_all(&wt).unwrap();
    let ws = home.json(&["workspace", "show", "gone", "--json"]);
    assert_eq!(ws["git_status"]["health"], "worktree-missing");
    // Removal prunes git's record and deletes the (merged) branch berth made.
    home.ok(&["workspace", "delete", "gone", "--yes"]);
    assert_eq!(project.worktrees(), Vec::<String>::new());
    assert_eq!(project.branches(), ["main"]);

    // The branch deleted by hand.
    ok_in(
        &home,
        &project.root,
        &["workspace", "create", "nobranch", "--checkout", "feature"],
    );
    let wt = PathBuf::from(home.ok(&["workspace", "path", "nobranch"]).trim());
    git(&wt, &["checkout", "--quiet", "--detach"]);
    git(&project.root, &["branch", "-D", "feature"]);
    let ws = home.json(&["workspace", "show", "nobranch", "--json"]);
    assert_eq!(ws["git_status"]["health"], "branch-missing");
    home.ok(&["workspace", "delete", "nobranch", "--yes"]);

    // The repository moved away: status says so, and removal will not guess about the
    // worktree's contents without --force.
    ok_in(&home, &project.root, &["workspace", "create", "moved"]);
    let wt = PathBuf::from(home.ok(&["workspace", "path", "moved"]).trim());
    let away = project.root.with_file_name("moved-project");
    std::fs::rename(&project.root, &away).unwrap();
    let ws = home.json(&["workspace", "show", "moved", "--json"]);
    assert_eq!(ws["git_status"]["health"], "repo-missing");
    let table = home.ok(&["workspace", "list"]);
    assert!(table.contains("berth/moved repo-missing"), "{table}");
    let err = home.fails(&["workspace", "delete", "moved", "--yes"]);
    assert!(err.contains("is gone") && err.contains("force"), "{err}");
    assert!(wt.exists());
    let r = home.run(&["workspace", "delete", "moved", "--yes", "--force"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("warning: the repository"), "{}", r.stderr);
    assert!(!wt.exists());
    assert!(
        home.fails(&["workspace", "show", "moved"])
            .contains("no workspace")
    );
}

#[test]
fn a_moved_repository_is_repaired_and_its_workspaces_work_again() {
    let home = Home::new();
    let project = Project::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[git]\nspare_worktrees = 1\n",
    )
    .unwrap();
    ok_in(&home, &project.root, &["workspace", "spares", "--fill"]);
    ok_in(&home, &project.root, &["workspace", "create", "m"]);
    let wt = PathBuf::from(home.ok(&["workspace", "path", "m"]).trim());
    commit(&wt, "m.txt", "work in m");
    // The branch's work is pushed, so a delete after the repair needs no --force.
    git(&wt, &["push", "--quiet", "-u", "origin", "berth/m"]);
    wait_for_spares(&home, &project.root, 1);

    let moved = project.root.with_file_name("moved-project");
    std::fs::rename(&project.root, &moved).unwrap();
    let shown = home.ok(&["workspace", "show", "m"]);
    assert!(
        shown.contains("repo-missing") && shown.contains("berth workspace repair"),
        "{shown}"
    );
    let err = home.fails(&["workspace", "delete", "m", "--yes"]);
    assert!(err.contains("berth workspace repair --repo"), "{err}");

    // berth run in the moved repository says what to run.
    let r = in_dir(&home, &moved, &["workspace", "create", "here"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "this repository was moved from {}",
            project.root.display()
        )) && r.stderr.contains("berth workspace repair"),
        "{}",
        r.stderr
    );

    let elsewhere = tempfile::tempdir().unwrap();
    let r = in_dir(
        &home,
        elsewhere.path(),
        &["workspace", "repair", "--repo", moved.to_str().unwrap()],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("reattached m ("), "{}", r.stdout);
    assert!(
        r.stderr.contains("reattached 1 workspace(s)")
            && r.stderr.contains("removed 1 spare checkout(s)"),
        "{}",
        r.stderr
    );
    let ws = home.json(&["workspace", "show", "m", "--json"]);
    assert_eq!(ws["git"]["repo"], moved.to_str().unwrap());
    assert_eq!(ws["git_status"]["health"], "ok");
    assert_eq!(ws["git_status"]["branch"], "berth/m");
    assert_eq!(ws["git_status"]["ahead"], 1);
    // Nothing is left to repair: a second run reattaches nothing, and creates do not warn.
    let again = home.json(&[
        "workspace",
        "repair",
        "--repo",
        moved.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(again["reattached"], serde_json::json!([]));
    let r = in_dir(&home, &moved, &["workspace", "create", "there"]);
    assert!(!r.stderr.contains("was moved"), "{}", r.stderr);

    // Delete works without --force and leaves no branch and no worktree entry.
    home.ok(&["workspace", "delete", "m", "--yes"]);
    assert!(!wt.exists());
    let branches = git(&moved, &["branch", "--format=%(refname:short)"]);
    assert!(!branches.contains("berth/m"), "{branches}");
    let worktrees = git(&moved, &["worktree", "list", "--porcelain"]);
    assert!(!worktrees.contains(wt.to_str().unwrap()), "{worktrees}");
    assert!(!worktrees.contains("prunable"), "{worktrees}");
}

#[test]
fn worktrees_inside_a_moved_repository_are_found_there() {
    let home = Home::new();
    let project = Project::new();
    let inside = project.root.join(".worktrees");
    std::fs::write(
        home.path().join("config.toml"),
        format!("[git]\nworktree_dir = {:?}\n", inside.to_str().unwrap()),
    )
    .unwrap();
    std::fs::write(project.root.join(".git/info/exclude"), ".worktrees\n").unwrap();
    let id = ok_in(&home, &project.root, &["workspace", "create", "in"]);
    let moved = project.root.with_file_name("moved-project");
    std::fs::rename(&project.root, &moved).unwrap();
    let out = ok_in(&home, &moved, &["workspace", "repair", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let now_at = moved.join(".worktrees").join(id.trim());
    assert_eq!(
        report["reattached"][0]["worktree"],
        now_at.to_str().unwrap()
    );
    let ws = home.json(&["workspace", "show", "in", "--json"]);
    assert_eq!(ws["git"]["worktree"], now_at.to_str().unwrap());
    assert_eq!(ws["git_status"]["health"], "ok");
    assert_eq!(ws["git_status"]["changed_files"], 0);
    home.ok(&["workspace", "delete", "in", "--yes"]);
    assert!(!now_at.exists());
    assert_eq!(
        git(&moved, &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1
    );
}

#[test]
fn worktrees_of_a_bare_repository() {
    let home = Home::new();
    let project = Project::new();
    let bare = project.root.with_file_name("bare.git");
    git(
        &project.root,
        &["clone", "--quiet", "--bare", ".", bare.to_str().unwrap()],
    );
    git(&bare, &["branch", "older", "main"]);
    let bare = bare.canonicalize().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[git]\ncopy = [\".env\"]\n",
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let r = in_dir(
        &home,
        elsewhere.path(),
        &["workspace", "create", "b", "--repo", bare.to_str().unwrap()],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let sha = git(&bare, &["rev-parse", "--short", "main"]);
    assert!(
        r.stderr
            .contains(&format!("starting at main ({})", sha.trim())),
        "its HEAD is the base: {}",
        r.stderr
    );
    // Nothing is copied out of git's own folder.
    assert!(
        r.stderr
            .contains("is a bare repository, so there is no checkout to copy"),
        "{}",
        r.stderr
    );
    let ws = home.json(&["workspace", "show", "b", "--json"]);
    assert_eq!(ws["git"]["repo"], bare.to_str().unwrap());
    assert_eq!(ws["git"]["base_branch"], "main");
    assert_eq!(ws["git_status"]["health"], "ok");
    assert_eq!(ws["git_status"]["branch"], "berth/b");
    let wt = PathBuf::from(ws["git"]["worktree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(wt.join("README.md")).unwrap(),
        "hello\n"
    );
    assert!(!wt.join(".env").exists());

    // From inside the bare folder, with --base, and from inside one of its worktrees.
    ok_in(
        &home,
        &bare,
        &["workspace", "create", "c", "--base", "older"],
    );
    ok_in(&home, &wt, &["workspace", "create", "d"]);
    let d = home.json(&["workspace", "show", "d", "--json"]);
    assert_eq!(d["git"]["repo"], bare.to_str().unwrap());

    // Removal keeps its rules: dirty work is refused, a clean worktree goes with its branch.
    std::fs::write(wt.join("wip.txt"), "x").unwrap();
    let err = home.fails(&["workspace", "delete", "b", "--yes"]);
    assert!(err.contains("uncommitted"), "{err}");
    std::fs::remove_file(wt.join("wip.txt")).unwrap();
    for name in ["b", "c", "d"] {
        home.ok(&["workspace", "delete", name, "--yes"]);
    }
    assert!(!wt.exists());
    assert_eq!(
        git(&bare, &["branch", "--format=%(refname:short)"]),
        "main\nolder\n"
    );
    assert_eq!(
        git(&bare, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
}

/// A project whose `vendor/lib` is a submodule made from a local repository (with a nested
/// submodule of its own), initialised in the main checkout. The local repositories are then
/// moved away, so anything fetched from their URLs would fail: what the worktrees get comes
/// from the main repository's module store.
fn project_with_submodules() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let repo = |name: &str, file: &str| {
        let path = dir.join(name);
        std::fs::create_dir(&path).unwrap();
        git(&path, &["init", "--quiet", "-b", "main"]);
        commit(&path, file, &format!("{name}\n"));
        path
    };
    let inner = repo("inner", "inner.txt");
    let lib = repo("lib", "lib.txt");
    let allow = ["-c", "protocol.file.allow=always"];
    let add = |at: &Path, url: &Path, path: &str| {
        let mut args = allow.to_vec();
        args.extend(["submodule", "add", "--quiet", url.to_str().unwrap(), path]);
        git(at, &args);
        git(at, &["commit", "--quiet", "-m", &format!("add {path}")]);
    };
    add(&lib, &inner, "deps/inner");
    let project = repo("project", "README.md");
    add(&project, &lib, "vendor/lib");
    let mut args = allow.to_vec();
    args.extend(["submodule", "update", "--init", "--recursive", "--quiet"]);
    git(&project, &args);
    std::fs::rename(&inner, dir.join("inner-gone")).unwrap();
    std::fs::rename(&lib, dir.join("lib-gone")).unwrap();
    (tmp, project)
}

#[test]
fn submodules_are_checked_out_from_the_main_repository() {
    let home = Home::new();
    let (_tmp, project) = project_with_submodules();
    let r = in_dir(&home, &project, &["workspace", "create", "s"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let wt = PathBuf::from(home.ok(&["workspace", "path", "s"]).trim());
    assert_eq!(
        std::fs::read_to_string(wt.join("vendor/lib/lib.txt")).unwrap(),
        "lib\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("vendor/lib/deps/inner/inner.txt")).unwrap(),
        "inner\n",
        "nested submodules too"
    );
    // As `git submodule update` would leave it: origin is the submodule's own URL.
    let origin = git(&wt.join("vendor/lib"), &["remote", "get-url", "origin"]);
    assert!(origin.trim().ends_with("/lib"), "{origin}");
    let status = git(&wt, &["submodule", "status", "--recursive"]);
    assert!(!status.contains('-') && !status.contains('+'), "{status}");
    let ws = home.json(&["workspace", "show", "s", "--json"]);
    assert_eq!(ws["git_status"]["changed_files"], 0);

    // A dirty submodule is work too: delete refuses to lose it.
    std::fs::write(wt.join("vendor/lib/lib.txt"), "changed\n").unwrap();
    let err = home.fails(&["workspace", "delete", "s", "--yes"]);
    assert!(err.contains("uncommitted change"), "{err}");
    assert!(wt.join("vendor/lib/lib.txt").exists());
    git(
        &wt.join("vendor/lib"),
        &["checkout", "--quiet", "--", "lib.txt"],
    );
    home.ok(&["workspace", "delete", "s", "--yes"]);
    assert!(!wt.exists());
    assert_eq!(
        git(&project, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );

    // [git] submodules = false leaves them as git worktree add does.
    std::fs::write(
        home.path().join("config.toml"),
        "[git]\nsubmodules = false\n",
    )
    .unwrap();
    ok_in(&home, &project, &["workspace", "create", "bare-bones"]);
    let wt = PathBuf::from(home.ok(&["workspace", "path", "bare-bones"]).trim());
    assert!(!wt.join("vendor/lib/lib.txt").exists());
    home.ok(&["workspace", "delete", "bare-bones", "--yes"]);
}

#[test]
fn a_submodule_that_cannot_be_checked_out_rolls_the_create_back() {
    let home = Home::new();
    let (_tmp, project) = project_with_submodules();
    // The main repository lost its copy, and the URL leads nowhere.
    std::fs::remove_dir_all(project.join(".git/modules/vendor")).unwrap();
    let branches = git(&project, &["branch", "--format=%(refname:short)"]);
    let err = fails_in(&home, &project, &["workspace", "create", "s"]);
    assert!(
        err.contains("cannot check out the submodule vendor/lib") && err.contains("rolled back"),
        "{err}"
    );
    assert_eq!(
        home.json(&["workspace", "list", "--json"]),
        serde_json::json!([])
    );
    assert_eq!(
        git(&project, &["branch", "--format=%(refname:short)"]),
        branches
    );
    assert_eq!(
        git(&project, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
}
