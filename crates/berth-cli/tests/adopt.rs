//! Worktrees berth did not make, through the real binary and real git: `berth workspace adopt`
//! of a `git worktree add`ed folder, and `berth import amux` of a repository laid out exactly as
//! amux lays it out. berth records them where they are and never deletes their branches.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::{commit, git, snapshot};
use serde_json::Value;
use support::Home;

/// A repository on `main` with one commit, `.amux/` ignored as `amux init` offers to.
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

    /// An amux workspace as amux's `Manager.Create` makes it: `git branch amux/<id> <base>`,
    /// `git worktree add <ws>/worktree amux/<id>`, a `storage/` folder, and `workspace.yaml`
    /// as yaml.v3 marshals its `Workspace` struct.
    fn amux_workspace(&self, id: &str, name: &str, description: &str) -> PathBuf {
        let dir = self.root.join(".amux/workspaces").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let branch = format!("amux/{id}");
        let worktree = dir.join("worktree");
        git(&self.root, &["branch", &branch, "main"]);
        git(
            &self.root,
            &["worktree", "add", worktree.to_str().unwrap(), &branch],
        );
        std::fs::create_dir_all(dir.join("storage")).unwrap();
        let description = match description {
            "" => String::new(),
            d if d.contains('\n') => format!(
                "description: |-\n{}\n",
                d.lines()
                    .map(|l| if l.is_empty() {
                        String::new()
                    } else {
                        format!("    {l}")
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            d => format!("description: {d}\n"),
        };
        std::fs::write(
            dir.join("workspace.yaml"),
            format!(
                "id: {id}\nname: {name}\nbranch: {branch}\nbaseBranch: main\npath: {}\n{description}storagePath: {}\ncreatedAt: 2025-06-12T10:30:00.123456789+09:00\nautoCreated: false\n",
                worktree.display(),
                dir.join("storage").display()
            ),
        )
        .unwrap();
        worktree
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

const FIX: &str = "workspace-fix-auth-1749691800-1a2b3c4d";
const REVIEW: &str = "workspace-review-pr-1749691900-5e6f7a8b";

#[test]
fn amux_workspaces_are_adopted_item_by_item() {
    let project = Project::new();
    let home = Home::new();
    std::fs::create_dir_all(project.root.join(".amux")).unwrap();
    std::fs::write(
        project.root.join(".amux/config.yaml"),
        "version: \"1.0\"\nmcp:\n    transport:\n        type: stdio\n",
    )
    .unwrap();
    let fix = project.amux_workspace(FIX, "fix-auth", "JWT auth for the API");
    commit(&fix, "auth.rs", "token checks");
    // amux's storage, where it keeps the workspace's context.md; a symlink out is refused.
    let storage = project
        .root
        .join(".amux/workspaces")
        .join(FIX)
        .join("storage");
    std::fs::write(
        storage.join("context.md"),
        "# Context\nJWT, not sessions.\n",
    )
    .unwrap();
    std::fs::create_dir_all(storage.join("notes")).unwrap();
    std::fs::write(storage.join("notes/plan.md"), "1. tokens\n").unwrap();
    let secret = project.tmp.path().join("secret.txt");
    std::fs::write(&secret, "not amux's").unwrap();
    std::os::unix::fs::symlink(&secret, storage.join("leak.txt")).unwrap();
    let review = project.amux_workspace(REVIEW, "review pr", "Review #42\n\nthen merge");
    // A corrupt record, a hostile name, an id that does not match its folder, a symlinked
    // folder, a worktree of another repository, and a worktree that is gone.
    let amux = project.root.join(".amux/workspaces");
    std::fs::create_dir_all(amux.join("workspace-broken-1-00000000")).unwrap();
    std::fs::write(
        amux.join("workspace-broken-1-00000000/workspace.yaml"),
        "id: workspace-broken-1-00000000\nname: \"unterminated\n",
    )
    .unwrap();
    std::fs::create_dir_all(amux.join(".evil")).unwrap();
    std::fs::create_dir_all(amux.join("workspace-liar-1-00000000")).unwrap();
    std::fs::write(
        amux.join("workspace-liar-1-00000000/workspace.yaml"),
        format!(
            "id: ../../../etc\nname: liar\nbranch: main\nbaseBranch: main\npath: {}\ncreatedAt: 2025-06-12T10:30:00Z\n",
            project.root.display()
        ),
    )
    .unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), amux.join("workspace-link-1-00000000")).unwrap();
    let other = Project::new();
    let foreign = other.worktree("foreign", "theirs");
    std::fs::create_dir_all(amux.join("workspace-foreign-1-00000000")).unwrap();
    std::fs::write(
        amux.join("workspace-foreign-1-00000000/workspace.yaml"),
        format!(
            "id: workspace-foreign-1-00000000\nname: foreign\nbranch: theirs\nbaseBranch: main\npath: {}\ncreatedAt: 2025-06-12T10:30:00Z\n",
            foreign.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(amux.join("workspace-gone-1-00000000")).unwrap();
    std::fs::write(
        amux.join("workspace-gone-1-00000000/workspace.yaml"),
        format!(
            "id: workspace-gone-1-00000000\nname: gone\nbranch: amux/gone\nbaseBranch: main\npath: {}\ncreatedAt: 2025-06-12T10:30:00Z\n",
            amux.join("workspace-gone-1-00000000/worktree").display()
        ),
    )
    .unwrap();
    let amux_before = snapshot(&project.root.join(".amux"));

    // A dry run first: the plan, and nothing written.
    home.ok(&["workspace", "list"]);
    let home_before = snapshot(home.path());
    let (code, dry) = import(&home, &project.root, &["--dry-run"]);
    assert_ne!(code, 0);
    assert_eq!(outcome(&dry, FIX), "would_import");
    assert_eq!(snapshot(home.path()), home_before);

    // From inside the repository, without naming it.
    let r = in_dir(&home, &fix, &["import", "amux", "--json"]);
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_ne!(r.code, 0, "{report:#}");
    assert_eq!(outcome(&report, FIX), "imported");
    assert_eq!(outcome(&report, REVIEW), "imported");
    assert_eq!(outcome(&report, "workspace-broken-1-00000000"), "failed");
    for refused in [
        ".evil",
        "workspace-liar-1-00000000",
        "workspace-link-1-00000000",
        "workspace-foreign-1-00000000",
    ] {
        assert_eq!(outcome(&report, refused), "refused", "{refused}");
    }
    assert_eq!(outcome(&report, "workspace-gone-1-00000000"), "failed");
    assert_eq!(outcome(&report, "context.md"), "imported");
    assert_eq!(outcome(&report, "notes/plan.md"), "imported");
    assert_eq!(outcome(&report, "leak.txt"), "refused");
    assert_eq!(
        home.ok(&["workspace", "storage", "read", FIX, "context.md"]),
        "# Context\nJWT, not sessions.\n"
    );
    assert!(
        home.fails(&["workspace", "storage", "read", FIX, "leak.txt"])
            .contains("not found")
    );

    let ws = home.json(&["workspace", "show", FIX, "--json"]);
    assert_eq!(ws["name"], "fix-auth");
    assert_eq!(ws["description"], "JWT auth for the API");
    assert_eq!(ws["created_at"], "2025-06-12T01:30:00.123456789Z");
    assert_eq!(ws["git"]["worktree"], fix.to_str().unwrap());
    assert_eq!(ws["git"]["branch"], format!("amux/{FIX}"));
    assert_eq!(ws["git"]["base_branch"], "main");
    assert_eq!(ws["git"]["branch_created"], false);
    assert_eq!(ws["git_status"]["ahead"], 1);
    let ws = home.json(&["workspace", "show", REVIEW, "--json"]);
    assert_eq!(ws["name"], Value::Null, "'review pr' is no berth name");
    assert_eq!(ws["description"], "review pr: Review #42\n\nthen merge");
    assert_eq!(ws["git"]["worktree"], review.to_str().unwrap());
    assert_eq!(
        home.json(&["workspace", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // Again: nothing twice.
    let (_, again) = import(&home, &project.root, &[]);
    assert_eq!(outcome(&again, FIX), "already_there");
    assert_eq!(outcome(&again, REVIEW), "already_there");
    assert_eq!(outcome(&again, "context.md"), "already_there");
    assert_eq!(
        home.json(&["workspace", "list", "--json"])
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // amux's records were only read.
    assert_eq!(snapshot(&project.root.join(".amux")), amux_before);

    // Deleting an adopted amux workspace keeps amux's branch, with its commit.
    home.ok(&["workspace", "delete", FIX, "--yes"]);
    assert!(!fix.exists());
    assert!(project.has_branch(&format!("amux/{FIX}")));
}

#[test]
fn a_repository_without_amux_is_refused_as_a_whole() {
    let project = Project::new();
    let home = Home::new();
    let r = home.run(&["import", "amux", project.root.to_str().unwrap()]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("no .amux folder"), "{}", r.stderr);
    let plain = tempfile::tempdir().unwrap();
    let r = home.run(&["import", "amux", plain.path().to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("not inside a git repository"),
        "{}",
        r.stderr
    );
}

fn import(home: &Home, repo: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["import", "amux", repo.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let run = home.run(&args);
    let json = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}\n{}", run.stdout, run.stderr));
    (run.code, json)
}

fn outcome<'a>(report: &'a Value, what: &str) -> &'a Value {
    let found: Vec<&Value> = report["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["what"] == what)
        .collect();
    assert_eq!(found.len(), 1, "{what}: {report:#}");
    &found[0]["outcome"]
}
