//! A port's socket for one link-local protocol: AF_PACKET bound to its EtherType on the
//! port's interface, in its namespace, a member of its group address (a NIC that filters
//! multicast passes it up), with the interface's MAC read back from the bound socket. LLDP
//! ([`LLDP`]: 0x88cc to the nearest bridge) and LACP ([`SLOW_PROTOCOLS`]: 0x8809) use it;
//! their frames are built and read by `gapless_otg::lldp` and `gapless_otg::lag::lacp`. May
//! import `error` and `kernel`.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use crate::error::IoError;
use crate::kernel::nic::{if_index, in_netns};
use crate::kernel::socket::{bind_packet, packet_socket, sockopt};

/// A protocol's EtherType and group address.
#[derive(Debug, Clone, Copy)]
pub struct Protocol {
    pub ethertype: u16,
    pub group: [u8; 6],
}

/// LLDP, to the nearest-bridge group.
pub const LLDP: Protocol = Protocol {
    ethertype: 0x88cc,
    group: [0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e],
};
/// The slow protocols (LACP), to their group.
pub const SLOW_PROTOCOLS: Protocol = Protocol {
    ethertype: 0x8809,
    group: [0x01, 0x80, 0xc2, 0x00, 0x00, 0x02],
};

/// An open socket for one protocol on one interface.
pub struct GroupSocket {
    fd: OwnedFd,
    iface: String,
    /// The interface's MAC address.
    pub mac: [u8; 6],
}

impl GroupSocket {
    /// Opens the socket for `proto` on `iface` in `netns` (this namespace when None).
    pub fn open(netns: Option<&str>, iface: &str, proto: Protocol) -> Result<GroupSocket, IoError> {
        in_netns(netns, || {
            let fd = packet_socket()?;
            let index = if_index(iface)?;
            if bind_packet(&fd, index, proto.ethertype) != 0 {
                return Err(IoError::last_os(format!(
                    "bind AF_PACKET (EtherType {:#06x}) to {iface}",
                    proto.ethertype
                )));
            }
            // SAFETY: packet_mreq is plain data; zeroed is valid.
            let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mr.mr_ifindex = index as i32;
            mr.mr_type = libc::PACKET_MR_MULTICAST as u16;
            mr.mr_alen = 6;
            mr.mr_address[..6].copy_from_slice(&proto.group);
            sockopt(&fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr).map_err(|e| IoError::Os {
                context: format!("PACKET_ADD_MEMBERSHIP {:02x?} on {iface}", proto.group),
                cause: e,
            })?;
            let mac = bound_mac(&fd).ok_or_else(|| IoError::last_os(format!("getsockname on {iface}")))?;
            Ok(GroupSocket {
                fd,
                iface: iface.to_string(),
                mac,
            })
        })
    }

    /// Whether the interface can carry frames now (looked up in the socket's namespace).
    pub fn link_up(&self) -> bool {
        crate::kernel::nic::link_state_by(&self.fd, &self.iface) == crate::kernel::nic::LinkState::Up
    }

    /// Sends one frame.
    pub fn send(&self, frame: &[u8]) -> Result<(), IoError> {
        // SAFETY: frame is a live buffer of the length passed.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(IoError::last_os(format!("send a frame on {}", self.iface)));
        }
        Ok(())
    }

    /// The next frame of the protocol the interface received (not one it sent), waiting up
    /// to `wait` (1 ms to 1 s); `Duration::ZERO`: only one already there.
    pub fn recv(&self, wait: Duration) -> Option<Vec<u8>> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ms = if wait.is_zero() {
            0
        } else {
            wait.as_millis().clamp(1, 1000) as i32
        };
        if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 {
            return None;
        }
        let mut buf = vec![0u8; 1600];
        // SAFETY: plain data, zeroed is valid.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: buf and from are live buffers of the sizes passed.
        let n = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
                (&mut from as *mut libc::sockaddr_ll).cast(),
                &mut len,
            )
        };
        if n <= 0 || from.sll_pkttype == libc::PACKET_OUTGOING {
            return None;
        }
        buf.truncate(n as usize);
        Some(buf)
    }
}

/// The interface's MAC, as the bound packet socket's own address.
fn bound_mac(fd: &OwnedFd) -> Option<[u8; 6]> {
    // SAFETY: plain data, zeroed is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: sll is a live sockaddr_ll of the size passed.
    let rc = unsafe { libc::getsockname(fd.as_raw_fd(), (&mut sll as *mut libc::sockaddr_ll).cast(), &mut len) };
    (rc == 0 && sll.sll_halen == 6).then(|| sll.sll_addr[..6].try_into().expect("six bytes"))
}
