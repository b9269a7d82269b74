//! Spare checkouts of a repository, filled in the background: a create waits for a spare being
//! filled rather than check out afresh, and a spare gives the same worktree as a fresh one.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::{commit, git, wait_ok};
use support::Home;
use support::git_project::{Project, fails_in, ok_in, wait_for_spares};

#[test]
fn a_create_waits_for_a_spare_being_filled_rather_than_check_out_afresh() {
    let home = Home::new();
    let project = Project::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[git]\nspare_worktrees = 1\n",
    )
    .unwrap();
    let out = ok_in(&home, &project.root, &["workspace", "spares", "--json"]);
    let pool = PathBuf::from(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["dir"]
            .as_str()
            .unwrap(),
    );
    std::fs::create_dir_all(&pool).unwrap();
    // A filler (this test process, alive) building a spare, as `fill` does: under `.tmp-*`,
    // with its start and the last fill's duration noted.
    let building = pool.join(".tmp-test");
    git(
        &project.root,
        &[
            "worktree",
            "add",
            "--quiet",
            "--detach",
            building.to_str().unwrap(),
            "origin/main",
        ],
    );
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    std::fs::write(
        pool.join(".fill-started"),
        format!("{now_ms} {}", std::process::id()),
    )
    .unwrap();
    std::fs::write(pool.join(".fill-took"), "30000").unwrap();

    let mut create = home.cmd(&["workspace", "create", "w"]);
    create
        .current_dir(&project.root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = create.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the create waits for the spare being filled"
    );
    let spare_inode = inode(&building.join("README.md"));
    git(
        &project.root,
        &[
            "worktree",
            "move",
            building.to_str().unwrap(),
            pool.join("ready-test").to_str().unwrap(),
        ],
    );
    let id = wait_ok(child);
    let wt = home.workspace_dir(id.trim()).join("worktree");
    assert_eq!(
        inode(&wt.join("README.md")),
        spare_inode,
        "it took that spare"
    );
    assert_eq!(
        git(&wt, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "berth/w"
    );

    // A spare whose filler is gone is not waited for.
    wait_for_spares(&home, &project.root, 1);
    ok_in(&home, &project.root, &["workspace", "spares", "--clear"]);
    let dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    let _ = { dead }.wait();
    std::fs::create_dir_all(pool.join(".tmp-dead")).unwrap();
    std::fs::write(pool.join(".fill-started"), format!("{now_ms} {dead_pid}")).unwrap();
    let started = std::time::Instant::now();
    ok_in(&home, &project.root, &["workspace", "create", "fresh"]);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    wait_for_spares(&home, &project.root, 1);
}

fn ready_spare(pool: &Path) -> PathBuf {
    std::fs::read_dir(pool)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("ready-")
        })
        .unwrap()
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().ino()
}

#[test]
fn spare_checkouts_give_the_same_worktree_as_a_fresh_one() {
    let home = Home::new();
    let project = Project::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[git]\nspare_worktrees = 1\n",
    )
    .unwrap();
    let out = ok_in(
        &home,
        &project.root,
        &["workspace", "spares", "--fill", "--json"],
    );
    let pool: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(pool["ready"], 1);
    let pool_dir = PathBuf::from(pool["dir"].as_str().unwrap());
    let spare = ready_spare(&pool_dir);
    let spare_inode = inode(&spare.join("README.md"));

    // The base moved on after the spare was made: the new worktree still starts at the base.
    commit(&project.root, "later.txt", "later");
    git(
        &project.root,
        &["update-ref", "refs/remotes/origin/main", "main"],
    );
    let id = ok_in(&home, &project.root, &["workspace", "create", "quick"]);
    let wt = home.workspace_dir(id.trim()).join("worktree");
    assert_eq!(
        inode(&wt.join("README.md")),
        spare_inode,
        "the spare was used"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("later.txt")).unwrap(),
        "later"
    );
    assert_eq!(
        git(&wt, &["rev-parse", "HEAD"]),
        git(&project.root, &["rev-parse", "origin/main"])
    );
    assert_eq!(
        git(&wt, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "berth/quick"
    );
    assert!(!git(&project.root, &["config", "--list"]).contains("branch.berth/quick."));
    let ws = home.json(&["workspace", "show", "quick", "--json"]);
    assert_eq!(ws["git_status"]["changed_files"], 0);
    assert_eq!(ws["git_status"]["ahead"], 0);
    assert!(
        project
            .worktrees()
            .contains(&wt.to_str().unwrap().to_owned())
    );

    // The background fill makes the next spare at the current base; a new branch from it is
    // just a branch and HEAD, with nothing rewritten.
    wait_for_spares(&home, &project.root, 1);
    let spare = ready_spare(&pool_dir);
    let spare_inode = inode(&spare.join("later.txt"));
    ok_in(&home, &project.root, &["workspace", "create", "fast"]);
    let wt_fast = PathBuf::from(home.ok(&["workspace", "path", "fast"]).trim());
    assert_eq!(inode(&wt_fast.join("later.txt")), spare_inode);
    assert_eq!(
        git(&wt_fast, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "berth/fast"
    );
    assert_eq!(git(&wt_fast, &["status", "--porcelain"]), "");
    home.ok(&["workspace", "delete", "fast", "--yes"]);

    // A spare git no longer knows (removed with git by hand) is dropped, and the create
    // makes a fresh checkout instead.
    wait_for_spares(&home, &project.root, 1);
    let spare = ready_spare(&pool_dir);
    git(
        &project.root,
        &["worktree", "remove", "--force", spare.to_str().unwrap()],
    );
    std::fs::create_dir(&spare).unwrap();
    ok_in(&home, &project.root, &["workspace", "create", "safe"]);
    let wt_safe = PathBuf::from(home.ok(&["workspace", "path", "safe"]).trim());
    assert_eq!(
        std::fs::read_to_string(wt_safe.join("README.md")).unwrap(),
        "hello\n"
    );
    assert_eq!(git(&wt_safe, &["status", "--porcelain"]), "");
    home.ok(&["workspace", "delete", "safe", "--yes"]);

    // An existing branch can be taken from a spare.
    wait_for_spares(&home, &project.root, 1);
    git(&project.root, &["branch", "mine"]);
    ok_in(
        &home,
        &project.root,
        &["workspace", "create", "m", "--checkout", "mine"],
    );
    let wt_m = PathBuf::from(home.ok(&["workspace", "path", "m"]).trim());
    assert_eq!(
        git(&wt_m, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "mine"
    );
    // A branch that cannot be checked out fails cleanly, spare or not.
    wait_for_spares(&home, &project.root, 1);
    let before = project.branches();
    let err = fails_in(
        &home,
        &project.root,
        &["workspace", "create", "n", "--checkout", "mine"],
    );
    assert!(err.contains("mine"), "{err}");
    assert_eq!(project.branches(), before);
    assert!(
        home.fails(&["workspace", "show", "n"])
            .contains("no workspace")
    );

    // Removal and clearing leave git's records clean.
    home.ok(&["workspace", "delete", "quick", "--yes"]);
    home.ok(&["workspace", "delete", "m", "--yes"]);
    wait_for_spares(&home, &project.root, 1);
    let out = ok_in(
        &home,
        &project.root,
        &["workspace", "spares", "--clear", "--json"],
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["ready"],
        0
    );
    assert_eq!(project.worktrees(), Vec::<String>::new());
}
