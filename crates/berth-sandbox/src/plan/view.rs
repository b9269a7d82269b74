//! What a confined process sees: a new root made of what it needs, by allow list.
//!
//! The root is an empty tmpfs. Into it go, at their own paths:
//!
//! - the system's folders, read-only: [`SYSTEM`] where present (a merged-`/usr` link such as
//!   `/bin` is made again as the link it is);
//! - the toolchains, read-only: the folders beneath `$HOME` that hold them, the folders the
//!   toolchain variables name ([`crate::TOOLCHAINS`]), and those on `PATH`;
//! - the work folder and the writable extras, writable; the workspace's own folder, an agent's
//!   program and `[sandbox] readable`, read-only; `[sandbox] sockets`, one by one;
//! - a fresh `/tmp` and `/var/tmp` (tmpfs), empty `/run` and `/var`, and `$HOME` as an empty
//!   folder; `/dev` and `/proc` are the child's own ([`super::push_dev_steps`], the init).
//!
//! Nothing else is there: other users' homes, `/srv`, `/mnt`, `/media`, the host's `/run`
//! (and every socket in it), berth's home but the workspace's folder. Every bind is
//! `nosuid,nodev`, and every read-only one read-only on all of its mounts, so a confined
//! process cannot chmod, chown, utime or set an xattr on anything but what it may write.
//!
//! The deny list still applies inside what is bound (`~/.cargo/credentials.toml` inside
//! `~/.cargo`, a workspace's `config.toml`, the files of `/etc` nobody but their owner may read).
//!
//! The plan is computed on paths as the kernel resolves them (canonical), shallowest first,
//! so that a mount never lands beneath one made after it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::SandboxError;

/// The system's folders, bound read-only where present.
pub(crate) const SYSTEM: [&str; 11] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
    "/snap",
];

/// Folders made empty in the new root: mount points, and what programs expect to exist.
const EMPTY: [&str; 4] = ["/proc", "/dev", "/run", "/var"];

/// Files of the system's folders that hold secrets whatever their mode says.
const SYSTEM_SECRETS: [&str; 4] = [
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
];

/// What a path of the new root is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    /// A fresh tmpfs of at most this many MiB (`/tmp`, `/var/tmp`).
    Fresh(u64),
    /// An empty folder of the root's own.
    Empty,
    /// The host's file or folder at its own path: read-only unless `writable`.
    Bind { dir: bool, writable: bool },
    /// Hidden where a bind would show it: an empty folder or file that cannot be opened.
    Deny { dir: bool },
    /// A link the system has (merged `/usr`'s `/bin`), made again with this target.
    Link(PathBuf),
    /// A Unix socket named by `[sandbox] sockets`: bound even inside a folder the sandbox
    /// hides, since it is named on purpose.
    Socket,
    /// A file shown as this copy without its secrets ([`super::scrub`]), where it is shown.
    Scrubbed(PathBuf),
}

/// What covers a path once the mounts so far are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cover<'a> {
    /// The new root's own tmpfs, or a fresh one mounted on this path: nothing of the host's.
    Ours(&'a Path),
    /// Beneath a deny mount.
    Denied,
    /// Beneath a bind of the host's tree, writable or not.
    Bound { writable: bool },
}

/// A mount step before its paths become C strings and its sources descriptors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PlanStep {
    Tmpfs(PathBuf, String, bool),
    DenyFile(PathBuf),
    Mkdir(PathBuf),
    Touch(PathBuf),
    /// The source's index in the returned paths, the target, and whether it is writable.
    Bind(usize, PathBuf, bool),
    Symlink(PathBuf, PathBuf),
}

/// Mount points from `top` (a folder of ours) down to `path`: folders, and the path itself as
/// a folder or (`dir` false) a file.
fn mount_points(steps: &mut Vec<PlanStep>, top: &Path, path: &Path, dir: bool) {
    let rest = path.strip_prefix(top).expect("beneath its cover");
    let parts: Vec<_> = rest.components().collect();
    let mut at = top.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        if i + 1 < parts.len() || dir {
            steps.push(PlanStep::Mkdir(at.clone()));
        } else {
            steps.push(PlanStep::Touch(at.clone()));
        }
    }
}

/// The items in the order they are mounted: shallowest first; at one path, a writable bind
/// before a read-only one (which it makes redundant), and anything before a deny.
fn mount_order(items: &[(PathBuf, Item)]) -> Vec<&(PathBuf, Item)> {
    let mut order: Vec<&(PathBuf, Item)> = items.iter().collect();
    order.sort_by_key(|(p, item)| {
        let rank = match item {
            Item::Bind { writable: true, .. } => 0,
            Item::Deny { .. } | Item::Scrubbed(_) => 2,
            _ => 1,
        };
        (p.components().count(), rank)
    });
    order
}

/// What covers `path` once the mounts `done` are made: the deepest of them at or above it
/// says what it looks like now.
fn cover_of<'a>(done: &[(&'a Path, &'a Item)], path: &Path, root: &'a Path) -> Cover<'a> {
    done.iter()
        .filter(|(p, _)| path.starts_with(p))
        .max_by_key(|(p, _)| p.components().count())
        .map_or(Cover::Ours(root), |(p, i)| match i {
            Item::Fresh(_) | Item::Empty | Item::Link(_) => Cover::Ours(p),
            Item::Deny { .. } => Cover::Denied,
            Item::Bind { writable, .. } => Cover::Bound {
                writable: *writable,
            },
            Item::Socket | Item::Scrubbed(_) => Cover::Bound { writable: false },
        })
}

/// The mount steps, from the items in any order. Each `Bind` names the index of its source
/// in the returned paths (opened by the caller).
pub(crate) fn mount_steps(
    items: &[(PathBuf, Item)],
) -> Result<(Vec<PlanStep>, Vec<PathBuf>), SandboxError> {
    let root = Path::new("/");
    let mut done: Vec<(&Path, &Item)> = Vec::new();
    let mut steps = Vec::new();
    let mut sources = Vec::new();
    for (path, item) in mount_order(items) {
        if !matches!(item, Item::Scrubbed(_)) && done.iter().any(|(p, _)| *p == path.as_path()) {
            continue; // one mount a path: the first, by the order above
        }
        let cover = cover_of(&done, path, root);
        // Where the chain of mount points to this path starts.
        let top = match cover {
            Cover::Ours(p) => p,
            _ => root,
        };
        match (item, cover) {
            (Item::Fresh(mib), Cover::Ours(_) | Cover::Bound { .. }) => {
                if matches!(cover, Cover::Ours(_)) {
                    mount_points(&mut steps, top, path, true);
                }
                let data = format!("mode=1777,size={mib}m");
                steps.push(PlanStep::Tmpfs(path.clone(), data, false));
            }
            (Item::Empty, Cover::Ours(_)) => mount_points(&mut steps, top, path, true),
            (Item::Link(target), Cover::Ours(_)) => {
                if let Some(parent) = path.parent()
                    && parent != top
                {
                    mount_points(&mut steps, top, parent, true);
                }
                steps.push(PlanStep::Symlink(target.clone(), path.clone()));
            }
            (Item::Bind { dir, writable }, cover) => match cover {
                Cover::Denied => {
                    return Err(SandboxError::Invalid(format!(
                        "{} is inside a path the sandbox hides ([sandbox] deny_read)",
                        path.display()
                    )));
                }
                // The same view, already there.
                Cover::Bound { writable: w } if w == *writable => continue,
                Cover::Bound { .. } => {
                    steps.push(PlanStep::Bind(sources.len(), path.clone(), *writable));
                    sources.push(path.clone());
                }
                Cover::Ours(_) => {
                    mount_points(&mut steps, top, path, *dir);
                    steps.push(PlanStep::Bind(sources.len(), path.clone(), *writable));
                    sources.push(path.clone());
                }
            },
            (Item::Socket, Cover::Ours(_) | Cover::Bound { .. }) => {
                if matches!(cover, Cover::Ours(_)) {
                    mount_points(&mut steps, top, path, false);
                }
                steps.push(PlanStep::Bind(sources.len(), path.clone(), false));
                sources.push(path.clone());
            }
            (Item::Socket, Cover::Denied) => {
                return Err(SandboxError::Invalid(format!(
                    "the socket {} is inside a folder the sandbox shows and then hides; name that folder's socket from outside it, or remove the folder from [sandbox] deny_read",
                    path.display()
                )));
            }
            (Item::Scrubbed(copy), Cover::Bound { .. }) => {
                steps.push(PlanStep::Bind(sources.len(), path.clone(), false));
                sources.push(copy.clone());
            }
            (Item::Deny { dir }, Cover::Bound { .. }) => steps.push(if *dir {
                PlanStep::Tmpfs(path.clone(), "mode=000,size=4k".into(), true)
            } else {
                PlanStep::DenyFile(path.clone())
            }),
            // Not there at all, or hidden already.
            (Item::Deny { .. } | Item::Empty | Item::Link(_) | Item::Fresh(_), _)
            | (Item::Scrubbed(_), _) => continue,
        }
        done.push((path, item));
    }
    Ok((steps, sources))
}

/// The system's part of the root: [`SYSTEM`] and [`EMPTY`], `/etc/resolv.conf`'s target where
/// it lies outside them (with `network = "full"`), NixOS's `/run/current-system`, and the
/// secrets of the system's folders, denied.
pub(crate) fn system_items(full_network: bool) -> Vec<(PathBuf, Item)> {
    let mut items = Vec::new();
    for dir in SYSTEM {
        let path = Path::new(dir);
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    items.push((path.to_owned(), Item::Link(target)));
                }
            }
            Ok(m) if m.is_dir() => items.push((
                path.to_owned(),
                Item::Bind {
                    dir: true,
                    writable: false,
                },
            )),
            _ => {}
        }
    }
    items.extend(EMPTY.iter().map(|d| (PathBuf::from(d), Item::Empty)));
    if full_network
        && let Ok(target) = Path::new("/etc/resolv.conf").canonicalize()
        && !SYSTEM.iter().any(|s| target.starts_with(s))
    {
        items.push((
            target,
            Item::Bind {
                dir: false,
                writable: false,
            },
        ));
    }
    let nixos = Path::new("/run/current-system");
    if let Ok(target) = std::fs::read_link(nixos) {
        items.push((nixos.to_owned(), Item::Link(target)));
    }
    items.extend(
        system_secrets()
            .iter()
            .map(|(p, dir)| (p.clone(), Item::Deny { dir: *dir })),
    );
    items
}

/// The files and folders of `/etc` that hold secrets: [`SYSTEM_SECRETS`], ssh's host keys,
/// and whatever its owner keeps from the world (not world-readable), since a tree berth runs
/// as root would read them all. Found once per process.
fn system_secrets() -> &'static [(PathBuf, bool)] {
    static SECRETS: OnceLock<Vec<(PathBuf, bool)>> = OnceLock::new();
    SECRETS.get_or_init(|| {
        let mut found: Vec<(PathBuf, bool)> = SYSTEM_SECRETS
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.is_file())
            .map(|p| (p, false))
            .collect();
        walk_private(Path::new("/etc"), 0, &mut found);
        found.sort();
        found.dedup();
        found
    })
}

/// Adds what beneath `dir` the world may not read (a folder it may not enter, whole).
fn walk_private(dir: &Path, depth: usize, found: &mut Vec<(PathBuf, bool)>) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(m) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let mode = m.permissions().mode();
        let is_host_key = path.starts_with("/etc/ssh")
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ssh_host_") && n.ends_with("_key"));
        if m.is_dir() {
            if mode & 0o005 != 0o005 {
                found.push((path, true));
            } else if depth < 8 {
                walk_private(&path, depth + 1, found);
            }
        } else if m.is_file() && (mode & 0o004 == 0 || is_host_key) {
            found.push((path, false));
        }
    }
}

/// Whether `path` may be shown as a toolchain: not `/`, not a folder holding `$HOME` (which
/// would show the whole home), and not beneath what the sandbox hides.
fn toolchain_ok(path: &Path, home: Option<&Path>, hidden: &[PathBuf]) -> bool {
    path.components().count() > 1
        && !home.is_some_and(|h| h.starts_with(path))
        && !hidden.iter().any(|h| path.starts_with(h))
}

/// The toolchains' folders outside the system's: those the toolchain variables name, and
/// those on `PATH` (a virtualenv's `bin` brings its virtualenv, whose `pyvenv.cfg` Python
/// reads). Resolved; `hidden` (the deny list, berth's home) wins.
pub(crate) fn toolchain_paths(home: Option<&Path>, hidden: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut add = |p: &Path| {
        let Ok(p) = p.canonicalize() else { return };
        let p = match p.parent() {
            Some(venv) if p.ends_with("bin") && venv.join("pyvenv.cfg").is_file() => {
                venv.to_owned()
            }
            _ => p,
        };
        if toolchain_ok(&p, home, hidden)
            && !SYSTEM.iter().any(|s| p.starts_with(s))
            && !found.contains(&p)
        {
            found.push(p);
        }
    };
    for name in crate::TOOLCHAINS {
        if let Some(value) = std::env::var_os(name) {
            for p in std::env::split_paths(&value).filter(|p| p.is_absolute()) {
                add(&p);
            }
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for p in std::env::split_paths(&path).filter(|p| p.is_absolute()) {
            add(&p);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    const RO: Item = Item::Bind {
        dir: true,
        writable: false,
    };
    const RW: Item = Item::Bind {
        dir: true,
        writable: true,
    };

    #[test]
    fn the_root_holds_only_what_is_bound_and_denied_paths_inside_binds_are_hidden() {
        let items = vec![
            (p("/tmp"), Item::Fresh(1024)),
            (p("/usr"), RO),
            (p("/bin"), Item::Link(p("usr/bin"))),
            (p("/root/.ssh"), Item::Deny { dir: true }),
            (p("/b/workspaces/w"), RO),
            (p("/b/workspaces/w/config.toml"), Item::Deny { dir: false }),
            (p("/b/workspaces/w/worktree"), RW),
            (p("/b/workspaces/w/worktree/.git"), RO),
            (p("/tmp/x/agent.sock"), Item::Socket),
            (p("/home/u/.ssh/agent.sock"), Item::Socket),
        ];
        let (steps, sources) = mount_steps(&items).unwrap();
        assert_eq!(
            steps,
            [
                PlanStep::Mkdir(p("/tmp")),
                PlanStep::Tmpfs(p("/tmp"), "mode=1777,size=1024m".into(), false),
                PlanStep::Mkdir(p("/usr")),
                PlanStep::Bind(0, p("/usr"), false),
                PlanStep::Symlink(p("usr/bin"), p("/bin")),
                PlanStep::Mkdir(p("/b")),
                PlanStep::Mkdir(p("/b/workspaces")),
                PlanStep::Mkdir(p("/b/workspaces/w")),
                PlanStep::Bind(1, p("/b/workspaces/w"), false),
                PlanStep::Mkdir(p("/tmp/x")),
                PlanStep::Touch(p("/tmp/x/agent.sock")),
                PlanStep::Bind(2, p("/tmp/x/agent.sock"), false),
                PlanStep::Bind(3, p("/b/workspaces/w/worktree"), true),
                PlanStep::Mkdir(p("/home")),
                PlanStep::Mkdir(p("/home/u")),
                PlanStep::Mkdir(p("/home/u/.ssh")),
                PlanStep::Touch(p("/home/u/.ssh/agent.sock")),
                PlanStep::Bind(4, p("/home/u/.ssh/agent.sock"), false),
                PlanStep::DenyFile(p("/b/workspaces/w/config.toml")),
                PlanStep::Bind(5, p("/b/workspaces/w/worktree/.git"), false),
            ]
        );
        assert_eq!(sources.len(), 6);
        // ~/.ssh was never bound: nothing to hide, and no step for it.
        assert!(
            !steps
                .iter()
                .any(|s| matches!(s, PlanStep::Tmpfs(p, ..) if p.ends_with(".ssh")))
        );
    }

    #[test]
    fn a_bind_inside_the_same_kind_of_bind_is_not_made_again() {
        let items = vec![
            (p("/h/.cargo"), RO),
            (p("/h/.cargo/bin"), RO),
            (p("/h/.cargo"), RW),
        ];
        let (steps, _) = mount_steps(&items).unwrap();
        assert_eq!(
            steps,
            [
                PlanStep::Mkdir(p("/h")),
                PlanStep::Mkdir(p("/h/.cargo")),
                PlanStep::Bind(0, p("/h/.cargo"), true),
                PlanStep::Bind(1, p("/h/.cargo/bin"), false),
            ]
        );
    }

    #[test]
    fn a_scrubbed_copy_is_bound_over_its_original_only_where_it_is_shown() {
        let items = vec![
            (
                p("/h/.gitconfig"),
                Item::Bind {
                    dir: false,
                    writable: false,
                },
            ),
            (
                p("/h/.gitconfig"),
                Item::Scrubbed(p("/b/.sandbox/scrubbed/1")),
            ),
            (
                p("/h/.pip/pip.conf"),
                Item::Scrubbed(p("/b/.sandbox/scrubbed/2")),
            ),
        ];
        let (steps, sources) = mount_steps(&items).unwrap();
        assert_eq!(
            steps,
            [
                PlanStep::Mkdir(p("/h")),
                PlanStep::Touch(p("/h/.gitconfig")),
                PlanStep::Bind(0, p("/h/.gitconfig"), false),
                PlanStep::Bind(1, p("/h/.gitconfig"), false),
            ]
        );
        assert_eq!(sources, [p("/h/.gitconfig"), p("/b/.sandbox/scrubbed/1")]);
    }

    #[test]
    fn a_bind_inside_a_denied_path_is_refused() {
        let items = vec![
            (p("/home/u"), RO),
            (p("/home/u/.aws"), Item::Deny { dir: true }),
            (p("/home/u/.aws/work"), RO),
        ];
        assert!(mount_steps(&items).is_err());
    }

    #[test]
    fn toolchains_never_show_the_home_or_what_is_hidden() {
        let home = Path::new("/home/u");
        let hidden = [p("/home/u/.ssh")];
        assert!(toolchain_ok(
            Path::new("/home/u/.cargo/bin"),
            Some(home),
            &hidden
        ));
        assert!(!toolchain_ok(Path::new("/home/u"), Some(home), &hidden));
        assert!(!toolchain_ok(Path::new("/home"), Some(home), &hidden));
        assert!(!toolchain_ok(Path::new("/"), Some(home), &hidden));
        assert!(!toolchain_ok(
            Path::new("/home/u/.ssh/bin"),
            Some(home),
            &hidden
        ));
    }
}
