//! berth's own cold checkout (`fill.rs`) against `git worktree add` on the same commit: the
//! same files, modes, symlinks and index, from packed (deltified) and loose objects; and the
//! cases it leaves to git still come out as git writes them.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure it reports

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use berth_git::{BranchSpec, Repo};
use berth_testkit::{commit, git};

/// Every path under `root` but `.git`: its kind, permission bits and content (a symlink's
/// target).
fn tree_of(root: &Path) -> BTreeMap<PathBuf, (String, u32, Vec<u8>)> {
    let mut found = BTreeMap::new();
    let mut folders = vec![root.to_owned()];
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap() == ".git" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_owned();
            let bits = meta.permissions().mode() & 0o7777;
            let shown = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                (
                    "symlink".to_owned(),
                    0,
                    target.as_os_str().as_bytes().to_vec(),
                )
            } else if meta.is_dir() {
                folders.push(path);
                ("folder".to_owned(), bits, Vec::new())
            } else {
                ("file".to_owned(), bits, std::fs::read(&path).unwrap())
            };
            found.insert(rel, shown);
        }
    }
    found
}

/// A repository whose HEAD has nested folders, an executable, an empty file, symlinks (to a
/// file, to a folder, dangling), names with spaces, UTF-8 and other bytes, `a-b` beside
/// `a/b` (which sort differently as trees and as paths), and a file rewritten over many
/// commits; packed with deltas by `git gc`, then a commit more so some objects are loose.
fn varied_repository(root: &Path) {
    std::fs::create_dir_all(root.join("src/deep/er")).unwrap();
    git(root, &["init", "--quiet", "-b", "main"]);
    let mut long: String = (0..400)
        .map(|i| format!("line {i} of a long file\n"))
        .collect();
    for round in 0..12 {
        long.push_str(&format!("round {round}\n"));
        commit(root, "long.txt", &long);
    }
    std::fs::write(root.join("src/deep/er/leaf.rs"), "fn leaf() {}\n").unwrap();
    std::fs::write(root.join("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(root.join("empty"), "").unwrap();
    std::fs::write(root.join("with space ü.txt"), "spaced\n").unwrap();
    std::fs::write(
        root.join(std::ffi::OsStr::from_bytes(b"bytes-\xff.bin")),
        [0, 1, 2, 255],
    )
    .unwrap();
    std::fs::write(root.join("a-b"), "dash\n").unwrap();
    std::fs::create_dir(root.join("a")).unwrap();
    std::fs::write(root.join("a/b"), "slash\n").unwrap();
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    std::os::unix::fs::symlink("long.txt", root.join("to-file")).unwrap();
    std::os::unix::fs::symlink("src/deep", root.join("to-folder")).unwrap();
    std::os::unix::fs::symlink("../nowhere", root.join("src/dangling")).unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "--quiet", "-m", "many kinds"]);
    git(root, &["gc", "--quiet", "--aggressive"]);
    commit(root, "src/loose.txt", "written after the pack\n");
    long.push_str("after the pack\n");
    commit(root, "long.txt", &long);
}

/// A path as git quotes one past ASCII (`"with \\303\\274"`), back to its bytes.
fn unquoted(shown: &str) -> PathBuf {
    let Some(inner) = shown.strip_prefix('"').and_then(|s| s.strip_suffix('"')) else {
        return PathBuf::from(shown);
    };
    let (mut bytes, mut rest) = (Vec::new(), inner.as_bytes());
    while let Some((&b, tail)) = rest.split_first() {
        match (b, tail) {
            (b'\\', [d0 @ b'0'..=b'7', d1, d2, more @ ..]) => {
                bytes.push((d0 - b'0') * 64 + (d1 - b'0') * 8 + (d2 - b'0'));
                rest = more;
            }
            (b'\\', [c, more @ ..]) => {
                bytes.push(*c);
                rest = more;
            }
            _ => {
                bytes.push(b);
                rest = tail;
            }
        }
    }
    PathBuf::from(std::ffi::OsStr::from_bytes(&bytes))
}

#[test]
fn a_cold_create_writes_what_git_worktree_add_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    varied_repository(&root);
    let count = git(&root, &["count-objects", "-v"]);
    assert!(
        count.contains("in-pack: ") && !count.contains("\ncount: 0\n"),
        "packed and loose: {count}"
    );
    let repo = Repo::discover(&root).unwrap();
    let berths = tmp.path().join("berths");
    repo.add_worktree(&berths, &BranchSpec::New("berth/a".into()), None)
        .unwrap();
    let gits = tmp.path().join("gits");
    git(
        &root,
        &[
            "worktree",
            "add",
            "--quiet",
            "-b",
            "plain",
            gits.to_str().unwrap(),
            "main",
        ],
    );

    // Written by berth: git's checkout leaves a cache-tree extension in the index, berth's
    // index has none.
    let index = git(&berths, &["rev-parse", "--git-path", "index"]);
    let index = std::fs::read(berths.join(index.trim())).unwrap();
    assert!(
        !index.windows(4).any(|w| w == b"TREE"),
        "berth wrote the index"
    );

    assert_eq!(tree_of(&berths), tree_of(&gits));
    assert_eq!(
        git(&berths, &["ls-files", "-s"]),
        git(&gits, &["ls-files", "-s"])
    );
    assert_eq!(git(&berths, &["status", "--porcelain"]), "");
    // Each entry's stat data is the file's own: git trusts it without reading the file.
    let debug = git(&berths, &["ls-files", "--debug"]);
    let mut checked = 0;
    let mut lines = debug.lines().peekable();
    while let Some(path) = lines.next() {
        let mut fields = BTreeMap::new();
        while let Some(line) = lines.next_if(|l| l.starts_with("  ")) {
            for field in line.trim().split('\t') {
                let (key, value) = field.split_once(": ").unwrap();
                fields.insert(key.to_owned(), value.to_owned());
            }
        }
        let path = unquoted(path);
        let meta = std::fs::symlink_metadata(berths.join(&path)).unwrap();
        let at = |s: i64, ns: i64| format!("{s}:{ns}");
        assert_eq!(
            fields["mtime"],
            at(meta.mtime(), meta.mtime_nsec()),
            "{path:?}"
        );
        assert_eq!(
            fields["ctime"],
            at(meta.ctime(), meta.ctime_nsec()),
            "{path:?}"
        );
        assert_eq!(fields["ino"], meta.ino().to_string(), "{path:?}");
        assert_eq!(fields["size"], meta.size().to_string(), "{path:?}");
        checked += 1;
    }
    assert_eq!(checked, 13, "every entry's stat data checked: {debug}");
    // The index is git's to use: a change shows, and commits.
    std::fs::write(
        berths.join("src/deep/er/leaf.rs"),
        "fn leaf() { changed() }\n",
    )
    .unwrap();
    assert_eq!(
        git(&berths, &["status", "--porcelain"]),
        " M src/deep/er/leaf.rs\n"
    );
    git(&berths, &["commit", "--quiet", "-am", "changed"]);
    assert_eq!(git(&berths, &["status", "--porcelain"]), "");
}

#[test]
fn line_endings_asked_by_attributes_are_written_by_git_checkout() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "-b", "main"]);
    std::fs::write(root.join(".gitattributes"), "*.txt eol=crlf\n").unwrap();
    git(&root, &["add", ".gitattributes"]);
    commit(&root, "notes.txt", "one\ntwo\n");
    let repo = Repo::discover(&root).unwrap();
    let wt = tmp.path().join("wt");
    repo.add_worktree(&wt, &BranchSpec::New("berth/a".into()), None)
        .unwrap();
    assert_eq!(
        std::fs::read(wt.join("notes.txt")).unwrap(),
        b"one\r\ntwo\r\n"
    );
    assert_eq!(git(&wt, &["status", "--porcelain"]), "");
}

#[test]
fn a_config_that_turns_off_symlinks_is_left_to_git() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir(&root).unwrap();
    git(&root, &["init", "--quiet", "-b", "main"]);
    std::os::unix::fs::symlink("target.txt", root.join("link")).unwrap();
    commit(&root, "target.txt", "aimed at\n");
    git(&root, &["add", "link"]);
    git(&root, &["commit", "--quiet", "-m", "link"]);
    git(&root, &["config", "core.symlinks", "false"]);
    let repo = Repo::discover(&root).unwrap();
    let wt = tmp.path().join("wt");
    repo.add_worktree(&wt, &BranchSpec::New("berth/a".into()), None)
        .unwrap();
    // As git writes a symlink with core.symlinks off: a plain file holding its target.
    let meta = std::fs::symlink_metadata(wt.join("link")).unwrap();
    assert!(meta.is_file());
    assert_eq!(std::fs::read(wt.join("link")).unwrap(), b"target.txt");
    assert_eq!(git(&wt, &["status", "--porcelain"]), "");
}
