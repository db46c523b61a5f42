//! The socket helpers every backend shares: setsockopt, a raw AF_PACKET socket and its bind,
//! the wait for a readable socket (with the interface-gone check), and the offset of
//! CLOCK_TAI, the clock kernel RX stamps (XDP) and launch times (SO_TXTIME) are kept in.
//!
//! Imports only [`crate::error`]: the TX backends, the RX sources and AF_XDP all import it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::IoError;

/// setsockopt(2) with any option value.
pub(crate) fn sockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, v: &T) -> std::io::Result<()> {
    // SAFETY: v is a live value of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as u32,
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A raw AF_PACKET socket with protocol 0 (it receives nothing until bound with a protocol).
pub(crate) fn packet_socket() -> Result<OwnedFd, IoError> {
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => IoError::NoPermission,
            _ => IoError::Os {
                context: "socket(AF_PACKET, SOCK_RAW)".into(),
                cause: e,
            },
        });
    }
    // SAFETY: fd is fresh and valid.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds a packet socket to an interface and an ethertype (0: none, send only; ETH_P_ALL:
/// every frame). Returns bind(2)'s result; errno is left for the caller.
pub(crate) fn bind_packet(fd: &OwnedFd, ifindex: u32, protocol: u16) -> i32 {
    // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll of the size passed.
    unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    }
}

/// One classic BPF instruction.
pub(crate) const fn bpf(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Attaches a classic BPF filter (`SO_ATTACH_FILTER`): the socket queues only the frames
/// it accepts. Attach before the bind, so that no other frame is queued.
pub(crate) fn attach_filter(fd: &OwnedFd, f: &[libc::sock_filter]) -> Result<(), IoError> {
    let prog = libc::sock_fprog {
        len: f.len() as u16,
        filter: f.as_ptr().cast_mut(),
    };
    sockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog).map_err(|e| IoError::Os {
        context: "SO_ATTACH_FILTER".into(),
        cause: e,
    })
}

/// One recvmsg(2) on a packet socket, not waiting: the frame into `buf`, its control messages
/// into `ctl`. Its length (the whole frame's with `MSG_TRUNC` in `flags`), the sender's
/// address, and the header to walk `ctl` with (`CMSG_FIRSTHDR`: only its control fields are
/// left set); None when no frame is queued.
pub(crate) fn recv_packet(
    fd: libc::c_int,
    buf: &mut [u8],
    ctl: &mut [u64],
    flags: libc::c_int,
) -> Option<(usize, libc::sockaddr_ll, libc::msghdr)> {
    // SAFETY: plain data, zeroed is valid.
    let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: plain data, zeroed is valid; its pointers are set to live buffers below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_ll).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(ctl);
    // SAFETY: msg points to live buffers of the sizes given.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT | flags) };
    // Not pointing at this frame's locals any more.
    msg.msg_name = std::ptr::null_mut();
    msg.msg_iov = std::ptr::null_mut();
    (n >= 0).then_some((n as usize, from, msg))
}

/// Reads `SOL_SOCKET/SO_ERROR` for the error that ended a socket (`ENETDOWN` if none is set).
pub(crate) fn socket_error(fd: &OwnedFd) -> std::io::Error {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: err and len are valid for the call.
    unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut err as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    std::io::Error::from_raw_os_error(if err != 0 { err } else { libc::ENETDOWN })
}

/// Waits up to `timeout_ms` for `fd` to be readable (returns early on a signal). An error if
/// nothing is `ready` and the interface went away or down: poll would return at once from
/// then on.
pub(crate) fn wait_readable(
    fd: &OwnedFd,
    timeout_ms: i32,
    iface: &str,
    ready: impl Fn() -> bool,
) -> Result<(), IoError> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN | libc::POLLERR,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(());
        }
        return Err(IoError::Os {
            context: format!("poll on the RX socket of {iface}"),
            cause: e,
        });
    }
    if !ready() && pfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
        return Err(IoError::Os {
            context: format!("the RX interface {iface} went away or down (was its namespace deleted?)"),
            cause: socket_error(fd),
        });
    }
    Ok(())
}

pub(crate) fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is valid for the call.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// CLOCK_TAI − CLOCK_REALTIME: a whole number of seconds (0 until something sets the
/// kernel's TAI offset, 37 s on a host synchronised by chrony or ptp4l with leap seconds).
pub fn tai_offset_ns() -> i64 {
    let a = clock_ns(libc::CLOCK_REALTIME);
    let t = clock_ns(libc::CLOCK_TAI);
    let b = clock_ns(libc::CLOCK_REALTIME);
    let d = t - (a + (b - a) / 2);
    (d as f64 / 1e9).round() as i64 * 1_000_000_000
}

/// Binds a socket to an interface (SO_BINDTODEVICE): what it sends leaves there.
pub fn bind_to_device(s: &impl std::os::fd::AsRawFd, ifname: &str) -> Result<(), IoError> {
    let name = ifname.as_bytes();
    // SAFETY: setsockopt with a valid fd and a buffer of `name.len()` bytes.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(IoError::Os {
            context: format!("SO_BINDTODEVICE {ifname}"),
            cause: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}
