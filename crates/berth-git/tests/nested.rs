//! berth's own git runs nothing from a workspace (issue 44, item 9). An agent can make a git
//! repository inside its worktree and write that repository's config: a filter or a textconv
//! driver there is a command, which git runs whenever it looks inside the nested repository
//! (a `git status` of the outer one does, for a gitlink, as does `git add --all`). Each test
//! plants what an agent could, shows plain git running it, then has berth's git do its work
//! and finds that nothing ran.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::path::{Path, PathBuf};

use berth_git::{BranchSpec, MergeMode, MergeRequest, Repo, WorktreeRef, commit_all, diff};
use berth_testkit::{commit, dirty, git, plant_nested_repository};

/// A repository on `main` (with a git identity of its own, which merges commit with) and a
/// worktree on `berth/w`, started from `main`; and a marker file that the planted commands
/// append their names to.
struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    wt: PathBuf,
    repo: Repo,
    marker: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "-b", "main"]);
    git(&root, &["config", "user.name", "berth-test"]);
    git(&root, &["config", "user.email", "test@berth.invalid"]);
    commit(&root, "shared.txt", "one\ntwo\n");
    let repo = Repo::discover(&root).unwrap();
    let wt = tmp.path().join("wt");
    repo.add_worktree(&wt, &BranchSpec::New("berth/w".into()), Some("main"))
        .unwrap();
    let marker = tmp.path().join("ran");
    Setup {
        _tmp: tmp,
        root,
        wt,
        repo,
        marker,
    }
}

impl Setup {
    fn wt_ref(&self) -> WorktreeRef<'_> {
        WorktreeRef {
            path: &self.wt,
            branch: "berth/w",
            base_branch: "main",
            branch_created: true,
        }
    }

    /// What ran since the last look (the planted commands' names), and a fresh start.
    fn ran(&self) -> String {
        let ran = std::fs::read_to_string(&self.marker).unwrap_or_default();
        let _ = std::fs::remove_file(&self.marker);
        ran
    }

    /// Insists nothing planted ran during `what`.
    fn nothing_ran(&self, what: &str) {
        let ran = self.ran();
        assert!(
            ran.is_empty(),
            "{what} ran what the workspace planted: {ran}"
        );
    }

    /// What an agent can do in its worktree: a repository of its own at `wt/<path>`, with a
    /// commit, a filter and a textconv driver in its config selected for every file by its
    /// `.gitattributes`, and a file changed since (same size, an old time), so that any git
    /// looking at that repository's files must run them through the filter.
    fn plant(&self, path: &str) -> PathBuf {
        self.plant_in(&self.wt, path)
    }

    /// [`Setup::plant`] in the worktree at `wt`.
    fn plant_in(&self, wt: &Path, path: &str) -> PathBuf {
        plant_nested_repository(wt, path, &self.marker)
    }
}

fn request<'a>(wt: &'a Path, mode: MergeMode) -> MergeRequest<'a> {
    MergeRequest {
        work: berth_git::Work::Worktree(wt),
        into: "main",
        mode,
        uncommitted_message: "berth: the workspace's uncommitted work",
        message: "Merge workspace w",
    }
}

fn rev(dir: &Path, rev: &str) -> String {
    git(dir, &["rev-parse", rev]).trim().to_owned()
}

/// The issue's attack: the nested repository was committed as a gitlink (as berth's merge did
/// before it refused them), and `.gitmodules` asks git to look inside it (`ignore = none`
/// overrides any config). Plain `git status` runs the nested filter; berth's status, review,
/// diff, lost-work check, keeping, merge and commit do not.
#[test]
fn nothing_runs_from_a_repository_committed_inside_the_worktree() {
    let s = setup();
    let nested = s.plant("sub");
    std::fs::write(
        s.wt.join(".gitmodules"),
        "[submodule \"sub\"]\n\tpath = sub\n\turl = ./sub\n\tignore = none\n",
    )
    .unwrap();
    git(&s.wt, &["add", "sub", ".gitmodules"]);
    git(&s.wt, &["commit", "--quiet", "-m", "a gitlink"]);
    let _ = s.ran();
    dirty(&nested.join("file"));
    git(&s.wt, &["status", "--porcelain"]);
    assert!(
        s.ran().contains("clean"),
        "plain git status runs the nested filter"
    );
    dirty(&nested.join("file"));
    std::fs::write(s.wt.join("notes.md"), "mine\n").unwrap();

    let status = s.repo.status(s.wt_ref());
    s.nothing_ran("status");
    assert_eq!(status.changed_files, Some(1), "{status:?}");
    assert_eq!(
        berth_git::changed_paths(&s.wt).unwrap(),
        ["?? notes.md"],
        "a nested repository's own changes are not looked for"
    );
    s.nothing_ran("changed_paths");
    let d = diff(&s.wt, "main", true).unwrap();
    s.nothing_ran("diff");
    let files: Vec<&str> = d.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, [".gitmodules", "notes.md", "sub"]);
    assert!(
        d.patch.unwrap().contains("+Subproject commit"),
        "a gitlink shows as its commit"
    );
    let err = s.repo.check_removable(s.wt_ref()).unwrap_err();
    s.nothing_ran("check_removable");
    assert!(err.to_string().contains("1 uncommitted change"), "{err}");
    let kept = s
        .repo
        .keep_lost_work(s.wt_ref(), "refs/berth/lost/w")
        .unwrap()
        .unwrap();
    s.nothing_ran("keep_lost_work");
    assert_eq!(
        git(&s.root, &["ls-tree", "--name-only", &kept.refname]),
        ".gitmodules\nnotes.md\nshared.txt\nsub\n"
    );

    let merged = s.repo.merge(&request(&s.wt, MergeMode::Merge)).unwrap();
    s.nothing_ran("merge");
    assert!(merged.uncommitted_commit.is_some());
    assert_eq!(rev(&s.root, "main"), merged.after);
    s.repo.status(s.wt_ref());
    berth_git::changed_paths(&s.wt).unwrap();
    diff(&s.wt, "main", false).unwrap();
    s.nothing_ran("status, changed_paths and diff after the merge");

    std::fs::write(s.wt.join("more.md"), "more\n").unwrap();
    let committed = commit_all(&s.wt, "berth: more").unwrap();
    s.nothing_ran("commit_all");
    assert!(committed.is_some());
    assert_eq!(
        git(&s.wt, &["ls-tree", "--name-only", "HEAD", "sub"]),
        "sub\n",
        "the gitlink stays as it was"
    );
}

/// A folder with its own `.git` that the work would add as a gitlink (a link to a commit that
/// no one else has, not its files) is refused by the steps that commit the work, naming it
/// and saying what to do; a diff leaves it out. An ignored one is no part of the work.
#[test]
fn merge_and_commit_all_refuse_an_embedded_repository_naming_it() {
    let s = setup();
    s.plant("deps/tool");
    // One with no commit at all, which git add would fail on with a message of its own.
    git(&s.wt, &["init", "--quiet", "empty"]);
    std::fs::write(s.wt.join("notes.md"), "mine\n").unwrap();
    let main = rev(&s.root, "main");
    let head = rev(&s.wt, "HEAD");
    let before = git(&s.wt, &["status", "--porcelain"]);

    let err = s.repo.merge(&request(&s.wt, MergeMode::Merge)).unwrap_err();
    s.nothing_ran("merge");
    let text = err.to_string();
    assert!(
        text.contains("deps/tool") && text.contains("empty") && text.contains(".gitignore"),
        "{text}"
    );
    assert_eq!(rev(&s.root, "main"), main, "nothing was merged");
    assert_eq!(rev(&s.wt, "HEAD"), head);
    assert_eq!(git(&s.wt, &["status", "--porcelain"]), before);

    let err = commit_all(&s.wt, "berth: the work").unwrap_err();
    s.nothing_ran("commit_all");
    assert!(err.to_string().contains("deps/tool"), "{err}");
    assert_eq!(rev(&s.wt, "HEAD"), head, "nothing was committed");
    assert_eq!(git(&s.wt, &["diff", "--cached", "--name-only"]), "");

    let d = diff(&s.wt, "main", false).unwrap();
    s.nothing_ran("diff");
    let files: Vec<&str> = d.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, ["notes.md"]);

    // What the refusal suggests: ignored, they are no part of the work.
    std::fs::write(s.wt.join(".gitignore"), "deps/tool/\nempty/\n").unwrap();
    let merged = s.repo.merge(&request(&s.wt, MergeMode::Merge)).unwrap();
    s.nothing_ran("merge");
    assert_eq!(
        git(&s.root, &["ls-tree", "-r", "--name-only", &merged.after]),
        ".gitignore\nnotes.md\nshared.txt\n"
    );
}

/// A diff driver of the repository's own config, which the worktree's `.gitattributes` (the
/// agent's) selects: plain `git diff` runs its textconv and its command; berth's diff runs
/// neither, nor `diff.external`.
#[test]
fn diffs_run_no_textconv_or_external_diff_the_worktree_selects() {
    let s = setup();
    let m = s.marker.display();
    for (key, value) in [
        ("diff.x.textconv", format!("echo textconv >> '{m}'; cat")),
        ("diff.x.command", format!("echo command >> '{m}'; true")),
        ("diff.external", format!("echo external >> '{m}'; true")),
    ] {
        git(&s.root, &["config", key, &value]);
    }
    // Where each diff reads attributes from: the worktree, and the checkout of diff_refs.
    std::fs::write(s.wt.join(".gitattributes"), "*.txt diff=x\n").unwrap();
    std::fs::write(s.root.join(".gitattributes"), "*.txt diff=x\n").unwrap();
    commit(&s.wt, "committed.txt", "c\n");
    std::fs::write(s.wt.join("shared.txt"), "one\nTWO\n").unwrap();
    for dir in [&s.wt, &s.root] {
        git(dir, &["diff", "main", "berth/w"]);
        git(dir, &["diff", "--no-ext-diff", "main", "berth/w"]);
        let ran = s.ran();
        assert!(
            ran.contains("command") && ran.contains("textconv"),
            "plain git diff runs them: {ran}"
        );
    }

    let d = diff(&s.wt, "main", true).unwrap();
    s.nothing_ran("diff");
    assert!(d.patch.unwrap().contains("+TWO"));
    let d = berth_git::diff_refs(&s.root, "main", "berth/w", true).unwrap();
    s.nothing_ran("diff_refs");
    assert!(d.patch.unwrap().contains("+c"));
}

/// A submodule checked out from the repository's own module store is still looked inside for
/// uncommitted work (its git folder is the repository's, which an agent cannot write); once
/// the agent swaps its `.git` for a repository of its own, it is not.
#[test]
fn only_a_submodule_whose_git_folder_is_the_repositorys_is_looked_inside() {
    let s = setup();
    let lib = s.root.parent().unwrap().join("lib");
    std::fs::create_dir(&lib).unwrap();
    git(&lib, &["init", "--quiet", "-b", "main"]);
    commit(&lib, "lib.txt", "lib\n");
    let url = lib.to_str().unwrap();
    git(
        &s.root,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "--quiet",
            url,
            "lib",
        ],
    );
    git(&s.root, &["commit", "--quiet", "-m", "add lib"]);
    let wt = s.root.parent().unwrap().join("wt-lib");
    s.repo
        .add_worktree(&wt, &BranchSpec::New("berth/lib".into()), Some("main"))
        .unwrap();
    assert_eq!(s.repo.init_submodules(&wt).unwrap(), ["lib"]);
    let recorded = WorktreeRef {
        path: &wt,
        branch: "berth/lib",
        base_branch: "main",
        branch_created: true,
    };
    assert_eq!(s.repo.status(recorded).changed_files, Some(0));

    std::fs::write(wt.join("lib/lib.txt"), "changed\n").unwrap();
    assert_eq!(s.repo.status(recorded).changed_files, Some(1));
    assert_eq!(berth_git::changed_paths(&wt).unwrap(), [" M lib"]);
    let err = s.repo.check_removable(recorded).unwrap_err();
    assert!(err.to_string().contains("1 uncommitted change"), "{err}");

    // The agent's own repository in its place: plain git status runs its filter, berth's
    // does not look inside.
    std::fs::remove_file(wt.join("lib/.git")).unwrap();
    s.plant_in(&wt, "lib");
    git(&wt, &["status", "--porcelain"]);
    assert!(s.ran().contains("clean"), "plain git status looks inside");
    dirty(&wt.join("lib/file"));
    s.repo.status(recorded);
    berth_git::changed_paths(&wt).unwrap();
    let _ = s.repo.check_removable(recorded);
    s.nothing_ran("status, changed_paths and check_removable");
}
