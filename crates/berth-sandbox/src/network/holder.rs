//! The process that holds a workspace's network namespace: forked from berth, it makes a user
//! and a network namespace, brings their loopback up, hands berth descriptors of both, and
//! then makes sockets inside on request (a socket is the network namespace's it was made in,
//! whoever uses it later). It only makes system calls: it is the child of a multi-threaded
//! process.
//!
//! # Wire format
//!
//! A `SOCK_SEQPACKET` socketpair. A request is 4 bytes: an operation ([`SOCKET`] or
//! [`LISTEN`]), a family (4 or 6) and a port (big-endian). The answer is 4 bytes, an errno in
//! native order (0 for success), and on success the socket in `SCM_RIGHTS`: unconnected, or
//! listening on the loopback at that port. The first four messages, sent unasked, carry the
//! user and the network namespace (`/proc/self/ns/*`) and the namespace's tables of TCP
//! sockets (`/proc/self/net/tcp` and `tcp6`, the latter an errno where there is no IPv6),
//! which berth reads again whenever it looks for the namespace's listeners. The holder ends at the channel's end:
//! when berth drops the network, or ends, however it died (not with the thread that forked
//! it, as `PR_SET_PDEATHSIG` would have it: that may be a pool's thread, gone when idle).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::child::IdMaps;

/// An unconnected TCP socket.
pub(super) const SOCKET: u8 = 1;
/// A TCP socket listening on the loopback.
pub(super) const LISTEN: u8 = 2;

/// The holder, as berth sees it.
pub(super) struct Holder {
    pub pid: libc::pid_t,
    pub channel: OwnedFd,
    pub user_ns: OwnedFd,
    pub net_ns: OwnedFd,
    /// `/proc/net/tcp` and `tcp6` of the namespace.
    pub tcp: OwnedFd,
    pub tcp6: Option<OwnedFd>,
}

/// Forks the holder and takes its namespaces: new ones, or those of `join` (descriptors of a
/// user and a network namespace another berth process made and handed on).
pub(super) fn start(join: Option<(RawFd, RawFd)>) -> io::Result<Holder> {
    let maps = IdMaps::of_this_process();
    let (ours, theirs) = seqpacket_pair()?;
    // SAFETY: the child only makes system calls on memory made before the fork, then exits.
    let pid = unsafe { libc::fork() };
    if pid == -1 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let errno = match run(&maps, join, theirs.as_raw_fd()) {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
        };
        // SAFETY: _exit never returns; nothing of the parent's is flushed.
        unsafe { libc::_exit(errno.min(255)) }
    }
    drop(theirs);
    let taken = (|| {
        let user_ns = receive(ours.as_fd())?;
        let net_ns = receive(ours.as_fd())?;
        let tcp = receive(ours.as_fd())?;
        let tcp6 = receive(ours.as_fd()).ok();
        Ok::<_, io::Error>((user_ns, net_ns, tcp, tcp6))
    })();
    match taken {
        Ok((user_ns, net_ns, tcp, tcp6)) => Ok(Holder {
            pid,
            channel: ours,
            user_ns,
            net_ns,
            tcp,
            tcp6,
        }),
        Err(e) => {
            // The holder failed or sent nothing usable: its exit status is its errno.
            let status = reap(pid);
            Err(match status {
                Some(errno) if errno > 0 => io::Error::from_raw_os_error(errno),
                _ => e,
            })
        }
    }
}

/// Waits for the holder to end; its exit status.
pub(super) fn reap(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    (r == pid && libc::WIFEXITED(status)).then(|| libc::WEXITSTATUS(status))
}

/// Asks the holder for a socket: `op` of [`SOCKET`] or [`LISTEN`], IPv6 or not, at `port`.
pub(super) fn ask(channel: &OwnedFd, op: u8, v6: bool, port: u16) -> io::Result<OwnedFd> {
    let [hi, lo] = port.to_be_bytes();
    let request = [op, if v6 { 6 } else { 4 }, hi, lo];
    // SAFETY: a send of a buffer on the stack.
    let sent = unsafe {
        libc::send(
            channel.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if sent != request.len() as isize {
        return Err(io::Error::last_os_error());
    }
    receive(channel.as_fd())
}

/// One answer: the descriptor it carries, or its errno.
fn receive(channel: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let mut payload = [0u8; 4];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    #[repr(C, align(8))]
    struct Control([u8; 64]);
    let mut control = Control([0; 64]);
    // SAFETY: a zeroed msghdr is valid; its pointers outlive the call; a descriptor found in
    // the control message is new to this process, and owned from here on.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.0.as_mut_ptr().cast();
        message.msg_controllen = control.0.len() as _;
        let n = loop {
            let n = libc::recvmsg(channel.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC);
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break n;
            }
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut fd = None;
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let raw = std::ptr::read_unaligned(libc::CMSG_DATA(header).cast::<RawFd>());
                fd = Some(OwnedFd::from_raw_fd(raw));
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the holder of the workspace's network ended",
            ));
        }
        let errno = i32::from_ne_bytes(payload);
        match (errno, fd) {
            (0, Some(fd)) => Ok(fd),
            (0, None) => Err(io::Error::other("the holder sent no socket")),
            (errno, _) => Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair fills the array with two new descriptors, which we then own.
    unsafe {
        if libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        ) == -1
        {
            return Err(io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

// ---- The holder's side: system calls only. ----

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The holder's life: the namespaces, the two descriptors, then sockets on request.
fn run(maps: &IdMaps, join: Option<(RawFd, RawFd)>, channel: RawFd) -> io::Result<()> {
    // SAFETY: setns and close_range change this process only.
    unsafe {
        if let Some((user, net)) = join {
            check(libc::setns(user, libc::CLONE_NEWUSER))?;
            check(libc::setns(net, libc::CLONE_NEWNET))?;
        }
        // Nothing of berth's may stay open here (a pipe another process waits on to close).
        close_all_but(channel);
    }
    if join.is_none() {
        crate::child::make_network_namespace(maps)?;
    }
    // Its memory, a copy of berth's with its keys, is nobody's to read; only once its id maps
    // are written, which a process that is not dumpable may not do.
    // SAFETY: prctl on this process.
    check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0) })?;
    for path in [
        c"/proc/self/ns/user",
        c"/proc/self/ns/net",
        c"/proc/self/net/tcp",
    ] {
        // SAFETY: open of a static path; the descriptor is closed once sent.
        let fd = check(unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
        answer(channel, Ok(fd));
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
    }
    // SAFETY: as above; where there is no IPv6, its errno is the answer.
    match check(unsafe {
        libc::open(
            c"/proc/self/net/tcp6".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    }) {
        Ok(fd) => {
            answer(channel, Ok(fd));
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
        }
        Err(e) => answer(channel, Err(e.raw_os_error().unwrap_or(libc::ENOENT))),
    }
    loop {
        let mut request = [0u8; 4];
        // SAFETY: a read into a buffer on the stack.
        let n = unsafe { libc::recv(channel, request.as_mut_ptr().cast(), 4, 0) };
        match n {
            0 => return Ok(()),
            -1 if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => continue,
            -1 => return Err(io::Error::last_os_error()),
            4 => {}
            _ => {
                answer(channel, Err(libc::EINVAL));
                continue;
            }
        }
        let port = u16::from_be_bytes([request[2], request[3]]);
        let made = make_socket(request[0], request[1] == 6, port);
        answer(channel, made);
        if let Ok(fd) = made {
            // SAFETY: our own descriptor, sent.
            unsafe { libc::close(fd) };
        }
    }
}

/// Closes every descriptor but `keep`.
///
/// # Safety
/// Only in the holder, which owns every descriptor it has.
unsafe fn close_all_but(keep: RawFd) {
    let keep = keep as libc::c_uint;
    // SAFETY: as the function says.
    unsafe {
        if keep > 0 {
            libc::syscall(libc::SYS_close_range, 0, keep - 1, 0);
        }
        libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0);
    }
}

/// A socket in this network namespace: unconnected, or listening on the loopback at `port`.
fn make_socket(op: u8, v6: bool, port: u16) -> Result<RawFd, i32> {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    let family = if v6 { libc::AF_INET6 } else { libc::AF_INET };
    // SAFETY: socket, setsockopt, bind and listen on a descriptor made here, with addresses on
    // the stack.
    unsafe {
        let fd = libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd == -1 {
            return Err(errno());
        }
        if op != LISTEN {
            return Ok(fd);
        }
        let one: libc::c_int = 1;
        let size = size_of::<libc::c_int>() as libc::socklen_t;
        let on = (&one as *const libc::c_int).cast();
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, on, size);
        if v6 {
            libc::setsockopt(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, on, size);
        }
        let (address, len) = loopback_address(v6, port);
        let bound = libc::bind(fd, (&address as *const libc::sockaddr_storage).cast(), len);
        if bound == -1 || libc::listen(fd, 128) == -1 {
            let e = errno();
            libc::close(fd);
            return Err(e);
        }
        Ok(fd)
    }
}

/// The loopback's address at `port`. Allocates nothing.
fn loopback_address(v6: bool, port: u16) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: a zeroed sockaddr_storage is valid, and either address fits in it.
    unsafe {
        let mut address: libc::sockaddr_storage = std::mem::zeroed();
        let storage = &mut address as *mut libc::sockaddr_storage;
        if v6 {
            let sin6 = &mut *storage.cast::<libc::sockaddr_in6>();
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = port.to_be();
            sin6.sin6_addr.s6_addr = std::net::Ipv6Addr::LOCALHOST.octets();
            (address, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        } else {
            let sin = &mut *storage.cast::<libc::sockaddr_in>();
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = port.to_be();
            sin.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            (address, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
    }
}

/// Connects `socket`, made by the holder, to the loopback of its namespace at `port`.
pub(super) fn connect_loopback(socket: &OwnedFd, v6: bool, port: u16) -> io::Result<()> {
    let (address, len) = loopback_address(v6, port);
    loop {
        // SAFETY: connect of a socket we own to an address on the stack.
        let r = unsafe {
            libc::connect(
                socket.as_raw_fd(),
                (&address as *const libc::sockaddr_storage).cast(),
                len,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Sends an answer: the descriptor, or an errno. A send that fails means berth's end is gone
/// (this child cannot say so anywhere): the next read finds the channel's end, and the holder
/// ends.
fn answer(channel: RawFd, made: Result<RawFd, i32>) {
    match made {
        Ok(fd) => {
            // SAFETY: both descriptors are open in this process.
            let (channel, fd) =
                unsafe { (BorrowedFd::borrow_raw(channel), BorrowedFd::borrow_raw(fd)) };
            let _ = crate::proxy::send(channel, Some(fd), &0i32.to_ne_bytes());
        }
        Err(errno) => {
            // SAFETY: as above.
            let channel = unsafe { BorrowedFd::borrow_raw(channel) };
            let _ = crate::proxy::send(channel, None, &errno.to_ne_bytes());
        }
    }
}
