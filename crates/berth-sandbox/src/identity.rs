//! Whether an `--agent-cmd` is berth itself: known by its file, never by its name.
//!
//! berth as an agent process is the one agent berth does not confine: it confines the
//! commands it runs on its own, which it could not do inside a Landlock domain (that forbids
//! mounting), and its file tools stay within its folder. So "this is berth" must be a fact
//! about the file the command would run, not about what that file is called: a script named
//! `berth` early on `PATH`, or in the agent's folder, is just another agent process, confined.
//!
//! The program is found as the shell that starts the agent (`sh -c "exec COMMAND"`, in the
//! agent's folder) would find it: a name without `/` on `PATH` (the first executable file of
//! that name), any other path from the folder. It is berth when it is the very file the
//! running berth was started from (the same device and inode, symlinks followed): a symlink or
//! a hard link to it is berth, a copy of it or of anything else is not.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Whether `command`, started as `sh -c "exec COMMAND"` in `folder` with `path` as its `PATH`,
/// runs the running berth binary itself (`berth acp`, a path to berth, a symlink to it), as a
/// plain command line: no shell syntax, so nothing else runs with it.
///
/// `None` for `path` (no `PATH` at all) finds no bare name. Whatever cannot be resolved or
/// compared (a program that does not exist, a running binary that was deleted) is not berth:
/// the answer that confines.
pub fn runs_berth(command: &str, path: Option<&OsStr>, folder: &Path) -> bool {
    let Some(program) = command.split_whitespace().next() else {
        return false;
    };
    if !command.split_whitespace().all(plain) {
        return false;
    }
    let Some(file) = find(program, path, folder) else {
        return false;
    };
    match (std::fs::metadata(&file), running_binary()) {
        (Ok(a), Some(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// What an agent's command line needs to read, wherever it lies (a confined process sees
/// little of the host): its program, as `sh` finds it, and every file its words name, each
/// with its installation: the folder holding its `node_modules`, or its virtualenv (the
/// folder with a `pyvenv.cfg`), else the file itself, and beside a program in a `bin` folder
/// its installation's `lib` (a virtualenv's `python` leads to pyenv's).
pub fn program_files(command: &str, path: Option<&OsStr>, folder: &Path) -> Vec<PathBuf> {
    let mut words = command.split_whitespace().filter(|w| !w.contains('='));
    let program = words.next().and_then(|p| find(p, path, folder));
    // The interpreter of a script (`#!/usr/bin/env node`) is needed as much as the script.
    let interpreter = program
        .as_deref()
        .and_then(|p| interpreter(p, path, folder));
    let named = words
        .filter(|w| w.contains('/'))
        .map(|w| folder.join(w.trim_matches(['"', '\''])));
    let mut files: Vec<PathBuf> = program
        .into_iter()
        .chain(interpreter)
        .chain(named)
        .flat_map(|p| {
            // As named (a virtualenv's `bin/python` is a symlink out of it), each link it
            // leads through (pyenv's `python3`, a link to `python3.11`: a confined process
            // must find every hop), and as resolved (a `node_modules/.bin` entry is a symlink
            // into its package).
            hops(&p).into_iter().chain(p.canonicalize().ok())
        })
        .map(|file| installation(&file).unwrap_or(file))
        .collect();
    // A program in an installation's `bin` (pyenv's or nvm's interpreter, where a virtualenv's
    // `python` leads) needs that installation's libraries beside it.
    let libraries: Vec<PathBuf> = files
        .iter()
        .filter(|f| f.parent().is_some_and(|d| d.ends_with("bin")))
        .filter_map(|f| f.parent()?.parent())
        .flat_map(|prefix| ["lib", "lib64"].map(|lib| prefix.join(lib)))
        .filter(|lib| lib.is_dir())
        .collect();
    files.extend(libraries);
    files.sort();
    files.dedup();
    files
}

/// `path` as named (its folder resolved) and each link it leads through, up to 16.
fn hops(path: &Path) -> Vec<PathBuf> {
    let mut hops = Vec::new();
    let mut at = path.to_owned();
    for _ in 0..16 {
        let Some(named) = at
            .parent()
            .and_then(|d| d.canonicalize().ok())
            .zip(at.file_name())
            .map(|(d, n)| d.join(n))
        else {
            break;
        };
        if !named.exists() {
            break;
        }
        hops.push(named.clone());
        match (std::fs::read_link(&named), named.parent()) {
            (Ok(target), Some(folder)) => at = folder.join(target),
            _ => break,
        }
    }
    hops
}

/// The program a script's `#!` line names, found as the kernel (and `env`) would.
fn interpreter(script: &Path, path: Option<&OsStr>, folder: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = std::str::from_utf8(line.split(|b| *b == b'\n').next()?).ok()?;
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if Path::new(first).file_name().is_some_and(|n| n == "env") {
        let program = words.find(|w| !w.starts_with('-'))?;
        find(program, path, folder)
    } else {
        Some(PathBuf::from(first))
    }
}

/// The folder `file` was installed in: above its `node_modules`, or its virtualenv.
fn installation(file: &Path) -> Option<PathBuf> {
    file.ancestors().skip(1).find_map(|dir| {
        if dir.file_name().is_some_and(|n| n == "node_modules") {
            dir.parent().map(Path::to_owned)
        } else if dir.join("pyvenv.cfg").is_file() {
            Some(dir.to_owned())
        } else {
            None
        }
    })
}

/// A word a shell takes as it is: no expansion, quoting, redirection or separator.
fn plain(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+".contains(c))
}

/// The file `sh` would run for `program`: a path (relative ones from `folder`), or the first
/// executable file of that name in `path`'s folders (an empty or relative one from `folder`,
/// the shell's current folder).
fn find(program: &str, path: Option<&OsStr>, folder: &Path) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(folder.join(program));
    }
    std::env::split_paths(path?)
        .map(|dir| folder.join(dir).join(program))
        .find(|candidate| executable(candidate))
}

/// A regular file this process may execute (after symlinks), as `execve` would find it.
fn executable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: faccessat reads the NUL-terminated path and touches no other memory.
    let may = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::X_OK, libc::AT_EACCESS) };
    may == 0 && std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// The file of the running binary. `/proc/self/exe` leads to the very file the process was
/// started from, even if its path was since replaced; elsewhere, `current_exe`'s path.
fn running_binary() -> Option<std::fs::Metadata> {
    std::fs::metadata("/proc/self/exe")
        .or_else(|_| std::env::current_exe().and_then(std::fs::metadata))
        .ok()
}

#[cfg(test)]
mod program_tests {
    use super::*;

    #[test]
    fn an_agents_installation_is_found_from_its_command_line() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let bin = root.join("tools/node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        let agent = bin.join("some-agent");
        std::fs::write(&agent, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let venv = root.join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "").unwrap();
        std::fs::write(venv.join("bin/agent.py"), "").unwrap();
        let path = std::ffi::OsString::from(bin.as_os_str());
        let files = program_files(
            "FOO=1 some-agent --flag venv/bin/agent.py missing/file",
            Some(&path),
            &root,
        );
        assert!(files.contains(&root.join("tools")), "{files:?}");
        assert!(files.contains(&venv), "{files:?}");
        // `#!/bin/sh`: the shell, as named and as resolved.
        assert!(files.iter().any(|f| f.ends_with("sh")), "{files:?}");
        // A virtualenv's python is a symlink out of it: the virtualenv is found from its name.
        std::os::unix::fs::symlink("/bin/sh", venv.join("bin/python")).unwrap();
        let files = program_files("venv/bin/python agent.py", None, &root);
        assert!(files.contains(&venv), "{files:?}");
        // A script's interpreter comes with it.
        std::fs::write(&agent, "#!/usr/bin/env some-node\n").unwrap();
        let node = root.join("runtime/node");
        std::fs::create_dir_all(node.parent().unwrap()).unwrap();
        std::fs::write(&node, "").unwrap();
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&node, bin.join("some-node")).unwrap();
        let files = program_files("some-agent", Some(&path), &root);
        assert_eq!(
            files,
            [root.join("tools")],
            "the interpreter is in the same tree here"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    /// An executable script at `path`.
    fn script(path: &Path) {
        std::fs::write(path, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn exe() -> PathBuf {
        std::env::current_exe().unwrap()
    }

    #[test]
    fn a_program_named_berth_is_not_berth() {
        let tmp = tempfile::tempdir().unwrap();
        let folder = tmp.path();
        // A copy of another program, named berth: by PATH, by path, from the folder.
        std::fs::copy("/bin/true", folder.join("berth")).unwrap();
        let path = folder.as_os_str();
        assert!(!runs_berth("berth acp", Some(path), folder));
        let absolute = format!("{} acp", folder.join("berth").display());
        assert!(!runs_berth(&absolute, Some(path), Path::new("/")));
        assert!(!runs_berth("./berth acp", None, folder));
        // A script named berth, too.
        std::fs::remove_file(folder.join("berth")).unwrap();
        script(&folder.join("berth"));
        assert!(!runs_berth("berth acp", Some(path), folder));
        assert!(!runs_berth("./berth acp", None, folder));
    }

    #[test]
    fn the_running_binary_is_berth_whatever_its_name() {
        let tmp = tempfile::tempdir().unwrap();
        let folder = tmp.path();
        symlink(exe(), folder.join("some-agent")).unwrap();
        let path = std::env::join_paths([Path::new("/nonexistent"), folder]).unwrap();
        assert!(runs_berth("some-agent acp", Some(&path), Path::new("/")));
        assert!(runs_berth("./some-agent acp --home /x", None, folder));
        let absolute = format!("{} acp", folder.join("some-agent").display());
        assert!(runs_berth(&absolute, None, Path::new("/")));
        assert!(runs_berth(
            &format!("{} acp", exe().display()),
            None,
            folder
        ));
        // An empty PATH entry is the folder the shell starts in.
        assert!(runs_berth(
            "some-agent acp",
            Some(OsStr::new(":/bin")),
            folder
        ));
        // No PATH: a bare name is found nowhere.
        assert!(!runs_berth("some-agent acp", None, folder));
    }

    #[test]
    fn the_first_executable_on_path_is_the_one_that_counts() {
        let tmp = tempfile::tempdir().unwrap();
        let (fake, real, nonexec) = (
            tmp.path().join("fake"),
            tmp.path().join("real"),
            tmp.path().join("nonexec"),
        );
        for dir in [&fake, &real, &nonexec] {
            std::fs::create_dir(dir).unwrap();
        }
        script(&fake.join("berth"));
        symlink(exe(), real.join("berth")).unwrap();
        // Not executable: the shell passes it by, and so does the lookup.
        std::fs::write(nonexec.join("berth"), "#!/bin/sh\n").unwrap();
        let path = |dirs: &[&PathBuf]| std::env::join_paths(dirs).unwrap();
        let root = Path::new("/");
        assert!(!runs_berth("berth acp", Some(&path(&[&fake, &real])), root));
        assert!(runs_berth("berth acp", Some(&path(&[&real, &fake])), root));
        assert!(runs_berth(
            "berth acp",
            Some(&path(&[&nonexec, &real])),
            root
        ));
    }

    #[test]
    fn only_a_plain_command_line_is_berth() {
        let tmp = tempfile::tempdir().unwrap();
        let folder = tmp.path();
        symlink(exe(), folder.join("berth")).unwrap();
        let path = Some(folder.as_os_str());
        assert!(runs_berth("berth acp", path, folder));
        assert!(!runs_berth("berth acp; cat ~/.ssh/id", path, folder));
        assert!(!runs_berth("berth $(touch /x)", path, folder));
        assert!(!runs_berth("berth acp | tee log", path, folder));
        assert!(!runs_berth("berth acp > log", path, folder));
        assert!(!runs_berth("FOO=1 berth acp", path, folder));
        assert!(!runs_berth("", path, folder));
        assert!(!runs_berth("no-such-program acp", path, folder));
    }
}
