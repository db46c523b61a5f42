//! Kernel TX timestamps on an AF_PACKET socket (SO_TIMESTAMPING TX_SOFTWARE or
//! TX_HARDWARE, numbered by OPT_ID, payload-free by OPT_TSONLY), read back from the socket's
//! error queue; and the per-frame SO_TXTIME control message for launch time.

use std::os::fd::{AsRawFd, OwnedFd};

use gapless_core::result::departure_stamps::TxStampStats;

use crate::error::IoError;
use crate::kernel::socket::sockopt;

/// Which TX stamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxStampKind {
    /// The kernel's, taken as the driver takes the frame (SOF_TIMESTAMPING_TX_SOFTWARE).
    Kernel,
    /// The NIC's, taken as the frame leaves (SOF_TIMESTAMPING_TX_HARDWARE).
    Hardware,
}

impl TxStampKind {
    /// How results name the stamps.
    pub fn source(self) -> &'static str {
        match self {
            TxStampKind::Kernel => "kernel software (SOF_TIMESTAMPING_TX_SOFTWARE, OPT_ID, CLOCK_REALTIME)",
            TxStampKind::Hardware => "NIC hardware (SOF_TIMESTAMPING_TX_HARDWARE, OPT_ID, raw PHC)",
        }
    }
}

/// The cmsg type of the error-queue message on a packet socket (linux/if_packet.h).
const PACKET_TX_TIMESTAMP: libc::c_int = 16;
/// SO_TXTIME / SCM_TXTIME (asm-generic/socket.h).
pub const SO_TXTIME: libc::c_int = 61;

/// The flags for SO_TIMESTAMPING.
pub fn flags(kind: TxStampKind) -> u32 {
    let base = libc::SOF_TIMESTAMPING_OPT_ID | libc::SOF_TIMESTAMPING_OPT_TSONLY;
    base | match kind {
        TxStampKind::Kernel => libc::SOF_TIMESTAMPING_TX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE,
        TxStampKind::Hardware => libc::SOF_TIMESTAMPING_TX_HARDWARE | libc::SOF_TIMESTAMPING_RAW_HARDWARE,
    }
}

/// Turns TX stamps on for `fd` (sending on `iface`). Hardware stamps need a NIC that has them
/// (checked first: veth has none) and SIOCSHWTSTAMP with tx_type ON.
pub fn enable(fd: &OwnedFd, iface: &str, kind: TxStampKind) -> Result<(), IoError> {
    if kind == TxStampKind::Hardware {
        let caps = crate::kernel::nic::ts_info(iface)?;
        if caps.so_timestamping & libc::SOF_TIMESTAMPING_TX_HARDWARE == 0 {
            return Err(IoError::TxStamps {
                iface: iface.into(),
                what: format!(
                    "the driver cannot timestamp transmitted frames in hardware (it reports: {})",
                    caps.describe()
                ),
                fix: "use --tx-timestamps kernel; `ethtool -T IF` lists what a driver can do".into(),
            });
        }
        crate::kernel::nic::enable_hw_timestamps(iface, true)?;
    }
    sockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_TIMESTAMPING,
        &(flags(kind) as libc::c_int),
    )
    .map_err(|e| IoError::TxStamps {
        iface: iface.into(),
        what: format!("setsockopt(SO_TIMESTAMPING) refused: {e}"),
        fix: "use a kernel of 3.17 or newer (OPT_ID, OPT_TSONLY), or run without --tx-timestamps".into(),
    })?;
    // Room for the stamps between two drains.
    let _ = sockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &(4 << 20 as libc::c_int));
    Ok(())
}

/// One stamp as the error queue gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The frame's OPT_ID number.
    pub key: u32,
    /// ns since the epoch (software) or on the NIC's clock (hardware).
    pub ns: u64,
}

/// Reads every stamp waiting in `fd`'s error queue, without blocking, into `stats`.
/// Returns how many were read.
pub fn drain(fd: &OwnedFd, kind: TxStampKind, stats: &mut TxStampStats) -> usize {
    let mut n = 0;
    while let Some(s) = recv_one(fd, kind) {
        if let Some(s) = s {
            stats.stamp(s.key, s.ns);
            n += 1;
        }
    }
    n
}

/// One error-queue message: None when the queue is empty, Some(None) for a message that is
/// not a TX stamp.
fn recv_one(fd: &OwnedFd, kind: TxStampKind) -> Option<Option<Stamp>> {
    let mut data = [0u8; 64];
    let mut ctrl = [0u64; 64];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; zeroed is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&ctrl);
    // SAFETY: msg points at live buffers of the lengths given.
    let rc = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    if rc < 0 {
        return None;
    }
    Some(parse_cmsgs(&msg, kind))
}

/// The stamp and its number from a received message's control data.
fn parse_cmsgs(msg: &libc::msghdr, kind: TxStampKind) -> Option<Stamp> {
    let (mut ns, mut key) = (None, None);
    // SAFETY: walking the control buffer the kernel filled, with the libc macros.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            let h = &*c;
            let data = libc::CMSG_DATA(c);
            if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SO_TIMESTAMPING {
                // struct scm_timestamping: ts[0] software, ts[2] raw hardware.
                let ts = std::ptr::read_unaligned(data as *const [libc::timespec; 3]);
                let t = if kind == TxStampKind::Hardware { ts[2] } else { ts[0] };
                if t.tv_sec != 0 || t.tv_nsec != 0 {
                    ns = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
                }
            } else if (h.cmsg_level == libc::SOL_PACKET && h.cmsg_type == PACKET_TX_TIMESTAMP)
                || (h.cmsg_level == libc::SOL_IP && h.cmsg_type == libc::IP_RECVERR)
            {
                let e = std::ptr::read_unaligned(data as *const libc::sock_extended_err);
                if e.ee_errno == libc::ENOMSG as u32 && e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING {
                    key = Some(e.ee_data);
                }
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    Some(Stamp { key: key?, ns: ns? })
}

/// Turns SO_TXTIME on: every frame then carries its launch time (CLOCK_TAI ns) in an
/// SCM_TXTIME control message, and the kernel reports frames it dropped for a missed time.
pub fn enable_txtime(fd: &OwnedFd, iface: &str) -> Result<(), IoError> {
    let cfg = libc::sock_txtime {
        clockid: libc::CLOCK_TAI,
        flags: libc::SOF_TXTIME_REPORT_ERRORS,
    };
    sockopt(fd, libc::SOL_SOCKET, SO_TXTIME, &cfg).map_err(|e| IoError::TxStamps {
        iface: iface.into(),
        what: format!("setsockopt(SO_TXTIME, CLOCK_TAI) refused: {e}"),
        fix: "use Linux 4.19 or newer, or rate_control = \"software\"".into(),
    })
}

/// The control buffer of one SCM_TXTIME message (CMSG_SPACE(8) = 24 bytes on 64-bit).
pub const TXTIME_CMSG_LEN: usize = 24;

/// Writes an SCM_TXTIME control message carrying `txtime_ns` into `buf`.
pub fn txtime_cmsg(buf: &mut [u8; TXTIME_CMSG_LEN], txtime_ns: u64) {
    // struct cmsghdr { size_t len; int level; int type; } then the u64, 8-byte aligned.
    // SAFETY: CMSG_LEN is a pure computation.
    let len = unsafe { libc::CMSG_LEN(8) } as usize;
    buf[..8].copy_from_slice(&len.to_ne_bytes());
    buf[8..12].copy_from_slice(&libc::SOL_SOCKET.to_ne_bytes());
    buf[12..16].copy_from_slice(&SO_TXTIME.to_ne_bytes());
    buf[16..24].copy_from_slice(&txtime_ns.to_ne_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_txtime_cmsg_is_what_the_kernel_parses() {
        let mut b = [0u8; TXTIME_CMSG_LEN];
        txtime_cmsg(&mut b, 0x0102_0304_0506_0708);
        // SAFETY: pure computations.
        assert_eq!(unsafe { libc::CMSG_SPACE(8) } as usize, TXTIME_CMSG_LEN);
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = b.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = b.len();
        // SAFETY: b holds one well-formed cmsg, walked with the libc macros.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            assert!(!c.is_null());
            assert_eq!((*c).cmsg_level, libc::SOL_SOCKET);
            assert_eq!((*c).cmsg_type, 61, "SCM_TXTIME");
            assert_eq!((*c).cmsg_len as usize, libc::CMSG_LEN(8) as usize);
            let v = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const u64);
            assert_eq!(v, 0x0102_0304_0506_0708);
            assert!(libc::CMSG_NXTHDR(&msg, c).is_null());
        }
    }

    #[test]
    fn stamp_flags() {
        let k = flags(TxStampKind::Kernel);
        assert_ne!(k & libc::SOF_TIMESTAMPING_TX_SOFTWARE, 0);
        assert_ne!(k & libc::SOF_TIMESTAMPING_OPT_ID, 0);
        assert_eq!(k & libc::SOF_TIMESTAMPING_TX_HARDWARE, 0);
        assert_ne!(flags(TxStampKind::Hardware) & libc::SOF_TIMESTAMPING_TX_HARDWARE, 0);
    }
}
