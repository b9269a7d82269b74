//! The two processes of a confined tree that never exec: the keeper (outside the PID
//! namespace, the pid the caller waits for) and the init (pid 1 inside), which pass signals
//! on, reap, and end as the command ended; and the signals, pipes and descriptors they use.

use std::io;
use std::os::fd::RawFd;

use super::listen::Listening;
use super::{ChildPlan, Stage, check, write_proc};

/// The signals the keeper and the init pass on to the command (and everything else the
/// command itself decides about).
pub(super) const PASSED_ON: [libc::c_int; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// A signal set of `signals`.
pub(super) fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
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
pub(super) fn signal_fd(set: &libc::sigset_t) -> io::Result<RawFd> {
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
pub(super) fn pipe() -> io::Result<(RawFd, RawFd)> {
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
pub(super) fn keeper(init: libc::pid_t, lifeline: RawFd, alive: RawFd, status: RawFd) -> ! {
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
pub(super) fn supervise(
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

/// What the init does before it forks the command: a session of its own (no controlling
/// terminal, so nothing can reach the caller's through `/dev/tty`), death with the keeper,
/// a `/proc` of the new PID namespace (the host's processes invisible), and that namespace's
/// `pid_max` where the plan has one.
pub(super) fn init_setup(alive: RawFd, plan: &ChildPlan) -> Result<(), (u32, io::Error)> {
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
    if plan.proc_writable {
        super::add_write_rule(plan.ruleset, c"/proc", plan.write_access)
            .map_err(|e| (Stage::TMP_RULES, e))?;
    }
    super::leave_old_root().map_err(|e| (Stage::OLD_ROOT, e))?;
    if let Some(max) = &plan.pid_max {
        write_proc(c"/proc/sys/kernel/pid_max", max).map_err(|e| (Stage::LIMITS, e))?;
    }
    Ok(())
}
