//! The real git binary, run the same way by every test.

use std::path::Path;
use std::process::Command;

/// Runs `git <args>` in `dir`, insists it succeeded (panicking with git's stderr if not), and
/// returns its stdout.
///
/// Commits are made as `berth-test <test@berth.invalid>` whatever the machine's git identity,
/// and are never signed. `GIT_DIR`, `GIT_WORK_TREE` and `GIT_INDEX_FILE` are removed, so a test
/// run from a git hook (where they point at the outer repository) works on `dir`'s repository.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=berth-test",
            "-c",
            "user.email=test@berth.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap_or_else(|e| panic!("cannot run git {args:?}: {e}"));
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Writes `text` to `dir/file` (replacing it), then adds and commits that file with `text` as
/// the commit message, on whatever branch `dir` has checked out.
pub fn commit(dir: &Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
    git(dir, &["add", file]);
    git(dir, &["commit", "--quiet", "-m", text]);
}

/// A bare repository `dir/remote.git` with one commit on `main` (made in `dir/seed`, which
/// can push more): a remote that runs fetch from and push to, as a team's would be. Its
/// `file://` URL.
pub fn bare_remote(dir: &Path) -> String {
    let seed = dir.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(&seed, &["init", "--quiet", "-b", "main"]);
    commit(&seed, "README.md", "hello\n");
    let remote = dir.join("remote.git");
    git(
        dir,
        &[
            "clone",
            "--bare",
            "--quiet",
            seed.to_str().unwrap(),
            remote.to_str().unwrap(),
        ],
    );
    format!("file://{}", remote.display())
}
