//! A workspace's network: one network namespace that every confined tree of the workspace
//! joins (its agent, its terminals, its checks, berth's `run_command`), so that the agent
//! reaches the server its terminal started, and the ways in and out of it:
//!
//! - **its ports from the host** ([`host`]): while something in the namespace listens on one
//!   of the workspace's ports, berth listens on the host's loopback at that port and forwards
//!   what comes in, to the same port inside (IPv4 first, then IPv6). A port the host already
//!   uses is not forwarded: that is logged as an error naming the port, and
//!   [`Forward::error`] says so.
//! - **the host's loopback services it is allowed**: an `allow_hosts` entry naming the host's
//!   loopback (`127.0.0.1:5432`, `localhost:6379`) listens inside at the same port and goes to
//!   the host's. Nothing else of the host's loopback is reachable.
//!
//! The namespace is made and held by a small process of berth's ([`holder`]), which makes
//! sockets in it on request; the trees join it by descriptors of its user and network
//! namespaces. A network lives as long as the berth process that made it, or until
//! [`close`] (a workspace removed): its forwards end then, and its namespace with the last
//! process in it.
//!
//! A berth process hands its network to a berth it starts for the same workspace (berth's own
//! agent under a run, `berth acp`: [`Handoff`]), which joins it: its trees are in the same
//! namespace, and the forwards stay the first process's.
//!
//! Decision: per berth process (and the berths it starts), not per machine. Two unrelated
//! berth processes confining in one workspace at once (a run and `berth mcp`) each make one,
//! and the second cannot listen on the ports the first holds: its forwards from the host are
//! the ones refused.

mod holder;
mod host;

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use crate::SandboxError;

/// Connections a network forwards at once, each way together: each holds two threads.
const MAX_CONNECTIONS: usize = 256;
/// How many ports past [`crate::PROXY_PORT`] a proxy of a tree may take, where other trees
/// of the workspace hold the ones before.
const PROXY_PORTS: u16 = 64;

/// One way in or out of a workspace's network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// From the host's loopback into the namespace (a workspace's port), or the other way (an
    /// `allow_hosts` entry on the host's loopback).
    pub inward: bool,
    pub port: u16,
    /// Where it goes: `127.0.0.1:PORT` in the namespace, or the allowed host.
    pub to: String,
    /// Why it is not in force.
    pub error: Option<String>,
}

/// The variable that hands a network to a berth process started for its workspace:
/// `USER_FD:NET_FD:KEY`, descriptors it inherits.
const HANDOFF_VAR: &str = "BERTH_SANDBOX_NETWORK";

/// The networks of this process, by workspace.
static NETWORKS: Mutex<BTreeMap<PathBuf, Arc<Network>>> = Mutex::new(BTreeMap::new());

/// One workspace's network, while this process holds it.
pub(crate) struct Network {
    holder: Arc<Asker>,
    user_ns: OwnedFd,
    net_ns: OwnedFd,
    pid: libc::pid_t,
    /// The forwards into it from the host's loopback ([`host`]); `None` where it was joined
    /// from the berth that started this one, which forwards for it.
    inward: Option<Arc<host::Inward>>,
    /// The forwards out of it to the host's loopback.
    outward: Mutex<Vec<Forward>>,
    /// Their listeners, shut down when the network goes (which ends their threads' waits).
    listeners: Mutex<Vec<Arc<TcpListener>>>,
}

/// The channel to the holder, one request at a time.
struct Asker {
    channel: Mutex<OwnedFd>,
    live: AtomicUsize,
}

impl Asker {
    fn ask(&self, op: u8, v6: bool, port: u16) -> io::Result<OwnedFd> {
        let channel = self.channel.lock().unwrap_or_else(PoisonError::into_inner);
        holder::ask(&channel, op, v6, port)
    }
}

/// The network of the workspace `key` (its folder), made at its first use in this process,
/// with forwards from the host for `ports` (those not forwarded yet) and into it for
/// `loopback` (the host's loopback entries of the allow list).
pub(crate) fn of(
    key: &Path,
    ports: &[u16],
    loopback: &[(String, u16)],
) -> Result<Arc<Network>, SandboxError> {
    let network = {
        let mut networks = NETWORKS.lock().unwrap_or_else(PoisonError::into_inner);
        match networks.get(key) {
            Some(network) => Arc::clone(network),
            None => {
                let join = handed_on(key);
                let network = Arc::new(Network::start(join).map_err(|e| {
                    SandboxError::Setup(format!(
                        "the network of the workspace at {} could not be made: {e}",
                        key.display()
                    ))
                })?);
                networks.insert(key.to_owned(), Arc::clone(&network));
                network
            }
        }
    };
    if let Some(inward) = &network.inward {
        inward.add_ports(ports);
        for (host, port) in loopback {
            network.forward_to_host(host, *port);
        }
    }
    Ok(network)
}

/// The namespaces the berth that started this process handed on, and for which workspace.
static HANDED: Mutex<Option<(PathBuf, OwnedFd, OwnedFd)>> = Mutex::new(None);
static TAKEN: std::sync::Once = std::sync::Once::new();

/// Takes the network the berth that started this process handed on, if it did: its
/// descriptors are closed on exec from here on, so nothing this process starts (a git, an MCP
/// server of the person's) inherits them. Called first thing, before anything is started;
/// a confinement takes it too, whichever comes first.
pub fn take_handed_network() {
    TAKEN.call_once(|| {
        let Some(value) = std::env::var_os(HANDOFF_VAR) else {
            return;
        };
        let value = value.to_string_lossy().into_owned();
        let mut parts = value.splitn(3, ':');
        let (Some(user), Some(net), Some(handed_key)) = (parts.next(), parts.next(), parts.next())
        else {
            return;
        };
        let (Ok(user), Ok(net)) = (user.parse::<RawFd>(), net.parse::<RawFd>()) else {
            return;
        };
        let mut taken = Vec::new();
        for fd in [user, net] {
            // SAFETY: fcntl on a descriptor number; one that is not open fails, and is not
            // taken.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            if flags == -1 || fd <= 2 {
                return;
            }
            // SAFETY: as above; the descriptor was inherited for this and is ours from here.
            unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
            // SAFETY: open, and handed to this process to own.
            taken.push(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
        }
        let net = taken.pop();
        let user = taken.pop();
        if let (Some(user), Some(net)) = (user, net) {
            *HANDED.lock().unwrap_or_else(PoisonError::into_inner) =
                Some((PathBuf::from(handed_key), user, net));
        }
    });
}

/// The namespaces handed on for `key` ([`take_handed_network`]).
fn handed_on(key: &Path) -> Option<(RawFd, RawFd)> {
    take_handed_network();
    let handed = HANDED.lock().unwrap_or_else(PoisonError::into_inner);
    match &*handed {
        Some((handed_key, user, net)) if handed_key == key => {
            Some((user.as_raw_fd(), net.as_raw_fd()))
        }
        _ => None,
    }
}

/// A workspace's network, handed on to a berth process about to start for the workspace
/// ([`crate::Sandbox::network_handoff`]): it joins the same namespace.
pub struct Handoff {
    network: Arc<Network>,
    key: PathBuf,
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handoff").field("key", &self.key).finish()
    }
}

impl Handoff {
    pub(crate) fn of(
        key: &Path,
        ports: &[u16],
        loopback: &[(String, u16)],
    ) -> Result<Handoff, SandboxError> {
        Ok(Handoff {
            network: of(key, ports, loopback)?,
            key: key.to_owned(),
        })
    }

    /// Makes `command` (a berth) inherit the network: the namespaces' descriptors, and the
    /// variable naming them.
    pub fn apply_tokio(&self, command: &mut tokio::process::Command) {
        let (user, net) = self.network.namespaces();
        command.env(HANDOFF_VAR, format!("{user}:{net}:{}", self.key.display()));
        // SAFETY: fcntl on descriptors the network keeps open as long as this process.
        unsafe {
            command.pre_exec(move || {
                for fd in [user, net] {
                    if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
    }
}

/// Ends the network of the workspace `key` in this process: its forwards stop; processes
/// still in it keep their namespace, reaching nothing more.
pub fn close(key: &Path) {
    NETWORKS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(key);
}

/// The forwards of the workspace `key`'s network in this process (none where it has none).
pub fn forwards(key: &Path) -> Vec<Forward> {
    let networks = NETWORKS.lock().unwrap_or_else(PoisonError::into_inner);
    networks.get(key).map_or_else(Vec::new, |network| {
        let mut forwards: Vec<Forward> = network.inward.iter().flat_map(|i| i.forwards()).collect();
        forwards.extend(
            network
                .outward
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .cloned(),
        );
        forwards
    })
}

impl Network {
    fn start(join: Option<(RawFd, RawFd)>) -> io::Result<Network> {
        let started = holder::start(join)?;
        let holder = Arc::new(Asker {
            channel: Mutex::new(started.channel),
            live: AtomicUsize::new(0),
        });
        let inward = join.is_none().then(|| {
            let inward = Arc::new(host::Inward::new(
                Arc::clone(&holder),
                File::from(started.tcp),
                started.tcp6.map(File::from),
            ));
            inward.watch();
            inward
        });
        Ok(Network {
            holder,
            user_ns: started.user_ns,
            net_ns: started.net_ns,
            pid: started.pid,
            inward,
            outward: Mutex::new(Vec::new()),
            listeners: Mutex::new(Vec::new()),
        })
    }

    /// Descriptors of its user and network namespaces, which a tree joins.
    pub(crate) fn namespaces(&self) -> (RawFd, RawFd) {
        (self.user_ns.as_raw_fd(), self.net_ns.as_raw_fd())
    }

    /// Listeners for a tree's proxy, on the namespace's loopback at the first port from
    /// [`crate::PROXY_PORT`] no other tree's proxy holds: the port, and its IPv4 and (where
    /// there is IPv6) IPv6 listeners. They are the tree's: its init holds them, and they
    /// close with it.
    pub(crate) fn proxy_listeners(&self) -> io::Result<(u16, Vec<OwnedFd>)> {
        let mut last = io::Error::from_raw_os_error(libc::EADDRINUSE);
        for port in crate::PROXY_PORT..crate::PROXY_PORT + PROXY_PORTS {
            match self.holder.ask(holder::LISTEN, false, port) {
                Ok(v4) => {
                    let mut listeners = vec![v4];
                    if let Ok(v6) = self.holder.ask(holder::LISTEN, true, port) {
                        listeners.push(v6);
                    }
                    return Ok((port, listeners));
                }
                Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// Listens inside at `port` and forwards to `host` on the host's loopback.
    fn forward_to_host(&self, host: &str, port: u16) {
        let mut outward = self.outward.lock().unwrap_or_else(PoisonError::into_inner);
        if outward.iter().any(|f| f.port == port) {
            return;
        }
        let to = format!("{host}:{port}");
        let mut listeners = Vec::new();
        let mut error = None;
        for v6 in [false, true] {
            match self.holder.ask(holder::LISTEN, v6, port) {
                Ok(fd) => listeners.push(TcpListener::from(fd)),
                // No IPv6 in the namespace: IPv4 serves.
                Err(_) if v6 => {}
                Err(e) => {
                    error = Some(format!(
                        "{to} could not be forwarded into the workspace's network: {e}"
                    ))
                }
            }
        }
        for listener in listeners {
            let listener = Arc::new(listener);
            self.listeners
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Arc::clone(&listener));
            let host = host.to_owned();
            serve_listener(listener, Arc::clone(&self.holder), move |client| {
                crate::proxy::forward(&client, &host, port);
            });
        }
        match &error {
            Some(error) => tracing::error!(port, "{error}"),
            None => tracing::debug!(port, %to, "the host's service is forwarded in"),
        }
        outward.push(Forward {
            inward: false,
            port,
            to,
            error,
        });
    }
}

/// Takes `listener`'s connections on a thread of its own, each served by `serve` on another,
/// at most [`MAX_CONNECTIONS`] at once for the network; until the listener is shut down.
fn serve_listener(
    listener: Arc<TcpListener>,
    holder: Arc<Asker>,
    serve: impl Fn(TcpStream) + Send + Sync + 'static,
) {
    let serve = Arc::new(serve);
    let started = thread::Builder::new()
        .name("berth-forward".into())
        .spawn(move || {
            loop {
                let client = match listener.accept() {
                    Ok((client, _)) => client,
                    // The network shut the listener down.
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return,
                    // Out of descriptors, or a connection gone before it was taken.
                    Err(e) => {
                        tracing::debug!("a forward's accept failed: {e}");
                        thread::sleep(std::time::Duration::from_millis(50));
                        continue;
                    }
                };
                let taken = holder
                    .live
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                        (n < MAX_CONNECTIONS).then_some(n + 1)
                    });
                if taken.is_err() {
                    continue;
                }
                let (holder, serve) = (Arc::clone(&holder), Arc::clone(&serve));
                let spawned = thread::Builder::new()
                    .name("berth-forward-conn".into())
                    .spawn(move || {
                        serve(client);
                        holder.live.fetch_sub(1, Ordering::Relaxed);
                    });
                if let Err(e) = spawned {
                    tracing::warn!("a forwarded connection was dropped: {e}");
                }
            }
        });
    if let Err(e) = started {
        tracing::error!("a forward could not start: {e}");
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        if let Some(inward) = &self.inward {
            inward.stop();
        }
        for listener in self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            // SAFETY: shutdown on a listener still open; its thread's accept then fails.
            unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
        }
        // SAFETY: our own child, which holds nothing a tree needs (they hold the namespaces).
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        holder::reap(self.pid);
    }
}
