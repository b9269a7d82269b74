//! berth's own git runs nothing from a workspace (issue 44, item 9), through the binary. An
//! agent makes a git repository inside its worktree (`git init sub`) and writes that
//! repository's config: `[filter "x"] clean = <a command>`, selected by `sub/.gitattributes`.
//! Git runs that command whenever it looks inside the nested repository: a `git status` of the
//! worktree does once the repository is committed as a gitlink, and so does `git add --all`.
//! Here the test plants it as the agent would have, and `workspace list`, `show`, `diff`,
//! `merge`, `delete` and `run compare` must leave the marker the command would write
//! unwritten; the merge of a new embedded repository is refused, naming it.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

mod support;

use std::path::{Path, PathBuf};

use berth_testkit::provider_server::{ProviderServer, Reply, Turn};
use berth_testkit::{Run, dirty, git, plant_nested_repository, run};
use support::Home;
use support::runs::{berth_run, events, project, write_call};

fn berth(home: &Home, dir: &Path, args: &[&str]) -> Run {
    let mut cmd = home.cmd(args);
    cmd.current_dir(dir);
    run(cmd)
}

/// A git workspace `name` of the repository at `root`; its worktree.
fn workspace(home: &Home, root: &Path, name: &str) -> PathBuf {
    let r = berth(home, root, &["workspace", "create", name, "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ws: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    PathBuf::from(ws["git"]["worktree"].as_str().unwrap())
}

/// The file the planted commands write; what they wrote, each look starting afresh.
struct Marker(PathBuf);

impl Marker {
    fn ran(&self) -> String {
        let ran = std::fs::read_to_string(&self.0).unwrap_or_default();
        let _ = std::fs::remove_file(&self.0);
        ran
    }

    fn nothing_ran(&self, what: &str) {
        let ran = self.ran();
        assert!(ran.is_empty(), "{what} ran what the agent planted: {ran}");
    }
}

/// What an agent can do in its worktree (berth-testkit's plant), with `marker` as its witness.
fn plant(wt: &Path, path: &str, marker: &Marker) -> PathBuf {
    plant_nested_repository(wt, path, &marker.0)
}

/// The nested repository committed on the worktree's branch as a gitlink (what `workspace
/// merge` did with it before it refused them), and `.gitmodules` asking git to look inside
/// it (`ignore = none` beats any config); plain `git status` then runs the filter.
fn commit_gitlink(wt: &Path, nested: &Path, marker: &Marker) {
    std::fs::write(
        wt.join(".gitmodules"),
        "[submodule \"sub\"]\n\tpath = sub\n\turl = ./sub\n\tignore = none\n",
    )
    .unwrap();
    git(wt, &["add", "sub", ".gitmodules"]);
    git(wt, &["commit", "--quiet", "-m", "sub"]);
    marker.ran();
    dirty(&nested.join("file"));
    git(wt, &["status", "--porcelain"]);
    assert!(
        marker.ran().contains("clean"),
        "plain git status runs the nested filter"
    );
    dirty(&nested.join("file"));
}

/// A repository with one commit on `main` and an identity of its own, which merges commit
/// with; the temp folder holding it.
fn repository() -> (tempfile::TempDir, PathBuf) {
    let (tmp, root) = project();
    git(&root, &["config", "user.name", "berth-test"]);
    git(&root, &["config", "user.email", "test@berth.invalid"]);
    (tmp, root)
}

fn rev(dir: &Path, rev: &str) -> String {
    git(dir, &["rev-parse", rev]).trim().to_owned()
}

/// The read-only commands, each of which runs git over the worktree.
fn look(home: &Home, marker: &Marker) {
    for args in [
        &["workspace", "list"][..],
        &["workspace", "list", "--json"],
        &["workspace", "show", "feat"],
        &["workspace", "show", "feat", "--json"],
        &["workspace", "diff", "feat"],
        &["workspace", "diff", "feat", "--stat"],
        &["workspace", "diff", "feat", "--json"],
    ] {
        home.ok(args);
        marker.nothing_ran(&format!("berth {}", args.join(" ")));
    }
}

#[test]
fn a_new_embedded_repository_is_refused_by_merge_and_never_run() {
    let home = Home::new();
    let (tmp, root) = repository();
    let marker = Marker(tmp.path().join("ran"));
    let wt = workspace(&home, &root, "feat");
    std::fs::write(wt.join("notes.md"), "mine\n").unwrap();
    plant(&wt, "sub", &marker);
    look(&home, &marker);
    let main = rev(&root, "main");
    let status = git(&wt, &["status", "--porcelain"]);

    let r = berth(&home, &root, &["workspace", "merge", "feat"]);
    marker.nothing_ran("berth workspace merge");
    assert_eq!(r.code, 4, "refused: {}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("sub") && r.stderr.contains(".gitignore"),
        "{}",
        r.stderr
    );
    assert_eq!(rev(&root, "main"), main, "nothing was merged");
    assert_eq!(git(&wt, &["status", "--porcelain"]), status);
    look(&home, &marker);

    // As the refusal says: ignored, it is no part of the work.
    std::fs::write(wt.join(".gitignore"), "sub/\n").unwrap();
    let r = berth(&home, &root, &["workspace", "merge", "feat"]);
    marker.nothing_ran("berth workspace merge");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        git(&root, &["ls-tree", "--name-only", "main"]),
        ".gitignore\nREADME.md\nnotes.md\n"
    );
    look(&home, &marker);
}

/// The sequence: the nested repository is already on the branch as a gitlink. Every
/// command that runs git over the worktree, the merge (which brings the gitlink into the base
/// and its checkout) and the delete included, runs nothing from it.
#[test]
fn a_committed_nested_repository_is_never_looked_into() {
    let home = Home::new();
    let (tmp, root) = repository();
    let marker = Marker(tmp.path().join("ran"));
    let wt = workspace(&home, &root, "feat");
    let nested = plant(&wt, "sub", &marker);
    commit_gitlink(&wt, &nested, &marker);
    std::fs::write(wt.join("notes.md"), "mine\n").unwrap();
    look(&home, &marker);
    let shown = home.json(&["workspace", "show", "feat", "--json"]);
    assert_eq!(shown["git_status"]["changed_files"], 1, "{shown:#}");

    let r = berth(&home, &root, &["workspace", "merge", "feat"]);
    marker.nothing_ran("berth workspace merge");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        git(&root, &["ls-tree", "--name-only", "main"]),
        ".gitmodules\nREADME.md\nnotes.md\nsub\n"
    );
    dirty(&nested.join("file"));
    look(&home, &marker);
    home.ok(&["workspace", "delete", "feat", "--yes"]);
    marker.nothing_ran("berth workspace delete");
    assert!(!wt.exists());
}

/// `berth run compare` reads each agent's worktree the way `workspace diff` does.
#[test]
fn run_compare_runs_nothing_from_an_agents_worktree() {
    let home = Home::new();
    let server = ProviderServer::start_in_background();
    let (tmp, root) = project();
    let marker = Marker(tmp.path().join("ran"));
    server.push(Reply::anthropic(&write_call("from an agent\n")));
    server.push(Reply::anthropic(&Turn::new().text(["Done."])));
    let r = run(berth_run(
        &home,
        &server,
        &root,
        &["Write out.txt", "--allow", "write_file", "--json"],
    ));
    assert_eq!(r.code, 0, "{}\n{}", r.stderr, r.stdout);
    let events = events(&r.stdout);
    let started = events.iter().find(|e| e["event"] == "started").unwrap();
    let wt = PathBuf::from(started["worktree"].as_str().unwrap());
    let nested = plant(&wt, "sub", &marker);
    commit_gitlink(&wt, &nested, &marker);

    let runs = home.json(&["run", "list", "--json"]);
    let id = runs[0]["id"].as_str().unwrap();
    let compared = home.json(&["run", "compare", id, "--json"]);
    marker.nothing_ran("berth run compare --json");
    let files: Vec<&str> = compared["agents"][0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, [".gitmodules", "out.txt", "sub"], "{compared:#}");
    dirty(&nested.join("file"));
    home.ok(&["run", "compare", id]);
    marker.nothing_ran("berth run compare");
}

/// A diff driver of the repository's own config, selected by the worktree's `.gitattributes`
/// (which the agent writes): plain `git diff` runs its textconv and its command, berth's diff
/// neither.
#[test]
fn workspace_diff_runs_no_textconv_or_external_diff() {
    let home = Home::new();
    let (tmp, root) = project();
    let marker = Marker(tmp.path().join("ran"));
    let m = marker.0.display();
    git(
        &root,
        &[
            "config",
            "diff.x.textconv",
            &format!("echo textconv >> '{m}'; cat"),
        ],
    );
    git(
        &root,
        &[
            "config",
            "diff.x.command",
            &format!("echo command >> '{m}'; true"),
        ],
    );
    let wt = workspace(&home, &root, "feat");
    std::fs::write(wt.join(".gitattributes"), "* diff=x\n").unwrap();
    std::fs::write(wt.join("README.md"), "hello\nagain\n").unwrap();
    git(&wt, &["diff"]);
    git(&wt, &["diff", "--no-ext-diff"]);
    let ran = marker.ran();
    assert!(
        ran.contains("command") && ran.contains("textconv"),
        "plain git diff runs them: {ran}"
    );
    look(&home, &marker);
    let patch = home.ok(&["workspace", "diff", "feat"]);
    assert!(patch.contains("+again"), "{patch}");
}
