//! A git project for the git-workspace tests: a clone with an upstream, and `berth` run inside
//! its checkout, shared by the `git_workspaces*.rs` files.

use std::path::{Path, PathBuf};

use berth_testkit::{Run, commit, git, run};

use super::Home;

/// A project cloned from an upstream that has `main` and `feature`, so the clone has
/// `origin/HEAD`, and an ignored `.env` in the main checkout.
pub struct Project {
    pub _tmp: tempfile::TempDir,
    pub root: PathBuf,
}

impl Project {
    pub fn new() -> Project {
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

    pub fn branches(&self) -> Vec<String> {
        git(&self.root, &["branch", "--format=%(refname:short)"])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Worktree paths git knows about, the main checkout excluded.
    pub fn worktrees(&self) -> Vec<String> {
        git(&self.root, &["worktree", "list", "--porcelain"])
            .lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .filter(|p| Path::new(p) != self.root)
            .map(str::to_owned)
            .collect()
    }
}

/// `berth ARGS` run inside `dir`.
pub fn in_dir(home: &Home, dir: &Path, args: &[&str]) -> Run {
    let mut cmd = home.cmd(args);
    cmd.current_dir(dir);
    run(cmd)
}

pub fn ok_in(home: &Home, dir: &Path, args: &[&str]) -> String {
    let r = in_dir(home, dir, args);
    assert_eq!(r.code, 0, "berth {args:?} failed: {}", r.stderr);
    r.stdout
}

pub fn fails_in(home: &Home, dir: &Path, args: &[&str]) -> String {
    let r = in_dir(home, dir, args);
    assert_ne!(
        r.code, 0,
        "berth {args:?} should fail; printed {}",
        r.stdout
    );
    r.stderr
}

/// Workspace folders in the home (berth's hidden staging and trash excluded).
pub fn workspace_folders(home: &Home) -> Vec<String> {
    match std::fs::read_dir(home.path().join("workspaces")) {
        Ok(dir) => dir
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Nothing of a failed create is left: no record, folder, worktree or branch.
pub fn assert_nothing_left(home: &Home, project: &Project, branches_before: &[String]) {
    assert_eq!(
        home.json(&["workspace", "list", "--json"]),
        serde_json::json!([])
    );
    assert_eq!(workspace_folders(home), Vec::<String>::new());
    assert_eq!(project.worktrees(), Vec::<String>::new());
    assert_eq!(project.branches(), branches_before);
}

/// Waits until the repository has `want` spare checkouts ready (the background fill).
pub fn wait_for_spares(home: &Home, repo: &Path, want: u64) {
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
