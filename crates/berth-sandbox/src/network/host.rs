//! The workspace's ports from the host: berth watches which of them something in the
//! namespace listens on (its table of TCP sockets, read every [`LOOK_EVERY`]), and listens on
//! the host's loopback at those ports while they are, forwarding what comes in. So a port is
//! the host's to use while nothing of the workspace serves on it, and closed again once its
//! server ends.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::net::{Ipv4Addr, Ipv6Addr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{Asker, Forward, holder, serve_listener};

/// How often the namespace's listeners are looked at: how long a new server waits before
/// the host reaches it, and an ended one's port stays taken.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// The host's side of the workspace's ports.
pub(super) struct Inward {
    holder: Arc<Asker>,
    /// The namespace's `/proc/net/tcp` and `tcp6`, read again at each look.
    tables: (File, Option<File>),
    ports: Mutex<BTreeSet<u16>>,
    /// The ports forwarded now, with their listeners on the host.
    open: Mutex<BTreeMap<u16, Vec<Arc<TcpListener>>>>,
    /// The ports served inside that the host already uses, and why they are not forwarded.
    refused: Mutex<BTreeMap<u16, String>>,
    stopped: AtomicBool,
}

impl Inward {
    pub(super) fn new(holder: Arc<Asker>, tcp: File, tcp6: Option<File>) -> Inward {
        Inward {
            holder,
            tables: (tcp, tcp6),
            ports: Mutex::new(BTreeSet::new()),
            open: Mutex::new(BTreeMap::new()),
            refused: Mutex::new(BTreeMap::new()),
            stopped: AtomicBool::new(false),
        }
    }

    /// Starts looking, until [`Inward::stop`]: one thread of this process looks at every
    /// network's in turn (a server holding hundreds of workspaces' networks runs one).
    pub(super) fn watch(self: &Arc<Self>) {
        static WATCHED: Mutex<Vec<std::sync::Weak<Inward>>> = Mutex::new(Vec::new());
        static LOOKER: std::sync::Once = std::sync::Once::new();
        lock(&WATCHED).push(Arc::downgrade(self));
        LOOKER.call_once(|| {
            let started = std::thread::Builder::new()
                .name("berth-ports".into())
                .spawn(|| {
                    loop {
                        let live: Vec<Arc<Inward>> = {
                            let mut watched = lock(&WATCHED);
                            watched.retain(|w| {
                                w.upgrade()
                                    .is_some_and(|i| !i.stopped.load(Ordering::Acquire))
                            });
                            watched
                                .iter()
                                .filter_map(std::sync::Weak::upgrade)
                                .collect()
                        };
                        for inward in live {
                            inward.look();
                        }
                        std::thread::sleep(LOOK_EVERY);
                    }
                });
            if let Err(e) = started {
                tracing::error!("the workspaces' ports will not be reached from the host: {e}");
            }
        });
    }

    /// Adds the workspace's ports (its block may be given after its first process).
    pub(super) fn add_ports(&self, ports: &[u16]) {
        lock(&self.ports).extend(ports.iter().copied());
    }

    /// The forwards in force, and the ports refused.
    pub(super) fn forwards(&self) -> Vec<Forward> {
        let to = |port| format!("127.0.0.1:{port} in the workspace's network");
        let open: Vec<Forward> = lock(&self.open)
            .keys()
            .map(|&port| Forward {
                inward: true,
                port,
                to: to(port),
                error: None,
            })
            .collect();
        let refused: Vec<Forward> = lock(&self.refused)
            .iter()
            .map(|(&port, error)| Forward {
                inward: true,
                port,
                to: to(port),
                error: Some(error.clone()),
            })
            .collect();
        open.into_iter().chain(refused).collect()
    }

    /// Stops looking, and closes every port.
    pub(super) fn stop(&self) {
        // Under the lock a look opens ports under, so none opens one after this.
        let mut open = lock(&self.open);
        self.stopped.store(true, Ordering::Release);
        for listener in open.values().flatten() {
            // SAFETY: shutdown on a listener still open; its thread's accept then fails.
            unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
        }
        open.clear();
    }

    /// One look: a port served inside is opened on the host, one no longer served closed.
    fn look(&self) {
        let served = self.served();
        let ports = lock(&self.ports).clone();
        let mut open = lock(&self.open);
        if self.stopped.load(Ordering::Acquire) {
            return;
        }
        let mut refused = lock(&self.refused);
        open.retain(|port, listeners| {
            let keep = served.contains(port);
            if !keep {
                for listener in listeners.iter() {
                    // SAFETY: as in `stop`.
                    unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
                }
            }
            keep
        });
        refused.retain(|port, _| served.contains(port));
        for &port in ports.intersection(&served) {
            if open.contains_key(&port) || refused.contains_key(&port) {
                continue;
            }
            match self.open_port(port) {
                Ok(listeners) => {
                    tracing::debug!(port, "a server of the workspace is reached from the host");
                    open.insert(port, listeners);
                }
                Err(error) => {
                    tracing::error!(port, "{error}");
                    refused.insert(port, error);
                }
            }
        }
    }

    /// Listens on the host's loopback at `port`, forwarding into the namespace.
    fn open_port(&self, port: u16) -> Result<Vec<Arc<TcpListener>>, String> {
        let v4 = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).map_err(|e| {
            format!(
                "port {port} of the workspace is served in its network but not reachable from the host: the host already uses 127.0.0.1:{port} ({e}); stop what listens there (`ss -ltnp 'sport = :{port}'` names it)"
            )
        })?;
        let mut listeners = vec![Arc::new(v4)];
        // Where the host has IPv6 and `::1` at that port is free.
        if let Ok(v6) = TcpListener::bind((Ipv6Addr::LOCALHOST, port)) {
            listeners.push(Arc::new(v6));
        }
        for listener in &listeners {
            let holder = Arc::clone(&self.holder);
            serve_listener(
                Arc::clone(listener),
                Arc::clone(&self.holder),
                move |client| {
                    into_namespace(&holder, &client, port);
                },
            );
        }
        Ok(listeners)
    }

    /// The ports something in the namespace listens on.
    fn served(&self) -> BTreeSet<u16> {
        let mut ports = listening(&self.tables.0);
        if let Some(tcp6) = &self.tables.1 {
            ports.extend(listening(tcp6));
        }
        ports
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The listening ports of a `/proc/net/tcp` table, read again from its start.
fn listening(table: &File) -> BTreeSet<u16> {
    let mut text = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match table.read_at(&mut chunk, text.len() as u64) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::debug!("the namespace's sockets could not be read: {e}");
                break;
            }
        }
    }
    listening_in(&String::from_utf8_lossy(&text))
}

/// The ports of the sockets in state `0A` (listen) of a table's text: `sl local rem st …`,
/// `local` as `ADDRESS:PORT` in hexadecimal.
fn listening_in(text: &str) -> BTreeSet<u16> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let local = fields.nth(1)?;
            let state = fields.nth(1)?;
            let port = local.rsplit_once(':')?.1;
            (state == "0A").then(|| u16::from_str_radix(port, 16).ok())?
        })
        .collect()
}

/// One connection from the host, to `port` in the namespace: IPv4, then IPv6. Nothing
/// listening there (it just ended) resets it.
fn into_namespace(holder: &Asker, client: &TcpStream, port: u16) {
    for v6 in [false, true] {
        let Ok(socket) = holder.ask(holder::SOCKET, v6, 0) else {
            continue;
        };
        if holder::connect_loopback(&socket, v6, port).is_ok() {
            crate::proxy::relay(client, &TcpStream::from(socket), &[]);
            return;
        }
    }
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket this function borrows, with a value on the stack.
    unsafe {
        libc::setsockopt(
            client.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_gives_its_listening_ports() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:4E8A 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n\
   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0\n\
   2: 0100007F:4E8A 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 20 4 30 10 -1\n";
        assert_eq!(listening_in(table), BTreeSet::from([0x4E8A, 0x1F90]));
        let v6 = "  sl  local_address                         remote_address                        st\n\
   0: 00000000000000000000000001000000:0BB8 00000000000000000000000000000000:0000 0A 0\n";
        assert_eq!(listening_in(v6), BTreeSet::from([3000]));
        assert!(listening_in("header only\n").is_empty());
    }
}
