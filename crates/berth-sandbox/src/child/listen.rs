//! The init's side of berth's proxy: listeners on the namespace's loopback, whose connections
//! berth serves from outside. The parent makes the addresses, so the init only binds, accepts
//! and passes each connection on over the channel.

use std::io;
use std::os::fd::RawFd;

/// The init's listeners on the namespace's loopback (the proxy's and the forwards'), each
/// with its index on the channel to berth's proxy; none without a proxy.
pub(super) struct Listening {
    pub(super) channel: RawFd,
    pub(super) fds: [(RawFd, u8); crate::plan::MAX_LISTENERS],
    pub(super) count: usize,
}

impl Listening {
    /// Makes the listeners of `plan` in this (the new) network namespace. An IPv6 one that
    /// cannot be made (no IPv6 here) is left out.
    pub(super) fn open(plan: Option<&ProxyPlan>) -> io::Result<Listening> {
        let mut listening = Listening {
            channel: -1,
            fds: [(-1, 0); crate::plan::MAX_LISTENERS],
            count: 0,
        };
        let Some(plan) = plan else {
            return Ok(listening);
        };
        listening.channel = plan.channel;
        for l in plan.listeners.iter().take(crate::plan::MAX_LISTENERS) {
            match l.open() {
                Ok(fd) => {
                    listening.fds[listening.count] = (fd, l.index);
                    listening.count += 1;
                }
                Err(_) if l.family == libc::AF_INET6 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(listening)
    }

    /// Accepts a connection on `fd` and hands it to berth's proxy with `index`.
    pub(super) fn pass_on(&self, fd: RawFd, index: u8) {
        // SAFETY: accept4 on a listener this process owns; the accepted descriptor is closed
        // here once sent (the proxy holds its own copy).
        unsafe {
            let conn = libc::accept4(
                fd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            );
            if conn == -1 {
                return;
            }
            let _ = crate::proxy::send_fd(
                std::os::fd::BorrowedFd::borrow_raw(self.channel),
                std::os::fd::BorrowedFd::borrow_raw(conn),
                index,
            );
            libc::close(conn);
        }
    }
}

/// Where the init listens, made by the parent: a loopback address and port of the new
/// network namespace, and the index its connections carry to berth's proxy.
pub(crate) struct Listen {
    pub index: u8,
    family: libc::c_int,
    addr: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl std::fmt::Debug for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listen")
            .field("index", &self.index)
            .field("family", &self.family)
            .finish_non_exhaustive()
    }
}

impl Listen {
    /// 127.0.0.1:`port`.
    pub fn v4(index: u8, port: u16) -> Listen {
        // SAFETY: a zeroed sockaddr_storage is valid; a sockaddr_in fits in it.
        unsafe {
            let mut addr: libc::sockaddr_storage = std::mem::zeroed();
            let sin = &mut *(&mut addr as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>();
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = port.to_be();
            sin.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            Listen {
                index,
                family: libc::AF_INET,
                addr,
                len: std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            }
        }
    }

    /// [::1]:`port`.
    pub fn v6(index: u8, port: u16) -> Listen {
        // SAFETY: a zeroed sockaddr_storage is valid; a sockaddr_in6 fits in it.
        unsafe {
            let mut addr: libc::sockaddr_storage = std::mem::zeroed();
            let sin6 =
                &mut *(&mut addr as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = port.to_be();
            sin6.sin6_addr.s6_addr = std::net::Ipv6Addr::LOCALHOST.octets();
            Listen {
                index,
                family: libc::AF_INET6,
                addr,
                len: std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            }
        }
    }

    /// A non-blocking listener, closed on exec, at this address.
    fn open(&self) -> io::Result<RawFd> {
        // SAFETY: socket, setsockopt, bind and listen on a descriptor made here, with the
        // address this value owns.
        unsafe {
            let fd = libc::socket(
                self.family,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            );
            if fd == -1 {
                return Err(io::Error::last_os_error());
            }
            let one: libc::c_int = 1;
            let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            if self.family == libc::AF_INET6 {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_IPV6,
                    libc::IPV6_V6ONLY,
                    (&one as *const libc::c_int).cast(),
                    size,
                );
            }
            let addr = (&self.addr as *const libc::sockaddr_storage).cast::<libc::sockaddr>();
            if libc::bind(fd, addr, self.len) == -1 || libc::listen(fd, 128) == -1 {
                let e = io::Error::last_os_error();
                libc::close(fd);
                return Err(e);
            }
            Ok(fd)
        }
    }
}

/// The init's side of berth's proxy.
#[derive(Debug)]
pub(crate) struct ProxyPlan {
    /// The init's end of the channel to berth's proxy (held open by the parent's `OwnedFd`).
    pub channel: RawFd,
    pub listeners: Vec<Listen>,
}
