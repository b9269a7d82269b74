//! The way out of a confined agent's network namespace: a proxy on the host side that lets
//! connections through to the hosts the user allowed **by name**.
//!
//! A confined agent lives in a network namespace of its own, with nothing in it but a loopback.
//! A tiny init in that namespace (`child.rs`) listens on TCP ports of that loopback, and passes
//! every connection it accepts to berth over a Unix socket (`SCM_RIGHTS`). A passed socket is
//! the host's to read and write like any other, even though it belongs to the namespace: berth
//! talks to the agent's connection itself, and no byte is copied through the init, which stays
//! a handful of system calls with no buffers, no DNS and no policy of its own. Names are
//! resolved and upstream connections made here, with the host's resolver and network.
//!
//! # Wire format
//!
//! The channel is a `socketpair(AF_UNIX, SOCK_SEQPACKET)`; berth keeps one end ([`Proxy::serve`]
//! takes it) and the init the other. For each accepted connection the init sends **one message**:
//!
//! - its payload is **exactly 1 byte**: the index of the listener that accepted the connection;
//! - its ancillary data is one `SCM_RIGHTS` control message with **exactly one descriptor**:
//!   the accepted TCP socket, which the init then closes on its side.
//!
//! Index 0 is the HTTP proxy listener (`HTTPS_PROXY`, `HTTP_PROXY` and `ALL_PROXY` point at it).
//! Index `i >= 1` is the fixed forward `forwards[i - 1]`. [`send_fd`] writes one message.
//!
//! The payload is never empty, so an empty read is the end of the channel: the init is gone,
//! and with it the namespace; the proxy stops taking connections (those it has go on until
//! their ends close). A message of any other shape (no descriptor, several, a longer payload)
//! is dropped with the descriptors it carried, and an index with no forward closes its
//! connection.
//!
//! # What the proxy does
//!
//! On the proxy listener it reads one HTTP/1.x request head (at most 64 KiB, and no more than
//! 30 s of silence while it comes):
//!
//! - `CONNECT host:port`: if the allow list has `host:port`, berth connects and answers
//!   `200 Connection established`, then relays bytes both ways (HTTPS, or anything over TCP);
//! - a plain-HTTP request in absolute form (`GET http://host[:port]/path`): if allowed, berth
//!   connects, sends the head in origin form (`GET /path`), and relays both ways;
//! - anything else: `400`. A host not allowed: `403`, whose body names the host and port and
//!   the `allow_hosts` entry that would allow it. A name that does not resolve, or a host
//!   that cannot be reached: `502` (`504` when connecting takes more than 30 s).
//!
//! Those answers are the record of a refusal: the proxy logs nothing.
//!
//! # Decisions
//!
//! - **Matching is by the name the client sent**, before any resolution: `api.example.com`
//!   allowed does not allow `93.184.215.14`, and `127.0.0.1:4567` allowed does not allow
//!   `localhost:4567` (nor the other way round). Names compare case-insensitively, without a
//!   trailing dot. An address literal matches only an entry of the same address
//!   (`[::ffff:127.0.0.1]` is the same address as `127.0.0.1`).
//! - **A name whose last label is a number** (`127.1`, `2130706433`, `0x7f.1`) is neither a name
//!   nor an address here: the resolver would read it as an address, so no entry can allow it.
//! - **Where an allowed name leads is the user's choice**: a name listed as such is connected to
//!   whatever it resolves to, loopback and private addresses included (that is what a provider
//!   on `localhost:4567` or a registry on the office network needs). `localhost` is a name like
//!   any other, allowed only when listed. But a name allowed **only through a wildcard**
//!   (`*.example.com`) is not connected to an address of this machine or its link (loopback,
//!   link-local, including cloud metadata's 169.254.169.254, unspecified): whoever controls
//!   some subdomain's DNS could otherwise point it at the host's own listeners, which the
//!   namespace exists to keep out of reach. Private networks stay reachable that way.
//! - **Plain HTTP is one request per connection**: the head sent upstream carries
//!   `Connection: close` (unless the client asked for an `Upgrade`), and everything after it is
//!   relayed as is. A client that kept the connection for a second request would send it to the
//!   same server, never to another host.
//! - The fixed forwards are berth's own (a provider's URL), and are not checked against the
//!   allow list.
//! - At most [`MAX_CONNECTIONS`] connections are served at once; more are closed as they come.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv6Addr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};
use std::{fmt, thread};

use crate::SandboxError;

/// The listener index of the HTTP proxy; the fixed forwards are 1 and up.
const PROXY_INDEX: u8 = 0;
/// The longest request head the proxy reads.
const HEAD_LIMIT: usize = 64 * 1024;
/// How long the proxy waits for more of a request head before answering `408`.
const HEAD_SILENCE: Duration = Duration::from_secs(30);
/// How long connecting upstream may take, over all of a name's addresses.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections served at once: each holds two threads.
const MAX_CONNECTIONS: usize = 512;
/// After an error answer, how long (and how much) the proxy reads what the client still sends.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1024 * 1024;

/// Room for the control message of one descriptor, as `cmsghdr` must be aligned.
// SAFETY: CMSG_SPACE only computes a size from its argument.
const FD_SPACE: usize = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize;

/// A control-message buffer aligned for `cmsghdr`. Room for several descriptors, so that a
/// message carrying too many is still read whole, and its descriptors closed.
#[repr(C, align(8))]
struct ControlBuffer([u8; 64]);

const _: () = assert!(FD_SPACE <= size_of::<ControlBuffer>());

// ---------------------------------------------------------------------------------------------
// The allow list

/// The hosts a confined agent may reach through the proxy: `[sandbox] allow_hosts`.
///
/// Entries are read as:
///
/// - `api.example.com:443`: that name, on that port;
/// - `*.example.com:443`: every subdomain of example.com (`a.example.com`,
///   `a.b.example.com`), but not `example.com` itself: list both for both;
/// - `example.com`, `*.example.com`: a bare name allows port 443 only (HTTPS, which is what a
///   name without a scheme most likely means); write `example.com:80` for plain HTTP;
/// - `https://host[:port][/path]`, `http://host[:port][/path]`: the URL's host and port (443 and
///   80 by default); the path is ignored;
/// - `127.0.0.1:4567`, `[::1]:8080` (an IPv6 address in brackets): that address, on that port.
///
/// The empty list allows nothing.
#[derive(Debug, Clone, Default)]
pub struct AllowList {
    rules: Vec<Rule>,
}

/// One entry of the allow list.
#[derive(Debug, Clone)]
struct Rule {
    hosts: Pattern,
    port: u16,
    /// The entry as the user wrote it, for messages.
    entry: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Exact(Host),
    /// `*.example.com`, kept as `.example.com`: any name that ends with it.
    Subdomains(String),
}

impl Rule {
    fn is_wildcard(&self) -> bool {
        matches!(self.hosts, Pattern::Subdomains(_))
    }
}

impl AllowList {
    /// Reads `[sandbox] allow_hosts`. An entry that cannot be read is an error naming it.
    pub fn parse<I>(entries: I) -> Result<AllowList, SandboxError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let rules = entries
            .into_iter()
            .map(|entry| parse_rule(entry.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(AllowList { rules })
    }

    /// Whether the list allows `host:port`, `host` as a client names it: a host name (any case,
    /// a trailing dot or not), an IPv4 address, or an IPv6 address (with or without brackets).
    pub fn allows(&self, host: &str, port: u16) -> bool {
        Host::parse(host).is_some_and(|host| self.rule_for(&host, port).is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The entry that allows `host:port`; one naming the host exactly wins over a wildcard,
    /// since a wildcard allows less (see the module's decisions).
    fn rule_for(&self, host: &Host, port: u16) -> Option<&Rule> {
        let mut wildcard = None;
        for rule in self.rules.iter().filter(|rule| rule.port == port) {
            match (&rule.hosts, host) {
                (Pattern::Exact(exact), _) if exact == host => return Some(rule),
                (Pattern::Subdomains(suffix), Host::Name(name))
                    if wildcard.is_none()
                        && name.len() > suffix.len()
                        && name.ends_with(suffix) =>
                {
                    wildcard = Some(rule)
                }
                _ => {}
            }
        }
        wildcard
    }
}

fn parse_rule(entry: &str) -> Result<Rule, SandboxError> {
    let invalid = |why: &str| {
        SandboxError::Invalid(format!(
            "`[sandbox] allow_hosts`: the entry `{entry}` {why}; entries look like `api.example.com:443`, `*.example.com:443`, `https://api.example.com` or `127.0.0.1:8080`"
        ))
    };
    let text = entry.trim();
    if text.is_empty() {
        return Err(invalid("is empty"));
    }
    let (authority, default_port) = if let Some(rest) = strip_prefix_ignore_case(text, "https://") {
        (url_authority(rest).map_err(invalid)?, 443)
    } else if let Some(rest) = strip_prefix_ignore_case(text, "http://") {
        (url_authority(rest).map_err(invalid)?, 80)
    } else if text.contains("://") {
        return Err(invalid(
            "is a URL of a scheme berth's proxy does not carry (only http:// and https://)",
        ));
    } else {
        (text, 443)
    };
    let (host_text, port) = split_host_port(authority).map_err(invalid)?;
    let hosts = if let Some(domain) = host_text.strip_prefix("*.") {
        match Host::parse(domain) {
            Some(Host::Name(name)) => Pattern::Subdomains(format!(".{name}")),
            _ => {
                return Err(invalid(
                    "has `*.` before something that is not a domain name",
                ));
            }
        }
    } else if host_text == "*" {
        return Err(invalid(
            "would allow every host: `[sandbox] network = \"full\"` is the setting for that",
        ));
    } else if host_text.contains('*') {
        return Err(invalid(
            "has a `*` that is not the whole first label (`*.example.com` allows every subdomain of example.com)",
        ));
    } else {
        Pattern::Exact(Host::parse(host_text).ok_or_else(|| invalid(why_not_a_host(host_text)))?)
    };
    Ok(Rule {
        hosts,
        port: port.unwrap_or(default_port),
        entry: text.to_owned(),
    })
}

fn why_not_a_host(text: &str) -> &'static str {
    if text.is_empty() {
        "has no host"
    } else if !text.is_ascii() {
        "has a host name that is not ASCII: write it in its ASCII form (`xn--…`)"
    } else {
        "has a host that is neither a host name, an IPv4 address nor an IPv6 address in brackets"
    }
}

/// The authority of a URL, after its `scheme://`.
fn url_authority(rest: &str) -> Result<&str, &'static str> {
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if authority.contains('@') {
        return Err("carries a user name or password: write the host and port only");
    }
    Ok(authority)
}

/// `host[:port]`, with an IPv6 address in brackets; the host is returned as written, brackets
/// included.
fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), &'static str> {
    let (host, port) = if authority.starts_with('[') {
        let Some(close) = authority.find(']') else {
            return Err("has a `[` without its `]`");
        };
        let (host, rest) = authority.split_at(close + 1);
        match rest {
            "" => (host, None),
            _ => match rest.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err("has something other than `:port` after its `]`"),
            },
        }
    } else {
        match authority.matches(':').count() {
            0 => (authority, None),
            1 => authority
                .split_once(':')
                .map(|(host, port)| (host, Some(port)))
                .unwrap_or((authority, None)),
            _ => {
                return Err(
                    "has several `:`: write an IPv6 address in brackets, as in `[::1]:443`",
                );
            }
        }
    };
    let port = match port {
        None => None,
        Some(digits) => {
            Some(parse_port(digits).ok_or("has a port that is not a number from 1 to 65535")?)
        }
    };
    Ok((host, port))
}

fn parse_port(digits: &str) -> Option<u16> {
    // `u16::from_str` would take `+443`.
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|port| *port != 0)
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// A host as a client or an allow list entry names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    /// A DNS name: lowercase, without a trailing dot.
    Name(String),
    /// An address literal, in its canonical form (an IPv4-mapped IPv6 address is the IPv4
    /// address).
    Ip(IpAddr),
}

impl Host {
    /// `example.com`, `127.0.0.1`, `[::1]` or `::1`; `None` for anything else.
    fn parse(text: &str) -> Option<Host> {
        if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            let address = inner.parse::<Ipv6Addr>().ok()?;
            return Some(Host::Ip(IpAddr::V6(address).to_canonical()));
        }
        if let Ok(address) = text.parse::<IpAddr>() {
            return Some(Host::Ip(address.to_canonical()));
        }
        let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
        is_host_name(&name).then_some(Host::Name(name))
    }
}

impl fmt::Display for Host {
    /// As an allow list entry writes it (so that a `403` can say what to add).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V6(address)) => write!(f, "[{address}]"),
            Host::Ip(address) => write!(f, "{address}"),
        }
    }
}

/// Letters, digits, `-` and `_` in labels of 1 to 63 characters, 253 in all, and a last label
/// that is not a number: the resolver reads `127.1`, `2130706433` or `0x7f.1` as an address,
/// which a name entry must not let through.
fn is_host_name(name: &str) -> bool {
    let labels_ok = name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    let last = name.rsplit('.').next().unwrap_or_default();
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || strip_prefix_ignore_case(last, "0x")
            .is_some_and(|hex| hex.bytes().all(|b| b.is_ascii_hexdigit()));
    labels_ok && !numeric
}

/// Addresses a wildcard entry does not reach: this machine's own, and its link's.
fn is_on_this_machine(address: IpAddr) -> bool {
    match address.to_canonical() {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.is_unspecified(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.is_unicast_link_local() || v6.is_unspecified(),
    }
}

// ---------------------------------------------------------------------------------------------
// The channel

/// Sends one connection over the channel, in the wire format above: `index` as the payload,
/// `socket` in `SCM_RIGHTS`. It allocates nothing and takes no lock, so the init may call it
/// in a forked child.
pub(crate) fn send_fd(
    channel: BorrowedFd<'_>,
    socket: BorrowedFd<'_>,
    index: u8,
) -> io::Result<()> {
    let mut payload = [index];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    let mut control = ControlBuffer([0; 64]);
    // SAFETY: a zeroed msghdr is a valid empty one; the pointers set below outlive the call, and
    // the control buffer has room (FD_SPACE <= 64) for the one header written into it.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.0.as_mut_ptr().cast();
        message.msg_controllen = FD_SPACE as _;
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), socket.as_raw_fd());
        loop {
            // MSG_NOSIGNAL: a closed channel is an error to return, not a SIGPIPE.
            if libc::sendmsg(channel.as_raw_fd(), &message, libc::MSG_NOSIGNAL) >= 0 {
                return Ok(());
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }
}

/// One read of the channel.
#[derive(Debug)]
enum Received {
    Connection {
        socket: OwnedFd,
        index: u8,
    },
    /// A message not in the wire format, dropped with its descriptors.
    Malformed,
    /// The init's end is closed, or the channel shut down by [`ProxyHandle::stop`].
    End,
}

fn receive(channel: BorrowedFd<'_>) -> io::Result<Received> {
    // Two bytes, so that a longer payload shows (as a read of 2, or MSG_TRUNC).
    let mut payload = [0u8; 2];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    let mut control = ControlBuffer([0; 64]);
    // SAFETY: as in `send_fd`; the kernel writes at most msg_controllen bytes of control data.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.0.as_mut_ptr().cast();
    message.msg_controllen = size_of::<ControlBuffer>() as _;
    let read = loop {
        // MSG_CMSG_CLOEXEC: a command berth spawns meanwhile must not inherit the agent's socket.
        // SAFETY: `message` points at live buffers of the lengths it gives.
        let read =
            unsafe { libc::recvmsg(channel.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) };
        if read >= 0 {
            break read;
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    };
    // Own every descriptor received before judging the message, so that each is closed
    // whatever the message turns out to be.
    let mut sockets = Vec::new();
    // SAFETY: the CMSG_* walk stays within the control data the kernel wrote; each SCM_RIGHTS
    // descriptor is new to this process and owned by nobody else.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(header).cast::<RawFd>();
                let bytes = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / size_of::<RawFd>() {
                    sockets.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
    }
    if read == 0 && sockets.is_empty() {
        return Ok(Received::End);
    }
    let cut = message.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0;
    match (read, cut, sockets.pop(), sockets.is_empty()) {
        (1, false, Some(socket), true) => Ok(Received::Connection {
            socket,
            index: payload[0],
        }),
        _ => Ok(Received::Malformed),
    }
}

fn socket_type(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
    let mut kind: libc::c_int = 0;
    let mut length = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `kind` and `length` are live and sized as SO_TYPE needs.
    let got = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&raw mut kind).cast(),
            &mut length,
        )
    };
    if got == 0 {
        Ok(kind)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn set_blocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: F_GETFL and F_SETFL on a descriptor we hold.
    let done = unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if done {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

// ---------------------------------------------------------------------------------------------
// Serving

/// The proxy for one network namespace; [`Proxy::serve`] starts it.
pub struct Proxy {
    allow: AllowList,
    forwards: Vec<(String, u16)>,
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
    /// listener `i` goes (a host name or an IP address, and a port), whatever the allow list says.
    pub fn serve(
        channel: OwnedFd,
        allow: AllowList,
        forwards: Vec<(String, u16)>,
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

/// Listener `i >= 1`: straight to its fixed host and port. No HTTP is spoken, so a failure
/// closes the connection.
fn forward(client: &TcpStream, host: &str, port: u16) {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(addresses) = (host, port).to_socket_addrs() else {
        return;
    };
    if let Ok(upstream) = connect_any(&addresses.collect::<Vec<_>>()) {
        relay(client, &upstream, &[]);
    }
}

/// Listener 0: one HTTP request head, then a tunnel or one plain-HTTP exchange.
fn serve_http(proxy: &Proxy, client: &TcpStream) {
    let head = match read_head(client) {
        Ok(head) => head,
        Err(HeadError::Closed) => return,
        Err(HeadError::Silent) => return Answer::silent().send(client),
        Err(HeadError::TooLarge) => return Answer::too_large().send(client),
    };
    if client.set_read_timeout(None).is_err() {
        return;
    }
    let request = match Request::parse(&head.bytes) {
        Ok(request) => request,
        Err(why) => return Answer::bad_request(&why, &head.bytes).send(client),
    };
    let Some(rule) = proxy.allow.rule_for(&request.host, request.port) else {
        return Answer::not_allowed(&request.host, request.port).send(client);
    };
    let upstream = match open_upstream(&request.host, request.port, rule) {
        Ok(upstream) => upstream,
        Err(answer) => return answer.send(client),
    };
    let opened = match &request.kind {
        Kind::Tunnel => (&*client).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n"),
        Kind::Http { head } => (&upstream).write_all(head),
    };
    if opened.is_ok() {
        relay(client, &upstream, &head.early);
    }
}

/// Resolves (a name) and connects, within what `rule` allows.
fn open_upstream(host: &Host, port: u16, rule: &Rule) -> Result<TcpStream, Answer> {
    let addresses: Vec<SocketAddr> = match host {
        Host::Ip(address) => vec![SocketAddr::new(*address, port)],
        Host::Name(name) => (name.as_str(), port)
            .to_socket_addrs()
            .map_err(|error| Answer::unresolved(name, &error.to_string()))?
            .collect(),
    };
    let addresses = if rule.is_wildcard() {
        let (local, elsewhere): (Vec<_>, Vec<_>) = addresses
            .into_iter()
            .partition(|address| is_on_this_machine(address.ip()));
        if elsewhere.is_empty()
            && let Some(refused) = local.first()
        {
            return Err(Answer::wildcard_to_this_machine(
                host,
                port,
                &rule.entry,
                refused.ip(),
            ));
        }
        elsewhere
    } else {
        addresses
    };
    if addresses.is_empty() {
        return Err(Answer::unresolved(&host.to_string(), "it has no address"));
    }
    connect_any(&addresses).map_err(|error| Answer::unreachable(host, port, &error))
}

/// Tries each address in turn, all within [`CONNECT_TIMEOUT`].
fn connect_any(addresses: &[SocketAddr]) -> io::Result<TcpStream> {
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
    for address in addresses {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        match TcpStream::connect_timeout(address, left) {
            Ok(stream) => return Ok(stream),
            Err(error) => last = error,
        }
    }
    Err(last)
}

/// Copies both ways until both directions have ended; `early` (what the client sent after its
/// request head) goes upstream first.
fn relay(client: &TcpStream, upstream: &TcpStream, early: &[u8]) {
    thread::scope(|scope| {
        let back = thread::Builder::new()
            .name("berth-proxy-back".into())
            .spawn_scoped(scope, || pump(upstream, client));
        if back.is_err() || (&*upstream).write_all(early).is_err() {
            return tear_down(client, upstream);
        }
        pump(client, upstream);
    });
}

/// Copies `from` to `to` until `from` ends, then ends `to`'s sending side: a half-close, the
/// other direction goes on. An error tears both connections down, which also ends the other
/// direction's read.
fn pump(from: &TcpStream, to: &TcpStream) {
    let (mut reader, mut writer) = (from, to);
    match io::copy(&mut reader, &mut writer) {
        Ok(_) => {
            let _ = to.shutdown(Shutdown::Write);
        }
        Err(_) => tear_down(from, to),
    }
}

fn tear_down(one: &TcpStream, other: &TcpStream) {
    let _ = one.shutdown(Shutdown::Both);
    let _ = other.shutdown(Shutdown::Both);
}

// ---------------------------------------------------------------------------------------------
// HTTP

/// A request head, and what the client sent after it before the proxy answered (a request
/// body, or the TLS hello of a client that does not wait for `200`).
struct Head {
    bytes: Vec<u8>,
    early: Vec<u8>,
}

enum HeadError {
    /// The client left, or its socket failed: nobody to answer.
    Closed,
    Silent,
    TooLarge,
}

fn read_head(client: &TcpStream) -> Result<Head, HeadError> {
    // A read timeout is a limit on silence, not on the whole head: each read restarts it.
    client
        .set_read_timeout(Some(HEAD_SILENCE))
        .map_err(|_| HeadError::Closed)?;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = match (&*client).read(&mut chunk) {
            Ok(0) => return Err(HeadError::Closed),
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::Silent);
            }
            Err(_) => return Err(HeadError::Closed),
        };
        // The blank line may straddle two reads.
        let searched = bytes.len().saturating_sub(2);
        bytes.extend_from_slice(&chunk[..read]);
        if let Some(end) = head_end(&bytes, searched) {
            if end > HEAD_LIMIT {
                return Err(HeadError::TooLarge);
            }
            let early = bytes.split_off(end);
            return Ok(Head { bytes, early });
        }
        if bytes.len() >= HEAD_LIMIT {
            return Err(HeadError::TooLarge);
        }
    }
}

/// Where the head ends: just past its blank line (`\r\n\r\n`, or bare `\n`s), looked for from
/// `from` on.
fn head_end(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len()).find_map(|i| {
        let blank = bytes[i] == b'\n'
            && (i >= 1 && bytes[i - 1] == b'\n'
                || i >= 2 && bytes[i - 1] == b'\r' && bytes[i - 2] == b'\n');
        blank.then_some(i + 1)
    })
}

/// A request the proxy can carry.
#[derive(Debug)]
struct Request {
    host: Host,
    port: u16,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// `CONNECT host:port`.
    Tunnel,
    /// A plain-HTTP request; `head` is what goes upstream.
    Http { head: Vec<u8> },
}

impl Request {
    fn parse(head: &[u8]) -> Result<Request, String> {
        let mut lines = head
            .split(|&b| b == b'\n')
            .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
        let line = lines
            .next()
            .and_then(|line| std::str::from_utf8(line).ok())
            .filter(|line| line.is_ascii())
            .ok_or("its request line is not ASCII")?;
        let mut parts = line.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("its request line is not `METHOD target HTTP/1.1`".into());
        };
        if version != "HTTP/1.1" && version != "HTTP/1.0" {
            return Err("it is not HTTP/1.0 or HTTP/1.1".into());
        }
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("its method is not a word".into());
        }
        let authority_of =
            |authority: &str, default_port: Option<u16>| -> Result<(Host, u16), String> {
                let (host_text, port) =
                    split_host_port(authority).map_err(|why| format!("its host {why}"))?;
                let host = Host::parse(host_text).ok_or_else(|| {
                    format!("its host `{host_text}` is not a host name or an address")
                })?;
                let port = port.or(default_port).ok_or("CONNECT needs `host:port`")?;
                Ok((host, port))
            };
        if method == "CONNECT" {
            let (host, port) = authority_of(target, None)?;
            return Ok(Request {
                host,
                port,
                kind: Kind::Tunnel,
            });
        }
        if let Some(rest) = strip_prefix_ignore_case(target, "http://") {
            let authority = url_authority(rest).map_err(|why| format!("its URL {why}"))?;
            let (host, port) = authority_of(authority, Some(80))?;
            let path = &rest[authority.len()..];
            let headers: Vec<&[u8]> = lines.take_while(|line| !line.is_empty()).collect();
            let head = origin_form(method, authority, path, version, &headers);
            return Ok(Request {
                host,
                port,
                kind: Kind::Http { head },
            });
        }
        if strip_prefix_ignore_case(target, "https://").is_some() {
            return Err("it asks for an https:// URL: berth's proxy carries HTTPS through CONNECT (point HTTPS_PROXY at it)".into());
        }
        Err("it is neither `CONNECT host:port` nor a plain-HTTP request for an absolute URL (`GET http://host/path`)".into())
    }
}

/// Headers that speak to the proxy, or of this one connection: not passed upstream.
const HOP_BY_HOP: [&str; 5] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
];

/// The head as the upstream server should see it: the request line in origin form, `Host`
/// from the URL (RFC 9112 §3.2.2: a proxy replaces it), the client's headers but those in
/// [`HOP_BY_HOP`], and `Connection: close` (one request per connection; see the module's
/// decisions), or `Connection: upgrade` if the client asked for one.
fn origin_form(
    method: &str,
    authority: &str,
    path: &str,
    version: &str,
    headers: &[&[u8]],
) -> Vec<u8> {
    let slash = if path.starts_with('/') { "" } else { "/" };
    let mut out = format!("{method} {slash}{path} {version}\r\nHost: {authority}\r\n").into_bytes();
    let (mut upgrade_asked, mut upgrade_named) = (false, false);
    let mut keep = true;
    for line in headers {
        // A line starting with blanks continues the previous header (obsolete folding).
        if !line.starts_with(b" ") && !line.starts_with(b"\t") {
            let (name, value) = match line.iter().position(|&b| b == b':') {
                Some(colon) => (line[..colon].trim_ascii(), &line[colon + 1..]),
                None => (line.trim_ascii(), &[][..]),
            };
            keep = !HOP_BY_HOP
                .iter()
                .any(|hop| name.eq_ignore_ascii_case(hop.as_bytes()));
            if name.eq_ignore_ascii_case(b"connection") {
                upgrade_asked |= value
                    .split(|&b| b == b',')
                    .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"upgrade"));
            }
            upgrade_named |= name.eq_ignore_ascii_case(b"upgrade");
        }
        if keep {
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(if upgrade_asked && upgrade_named {
        b"Connection: upgrade\r\n\r\n"
    } else {
        b"Connection: close\r\n\r\n"
    });
    out
}

/// An answer of the proxy's own, which ends the connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    reason: &'static str,
    body: String,
}

impl Answer {
    fn not_allowed(host: &Host, port: u16) -> Answer {
        Answer {
            status: 403,
            reason: "Forbidden",
            body: format!(
                "berth's sandbox refused a connection to {host}:{port}: it is not on the allow list.\n\
                 To allow it, add it to berth's config:\n\n\
                 [sandbox]\n\
                 allow_hosts = [\"{host}:{port}\"]\n"
            ),
        }
    }

    fn wildcard_to_this_machine(host: &Host, port: u16, entry: &str, address: IpAddr) -> Answer {
        Answer {
            status: 403,
            reason: "Forbidden",
            body: format!(
                "berth's sandbox refused a connection to {host}:{port}: it is allowed only by the wildcard `{entry}`, \
                 and it resolves to {address}, an address of this machine or its link, which a wildcard does not reach.\n\
                 To allow it, name it in berth's config:\n\n\
                 [sandbox]\n\
                 allow_hosts = [\"{host}:{port}\"]\n"
            ),
        }
    }

    fn unresolved(name: &str, why: &str) -> Answer {
        Answer {
            status: 502,
            reason: "Bad Gateway",
            body: format!("berth's proxy could not resolve {name}: {why}.\n"),
        }
    }

    fn unreachable(host: &Host, port: u16, error: &io::Error) -> Answer {
        if error.kind() == io::ErrorKind::TimedOut {
            return Answer {
                status: 504,
                reason: "Gateway Timeout",
                body: format!(
                    "berth's proxy could not connect to {host}:{port} within {} s.\n",
                    CONNECT_TIMEOUT.as_secs()
                ),
            };
        }
        Answer {
            status: 502,
            reason: "Bad Gateway",
            body: format!("berth's proxy could not connect to {host}:{port}: {error}.\n"),
        }
    }

    fn bad_request(why: &str, head: &[u8]) -> Answer {
        // The request line, shown as printable ASCII only and cut short.
        let line: String = head
            .iter()
            .take_while(|&&b| b != b'\r' && b != b'\n')
            .take(200)
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    char::from(b)
                } else {
                    '?'
                }
            })
            .collect();
        Answer {
            status: 400,
            reason: "Bad Request",
            body: format!(
                "berth's proxy cannot carry the request `{line}`: {why}.\n\
                 It carries `CONNECT host:port` (HTTPS_PROXY) and plain-HTTP requests for absolute URLs (HTTP_PROXY).\n"
            ),
        }
    }

    fn silent() -> Answer {
        Answer {
            status: 408,
            reason: "Request Timeout",
            body: format!(
                "berth's proxy received no complete request within {} s.\n",
                HEAD_SILENCE.as_secs()
            ),
        }
    }

    fn too_large() -> Answer {
        Answer {
            status: 431,
            reason: "Request Header Fields Too Large",
            body: format!(
                "berth's proxy reads request heads of up to {} KiB.\n",
                HEAD_LIMIT / 1024
            ),
        }
    }

    fn send(self, client: &TcpStream) {
        let Answer {
            status,
            reason,
            body,
        } = self;
        let response = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        if (&*client).write_all(response.as_bytes()).is_ok() {
            close_gracefully(client);
        }
    }
}

/// Ends a connection answered before all the client sent was read (a request body, a TLS
/// hello sent along with CONNECT): closing a socket with unread bytes resets the connection,
/// and the reset can reach the client before it reads the answer. So: end our side, and read
/// what still comes, for a little while.
fn close_gracefully(client: &TcpStream) {
    let _ = client.shutdown(Shutdown::Write);
    let _ = client.set_read_timeout(Some(LINGER));
    let deadline = Instant::now() + LINGER;
    let mut drained = 0;
    let mut sink = [0u8; 4096];
    while drained < LINGER_BYTES && Instant::now() < deadline {
        match (&*client).read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(read) => drained += read,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;

    /// How long a test waits for what must happen.
    const PATIENCE: Duration = Duration::from_secs(10);

    fn allow(entries: &[&str]) -> AllowList {
        AllowList::parse(entries).expect("entries")
    }

    fn error_of(entry: &str) -> String {
        AllowList::parse([entry]).expect_err(entry).to_string()
    }

    fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two descriptors into `fds`, which we then own.
        unsafe {
            let made = libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            );
            assert_eq!(made, 0, "{}", io::Error::last_os_error());
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        }
    }

    /// A proxy serving berth's end of a fresh channel, and the init's end.
    fn start(entries: &[&str], forwards: Vec<(String, u16)>) -> (ProxyHandle, OwnedFd) {
        let (berths_end, inits_end) = seqpacket_pair();
        let handle = Proxy::serve(berths_end, allow(entries), forwards).expect("serve");
        (handle, inits_end)
    }

    /// What the init does for one connection: the agent's client connects to a listener on
    /// the namespace's loopback (here the host's), the accepted socket goes over the channel,
    /// and the init closes its copy. The client is returned.
    fn connect_through(inits_end: &OwnedFd, index: u8) -> TcpStream {
        let inside = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(inside.local_addr().unwrap()).unwrap();
        let (accepted, _) = inside.accept().unwrap();
        send_fd(inits_end.as_fd(), accepted.as_fd(), index).unwrap();
        client.set_read_timeout(Some(PATIENCE)).unwrap();
        client
    }

    /// A server that echoes one connection, and ends its side when the client ends its own.
    fn echo_server() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let (mut reader, mut writer) = (&stream, &stream);
            let _ = io::copy(&mut reader, &mut writer);
            let _ = stream.shutdown(Shutdown::Write);
        });
        port
    }

    /// A web server for one request: hands over the head it received, answers `hello`.
    fn web_server() -> (u16, mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (heads, received) = mpsc::channel();
        thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
                head.push(byte[0]);
            }
            heads.send(String::from_utf8(head).unwrap()).unwrap();
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                )
                .unwrap();
        });
        (port, received)
    }

    fn read_to_close(mut stream: &TcpStream) -> String {
        let mut out = Vec::new();
        stream.read_to_end(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn read_exactly(mut stream: &TcpStream, length: usize) -> String {
        let mut out = vec![0; length];
        stream.read_exact(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Sends a request through the proxy and reads its whole answer.
    fn ask(inits_end: &OwnedFd, request: &str) -> String {
        let mut client = connect_through(inits_end, PROXY_INDEX);
        client.write_all(request.as_bytes()).unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        read_to_close(&client)
    }

    fn assert_no_connection_waiting(listener: &TcpListener) {
        listener.set_nonblocking(true).unwrap();
        let accepted = listener.accept().map(|_| ()).map_err(|e| e.kind());
        assert_eq!(accepted, Err(io::ErrorKind::WouldBlock));
    }

    #[test]
    fn allow_list_reads_every_form() {
        let list = allow(&[
            "api.anthropic.com:443",
            "*.example.com:8443",
            "plain.org",
            "https://secure.net/v1/messages",
            "http://web.net",
            "HTTP://Other.Net:8080/x?y#z",
            "[::1]:8080",
            "127.0.0.1:4567",
            "  spaced.io:22  ",
        ]);
        assert!(list.allows("api.anthropic.com", 443));
        assert!(list.allows("a.example.com", 8443));
        assert!(list.allows("plain.org", 443));
        assert!(list.allows("secure.net", 443));
        assert!(list.allows("web.net", 80));
        assert!(list.allows("other.net", 8080));
        assert!(list.allows("[::1]", 8080));
        assert!(list.allows("::1", 8080));
        assert!(list.allows("127.0.0.1", 4567));
        assert!(list.allows("spaced.io", 22));
        assert!(!list.allows("api.anthropic.com", 80));
        assert!(!list.allows("web.net", 443));
        assert!(!list.allows("secure.net", 80));
        assert!(!AllowList::default().allows("api.anthropic.com", 443));
        assert!(AllowList::default().is_empty());
    }

    #[test]
    fn a_wildcard_allows_subdomains_not_the_domain() {
        let list = allow(&["*.example.com:443"]);
        assert!(list.allows("a.example.com", 443));
        assert!(list.allows("a.b.example.com", 443));
        assert!(list.allows("A.Example.COM.", 443));
        assert!(!list.allows("example.com", 443));
        assert!(!list.allows("badexample.com", 443));
        assert!(!list.allows("a.example.com.evil.net", 443));
        assert!(!list.allows("a.example.com", 80));
    }

    #[test]
    fn a_bare_name_allows_443_only() {
        let list = allow(&["example.com", "*.wild.net"]);
        assert!(list.allows("example.com", 443));
        assert!(!list.allows("example.com", 80));
        assert!(list.allows("x.wild.net", 443));
        assert!(!list.allows("x.wild.net", 80));
    }

    #[test]
    fn names_match_without_case_or_trailing_dot() {
        let list = allow(&["API.Example.com.:443"]);
        assert!(list.allows("api.example.com", 443));
        assert!(list.allows("API.EXAMPLE.COM.", 443));
        assert!(!list.allows("api.example.com..", 443));
    }

    #[test]
    fn an_address_matches_only_the_same_address() {
        let list = allow(&["127.0.0.1:4567", "[::1]:8080", "localhost:9000"]);
        assert!(list.allows("127.0.0.1", 4567));
        assert!(list.allows("[::ffff:127.0.0.1]", 4567), "the same address");
        assert!(!list.allows("localhost", 4567), "a name is not an address");
        assert!(!list.allows("127.0.0.2", 4567));
        assert!(list.allows("[0:0:0:0:0:0:0:1]", 8080));
        assert!(!list.allows("127.0.0.1", 8080));
        assert!(list.allows("localhost", 9000));
        assert!(!list.allows("127.0.0.1", 9000), "an address is not a name");
    }

    #[test]
    fn a_numeric_last_label_is_neither_name_nor_address() {
        // The resolver would take these for 127.0.0.1.
        for host in ["127.1", "2130706433", "0x7f.1", "0x7f000001", "1.2.3.0X4"] {
            assert!(Host::parse(host).is_none(), "{host}");
            assert!(error_of(&format!("{host}:443")).contains(host), "{host}");
        }
        assert!(
            Host::parse("0xcafe.example").is_some(),
            "only the last label counts"
        );
        assert!(Host::parse("a.b2c").is_some());
    }

    #[test]
    fn bad_entries_are_named_with_what_is_wrong() {
        let cases = [
            ("", "is empty"),
            ("ftp://files.example.com", "only http:// and https://"),
            ("https://user:pw@example.com", "user name or password"),
            ("*", "every host"),
            ("*:443", "every host"),
            ("a.*.example.com:443", "whole first label"),
            ("*example.com:443", "whole first label"),
            ("*.:443", "not a domain name"),
            ("*.127.0.0.1:443", "not a domain name"),
            ("example.com:0", "port"),
            ("example.com:65536", "port"),
            ("example.com:+443", "port"),
            ("example.com:", "port"),
            ("::1:8080", "brackets"),
            ("[::1", "`]`"),
            ("[::1]8080", "`:port`"),
            ("[example.com]:443", "neither a host name"),
            ("exa mple.com:443", "neither a host name"),
            ("bücher.example:443", "xn--"),
            (":443", "has no host"),
        ];
        for (entry, why) in cases {
            let error = error_of(entry);
            assert!(error.contains(&format!("`{entry}`")), "{entry}: {error}");
            assert!(error.contains(why), "{entry}: {error}");
        }
    }

    #[test]
    fn a_wildcard_does_not_reach_this_machine() {
        for local in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "0.0.0.0",
            "::",
            "169.254.169.254",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_on_this_machine(local.parse().unwrap()), "{local}");
        }
        for remote in [
            "10.0.0.1",
            "192.168.1.1",
            "93.184.215.14",
            "2606:4700::1",
            "fd00::1",
        ] {
            assert!(!is_on_this_machine(remote.parse().unwrap()), "{remote}");
        }
        let list = allow(&["*.example.com:443", "exact.example.com:443"]);
        let exact = Host::parse("exact.example.com").unwrap();
        assert!(
            !list.rule_for(&exact, 443).unwrap().is_wildcard(),
            "an exact entry wins"
        );
        let other = Host::parse("other.example.com").unwrap();
        assert!(list.rule_for(&other, 443).unwrap().is_wildcard());
    }

    #[test]
    fn a_plain_request_is_put_in_origin_form() {
        let request = Request::parse(
            b"GET http://Example.com:8080/a/b?c=d HTTP/1.1\r\n\
              Host: wrong.example\r\n\
              Proxy-Connection: keep-alive\r\n\
              proxy-authorization: Basic eDp5\r\n\
              Connection: keep-alive\r\n\
              Keep-Alive: timeout=5\r\n\
              X-Folded: one\r\n\
              \ttwo\r\n\
              Accept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!(request.host, Host::Name("example.com".into()));
        assert_eq!(request.port, 8080);
        let Kind::Http { head } = request.kind else {
            panic!("not plain HTTP: {request:?}");
        };
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /a/b?c=d HTTP/1.1\r\nHost: Example.com:8080\r\nX-Folded: one\r\n\ttwo\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );

        let head_of = |head: &[u8]| match Request::parse(head).unwrap().kind {
            Kind::Http { head } => String::from_utf8(head).unwrap(),
            Kind::Tunnel => panic!("a tunnel"),
        };
        assert_eq!(
            head_of(b"GET http://x.org HTTP/1.0\n\n"),
            "GET / HTTP/1.0\r\nHost: x.org\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            head_of(b"GET http://x.org?q HTTP/1.1\r\n\r\n"),
            "GET /?q HTTP/1.1\r\nHost: x.org\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(
            head_of(b"GET http://x.org/ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"),
            "GET /ws HTTP/1.1\r\nHost: x.org\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"
        );
    }

    #[test]
    fn requests_the_proxy_cannot_carry_are_refused_with_why() {
        for (head, why) in [
            (&b"GET / HTTP/1.1\r\nHost: x.org\r\n\r\n"[..], "neither"),
            (b"GET https://x.org/ HTTP/1.1\r\n\r\n", "CONNECT"),
            (b"CONNECT x.org HTTP/1.1\r\n\r\n", "host:port"),
            (b"CONNECT 127.1:443 HTTP/1.1\r\n\r\n", "`127.1`"),
            (b"GET http://u@x.org/ HTTP/1.1\r\n\r\n", "user name"),
            (b"GET http://x.org/ HTTP/2\r\n\r\n", "HTTP/1.1"),
            (b"hello\r\n\r\n", "METHOD"),
        ] {
            let error = Request::parse(head).expect_err(std::str::from_utf8(head).unwrap());
            assert!(error.contains(why), "{error}");
        }
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nrest", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
    }

    #[test]
    fn the_channel_carries_one_descriptor_and_an_index_per_message() {
        let (berths_end, inits_end) = seqpacket_pair();
        let file = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        send_fd(inits_end.as_fd(), file.as_fd(), 7).unwrap();
        match receive(berths_end.as_fd()).unwrap() {
            Received::Connection { socket, index } => {
                assert_eq!(index, 7);
                assert_ne!(
                    socket.as_raw_fd(),
                    file.as_raw_fd(),
                    "a descriptor of its own"
                );
            }
            other => panic!("{other:?}"),
        }
        // A message without a descriptor, then one too long: both dropped, the channel goes on.
        for payload in [&[1u8][..], &[1, 2]] {
            // SAFETY: a send of a live buffer.
            let sent = unsafe {
                libc::send(
                    inits_end.as_raw_fd(),
                    payload.as_ptr().cast(),
                    payload.len(),
                    0,
                )
            };
            assert_eq!(sent, payload.len() as isize);
            assert!(matches!(
                receive(berths_end.as_fd()).unwrap(),
                Received::Malformed
            ));
        }
        drop(inits_end);
        assert!(matches!(
            receive(berths_end.as_fd()).unwrap(),
            Received::End
        ));
    }

    #[test]
    fn connect_to_an_allowed_host_relays_both_ways() {
        let port = echo_server();
        let (_proxy, inits_end) = start(&[&format!("127.0.0.1:{port}")], vec![]);
        let mut client = connect_through(&inits_end, PROXY_INDEX);
        // Bytes sent before the answer (as a TLS client may) go through too.
        write!(
            client,
            "CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\nearly"
        )
        .unwrap();
        let established = "HTTP/1.1 200 Connection established\r\n\r\n";
        assert_eq!(
            read_exactly(&client, established.len() + 5),
            format!("{established}early")
        );
        client.write_all(b"late").unwrap();
        assert_eq!(read_exactly(&client, 4), "late");
        // Our end closes; the echo server's end follows; the proxy passes both on.
        client.shutdown(Shutdown::Write).unwrap();
        assert_eq!(read_to_close(&client), "");
    }

    #[test]
    fn connect_to_a_port_not_allowed_gets_403_and_no_connection() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = upstream.local_addr().unwrap().port();
        let (_proxy, inits_end) = start(&["127.0.0.1:443"], vec![]);
        let answer = ask(
            &inits_end,
            &format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"),
        );
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
        assert!(
            answer.contains(&format!("allow_hosts = [\"127.0.0.1:{port}\"]")),
            "{answer}"
        );
        // The proxy decides before it connects, and it has answered.
        assert_no_connection_waiting(&upstream);
    }

    #[test]
    fn localhost_is_allowed_only_by_name() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = upstream.local_addr().unwrap().port();
        let (_proxy, inits_end) = start(&[&format!("127.0.0.1:{port}")], vec![]);
        let answer = ask(
            &inits_end,
            &format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n"),
        );
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
        assert!(
            answer.contains(&format!("allow_hosts = [\"localhost:{port}\"]")),
            "{answer}"
        );
        assert_no_connection_waiting(&upstream);

        let port = echo_server();
        let (_proxy, inits_end) = start(&[&format!("localhost:{port}")], vec![]);
        let answer = ask(
            &inits_end,
            &format!("CONNECT LocalHost.:{port} HTTP/1.1\r\n\r\nping"),
        );
        assert_eq!(answer, "HTTP/1.1 200 Connection established\r\n\r\nping");
    }

    #[test]
    fn a_plain_http_request_goes_upstream_in_origin_form() {
        let (port, heads) = web_server();
        let (_proxy, inits_end) = start(&[&format!("http://127.0.0.1:{port}")], vec![]);
        let answer = ask(
            &inits_end,
            &format!(
                "GET http://127.0.0.1:{port}/path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
                 Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\nUser-Agent: test\r\n\r\n"
            ),
        );
        assert_eq!(
            heads.recv_timeout(PATIENCE).unwrap(),
            format!(
                "GET /path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: test\r\nConnection: close\r\n\r\n"
            )
        );
        assert_eq!(
            answer,
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
        );
    }

    #[test]
    fn a_name_that_does_not_resolve_gets_502() {
        // `.invalid` never resolves (RFC 6761).
        let (_proxy, inits_end) = start(&["http://nothing.invalid"], vec![]);
        let answer = ask(
            &inits_end,
            "GET http://nothing.invalid/ HTTP/1.1\r\nHost: nothing.invalid\r\n\r\n",
        );
        assert!(
            answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
            "{answer}"
        );
        assert!(
            answer.contains("could not resolve nothing.invalid"),
            "{answer}"
        );
    }

    #[test]
    fn what_is_not_a_proxy_request_gets_400() {
        let (_proxy, inits_end) = start(&["example.com"], vec![]);
        let answer = ask(
            &inits_end,
            "GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n",
        );
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{answer}"
        );
        assert!(answer.contains("`GET /index.html HTTP/1.1`"), "{answer}");
    }

    #[test]
    fn a_head_over_64_kib_gets_431() {
        let (_proxy, inits_end) = start(&["example.com"], vec![]);
        let request = format!(
            "GET http://example.com/ HTTP/1.1\r\nX-Big: {}",
            "a".repeat(70_000)
        );
        let answer = ask(&inits_end, &request);
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    }

    #[test]
    fn a_fixed_forward_relays() {
        let port = echo_server();
        let (_proxy, inits_end) = start(&[], vec![("127.0.0.1".into(), port)]);
        let mut client = connect_through(&inits_end, 1);
        client.write_all(b"no HTTP here").unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        assert_eq!(read_to_close(&client), "no HTTP here");
    }

    #[test]
    fn an_index_without_a_forward_is_closed() {
        let port = echo_server();
        let (_proxy, inits_end) = start(&[], vec![("127.0.0.1".into(), port)]);
        let client = connect_through(&inits_end, 2);
        assert_eq!(read_to_close(&client), "");
    }

    #[test]
    fn the_end_of_the_channel_ends_the_serving_thread() {
        let (proxy, inits_end) = start(&[], vec![]);
        drop(inits_end);
        assert!(proxy.wait(PATIENCE));
    }

    #[test]
    fn stop_ends_the_serving_thread_and_the_init_hears_of_it() {
        let (proxy, inits_end) = start(&[], vec![]);
        proxy.stop();
        assert!(proxy.wait(PATIENCE));
        let file = std::fs::File::open("/dev/null").unwrap();
        let sent = send_fd(inits_end.as_fd(), file.as_fd(), 0).map_err(|e| e.raw_os_error());
        assert_eq!(sent, Err(Some(libc::EPIPE)));
    }

    #[test]
    fn serve_takes_only_a_seqpacket_socket() {
        let stream = TcpListener::bind("127.0.0.1:0").unwrap();
        let refused = Proxy::serve(OwnedFd::from(stream), AllowList::default(), vec![]);
        assert_eq!(
            refused.err().map(|e| e.kind()),
            Some(io::ErrorKind::InvalidInput)
        );
    }
}
