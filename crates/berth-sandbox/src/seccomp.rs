//! A seccomp filter of the system calls no build, test or agent needs, and which either reach
//! a secret outside the files (the kernel keyrings, where a login session keeps its
//! credentials) or are much of the kernel's attack surface (io_uring, eBPF, perf events,
//! userfaultfd, modules, kexec). They fail with `EPERM`; everything else is allowed, since
//! Landlock and the namespaces already draw the lines that matter. A system call of another
//! architecture's numbering (x86_64's 32-bit entry) kills the process, so the filter cannot be
//! stepped around.
//!
//! Two ioctls are refused too, whatever descriptor they name: `TIOCSTI`, which pushes input
//! into a terminal (a command that reached the user's terminal could type into the shell
//! there; CVE-2017-5226), and `TIOCLINUX`, which does the same on a Linux console. The new
//! session every confined tree starts in is the first wall; this is the second.
//!
//! Sockets of the protocols Landlock's port rules do not see are refused too: MPTCP
//! (`socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)` connected to a host listener whose plain
//! TCP port was refused) and SCTP.
//!
//! Below Landlock ABI 3, which cannot refuse `truncate(2)` outside the writable folders,
//! `truncate` is refused as well (`ftruncate` needs a descriptor opened for writing, which
//! Landlock does refuse).
//!
//! Built once per process by seccompiler, in the parent; the child only points the kernel at
//! it.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The system calls refused.
const REFUSED: [libc::c_long; 14] = [
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_keyctl,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
];

/// The ioctl requests refused (compared as 32 bits, as the kernel reads them). The cast is
/// needed where libc's request type is not `u64` (musl's is `c_int`).
#[allow(clippy::unnecessary_cast)]
const REFUSED_IOCTLS: [u64; 2] = [libc::TIOCSTI as u64, libc::TIOCLINUX as u64];

/// The socket protocols refused: those Landlock's TCP port rules do not cover.
const REFUSED_PROTOCOLS: [u64; 2] = [libc::IPPROTO_MPTCP as u64, libc::IPPROTO_SCTP as u64];

/// The filter for this architecture, as the address and length of its instructions (they
/// live for the whole process); `None` where seccompiler has no such architecture.
/// `refuse_truncate`: for kernels whose Landlock cannot.
pub(crate) fn program(refuse_truncate: bool) -> Option<(usize, u16)> {
    static PROGRAMS: [OnceLock<Option<BpfProgram>>; 2] = [OnceLock::new(), OnceLock::new()];
    PROGRAMS[usize::from(refuse_truncate)]
        .get_or_init(|| build(refuse_truncate))
        .as_ref()
        .map(|p| (p.as_ptr() as usize, p.len() as u16))
}

fn build(refuse_truncate: bool) -> Option<BpfProgram> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).ok()?;
    let mut rules = REFUSED
        .iter()
        .map(|n| (*n, Vec::new()))
        .collect::<BTreeMap<_, _>>();
    if refuse_truncate {
        rules.insert(libc::SYS_truncate, Vec::new());
    }
    let ioctls = REFUSED_IOCTLS
        .iter()
        .map(|request| {
            let cond =
                SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *request)
                    .ok()?;
            SeccompRule::new(vec![cond]).ok()
        })
        .collect::<Option<Vec<_>>>()?;
    rules.insert(libc::SYS_ioctl, ioctls);
    let protocols = REFUSED_PROTOCOLS
        .iter()
        .map(|protocol| {
            let cond =
                SeccompCondition::new(2, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *protocol)
                    .ok()?;
            SeccompRule::new(vec![cond]).ok()
        })
        .collect::<Option<Vec<_>>>()?;
    rules.insert(libc::SYS_socket, protocols);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .ok()?;
    BpfProgram::try_from(filter).ok()
}
