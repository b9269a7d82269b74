//! What the command's own process gives up last, after the mounts and before the exec:
//! capabilities, new privileges, system calls (seccomp), writes (Landlock) and the caller's
//! descriptors; and the Landlock rules for paths that exist only in the child's mounts.

use std::io;
use std::os::fd::RawFd;

use super::{ChildPlan, Stage, check, failed_at};

/// `struct landlock_path_beneath_attr`, packed as the kernel declares it.
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

pub(super) fn add_write_rule(ruleset: RawFd, path: &std::ffi::CStr, access: u64) -> io::Result<()> {
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
/// then every set cleared. (Emptying the bounding set needs `CAP_SETPCAP`, which a user
/// without a namespace of its own lacks: it has no capability to lose, and `no_new_privs`
/// keeps it from gaining one.)
fn drop_capabilities() -> io::Result<()> {
    // SAFETY: prctl and capset on this process only, with structs on the stack.
    unsafe {
        let bounding = has_setpcap();
        for cap in (0..64).filter(|_| bounding) {
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

/// `CAP_SETPCAP`'s number (linux/capability.h).
const CAP_SETPCAP: u32 = 8;

/// Whether this process's effective set holds `CAP_SETPCAP` (in its own user namespace).
fn has_setpcap() -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    let header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [0u32; 6];
    // SAFETY: capget into a buffer of the size _LINUX_CAPABILITY_VERSION_3 writes.
    let r = unsafe { libc::syscall(libc::SYS_capget, &header, data.as_mut_ptr()) };
    r == 0 && data[0] & (1 << CAP_SETPCAP) != 0
}

/// What the command's own process does last: limits, no capability, `no_new_privs`, seccomp,
/// Landlock, the folder, and every descriptor above 2 closed on exec.
pub(super) fn confine_command(plan: &ChildPlan) -> io::Result<()> {
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
        for &(filter, len) in &plan.seccomp {
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
