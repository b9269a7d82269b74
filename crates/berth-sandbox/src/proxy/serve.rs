//! The proxy at work: the thread that takes connections off the channel, the handle that stops
//! it, and the bound on connections served at once (each holds two threads).

use std::io;
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use super::channel::{Received, receive, set_blocking, socket_type};
use super::connection::{forward, serve_http};
use super::{AllowList, MAX_CONNECTIONS, PROXY_INDEX};
use crate::MaskedKeys;

/// The proxy for one network namespace; [`Proxy::serve`] starts it.
pub struct Proxy {
    pub(super) allow: AllowList,
    pub(super) forwards: Vec<(String, u16)>,
    /// The agent's masked providers, served at `/berth/NAME` on the proxy's listener.
    pub(super) keys: MaskedKeys,
    /// The port of its listener inside, where a request for a masked provider's endpoint may
    /// name it.
    pub(super) port: u16,
    /// Connections being served, against [`MAX_CONNECTIONS`].
    live: AtomicUsize,
}

/// The running proxy. Dropping it stops it as [`ProxyHandle::stop`] does, without waiting.
#[must_use = "dropping the handle stops the proxy"]
pub struct ProxyHandle {
    channel: Arc<OwnedFd>,
    ended: Arc<Ended>,
    /// Whether dropping the handle stops the proxy ([`ProxyHandle::detach`] disarms it).
    armed: bool,
}

impl Proxy {
    /// Serves the connections the init passes over `channel` (berth's end of the
    /// `SOCK_SEQPACKET` socketpair), on a thread of its own, until the channel ends.
    ///
    /// `allow` is what the HTTP proxy (listener 0) lets through; `forwards[i - 1]` is where
    /// listener `i` goes (a host name or an IP address, and a port), whatever the allow list
    /// says; `keys` are the agent's masked providers, whose endpoints listener 0 serves too.
    pub fn serve(
        channel: OwnedFd,
        allow: AllowList,
        forwards: Vec<(String, u16)>,
        keys: MaskedKeys,
    ) -> io::Result<ProxyHandle> {
        Proxy::serve_at(crate::PROXY_PORT, channel, allow, forwards, keys)
    }

    /// [`Proxy::serve`] for a listener at `port` inside.
    pub fn serve_at(
        port: u16,
        channel: OwnedFd,
        allow: AllowList,
        forwards: Vec<(String, u16)>,
        keys: MaskedKeys,
    ) -> io::Result<ProxyHandle> {
        if socket_type(channel.as_fd())? != libc::SOCK_SEQPACKET {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "berth's proxy takes the SOCK_SEQPACKET socket of its namespace's init",
            ));
        }
        // A non-blocking channel would read as ended at its first quiet moment.
        set_blocking(channel.as_fd())?;
        let channel = Arc::new(channel);
        let ended = Arc::new(Ended::default());
        let proxy = Arc::new(Proxy {
            allow,
            forwards,
            keys,
            port,
            live: AtomicUsize::new(0),
        });
        let (serving_channel, serving_ended) = (Arc::clone(&channel), Arc::clone(&ended));
        thread::Builder::new()
            .name("berth-proxy".into())
            .spawn(move || {
                let _ended = EndedOnDrop(serving_ended);
                take_connections(&proxy, serving_channel.as_fd());
            })?;
        Ok(ProxyHandle {
            channel,
            ended,
            armed: true,
        })
    }
}

impl ProxyHandle {
    /// Stops taking connections: shuts the channel down, which ends the serving thread's wait
    /// at once (the descriptor itself is closed when both the thread and this handle are done
    /// with it). The init's next send fails with `EPIPE`. Connections already passed go on
    /// until their ends close them.
    pub fn stop(&self) {
        // SAFETY: shutdown on a descriptor this handle keeps open.
        unsafe { libc::shutdown(self.channel.as_raw_fd(), libc::SHUT_RDWR) };
    }

    /// Waits up to `timeout` for the serving thread to end (after [`stop`](Self::stop), or the
    /// init's end of the channel closing); whether it has.
    pub fn wait(&self, timeout: Duration) -> bool {
        let ended = self
            .ended
            .ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (ended, _) = self
            .ended
            .changed
            .wait_timeout_while(ended, timeout, |ended| !*ended)
            .unwrap_or_else(PoisonError::into_inner);
        *ended
    }
}

impl ProxyHandle {
    /// Lets the proxy serve until its channel ends (the init, and with it the namespace, is
    /// gone), whatever becomes of this handle: a confinement is dropped once its process has
    /// started, and the agent's connections must go on.
    pub fn detach(mut self) {
        self.armed = false;
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        if self.armed {
            self.stop();
        }
    }
}

/// Whether the serving thread has ended.
#[derive(Default)]
struct Ended {
    ended: Mutex<bool>,
    changed: Condvar,
}

/// Marks the serving thread ended when it returns, or unwinds.
struct EndedOnDrop(Arc<Ended>);

impl Drop for EndedOnDrop {
    fn drop(&mut self) {
        *self.0.ended.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.0.changed.notify_all();
    }
}

fn take_connections(proxy: &Arc<Proxy>, channel: BorrowedFd<'_>) {
    loop {
        match receive(channel) {
            Ok(Received::Connection { socket, index }) => start_connection(proxy, socket, index),
            Ok(Received::Malformed) => {}
            // An error other than EINTR means the channel is unusable: the same as its end.
            Ok(Received::End) | Err(_) => return,
        }
    }
}

/// A place among [`MAX_CONNECTIONS`], given back when its connection's thread ends.
struct Slot(Arc<Proxy>);

impl Slot {
    fn take(proxy: &Arc<Proxy>) -> Option<Slot> {
        proxy
            .live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                (live < MAX_CONNECTIONS).then_some(live + 1)
            })
            .ok()?;
        Some(Slot(Arc::clone(proxy)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Hands one passed connection to a thread of its own. Every way out that does not start the
/// thread drops the socket, which closes the connection: that is the answer.
fn start_connection(proxy: &Arc<Proxy>, socket: OwnedFd, index: u8) {
    let Some(slot) = Slot::take(proxy) else {
        return;
    };
    if socket_type(socket.as_fd()).ok() != Some(libc::SOCK_STREAM) {
        return;
    }
    let client = TcpStream::from(socket);
    // The init may have accepted it non-blocking, and that flag travels with the socket.
    if client.set_nonblocking(false).is_err() {
        return;
    }
    let _ = thread::Builder::new()
        .name("berth-proxy-conn".into())
        .spawn(move || {
            let proxy = &slot.0;
            if index == PROXY_INDEX {
                serve_http(proxy, &client);
            } else if let Some((host, port)) = proxy.forwards.get(usize::from(index) - 1) {
                forward(&client, host, *port);
            }
        });
}
