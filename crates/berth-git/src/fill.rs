//! A cold checkout by berth itself: the files of a worktree `git worktree add --no-checkout`
//! made, written from the object database by one writer per core, and the index git would
//! have written for them. Git's own checkout inflates every blob with zlib on one thread (its
//! parallel checkout spreads the writes, not the whole cost); here libdeflate inflates them,
//! each writer takes the next file as it frees up, and nothing is looked up twice: no `lstat`
//! before a create, no hook, no refresh of the index after (benches/git_worktrees.rs and
//! docs/benchmarks.md say by how much).
//!
//! It writes exactly what git's checkout writes, or leaves the whole checkout to git: any
//! attribute file (which could ask for line-ending conversion or a filter), a config that
//! changes what a checkout writes (`core.autocrlf`, `core.eol`, `core.symlinks`,
//! `core.fileMode`, `core.ignoreCase`, a sparse checkout, another object format), replace refs,
//! alternates, a submodule, a path git might refuse, or an object this reader cannot find.
//! Those are all decided before the first file is written. Files are made with `O_EXCL` and
//! `O_NOFOLLOW` inside folders made here, so nothing is written outside the worktree.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::command::{git_output, run};
use crate::index_file::{IndexEntry, StatData};
use crate::objects::{Damaged, Location, ObjectId, ObjectStore, parse_hex};
use crate::{GitError, Result};

/// What became of a fill.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Filled {
    /// Every file and the index are written.
    Written,
    /// Nothing was written (or, after damage found in the object database or a path the
    /// filesystem refused, only some files): git's own checkout must do it, over them. The
    /// reason is for the log.
    LeftToGit(String),
}

/// One file of the tree to write.
struct TreeFile {
    path: Vec<u8>,
    mode: u32,
    id: ObjectId,
    at: Location,
}

const SYMLINK: u32 = 0o120000;

/// Writes every file of HEAD into the worktree at `worktree` (made with `--no-checkout`: no
/// file and no index yet) and its index, or says why git must. `common` is the repository's
/// git folder (objects, refs).
pub(crate) fn fill(worktree: &Path, common: &Path) -> Result<Filled> {
    if let Some(why) =
        config_changes_checkout(worktree)?.or_else(|| repository_changes_objects(common))
    {
        return Ok(Filled::LeftToGit(why));
    }
    // As bytes: a path need not be UTF-8.
    let listed = git_output(worktree, ["ls-tree", "-r", "-z", "--full-tree", "HEAD"])?;
    if !listed.status.success() {
        return Err(GitError::Command {
            command: "ls-tree -r -z --full-tree HEAD".to_owned(),
            message: String::from_utf8_lossy(&listed.stderr).trim().to_owned(),
        });
    }
    let Some(store) = ObjectStore::open(&common.join("objects")) else {
        return Ok(Filled::LeftToGit(
            "a pack this reader does not read".to_owned(),
        ));
    };
    let (files, folders) = match plan(&listed.stdout, &store) {
        Ok(planned) => planned,
        Err(why) => return Ok(Filled::LeftToGit(why)),
    };
    let index = git_dir_of(worktree)?.join("index");
    // A folder or a file this filesystem refuses, or folds onto another (on a case-insensitive
    // one, `README` beside `readme`), is left to git's checkout too: it writes over what was
    // written here, and says which paths collided.
    for folder in &folders {
        let path = worktree.join(OsStr::from_bytes(folder));
        if let Err(e) = std::fs::create_dir(&path) {
            return Ok(Filled::LeftToGit(format!(
                "cannot make the folder {}: {e}",
                path.display()
            )));
        }
    }
    let stats = match write_files(worktree, &store, &files) {
        Ok(Ok(stats)) => stats,
        Ok(Err(damaged)) => return Ok(Filled::LeftToGit(damaged.to_string())),
        Err(refused) => return Ok(Filled::LeftToGit(refused.to_string())),
    };
    let entries: Vec<IndexEntry> = files
        .into_iter()
        .zip(stats)
        .map(|(f, stat)| IndexEntry {
            path: f.path,
            mode: f.mode,
            id: f.id,
            stat,
        })
        .collect();
    crate::index_file::write(&index, &entries).map_err(|source| GitError::Io {
        context: format!("cannot write the index {}", index.display()),
        source,
    })?;
    Ok(Filled::Written)
}

/// A config setting under which git's checkout writes something other than the blobs as they
/// are, or reads attributes from a file; `None` when there is none. `git var -l` gives the
/// config as git sees it in this worktree (system, global, repository, worktree, command
/// line) and where git looks for system and global attributes.
fn config_changes_checkout(worktree: &Path) -> Result<Option<String>> {
    let listed = run(worktree, ["var", "-l"])?;
    let mut config: HashMap<&str, &str> = HashMap::new();
    for line in listed.lines() {
        if let Some((key, value)) = line.split_once('=') {
            config.insert(key, value);
        }
    }
    let is_false = |v: &str| {
        matches!(
            v.to_ascii_lowercase().as_str(),
            "false" | "no" | "off" | "0"
        )
    };
    let is_true = |v: &str| !is_false(v);
    let changes = [
        (
            "core.autocrlf",
            config.get("core.autocrlf").is_some_and(|v| is_true(v)),
        ),
        ("core.eol", config.contains_key("core.eol")),
        (
            "core.symlinks",
            config.get("core.symlinks").is_some_and(|v| is_false(v)),
        ),
        (
            "core.filemode",
            config.get("core.filemode").is_some_and(|v| is_false(v)),
        ),
        (
            "core.ignorecase",
            config.get("core.ignorecase").is_some_and(|v| is_true(v)),
        ),
        (
            "core.sparsecheckout",
            config
                .get("core.sparsecheckout")
                .is_some_and(|v| is_true(v)),
        ),
        (
            "core.attributesfile",
            config.contains_key("core.attributesfile"),
        ),
        ("core.worktree", config.contains_key("core.worktree")),
        (
            "extensions.objectformat",
            config
                .get("extensions.objectformat")
                .is_some_and(|v| !v.eq_ignore_ascii_case("sha1")),
        ),
    ];
    if let Some((key, _)) = changes.iter().find(|(_, set)| *set) {
        return Ok(Some(format!("{key} is set")));
    }
    // An older git does not say where it looks for attributes: ask it to check out.
    let Some(global) = config.get("GIT_ATTR_GLOBAL") else {
        return Ok(Some(
            "git does not say where its global attributes are".to_owned(),
        ));
    };
    for file in [Some(global), config.get("GIT_ATTR_SYSTEM")]
        .into_iter()
        .flatten()
    {
        if Path::new(file).exists() {
            return Ok(Some(format!("the attributes file {file}")));
        }
    }
    Ok(None)
}

/// What in the repository's git folder changes which object a checkout reads or how it
/// writes it: attributes, alternates, replace refs.
fn repository_changes_objects(common: &Path) -> Option<String> {
    for file in ["info/attributes", "objects/info/alternates"] {
        if common.join(file).exists() {
            return Some(format!("{file} exists"));
        }
    }
    let replaced = std::fs::read_dir(common.join("refs/replace"))
        .is_ok_and(|mut d| d.next().is_some())
        || std::fs::read(common.join("packed-refs"))
            .is_ok_and(|refs| refs.windows(14).any(|w| w == b" refs/replace/"));
    replaced.then(|| "replace refs".to_owned())
}

/// The files to write (sorted by path, as the index is) and every folder they need (a parent
/// before its children), from `git ls-tree -r -z` output; or why git must check out instead.
fn plan(listed: &[u8], store: &ObjectStore) -> Result<(Vec<TreeFile>, BTreeSet<Vec<u8>>), String> {
    let mut files = Vec::new();
    let mut folders = BTreeSet::new();
    for record in listed.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let shape = || {
            format!(
                "an ls-tree line out of shape: {}",
                String::from_utf8_lossy(record)
            )
        };
        let tab = record.iter().position(|&b| b == b'\t').ok_or_else(shape)?;
        let (head, path) = (&record[..tab], &record[tab + 1..]);
        let mut fields = head.split(|&b| b == b' ');
        let (Some(mode), Some(kind), Some(id)) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(shape());
        };
        if kind != b"blob" {
            return Err("a submodule".to_owned());
        }
        let mode = std::str::from_utf8(mode)
            .ok()
            .and_then(|m| u32::from_str_radix(m, 8).ok())
            .ok_or_else(shape)?;
        let mode = match mode & 0o170000 {
            0o100000 if mode & 0o100 != 0 => 0o100755,
            0o100000 => 0o100644,
            SYMLINK => SYMLINK,
            _ => return Err(format!("a file of mode {mode:o}")),
        };
        let id = parse_hex(id).ok_or("an object id that is not SHA-1")?;
        if let Some(why) = refused_path(path) {
            return Err(why);
        }
        let at = store
            .locate(&id)
            .ok_or("a blob outside this repository's packs and loose objects")?;
        for (i, _) in path.iter().enumerate().filter(|(_, b)| **b == b'/') {
            folders.insert(path[..i].to_vec());
        }
        files.push(TreeFile {
            path: path.to_vec(),
            mode,
            id,
            at,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let clash = files.windows(2).any(|w| w[0].path == w[1].path)
        || files.iter().any(|f| folders.contains(&f.path));
    match clash {
        true => Err("a path listed twice, or both as a file and a folder".to_owned()),
        false => Ok((files, folders)),
    }
}

/// Why git, not berth, must judge this path: anything git's `verify_path` might refuse (an
/// empty, `.` or `..` part, anything like `.git` in any case or as a Windows short name, a
/// backslash) and attribute files. Only names of the usual git files pass.
fn refused_path(path: &[u8]) -> Option<String> {
    const USUAL: [&[u8]; 5] = [
        b".gitignore",
        b".gitkeep",
        b".github",
        b".gitlab",
        b".gitlab-ci.yml",
    ];
    for part in path.split(|&b| b == b'/') {
        let lower = part.to_ascii_lowercase();
        let gitlike = (lower.starts_with(b".git") || lower.starts_with(b"git~"))
            && !USUAL.contains(&&lower[..]);
        if part.is_empty() || part == b"." || part == b".." || gitlike || part.contains(&b'\\') {
            return Some(format!("the path {}", String::from_utf8_lossy(path)));
        }
    }
    None
}

/// The git folder of a linked worktree, from its `.git` file.
fn git_dir_of(worktree: &Path) -> Result<PathBuf> {
    let dot_git = worktree.join(".git");
    let text = std::fs::read_to_string(&dot_git).map_err(|source| GitError::Io {
        context: format!("cannot read {}", dot_git.display()),
        source,
    })?;
    let dir = text
        .strip_prefix("gitdir: ")
        .map(str::trim_end)
        .ok_or_else(|| GitError::NotAWorktree {
            path: worktree.to_owned(),
            message: format!("{} does not name a git folder", dot_git.display()),
        })?;
    Ok(worktree.join(dir))
}

/// Writes `files` with one writer per core, each taking the next file as it frees up; their
/// stat data, in the same order. The inner error is damage in the object database, which
/// git's own checkout then meets and reports.
#[allow(clippy::type_complexity)]
fn write_files(
    worktree: &Path,
    store: &ObjectStore,
    files: &[TreeFile],
) -> Result<std::result::Result<Vec<StatData>, Damaged>> {
    let writers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let stats = Mutex::new(vec![StatData::default(); files.len()]);
    let failure: Mutex<Option<std::result::Result<Damaged, GitError>>> = Mutex::new(None);
    let written = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..writers {
            scope.spawn(|| {
                let mut reader = store.reader();
                let mut done = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(file) = files.get(i) else { break };
                    match write_one(worktree, &mut reader, file) {
                        Ok(stat) => {
                            done.push((i, stat));
                            written.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            failure
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(e);
                            break;
                        }
                    }
                }
                let mut stats = stats.lock().unwrap_or_else(|p| p.into_inner());
                for (i, stat) in done {
                    stats[i] = stat;
                }
            });
        }
        if crate::progress::reporting() {
            report_progress(&written, files.len(), &stop);
        }
    });
    match failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        None => Ok(Ok(stats.into_inner().unwrap_or_else(|p| p.into_inner()))),
        Some(Ok(damaged)) => Ok(Err(damaged)),
        Some(Err(e)) => Err(e),
    }
}

/// Reports the files written to a person watching, as git's `checkout --progress` does, once
/// the checkout has run for the progress delay; returns when all are written or a writer
/// stopped.
fn report_progress(written: &AtomicUsize, total: usize, stop: &AtomicBool) {
    const LABEL: &str = "checking out";
    let started = std::time::Instant::now();
    let delay = crate::progress::checkout_delay();
    let mut shown = false;
    loop {
        let done = written.load(Ordering::Relaxed);
        if started.elapsed() >= delay {
            shown = true;
            crate::progress::step(LABEL, done as u64, total as u64);
        }
        if done >= total || stop.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if shown {
        crate::progress::finish(LABEL);
    }
}

/// Writes one file (or symlink) as git's checkout does: mode 0666 or 0777 less the umask.
fn write_one(
    worktree: &Path,
    reader: &mut crate::objects::Reader<'_>,
    file: &TreeFile,
) -> std::result::Result<StatData, std::result::Result<Damaged, GitError>> {
    let content = reader.blob(&file.at).map_err(Ok)?;
    let path = worktree.join(OsStr::from_bytes(&file.path));
    let io = |source| {
        Err(GitError::Io {
            context: format!("cannot write {}", path.display()),
            source,
        })
    };
    if file.mode == SYMLINK {
        std::os::unix::fs::symlink(OsStr::from_bytes(&content), &path).map_err(io)?;
        let meta = std::fs::symlink_metadata(&path).map_err(io)?;
        return Ok(StatData::of(&meta));
    }
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if file.mode == 0o100755 { 0o777 } else { 0o666 })
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(io)?;
    out.write_all(&content).map_err(io)?;
    let meta = out.metadata().map_err(io)?;
    Ok(StatData::of(&meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path the filesystem will not take (here a folder already where the file goes; on a
    /// case-insensitive one, a name that folds onto another) leaves the checkout to git.
    #[test]
    fn a_file_the_filesystem_refuses_leaves_the_checkout_to_git() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("project");
        std::fs::create_dir(&root).unwrap();
        berth_testkit::git(&root, &["init", "--quiet", "-b", "main"]);
        berth_testkit::commit(&root, "a.txt", "a\n");
        let wt = tmp.path().join("wt");
        let wt_arg = wt.to_str().unwrap();
        berth_testkit::git(
            &root,
            &[
                "worktree",
                "add",
                "--quiet",
                "--no-checkout",
                "--detach",
                wt_arg,
            ],
        );
        std::fs::create_dir_all(wt.join("a.txt/in")).unwrap();
        match fill(&wt, &root.join(".git")).unwrap() {
            Filled::LeftToGit(why) => assert!(why.contains("a.txt"), "{why}"),
            Filled::Written => panic!("written over a folder"),
        }
    }

    #[test]
    fn paths_git_might_refuse_are_left_to_git() {
        for bad in [
            &b".git/config"[..],
            b"a/.GIT/hooks/x",
            b"a/git~1/x",
            b"a/.git. /x",
            b"a/../x",
            b"a//x",
            b"a\\b",
            b"sub/.gitattributes",
            b".gitmodules",
        ] {
            assert!(
                refused_path(bad).is_some(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        for good in [
            &b"src/lib.rs"[..],
            b".gitignore",
            b".github/workflows/ci.yml",
            b"a/.gitkeep",
            b"gitx",
        ] {
            assert_eq!(
                refused_path(good),
                None,
                "{}",
                String::from_utf8_lossy(good)
            );
        }
    }
}
