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
    /// berth's proxy, the only way out of the network namespace (agents', and commands' with
    /// `network = "proxy"`).
    pub proxy: Option<ProxyPlan>,
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
    /// The read end of berth's lifeline ([`crate::lifeline`]): it reads end-of-file when
    /// berth is gone, however it died, and the keeper then kills the confined tree.
    pub lifeline: RawFd,
    /// `RLIMIT_NPROC` for the command: counted per user namespace (Linux 5.14 and newer), so
    /// per confined tree; not enforced for root, whose limit is `pid_max` or the cgroup's.
    pub max_processes: Option<u64>,
    /// The tree's own PID namespace's `pid_max` (Linux 6.14 and newer keep one per namespace),
    /// which the init writes: root's process limit, since `RLIMIT_NPROC` never holds root.
    /// Text, so that the forked init need not format a number.
    pub pid_max: Option<CString>,
    /// The `cgroup.procs` file of the tree's own cgroup (its process and memory limits),
    /// which the first process joins before anything else.
    pub cgroup_procs: Option<CString>,
    /// Where berth's command line and environment lie in its memory ([`own_arguments`]):
    /// the init, a fork of berth, blanks its copy, or the command would read berth's command
    /// line (`berth serve --token …`) in `/proc/1/cmdline`.
    pub arguments: Option<(usize, usize)>,
}

/// The span of this process's memory that holds its command line and environment
/// (`arg_start` to `env_end` of `/proc/self/stat`).
pub(crate) fn own_arguments() -> Option<(usize, usize)> {
    static SPAN: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();
    *SPAN.get_or_init(read_own_arguments)
}

fn read_own_arguments() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command's name, which may hold spaces and parentheses.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 48 (arg_start) is the 46th after the name; 51 (env_end) the 49th.
    let field = |n: usize| fields.get(n - 3)?.parse::<usize>().ok();
    let (start, end) = (field(48)?, field(51)?);
    (start > 0 && end > start).then_some((start, end))
}
/// The stages of [`enter`], as the parent names them; mount steps are numbered from
/// `Stage::MOUNTS`.
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
    pub const SUPERVISOR: u32 = 8;
    pub const PROC: u32 = 9;
    pub const SESSION: u32 = 10;
    pub const LIMITS: u32 = 11;
    pub const DESCRIPTORS: u32 = 12;
    pub const CGROUP: u32 = 13;
    pub const PROXY: u32 = 14;
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

/// New user, mount and PID namespaces (and a network one with `netns`), the process's ids
/// mapped to themselves, and mounts that never propagate back to the host. The PID namespace
/// takes effect for the process's next child, which becomes its init.
fn enter_namespaces(maps: &IdMaps, netns: bool) -> io::Result<()> {
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID;
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

/// The probe of [`crate::kernel`]: what every confined process does with namespaces, its
/// init's `/proc` included.
pub(crate) fn probe(maps: &IdMaps) -> io::Result<()> {
    enter_namespaces(maps, true)?;
    run_step(&Step::Tmpfs {
        target: c"/tmp".to_owned(),
        data: c"mode=0755".to_owned(),
        readonly: false,
    })?;
    loopback_up()?;
    // SAFETY: fork in this single-threaded child; the init only mounts and exits.
    unsafe {
        let init = libc::fork();
        if init == -1 {
            return Err(io::Error::last_os_error());
        }
        if init == 0 {
            let r = libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            );
            let errno = if r == -1 {
                io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EPERM)
            } else {
                0
            };
            libc::_exit(errno.min(255));
        }
        let mut status = 0;
        if libc::waitpid(init, &mut status, 0) == -1 {
            return Err(io::Error::last_os_error());
        }
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            // The init's errno, as is: this child may not allocate a message.
            let errno = match libc::WEXITSTATUS(status) {
                0 => libc::EPERM,
                e => e,
            };
            return Err(io::Error::from_raw_os_error(errno));
        }
    }
    Ok(())
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
fn run_step(step: &Step) -> io::Result<()> {
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

/// The signals the keeper and the init pass on to the command (and everything else the
/// command itself decides about).
const PASSED_ON: [libc::c_int; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// A signal set of `signals`.
fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset and sigaddset fill a set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, *s);
        }
        set
    }
}

/// Blocks `set` and returns a signalfd that reads it.
fn signal_fd(set: &libc::sigset_t) -> io::Result<RawFd> {
    // SAFETY: sigprocmask and signalfd on a set we own.
    unsafe {
        check(libc::sigprocmask(
            libc::SIG_BLOCK,
            set,
            std::ptr::null_mut(),
        ))?;
        let fd = libc::signalfd(-1, set, libc::SFD_CLOEXEC);
        if fd == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }
}

/// Reads one signal from a signalfd.
fn read_signal(fd: RawFd) -> Option<libc::c_int> {
    // SAFETY: a read into a zeroed struct of the size the kernel writes.
    unsafe {
        let mut info: libc::signalfd_siginfo = std::mem::zeroed();
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        let n = libc::read(fd, (&mut info as *mut libc::signalfd_siginfo).cast(), size);
        (n == size as isize).then_some(info.ssi_signo as libc::c_int)
    }
}

/// A poll entry for `fd` becoming readable (or reaching its end).
fn watch(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// A pipe, both ends closed on exec, as (read, write).
fn pipe() -> io::Result<(RawFd, RawFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the array.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((fds[0], fds[1]))
}

/// Closes every descriptor but `keep` (at most 20; negative ones ignored): what a process of
/// ours that never execs holds must not keep a pipe of the caller's open, nor anything else.
fn close_except(keep: &[RawFd]) {
    let mut sorted = [-1; 20];
    let n = keep.len().min(sorted.len());
    sorted[..n].copy_from_slice(&keep[..n]);
    sorted.sort_unstable();
    let mut next: libc::c_uint = 0;
    for fd in sorted.into_iter().filter(|fd| *fd >= 0) {
        let fd = fd as libc::c_uint;
        if fd > next {
            // SAFETY: closing descriptors of this process.
            unsafe { libc::syscall(libc::SYS_close_range, next, fd - 1, 0u32) };
        }
        next = fd + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, next, libc::c_uint::MAX, 0u32) };
}

/// Ends this process the way `status` (a wait status) says the command ended: by the same
/// signal, or with the same exit code. Never returns.
fn end_as(status: libc::c_int) -> ! {
    // SAFETY: plain system calls on this process; _exit never returns.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(sig, libc::SIG_DFL);
            let set = signal_set(&[sig]);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            1
        })
    }
}

/// The first process (the one the caller spawned and waits for), once it has made the
/// namespaces and forked their init: it stays outside the PID namespace, passes signals on to
/// the init, kills the whole tree when berth is gone (the lifeline reads end-of-file), and
/// ends as the command ended.
fn keeper(init: libc::pid_t, lifeline: RawFd, alive: RawFd, status: RawFd) -> ! {
    // SAFETY: system calls on descriptors this process owns, and on the init it forked.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, init, 0u32) as RawFd;
        let set = signal_set(&PASSED_ON);
        let sigfd = signal_fd(&set).unwrap_or(-1);
        close_except(&[lifeline, alive, status, pidfd, sigfd]);
        let mut fds = [watch(pidfd), watch(lifeline), watch(sigfd)];
        loop {
            if libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) == -1 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                // Without a poll, waiting for the init is all that is left.
                break;
            }
            if fds[1].revents != 0 {
                // berth is gone: so is everything it started for an agent.
                libc::kill(init, libc::SIGKILL);
                fds[1].fd = -1;
            }
            if fds[2].revents != 0
                && let Some(sig) = read_signal(sigfd)
            {
                libc::kill(init, sig);
            }
            if fds[0].revents != 0 || pidfd < 0 {
                break;
            }
        }
        let mut raw = 0;
        while libc::waitpid(init, &mut raw, 0) == -1
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
        // The init writes the command's own status before it ends; without it (the init was
        // killed) the init's status is the tree's.
        let mut bytes = [0u8; 4];
        if libc::read(status, bytes.as_mut_ptr().cast(), 4) == 4 {
            raw = libc::c_int::from_le_bytes(bytes);
        }
        end_as(raw)
    }
}

/// The init of the PID namespace, once it has forked the command: it reaps what the tree
/// leaves, passes signals on to the command, and ends when the command ends, which ends
/// every other process of the namespace with it (the kernel kills them). It also ends when
/// the keeper is gone (`alive` reads end-of-file).
fn supervise(
    command: libc::pid_t,
    sigfd: RawFd,
    alive: RawFd,
    status: RawFd,
    proxy: &Listening,
) -> ! {
    let mut keep = [-1; 4 + crate::plan::MAX_LISTENERS];
    keep[..4].copy_from_slice(&[sigfd, alive, status, proxy.channel]);
    for (slot, (fd, _)) in keep[4..].iter_mut().zip(&proxy.fds[..proxy.count]) {
        *slot = *fd;
    }
    close_except(&keep);
    // SAFETY: system calls on descriptors this process owns and on its own children.
    unsafe {
        let mut fds = [watch(-1); 2 + crate::plan::MAX_LISTENERS];
        fds[0] = watch(sigfd);
        fds[1] = watch(alive);
        for (slot, (fd, _)) in fds[2..].iter_mut().zip(&proxy.fds[..proxy.count]) {
            *slot = watch(*fd);
        }
        let watched = 2 + proxy.count;
        loop {
            if libc::poll(fds.as_mut_ptr(), watched as libc::nfds_t, -1) == -1 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                libc::_exit(1);
            }
            if fds[1].revents != 0 {
                libc::_exit(1);
            }
            for (i, (fd, index)) in proxy.fds[..proxy.count].iter().enumerate() {
                if fds[2 + i].revents != 0 {
                    proxy.pass_on(*fd, *index);
                }
            }
            if fds[0].revents == 0 {
                continue;
            }
            match read_signal(sigfd) {
                Some(libc::SIGCHLD) | None => {}
                Some(sig) => {
                    libc::kill(command, sig);
                    continue;
                }
            }
            loop {
                let mut raw = 0;
                let pid = libc::waitpid(-1, &mut raw, libc::WNOHANG);
                if pid <= 0 {
                    break;
                }
                if pid == command {
                    let bytes = raw.to_le_bytes();
                    libc::write(status, bytes.as_ptr().cast(), bytes.len());
                    libc::_exit(0);
                }
            }
        }
    }
}

/// The init's listeners on the namespace's loopback (the proxy's and the forwards'), each
/// with its index on the channel to berth's proxy; none without a proxy.
struct Listening {
    channel: RawFd,
    fds: [(RawFd, u8); crate::plan::MAX_LISTENERS],
    count: usize,
}

impl Listening {
    /// Makes the listeners of `plan` in this (the new) network namespace. An IPv6 one that
    /// cannot be made (no IPv6 here) is left out.
    fn open(plan: Option<&ProxyPlan>) -> io::Result<Listening> {
        let mut listening = Listening {
            channel: -1,
            fds: [(-1, 0); crate::plan::MAX_LISTENERS],
            count: 0,
        };
        let Some(plan) = plan else {
            return Ok(listening);
        };
        listening.channel = plan.channel;
        for l in plan.listeners.iter().take(crate::plan::MAX_LISTENERS) {
            match l.open() {
                Ok(fd) => {
                    listening.fds[listening.count] = (fd, l.index);
                    listening.count += 1;
                }
                Err(_) if l.family == libc::AF_INET6 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(listening)
    }

    /// Accepts a connection on `fd` and hands it to berth's proxy with `index`.
    fn pass_on(&self, fd: RawFd, index: u8) {
        // SAFETY: accept4 on a listener this process owns; the accepted descriptor is closed
        // here once sent (the proxy holds its own copy).
        unsafe {
            let conn = libc::accept4(
                fd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            );
            if conn == -1 {
                return;
            }
            let _ = crate::proxy::send_fd(
                std::os::fd::BorrowedFd::borrow_raw(self.channel),
                std::os::fd::BorrowedFd::borrow_raw(conn),
                index,
            );
            libc::close(conn);
        }
    }
}

/// Where the init listens, made by the parent: a loopback address and port of the new
/// network namespace, and the index its connections carry to berth's proxy.
pub(crate) struct Listen {
    pub index: u8,
    family: libc::c_int,
    addr: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl std::fmt::Debug for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listen")
            .field("index", &self.index)
            .field("family", &self.family)
            .finish_non_exhaustive()
    }
}

impl Listen {
    /// 127.0.0.1:`port`.
    pub fn v4(index: u8, port: u16) -> Listen {
        // SAFETY: a zeroed sockaddr_storage is valid; a sockaddr_in fits in it.
        unsafe {
            let mut addr: libc::sockaddr_storage = std::mem::zeroed();
            let sin = &mut *(&mut addr as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>();
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = port.to_be();
            sin.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            Listen {
                index,
                family: libc::AF_INET,
                addr,
                len: std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            }
        }
    }

    /// [::1]:`port`.
    pub fn v6(index: u8, port: u16) -> Listen {
        // SAFETY: a zeroed sockaddr_storage is valid; a sockaddr_in6 fits in it.
        unsafe {
            let mut addr: libc::sockaddr_storage = std::mem::zeroed();
            let sin6 =
                &mut *(&mut addr as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = port.to_be();
            sin6.sin6_addr.s6_addr = std::net::Ipv6Addr::LOCALHOST.octets();
            Listen {
                index,
                family: libc::AF_INET6,
                addr,
                len: std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            }
        }
    }

    /// A non-blocking listener, closed on exec, at this address.
    fn open(&self) -> io::Result<RawFd> {
        // SAFETY: socket, setsockopt, bind and listen on a descriptor made here, with the
        // address this value owns.
        unsafe {
            let fd = libc::socket(
                self.family,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            );
            if fd == -1 {
                return Err(io::Error::last_os_error());
            }
            let one: libc::c_int = 1;
            let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            if self.family == libc::AF_INET6 {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_IPV6,
                    libc::IPV6_V6ONLY,
                    (&one as *const libc::c_int).cast(),
                    size,
                );
            }
            let addr = (&self.addr as *const libc::sockaddr_storage).cast::<libc::sockaddr>();
            if libc::bind(fd, addr, self.len) == -1 || libc::listen(fd, 128) == -1 {
                let e = io::Error::last_os_error();
                libc::close(fd);
                return Err(e);
            }
            Ok(fd)
        }
    }
}

/// The init's side of berth's proxy.
#[derive(Debug)]
pub(crate) struct ProxyPlan {
    /// The init's end of the channel to berth's proxy (held open by the parent's `OwnedFd`).
    pub channel: RawFd,
    pub listeners: Vec<Listen>,
}

/// What the init does before it forks the command: a session of its own (no controlling
/// terminal, so nothing can reach the caller's through `/dev/tty`), death with the keeper,
/// a `/proc` of the new PID namespace (the host's processes invisible), and that namespace's
/// `pid_max` where the plan has one.
fn init_setup(alive: RawFd, plan: &ChildPlan) -> Result<(), (u32, io::Error)> {
    // SAFETY: prctl, setsid, poll and mount on this process, with static strings.
    unsafe {
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))
            .map_err(|e| (Stage::SUPERVISOR, e))?;
        // Not to be traced or read through `/proc` by the command it starts.
        check(libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0))
            .map_err(|e| (Stage::SUPERVISOR, e))?;
        // The keeper may have died before PR_SET_PDEATHSIG: its pipe says so.
        let mut fd = watch(alive);
        if libc::poll(&mut fd, 1, 0) == 1 {
            libc::_exit(1);
        }
        if libc::setsid() == -1 {
            return Err((Stage::SESSION, io::Error::last_os_error()));
        }
        if let Some((start, end)) = plan.arguments {
            // This process's own copy of berth's stack: nothing reads it any more.
            libc::memset(start as *mut libc::c_void, 0, end - start);
        }
        check(libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ))
        .map_err(|e| (Stage::PROC, e))?;
    }
    if let Some(max) = &plan.pid_max {
        write_proc(c"/proc/sys/kernel/pid_max", max).map_err(|e| (Stage::LIMITS, e))?;
    }
    Ok(())
}

/// Joins the tree's cgroup (its process and memory limits), before anything else.
fn join_cgroup(procs: &std::ffi::CStr) -> io::Result<()> {
    write_proc(procs, c"0")
}

/// What the command's own process does last: limits, no capability, `no_new_privs`, seccomp,
/// Landlock, the folder, and every descriptor above 2 closed on exec.
fn confine_command(plan: &ChildPlan) -> io::Result<()> {
    let at = |stage: u32| move |e: io::Error| failed_at(plan.report, stage, e);
    if let Some(max) = plan.max_processes {
        let limit = libc::rlimit {
            rlim_cur: max,
            rlim_max: max,
        };
        // SAFETY: setrlimit on this process with a struct on the stack.
        check(unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &limit) }).map_err(at(Stage::LIMITS))?;
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
        // Nothing berth's caller had open (a file open for writing, a folder of `$HOME`) is
        // usable inside: every descriptor above 2 closes on exec. (CLOSE_RANGE_CLOEXEC.)
        if libc::syscall(
            libc::SYS_close_range,
            3u32,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) == -1
        {
            return Err(at(Stage::DESCRIPTORS)(io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// The whole confinement, in the child the caller spawned. It becomes three processes:
///
/// - this one, the **keeper**, the pid the caller knows: it makes the namespaces and the
///   mounts, forks the init, and then only waits (see [`keeper`]);
/// - the **init** (pid 1 of the new PID namespace): a session of its own, a fresh `/proc`; it
///   forks the command and reaps (see [`supervise`]);
/// - the **command** (pid 2), which returns from here to be exec'd by the caller's spawn.
///
/// A failure before the fork is this process's error, as the spawn's; a failure in the init
/// is handed to the command (a fork copies memory), which reports it the same way.
pub(crate) fn enter(plan: &ChildPlan) -> io::Result<()> {
    let at = |stage: u32| move |e: io::Error| failed_at(plan.report, stage, e);
    if let Some(procs) = &plan.cgroup_procs {
        join_cgroup(procs).map_err(at(Stage::CGROUP))?;
    }
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
    let listening = Listening::open(plan.proxy.as_ref()).map_err(at(Stage::PROXY))?;
    for path in &plan.child_writable {
        add_write_rule(plan.ruleset, path, plan.write_access).map_err(at(Stage::TMP_RULES))?;
    }
    let (alive_r, alive_w) = pipe().map_err(at(Stage::SUPERVISOR))?;
    let (status_r, status_w) = pipe().map_err(at(Stage::SUPERVISOR))?;
    // SAFETY: fork in a single-threaded process (this child of the spawn).
    let init = unsafe { libc::fork() };
    if init == -1 {
        return Err(at(Stage::SUPERVISOR)(io::Error::last_os_error()));
    }
    if init > 0 {
        keeper(init, plan.lifeline, alive_w, status_r);
    }
    // SAFETY: closing this process's copies of the keeper's ends.
    unsafe {
        libc::close(alive_w);
        libc::close(status_r);
    }
    let setup = init_setup(alive_r, plan);
    let passed = {
        let mut all = [0; PASSED_ON.len() + 1];
        all[..PASSED_ON.len()].copy_from_slice(&PASSED_ON);
        all[PASSED_ON.len()] = libc::SIGCHLD;
        signal_set(&all)
    };
    let sigfd = signal_fd(&passed);
    // SAFETY: fork in the single-threaded init.
    let command = unsafe { libc::fork() };
    if command == 0 {
        // SAFETY: restoring the signal mask the spawn set, and closing the init's own ends.
        unsafe {
            libc::sigprocmask(libc::SIG_UNBLOCK, &passed, std::ptr::null_mut());
            libc::close(alive_r);
            libc::close(status_w);
            if let Ok(fd) = &sigfd {
                libc::close(*fd);
            }
        }
        let ready = setup.and(sigfd.map(drop).map_err(|e| (Stage::SUPERVISOR, e)));
        if let Err((stage, e)) = ready {
            return Err(failed_at(plan.report, stage, e));
        }
        return confine_command(plan);
    }
    match (command, sigfd) {
        (1.., Ok(sigfd)) => supervise(command, sigfd, alive_r, status_w, &listening),
        // Nothing to supervise: the tree ends here, with the failure as its status.
        // SAFETY: _exit never returns.
        _ => unsafe { libc::_exit(126) },
    }
}
