//! AF_PACKET RX: a TPACKET_V3 ring with kernel RX timestamps (SO_TIMESTAMPING).
//!
//! The kernel fills blocks of frames and hands a whole block to user space (when it is full
//! or its timeout expires); the reader walks the block and gives it back. Each frame carries
//! the timestamp the kernel took when the frame entered the stack (software, CLOCK_REALTIME,
//! the same clock as the signature's TX stamp), or the NIC's raw hardware stamp when asked
//! for and available.
//!
//! Holds the [`RxSource`] trait every RX source implements (AF_XDP's in [`crate::xdp`]) and
//! the TPACKET_V3 ring. May import `socket` and `kernel`.

pub mod ports;

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU32, Ordering};

use crate::error::IoError;
use crate::kernel::nic::{enable_hw_timestamps, iface_info, ts_info, IfaceInfo};
use crate::kernel::socket::{sockopt, wait_readable};

/// Which RX timestamps to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxTimestamps {
    /// The kernel's software stamp at receive (SOF_TIMESTAMPING_RX_SOFTWARE).
    Software,
    /// The NIC's raw hardware stamp (SOF_TIMESTAMPING_RAW_HARDWARE); an error where the NIC
    /// has none.
    Hardware,
}

const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_TS_RAW_HARDWARE: u32 = 1 << 31;

const BLOCK_SIZE: u32 = 1 << 20;
/// Blocks of the ring by default (64 MiB): its allocation takes the kernel 15-25 ms on this
/// VM (and over 100 ms on a cold start), so a meter that knows its rate asks fewer.
pub const BLOCK_NR: u32 = 64;
/// The fewest blocks a ring is given: 16 block timeouts (128 ms) of a meter held back.
pub const MIN_BLOCKS: u32 = 16;
const FRAME_SIZE: u32 = 2048;
/// A block is handed over after this long even when not full (ms).
const BLOCK_TIMEOUT_MS: u32 = 8;

/// Counters the kernel keeps for the ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Frames the kernel passed to the ring's filter.
    pub packets: u64,
    /// Frames dropped because no block was free: the reader fell behind.
    pub drops: u64,
    pub freeze_count: u64,
    /// Frames without a kernel stamp, stamped in user space when read (AF_XDP only).
    pub user_stamped: u64,
}

/// The frame with the VLAN tag the kernel took out of it (a veth or a NIC's VLAN offload)
/// put back after the MAC addresses, in `buf`: the meter reads VLAN ids (the plan of
/// unsigned streams, metric tags) from the frame, as a capture shows it.
fn with_tag<'a>(buf: &'a mut Vec<u8>, data: &[u8], h: &libc::tpacket3_hdr) -> &'a [u8] {
    const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
    let tpid = match h.tp_status & TP_STATUS_VLAN_TPID_VALID {
        0 => 0x8100,
        _ => h.hv1.tp_vlan_tpid,
    };
    let at = data.len().min(12);
    buf.clear();
    buf.extend_from_slice(&data[..at]);
    buf.extend_from_slice(&tpid.to_be_bytes());
    buf.extend_from_slice(&(h.hv1.tp_vlan_tci as u16).to_be_bytes());
    buf.extend_from_slice(&data[at..]);
    buf
}

/// One received frame.
pub struct RxFrame<'a> {
    /// RX time, ns (CLOCK_REALTIME for software stamps; the PHC's time for hardware ones).
    pub ts_ns: u64,
    pub data: &'a [u8],
    /// Length on the wire (without FCS), VLAN tag included when the NIC stripped it.
    pub wire_len: u32,
    /// The stamp came from the NIC.
    pub hw: bool,
    /// Which of the meter's ports it came in on (0 but for [`crate::rx::ports::RxPorts`]).
    pub port: u8,
}

/// A receive path the meter drains: the AF_PACKET ring or an AF_XDP socket.
pub trait RxSource: Send {
    /// Waits up to `timeout_ms` for frames, then hands every ready frame to `f`. Returns
    /// the frames handed over. `Err` means the source can no longer receive.
    fn poll(&mut self, timeout_ms: i32, f: &mut dyn FnMut(RxFrame<'_>)) -> Result<u64, IoError>;
    /// The kernel's counters since the source opened.
    fn stats(&mut self) -> RxStats;
    /// What the result file says of the RX timestamps.
    fn timestamp_source(&self) -> String;
    /// What the result file says of the capture path.
    fn describe(&self) -> String;
    /// Who stamped the frames, for the verdict: "kernel" (SO_TIMESTAMPING), "nic",
    /// "xdp-metadata" or "xdp-prefix" (the kernel at the XDP hook), or "socket" (the meter,
    /// as it read the frame).
    fn stamp(&self) -> &'static str {
        "kernel"
    }
    /// The interface.
    fn info(&self) -> &IfaceInfo;
    /// What the result should warn about this capture path.
    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
    /// At the end: hands over what the source still holds back (see
    /// [`crate::rx::ports::RxPorts`]), after a last `poll(0)`.
    fn finish(&mut self, _f: &mut dyn FnMut(RxFrame<'_>)) -> Result<u64, IoError> {
        Ok(0)
    }
    /// The descriptor that turns readable when frames are ready (for a wait on several).
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
}

pub struct AfPacketRx {
    fd: OwnedFd,
    ring: *mut u8,
    ring_len: usize,
    block: u32,
    blocks: u32,
    pub info: IfaceInfo,
    pub timestamps: RxTimestamps,
    /// The interface is in promiscuous mode for this socket.
    pub promisc: bool,
    stats: RxStats,
}

// SAFETY: the ring mapping is owned by the struct and only touched through &mut self.
unsafe impl Send for AfPacketRx {}

impl AfPacketRx {
    /// Opens the ring on `iface` (in the caller's network namespace).
    pub fn open(iface: &str, ts: RxTimestamps) -> Result<AfPacketRx, IoError> {
        Self::open_with(iface, ts, BLOCK_NR)
    }

    /// As [`AfPacketRx::open`], with a ring of `blocks` 1 MiB blocks (at least
    /// [`MIN_BLOCKS`], at most [`BLOCK_NR`]).
    pub fn open_with(iface: &str, ts: RxTimestamps, blocks: u32) -> Result<AfPacketRx, IoError> {
        Self::open_in_state(iface, ts, blocks, false)
    }

    /// As [`AfPacketRx::open_with`], on an interface that is down too (`even_down`): one of
    /// several a meter reads ([`ports`]), which counts the port's error and reads it again
    /// once it is up (the kernel hooks a bound socket in when its interface comes up).
    pub fn open_in_state(iface: &str, ts: RxTimestamps, blocks: u32, even_down: bool) -> Result<AfPacketRx, IoError> {
        let blocks = blocks.clamp(MIN_BLOCKS, BLOCK_NR);
        let info = iface_info(iface)?;
        if !info.up && !even_down {
            return Err(IoError::InterfaceDown(iface.to_string()));
        }
        if ts == RxTimestamps::Hardware {
            let caps = ts_info(iface)?;
            if !caps.hw_rx() {
                return Err(IoError::NoHwTimestamps {
                    iface: iface.to_string(),
                    caps: format!("the driver reports: {}", caps.describe()),
                });
            }
            enable_hw_timestamps(iface, false)?;
        }
        // Protocol 0 until bound: no frames from other interfaces slip in before the bind.
        let fd = crate::kernel::socket::packet_socket()?;
        let os = |what: &str| {
            let what = what.to_string();
            move |e: std::io::Error| IoError::Os {
                context: what,
                cause: e,
            }
        };
        sockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V3 as libc::c_int),
        )
        .map_err(os("PACKET_VERSION TPACKET_V3"))?;
        // Frames this host sends on the interface are not ours to meter.
        let _ = sockopt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1 as &libc::c_int);
        let mut flags = libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE;
        if ts == RxTimestamps::Hardware {
            flags |= libc::SOF_TIMESTAMPING_RX_HARDWARE | libc::SOF_TIMESTAMPING_RAW_HARDWARE;
            sockopt(
                &fd,
                libc::SOL_PACKET,
                libc::PACKET_TIMESTAMP,
                &(libc::SOF_TIMESTAMPING_RAW_HARDWARE as libc::c_int),
            )
            .map_err(os("PACKET_TIMESTAMP RAW_HARDWARE"))?;
        }
        sockopt(&fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, &(flags as libc::c_int))
            .map_err(os("SO_TIMESTAMPING"))?;
        let req = libc::tpacket_req3 {
            tp_block_size: BLOCK_SIZE,
            tp_block_nr: blocks,
            tp_frame_size: FRAME_SIZE,
            tp_frame_nr: BLOCK_SIZE / FRAME_SIZE * blocks,
            tp_retire_blk_tov: BLOCK_TIMEOUT_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req).map_err(os("PACKET_RX_RING (TPACKET_V3)"))?;
        let ring_len = (BLOCK_SIZE * blocks) as usize;
        // SAFETY: mapping the ring the kernel just allocated for this socket.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED,
                fd.as_raw_fd(),
                0,
            )
        };
        let ring = if ring == libc::MAP_FAILED {
            // MAP_LOCKED may exceed RLIMIT_MEMLOCK; the ring works unlocked too.
            // SAFETY: as above.
            let r = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    ring_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if r == libc::MAP_FAILED {
                return Err(IoError::last_os("mmap of the RX ring"));
            }
            r
        } else {
            ring
        };
        let rc = crate::kernel::socket::bind_packet(&fd, info.index, libc::ETH_P_ALL as u16);
        if rc < 0 {
            let e = IoError::last_os(format!("bind the RX ring to {iface}"));
            // SAFETY: unmapping what was mapped above.
            unsafe { libc::munmap(ring, ring_len) };
            return Err(e);
        }
        // Promiscuous for this socket's life: a meter sees frames addressed to anyone (the
        // kernel undoes it when the socket closes).
        let mr = libc::packet_mreq {
            mr_ifindex: info.index as i32,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        let promisc = sockopt(&fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr).is_ok();
        Ok(AfPacketRx {
            fd,
            promisc,
            ring: ring as *mut u8,
            ring_len,
            block: 0,
            blocks,
            info,
            timestamps: ts,
            stats: RxStats::default(),
        })
    }

    fn source_text(&self) -> String {
        match self.timestamps {
            RxTimestamps::Software => {
                "kernel software RX stamp (SO_TIMESTAMPING RX_SOFTWARE via TPACKET_V3, CLOCK_REALTIME)".into()
            }
            RxTimestamps::Hardware => format!(
                "NIC hardware RX stamp (SO_TIMESTAMPING RAW_HARDWARE via TPACKET_V3, PHC of {})",
                self.info.name
            ),
        }
    }

    fn block_status(&self, b: u32) -> &AtomicU32 {
        // SAFETY: block_status is the aligned u32 at offset 8 of each block descriptor, inside
        // the mapping; the kernel writes it concurrently, hence atomic access.
        unsafe { &*(self.ring.add(b as usize * BLOCK_SIZE as usize + 8) as *const AtomicU32) }
    }

    /// Waits up to `timeout_ms` for a block, then hands every frame of every ready block to
    /// `f`. Returns the frames handed over.
    fn poll_ring(&mut self, timeout_ms: i32, f: &mut dyn FnMut(RxFrame<'_>)) -> Result<u64, IoError> {
        if self.block_status(self.block).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            let name = self.info.name.clone();
            wait_readable(&self.fd, timeout_ms, &name, || {
                self.block_status(self.block).load(Ordering::Acquire) & TP_STATUS_USER != 0
            })?;
        }
        let mut n = 0;
        let mut tagged = Vec::new();
        while self.block_status(self.block).load(Ordering::Acquire) & TP_STATUS_USER != 0 {
            let base = self.block as usize * BLOCK_SIZE as usize;
            // SAFETY: the block belongs to user space until its status is set back to
            // TP_STATUS_KERNEL; all offsets come from the kernel and stay inside the block.
            unsafe {
                let bd = self.ring.add(base);
                let num = (bd.add(12) as *const u32).read();
                let mut off = (bd.add(16) as *const u32).read() as usize;
                for _ in 0..num {
                    let h = &*(bd.add(off) as *const libc::tpacket3_hdr);
                    let mut data = std::slice::from_raw_parts(bd.add(off + h.tp_mac as usize), h.tp_snaplen as usize);
                    let vlan = if h.tp_status & TP_STATUS_VLAN_VALID != 0 { 4 } else { 0 };
                    if vlan > 0 {
                        data = with_tag(&mut tagged, data, h);
                    }
                    f(RxFrame {
                        ts_ns: u64::from(h.tp_sec) * 1_000_000_000 + u64::from(h.tp_nsec),
                        data,
                        wire_len: h.tp_len + vlan,
                        hw: h.tp_status & TP_STATUS_TS_RAW_HARDWARE != 0,
                        port: 0,
                    });
                    off += h.tp_next_offset as usize;
                }
                n += u64::from(num);
            }
            fence(Ordering::Release);
            self.block_status(self.block).store(TP_STATUS_KERNEL, Ordering::Release);
            self.block = (self.block + 1) % self.blocks;
        }
        Ok(n)
    }

    /// The kernel's counters since the ring opened (PACKET_STATISTICS, accumulated: each read
    /// resets the kernel's copy).
    fn ring_stats(&mut self) -> RxStats {
        let mut s = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: s and len are valid for the call.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut s as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc == 0 {
            self.stats.packets += u64::from(s.tp_packets);
            self.stats.drops += u64::from(s.tp_drops);
            self.stats.freeze_count += u64::from(s.tp_freeze_q_cnt);
        }
        self.stats
    }
}

impl RxSource for AfPacketRx {
    fn poll(&mut self, timeout_ms: i32, f: &mut dyn FnMut(RxFrame<'_>)) -> Result<u64, IoError> {
        self.poll_ring(timeout_ms, f)
    }
    fn stats(&mut self) -> RxStats {
        self.ring_stats()
    }
    fn timestamp_source(&self) -> String {
        self.source_text()
    }
    fn stamp(&self) -> &'static str {
        match self.timestamps {
            RxTimestamps::Software => "kernel",
            RxTimestamps::Hardware => "nic",
        }
    }
    fn describe(&self) -> String {
        format!(
            "AF_PACKET TPACKET_V3 ring on {} ({} x {} KiB blocks, {} ms block timeout{})",
            self.info.name,
            self.blocks,
            BLOCK_SIZE >> 10,
            BLOCK_TIMEOUT_MS,
            if self.promisc { ", promiscuous" } else { "" }
        )
    }
    fn info(&self) -> &IfaceInfo {
        &self.info
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.fd.as_raw_fd())
    }
}

impl Drop for AfPacketRx {
    fn drop(&mut self) {
        // SAFETY: unmapping the ring mapped in open().
        unsafe { libc::munmap(self.ring as *mut libc::c_void, self.ring_len) };
    }
}
