//! The child's side: system calls between fork and exec, on data the parent prepared.
//!
//! Nothing here allocates, locks or formats: the child of a multi-threaded process may only
//! make async-signal-safe calls. Errors are the kernel's errno, which `spawn` hands back to
//! the parent as the spawn's error.

mod listen;
mod mounts;
mod namespaces;
mod restrict;
mod supervisor;

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

pub(crate) use listen::ProxyPlan;
pub(crate) use mounts::Step;
pub(crate) use namespaces::make_network_namespace;

use listen::Listening;
use mounts::{leave_old_root, reopen, run_step};
use namespaces::{enter_namespaces, join_namespaces, loopback_up};
use restrict::{add_write_rule, confine_command};
use supervisor::{PASSED_ON, init_setup, keeper, pipe, signal_fd, signal_set, supervise};

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
    /// The Landlock-only fallback: no namespace, no mount, no init; only the command's own
    /// confinement ([`enter_fallback`]).
    pub fallback: bool,
    pub maps: IdMaps,
    /// The workspace's user and network namespaces to join ([`crate::network`]), as
    /// descriptors the parent holds; `None`: the host's network (`network = "full"`).
    pub join: Option<(RawFd, RawFd)>,
    /// berth's proxy, the only way out of the network namespace (agents', and commands' with
    /// `network = "proxy"`).
    pub proxy: Option<ProxyPlan>,
    pub steps: Vec<Step>,
    /// The Landlock ruleset the parent made (held open by the parent's `OwnedFd`).
    pub ruleset: RawFd,
    /// Paths that exist only in the child's mounts (the private `/tmp`, `/dev/shm`): write
    /// rules for them are added here, after the mounts.
    pub child_writable: Vec<CString>,
    /// Whether the init adds a write rule for its own `/proc`, once mounted.
    pub proc_writable: bool,
    pub write_access: u64,
    /// Where the command runs: entered again after the mounts, so that `..` from it walks the
    /// new tree and not the one the mounts cover.
    pub cwd: CString,
    /// The seccomp filters' instructions (address, count), which live as long as the process.
    pub seccomp: Vec<(usize, u16)>,
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
    pub const OLD_ROOT: u32 = 15;
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

/// The probe of [`crate::kernel`]: what every confined process does with namespaces, its
/// init's `/proc` included.
pub(crate) fn probe(maps: &IdMaps) -> io::Result<std::convert::Infallible> {
    // A bind of the host's `/dev/null` into the new root, the way every source is bound.
    // SAFETY: open on a static path.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if null == -1 {
        return Err(io::Error::last_os_error());
    }
    enter_namespaces(maps, true)?;
    reopen(c"/dev/null", null)?;
    for step in [
        Step::Root {
            data: c"mode=0755,size=64k".to_owned(),
        },
        Step::Mkdir {
            path: c"/proc".to_owned(),
        },
        Step::Touch {
            path: c"/null".to_owned(),
        },
        Step::Bind {
            slot: null,
            target: c"/null".to_owned(),
            attrs: libc::MOUNT_ATTR_RDONLY | libc::MOUNT_ATTR_NOSUID,
        },
    ] {
        run_step(&step)?;
    }
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
            let left = if r == -1 {
                Err(io::Error::last_os_error())
            } else {
                leave_old_root()
            };
            let errno = match left {
                Err(e) => e.raw_os_error().unwrap_or(libc::EPERM),
                Ok(()) => 0,
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
        // Nothing is left to exec in the new root, which holds only `/null`: the probe ends
        // here, and the spawn reads its status as the command's.
        libc::_exit(0)
    }
}

/// Joins the tree's cgroup (its process and memory limits), before anything else.
fn join_cgroup(procs: &std::ffi::CStr) -> io::Result<()> {
    write_proc(procs, c"0")
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
    if plan.fallback {
        return enter_fallback(plan);
    }
    let at = |stage: u32| move |e: io::Error| failed_at(plan.report, stage, e);
    if let Some(procs) = &plan.cgroup_procs {
        join_cgroup(procs).map_err(at(Stage::CGROUP))?;
    }
    match plan.join {
        Some((user, net)) => join_namespaces(user, net),
        None => enter_namespaces(&plan.maps, false),
    }
    .map_err(at(Stage::NAMESPACES))?;
    for (path, slot) in &plan.sources {
        reopen(path, *slot).map_err(at(Stage::SOURCES))?;
    }
    for (i, step) in plan.steps.iter().enumerate() {
        run_step(step).map_err(at(Stage::MOUNTS + i as u32))?;
    }
    let listening = Listening::open(plan.proxy.as_ref());
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

/// The Landlock-only fallback's child: the tree's cgroup, a session of its own (no
/// controlling terminal to type into), death with berth's thread that spawned it (there is
/// no keeper to watch berth's lifeline), and the command's own confinement.
fn enter_fallback(plan: &ChildPlan) -> io::Result<()> {
    let at = |stage: u32| move |e: io::Error| failed_at(plan.report, stage, e);
    if let Some(procs) = &plan.cgroup_procs {
        join_cgroup(procs).map_err(at(Stage::CGROUP))?;
    }
    // SAFETY: setsid and prctl on this process.
    unsafe {
        if libc::setsid() == -1 {
            return Err(at(Stage::SESSION)(io::Error::last_os_error()));
        }
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))
            .map_err(at(Stage::SUPERVISOR))?;
    }
    confine_command(plan)
}
