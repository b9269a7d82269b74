//! The parent's side: the mount plan, the Landlock ruleset, and the hook that applies them to
//! a command about to be spawned.
//!
//! What the new root holds is [`view`]'s; this module turns it into the child's steps:
//!
//! - the root first, an empty tmpfs ([`Step::Root`]);
//! - each bind from a descriptor the child opens on the host's path before the new root;
//! - each denied folder an empty tmpfs of mode 000, each denied file a bind of an empty file
//!   of mode 000;
//! - `/dev` a tmpfs with the harmless devices bound in (no disk can be read raw, even by
//!   root).

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

use crate::SandboxError;
use crate::child::{ChildPlan, IdMaps, ProxyPlan, Step};

pub(crate) mod fallback;
mod scrub;
pub(crate) mod view;

use view::{Item, PlanStep, mount_steps};

/// What a confined process may reach on the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Net {
    /// A network namespace of its own: loopback, nothing of the host's.
    Isolated,
    /// A network namespace of its own whose only way out is berth's proxy: `allow` (checked
    /// entries) by name, and `keys`, the agent's masked providers, at `/berth/NAME` on the
    /// proxy.
    Proxied {
        allow: Vec<String>,
        keys: crate::MaskedKeys,
    },
    /// Unrestricted.
    Full,
}

pub(crate) struct Request<'a> {
    pub work: &'a Path,
    pub cwd: &'a Path,
    pub berth_home: &'a Path,
    pub keep: Option<&'a Path>,
    /// Visible, not writable (nothing outside the work folder and `writable` is), besides the
    /// system's folders and the toolchains ([`view`]).
    pub readable: &'a [PathBuf],
    pub protect: &'a [PathBuf],
    /// `$HOME`: an empty folder, but for `readable`, `writable` and the work folder beneath it.
    pub user_home: Option<&'a Path>,
    pub writable: &'a [PathBuf],
    pub deny: &'a [PathBuf],
    /// Unix sockets of the host bound in (`[sandbox] sockets`): no other is there.
    pub sockets: &'a [PathBuf],
    /// Fresh folders of the tree's own at these paths, inside the writable set (an agent's
    /// shell snapshots).
    pub private: &'a [PathBuf],
    /// Whether the process may make user namespaces of its own.
    pub nested_namespaces: bool,
    /// Confined by Landlock and seccomp alone ([`fallback`]): user namespaces are refused.
    pub fallback: bool,
    pub net: Net,
    /// The workspace's network, which every tree of it joins (but with `Net::Full`): its key
    /// (the workspace's folder), its ports (forwarded from the host) and the host's loopback
    /// entries of the allow list (forwarded into it, whatever `net` says).
    pub network_key: &'a Path,
    pub ports: &'a [u16],
    pub loopback: Vec<(String, u16)>,
    pub limits: Limits,
    pub env: crate::env::EnvAllow,
}

/// How much one confined tree may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub processes: u64,
    /// The private `/tmp`'s size, and `/dev/shm`'s, in MiB each.
    pub tmp_mib: u64,
    /// 0: none of berth's.
    pub memory_mib: u64,
}

/// The devices a confined process gets in its `/dev`.
const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];
/// The ones it may write to.
const WRITABLE_DEVICES: [&str; 4] = ["null", "zero", "full", "tty"];

/// The rules a confined process runs under, as [`crate::explain`] reads them.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    pub work: PathBuf,
    pub writable: Vec<PathBuf>,
    /// What is bound read-only besides the system's folders.
    pub readable: Vec<PathBuf>,
    /// `$HOME`, an empty folder but for what is bound.
    pub home: Option<PathBuf>,
    pub deny: Vec<PathBuf>,
    pub berth_home: PathBuf,
    pub net: Net,
}

/// One process's confinement, ready to be applied to the command that starts it. Made per
/// spawn: it holds the descriptors the child mounts from.
pub struct Confinement {
    child: Arc<Holder>,
    rules: Rules,
    env: crate::env::EnvAllow,
}

/// Owns what the child's plan points at by number, until the command is dropped.
struct Holder {
    plan: ChildPlan,
    /// The workspace's network, whose namespaces the plan joins by number.
    _network: Option<Arc<crate::network::Network>>,
    _fds: Vec<OwnedFd>,
    _ruleset: OwnedFd,
    /// The read end of the child's report pipe (non-blocking); the write end is in `_fds`.
    report: OwnedFd,
}

impl std::fmt::Debug for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confinement")
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

fn cstring(p: &Path) -> Result<CString, SandboxError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| SandboxError::Invalid(format!("{} has a NUL byte", p.display())))
}

/// `path` as the kernel resolves it, if it exists.
fn resolved(path: &Path) -> Option<PathBuf> {
    path.canonicalize().ok()
}

/// `path` with its folder as the kernel resolves it, itself not (a link stays a link), if it
/// exists.
fn named(path: &Path) -> Option<PathBuf> {
    let named = match (path.parent().and_then(resolved), path.file_name()) {
        (Some(folder), Some(name)) => folder.join(name),
        _ => resolved(path)?,
    };
    named.exists().then_some(named)
}

/// An empty file of mode 000 under berth's home, bound over denied files: opening it fails
/// with "permission denied", even for root (no capability survives into the command).
fn denied_file(berth_home: &Path) -> Result<PathBuf, SandboxError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = berth_home.join(".sandbox");
    let path = dir.join("denied");
    if let Ok(m) = std::fs::symlink_metadata(&path)
        && m.is_file()
        && m.len() == 0
        && m.permissions().mode() & 0o777 == 0
    {
        return Ok(path);
    }
    let fail = |e: std::io::Error| SandboxError::Setup(format!("{}: {e}", path.display()));
    std::fs::create_dir_all(&dir).map_err(fail)?;
    // Made aside and renamed into place: berth processes starting at once (two runs) each
    // find a whole file there, never none or one half made.
    let made = tempfile::NamedTempFile::new_in(&dir).map_err(fail)?;
    std::fs::set_permissions(made.path(), std::fs::Permissions::from_mode(0o000)).map_err(fail)?;
    made.persist(&path).map_err(|e| fail(e.error))?;
    Ok(path)
}

fn open_path(path: &Path) -> Result<OwnedFd, SandboxError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|e| SandboxError::Setup(format!("cannot open {}: {e}", path.display())))
}

/// A pipe whose read end never blocks, both ends closed on exec.
fn report_pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the array with two new descriptors, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } == -1 {
        return Err(setup(std::io::Error::last_os_error()));
    }
    // SAFETY: both are fresh descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The port of berth's proxy inside a confined process's network namespace (`HTTPS_PROXY`).
pub const PROXY_PORT: u16 = 3128;

/// How many listeners the init may hold: the proxy's, on IPv4 and IPv6.
pub(crate) const MAX_LISTENERS: usize = 2;

/// The variables that point a confined process at berth's proxy, at `port`. Loopback goes
/// direct: it is the namespace's own, where the forwards listen.
fn proxy_env(port: u16) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{port}");
    let mut env = Vec::new();
    for name in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"] {
        env.push((name.to_owned(), url.clone()));
        env.push((name.to_ascii_lowercase(), url.clone()));
    }
    let local = "localhost,127.0.0.1,::1".to_owned();
    env.push(("NO_PROXY".to_owned(), local.clone()));
    env.push(("no_proxy".to_owned(), local));
    env
}

/// A tree's proxy: its listeners in the workspace's network (at the first port from
/// [`PROXY_PORT`] no other tree's proxy holds), and the channel to berth's proxy, which
/// starts serving now (it ends when the init's end of the channel closes, or, if nothing is
/// ever spawned, when this confinement is dropped): the plan, the port, and the descriptors
/// the plan names (the init's end of the channel, and the listeners).
fn proxy_plan(
    network: &crate::network::Network,
    allow: &[String],
    keys: &crate::MaskedKeys,
) -> Result<(ProxyPlan, u16, Vec<OwnedFd>), SandboxError> {
    use std::os::fd::FromRawFd;
    let allow = crate::proxy::AllowList::parse(allow)?;
    let mut fds = [0; 2];
    // SAFETY: socketpair fills the array with two new descriptors, which we then own.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } == -1
    {
        return Err(setup(std::io::Error::last_os_error()));
    }
    // SAFETY: both are fresh descriptors owned by nobody else.
    let (host, init) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let (port, listening) = network.proxy_listeners().map_err(|e| {
        setup(format!(
            "no port for berth's proxy in the workspace's network: {e}"
        ))
    })?;
    let mut listeners = Vec::new();
    for fd in &listening {
        // The init polls them, and must never block in an accept.
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        listeners.push((fd.as_raw_fd(), crate::proxy::PROXY_INDEX));
    }
    crate::proxy::Proxy::serve_at(port, host, allow, Vec::new(), keys.clone())
        .map_err(setup)?
        .detach();
    let plan = ProxyPlan {
        channel: init.as_raw_fd(),
        listeners,
    };
    let mut held = listening;
    held.push(init);
    Ok((plan, port, held))
}

/// The `landlock` crate's ABI of a version number.
fn landlock_abi(level: u8) -> ABI {
    match level {
        0 | 1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        _ => ABI::V6,
    }
}

/// The read end of berth's lifeline: a pipe whose write end this process holds until it
/// ends and never writes to, so that it reads end-of-file once berth is gone, however it
/// died (a `SIGKILL` included). Each confined tree's keeper watches it.
pub(crate) fn lifeline() -> std::os::fd::RawFd {
    static LIFELINE: std::sync::OnceLock<Option<(OwnedFd, OwnedFd)>> = std::sync::OnceLock::new();
    LIFELINE
        .get_or_init(|| report_pipe().ok())
        .as_ref()
        .map_or(-1, |(read, _)| read.as_raw_fd())
}

fn setup(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Setup(e.to_string())
}

/// A request's paths as the kernel resolves them; those that do not exist are left out.
struct Resolved {
    work: PathBuf,
    cwd: PathBuf,
    berth_home: PathBuf,
    writable: Vec<PathBuf>,
    deny: Vec<PathBuf>,
    keep: Option<PathBuf>,
    /// `[sandbox] readable`, the place's and the agent's program, and the toolchains.
    readable: Vec<PathBuf>,
    sockets: Vec<PathBuf>,
    /// `$HOME`, an empty folder but for what is bound.
    home: Option<PathBuf>,
    /// Files shown without their secrets, as (original, copy).
    scrubbed: Vec<(PathBuf, PathBuf)>,
}

impl Resolved {
    /// The rules [`crate::explain`] reads, of these paths and `net`.
    fn into_rules(self, net: Net) -> Rules {
        Rules {
            work: self.work,
            readable: self.readable,
            home: self.home,
            writable: self.writable,
            deny: self.deny,
            berth_home: self.berth_home,
            net,
        }
    }

    fn from_request(req: &Request<'_>) -> Result<Resolved, SandboxError> {
        let work = resolved(req.work).ok_or_else(|| {
            SandboxError::Invalid(format!("the folder {} does not exist", req.work.display()))
        })?;
        if work.parent().is_none() {
            return Err(SandboxError::Invalid(
                "an agent's folder cannot be / (it would make everything writable)".into(),
            ));
        }
        let cwd = resolved(req.cwd).unwrap_or_else(|| work.clone());
        let berth_home = resolved(req.berth_home).unwrap_or_else(|| req.berth_home.to_owned());
        let writable: Vec<PathBuf> = req.writable.iter().filter_map(|p| resolved(p)).collect();
        let deny: Vec<PathBuf> = req.deny.iter().filter_map(|p| resolved(p)).collect();
        let keep = req.keep.and_then(resolved);
        let home = req.user_home.and_then(resolved);
        let mut hidden = deny.clone();
        hidden.push(berth_home.clone());
        // At the path named, its folder resolved: a link that a program leads through (pyenv's
        // `python3`) must be found where the link is.
        let mut readable: Vec<PathBuf> = req.readable.iter().filter_map(|p| named(p)).collect();
        readable.extend(view::toolchain_paths(home.as_deref(), &hidden));
        let sockets = req
            .sockets
            .iter()
            .filter_map(|p| resolved(p))
            .filter(|p| {
                use std::os::unix::fs::FileTypeExt;
                std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket())
            })
            .collect();
        let scrubbed = scrub::scrubbed_files(home.as_deref(), &berth_home)?;
        Ok(Resolved {
            work,
            cwd,
            berth_home,
            writable,
            deny,
            keep,
            readable,
            sockets,
            home,
            scrubbed,
        })
    }
}

/// What each path of the new root is ([`view`]): the system's part, the work folder and the
/// writable extras, what is readable, the sockets, and the deny list. A bound path inside a
/// denied one is refused.
fn mount_items(req: &Request<'_>, paths: &Resolved) -> Result<Vec<(PathBuf, Item)>, SandboxError> {
    let Resolved {
        work,
        writable,
        deny,
        keep,
        readable,
        sockets,
        home,
        scrubbed,
        ..
    } = paths;
    let mut items = view::system_items(req.net == Net::Full);
    for d in deny {
        let inside = std::iter::once(work)
            .chain(keep)
            .chain(writable)
            .chain(
                readable
                    .iter()
                    .filter(|r| !deny.iter().any(|d| r.starts_with(d))),
            )
            .find(|k| k.starts_with(d));
        if let Some(k) = inside {
            return Err(SandboxError::Invalid(format!(
                "{} is inside {}, which the sandbox hides; move it, or remove {} from [sandbox] deny_read",
                k.display(),
                d.display(),
                d.display()
            )));
        }
    }
    items.push((PathBuf::from("/tmp"), Item::Fresh(req.limits.tmp_mib)));
    items.push((PathBuf::from("/var/tmp"), Item::Fresh(req.limits.tmp_mib)));
    items.extend(
        req.private
            .iter()
            .filter_map(|p| resolved(p))
            .filter(|p| p.starts_with(work) || writable.iter().any(|w| p.starts_with(w)))
            .map(|p| (p, Item::Fresh(PRIVATE_MIB))),
    );
    if let Some(home) = home {
        items.push((home.clone(), Item::Empty));
    }
    let bind = |p: &PathBuf, writable: bool| {
        (
            p.clone(),
            Item::Bind {
                dir: p.is_dir(),
                writable,
            },
        )
    };
    items.push(bind(work, true));
    items.extend(writable.iter().map(|p| bind(p, true)));
    items.extend(keep.iter().map(|p| bind(p, false)));
    // What the command line names may lie in a denied folder: naming it does not open it.
    items.extend(
        readable
            .iter()
            .filter(|r| !deny.iter().any(|d| r.starts_with(d)))
            .map(|p| bind(p, false)),
    );
    items.extend(sockets.iter().map(|p| (p.clone(), Item::Socket)));
    items.extend(
        scrubbed
            .iter()
            .map(|(original, copy)| (original.clone(), Item::Scrubbed(copy.clone()))),
    );
    items.extend(
        deny.iter()
            .map(|d| (d.clone(), Item::Deny { dir: d.is_dir() })),
    );
    let git = work.join(".git");
    let read_only = std::iter::once(git).chain(req.protect.iter().cloned());
    for path in read_only {
        // Its folder as the kernel resolves it (the writable roots are), itself not.
        let path = match (path.parent().and_then(resolved), path.file_name()) {
            (Some(parent), Some(name)) => parent.join(name),
            _ => path,
        };
        // Only what exists as itself, not through a symlink, inside the work folder or
        // another writable one, and not hidden already.
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() || m.is_dir())
            && (path.starts_with(work) || writable.iter().any(|w| path.starts_with(w)))
            && !deny.iter().any(|d| path.starts_with(d))
        {
            items.push(bind(&path, false));
        }
    }
    Ok(items)
}

/// The paths the child mounts from. Each source gets a descriptor number here, held open (so
/// no other file takes it) until the command is dropped; the child opens the path again onto
/// that number.
#[derive(Default)]
struct Sources {
    fds: Vec<OwnedFd>,
    /// Each path, and the number the child opens it onto.
    slots: Vec<(CString, RawFd)>,
}

impl Sources {
    /// Opens `path` as a source: the descriptor number a `Bind` step clones the tree at.
    fn slot(&mut self, path: &Path) -> Result<RawFd, SandboxError> {
        let fd = open_path(path)?;
        let slot = fd.as_raw_fd();
        self.slots.push((cstring(path)?, slot));
        self.fds.push(fd);
        Ok(slot)
    }
}

/// The size of each private folder (an agent's shell snapshots), in MiB.
const PRIVATE_MIB: u64 = 64;

/// What every bind is: no setuid program, no device node, from anything bound.
const BIND_ATTRS: u64 = libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NODEV;

/// The new root's size: it holds only mount points and links.
const ROOT_DATA: &std::ffi::CStr = c"mode=0755,size=1m";

/// The plan's steps as the child makes them, the new root first: paths as C strings, sources
/// opened.
fn child_steps(
    plan: Vec<PlanStep>,
    sources: &[PathBuf],
    berth_home: &Path,
    opened: &mut Sources,
) -> Result<Vec<Step>, SandboxError> {
    let mut steps = vec![Step::Root {
        data: ROOT_DATA.to_owned(),
    }];
    let mut denied_source = None;
    for step in plan {
        steps.push(match step {
            PlanStep::Tmpfs(target, data, readonly) => Step::Tmpfs {
                target: cstring(&target)?,
                data: CString::new(data.as_str()).map_err(setup)?,
                readonly,
            },
            PlanStep::DenyFile(target) => {
                let slot = match denied_source {
                    Some(slot) => slot,
                    None => *denied_source.insert(opened.slot(&denied_file(berth_home)?)?),
                };
                Step::Bind {
                    slot,
                    target: cstring(&target)?,
                    attrs: BIND_ATTRS | libc::MOUNT_ATTR_RDONLY,
                }
            }
            PlanStep::Mkdir(path) => Step::Mkdir {
                path: cstring(&path)?,
            },
            PlanStep::Touch(path) => Step::Touch {
                path: cstring(&path)?,
            },
            PlanStep::Bind(source, target, writable) => Step::Bind {
                slot: opened.slot(&sources[source])?,
                target: cstring(&target)?,
                attrs: if writable {
                    BIND_ATTRS
                } else {
                    BIND_ATTRS | libc::MOUNT_ATTR_RDONLY
                },
            },
            PlanStep::Symlink(target, link) => Step::Symlink {
                target: cstring(&target)?,
                link: cstring(&link)?,
            },
        });
    }
    Ok(steps)
}

/// A fresh /dev (its mount point is the new root's): the harmless devices, bound from the
/// host's, and a `/dev/shm` of `tmp_mib` MiB.
fn push_dev_steps(
    steps: &mut Vec<Step>,
    opened: &mut Sources,
    tmp_mib: u64,
) -> Result<(), SandboxError> {
    steps.push(Step::Tmpfs {
        target: c"/dev".to_owned(),
        data: c"mode=0755,size=64k".to_owned(),
        readonly: false,
    });
    for dev in DEVICES {
        let host = Path::new("/dev").join(dev);
        if !host.exists() {
            continue;
        }
        steps.push(Step::Touch {
            path: cstring(&host)?,
        });
        steps.push(Step::Bind {
            slot: opened.slot(&host)?,
            target: cstring(&host)?,
            // A device node works only without `nodev`.
            attrs: libc::MOUNT_ATTR_NOSUID | libc::MOUNT_ATTR_NOEXEC,
        });
    }
    for (target, link) in [
        (c"/proc/self/fd", c"/dev/fd"),
        (c"/proc/self/fd/0", c"/dev/stdin"),
        (c"/proc/self/fd/1", c"/dev/stdout"),
        (c"/proc/self/fd/2", c"/dev/stderr"),
    ] {
        steps.push(Step::Symlink {
            target: target.to_owned(),
            link: link.to_owned(),
        });
    }
    steps.push(Step::Mkdir {
        path: c"/dev/shm".to_owned(),
    });
    steps.push(Step::Tmpfs {
        target: c"/dev/shm".to_owned(),
        data: CString::new(format!("mode=1777,size={tmp_mib}m")).map_err(setup)?,
        readonly: false,
    });
    Ok(())
}

/// The Landlock ruleset: writes to the work folder, the writable extras and the writable
/// devices only (the child adds its private `/tmp` and `/dev/shm`); and the write access it
/// handles, which the child's own rules grant.
fn landlock_ruleset(
    level: u8,
    work: &Path,
    writable: &[PathBuf],
) -> Result<(OwnedFd, u64), SandboxError> {
    let abi = landlock_abi(level);
    let write = AccessFs::from_write(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(write)
        .map_err(setup)?;
    if level >= crate::kernel::LANDLOCK_SCOPES {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(setup)?;
    }
    let mut created = ruleset.create().map_err(setup)?;
    let mut writable_roots = vec![work.to_path_buf()];
    writable_roots.extend(writable.iter().cloned());
    for root in &writable_roots {
        let fd = PathFd::new(root).map_err(setup)?;
        let access = if root.is_dir() {
            write
        } else {
            write & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(setup)?;
    }
    for dev in WRITABLE_DEVICES {
        let host = Path::new("/dev").join(dev);
        if let Ok(fd) = PathFd::new(&host) {
            created = created
                .add_rule(PathBeneath::new(fd, write & AccessFs::from_file(abi)))
                .map_err(setup)?;
        }
    }
    let ruleset: OwnedFd = Option::<OwnedFd>::from(created)
        .ok_or_else(|| setup("the kernel made no Landlock ruleset"))?;
    Ok((ruleset, write.bits()))
}

impl Confinement {
    pub(crate) fn prepare(req: Request<'_>) -> Result<Confinement, SandboxError> {
        if req.fallback {
            return fallback::prepare(req);
        }
        let paths = Resolved::from_request(&req)?;
        let items = mount_items(&req, &paths)?;
        let (plan, sources) = mount_steps(&items)?;
        let mut opened = Sources::default();
        let mut steps = child_steps(plan, &sources, &paths.berth_home, &mut opened)?;
        push_dev_steps(&mut steps, &mut opened, req.limits.tmp_mib)?;
        // The rules of the ABI this kernel has (or the lower one `BERTH_SANDBOX_PRETEND`
        // names): below 6 the PID and network namespaces do what the scopes would.
        let level = crate::support().landlock_abi;
        let (ruleset, write_access) = landlock_ruleset(level, &paths.work, &paths.writable)?;
        let Sources { mut fds, slots } = opened;

        let (report, report_tx) = report_pipe()?;
        let report_fd = report_tx.as_raw_fd();
        fds.push(report_tx);
        let mut env = req.env;
        let network = match req.net {
            Net::Full => None,
            _ => Some(crate::network::of(
                req.network_key,
                req.ports,
                &req.loopback,
            )?),
        };
        let proxy = match (&req.net, &network) {
            (Net::Proxied { allow, keys }, Some(network)) => {
                let (plan, port, held) = proxy_plan(network, allow, keys)?;
                env.set(proxy_env(port));
                env.set(keys.env(port));
                fds.extend(held);
                Some(plan)
            }
            _ => None,
        };
        let child_writable = vec![
            c"/tmp".to_owned(),
            c"/var/tmp".to_owned(),
            c"/dev/shm".to_owned(),
        ];
        let pid_max = crate::limits::tree_pid_max(req.limits);
        let cgroup = crate::limits::tree_cgroup(req.limits, pid_max.is_some());
        let plan = ChildPlan {
            fallback: false,
            lifeline: lifeline(),
            arguments: crate::child::own_arguments(),
            max_processes: Some(req.limits.processes),
            pid_max: pid_max
                .map(|max| CString::new(max.to_string()).map_err(setup))
                .transpose()?,
            cgroup_procs: cgroup
                .as_ref()
                .map(|c| cstring(&c.join("cgroup.procs")))
                .transpose()?,
            maps: IdMaps::of_this_process(),
            join: network.as_ref().map(|n| n.namespaces()),
            proxy,
            steps,
            ruleset: ruleset.as_raw_fd(),
            child_writable,
            // A user namespace of its own is of no use until its ids are mapped, by writing
            // `/proc/self/uid_map`: the tree's own `/proc` is writable with nested namespaces.
            proc_writable: req.nested_namespaces,
            write_access,
            cwd: cstring(&paths.cwd)?,
            report: report_fd,
            sources: slots,
            seccomp: crate::seccomp::programs(crate::seccomp::Refuse {
                truncate: level < 3,
                user_namespaces: !req.nested_namespaces,
                unix_and_udp: false,
            }),
        };
        Ok(Confinement {
            child: Arc::new(Holder {
                plan,
                _network: network,
                _fds: fds,
                _ruleset: ruleset,
                report,
            }),
            rules: paths.into_rules(req.net),
            env,
        })
    }

    /// Makes `command` start confined, with berth's environment by allow list (what was set
    /// on `command` itself passes as set). One confinement is for one spawn: the child adds
    /// its private `/tmp` to the ruleset it shares with this one.
    pub fn apply_std(&self, command: &mut std::process::Command) {
        self.env.apply(command);
        let holder = self.child.clone();
        // SAFETY: the hook only makes system calls on data the holder owns (and keeps alive
        // as long as the command), as a child between fork and exec must.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(command, move || {
                crate::child::enter(&holder.plan)
            });
        }
    }

    /// [`Confinement::apply_std`] for tokio's command.
    pub fn apply_tokio(&self, command: &mut tokio::process::Command) {
        self.env.apply(command.as_std_mut());
        let holder = self.child.clone();
        // SAFETY: as in `apply_std`.
        unsafe {
            command.pre_exec(move || crate::child::enter(&holder.plan));
        }
    }

    /// A spawn's failure, told as the stage of the confinement the kernel refused (when it
    /// was one) and what berth does about it.
    pub fn spawn_error(&self, program: &str, e: &std::io::Error) -> String {
        let mut bytes = [0u8; 4];
        // SAFETY: a non-blocking read into a buffer on the stack.
        let n = unsafe {
            libc::read(
                self.child.report.as_raw_fd(),
                bytes.as_mut_ptr().cast(),
                bytes.len(),
            )
        };
        let stage = (n == 4).then(|| u32::from_le_bytes(bytes));
        tracing::debug!(
            program,
            stage = stage.map(|s| self.stage_name(s)),
            "a confined spawn failed: {e}"
        );
        match stage {
            Some(stage) => format!(
                "could not start `{program}` confined: {} failed ({e}). berth runs nothing unconfined; `berth doctor` says what this kernel can enforce, and `[sandbox] mode = \"off\"` turns confinement off",
                self.stage_name(stage)
            ),
            None => crate::spawn_error(program, e),
        }
    }

    fn stage_name(&self, stage: u32) -> String {
        use crate::child::Stage;
        match stage {
            Stage::NAMESPACES => {
                "making mount and PID namespaces, or joining the workspace's network".into()
            }
            Stage::TMP_RULES => "allowing writes to the private /tmp".into(),
            Stage::CAPABILITIES => "dropping capabilities".into(),
            Stage::LANDLOCK => "entering the Landlock domain".into(),
            Stage::CWD => format!("entering {}", self.rules.work.display()),
            Stage::SOURCES => "opening the folders to mount".into(),
            Stage::SECCOMP => "installing the seccomp filter".into(),
            Stage::SUPERVISOR => "starting the PID namespace's init".into(),
            Stage::PROC => "mounting the PID namespace's /proc".into(),
            Stage::SESSION => "starting a session of its own".into(),
            Stage::LIMITS => "setting the process limit".into(),
            Stage::DESCRIPTORS => "closing inherited descriptors".into(),
            Stage::CGROUP => "joining the tree's cgroup".into(),
            n => match self.child.plan.steps.get((n - Stage::MOUNTS) as usize) {
                Some(step) => step.to_string(),
                None => format!("stage {n}"),
            },
        }
    }

    /// Whether berth's variable `name` is passed on to the process (the allow list).
    pub fn passes_env(&self, name: &std::ffi::OsStr) -> bool {
        self.env.allows(name)
    }

    pub(crate) fn rules(&self) -> &Rules {
        &self.rules
    }

    /// The folders and files it may write (the work folder first), `/tmp` aside.
    pub fn writable(&self) -> Vec<&Path> {
        std::iter::once(self.rules.work.as_path())
            .chain(self.rules.writable.iter().map(PathBuf::as_path))
            .collect()
    }
}
