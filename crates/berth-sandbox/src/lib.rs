//! berth's confinement of the processes it starts for an agent: berth's own `run_command`,
//! an ACP agent's terminals, a run's `--check`, and the agent process of `--agent-cmd`.
//!
//! A confined process (and everything it starts, for good) lives in its own user and mount
//! namespace, and under a Landlock domain:
//!
//! - **Writes** reach only its workspace's folder, a private `/tmp` and the paths the policy
//!   lists (Landlock; nothing else is writable, whatever the file modes say).
//! - **Reads** reach everything but a deny list (`~/.ssh`, `~/.aws`, berth's home but the
//!   workspace's own folder, …), which mounts hide: an empty folder that cannot be listed, or
//!   a file that cannot be opened, in its place.
//! - **Git** cannot be redirected: the folder's `.git` (a worktree's pointer, or a repository)
//!   is mounted read-only, and the repository's config, hooks and other worktrees lie outside
//!   the writable set.
//! - **Network**: for a command, a network namespace of its own (loopback only, nothing of the
//!   host's); for an agent process, one whose only way out is berth's proxy (its provider and
//!   `allow_hosts`, by name), with its provider keys kept in berth ([`MaskedKeys`]).
//! - **Processes**: no signal to, and no ptrace of, anything outside the confined tree
//!   (Landlock's scopes); no capability survives into the command, even for root.
//! - **System calls**: the kernel keyrings, io_uring, eBPF, perf events, userfaultfd, modules
//!   and kexec are refused (a seccomp filter, [`seccomp`]).
//!
//! It fails closed: where the kernel cannot do all of this, [`Policy::confine`] refuses with an
//! error naming `[sandbox] mode = "off"`; nothing ever runs unconfined by accident.
//!
//! Why by hand between fork and exec rather than by a helper binary: the child of a
//! multi-threaded process may not allocate, so the parent computes everything (the steps, as C
//! strings; the Landlock ruleset, through the `landlock` crate; the folders to mount, as open
//! descriptors) and the child only makes system calls ([`child`]).

mod child;
mod denial;
mod env;
mod identity;
mod kernel;
mod keys;
mod limits;
mod network;
mod plan;
mod policy;
mod proxy;
mod seccomp;

pub use denial::{NOTE_MARK, explain};
pub use env::{TOOLCHAINS, allowed_names};
pub use identity::{program_files, runs_berth};
pub use kernel::{AppArmorFix, PRETEND_VAR, Support, support};
pub use keys::MaskedKeys;
pub use limits::enforced as limits_enforced;
pub use network::{
    Forward, Handoff, close as close_network, forwards as network_forwards, take_handed_network,
};
pub use plan::{Confinement, PROXY_PORT};
pub use policy::{
    AgentProfile, Obeyed, Place, Policy, Sandbox, Subject, agent_hosts, agent_profile,
    agent_profiles, loopback_forwards, provider_env,
};
pub use proxy::{AllowList, Proxy, ProxyHandle};

/// Why a process could not be confined, or a policy not read.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel cannot enforce the policy: the command is refused, never run unconfined.
    #[error(
        "berth's sandbox cannot confine this command: {0}. berth runs nothing unconfined; set `[sandbox] mode = \"off\"` in the config to run commands and agents with all of your rights (see `berth doctor`)"
    )]
    Unsupported(String),
    /// A setting or a place the policy cannot use.
    #[error("{0}")]
    Invalid(String),
    /// Preparing the confinement failed (a path that cannot be opened, a ruleset refused).
    #[error("berth's sandbox could not be prepared: {0}")]
    Setup(String),
}

/// Wraps a spawn failure of a confined command: the kernel refused a step of the confinement
/// (or the program could not be started, which reads the same).
pub fn spawn_error(program: &str, e: &std::io::Error) -> String {
    format!(
        "could not start `{program}` confined: {e}. berth runs nothing unconfined; `berth doctor` says what this kernel can enforce, and `[sandbox] mode = \"off\"` turns confinement off"
    )
}

impl berth_core::Kinded for SandboxError {
    /// A kernel that cannot confine refuses the command; a bad setting is invalid; a
    /// confinement that could not be prepared, I/O.
    fn kind(&self) -> berth_core::ErrorKind {
        match self {
            SandboxError::Unsupported(_) => berth_core::ErrorKind::Refused,
            SandboxError::Invalid(_) => berth_core::ErrorKind::Invalid,
            SandboxError::Setup(_) => berth_core::ErrorKind::Io,
        }
    }
}
