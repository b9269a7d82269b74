//! Git workspaces through the `berth` binary, against real repositories in temp dirs: every
//! branch option, base detection, copy and setup, rollback, removal rules, and worktrees or
//! repositories that went away behind berth's back.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::{Run, commit, git, run, wait_ok};
use support::Home;

/// A project cloned from an upstream that has `main` and `feature`, so the clone has
/// `origin/HEAD`, and an ignored `.env` in the main checkout.
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
        commit(&upstream, ".gitignore", ".env\n");
        commit(&upstream, "README.md", "hello\n");
        git(&upstream, &["branch", "feature"]);
        git(tmp.path(), &["clone", "--quiet", "upstream", "project"]);
        let root = tmp.path().join("project").canonicalize().unwrap();
        std::fs::write(root.join(".env"), "TOKEN=local\n").unwrap();
        Project { _tmp: tmp, root }
    }

    fn branches(&self) -> Vec<String> {
        git(&self.root, &["branch", "--format=%(refname:short)"])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Worktree paths git knows about, the main checkout excluded.
    fn worktrees(&self) -> Vec<String> {
        git(&self.root, &["worktree", "list", "--porcelain"])
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .filter(|p| Path::new(p) != self.root)
            .map(str::to_owned)
            .collect()
    }
}

/// `berth ARGS` run inside `dir`.
fn in_dir(home: &Home, dir: &Path, args: &[&str]) -> Run {
    let mut cmd = home.cmd(args);
    cmd.current_dir(dir);
    run(cmd)
}

fn ok_in(home: &Home, dir: &Path, args: &[&str]) -> String {
    let r = in_dir(home, dir, args);
    assert_eq!(r.code, 0, "berth {args:?} failed: {}", r.stderr);
    r.stdout
}

fn fails_in(home: &Home, dir: &Path, args: &[&str]) -> String {
    let r = in_dir(home, dir, args);
    assert_ne!(
        r.code, 0,
        "berth {args:?} should fail; printed {}",
        r.stdout
    );
    r.stderr
}

/// Workspace folders in the home (berth's hidden staging and trash excluded).
fn workspace_folders(home: &Home) -> Vec<String> {
    match std::fs::read_dir(home.path().join("workspaces")) {
        Ok(dir) => dir
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Nothing of a failed create is left: no record, folder, worktree or branch.
fn assert_nothing_left(home: &Home, project: &Project, branches_before: &[String]) {
    assert_eq!(
        home.json(&["workspace", "list", "--json"]),
        serde_json::json!([])
    );
    assert_eq!(workspace_folders(home), Vec::<String>::new());
    assert_eq!(project.worktrees(), Vec::<String>::new());
    assert_eq!(project.branches(), branches_before);
}

#[test]
fn create_inside_a_repository_makes_a_worktree_on_a_new_branch() {
    let home = Home::new();
    let project = Project::new();
    let sub = project.root.join("src");
    std::fs::create_dir(&sub).unwrap();
    let id = ok_in(&home, &sub, &["workspace", "create", "fix-login"]);
    let id = id.trim();
    let ws = home.json(&["workspace", "show", id, "--json"]);
    let info = &ws["git"];
    assert_eq!(info["repo"], project.root.to_str().unwrap());
    assert_eq!(info["branch"], "berth/fix-login");
    // Base detection: the clone has origin/HEAD.
    assert_eq!(info["base_branch"], "origin/main");
    assert_eq!(info["branch_created"], true);
    let worktree = home.workspace_dir(id).join("worktree");
    assert_eq!(info["worktree"], worktree.to_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("README.md")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        git(&worktree, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "berth/fix-login"
    );
    // A new branch does not track its base.
    assert!(!git(&project.root, &["config", "--list"]).contains("branch.berth/fix-login."));
    let status = &ws["git_status"];
    assert_eq!(status["health"], "ok");
    assert_eq!(status["ahead"], 0);
    assert_eq!(status["behind"], 0);
    assert_eq!(status["changed_files"], 0);
    assert_eq!(status["last_commit"]["subject"], "hello");
    assert_eq!(
        home.ok(&["workspace", "path", "fix-login"]).trim(),
        worktree.to_str().unwrap()
    );

    // Work in the worktree shows in the status, list included.
    commit(&worktree, "a.txt", "one");
    std::fs::write(worktree.join("scratch"), "x").unwrap();
    let listed = home.json(&["workspace", "list", "--json"]);
    assert_eq!(listed[0]["git_status"]["ahead"], 1);
    assert_eq!(listed[0]["git_status"]["changed_files"], 1);
    let table = home.ok(&["workspace", "list"]);
    assert!(table.contains("berth/fix-login +1 -0 ~1"), "{table}");
    let shown = home.ok(&["workspace", "show", "fix-login"]);
    assert!(
        shown.contains("1 ahead, 0 behind, 1 changed file(s)"),
        "{shown}"
    );
}

#[test]
fn plain_repo_branch_checkout_and_base_options() {
    let home = Home::new();
    let project = Project::new();
    let elsewhere = tempfile::tempdir().unwrap();

    // --plain inside a repository, and any create outside one, make plain workspaces.
    let plain = ok_in(
        &home,
        &project.root,
        &["workspace", "create", "p1", "--plain"],
    );
    assert!(home.json(&["workspace", "show", plain.trim(), "--json"])["git"].is_null());
    let outside = ok_in(&home, elsewhere.path(), &["workspace", "create", "p2"]);
    assert!(home.json(&["workspace", "show", outside.trim(), "--json"])["git"].is_null());
    // A git option outside a repository is an error, not a silent plain workspace.
    let err = fails_in(
        &home,
        elsewhere.path(),
        &["workspace", "create", "p3", "--branch", "x"],
    );
    assert!(err.contains("not inside a git repository"), "{err}");

    let repo = project.root.to_str().unwrap();
    // --repo from outside, --branch names the new branch, --base picks its start.
    git(&project.root, &["branch", "older", "HEAD~1"]);
    ok_in(
        &home,
        elsewhere.path(),
        &[
            "workspace",
            "create",
            "b",
            "--repo",
            repo,
            "--branch",
            "topic",
            "--base",
            "older",
        ],
    );
    let b = home.json(&["workspace", "show", "b", "--json"]);
    assert_eq!(b["git"]["branch"], "topic");
    assert_eq!(b["git"]["base_branch"], "older");
    let wt_b = PathBuf::from(b["git"]["worktree"].as_str().unwrap());
    assert!(
        !wt_b.join("README.md").exists(),
        "started from the older commit"
    );

    // --branch refuses an existing branch, and nothing is left.
    let before = project.branches();
    let err = fails_in(
        &home,
        &project.root,
        &["workspace", "create", "c", "--branch", "topic"],
    );
    assert!(
        err.contains("already exists") && err.contains("--checkout"),
        "{err}"
    );
    assert!(
        home.fails(&["workspace", "show", "c"])
            .contains("no workspace")
    );
    assert_eq!(project.branches(), before);

    // --checkout an existing local branch: berth did not create it.
    git(&project.root, &["branch", "local-only"]);
    ok_in(
        &home,
        &project.root,
        &["workspace", "create", "d", "--checkout", "local-only"],
    );
    let d = home.json(&["workspace", "show", "d", "--json"]);
    assert_eq!(d["git"]["branch"], "local-only");
    assert_eq!(d["git"]["branch_created"], false);

    // --checkout a branch only on origin: tracked locally, and berth created it.
    ok_in(
        &home,
        &project.root,
        &["workspace", "create", "e", "--checkout", "feature"],
    );
    let e = home.json(&["workspace", "show", "e", "--json"]);
    assert_eq!(e["git"]["branch_created"], true);
    let wt_e = PathBuf::from(e["git"]["worktree"].as_str().unwrap());
    assert_eq!(
        git(&wt_e, &["rev-parse", "--abbrev-ref", "feature@{upstream}"]).trim(),
        "origin/feature"
    );
    let err = fails_in(
        &home,
        &project.root,
        &["workspace", "create", "f", "--checkout", "nope"],
    );
    assert!(
        err.contains("exists neither locally nor as origin/nope"),
        "{err}"
    );

    // Conflicting options are usage errors.
    let r = in_dir(
        &home,
        &project.root,
        &["workspace", "create", "g", "--plain", "--branch", "x"],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn failures_midway_leave_nothing_behind() {
    let home = Home::new();
    let project = Project::new();
    let before = project.branches();

    let err = fails_in(
        &home,
        &project.root,
        &["workspace", "create", "a", "--base", "no-such-rev"],
    );
    assert!(err.contains("base 'no-such-rev'"), "{err}");
    assert_nothing_left(&home, &project, &before);

    let err = fails_in(
        &home,
        &project.root,
        &["workspace", "create", "a", "--branch", "bad..name"],
    );
    assert!(err.contains("not a valid branch name"), "{err}");
    assert_nothing_left(&home, &project, &before);

    // git itself fails midway: the worktree path is taken by a file, after the record and
    // (for --branch) the branch would have been made.
    let wt_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[git]\nworktree_dir = {:?}\n",
            wt_dir.path().to_str().unwrap()
        ),
    )
    .unwrap();
    let id = "blocked-id";
    std::fs::write(wt_dir.path().join(id), "in the way").unwrap();
    let err = fails_in(
        &home,
        &project.root,
        &["workspace", "create", "a", "--id", id],
    );
    assert!(err.contains("rolled back"), "{err}");
    assert_nothing_left(&home, &project, &before);
    assert_eq!(
        std::fs::read_to_string(wt_dir.path().join(id)).unwrap(),
        "in the way",
        "a file berth did not make is untouched"
    );

    // A setup command that fails, after the checkout and the copy, undoes them.
    std::fs::write(
        home.path().join("config.toml"),
        "[git]\ncopy = [\".env\"]\nsetup = [\"echo preparing; echo broken >&2; exit 7\"]\n",
    )
    .unwrap();
    let err = fails_in(&home, &project.root, &["workspace", "create", "a"]);
    assert!(
        err.contains("exit status: 7") && err.contains("broken"),
        "{err}"
    );
    assert!(err.contains("rolled back"), "{err}");
    assert_nothing_left(&home, &project, &before);

    // A setup command that hangs is stopped by the timeout, and also rolled back.
    std::fs::write(
        home.path().join("config.toml"),
        "[git]\nsetup = [\"sleep 60\"]\nsetup_timeout_secs = 1\n",
    )
    .unwrap();
    let err = fails_in(&home, &project.root, &["workspace", "create", "a"]);
    assert!(err.contains("timed out after 1 s"), "{err}");
    assert_nothing_left(&home, &project, &before);
}

#[test]
fn copy_and_setup_come_from_berths_config() {
    let home = Home::new();
    let project = Project::new();
    let wt_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[git]\nworktree_dir = {:?}\ncopy = [\".env\", \"absent.txt\"]\nsetup = [\"test -f .env && echo ok > setup-ran\", \"printf '%s' \\\"$PWD\\\" > where\", \"printf '%s %s' \\\"$BERTH_PORT\\\" \\\"$BERTH_PORT_1\\\" > ports\"]\n",
            wt_dir.path().to_str().unwrap()
        ),
    )
    .unwrap();
    // A config file inside the repository is never read.
    std::fs::create_dir(project.root.join(".berth")).unwrap();
    std::fs::write(
        project.root.join(".berth/config.toml"),
        "[git]\nsetup = [\"touch pwned\"]\n",
    )
    .unwrap();
    let r = in_dir(&home, &project.root, &["workspace", "create", "s"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let id = r.stdout;
    let worktree = wt_dir.path().join(id.trim());
    // A copy entry the main checkout lacks is skipped, and said.
    assert!(
        r.stderr
            .contains("warning: [git] copy entry \"absent.txt\" is not in the main checkout")
            && !r.stderr.contains("\".env\""),
        "{}",
        r.stderr
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join(".env")).unwrap(),
        "TOKEN=local\n"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("setup-ran")).unwrap(),
        "ok\n"
    );
    assert_eq!(
        Path::new(&std::fs::read_to_string(worktree.join("where")).unwrap())
            .canonicalize()
            .unwrap(),
        worktree.canonicalize().unwrap()
    );
    assert!(!worktree.join("pwned").exists());
    assert!(!project.root.join("pwned").exists());
    // Setup sees the workspace's own ports, as its dev servers will.
    let ports = &home.json(&["workspace", "show", id.trim(), "--json"])["ports"];
    let first = ports["first"].as_u64().unwrap();
    assert_eq!(
        std::fs::read_to_string(worktree.join("ports")).unwrap(),
        format!("{first} {}", first + 1)
    );
    // Setup output never reaches stdout: stdout is the id alone.
    assert_eq!(id.lines().count(), 1);
    // Nothing the setup made counts against the base as commits.
    let ws = home.json(&["workspace", "show", "s", "--json"]);
    assert_eq!(ws["git_status"]["ahead"], 0);
}

#[test]
fn removal_refuses_to_lose_work_unless_forced() {
    let home = Home::new();
    let project = Project::new();
    let id = ok_in(&home, &project.root, &["workspace", "create", "w"]);
    let worktree = home.workspace_dir(id.trim()).join("worktree");

    // Uncommitted change: refused, and nothing is touched.
    std::fs::write(worktree.join("notes.txt"), "draft").unwrap();
    let err = home.fails(&["workspace", "delete", "w", "--yes"]);
    assert!(
        err.contains("uncommitted change") && err.contains("--force"),
        "{err}"
    );
    assert!(worktree.join("notes.txt").exists());

    // Committed but unmerged: still refused.
    git(&worktree, &["add", "notes.txt"]);
    git(&worktree, &["commit", "--quiet", "-m", "draft"]);
    let err = home.fails(&["workspace", "delete", "w", "--yes"]);
    assert!(err.contains("commit(s) that are on neither"), "{err}");
    assert_eq!(project.branches(), ["berth/w", "main"]);

    // Merged into the base: removed, and the branch berth created goes with it.
    git(
        &project.root,
        &["update-ref", "refs/remotes/origin/main", "berth/w"],
    );
    home.ok(&["workspace", "delete", "w", "--yes"]);
    assert!(!worktree.exists());
    assert_eq!(project.branches(), ["main"]);
    assert_eq!(project.worktrees(), Vec::<String>::new());

    // --force removes dirty work and the unmerged branch.
    ok_in(&home, &project.root, &["workspace", "create", "x"]);
    let wt_x = PathBuf::from(home.ok(&["workspace", "path", "x"]).trim());
    commit(&wt_x, "y.txt", "unmerged");
    std::fs::write(wt_x.join("dirty"), "x").unwrap();
    home.ok(&["workspace", "delete", "x", "--yes", "--force"]);
    assert!(!wt_x.exists());
    assert_eq!(project.branches(), ["main"]);

    // A branch berth did not create is never deleted.
    git(&project.root, &["branch", "mine"]);
    ok_in(
        &home,
        &project.root,
        &["workspace", "create", "m", "--checkout", "mine"],
    );
    home.ok(&["workspace", "delete", "m", "--yes"]);
    assert_eq!(project.branches(), ["main", "mine"]);
    assert_eq!(project.worktrees(), Vec::<String>::new());
}

#[test]
fn commits_only_the_worktree_holds_are_never_lost() {
    let home = Home::new();
    let project = Project::new();
    ok_in(&home, &project.root, &["workspace", "create", "d"]);
    let worktree = PathBuf::from(home.ok(&["workspace", "path", "d"]).trim());

    // A detached HEAD with a commit of its own: on no branch at all.
    git(&worktree, &["checkout", "--quiet", "--detach"]);
    commit(&worktree, "work.txt", "detached work");
    let head = git(&worktree, &["rev-parse", "HEAD"]).trim().to_owned();
    let short = git(&worktree, &["rev-parse", "--short", "HEAD"])
        .trim()
        .to_owned();
    let r = home.run(&["workspace", "delete", "d", "--yes"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("1 commit(s) that no branch, tag or remote has")
            && r.stderr.contains(&format!("{short} detached work"))
            && r.stderr.contains("--force"),
        "the refusal names the commit and --force: {}",
        r.stderr
    );
    // show and list report the worktree as it is: detached, and what only it holds.
    let shown = home.ok(&["workspace", "show", "d"]);
    assert!(
        shown.contains(&format!("detached at {}", &head[..10]))
            && shown.contains("1 commit(s) no branch, tag or remote has"),
        "{shown}"
    );
    let ws = home.json(&["workspace", "show", "d", "--json"]);
    assert_eq!(ws["git"]["branch"], "berth/d", "the record is unchanged");
    assert_eq!(ws["git_status"]["detached"], true);
    assert_eq!(ws["git_status"]["head"], head.as_str());
    assert_eq!(ws["git_status"]["unreferenced_commits"], 1);
    assert_eq!(ws["git_status"]["ahead"], 1);
    let table = home.ok(&["workspace", "list"]);
    assert!(
        table.contains(&format!("detached@{}", &head[..10])),
        "{table}"
    );

    let gc = home.run(&["workspace", "gc", "--max-age", "0", "--yes"]);
    assert_eq!(gc.code, 0, "{}", gc.stderr);
    assert!(
        gc.stderr.contains("keeping") && gc.stderr.contains("detached work"),
        "{}",
        gc.stderr
    );
    assert!(
        worktree.join("work.txt").exists(),
        "gc removed the worktree"
    );
    assert_eq!(git(&worktree, &["rev-parse", "HEAD"]).trim(), head);

    // The same when berth's branch was deleted by hand under a detached HEAD.
    git(&project.root, &["branch", "-D", "berth/d"]);
    let err = home.fails(&["workspace", "delete", "d", "--yes"]);
    assert!(err.contains("no branch, tag or remote has"), "{err}");

    // Once the commit is on a branch, the worktree goes and the branch keeps the commit.
    git(&worktree, &["switch", "--quiet", "-c", "saved"]);
    // A worktree switched to another branch is shown on that branch.
    let ws = home.json(&["workspace", "show", "d", "--json"]);
    assert_eq!(ws["git_status"]["branch"], "saved");
    assert_eq!(ws["git_status"]["detached"], false);
    assert_eq!(ws["git_status"]["unreferenced_commits"], 0);
    let shown = home.ok(&["workspace", "show", "d"]);
    assert!(shown.contains("checked out: saved"), "{shown}");
    home.ok(&["workspace", "delete", "d", "--yes"]);
    assert!(!worktree.exists());
    assert_eq!(git(&project.root, &["rev-parse", "saved"]).trim(), head);
}

#[test]
fn a_forced_delete_keeps_what_it_would_lose_on_a_ref() {
    let home = Home::new();
    let project = Project::new();
    let id = ok_in(&home, &project.root, &["workspace", "create", "f"]);
    let id = id.trim();
    let worktree = PathBuf::from(home.ok(&["workspace", "path", "f"]).trim());
    // An unmerged commit on berth's branch, then a detached commit, then uncommitted work
    // (a changed file and an untracked one; an ignored one is not kept).
    commit(&worktree, "branch.txt", "on the branch");
    let branch_tip = git(&worktree, &["rev-parse", "HEAD"]).trim().to_owned();
    // Detached away from the branch, so each holds a commit the other lacks.
    git(
        &worktree,
        &["checkout", "--quiet", "--detach", "origin/main"],
    );
    commit(&worktree, "detached.txt", "on the detached head");
    let head = git(&worktree, &["rev-parse", "HEAD"]).trim().to_owned();
    std::fs::write(worktree.join("README.md"), "changed\n").unwrap();
    std::fs::write(worktree.join("new.txt"), "untracked\n").unwrap();
    std::fs::write(worktree.join(".env"), "ignored\n").unwrap();

    let r = home.run(&["workspace", "delete", "f", "--yes", "--force"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let refname = format!("refs/berth/lost/{id}");
    assert!(
        r.stderr.contains(&refname)
            && r.stderr
                .contains("kept 2 commit(s) and 2 uncommitted file(s)"),
        "the warning names the ref: {}",
        r.stderr
    );
    assert!(!worktree.exists());
    assert_eq!(project.branches(), ["main"], "berth's branch went");
    // Everything is on the ref: the uncommitted files as a commit on the HEAD, whose other
    // parent is the deleted branch's tip.
    let kept = git(&project.root, &["rev-parse", &refname])
        .trim()
        .to_owned();
    assert_eq!(
        git(&project.root, &["rev-parse", &format!("{kept}^1")]).trim(),
        head
    );
    assert_eq!(
        git(&project.root, &["rev-parse", &format!("{kept}^2")]).trim(),
        branch_tip
    );
    assert_eq!(
        git(&project.root, &["show", &format!("{kept}:README.md")]),
        "changed\n"
    );
    assert_eq!(
        git(&project.root, &["show", &format!("{kept}:new.txt")]),
        "untracked\n"
    );
    assert_eq!(
        git(&project.root, &["show", &format!("{kept}:detached.txt")]),
        "on the detached head"
    );
    let tree = git(&project.root, &["ls-tree", "--name-only", &kept]);
    assert!(!tree.contains(".env"), "{tree}");

    // The ref is taken the next time: a second forced delete of a workspace with that id
    // keeps its work beside the first.
    ok_in(
        &home,
        &project.root,
        &["workspace", "create", "f", "--id", id],
    );
    let worktree = PathBuf::from(home.ok(&["workspace", "path", "f"]).trim());
    std::fs::write(worktree.join("again.txt"), "again").unwrap();
    let r = home.run(&["workspace", "delete", "f", "--yes", "--force"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains(&format!("{refname}-2")), "{}", r.stderr);
    assert_eq!(git(&project.root, &["rev-parse", &refname]).trim(), kept);

    // Nothing to lose: a forced delete keeps nothing and says nothing about it.
    ok_in(&home, &project.root, &["workspace", "create", "clean"]);
    let r = home.run(&["workspace", "delete", "clean", "--yes", "--force"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("kept"), "{}", r.stderr);
}

#[test]
fn create_says_where_it_starts_and_warns_of_a_stale_base() {
    let home = Home::new();
    // No origin: the default base is the local main, and the main checkout is on a branch
    // two commits ahead of it.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "-b", "main"]);
    commit(&root, "README.md", "hello\n");
    let main_sha = git(&root, &["rev-parse", "--short", "main"])
        .trim()
        .to_owned();
    git(&root, &["switch", "--quiet", "-c", "work"]);
    commit(&root, "a.txt", "one");
    commit(&root, "b.txt", "two");

    let r = in_dir(&home, &root, &["workspace", "create", "stale"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "on branch berth/stale, starting at main ({main_sha})"
        )),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!(
            "warning: the new branch starts from main ({main_sha}), which is 2 commit(s) behind work"
        )) && r.stderr.contains("pass --base work"),
        "{}",
        r.stderr
    );
    // The warning is only a warning: the workspace is there, on main.
    let wt = PathBuf::from(home.ok(&["workspace", "path", "stale"]).trim());
    assert!(!wt.join("a.txt").exists());

    // A base the person chose, or a branch checked out, is not second-guessed.
    let work_sha = git(&root, &["rev-parse", "--short", "work"])
        .trim()
        .to_owned();
    for (name, args) in [
        ("chosen", vec!["--base", "main"]),
        ("fresh", vec!["--base", "work"]),
        ("existing", vec!["--checkout", "main"]),
    ] {
        let mut all = vec!["workspace", "create", name];
        all.extend(args);
        let r = in_dir(&home, &root, &all);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(!r.stderr.contains("warning"), "{name}: {}", r.stderr);
    }
    let r = in_dir(
        &home,
        &root,
        &["workspace", "create", "again", "--base", "work"],
    );
    assert!(
        r.stderr.contains(&format!("starting at work ({work_sha})")),
        "{}",
        r.stderr
    );

    // With origin: a local main ahead of origin/main (work not pushed yet) is warned of too.
    let project = Project::new();
    commit(&project.root, "local.txt", "not pushed");
    let r = in_dir(&home, &project.root, &["workspace", "create", "unpushed"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("starts from origin/main")
            && r.stderr.contains("1 commit(s) behind main")
            && r.stderr.contains("--base main"),
        "{}",
        r.stderr
    );
}

#[test]
fn checkout_takes_a_remote_branch_as_git_branch_a_shows_it() {
    let home = Home::new();
    let project = Project::new();
    let out = ok_in(
        &home,
        &project.root,
        &[
            "workspace",
            "create",
            "r",
            "--checkout",
            "origin/feature",
            "--json",
        ],
    );
    let ws: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(ws["git"]["branch"], "feature");
    // A local branch tracking origin/feature, made by berth (so removable with the workspace).
    assert_eq!(ws["git"]["branch_created"], true);
    let upstream = git(
        &project.root,
        &["rev-parse", "--abbrev-ref", "feature@{upstream}"],
    );
    assert_eq!(upstream.trim(), "origin/feature");
}

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

#[test]
fn a_create_that_died_midway_is_cleaned_up_by_a_forced_delete() {
    let home = Home::new();
    let project = Project::new();
    ok_in(&home, &project.root, &["workspace", "create", "half"]);
    let wt = PathBuf::from(home.ok(&["workspace", "path", "half"]).trim());
    // What a kill during `git worktree add` can leave: a folder git does not know, with the
    // record already written.
    git(
        &project.root,
        &["worktree", "remove", "--force", wt.to_str().unwrap()],
    );
    std::fs::create_dir_all(wt.join("src")).unwrap();
    std::fs::write(wt.join("src/partial.txt"), "x").unwrap();
    let err = home.fails(&["workspace", "delete", "half", "--yes"]);
    assert!(err.contains("--force"), "{err}");
    home.ok(&["workspace", "delete", "half", "--yes", "--force"]);
    assert!(!wt.exists());
    assert_eq!(project.branches(), ["main"]);
    assert!(
        home.fails(&["workspace", "show", "half"])
            .contains("no workspace")
    );
}

#[test]
fn two_workspaces_of_one_repository_created_at_once() {
    let home = Home::new();
    let project = Project::new();
    let children: Vec<_> = (0..4)
        .map(|i| {
            let mut cmd = home.cmd(&["workspace", "create", &format!("par-{i}")]);
            cmd.current_dir(&project.root)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    let ids: Vec<String> = children.into_iter().map(wait_ok).collect();
    let listed = home.json(&["workspace", "list", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), 4);
    let mut worktrees = project.worktrees();
    worktrees.sort();
    let mut expected: Vec<String> = ids
        .iter()
        .map(|id| {
            home.workspace_dir(id.trim())
                .join("worktree")
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    expected.sort();
    assert_eq!(worktrees, expected);
    for ws in listed.as_array().unwrap() {
        assert_eq!(ws["git_status"]["health"], "ok", "{ws}");
    }
}

#[test]
fn gc_keeps_git_workspaces_that_hold_work() {
    let home = Home::new();
    let project = Project::new();
    let clean = ok_in(&home, &project.root, &["workspace", "create", "clean"]);
    let dirty = ok_in(&home, &project.root, &["workspace", "create", "dirty"]);
    let wt_dirty = PathBuf::from(home.ok(&["workspace", "path", "dirty"]).trim());
    std::fs::write(wt_dirty.join("wip"), "x").unwrap();
    for id in [&clean, &dirty] {
        support::age_workspace(&home, id.trim(), "2000-01-01T00:00:00Z");
    }
    let out = home.json(&["workspace", "gc", "--max-age", "1", "--yes", "--json"]);
    let removed: Vec<_> = out["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(removed, ["clean"]);
    assert_eq!(out["kept"][0]["name"], "dirty");
    assert!(
        out["kept"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("uncommitted"),
        "{out}"
    );
    assert!(wt_dirty.join("wip").exists());
    assert_eq!(project.branches(), ["berth/dirty", "main"]);
    assert_eq!(project.worktrees(), [wt_dirty.to_str().unwrap()]);
}

/// Waits until the repository has `want` spare checkouts ready (the background fill).
fn wait_for_spares(home: &Home, repo: &Path, want: u64) {
    let started = std::time::Instant::now();
    loop {
        let r = in_dir(home, repo, &["workspace", "spares", "--json"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let ready = serde_json::from_str::<serde_json::Value>(&r.stdout).unwrap()["ready"]
            .as_u64()
            .unwrap();
        if ready == want {
            return;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "spares never reached {want} (at {ready})"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
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

#[test]
fn gc_merged_removes_merged_workspaces_and_keeps_those_with_work() {
    let home = Home::new();
    let project = Project::new();
    let create = |name: &str| {
        ok_in(
            &home,
            &project.root,
            &["workspace", "create", name, "--base", "main"],
        );
        PathBuf::from(home.ok(&["workspace", "path", name]).trim())
    };
    let merged = create("merged");
    let unmerged = create("unmerged");
    let dirty = create("dirty");
    let fresh = create("fresh");
    commit(&merged, "a.txt", "merged work\n");
    commit(&unmerged, "b.txt", "unmerged work\n");
    commit(&dirty, "c.txt", "dirty work\n");
    // Two branches merged into main: a fast-forward and a merge commit.
    git(
        &project.root,
        &["merge", "--quiet", "--ff-only", "berth/merged"],
    );
    git(
        &project.root,
        &["merge", "--quiet", "--no-edit", "berth/dirty"],
    );
    std::fs::write(dirty.join("notes.txt"), "not committed\n").unwrap();

    // A dry run names the merged one, keeps the one with uncommitted work, changes nothing;
    // the unmerged one and the one never committed to are not candidates.
    let dry = home.json(&["workspace", "gc", "--merged", "--dry-run", "--json"]);
    assert_eq!(dry["merged"], true);
    assert_eq!(dry["dry_run"], true);
    assert!(dry.get("max_age_days").is_none(), "{dry}");
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|w| w["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&dry["workspaces"]), ["merged"]);
    assert_eq!(names(&dry["kept"]), ["dirty"]);
    assert!(
        dry["kept"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("uncommitted"),
        "{dry}"
    );
    assert!(merged.exists());

    let done = home.json(&["workspace", "gc", "--merged", "--yes", "--json"]);
    assert_eq!(done["dry_run"], false);
    assert_eq!(names(&done["workspaces"]), ["merged"]);
    assert!(!merged.exists());
    for kept in [&unmerged, &dirty, &fresh] {
        assert!(kept.exists(), "{} was removed", kept.display());
    }
    assert!(dirty.join("notes.txt").exists());
    // The merged branch, berth's own and held by main now, is deleted with its worktree.
    assert_eq!(
        project.branches(),
        ["berth/dirty", "berth/fresh", "berth/unmerged", "main"]
    );
    let listed: Vec<String> = home
        .json(&["workspace", "list", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["name"].as_str().map(str::to_owned))
        .collect();
    assert!(!listed.contains(&"merged".to_owned()), "{listed:?}");
    assert_eq!(listed.len(), 3, "{listed:?}");

    // Merged or by age: one or the other.
    let both = home.run(&["workspace", "gc", "--merged", "--max-age", "3"]);
    assert_eq!(both.code, 2, "{}", both.stderr);
}

#[test]
fn list_size_and_show_measure_each_workspaces_disk_use() {
    let home = Home::new();
    let project = Project::new();
    ok_in(&home, &project.root, &["workspace", "create", "tree"]);
    let tree = PathBuf::from(home.ok(&["workspace", "path", "tree"]).trim());
    std::fs::write(tree.join("big.bin"), vec![1u8; 300_000]).unwrap();
    home.ok(&["workspace", "create", "flat", "--plain"]);
    let flat = PathBuf::from(home.ok(&["workspace", "path", "flat"]).trim());
    std::fs::write(flat.join("data.bin"), vec![2u8; 1_000_000]).unwrap();
    // A second name of the same file, and a link to a big file elsewhere, cost nothing more.
    std::fs::hard_link(flat.join("data.bin"), flat.join("again.bin")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("huge.bin"), vec![3u8; 4_000_000]).unwrap();
    std::os::unix::fs::symlink(outside.path().join("huge.bin"), flat.join("link")).unwrap();

    // Not measured unless asked.
    let plain = home.json(&["workspace", "list", "--json"]);
    assert!(
        plain
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["size_bytes"].is_null()),
        "{plain}"
    );
    let sized = home.json(&["workspace", "list", "--size", "--json"]);
    let size_of = |name: &str| {
        sized
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == name)
            .unwrap()["size_bytes"]
            .as_u64()
            .unwrap()
    };
    assert!(size_of("tree") >= 300_000, "{sized}");
    assert!(
        (1_000_000..1_900_000).contains(&size_of("flat")),
        "{}",
        size_of("flat")
    );
    let table = home.ok(&["workspace", "list", "--size"]);
    assert!(table.lines().next().unwrap().contains("SIZE"), "{table}");
    let flat_line = table.lines().find(|l| l.contains("flat")).unwrap();
    assert!(
        flat_line.contains(" MiB") || flat_line.contains(" KiB"),
        "{flat_line}"
    );

    let shown = home.json(&["workspace", "show", "tree", "--json"]);
    assert_eq!(shown["size_bytes"].as_u64().unwrap(), size_of("tree"));
    let text = home.ok(&["workspace", "show", "flat"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("size") && l.contains(&format!("({} bytes)", size_of("flat")))),
        "{text}"
    );
}

#[test]
fn prune_cleans_worktrees_and_records_that_lost_each_other_and_keeps_work() {
    let home = Home::new();
    let project = Project::new();
    let wts = tempfile::tempdir().unwrap();
    let wts_dir = wts.path().canonicalize().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!("[git]\nworktree_dir = \"{}\"\n", wts_dir.display()),
    )
    .unwrap();
    let create = |name: &str| {
        let id = ok_in(
            &home,
            &project.root,
            &["workspace", "create", name, "--base", "main"],
        )
        .trim()
        .to_owned();
        let path = PathBuf::from(home.ok(&["workspace", "path", name]).trim());
        (id, path)
    };
    // Records removed behind berth's back: their worktrees are orphans.
    let (a, orphan_clean) = create("a");
    let (b, orphan_dirty) = create("b");
    let (c, orphan_gone) = create("c");
    std::fs::write(orphan_dirty.join("wip.txt"), "not committed\n").unwrap();
    for id in [&a, &b, &c] {
        std::fs::remove_dir_all(home.workspace_dir(id)).unwrap();
    }
    std::fs::remove_dir_all(&orphan_gone).unwrap();
    // Worktrees removed behind berth's back: their records are stale.
    let (_, gone) = create("d");
    let (_, gone_with_commit) = create("e");
    commit(&gone_with_commit, "e.txt", "only here\n");
    let (_, gone_with_session) = create("f");
    home.ok(&["session", "new", "--workspace", "f", "--title", "keep me"]);
    for path in [&gone, &gone_with_commit, &gone_with_session] {
        std::fs::remove_dir_all(path).unwrap();
    }
    let (_, healthy) = create("g");
    // A person's own worktree inside a plain workspace's folder, where a git workspace's
    // worktree would be: theirs, never an orphan.
    home.ok(&["workspace", "create", "notes", "--plain"]);
    let notes = PathBuf::from(home.ok(&["workspace", "path", "notes"]).trim());
    let theirs = notes.join("worktree");
    git(
        &project.root,
        &[
            "worktree",
            "add",
            "--quiet",
            "-b",
            "mine",
            theirs.to_str().unwrap(),
        ],
    );
    let before = project.worktrees();

    let dry = home.json(&["workspace", "prune", "--dry-run", "--json"]);
    assert_eq!(dry["dry_run"], true);
    let paths = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|w| w["path"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut orphans = vec![
        orphan_clean.to_str().unwrap().to_owned(),
        orphan_gone.to_str().unwrap().to_owned(),
    ];
    orphans.sort();
    assert_eq!(paths(&dry["worktrees"]), orphans, "{dry}");
    let names: Vec<_> = dry["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["d"]);
    let kept: Vec<(String, String)> = dry["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap().to_owned(),
                k["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let reason = |name: &str| {
        kept.iter()
            .find(|(n, _)| n.contains(name))
            .unwrap_or_else(|| panic!("{name} not kept: {kept:?}"))
            .1
            .clone()
    };
    assert!(reason(orphan_dirty.to_str().unwrap()).contains("uncommitted"));
    assert!(reason("e (").contains("1 commit"), "{}", reason("e ("));
    assert!(reason("e (").contains("--force"));
    assert!(reason("f (").contains("1 session(s)"));
    assert_eq!(kept.len(), 3, "{kept:?}");
    // A dry run changes nothing.
    assert!(orphan_clean.exists());
    assert_eq!(project.worktrees(), before);

    let done = home.json(&["workspace", "prune", "--yes", "--json"]);
    assert_eq!(done["dry_run"], false);
    assert_eq!(paths(&done["worktrees"]), orphans);
    assert!(!orphan_clean.exists());
    // Work is where it was.
    assert!(orphan_dirty.join("wip.txt").exists());
    assert!(healthy.exists());
    // git forgot the worktree whose folder was gone and the one removed; it still knows the
    // kept orphan and the healthy one.
    let listed = project.worktrees();
    assert!(!listed.contains(&orphan_clean.to_str().unwrap().to_owned()));
    assert!(!listed.contains(&orphan_gone.to_str().unwrap().to_owned()));
    assert!(listed.contains(&orphan_dirty.to_str().unwrap().to_owned()));
    assert!(listed.contains(&healthy.to_str().unwrap().to_owned()));
    assert!(theirs.join("README.md").exists());
    assert!(
        listed.iter().any(|p| p.ends_with("/worktree")
            && p.contains(notes.file_name().unwrap().to_str().unwrap()))
    );
    // Orphans' branches stay (berth cannot know it made them); d's went with its record; e's
    // commit is still on its branch.
    let branches = project.branches();
    for kept in [
        "berth/a", "berth/b", "berth/c", "berth/e", "berth/f", "berth/g",
    ] {
        assert!(branches.contains(&kept.to_owned()), "{kept}: {branches:?}");
    }
    assert!(!branches.contains(&"berth/d".to_owned()));
    let mut left: Vec<String> = home
        .json(&["workspace", "list", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["name"].as_str().map(str::to_owned))
        .collect();
    left.sort();
    assert_eq!(left, ["e", "f", "g", "notes"]);

    // Nothing left to do.
    let again = home.json(&["workspace", "prune", "--yes", "--json"]);
    assert!(again["worktrees"].as_array().unwrap().is_empty(), "{again}");
    assert!(
        again["workspaces"].as_array().unwrap().is_empty(),
        "{again}"
    );
}
