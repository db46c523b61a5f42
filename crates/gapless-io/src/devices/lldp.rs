//! A port's LLDP socket: AF_PACKET bound to EtherType 0x88cc on the port's interface, in its
//! namespace, a member of LLDP's nearest-bridge group (a NIC that filters multicast passes
//! it up), with the interface's MAC read back from the bound socket. The frames are built
//! and read by `gapless_otg::lldp`. May import `error`, `kernel` and `socket`.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use crate::error::IoError;
use crate::kernel::nic::{if_index, in_netns};
use crate::kernel::socket::{bind_packet, packet_socket, sockopt};

const ETH_P_LLDP: u16 = 0x88cc;
const GROUP: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];

/// An open LLDP socket on one interface.
pub struct LldpSocket {
    fd: OwnedFd,
    /// The interface's MAC address.
    pub mac: [u8; 6],
}

impl LldpSocket {
    /// Opens the socket on `iface` in `netns` (this namespace when None).
    pub fn open(netns: Option<&str>, iface: &str) -> Result<LldpSocket, IoError> {
        in_netns(netns, || {
            let fd = packet_socket()?;
            let index = if_index(iface)?;
            if bind_packet(&fd, index, ETH_P_LLDP) != 0 {
                return Err(IoError::last_os(format!("bind AF_PACKET (LLDP) to {iface}")));
            }
            // SAFETY: packet_mreq is plain data; zeroed is valid.
            let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mr.mr_ifindex = index as i32;
            mr.mr_type = libc::PACKET_MR_MULTICAST as u16;
            mr.mr_alen = 6;
            mr.mr_address[..6].copy_from_slice(&GROUP);
            sockopt(&fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr).map_err(|e| IoError::Os {
                context: format!("PACKET_ADD_MEMBERSHIP 01:80:c2:00:00:0e on {iface}"),
                cause: e,
            })?;
            let mac = bound_mac(&fd).ok_or_else(|| IoError::last_os(format!("getsockname on {iface}")))?;
            Ok(LldpSocket { fd, mac })
        })
    }

    /// Sends one frame.
    pub fn send(&self, frame: &[u8]) -> Result<(), IoError> {
        // SAFETY: frame is a live buffer of the length passed.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(IoError::last_os("send an LLDP frame".to_string()));
        }
        Ok(())
    }

    /// The next LLDP frame the interface received (not one it sent), waiting up to `wait`.
    pub fn recv(&self, wait: Duration) -> Option<Vec<u8>> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, wait.as_millis().clamp(1, 1000) as i32) } <= 0 {
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
