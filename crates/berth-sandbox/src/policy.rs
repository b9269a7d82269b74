//! The policy: `[sandbox]` read into paths and ports, and what it makes of one process.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use berth_core::config::{
    ProviderKind, SandboxFallback, SandboxMode, SandboxNetwork, SandboxSettings,
};

use crate::env::EnvAllow;
use crate::plan::{Confinement, Limits, Net, Request};
use crate::{MaskedKeys, SandboxError};

/// Paths hidden from every confined process, beneath the user's home.
const HOME_DENY: [&str; 11] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".config/berth",
    ".password-store",
];

/// Folders beneath `$HOME` that stay readable though `$HOME` is hidden: where toolchains and
/// their caches live, and git's own config. Credential files inside them are on the deny list.
pub const HOME_READABLE: [&str; 30] = [
    ".cargo",
    ".rustup",
    ".local/bin",
    ".local/lib",
    ".local/share/pnpm",
    ".local/share/uv",
    ".nvm",
    ".npm",
    ".pyenv",
    ".rbenv",
    ".asdf",
    ".volta",
    ".bun",
    ".deno",
    ".sdkman",
    ".gem",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    "go",
    ".cache/pip",
    ".cache/uv",
    ".cache/go-build",
    ".cache/yarn",
    ".cache/pnpm",
    ".cache/node",
    ".cache/sccache",
    ".cache/ms-playwright",
    ".gitconfig",
    ".config/git",
];

/// Credential files inside the folders of [`HOME_READABLE`], hidden all the same.
const HOME_READABLE_DENY: [&str; 6] = [
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".config/git/credentials",
    ".npm/_authToken",
    ".gem/credentials",
    ".local/share/uv/credentials",
];

/// Sockets that hand out the machine (a container engine's is root's rights): hidden too.
const SYSTEM_DENY: [&str; 5] = [
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd",
    "/run/podman",
    "/run/user",
];

/// `[sandbox]`, read: every path absolute, every host a port.
#[derive(Debug, Clone)]
pub struct Policy {
    mode: SandboxMode,
    network: SandboxNetwork,
    /// `[sandbox] allow_hosts`, checked: what berth's proxy lets through by name.
    allow_hosts: Vec<String>,
    writable: Vec<PathBuf>,
    deny: Vec<PathBuf>,
    berth_home: PathBuf,
    /// `$HOME`, hidden but for [`HOME_READABLE`] and `readable`.
    user_home: Option<PathBuf>,
    /// What stays readable beneath `$HOME`.
    readable: Vec<PathBuf>,
    /// `[sandbox] env`: berth's variables passed on besides the allow list.
    env: Vec<String>,
    /// `[sandbox] sockets`: the host's sockets in a confined process's view.
    sockets: Vec<PathBuf>,
    nested_namespaces: bool,
    fallback: SandboxFallback,
    limits: Limits,
}

/// Whom a process is for: a command runs with no network; an agent process talks to its
/// provider and keeps its own state.
#[derive(Debug, Clone)]
pub enum Subject {
    Command,
    Agent {
        /// The hosts it may reach through berth's proxy, besides `allow_hosts`: its
        /// provider's (see [`agent_hosts`]), as `host:port` or URLs.
        hosts: Vec<String>,
        /// Its state folders and files (`--agent-writable`, or [`agent_profile`]'s).
        writable: Vec<PathBuf>,
        /// berth's variables it gets besides the allow list: its provider's key and base
        /// URL ([`AgentProfile::env`]).
        env: Vec<String>,
        /// Its program and installation (a `node_modules` tree, a virtualenv, the files its
        /// command line names), readable wherever they are, `$HOME` included.
        program: Vec<PathBuf>,
        /// What of its state it (or the user's next, unconfined run of it) runs or obeys
        /// later: its settings, hooks, plugins, commands, instructions
        /// ([`AgentProfile::covered`]). Read-only.
        settings: Vec<PathBuf>,
        /// What of its state it must write and then runs (Claude Code's shell snapshots): a
        /// fresh folder of the tree's own at each path ([`AgentProfile::private_in`]), never
        /// the person's.
        private: Vec<PathBuf>,
    },
}

/// Where a process works.
#[derive(Debug, Clone)]
pub struct Place {
    /// The workspace's worktree or folder: writable.
    pub work: PathBuf,
    /// Where the process starts: the work folder or beneath it.
    pub cwd: PathBuf,
    /// The workspace's own folder in berth's home, which stays visible (all else of the home
    /// is hidden); its `config.toml` stays hidden.
    pub workspace_dir: Option<PathBuf>,
    /// The workspace's ports: an agent process may listen on them.
    pub ports: Vec<u16>,
    /// Paths inside the work folder that stay read-only: berth's own files, where a plain
    /// workspace's folder holds them beside the agent's work.
    pub protect: Vec<PathBuf>,
    /// Folders in berth's home a process may read, though the rest of the home is hidden:
    /// the clone of a repository named by URL, which a worktree's git reads.
    pub readable: Vec<PathBuf>,
    /// Files hidden besides the deny list: the config layer of a workspace whose folder the
    /// process works in, though its session is another workspace's.
    pub hidden: Vec<PathBuf>,
}

impl Policy {
    /// Reads `settings`. `user_home` is `$HOME` (for `~/` and the default deny list);
    /// `berth_home` is hidden but for the workspace's own folder.
    pub fn from_settings(
        settings: &SandboxSettings,
        user_home: Option<&Path>,
        berth_home: &Path,
    ) -> Result<Policy, SandboxError> {
        let expand = |what: &str, p: &str| -> Result<PathBuf, SandboxError> {
            let path = match (p.strip_prefix("~/"), user_home) {
                (Some(rest), Some(home)) => home.join(rest),
                (Some(_), None) => {
                    return Err(SandboxError::Invalid(format!(
                        "[sandbox] {what} has {p:?}, but HOME is not set"
                    )));
                }
                (None, _) => PathBuf::from(p),
            };
            if !path.is_absolute() {
                return Err(SandboxError::Invalid(format!(
                    "[sandbox] {what} entries must be absolute or start with ~/, not {p:?}"
                )));
            }
            Ok(path)
        };
        let writable = settings
            .writable
            .iter()
            .map(|p| expand("writable", p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut deny: Vec<PathBuf> = user_home
            .map(|h| {
                HOME_DENY
                    .iter()
                    .chain(&HOME_READABLE_DENY)
                    .map(|p| h.join(p))
                    .collect()
            })
            .unwrap_or_default();
        let mut readable: Vec<PathBuf> = user_home
            .map(|h| HOME_READABLE.iter().map(|p| h.join(p)).collect())
            .unwrap_or_default();
        for p in &settings.readable {
            readable.push(expand("readable", p)?);
        }
        deny.extend(SYSTEM_DENY.iter().map(PathBuf::from));
        for p in &settings.deny_read {
            deny.push(expand("deny_read", p)?);
        }
        let sockets = settings
            .sockets
            .iter()
            .map(|p| expand("sockets", p))
            .collect::<Result<Vec<_>, _>>()?;
        // Checked now, so that a bad entry is named when the config is read.
        crate::proxy::AllowList::parse(&settings.allow_hosts).map_err(|e| match e {
            SandboxError::Invalid(m) => {
                SandboxError::Invalid(format!("[sandbox] allow_hosts: {m}"))
            }
            other => other,
        })?;
        for name in &settings.env {
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(SandboxError::Invalid(format!(
                    "[sandbox] env entries must be names of environment variables, not {name:?}"
                )));
            }
        }
        if settings.max_processes == 0 || settings.tmp_mib == 0 {
            return Err(SandboxError::Invalid(
                "[sandbox] max_processes and tmp_mib must be 1 or more".into(),
            ));
        }
        Ok(Policy {
            mode: settings.mode,
            network: settings.network,
            allow_hosts: settings.allow_hosts.clone(),
            writable,
            deny,
            berth_home: berth_home.to_owned(),
            user_home: user_home.map(Path::to_owned),
            readable,
            env: settings.env.clone(),
            sockets,
            nested_namespaces: settings.nested_namespaces,
            fallback: settings.fallback,
            limits: Limits {
                processes: settings.max_processes,
                tmp_mib: settings.tmp_mib,
                memory_mib: settings.memory_mib,
            },
        })
    }

    /// Whether processes are confined at all.
    pub fn is_on(&self) -> bool {
        self.mode == SandboxMode::On
    }

    /// The folder that hides an agent's program from it, if one does: berth's home or an
    /// entry of the deny list (elsewhere, a private `/tmp` and a hidden `$HOME` included, its
    /// installation is bound back: [`Subject::Agent::program`]). `None` with the sandbox off.
    /// For a check made before anything starts (an agent's program that would not be found
    /// once confined).
    pub fn hides(&self, path: &Path) -> Option<PathBuf> {
        if !self.is_on() {
            return None;
        }
        let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
        let resolve = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
        std::iter::once(self.berth_home.clone())
            .chain(self.deny.iter().cloned())
            .map(|p| resolve(&p))
            .find(|hiding| path.starts_with(hiding))
    }

    /// Whether a process for `subject` is confined by the Landlock-only fallback: only where
    /// user namespaces alone are missing, `[sandbox] fallback = "landlock"` says so, and it
    /// is a command. Refused where the kernel cannot confine it either way.
    fn uses_fallback(&self, subject: &Subject) -> Result<bool, SandboxError> {
        let support = crate::support();
        let Some(missing) = support.missing() else {
            return Ok(false);
        };
        let only_namespaces = support.pretend_error.is_none()
            && support.landlock_abi > 0
            && support.namespaces.is_err();
        let only_namespaces = only_namespaces && self.falls_back();
        match (self.fallback, only_namespaces, subject) {
            (SandboxFallback::Landlock, true, Subject::Command) => Ok(true),
            (SandboxFallback::Landlock, true, Subject::Agent { .. }) => {
                Err(SandboxError::Unsupported(format!(
                    "{missing}; the Landlock fallback confines commands only, since an agent's way out, berth's proxy, lives in a network namespace"
                )))
            }
            _ if self.fallback == SandboxFallback::Landlock
                && support.namespaces.is_err()
                && support.landlock_abi > 0 =>
            {
                Err(SandboxError::Unsupported(format!(
                    "{missing}, and the Landlock fallback needs Landlock ABI {} (Linux 6.7) for its TCP rules; this kernel has ABI {}",
                    crate::plan::fallback::FALLBACK_ABI,
                    support.landlock_abi
                )))
            }
            _ => Err(SandboxError::Unsupported(missing)),
        }
    }

    /// Whether commands here are confined by the Landlock-only fallback.
    pub fn falls_back(&self) -> bool {
        let support = crate::support();
        self.is_on()
            && self.fallback == SandboxFallback::Landlock
            && support.missing().is_some()
            && support.pretend_error.is_none()
            && support.namespaces.is_err()
            && support.landlock_abi >= crate::plan::fallback::FALLBACK_ABI
    }

    /// The level of confinement in force here, for `berth doctor`: the full sandbox, the
    /// Landlock-only fallback with what it lacks, or none (every process refused).
    pub fn level(&self) -> String {
        if !self.is_on() {
            return "off: commands and agents run with all of your rights".into();
        }
        let support = crate::support();
        match support.missing() {
            None => "the full sandbox (a new root, namespaces, Landlock, seccomp)".into(),
            Some(missing) if self.falls_back() => {
                format!(
                    "the Landlock-only fallback ({missing}): commands are confined by Landlock and seccomp alone; agents are refused. It lacks: TCP rules by port, not by address; nothing inside the work folder is read-only (its .git pointer included); chmod, chown and utime are not mediated; the host's processes are visible; there is no private /tmp (TMPDIR is the workspace's own); no process limit but a cgroup's"
                )
            }
            Some(missing) => format!("none: every command and agent is refused ({missing})"),
        }
    }

    /// The deny list, defaults first, as configured (some may not exist).
    pub fn deny_list(&self) -> &[PathBuf] {
        &self.deny
    }

    /// The confinement of one process at `place`; `None` with `mode = "off"`. Refused when
    /// the kernel cannot enforce it.
    pub fn confine(
        &self,
        place: &Place,
        subject: &Subject,
    ) -> Result<Option<Confinement>, SandboxError> {
        self.confine_with(place, subject, &MaskedKeys::default())
    }

    /// [`Policy::confine`] for an agent process whose provider keys berth keeps (`keys`): it
    /// gets their stand-ins and base URLs on berth's proxy, and none of the variables `keys`
    /// hides. With `network = "full"` there is no proxy inside, and `keys` is not used: the
    /// agent gets its keys as [`Subject::Agent::env`] names them.
    pub fn confine_with(
        &self,
        place: &Place,
        subject: &Subject,
        keys: &MaskedKeys,
    ) -> Result<Option<Confinement>, SandboxError> {
        if !self.is_on() {
            return Ok(None);
        }
        let fallback = self.uses_fallback(subject)?;
        let no_keys = MaskedKeys::default();
        let keys = match (self.network, subject) {
            (SandboxNetwork::Full, _) | (_, Subject::Command) => &no_keys,
            (_, Subject::Agent { .. }) => keys,
        };
        let own_hosts: &[String] = match subject {
            Subject::Agent { hosts, .. } => hosts,
            Subject::Command => &[],
        };
        // Whatever `network` says, the host's loopback services the allow list names are
        // there (but with the host's network, where they are anyway).
        let loopback = match self.network {
            SandboxNetwork::Full => Vec::new(),
            _ => loopback_forwards(own_hosts.iter().chain(&self.allow_hosts)),
        };
        let net = match (self.network, subject) {
            (SandboxNetwork::Full, _) => Net::Full,
            (SandboxNetwork::Off, Subject::Command) => Net::Isolated,
            (SandboxNetwork::Proxy, Subject::Command) => {
                proxied(self.allow_hosts.clone(), no_keys.clone())?
            }
            (_, Subject::Agent { hosts, .. }) => proxied(
                hosts.iter().chain(&self.allow_hosts).cloned().collect(),
                keys.clone(),
            )?,
        };
        let mut writable = self.writable.clone();
        let mut env = self.env.clone();
        let mut readable = place.readable.clone();
        readable.extend(self.readable.iter().cloned());
        let mut protect = place.protect.clone();
        let mut private = Vec::new();
        if let Subject::Agent {
            writable: own,
            env: own_env,
            program,
            settings,
            private: own_private,
            ..
        } = subject
        {
            private.extend(own_private.iter().cloned());
            writable.extend(own.iter().cloned());
            // A masked key is not passed even where named: its stand-in is set instead.
            env.extend(own_env.iter().filter(|name| !keys.hides(name)).cloned());
            // What its command line names is readable, but for what the sandbox hides:
            // naming a secret on the command line does not open it.
            let hidden: Vec<PathBuf> = self
                .deny
                .iter()
                .chain(std::iter::once(&self.berth_home))
                .map(|d| d.canonicalize().unwrap_or_else(|_| d.clone()))
                .collect();
            readable.extend(
                program
                    .iter()
                    .filter(|p| !hidden.iter().any(|h| p.starts_with(h)))
                    .cloned(),
            );
            protect.extend(settings.iter().cloned());
        }
        let mut deny = self.deny.clone();
        if let Some(dir) = &place.workspace_dir {
            // The workspace's overrides may hold a key.
            deny.push(dir.join("config.toml"));
        }
        deny.extend(place.hidden.iter().cloned());
        Confinement::prepare(Request {
            work: &place.work,
            cwd: &place.cwd,
            berth_home: &self.berth_home,
            keep: place.workspace_dir.as_deref(),
            readable: &readable,
            protect: &protect,
            user_home: self.user_home.as_deref(),
            writable: &writable,
            deny: &deny,
            sockets: &self.sockets,
            private: &private,
            nested_namespaces: self.nested_namespaces,
            fallback,
            net,
            network_key: place.workspace_dir.as_deref().unwrap_or(&place.work),
            ports: &place.ports,
            loopback,
            limits: self.limits,
            env: EnvAllow::new(env),
        })
        .map(Some)
    }
}

/// A policy bound to one place: what every process started there for an agent is confined
/// by. Cheap to clone; [`Sandbox::confine`] makes one spawn's confinement.
#[derive(Debug, Clone)]
pub struct Sandbox {
    policy: Policy,
    place: Place,
}

impl Sandbox {
    pub fn new(policy: Policy, place: Place) -> Sandbox {
        Sandbox { policy, place }
    }

    pub fn is_on(&self) -> bool {
        self.policy.is_on()
    }

    /// The folder it may write.
    pub fn work(&self) -> &Path {
        &self.place.work
    }

    /// The policy it applies.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The confinement of one process for `subject` starting in `cwd` (`None`: the work
    /// folder); `None` with `mode = "off"`.
    pub fn confine(
        &self,
        cwd: Option<&Path>,
        subject: &Subject,
    ) -> Result<Option<Confinement>, SandboxError> {
        self.confine_with(cwd, subject, &MaskedKeys::default())
    }

    /// [`Sandbox::confine`] for an agent process whose provider keys berth keeps
    /// ([`Policy::confine_with`]).
    pub fn confine_with(
        &self,
        cwd: Option<&Path>,
        subject: &Subject,
        keys: &MaskedKeys,
    ) -> Result<Option<Confinement>, SandboxError> {
        let mut place = self.place.clone();
        if let Some(cwd) = cwd {
            place.cwd = cwd.to_owned();
        }
        self.policy.confine_with(&place, subject, keys)
    }

    /// The workspace's network, to hand to a berth process started for it (berth's own agent
    /// under a run), so that what it confines joins the trees berth confines here; `None`
    /// where its processes have no network of their own (`mode = "off"`, `network = "full"`,
    /// the Landlock fallback, or a kernel that cannot confine).
    pub fn network_handoff(&self) -> Result<Option<crate::Handoff>, SandboxError> {
        let policy = &self.policy;
        if !policy.is_on()
            || policy.network == SandboxNetwork::Full
            || policy.uses_fallback(&Subject::Command).unwrap_or(true)
        {
            return Ok(None);
        }
        let place = &self.place;
        crate::network::Handoff::of(
            place.workspace_dir.as_deref().unwrap_or(&place.work),
            &place.ports,
            &loopback_forwards(&policy.allow_hosts),
        )
        .map(Some)
    }
}

/// The host and port of `host:port`, `[v6]:port` or an http(s) URL (its scheme's port when it
/// names none).
fn endpoint(entry: &str) -> Option<(String, u16)> {
    let (default, rest) = if let Some(r) = entry.strip_prefix("https://") {
        (Some(443), r)
    } else if let Some(r) = entry.strip_prefix("http://") {
        (Some(80), r)
    } else {
        (None, entry)
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && !port.contains(']') => {
            (host, Some(port.parse().ok()?))
        }
        _ => (authority, None),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    Some((host.to_ascii_lowercase(), port.or(default)?))
}

/// Whether `host` is this machine's loopback: a process in a network namespace of its own
/// reaches it only through a forward of berth's.
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The network of a process whose only way out is berth's proxy, allowing `entries` by name.
fn proxied(entries: Vec<String>, keys: MaskedKeys) -> Result<Net, SandboxError> {
    crate::proxy::AllowList::parse(&entries)?;
    Ok(Net::Proxied {
        allow: entries,
        keys,
    })
}

/// The entries of `entries` on this machine's loopback (a provider stand-in, a local model
/// server, a database a test needs), forwarded as they are into the workspace's network, at
/// the same port. One a port: inside, `localhost:4567` and `127.0.0.1:4567` are the same
/// listener, and go to the first of them.
pub fn loopback_forwards<'a>(entries: impl IntoIterator<Item = &'a String>) -> Vec<(String, u16)> {
    let mut ports = BTreeSet::new();
    entries
        .into_iter()
        .filter_map(|e| endpoint(e))
        .filter(|(host, _)| is_loopback(host))
        .filter(|(_, port)| ports.insert(*port))
        .collect()
}

/// What berth knows of a third-party agent, the one table of its facts: the name a run
/// chooses it by and the command it starts (berth-run's built-in agents read them here), its
/// provider, and the state it writes beneath the user's home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProfile {
    pub name: &'static str,
    /// The name `berth run --agent NAME` chooses it by (`claude-code`).
    pub builtin: &'static str,
    /// The command line that starts it as an ACP agent.
    pub command: &'static str,
    /// Its state folders, beneath `$HOME`.
    pub state: &'static [&'static str],
    /// The provider it calls: berth-core's `ProviderKind` has the variable that overrides
    /// its URL, its host and its key variables.
    pub provider: ProviderKind,
    /// berth's variables it gets besides its provider's keys and base URL
    /// ([`AgentProfile::env`]).
    pub own_env: &'static [&'static str],
    /// What of its state (beneath `$HOME`) it runs or obeys later: its settings, where hooks
    /// are declared, its hooks, plugins, commands, subagents, skills, rules, extensions,
    /// local install and instructions. Read-only to it, so that it cannot plant something
    /// the user's next, unconfined run obeys; what is missing is made (empty) first, so that
    /// it is covered rather than created.
    pub obeyed: &'static [Obeyed],
    /// What of its state it must write and then runs (beneath `$HOME`): each a fresh folder
    /// of the confined tree's own, never the person's.
    pub private: &'static [&'static str],
    /// A variable that moves all of its state into its state folder (beneath `$HOME`), set
    /// when the user has not: Claude Code otherwise rewrites `~/.claude.json` by renaming a
    /// new file into the home, which a confined process may not do (and it then hangs).
    pub state_var: Option<(&'static str, &'static str)>,
}

/// A part of an agent's state that it runs or obeys later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Obeyed {
    /// A file, made with these contents where it is missing (contents the agent reads as
    /// "nothing": `{}` for JSON).
    File(&'static str, &'static str),
    /// A folder, made empty where it is missing.
    Dir(&'static str),
}

impl AgentProfile {
    /// berth's variables it gets: its provider's keys and base URL (berth-core's
    /// `ProviderKind`), and its own ([`AgentProfile::own_env`]).
    pub fn env(&self) -> Vec<&'static str> {
        let provider = self.provider;
        let mut env = provider.agent_key_variables().to_vec();
        env.push(provider.base_url_variable());
        env.extend(self.own_env);
        env
    }

    /// The paths of [`AgentProfile::obeyed`] beneath `home`, each made first where missing
    /// (in a state folder that exists), so that a read-only bind covers it.
    pub fn covered(&self, home: &Path) -> Vec<PathBuf> {
        self.obeyed
            .iter()
            .filter_map(|part| {
                let (rel, file) = match part {
                    Obeyed::File(rel, text) => (rel, Some(text)),
                    Obeyed::Dir(rel) => (rel, None),
                };
                let path = home.join(rel);
                if !path.parent().is_some_and(Path::is_dir) {
                    return None;
                }
                if std::fs::symlink_metadata(&path).is_err() {
                    let _ = match file {
                        Some(text) => make_file(&path, text),
                        None => std::fs::create_dir(&path),
                    };
                }
                std::fs::symlink_metadata(&path).is_ok().then_some(path)
            })
            .collect()
    }

    /// The paths of [`AgentProfile::private`] beneath `home`, each made first where missing:
    /// a fresh folder is mounted on each.
    pub fn private_in(&self, home: &Path) -> Vec<PathBuf> {
        self.private
            .iter()
            .map(|rel| home.join(rel))
            .filter(|path| path.is_dir() || std::fs::create_dir_all(path).is_ok())
            .collect()
    }
}

/// Makes `path` with `text`, never over an existing file, readable by its owner only.
fn make_file(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    std::io::Write::write_all(&mut file, text.as_bytes())
}

/// The provider variables of every agent berth knows, each provider's keys and base URL
/// (berth-core's `ProviderKind`): what an agent berth does not know gets, since it may talk to
/// any of them.
pub fn provider_env() -> Vec<&'static str> {
    let mut env = Vec::new();
    for provider in ProviderKind::ALL {
        env.extend(provider.agent_key_variables());
        env.push(provider.base_url_variable());
    }
    env
}

const PROFILES: [(&str, AgentProfile); 3] = [
    (
        "claude",
        AgentProfile {
            name: "claude-agent-acp",
            builtin: "claude-code",
            command: "claude-agent-acp",
            state: &[".claude"],
            provider: ProviderKind::Claude,
            own_env: &["CLAUDE_CONFIG_DIR"],
            obeyed: &[
                Obeyed::File(".claude/settings.json", "{}\n"),
                Obeyed::File(".claude/settings.local.json", "{}\n"),
                Obeyed::File(".claude/CLAUDE.md", ""),
                Obeyed::Dir(".claude/hooks"),
                Obeyed::Dir(".claude/plugins"),
                Obeyed::Dir(".claude/commands"),
                Obeyed::Dir(".claude/agents"),
                Obeyed::Dir(".claude/skills"),
                Obeyed::Dir(".claude/output-styles"),
                Obeyed::Dir(".claude/local"),
            ],
            // Claude Code writes a snapshot of the shell and sources it before each Bash call.
            private: &[".claude/shell-snapshots"],
            state_var: Some(("CLAUDE_CONFIG_DIR", ".claude")),
        },
    ),
    (
        "codex",
        AgentProfile {
            name: "codex",
            builtin: "codex",
            command: "codex-acp",
            state: &[".codex"],
            provider: ProviderKind::Openai,
            own_env: &["CODEX_HOME"],
            obeyed: &[
                Obeyed::File(".codex/config.toml", ""),
                Obeyed::File(".codex/AGENTS.md", ""),
                Obeyed::Dir(".codex/rules"),
                Obeyed::Dir(".codex/prompts"),
                Obeyed::Dir(".codex/skills"),
            ],
            private: &[],
            state_var: None,
        },
    ),
    (
        "gemini",
        AgentProfile {
            name: "gemini",
            builtin: "gemini",
            command: "gemini --experimental-acp",
            state: &[".gemini"],
            provider: ProviderKind::Gemini,
            own_env: &["GOOGLE_CLOUD_PROJECT"],
            obeyed: &[
                Obeyed::File(".gemini/settings.json", "{}\n"),
                Obeyed::File(".gemini/GEMINI.md", ""),
                Obeyed::Dir(".gemini/extensions"),
                Obeyed::Dir(".gemini/commands"),
                Obeyed::Dir(".gemini/policies"),
            ],
            private: &[],
            state_var: None,
        },
    ),
];

/// Every agent berth knows, in the order `berth run --agent` lists them.
pub fn agent_profiles() -> impl Iterator<Item = &'static AgentProfile> {
    PROFILES.iter().map(|(_, p)| p)
}

/// The profile of the agent an `--agent-cmd` starts, known by its program's name.
pub fn agent_profile(command: &str) -> Option<&'static AgentProfile> {
    let program = command.split_whitespace().find(|w| !w.contains('='))?;
    let name = Path::new(program).file_name()?.to_str()?;
    PROFILES
        .iter()
        .find(|(key, _)| name.contains(key))
        .map(|(_, p)| p)
}

/// The hosts an agent process may reach through berth's proxy: its provider's base URL as
/// `env` sets it (`ANTHROPIC_BASE_URL` for claude-agent-acp; every provider's for an agent
/// berth does not know), its profile's provider (every provider berth knows, for an agent it
/// does not know), and `extra` (what its `[agents.NAME]` entry names).
///
/// Only an agent's own provider variables are read: `env` may be all of berth's environment,
/// whose other `*_BASE_URL`s (`OLLAMA_BASE_URL`, `METADATA_BASE_URL`) are not the agent's and
/// open nothing. A caller that hides the agent's key ([`crate::MaskedKeys`]) leaves that
/// provider's base URL out of `env`: the agent reaches it through berth's proxy only.
pub fn agent_hosts<'a>(
    profile: Option<&AgentProfile>,
    env: impl IntoIterator<Item = (&'a str, &'a str)>,
    extra: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let profiles: Vec<&AgentProfile> = match profile {
        Some(p) => vec![p],
        None => PROFILES.iter().map(|(_, p)| p).collect(),
    };
    let mut hosts = BTreeSet::new();
    for (k, v) in env {
        if profiles.iter().any(|p| p.provider.base_url_variable() == k) && endpoint(v).is_some() {
            hosts.insert(v.to_owned());
        }
    }
    hosts.extend(profiles.iter().map(|p| p.provider.origin().to_owned()));
    hosts.extend(extra.into_iter().map(str::to_owned));
    hosts.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_become_endpoints() {
        let e = |h: &str, p: u16| Some((h.to_owned(), p));
        assert_eq!(endpoint("crates.io:443"), e("crates.io", 443));
        assert_eq!(
            endpoint("https://api.anthropic.com"),
            e("api.anthropic.com", 443)
        );
        assert_eq!(endpoint("http://127.0.0.1:8123/v1"), e("127.0.0.1", 8123));
        assert_eq!(endpoint("http://[::1]:9000/x"), e("::1", 9000));
        assert_eq!(endpoint("http://example.com"), e("example.com", 80));
        assert_eq!(endpoint("example.com"), None);
        assert_eq!(endpoint("https://"), None);
    }

    #[test]
    fn loopback_entries_are_forwarded_and_names_go_through_the_proxy() {
        let entries: Vec<String> = vec![
            "http://127.0.0.1:4567".into(),
            "api.anthropic.com:443".into(),
            "localhost:8080".into(),
            "127.0.0.1:8080".into(),
        ];
        let net = proxied(entries.clone(), MaskedKeys::default()).unwrap();
        let Net::Proxied { allow, .. } = net else {
            panic!("{net:?}")
        };
        assert_eq!(
            loopback_forwards(&entries),
            [
                ("127.0.0.1".to_owned(), 4567),
                ("localhost".to_owned(), 8080)
            ]
        );
        assert_eq!(allow.len(), 4);
        assert!(proxied(vec!["*".into()], MaskedKeys::default()).is_err());
    }

    #[test]
    fn agents_are_known_by_program() {
        let claude = agent_profile("/x/node_modules/.bin/claude-agent-acp --flag").unwrap();
        assert_eq!(claude.state, [".claude"]);
        assert_eq!(agent_profile("FOO=1 codex-acp").unwrap().name, "codex");
        assert!(agent_profile("python3 my_agent.py").is_none());
        // Each known agent's own command is known as itself.
        for profile in agent_profiles() {
            assert_eq!(
                agent_profile(profile.command),
                Some(profile),
                "{}",
                profile.builtin
            );
        }
        let hosts = agent_hosts(
            Some(claude),
            [
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:4567"),
                ("OPENAI_BASE_URL", "http://127.0.0.1:4568"),
                ("OLLAMA_BASE_URL", "http://127.0.0.1:18999"),
                ("METADATA_BASE_URL", "http://169.254.169.254"),
                ("PATH", "/bin"),
            ],
            ["api.example.com"],
        );
        assert_eq!(
            hosts,
            [
                "api.example.com",
                "http://127.0.0.1:4567",
                "https://api.anthropic.com",
            ]
        );
        let unknown = agent_hosts(
            None,
            [
                ("OPENAI_BASE_URL", "http://127.0.0.1:4568"),
                ("OLLAMA_BASE_URL", "http://127.0.0.1:18999"),
            ],
            [],
        );
        assert_eq!(
            unknown,
            [
                "http://127.0.0.1:4568",
                "https://api.anthropic.com",
                "https://api.openai.com",
                "https://generativelanguage.googleapis.com",
            ]
        );
    }

    #[test]
    fn settings_are_checked() {
        let home = Path::new("/home/u");
        let bad = SandboxSettings {
            writable: vec!["relative/path".into()],
            ..SandboxSettings::default()
        };
        let e = Policy::from_settings(&bad, Some(home), Path::new("/b")).unwrap_err();
        assert!(e.to_string().contains("absolute"), "{e}");
        let bad = SandboxSettings {
            allow_hosts: vec!["*".into()],
            ..SandboxSettings::default()
        };
        let e = Policy::from_settings(&bad, Some(home), Path::new("/b")).unwrap_err();
        assert!(e.to_string().contains("allow_hosts"), "{e}");
        let good = SandboxSettings {
            deny_read: vec!["~/private".into()],
            ..SandboxSettings::default()
        };
        let p = Policy::from_settings(&good, Some(home), Path::new("/b")).unwrap();
        assert!(p.deny_list().contains(&PathBuf::from("/home/u/.ssh")));
        assert!(p.deny_list().contains(&PathBuf::from("/home/u/private")));
    }
}
