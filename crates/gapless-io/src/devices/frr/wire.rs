//! When a routing daemon's message left on the wire: an AF_PACKET socket on the device's
//! interface, opened before the command, reads the device's own outgoing frames with their
//! kernel stamps (SO_TIMESTAMPNS, CLOCK_REALTIME: the meter's clock) until the first one a
//! predicate takes. Which frame carries the change (a BGP UPDATE to the peer, an IS-IS LSP,
//! an OSPF LS Update with the range's LSAs) is the protocol crate's to say
//! (`gapless_otg::{bgp,isis,ospf}::wire`). FRR sends a withdrawal about 50 ms after the
//! command (../shared/FRR.md), so the command's own time would be that much early.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::error::IoError;
use crate::kernel::nic::{if_index, in_netns};
use crate::kernel::socket::{attach_filter, bind_packet, bpf, packet_socket, recv_packet, sockopt};

/// A watch on a device's outgoing frames.
pub struct SentWatch {
    fd: OwnedFd,
}

const ETH_P_ALL: u16 = 0x0003;

impl SentWatch {
    /// Opens the watch on `iface` in `netns`.
    pub fn open(netns: &str, iface: &str) -> Result<SentWatch, IoError> {
        SentWatch::open_with(netns, iface, None)
    }

    /// Opens the watch on `iface` in `netns`, with a classic BPF `filter` (attached before
    /// the bind, so no other frame is queued).
    fn open_with(netns: &str, iface: &str, filter: Option<&[libc::sock_filter]>) -> Result<SentWatch, IoError> {
        in_netns(Some(netns), || {
            let fd = packet_socket()?;
            if let Some(f) = filter {
                attach_filter(&fd, f)?;
            }
            let index = if_index(iface)?;
            if bind_packet(&fd, index, ETH_P_ALL) != 0 {
                return Err(IoError::last_os(format!("bind AF_PACKET to {iface}")));
            }
            sockopt(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &(1 as libc::c_int)).map_err(|e| IoError::Os {
                context: "SO_TIMESTAMPNS".into(),
                cause: e,
            })?;
            Ok(SentWatch { fd })
        })
    }

    /// The stamp (ns, CLOCK_REALTIME) of the first frame the device sent since the watch
    /// opened that `wanted` takes (the protocol crate's predicates: a BGP UPDATE to a peer,
    /// an IS-IS LSP, an OSPF LS Update carrying a range), waiting up to `within`.
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
        let mut ctl = [0u64; 16];
        let (n, from, msg) = recv_packet(self.fd.as_raw_fd(), buf, &mut ctl, 0)?;
        if n == 0 {
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
        Some((n, from.sll_pkttype == libc::PACKET_OUTGOING, ts?))
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
        let w = SentWatch::open_with(netns, iface, Some(&OSPF_ONLY))?;
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
