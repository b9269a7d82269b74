//! Removing git workspaces through the `berth` binary: delete refuses to lose work unless
//! forced, a forced delete keeps what it would lose on a ref, a create that died midway is
//! cleaned up, and gc and prune keep the workspaces that hold work.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::PathBuf;

use berth_testkit::{commit, git};
use support::Home;
use support::git_project::{Project, ok_in};

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
