//! Worktrees berth did not make, through the real binary and real git: `berth workspace adopt`
//! of a `git worktree add`ed folder. berth records them where they are and never deletes their
//! branches.

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::{commit, git};
use support::Home;

/// A repository on `main` with one commit.
struct Project {
    tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Project {
    fn new() -> Project {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("project");
        std::fs::create_dir(&root).unwrap();
        git(&root, &["init", "--quiet", "-b", "main"]);
        commit(&root, ".gitignore", ".amux/\n");
        commit(&root, "README.md", "hello\n");
        let root = root.canonicalize().unwrap();
        Project { tmp, root }
    }

    /// `git worktree add -b BRANCH <tmp>/NAME`, by hand; returns the worktree's path.
    fn worktree(&self, name: &str, branch: &str) -> PathBuf {
        let path = self.tmp.path().canonicalize().unwrap().join(name);
        git(
            &self.root,
            &[
                "worktree",
                "add",
                "--quiet",
                "-b",
                branch,
                path.to_str().unwrap(),
            ],
        );
        path
    }

    fn has_branch(&self, branch: &str) -> bool {
        git(&self.root, &["branch", "--list", branch]).contains(branch)
    }
}

fn in_dir(home: &Home, dir: &Path, args: &[&str]) -> berth_testkit::Run {
    let mut cmd = home.cmd(args);
    cmd.current_dir(dir);
    berth_testkit::run(cmd)
}

#[test]
fn an_adopted_worktree_is_deleted_without_its_branch() {
    let project = Project::new();
    let home = Home::new();
    let wt = project.worktree("by-hand", "feature/login");
    commit(&wt, "login.rs", "work that only the branch holds");

    let ws = home.json(&[
        "workspace",
        "adopt",
        wt.to_str().unwrap(),
        "--name",
        "login",
        "--json",
    ]);
    assert_eq!(ws["name"], "login");
    assert_eq!(ws["git"]["worktree"], wt.to_str().unwrap());
    assert_eq!(ws["git"]["repo"], project.root.to_str().unwrap());
    assert_eq!(ws["git"]["branch"], "feature/login");
    assert_eq!(ws["git"]["branch_created"], false);
    assert_eq!(ws["git"]["base_branch"], "main");
    assert_eq!(ws["git_status"]["health"], "ok");
    assert_eq!(ws["git_status"]["ahead"], 1);
    // The path resolves to it, and berth's agent would find it from inside.
    assert_eq!(
        home.ok(&["workspace", "path", "login"]).trim(),
        wt.to_str().unwrap()
    );

    // Uncommitted work keeps it, like any git workspace.
    std::fs::write(wt.join("draft.txt"), "not committed").unwrap();
    let r = home.run(&["workspace", "delete", "login", "--yes"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(wt.join("draft.txt").exists());
    std::fs::remove_file(wt.join("draft.txt")).unwrap();

    // Clean: the worktree and the record go, the branch berth did not make stays.
    home.ok(&["workspace", "delete", "login", "--yes"]);
    assert!(!wt.exists());
    assert!(project.has_branch("feature/login"));
    assert_eq!(
        git(
            &project.root,
            &["log", "-1", "--format=%s", "feature/login"]
        )
        .trim(),
        "work that only the branch holds"
    );
    assert!(
        home.json(&["workspace", "list", "--json"])
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn adopt_refuses_what_is_not_a_linked_worktree_or_is_taken() {
    let project = Project::new();
    let home = Home::new();
    let wt = project.worktree("wt", "feat");
    // From a folder inside it: the worktree's top is recorded.
    std::fs::create_dir(wt.join("src")).unwrap();
    let id = home.ok(&["workspace", "adopt", wt.join("src").to_str().unwrap()]);
    let shown = home.json(&["workspace", "show", id.trim(), "--json"]);
    assert_eq!(shown["git"]["worktree"], wt.to_str().unwrap());

    let again = home.run(&["workspace", "adopt", wt.to_str().unwrap()]);
    assert_eq!(again.code, 6, "{}", again.stderr);
    assert!(
        again.stderr.contains("already berth workspace"),
        "{}",
        again.stderr
    );

    let main = home.run(&["workspace", "adopt", project.root.to_str().unwrap()]);
    assert_eq!(main.code, 2, "{}", main.stderr);
    assert!(main.stderr.contains("main checkout"), "{}", main.stderr);

    let plain = tempfile::tempdir().unwrap();
    let r = home.run(&["workspace", "adopt", plain.path().to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("not a linked git worktree"),
        "{}",
        r.stderr
    );

    let r = home.run(&["workspace", "adopt", "/no/such/folder"]);
    assert_eq!(r.code, 2, "{}", r.stderr);

    // A worktree berth made itself is recorded already.
    let made = in_dir(&home, &project.root, &["workspace", "create", "mine"]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let path = home.ok(&["workspace", "path", "mine"]);
    let r = home.run(&["workspace", "adopt", path.trim()]);
    assert_eq!(r.code, 6, "{}", r.stderr);
    assert_eq!(
        home.json(&["workspace", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn a_detached_worktree_is_adopted_and_its_commits_kept() {
    let project = Project::new();
    let home = Home::new();
    let path = project.tmp.path().canonicalize().unwrap().join("detached");
    git(
        &project.root,
        &[
            "worktree",
            "add",
            "--quiet",
            "--detach",
            path.to_str().unwrap(),
        ],
    );
    let ws = home.json(&["workspace", "adopt", path.to_str().unwrap(), "--json"]);
    assert_eq!(ws["git"]["branch"], "HEAD");
    assert_eq!(ws["git_status"]["health"], "ok");
    commit(&path, "spike.txt", "a commit on no branch");
    let id = ws["id"].as_str().unwrap();
    let r = home.run(&["workspace", "delete", id, "--yes"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(r.stderr.contains("no branch"), "{}", r.stderr);
    assert!(path.join("spike.txt").exists());
}
