//! `[sandbox]`: how far the commands and agent processes berth starts are confined, read
//! here and enforced by berth-sandbox.

use serde::{Deserialize, Serialize};

/// Whether commands and agent processes berth starts are confined (`[sandbox] mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Confined; refused where the kernel cannot confine.
    #[default]
    On,
    /// Unconfined, as before berth had a sandbox: the user's rights.
    Off,
}

/// What a confined process may reach on the network (`[sandbox] network`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxNetwork {
    /// Commands reach nothing; an agent process reaches its provider and `allow_hosts`, by
    /// name, through berth's proxy.
    #[default]
    Off,
    /// Commands too reach `allow_hosts` through berth's proxy (a build fetching from a
    /// registry).
    Proxy,
    /// Everything the user can reach.
    Full,
}

/// What confines a command where user namespaces are refused (`[sandbox] fallback`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxFallback {
    /// Nothing: every command and agent process is refused (fail closed).
    #[default]
    None,
    /// Landlock and seccomp alone: commands read only the allow list and write only their
    /// folders, with no TCP; agents are still refused.
    Landlock,
}

/// The confinement of every command and agent process berth starts (`[sandbox]`). Paths may
/// start with `~/`. See docs/sandbox.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxSettings {
    pub mode: SandboxMode,
    pub network: SandboxNetwork,
    /// Hosts reachable through berth's proxy, by name: `host:port`, `*.example.com:443`, a
    /// bare name (port 443) or a URL.
    pub allow_hosts: Vec<String>,
    /// Paths a confined process may write besides its workspace's folder and `/tmp`.
    pub writable: Vec<String>,
    /// Paths hidden from a confined process, added to berth's own list.
    pub deny_read: Vec<String>,
    /// Paths beneath `$HOME` a confined process may read, besides the toolchains' folders
    /// (`$HOME` is otherwise an empty folder to it).
    pub readable: Vec<String>,
    /// Variables of berth's environment passed on to confined processes besides the allow
    /// list (docs/sandbox.md lists it).
    pub env: Vec<String>,
    /// Unix sockets of the host a confined process may reach (an ssh-agent's, with `env =
    /// ["SSH_AUTH_SOCK"]`): no other socket of the host is in its view.
    pub sockets: Vec<String>,
    /// Whether a confined process may make user namespaces of its own (Chromium's sandbox,
    /// bwrap, berth's own tests run as a check need them). Off: `unshare(CLONE_NEWUSER)` is
    /// refused, the way to much of the kernel's attack surface.
    pub nested_namespaces: bool,
    /// What confines a command where user namespaces are refused: nothing (refused) or
    /// `"landlock"` (see docs/sandbox.md for what it lacks).
    pub fallback: SandboxFallback,
    /// Processes one confined tree may have at once.
    pub max_processes: u64,
    /// The size of a confined tree's private `/tmp`, and of its `/dev/shm`, in MiB each.
    pub tmp_mib: u64,
    /// The memory one confined tree may use, in MiB, where a cgroup can hold it; 0 (the
    /// default): half the machine's memory. As much as the machine has, or more, limits
    /// nothing, and berth makes no cgroup for it.
    pub memory_mib: u64,
}

impl SandboxSettings {
    /// `max_processes`' default.
    pub const MAX_PROCESSES: u64 = 1024;
    /// `tmp_mib`'s default: 1 GiB.
    pub const TMP_MIB: u64 = 1024;
    /// `memory_mib`'s default, 0: half the machine's memory (berth-sandbox reads how much
    /// the machine has, where it makes the tree's cgroup).
    pub const MEMORY_MIB_HALF: u64 = 0;
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            mode: SandboxMode::default(),
            network: SandboxNetwork::default(),
            allow_hosts: Vec::new(),
            writable: Vec::new(),
            deny_read: Vec::new(),
            readable: Vec::new(),
            env: Vec::new(),
            sockets: Vec::new(),
            nested_namespaces: false,
            fallback: SandboxFallback::None,
            max_processes: Self::MAX_PROCESSES,
            tmp_mib: Self::TMP_MIB,
            memory_mib: Self::MEMORY_MIB_HALF,
        }
    }
}
