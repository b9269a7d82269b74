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
//! Only the socket families a build, a test or an agent needs are allowed: `AF_UNIX`,
//! `AF_INET`, `AF_INET6`, and `AF_NETLINK` for routes only. `AF_VSOCK` is not namespaced (a
//! connect to CID 2 reaches the hypervisor's side); netfilter's netlink, packet sockets and
//! the rest are the usual privilege-escalation surface.
//!
//! Nothing can be made setuid or setgid: `chmod`, `fchmod`, `fchmodat`, `fchmodat2`,
//! `mknod`, `mknodat` and the creating `open`, `openat` and `creat` are refused a mode with
//! `S_ISUID` or `S_ISGID`, so no file a confined process leaves in its worktree runs as its
//! owner later. `openat2`, whose mode lies in a struct a filter cannot read, gets `ENOSYS`,
//! and callers fall back to `openat`.
//!
//! No user namespace can be made (`unshare` and `clone` with `CLONE_NEWUSER`; `clone3`, whose
//! flags lie in a struct, gets `ENOSYS`, and glibc falls back to `clone`), unless `[sandbox]
//! nested_namespaces` says so: inside one a process has every capability again, over
//! netfilter and the rest of the kernel's namespaced surface.
//!
//! In the Landlock-only fallback, which has no network namespace, `socket(AF_UNIX)` and UDP
//! are refused too: Landlock does not mediate a Unix socket's connect, nor UDP before ABI 8.
//!
//! Below Landlock ABI 3, which cannot refuse `truncate(2)` outside the writable folders,
//! `truncate` is refused as well (`ftruncate` needs a descriptor opened for writing, which
//! Landlock does refuse).
//!
//! Built once per process by seccompiler, in the parent; the child only points the kernel at
//! it. Two filters: those refused with `EPERM`, and those with `ENOSYS`.

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

/// The socket families allowed.
const FAMILIES: [u64; 4] = [
    libc::AF_UNIX as u64,
    libc::AF_INET as u64,
    libc::AF_INET6 as u64,
    libc::AF_NETLINK as u64,
];

/// The mode bits nothing may set.
const SET_ID: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];

/// The system calls that set a mode, and the argument that holds it.
const MODE_SETTERS: [(libc::c_long, u8); 6] = [
    (libc::SYS_chmod, 1),
    (libc::SYS_fchmod, 1),
    (libc::SYS_fchmodat, 2),
    (libc::SYS_fchmodat2, 2),
    (libc::SYS_mknod, 1),
    (libc::SYS_mknodat, 2),
];

/// The system calls that create a file, with the arguments of their flags and mode.
const CREATORS: [(libc::c_long, u8, u8); 2] = [(libc::SYS_open, 1, 2), (libc::SYS_openat, 2, 3)];

/// What the filters refuse beyond the fixed lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Refuse {
    /// For kernels whose Landlock cannot refuse it.
    pub truncate: bool,
    /// `CLONE_NEWUSER`, unless `[sandbox] nested_namespaces`.
    pub user_namespaces: bool,
    /// `socket(AF_UNIX)` and UDP: the Landlock-only fallback, where no network namespace
    /// keeps a process from the host's sockets (`socketpair` stays).
    pub unix_and_udp: bool,
}

/// The filters for this architecture, each as the address and length of its instructions
/// (they live for the whole process); empty where seccompiler has no such architecture.
pub(crate) fn programs(refuse: Refuse) -> Vec<(usize, u16)> {
    static PROGRAMS: [OnceLock<Vec<BpfProgram>>; 4] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let index = usize::from(refuse.truncate) + 2 * usize::from(refuse.user_namespaces);
    PROGRAMS[index]
        .get_or_init(|| build(refuse).unwrap_or_default())
        .iter()
        .map(|p| (p.as_ptr() as usize, p.len() as u16))
        .collect()
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Option<SeccompCondition> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).ok()
}

fn rule(conditions: Vec<Option<SeccompCondition>>) -> Option<SeccompRule> {
    SeccompRule::new(conditions.into_iter().collect::<Option<Vec<_>>>()?).ok()
}

/// The rules of `socket(2)`: a family not allowed, netlink but for routes, and the
/// protocols Landlock does not see.
fn socket_rules(unix_and_udp: bool) -> Option<Vec<SeccompRule>> {
    let mut rules = vec![rule(
        FAMILIES
            .iter()
            .map(|f| condition(0, SeccompCmpOp::Ne, *f))
            .collect(),
    )?];
    rules.push(rule(vec![
        condition(0, SeccompCmpOp::Eq, libc::AF_NETLINK as u64),
        condition(2, SeccompCmpOp::Ne, libc::NETLINK_ROUTE as u64),
    ])?);
    for protocol in REFUSED_PROTOCOLS {
        rules.push(rule(vec![condition(2, SeccompCmpOp::Eq, protocol)])?);
    }
    if unix_and_udp {
        rules.push(rule(vec![condition(
            0,
            SeccompCmpOp::Eq,
            libc::AF_UNIX as u64,
        )])?);
        // The type's low bits, past SOCK_CLOEXEC and SOCK_NONBLOCK.
        for family in [libc::AF_INET, libc::AF_INET6] {
            rules.push(rule(vec![
                condition(0, SeccompCmpOp::Eq, family as u64),
                condition(1, SeccompCmpOp::MaskedEq(0xf), libc::SOCK_DGRAM as u64),
            ])?);
        }
    }
    Some(rules)
}

/// A mode with a set-id bit in argument `arg`, when all of `also` hold too.
fn set_id_rules(arg: u8, also: &[(u8, u64)]) -> Option<Vec<SeccompRule>> {
    SET_ID
        .iter()
        .map(|bit| {
            let mut conditions = vec![condition(arg, SeccompCmpOp::MaskedEq(*bit), *bit)];
            conditions.extend(
                also.iter()
                    .map(|(a, flag)| condition(*a, SeccompCmpOp::MaskedEq(*flag), *flag)),
            );
            rule(conditions)
        })
        .collect()
}

fn build(refuse: Refuse) -> Option<Vec<BpfProgram>> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).ok()?;
    let mut rules = REFUSED
        .iter()
        .map(|n| (*n, Vec::new()))
        .collect::<BTreeMap<_, _>>();
    if refuse.truncate {
        rules.insert(libc::SYS_truncate, Vec::new());
    }
    let ioctls = REFUSED_IOCTLS
        .iter()
        .map(|request| rule(vec![condition(1, SeccompCmpOp::Eq, *request)]))
        .collect::<Option<Vec<_>>>()?;
    rules.insert(libc::SYS_ioctl, ioctls);
    rules.insert(libc::SYS_socket, socket_rules(refuse.unix_and_udp)?);
    for (call, arg) in MODE_SETTERS {
        rules.insert(call, set_id_rules(arg, &[])?);
    }
    rules.insert(libc::SYS_creat, set_id_rules(1, &[])?);
    for (call, flags, mode) in CREATORS {
        let mut creating = set_id_rules(mode, &[(flags, libc::O_CREAT as u64)])?;
        creating.extend(set_id_rules(mode, &[(flags, libc::O_TMPFILE as u64)])?);
        rules.insert(call, creating);
    }
    let mut enosys: BTreeMap<libc::c_long, Vec<SeccompRule>> =
        BTreeMap::from([(libc::SYS_openat2, Vec::new())]);
    if refuse.user_namespaces {
        let newuser = libc::CLONE_NEWUSER as u64;
        for call in [libc::SYS_unshare, libc::SYS_clone] {
            rules.insert(
                call,
                vec![rule(vec![condition(
                    0,
                    SeccompCmpOp::MaskedEq(newuser),
                    newuser,
                )])?],
            );
        }
        enosys.insert(libc::SYS_clone3, Vec::new());
    }
    let filter = |rules, errno: i32| {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .ok()?;
        BpfProgram::try_from(filter).ok()
    };
    Some(vec![
        filter(rules, libc::EPERM)?,
        filter(enosys, libc::ENOSYS)?,
    ])
}
