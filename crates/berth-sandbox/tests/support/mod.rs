//! What the sandbox's integration tests share: a world (a home with secrets, berth's home, a
//! workspace with a git worktree) in a folder no confined process has a private copy of, a
//! confined bash, and the unprivileged user the tests run again as.

#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use berth_core::config::SandboxSettings;
use berth_sandbox::{Place, Policy, Subject};

pub const SCRIPT: &str = include_str!("../../../../tests/sandbox/hostile.sh");

/// The unprivileged user `test.sh` makes for these tests.
pub const TEST_USER: &str = "berth-sandbox-test";
/// Set when this binary is run again as the unprivileged user: the folder to work in.
pub const DIR_VAR: &str = "BERTH_SANDBOX_TEST_DIR";
/// Where the tests' folders go: outside `/tmp` and `/var/tmp` (a confined process has its
/// own of both), and, as root, reachable by the unprivileged user even when the checkout is
/// not (a clone in a folder of mode 700).
pub fn base() -> PathBuf {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    }
    let base = PathBuf::from("/var/lib/berth-sandbox-test");
    std::fs::create_dir_all(&base).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o1777)).unwrap();
    base
}

pub fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

pub struct World {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub user_home: PathBuf,
    pub berth_home: PathBuf,
    pub workspace: PathBuf,
    pub worktree: PathBuf,
}

pub fn world() -> World {
    let parent = std::env::var_os(DIR_VAR)
        .map(PathBuf::from)
        .unwrap_or_else(base);
    let dir = tempfile::Builder::new()
        .prefix("berth-sandbox-test-")
        .tempdir_in(parent)
        .unwrap();
    let root = dir.path().to_owned();
    let user_home = root.join("home");
    std::fs::create_dir_all(user_home.join(".ssh")).unwrap();
    std::fs::write(user_home.join(".ssh/id_ed25519"), "SECRET-SSH-KEY-1\n").unwrap();
    std::fs::write(user_home.join(".netrc"), "SECRET-NETRC-2\n").unwrap();
    let berth_home = root.join("berth");
    let workspace = berth_home.join("workspaces/w1");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(berth_home.join("config.toml"), "# SECRET-CONFIG-3\n").unwrap();
    std::fs::write(workspace.join("config.toml"), "# SECRET-WS-CONFIG-4\n").unwrap();
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("README"), "hi\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "init"]);
    let worktree = workspace.join("worktree");
    git(
        &repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "w1",
            worktree.to_str().unwrap(),
        ],
    );
    std::fs::write(worktree.join("hostile.sh"), SCRIPT).unwrap();
    World {
        _dir: dir,
        root,
        user_home,
        berth_home,
        workspace,
        worktree,
    }
}

impl World {
    /// One process's confinement for `subject` in the worktree, with berth's default policy.
    pub fn confine(&self, subject: &Subject) -> berth_sandbox::Confinement {
        self.confine_with(&SandboxSettings::default(), subject)
    }

    /// The same, with `settings`.
    pub fn confine_with(
        &self,
        settings: &SandboxSettings,
        subject: &Subject,
    ) -> berth_sandbox::Confinement {
        let policy =
            Policy::from_settings(settings, Some(&self.user_home), &self.berth_home).unwrap();
        let place = Place {
            work: self.worktree.clone(),
            cwd: self.worktree.clone(),
            workspace_dir: Some(self.workspace.clone()),
            ports: vec![],
            protect: vec![],
            readable: vec![],
            hidden: vec![],
        };
        policy
            .confine(&place, subject)
            .unwrap()
            .expect("the sandbox is on")
    }
}

/// The user `test.sh` makes, as (uid, gid).
pub fn test_user() -> (u32, u32) {
    let out = Command::new("id").args(["-u", TEST_USER]).output().unwrap();
    assert!(
        out.status.success(),
        "the user {TEST_USER} is missing: ./test.sh makes it (useradd --system {TEST_USER})"
    );
    let uid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let out = Command::new("id").args(["-g", TEST_USER]).output().unwrap();
    let gid: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    (uid, gid)
}

/// Runs `script` in bash, confined for `subject` in the worktree (after `prepare`, which may
/// add its own steps before the confinement's); its success and its output.
pub fn run_confined(
    w: &World,
    subject: &Subject,
    script: &str,
    prepare: impl FnOnce(&mut Command),
) -> (bool, String) {
    let confinement = w.confine(subject);
    let mut cmd = Command::new("bash");
    cmd.args(["-c", script])
        .current_dir(&w.worktree)
        .stdin(Stdio::null());
    prepare(&mut cmd);
    confinement.apply_std(&mut cmd);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{}", confinement.spawn_error("bash", &e)));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

pub fn agent(w: &World) -> Subject {
    Subject::Agent {
        hosts: vec![],
        writable: vec![w.user_home.join(".agent-state")],
        env: vec![],
        program: vec![],
        settings: vec![],
        private: vec![],
    }
}

/// This test binary again, running `test` (an `#[ignore]`d one: it means something only in
/// the environment given), which must pass.
pub fn rerun(test: &str, env: &[(&str, &str)]) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--ignored", "--test-threads=1"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{test} with {env:?}:\n{text}");
    assert!(text.contains("1 passed"), "{test} with {env:?}:\n{text}");
}

/// Whether this test runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `tests` of this test binary again as the unprivileged user, in a folder of its own
/// (the binary copied there: the checkout may be out of its reach); all must pass.
pub fn as_test_user(tests: &[&str]) {
    let (uid, gid) = test_user();
    let dir = tempfile::Builder::new()
        .prefix("berth-sandbox-test-")
        .tempdir_in(base())
        .unwrap();
    let exe = dir.path().join("tests");
    // Copied by another process: a write descriptor of this one, open while a sibling test
    // forks, would be inherited until that child's exec and make ours fail with ETXTBSY.
    let copied = Command::new("cp")
        .arg(std::env::current_exe().unwrap())
        .arg(&exe)
        .status()
        .unwrap()
        .success();
    assert!(copied);
    let ok = Command::new("chown")
        .arg("-R")
        .arg(format!("{uid}:{gid}"))
        .arg(dir.path())
        .status()
        .unwrap()
        .success();
    assert!(ok);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    use std::os::unix::process::CommandExt;
    let out = Command::new(&exe)
        .arg("--exact")
        .args(tests)
        .arg("--test-threads=1")
        .env(DIR_VAR, dir.path())
        .env("HOME", dir.path())
        .uid(uid)
        .gid(gid)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "as {TEST_USER}:\n{text}");
    assert!(
        text.contains(&format!("{} passed", tests.len())),
        "as {TEST_USER}:\n{text}"
    );
}
