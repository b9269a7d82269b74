//! The child's side: system calls between fork and exec, on data the parent prepared.
//!
//! Nothing here allocates, locks or formats: the child of a multi-threaded process may only
//! make async-signal-safe calls. Errors are the kernel's errno, which `spawn` hands back to
//! the parent as the spawn's error.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

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

/// `/proc/self/{uid,gid}_map` contents: the process's own ids, mapped to themselves.
#[derive(Debug, Clone)]
pub(crate) struct IdMaps {
    uid: CString,
    gid: CString,
}

impl IdMaps {
    pub fn of_this_process() -> IdMaps {
        // SAFETY: geteuid and getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        IdMaps {
            uid: CString::new(format!("{uid} {uid} 1\n")).expect("no NUL in digits"),
            gid: CString::new(format!("{gid} {gid} 1\n")).expect("no NUL in digits"),
        }
    }
}

/// Everything the child needs.
#[derive(Debug)]
pub(crate) struct ChildPlan {
    pub maps: IdMaps,
    pub netns: bool,
    pub steps: Vec<Step>,
    /// The Landlock ruleset the parent made (held open by the parent's `OwnedFd`).
    pub ruleset: RawFd,
    /// Paths that exist only in the child's mounts (the private `/tmp`, `/dev/shm`): write
    /// rules for them are added here, after the mounts.
    pub child_writable: Vec<CString>,
    pub write_access: u64,
    /// Where the command runs: entered again after the mounts, so that `..` from it walks the
    /// new tree and not the one the mounts cover.
    pub cwd: CString,
    /// The seccomp filter's instructions (address, count), which live as long as the process.
    pub seccomp: Option<(usize, u16)>,
    /// The paths bind mounts come from, each opened again in the child's mount namespace (a
    /// mount must come from the caller's own) onto the descriptor number the parent holds for
    /// it, which the `Bind` steps name as `/proc/self/fd/N`.
    pub sources: Vec<(CString, RawFd)>,
    /// The write end of a pipe: the number of the stage that failed is written to it, so the
    /// parent can say which (see [`Stage`]).
    pub report: RawFd,
}

/// The stages of [`enter`], as the parent names them; mount steps are numbered from
/// `Stage::Mounts`.
pub(crate) struct Stage;

impl Stage {
    pub const NAMESPACES: u32 = 0;
    pub const LOOPBACK: u32 = 1;
    pub const TMP_RULES: u32 = 2;
    pub const CAPABILITIES: u32 = 3;
    pub const LANDLOCK: u32 = 4;
    pub const CWD: u32 = 5;
    pub const SOURCES: u32 = 6;
    pub const SECCOMP: u32 = 7;
    pub const MOUNTS: u32 = 16;
}

/// Tells the parent which stage failed, and hands the error on.
fn failed_at(report: RawFd, stage: u32, e: io::Error) -> io::Error {
    let bytes = stage.to_le_bytes();
    // SAFETY: a write of 4 bytes from the stack to a pipe the parent made.
    unsafe {
        libc::write(report, bytes.as_ptr().cast(), bytes.len());
    }
    e
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Writes `text` to `path` (a `/proc` file).
fn write_proc(path: &std::ffi::CStr, text: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: plain system calls on NUL-terminated strings that outlive them.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd == -1 {
            return Err(io::Error::last_os_error());
        }
        let bytes = text.to_bytes();
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let e = io::Error::last_os_error();
        libc::close(fd);
        if n != bytes.len() as isize {
            return Err(e);
        }
    }
    Ok(())
}

/// New user and mount namespaces (and a network one with `netns`), the process's ids mapped
/// to themselves, and mounts that never propagate back to the host.
fn enter_namespaces(maps: &IdMaps, netns: bool) -> io::Result<()> {
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS;
    if netns {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: unshare only changes this (single-threaded, forked) process's namespaces.
    check(unsafe { libc::unshare(flags) })?;
    match write_proc(c"/proc/self/setgroups", c"deny") {
        Err(e) if e.raw_os_error() != Some(libc::ENOENT) => return Err(e),
        _ => {}
    }
    write_proc(c"/proc/self/uid_map", &maps.uid)?;
    write_proc(c"/proc/self/gid_map", &maps.gid)?;
    // SAFETY: a propagation change of this namespace's mounts; the strings are static.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    })
}

/// The probe of [`crate::kernel`]: what every confined process does with namespaces.
pub(crate) fn probe(maps: &IdMaps) -> io::Result<()> {
    enter_namespaces(maps, true)?;
    run_step(&Step::Tmpfs {
        target: c"/tmp".to_owned(),
        data: c"mode=0755".to_owned(),
        readonly: false,
    })?;
    loopback_up()
}

/// Mount flags a read-only remount must keep: in a user namespace the kernel refuses to drop
/// the ones the original mount had.
fn kept_flags(target: &std::ffi::CStr) -> io::Result<libc::c_ulong> {
    // SAFETY: statvfs fills the zeroed struct we own.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
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

fn run_step(step: &Step) -> io::Result<()> {
    // SAFETY (every call below): system calls on NUL-terminated strings the plan owns.
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
            if unsafe { libc::mkdir(path.as_ptr(), 0o755) } == -1 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(e);
                }
            }
            Ok(())
        }
        Step::Touch { path } => {
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
            unsafe { libc::close(fd) };
            Ok(())
        }
        Step::Bind {
            source,
            target,
            readonly,
        } => {
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
            check(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) })
        }
    }
}

/// Brings up the loopback interface of a new network namespace, so that a command's own
/// servers and tests on 127.0.0.1 work; the host's listeners stay out of reach.
fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket for the interface ioctls, a zeroed ifreq we own, and close.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s == -1 {
            return Err(io::Error::last_os_error());
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        ifr.ifr_name[0] = b'l' as libc::c_char;
        ifr.ifr_name[1] = b'o' as libc::c_char;
        let mut r = libc::ioctl(s, libc::SIOCGIFFLAGS, &mut ifr);
        if r != -1 {
            ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            r = libc::ioctl(s, libc::SIOCSIFFLAGS, &ifr);
        }
        let e = io::Error::last_os_error();
        libc::close(s);
        if r == -1 {
            return Err(e);
        }
    }
    Ok(())
}

/// `struct landlock_path_beneath_attr`, packed as the kernel declares it.
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

fn add_write_rule(ruleset: RawFd, path: &std::ffi::CStr, access: u64) -> io::Result<()> {
    // SAFETY: an O_PATH descriptor, a rule struct on the stack, and close.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        if fd == -1 {
            return Err(io::Error::last_os_error());
        }
        let attr = PathBeneath {
            allowed_access: access,
            parent_fd: fd,
        };
        let r = libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneath,
            0u32,
        );
        let e = io::Error::last_os_error();
        libc::close(fd);
        if r == -1 {
            return Err(e);
        }
    }
    Ok(())
}

/// No capability survives the exec, even as root: the bounding and ambient sets emptied,
/// then every set cleared.
fn drop_capabilities() -> io::Result<()> {
    // SAFETY: prctl and capset on this process only, with structs on the stack.
    unsafe {
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) == -1 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINVAL) {
                    return Err(e);
                }
            }
        }
        check(libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ))?;
        #[repr(C)]
        struct Header {
            version: u32,
            pid: libc::c_int,
        }
        #[repr(C)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let header = Header {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let data = [
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        if libc::syscall(libc::SYS_capset, &header, data.as_ptr()) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Opens `path` (in this mount namespace) onto the descriptor number `slot`.
fn reopen(path: &std::ffi::CStr, slot: RawFd) -> io::Result<()> {
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

/// The whole confinement, in the child.
pub(crate) fn enter(plan: &ChildPlan) -> io::Result<()> {
    let at = |stage: u32| move |e: io::Error| failed_at(plan.report, stage, e);
    enter_namespaces(&plan.maps, plan.netns).map_err(at(Stage::NAMESPACES))?;
    for (path, slot) in &plan.sources {
        reopen(path, *slot).map_err(at(Stage::SOURCES))?;
    }
    for (i, step) in plan.steps.iter().enumerate() {
        run_step(step).map_err(at(Stage::MOUNTS + i as u32))?;
    }
    if plan.netns {
        loopback_up().map_err(at(Stage::LOOPBACK))?;
    }
    for path in &plan.child_writable {
        add_write_rule(plan.ruleset, path, plan.write_access).map_err(at(Stage::TMP_RULES))?;
    }
    drop_capabilities().map_err(at(Stage::CAPABILITIES))?;
    // SAFETY: prctl and the Landlock syscall on this process, with the ruleset the parent
    // holds open until the spawn returns.
    unsafe {
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)).map_err(at(Stage::LANDLOCK))?;
        if let Some((filter, len)) = plan.seccomp {
            let program = libc::sock_fprog {
                len,
                filter: filter as *mut libc::sock_filter,
            };
            // SECCOMP_SET_MODE_FILTER, no flags.
            if libc::syscall(
                libc::SYS_seccomp,
                1u32,
                0u32,
                &program as *const libc::sock_fprog,
            ) == -1
            {
                return Err(at(Stage::SECCOMP)(io::Error::last_os_error()));
            }
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, plan.ruleset, 0u32) == -1 {
            return Err(at(Stage::LANDLOCK)(io::Error::last_os_error()));
        }
        check(libc::chdir(plan.cwd.as_ptr())).map_err(at(Stage::CWD))?;
    }
    Ok(())
}
