//! A LAG's own interface, for the devices on it (issue 60): this kernel has no bonding or
//! team driver, so the LAG is a veth pair in a namespace of its own
//! (`gapless-dev-<pid>-lag<k>`, removed with the server as a host's is), and a thread that
//! forwards between its outer end and the members, as a bond's driver would:
//! - what the devices send (the frames from one of their MACs) leaves on the member that
//!   distributes and that the frame's spreading hash picks, as a flow's frames do
//!   ([`LagLive::pick`]);
//! - what a member that distributes receives for a device (to one of their MACs, or to a
//!   group address, but not LACP's or LLDP's) goes in at the outer end.
//!
//! The devices are macvlans on the inner end ([`LagIface::inner`]), each in its namespace as
//! on a port ([`super::hosts`]): their ARP, ND and routing daemons see one interface. The
//! inner end sends whole frames (no checksum offload, TSO or GSO), so what leaves on a
//! member is what a NIC would send. A VLAN tag the kernel moved into a frame's metadata is
//! put back into the frame either way. Each member's socket is promiscuous (a NIC's filter
//! would drop frames to the devices' MACs) and filtered in the kernel (classic BPF), so that
//! a flow's frames to other MACs never wake the thread.
//!
//! May import `kernel`, `error`, `tx::lag` (the LAG's [`LagLive`]) and `hosts` (its namespace helpers).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::IoError;
use crate::kernel::nic::{if_index, in_netns, ip_batch, offloads_off};
use crate::kernel::socket::{attach_filter, bind_packet, bpf, packet_socket, recv_packet, sockopt};
use crate::tx::lag::LagLive;

const ETH_P_ALL: u16 = 0x0003;

/// How often the thread looks at its stop flag while no frame comes.
const IDLE: Duration = Duration::from_millis(100);

/// A LAG's interface: where its veth pair is, its members, and its devices' MACs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LagIfaceSpec {
    /// The namespace made for the pair (a name from [`netns_name`]).
    pub netns: String,
    /// The ends' names: the outer one the thread reads and writes, the inner one the
    /// devices' macvlans sit on.
    pub outer: String,
    pub inner: String,
    /// Each member's interface and namespace (None: the server's own), in the LAG's order.
    pub members: Vec<(String, Option<String>)>,
    /// The MACs of the devices on the LAG.
    pub macs: Vec<[u8; 6]>,
    /// The pair's MTU: at least the largest device's.
    pub mtu: u32,
}

/// The namespace of this process's interface for its `k`-th LAG.
pub fn netns_name(k: usize) -> String {
    format!("{}{}-lag{k}", super::hosts::NETNS_PREFIX, std::process::id())
}

/// A LAG's interface and its forwarding thread; both go when it is dropped.
pub struct LagIface {
    spec: LagIfaceSpec,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LagIface {
    /// Makes the namespace and the pair, opens a socket on the outer end and on every member,
    /// and starts forwarding by `live`.
    pub fn create(spec: LagIfaceSpec, live: Arc<LagLive>) -> Result<LagIface, IoError> {
        assert_eq!(spec.members.len(), live.members(), "a LAG's members and its live set");
        make_pair(&spec)?;
        let mut iface = LagIface {
            spec,
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
        };
        let outer = in_netns(Some(&iface.spec.netns), || open(&iface.spec.outer, None))?;
        let filter = to_devices(&iface.spec.macs);
        let members = iface
            .spec
            .members
            .iter()
            .map(|(i, ns)| in_netns(ns.as_deref(), || open(i, Some(&filter))))
            .collect::<Result<Vec<_>, _>>()?;
        let fwd = Forwarder {
            outer,
            members,
            macs: iface.spec.macs.clone(),
            live,
        };
        let stop = iface.stop.clone();
        iface.thread = Some(
            std::thread::Builder::new()
                .name("lag-iface".into())
                .spawn(move || fwd.run(&stop))
                .map_err(|e| IoError::Os {
                    context: "spawn the LAG interface's thread".into(),
                    cause: e,
                })?,
        );
        Ok(iface)
    }

    /// The end the devices' macvlans sit on, and its namespace.
    pub fn inner(&self) -> (&str, &str) {
        (&self.spec.inner, &self.spec.netns)
    }
}

impl Drop for LagIface {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        super::hosts::remove_netns(&self.spec.netns);
    }
}

/// The namespace and the pair in it, up, with no address of their own (no IPv6 link-local,
/// so neither end sends ND or MLD) and the inner end's offloads off.
fn make_pair(spec: &LagIfaceSpec) -> Result<(), IoError> {
    let ns = spec.netns.as_str();
    super::hosts::fresh_netns(ns)?;
    let (o, i, mtu) = (&spec.outer, &spec.inner, spec.mtu);
    let made = ip_batch(
        Some(ns),
        &format!(
            "link add {o} mtu {mtu} type veth peer name {i} mtu {mtu}\n\
             link set {o} addrgenmode none\nlink set {i} addrgenmode none\n\
             link set {o} up\nlink set {i} up\n"
        ),
    )
    .and_then(|()| in_netns(Some(ns), || offloads_off(i)));
    if made.is_err() {
        super::hosts::remove_netns(ns);
    }
    made
}

/// A packet socket on `iface` for every frame (that `filter` takes), with each frame's VLAN
/// metadata (`PACKET_AUXDATA`); promiscuous on a member.
fn open(iface: &str, filter: Option<&[libc::sock_filter]>) -> Result<OwnedFd, IoError> {
    let fd = packet_socket()?;
    let os = |what: &str| {
        let what = format!("{what} on {iface}");
        move |e| IoError::Os {
            context: what,
            cause: e,
        }
    };
    if let Some(f) = filter {
        attach_filter(&fd, f)?;
    }
    let index = if_index(iface)?;
    if bind_packet(&fd, index, ETH_P_ALL) != 0 {
        return Err(IoError::last_os(format!("bind AF_PACKET to {iface}")));
    }
    sockopt(&fd, libc::SOL_PACKET, libc::PACKET_AUXDATA, &(1 as libc::c_int)).map_err(os("PACKET_AUXDATA"))?;
    if filter.is_some() {
        // SAFETY: packet_mreq is plain data; zeroed is valid.
        let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mr.mr_ifindex = index as i32;
        mr.mr_type = libc::PACKET_MR_PROMISC as u16;
        sockopt(&fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr).map_err(os("PACKET_MR_PROMISC"))?;
    }
    Ok(fd)
}

/// The classic BPF program a member's socket runs: a frame to a group address but not to
/// the slow protocols' or LLDP's EtherType, or to one of `macs`, is taken whole. Past 60
/// MACs (a jump's reach) every unicast frame is taken, and the macvlans sort them.
fn to_devices(macs: &[[u8; 6]]) -> Vec<libc::sock_filter> {
    const LDB: u16 = 0x30; // ldb [k]
    const LDH: u16 = 0x28; // ldh [k]
    const LDW: u16 = 0x20; // ld [k]
    const JEQ: u16 = 0x15; // jeq #k
    const JSET: u16 = 0x45; // jset #k
    const RET: u16 = 0x06;
    const TAKE: u32 = 0x0004_0000;
    let macs = if macs.len() > 60 { &[][..] } else { macs };
    // 0..=4: the group bit, then a group frame's EtherType; four per MAC; three returns.
    let drop_at = 5 + 4 * macs.len();
    let mut f = vec![
        bpf(LDB, 0, 0, 0),
        bpf(JSET, 0, 3, 1), // a group address? on; else to the MACs (5)
        bpf(LDH, 0, 0, 12),
        bpf(JEQ, (drop_at - 2) as u8, 0, 0x8809), // LACP: drop (drop_at + 2)
        bpf(JEQ, (drop_at - 3) as u8, (drop_at - 4) as u8, 0x88cc), // LLDP: drop; else take
    ];
    for (k, m) in macs.iter().enumerate() {
        let at = 5 + 4 * k;
        f.push(bpf(LDW, 0, 0, 2));
        f.push(bpf(JEQ, 0, 2, u32::from_be_bytes([m[2], m[3], m[4], m[5]])));
        f.push(bpf(LDH, 0, 0, 0));
        f.push(bpf(
            JEQ,
            (drop_at + 1 - (at + 4)) as u8,
            0,
            u32::from(u16::from_be_bytes([m[0], m[1]])),
        ));
    }
    // drop_at: a unicast frame to none of the MACs; then take; then drop a group frame.
    f.push(bpf(RET, 0, 0, if macs.is_empty() { TAKE } else { 0 }));
    f.push(bpf(RET, 0, 0, TAKE));
    f.push(bpf(RET, 0, 0, 0));
    f
}

/// The forwarding thread's sockets.
struct Forwarder {
    outer: OwnedFd,
    members: Vec<OwnedFd>,
    macs: Vec<[u8; 6]>,
    live: Arc<LagLive>,
}

impl Forwarder {
    fn run(&self, stop: &AtomicBool) {
        let mut fds: Vec<libc::pollfd> = std::iter::once(&self.outer)
            .chain(&self.members)
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut buf = vec![0u8; 65_536 + 4];
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: fds is a live array of the length passed.
            if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, IDLE.as_millis() as i32) } <= 0 {
                continue;
            }
            for (k, p) in fds.iter().enumerate().filter(|(_, p)| p.revents != 0) {
                self.drain(k, p.fd, &mut buf);
            }
        }
    }

    /// Forwards what socket `k` (0: the outer end; `1 + m`: member `m`) has queued, up to
    /// 256 frames, so that one busy side does not hold the other.
    fn drain(&self, k: usize, fd: libc::c_int, buf: &mut [u8]) {
        for _ in 0..256 {
            let Some(n) = recv(fd, buf) else { return };
            if n == 0 {
                continue;
            }
            let frame = &buf[..n];
            if k == 0 {
                self.out(frame);
            } else if self.live.distributing(k - 1) {
                send(&self.outer, frame);
            }
        }
    }

    /// A frame from the outer end: a device's goes out on its member.
    fn out(&self, frame: &[u8]) {
        if frame.len() < 14 || !self.macs.iter().any(|m| frame[6..12] == m[..]) {
            return;
        }
        let up = self.live.up();
        if !up.is_empty() {
            send(&self.members[LagLive::pick(&up, frame)], frame);
        }
    }
}

/// One received frame, its VLAN tag put back from the metadata: its length in `buf`, 0 for
/// one to pass over (one the interface sent, or too short or long), None when none is queued.
fn recv(fd: libc::c_int, buf: &mut [u8]) -> Option<usize> {
    let mut ctl = [0u64; 8];
    // Read 4 bytes in, so that a tag can be put back in place.
    let (n, from, msg) = recv_packet(fd, &mut buf[4..], &mut ctl, libc::MSG_TRUNC)?;
    if n < 14 || n > buf.len() - 4 || from.sll_pkttype == libc::PACKET_OUTGOING {
        return Some(0);
    }
    match vlan_of(&msg) {
        Some((tpid, tci)) => {
            buf.copy_within(4..16, 0);
            buf[12..14].copy_from_slice(&tpid.to_be_bytes());
            buf[14..16].copy_from_slice(&tci.to_be_bytes());
            Some(n + 4)
        }
        None => {
            buf.copy_within(4..4 + n, 0);
            Some(n)
        }
    }
}

/// The VLAN tag the kernel took out of the frame (PACKET_AUXDATA): its TPID and TCI.
fn vlan_of(msg: &libc::msghdr) -> Option<(u16, u16)> {
    const VLAN_VALID: u32 = 1 << 4;
    const VLAN_TPID_VALID: u32 = 1 << 6;
    // SAFETY: walking the control messages the kernel wrote into the message's buffer.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA {
                let a = (libc::CMSG_DATA(c) as *const libc::tpacket_auxdata).read_unaligned();
                if a.tp_status & VLAN_VALID == 0 {
                    return None;
                }
                let tpid = if a.tp_status & VLAN_TPID_VALID != 0 {
                    a.tp_vlan_tpid
                } else {
                    0x8100
                };
                return Some((tpid, a.tp_vlan_tci));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}

/// Sends one frame; a frame the kernel refuses (a member going down) is lost, as on a wire.
fn send(fd: &OwnedFd, frame: &[u8]) {
    // SAFETY: frame is a live buffer of the length passed.
    let _ = unsafe { libc::send(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
}

#[cfg(test)]
mod tests;
