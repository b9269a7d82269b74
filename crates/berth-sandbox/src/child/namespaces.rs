//! The namespaces a confined tree lives in (user, mount, PID, and network unless it has the
//! host's): its mounts and processes are its own, its ids stay the caller's, and a network of
//! its own gets a working loopback.

use std::io;

use super::{IdMaps, check, write_proc};

/// New user, mount and PID namespaces (and a network one with `netns`), the process's ids
/// mapped to themselves, and mounts that never propagate back to the host. The PID namespace
/// takes effect for the process's next child, which becomes its init.
pub(super) fn enter_namespaces(maps: &IdMaps, netns: bool) -> io::Result<()> {
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID;
    if netns {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: unshare only changes this (single-threaded, forked) process's namespaces.
    check(unsafe { libc::unshare(flags) })?;
    match write_proc(c"/proc/self/setgroups", c"deny") {
        Err(e) if e.raw_os_error() != Some(libc::ENOENT) => return Err(e),
        _ => {}
    }
    write_proc(c"/proc/self/uid_map", &maps.uid)?;
    write_proc(c"/proc/self/gid_map", &maps.gid)?;
    // SAFETY: a propagation change of this namespace's mounts; the strings are static.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    })
}

/// Brings up the loopback interface of a new network namespace, so that a command's own
/// servers and tests on 127.0.0.1 work; the host's listeners stay out of reach.
pub(super) fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket for the interface ioctls, a zeroed ifreq we own, and close.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s == -1 {
            return Err(io::Error::last_os_error());
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        ifr.ifr_name[0] = b'l' as libc::c_char;
        ifr.ifr_name[1] = b'o' as libc::c_char;
        let mut r = libc::ioctl(s, libc::SIOCGIFFLAGS, &mut ifr);
        if r != -1 {
            ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            r = libc::ioctl(s, libc::SIOCSIFFLAGS, &ifr);
        }
        let e = io::Error::last_os_error();
        libc::close(s);
        if r == -1 {
            return Err(e);
        }
    }
    Ok(())
}

/// A user and a network namespace of a workspace's own, held by a process of berth's that
/// makes sockets in it ([`crate::network`]): the ids mapped to themselves, the loopback up.
pub(crate) fn make_network_namespace(maps: &IdMaps) -> io::Result<()> {
    // SAFETY: unshare only changes this (single-threaded, forked) process's namespaces.
    check(unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) })?;
    match write_proc(c"/proc/self/setgroups", c"deny") {
        Err(e) if e.raw_os_error() != Some(libc::ENOENT) => return Err(e),
        _ => {}
    }
    write_proc(c"/proc/self/uid_map", &maps.uid)?;
    write_proc(c"/proc/self/gid_map", &maps.gid)?;
    loopback_up()
}

/// Joins a workspace's user and network namespaces (descriptors of them), then makes mount
/// and PID namespaces of the tree's own: what [`enter_namespaces`] does, with the network
/// every tree of the workspace shares. Joining the user namespace gives this process its
/// capabilities there, which the new namespaces, the mounts and the new `/proc` need.
pub(super) fn join_namespaces(user: std::os::fd::RawFd, net: std::os::fd::RawFd) -> io::Result<()> {
    // SAFETY: setns and unshare only change this (single-threaded, forked) process's
    // namespaces; the descriptors are held open by the parent's plan.
    check(unsafe { libc::setns(user, libc::CLONE_NEWUSER) })?;
    // SAFETY: as above.
    check(unsafe { libc::setns(net, libc::CLONE_NEWNET) })?;
    // SAFETY: as above.
    check(unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWPID) })?;
    // SAFETY: a propagation change of this namespace's mounts; the strings are static.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    })
}
