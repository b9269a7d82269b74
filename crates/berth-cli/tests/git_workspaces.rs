//! Git workspaces through the `berth` binary, against real repositories in temp dirs: every
//! branch option, base detection, copy and setup, rollback of a failed create, two creates at
//! once, and the disk use that list and show measure. Removal, moved repositories and spare
//! checkouts have files of their own (`git_workspaces_*.rs`).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::{commit, git, wait_ok};
use support::Home;
use support::git_project::{Project, assert_nothing_left, fails_in, in_dir, ok_in};

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
