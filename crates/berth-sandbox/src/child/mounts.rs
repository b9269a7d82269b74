//! The mount plan's steps (tmpfs, mount points, binds, links), made in the child's own mount
//! namespace. The parent worked out every path and opened every source, so each step here is a
//! system call or two on strings the plan owns.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use super::check;

/// One step of the mount plan, in order.
#[derive(Debug)]
pub(crate) enum Step {
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
    /// `source` (a `/proc/self/fd/N` of a descriptor the parent opened) mounted on `target`.
    Bind {
        source: CString,
        target: CString,
        readonly: bool,
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
            Step::Tmpfs { target, .. } => write!(f, "mounting an empty tmpfs on {}", shown(target)),
            Step::Mkdir { path } => write!(f, "making the mount point {}", shown(path)),
            Step::Touch { path } => write!(f, "making the mount point {}", shown(path)),
            Step::Bind {
                target, readonly, ..
            } => write!(
                f,
                "mounting {}{}",
                shown(target),
                if *readonly { " read-only" } else { "" }
            ),
            Step::Symlink { link, .. } => write!(f, "making {}", shown(link)),
        }
    }
}

/// Mount flags a read-only remount must keep: in a user namespace the kernel refuses to drop
/// the ones the original mount had.
fn kept_flags(target: &std::ffi::CStr) -> io::Result<libc::c_ulong> {
    // SAFETY: statvfs is plain data, for which all zeroes is a value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs fills the struct we own, from a NUL-terminated path that outlives it.
    check(unsafe { libc::statvfs(target.as_ptr(), &mut st) })?;
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    Ok(flags)
}

fn remount_readonly(target: &std::ffi::CStr) -> io::Result<()> {
    let flags = kept_flags(target)?;
    // SAFETY: a remount of a mount this namespace made; the strings outlive the call.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
            std::ptr::null(),
        )
    })
}

/// Each call below is a system call on NUL-terminated strings the plan owns, which outlive
/// it: that is every `SAFETY` here.
pub(super) fn run_step(step: &Step) -> io::Result<()> {
    match step {
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
            source,
            target,
            readonly,
        } => {
            // SAFETY: see above.
            check(unsafe {
                libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                )
            })?;
            if *readonly {
                remount_readonly(target)?;
            }
            Ok(())
        }
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
