//! Both ends of the channel from the namespace's init to berth's proxy, in the wire format the
//! parent module describes: the init's send allocates nothing (it runs in a forked child), and
//! the proxy's read owns every descriptor it is passed, whatever the message turns out to be.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Room for the control message of one descriptor, as `cmsghdr` must be aligned.
// SAFETY: CMSG_SPACE only computes a size from its argument.
const FD_SPACE: usize = unsafe { libc::CMSG_SPACE(size_of::<RawFd>() as u32) } as usize;

/// A control-message buffer aligned for `cmsghdr`. Room for several descriptors, so that a
/// message carrying too many is still read whole, and its descriptors closed.
#[repr(C, align(8))]
struct ControlBuffer([u8; 64]);

const _: () = assert!(FD_SPACE <= size_of::<ControlBuffer>());

/// Sends one connection over the channel, in the wire format of the parent module: `index` as
/// the payload, `socket` in `SCM_RIGHTS`. It allocates nothing and takes no lock, so the init
/// may call it in a forked child.
pub(crate) fn send_fd(
    channel: BorrowedFd<'_>,
    socket: BorrowedFd<'_>,
    index: u8,
) -> io::Result<()> {
    send(channel, Some(socket), &[index])
}

/// One message over a `SOCK_SEQPACKET` socket: `payload`, and `fd` (if any) in `SCM_RIGHTS`.
/// It allocates nothing and takes no lock: a forked child may call it.
pub(crate) fn send(
    channel: BorrowedFd<'_>,
    fd: Option<BorrowedFd<'_>>,
    payload: &[u8],
) -> io::Result<()> {
    let mut iov = libc::iovec {
        // sendmsg only reads the payload.
        iov_base: payload.as_ptr().cast_mut().cast(),
        iov_len: payload.len(),
    };
    let mut control = ControlBuffer([0; 64]);
    // SAFETY: a zeroed msghdr is a valid empty one; the pointers set below outlive the call, and
    // the control buffer has room (FD_SPACE <= 64) for the one header written into it.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        if let Some(fd) = fd {
            message.msg_control = control.0.as_mut_ptr().cast();
            message.msg_controllen = FD_SPACE as _;
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(size_of::<RawFd>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>(), fd.as_raw_fd());
        }
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
pub(super) enum Received {
    Connection {
        socket: OwnedFd,
        index: u8,
    },
    /// A message not in the wire format, dropped with its descriptors.
    Malformed,
    /// The init's end is closed, or the channel shut down by
    /// [`ProxyHandle::stop`](super::ProxyHandle::stop).
    End,
}

pub(super) fn receive(channel: BorrowedFd<'_>) -> io::Result<Received> {
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

pub(super) fn socket_type(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
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

pub(super) fn set_blocking(fd: BorrowedFd<'_>) -> io::Result<()> {
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
