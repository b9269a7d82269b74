//! The init's side of berth's proxy: listeners on the namespace's loopback, whose connections
//! berth serves from outside. The workspace's network makes the listeners, so the init only
//! accepts and passes each connection on over the channel; it holds them as long as the tree
//! lives, so another tree's proxy takes another port meanwhile.

use std::os::fd::RawFd;

/// The init's listeners on the namespace's loopback (the proxy's and the forwards'), each
/// with its index on the channel to berth's proxy; none without a proxy.
pub(super) struct Listening {
    pub(super) channel: RawFd,
    pub(super) fds: [(RawFd, u8); crate::plan::MAX_LISTENERS],
    pub(super) count: usize,
}

impl Listening {
    /// The listeners of `plan`.
    pub(super) fn open(plan: Option<&ProxyPlan>) -> Listening {
        let mut listening = Listening {
            channel: -1,
            fds: [(-1, 0); crate::plan::MAX_LISTENERS],
            count: 0,
        };
        let Some(plan) = plan else {
            return listening;
        };
        listening.channel = plan.channel;
        for &(fd, index) in plan.listeners.iter().take(crate::plan::MAX_LISTENERS) {
            listening.fds[listening.count] = (fd, index);
            listening.count += 1;
        }
        listening
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

/// The init's side of berth's proxy.
#[derive(Debug)]
pub(crate) struct ProxyPlan {
    /// The init's end of the channel to berth's proxy (held open by the parent's `OwnedFd`).
    pub channel: RawFd,
    /// Listeners on the namespace's loopback, made by the workspace's network
    /// ([`crate::network`]) and held open by the parent's plan, each with its index.
    pub listeners: Vec<(RawFd, u8)>,
}
