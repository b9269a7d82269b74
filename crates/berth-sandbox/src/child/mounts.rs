//! The mount plan's steps (the new root, tmpfs, mount points, binds, links), made in the
//! child's own mount namespace. The parent worked out every path and opened every source, so
//! each step here is a system call or a few on strings the plan owns.
//!
//! The root is new ([`Step::Root`]): an empty tmpfs, into which only what the plan names is
//! bound. The host's tree stays below it at [`OLD_ROOT`] until the init has mounted its own
//! `/proc` (the kernel lets a user namespace mount a `proc` only while one is fully visible in
//! its mount namespace), and is then detached for good ([`leave_old_root`]).

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use super::check;

/// Where the host's tree lies, below the new root, until the init detaches it.
const OLD_ROOT: &std::ffi::CStr = c"/.oldroot";

/// One step of the mount plan, in order.
#[derive(Debug)]
pub(crate) enum Step {
    /// The new root: a fresh tmpfs (`data`: its options), made the root with `pivot_root`.
    /// The host's tree is then at [`OLD_ROOT`], and every later path is in the new root.
    Root {
        data: CString,
    },
    /// A fresh tmpfs on `target` (`data`: its options, e.g. `mode=0755`).
    Tmpfs {
        target: CString,
        data: CString,
        readonly: bool,
    },
    /// A folder in a tmpfs of ours, as a mount point (an existing one is fine).
    Mkdir {
        path: CString,
    },
    /// An empty file in a tmpfs of ours, as a mount point for a file.
    Touch {
        path: CString,
    },
    /// The tree at `slot` (a descriptor the child opened on the host's path before the new
    /// root) cloned, submounts included, given `attrs` (`MOUNT_ATTR_*`: read-only, nosuid,
    /// nodev, on every mount of the clone) and mounted on `target`.
    Bind {
        slot: RawFd,
        target: CString,
        attrs: u64,
    },
    Symlink {
        target: CString,
        link: CString,
    },
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |c: &CString| c.to_string_lossy().into_owned();
        match self {
            Step::Root { .. } => write!(f, "making the new root"),
            Step::Tmpfs { target, .. } => write!(f, "mounting an empty tmpfs on {}", shown(target)),
            Step::Mkdir { path } => write!(f, "making the mount point {}", shown(path)),
            Step::Touch { path } => write!(f, "making the mount point {}", shown(path)),
            Step::Bind { target, attrs, .. } => write!(
                f,
                "mounting {}{}",
                shown(target),
                if attrs & libc::MOUNT_ATTR_RDONLY != 0 {
                    " read-only"
                } else {
                    ""
                }
            ),
            Step::Symlink { link, .. } => write!(f, "making {}", shown(link)),
        }
    }
}

/// Makes a fresh tmpfs the root: mounted on the host's `/tmp` (a folder every system has),
/// then swapped with the host's tree by `pivot_root`.
fn make_root(data: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: mount, mkdir, pivot_root and chdir on static strings and `data`, which outlive
    // the calls.
    unsafe {
        check(libc::mount(
            c"tmpfs".as_ptr(),
            c"/tmp".as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        ))?;
        check(libc::mkdir(c"/tmp/.oldroot".as_ptr(), 0o700))?;
        check(libc::syscall(
            libc::SYS_pivot_root,
            c"/tmp".as_ptr(),
            c"/tmp/.oldroot".as_ptr(),
        ) as libc::c_int)?;
        check(libc::chdir(c"/".as_ptr()))
    }
}

/// `mount_setattr(2)` of `attrs` on the mount at `fd` (with `AT_EMPTY_PATH`) or `path`, and on
/// every mount beneath it with `recursive`.
fn set_mount_attrs(
    fd: RawFd,
    path: &std::ffi::CStr,
    attrs: u64,
    recursive: bool,
) -> io::Result<()> {
    let attr = libc::mount_attr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = if path.is_empty() {
        libc::AT_EMPTY_PATH
    } else {
        0
    };
    if recursive {
        flags |= libc::AT_RECURSIVE;
    }
    // SAFETY: mount_setattr with a struct on the stack and a path that outlives the call.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            path.as_ptr(),
            flags as libc::c_uint,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    } as libc::c_int)
}

/// Clones the tree at `slot` (submounts included), sets `attrs` on all of it, and mounts the
/// clone on `target`: one bind whose every mount is read-only (or nosuid, nodev) at once,
/// which a remount of the top one would not give.
fn bind(slot: RawFd, target: &std::ffi::CStr, attrs: u64) -> io::Result<()> {
    // SAFETY: open_tree, move_mount and close on descriptors this process owns, and paths
    // that outlive the calls.
    unsafe {
        let tree = libc::syscall(
            libc::SYS_open_tree,
            slot,
            c"".as_ptr(),
            libc::OPEN_TREE_CLONE
                | libc::OPEN_TREE_CLOEXEC as libc::c_uint
                | libc::AT_RECURSIVE as libc::c_uint
                | libc::AT_EMPTY_PATH as libc::c_uint,
        ) as RawFd;
        if tree == -1 {
            return Err(io::Error::last_os_error());
        }
        let moved = set_mount_attrs(tree, c"", attrs, true).and_then(|()| {
            check(libc::syscall(
                libc::SYS_move_mount,
                tree,
                c"".as_ptr(),
                libc::AT_FDCWD,
                target.as_ptr(),
                libc::MOVE_MOUNT_F_EMPTY_PATH,
            ) as libc::c_int)
        });
        libc::close(tree);
        moved
    }
}

/// The init's last step on the mounts, once its `/proc` is mounted: the host's tree is
/// detached (nothing of it is reachable any more), and the new root made read-only.
pub(super) fn leave_old_root() -> io::Result<()> {
    // SAFETY: umount2 and rmdir on a static path.
    unsafe {
        check(libc::umount2(OLD_ROOT.as_ptr(), libc::MNT_DETACH))?;
        check(libc::rmdir(OLD_ROOT.as_ptr()))?;
    }
    set_mount_attrs(libc::AT_FDCWD, c"/", libc::MOUNT_ATTR_RDONLY, false)
}

/// Each call below is a system call on NUL-terminated strings the plan owns, which outlive
/// it: that is every `SAFETY` here.
pub(super) fn run_step(step: &Step) -> io::Result<()> {
    match step {
        Step::Root { data } => make_root(data),
        Step::Tmpfs {
            target,
            data,
            readonly,
        } => {
            let mut flags = libc::MS_NOSUID | libc::MS_NODEV;
            if *readonly {
                flags |= libc::MS_RDONLY;
            }
            // SAFETY: see above.
            check(unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    target.as_ptr(),
                    c"tmpfs".as_ptr(),
                    flags,
                    data.as_ptr().cast(),
                )
            })
        }
        Step::Mkdir { path } => {
            // SAFETY: see above.
            if unsafe { libc::mkdir(path.as_ptr(), 0o755) } == -1 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(e);
                }
            }
            Ok(())
        }
        Step::Touch { path } => {
            // SAFETY: see above.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o644,
                )
            };
            if fd == -1 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: the descriptor just opened, closed once.
            unsafe { libc::close(fd) };
            Ok(())
        }
        Step::Bind {
            slot,
            target,
            attrs,
        } => bind(*slot, target, *attrs),
        Step::Symlink { target, link } => {
            // SAFETY: see above.
            check(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) })
        }
    }
}

/// Opens `path` (in this mount namespace) onto the descriptor number `slot`.
pub(super) fn reopen(path: &std::ffi::CStr, slot: RawFd) -> io::Result<()> {
    // SAFETY: open, dup3 onto a number the parent reserved for this, and close.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        if fd == -1 {
            return Err(io::Error::last_os_error());
        }
        let r = libc::dup3(fd, slot, libc::O_CLOEXEC);
        let e = io::Error::last_os_error();
        libc::close(fd);
        if r == -1 {
            return Err(e);
        }
    }
    Ok(())
}
