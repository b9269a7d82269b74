//! A seccomp filter of the system calls no build, test or agent needs, and which either reach
//! a secret outside the files (the kernel keyrings, where a login session keeps its
//! credentials) or are much of the kernel's attack surface (io_uring, eBPF, perf events,
//! userfaultfd, modules, kexec). They fail with `EPERM`; everything else is allowed, since
//! Landlock and the namespaces already draw the lines that matter. A system call of another
//! architecture's numbering (x86_64's 32-bit entry) kills the process, so the filter cannot be
//! stepped around.
//!
//! Built once per process by seccompiler, in the parent; the child only points the kernel at
//! it.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

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

/// The filter for this architecture, as the address and length of its instructions (they
/// live for the whole process); `None` where seccompiler has no such architecture.
pub(crate) fn program() -> Option<(usize, u16)> {
    static PROGRAM: OnceLock<Option<BpfProgram>> = OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            let arch = TargetArch::try_from(std::env::consts::ARCH).ok()?;
            let rules = REFUSED
                .iter()
                .map(|n| (*n, Vec::new()))
                .collect::<BTreeMap<_, _>>();
            let filter = SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(libc::EPERM as u32),
                arch,
            )
            .ok()?;
            BpfProgram::try_from(filter).ok()
        })
        .as_ref()
        .map(|p| (p.as_ptr() as usize, p.len() as u16))
}
