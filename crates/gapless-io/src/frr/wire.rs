//! When a routing daemon's message left on the wire: an AF_PACKET socket on the device's
//! interface, opened before the command, reads the device's own outgoing frames with their
//! kernel stamps (SO_TIMESTAMPNS, CLOCK_REALTIME: the meter's clock) until the first BGP
//! UPDATE to the peer. FRR sends a withdrawal about 50 ms after the command (../shared/FRR.md),
//! so the command's own time would be that much early.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::error::IoError;
use crate::kernel::nic::{if_index, in_netns};
use crate::socket::{bind_packet, packet_socket, sockopt};

/// A watch on a device's outgoing frames.
pub struct UpdateWatch {
    fd: OwnedFd,
}

const ETH_P_ALL: u16 = 0x0003;

impl UpdateWatch {
    /// Opens the watch on `iface` in `netns`.
    pub fn open(netns: &str, iface: &str) -> Result<UpdateWatch, IoError> {
        UpdateWatch::open_with(netns, iface, None)
    }

    /// Opens the watch on `iface` in `netns`, with a classic BPF `filter` (attached before
    /// the bind, so no other frame is queued).
    fn open_with(netns: &str, iface: &str, filter: Option<&[libc::sock_filter]>) -> Result<UpdateWatch, IoError> {
        in_netns(Some(netns), || {
            let fd = packet_socket()?;
            if let Some(f) = filter {
                attach(&fd, f)?;
            }
            let index = if_index(iface)?;
            if bind_packet(&fd, index, ETH_P_ALL) != 0 {
                return Err(IoError::last_os(format!("bind AF_PACKET to {iface}")));
            }
            sockopt(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &(1 as libc::c_int)).map_err(|e| IoError::Os {
                context: "SO_TIMESTAMPNS".into(),
                cause: e,
            })?;
            Ok(UpdateWatch { fd })
        })
    }

    /// The stamp (ns, CLOCK_REALTIME) of the first BGP UPDATE the device sent to `peer`
    /// since the watch opened, waiting up to `within`.
    pub fn first_update(&self, peer: IpAddr, within: Duration) -> Option<u64> {
        self.first_sent(|f| is_update_to(f, peer), within)
    }

    /// The stamp of the first IS-IS LSP the device sent since the watch opened, waiting up
    /// to `within`.
    pub fn first_lsp(&self, within: Duration) -> Option<u64> {
        self.first_sent(is_isis_lsp, within)
    }

    /// The stamp of the first frame the device sent that `wanted` takes.
    pub fn first_sent(&self, wanted: impl Fn(&[u8]) -> bool, within: Duration) -> Option<u64> {
        let t0 = Instant::now();
        let mut buf = [0u8; 4096];
        while let Some(left) = within.checked_sub(t0.elapsed()) {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as i32) } <= 0 {
                continue;
            }
            let Some((n, outgoing, ts)) = self.recv(&mut buf) else {
                continue;
            };
            if outgoing && wanted(&buf[..n]) {
                return Some(ts);
            }
        }
        None
    }

    /// One frame: its length, whether the host sent it, and its kernel stamp.
    fn recv(&self, buf: &mut [u8]) -> Option<(usize, bool, u64)> {
        // SAFETY: plain data, zeroed is valid.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut ctl = [0u64; 16];
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
        msg.msg_controllen = std::mem::size_of_val(&ctl);
        // SAFETY: msg points to live buffers of the sizes given.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if n <= 0 {
            return None;
        }
        let mut ts = None;
        // SAFETY: walking the control messages the kernel wrote into `ctl`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let t = (libc::CMSG_DATA(c) as *const libc::timespec).read_unaligned();
                    ts = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Some((n as usize, from.sll_pkttype == libc::PACKET_OUTGOING, ts?))
    }
}

/// Lets through only untagged IPv4 or IPv6 frames of IP protocol 89 (OSPF).
const OSPF_ONLY: [libc::sock_filter; 9] = [
    bpf(0x28, 0, 0, 12),     // ldh [12]: the ethertype
    bpf(0x15, 0, 2, 0x0800), // IPv4? on to 2, else 4
    bpf(0x30, 0, 0, 23),     // ldb [23]: the protocol
    bpf(0x15, 3, 4, 89),     // OSPF: accept (7), else drop (8)
    bpf(0x15, 0, 3, 0x86dd), // IPv6? on to 5, else drop
    bpf(0x30, 0, 0, 20),     // ldb [20]: the next header
    bpf(0x15, 0, 1, 89),     // OSPF: accept, else drop
    bpf(0x06, 0, 0, 0xffff), // accept
    bpf(0x06, 0, 0, 0),      // drop
];

const fn bpf(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

fn attach(fd: &OwnedFd, f: &[libc::sock_filter]) -> Result<(), IoError> {
    let prog = libc::sock_fprog {
        len: f.len() as u16,
        filter: f.as_ptr().cast_mut(),
    };
    sockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog).map_err(|e| IoError::Os {
        context: "SO_ATTACH_FILTER".into(),
        cause: e,
    })
}

/// Every OSPF frame on a device's interface, each way, handed to a callback on a thread of
/// its own until the tap is dropped (its LSAs counted: FRR counts packets only). A BPF
/// filter keeps every other frame, such as the data plane's to the device, in the kernel.
pub struct OspfTap {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OspfTap {
    /// Starts the tap on `iface` in `netns`; `on_frame(frame, outgoing)`.
    pub fn start(
        netns: &str,
        iface: &str,
        mut on_frame: impl FnMut(&[u8], bool) + Send + 'static,
    ) -> Result<OspfTap, IoError> {
        let w = UpdateWatch::open_with(netns, iface, Some(&OSPF_ONLY))?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ospf-tap".into())
            .spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut pfd = libc::pollfd {
                        fd: w.fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd.
                    if unsafe { libc::poll(&mut pfd, 1, 100) } <= 0 {
                        continue;
                    }
                    while let Some((n, outgoing, _)) = w.recv(&mut buf) {
                        on_frame(&buf[..n], outgoing);
                    }
                }
            })
            .map_err(|e| IoError::Os {
                context: "spawn the OSPF tap".into(),
                cause: e,
            })?;
        Ok(OspfTap {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for OspfTap {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether an Ethernet frame is an IS-IS LSP (L1 or L2): an 802.3 frame (length, not type,
/// after the addresses and any VLAN tags) with LLC FE FE 03, then IS-IS (0x83) PDU type 18 or 20.
pub fn is_isis_lsp(f: &[u8]) -> bool {
    let mut off = 12;
    while matches!(f.get(off..off + 2), Some([0x81, 0x00] | [0x88, 0xa8])) {
        off += 4;
    }
    // Length, LLC (3), then IS-IS: 0x83, header length, version, id length, PDU type.
    let Some(h) = f.get(off..off + 10) else { return false };
    let len = u16::from_be_bytes([h[0], h[1]]);
    len < 0x0600 && h[2..5] == [0xfe, 0xfe, 0x03] && h[5] == 0x83 && matches!(h[9] & 0x1f, 18 | 20)
}

/// Whether an Ethernet frame is TCP to `peer` on a BGP session (port 179 at either end:
/// whichever side opened it) carrying a BGP UPDATE.
pub fn is_update_to(f: &[u8], peer: IpAddr) -> bool {
    let mut off = 12;
    let mut ethertype = u16::from_be_bytes([*f.get(12).unwrap_or(&0), *f.get(13).unwrap_or(&0)]);
    while ethertype == 0x8100 || ethertype == 0x88a8 {
        off += 4;
        let Some(t) = f.get(off..off + 2) else { return false };
        ethertype = u16::from_be_bytes([t[0], t[1]]);
    }
    let ip = &f[(off + 2).min(f.len())..];
    let (dst, proto, l4): (IpAddr, u8, usize) = match ethertype {
        0x0800 if ip.len() >= 20 => {
            let d: [u8; 4] = ip[16..20].try_into().unwrap_or_default();
            (d.into(), ip[9], usize::from(ip[0] & 0x0f) * 4)
        }
        0x86dd if ip.len() >= 40 => {
            let d: [u8; 16] = ip[24..40].try_into().unwrap_or_default();
            (d.into(), ip[6], 40)
        }
        _ => return false,
    };
    let Some(tcp) = ip.get(l4..) else { return false };
    let port = |at: usize| u16::from_be_bytes([tcp[at], tcp[at + 1]]);
    if dst != peer || proto != 6 || tcp.len() < 20 || (port(0) != 179 && port(2) != 179) {
        return false;
    }
    let mut msg = &tcp[usize::from(tcp[12] >> 4) * 4..];
    // Each BGP message: a 16-byte marker of ones, a length, a type (2: UPDATE).
    while msg.len() >= 19 && msg[..16].iter().all(|b| *b == 0xff) {
        if msg[18] == 2 {
            return true;
        }
        let len = usize::from(u16::from_be_bytes([msg[16], msg[17]]));
        msg = msg.get(len.max(19)..).unwrap_or_default();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_isis_lsp_is_told_from_a_hello_and_from_ethernet_ii() {
        let frame = |pdu: u8, vlan: bool| {
            let mut f = vec![0x01, 0x80, 0xc2, 0, 0, 0x15, 2, 0, 0, 0, 0, 1];
            if vlan {
                f.extend([0x81, 0x00, 0, 100]);
            }
            f.extend(40u16.to_be_bytes());
            f.extend([0xfe, 0xfe, 0x03, 0x83, 27, 1, 0, pdu]);
            f.extend([0u8; 30]);
            f
        };
        assert!(
            is_isis_lsp(&frame(20, false)) && is_isis_lsp(&frame(18, true)),
            "L2 and L1 LSPs"
        );
        assert!(!is_isis_lsp(&frame(17, false)), "a p2p hello");
        let mut ip = frame(20, false);
        ip[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        assert!(!is_isis_lsp(&ip), "an Ethernet II frame");
    }

    #[test]
    fn an_update_to_the_peer_is_told_from_a_keepalive_and_from_other_peers() {
        let frame = |kind: u8| {
            let mut f = vec![0u8; 14];
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 6, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2];
            // From port 179: the peer opened the session.
            let mut tcp = vec![0u8; 20];
            tcp[0..2].copy_from_slice(&179u16.to_be_bytes());
            tcp[2..4].copy_from_slice(&43525u16.to_be_bytes());
            tcp[12] = 5 << 4;
            ip.append(&mut tcp);
            // A KEEPALIVE first, then the message of `kind`.
            for t in [4u8, kind] {
                ip.extend([0xff; 16]);
                ip.extend(19u16.to_be_bytes());
                ip.push(t);
            }
            f.extend(ip);
            f
        };
        let peer: IpAddr = "1.1.1.2".parse().unwrap();
        assert!(
            is_update_to(&frame(2), peer),
            "an UPDATE after a KEEPALIVE in one segment"
        );
        assert!(!is_update_to(&frame(4), peer), "KEEPALIVEs only");
        assert!(!is_update_to(&frame(2), "1.1.1.3".parse().unwrap()), "another peer");
    }
}
