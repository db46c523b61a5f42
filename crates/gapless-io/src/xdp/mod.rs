//! AF_XDP: a UMEM of 4 KiB frames, its fill and completion rings, a TX or an RX ring, and
//! need_wakeup. TX sends for the engine; RX feeds the meter, with the XDP program of
//! [`crate::xdp::program`] redirecting the queue's frames to the socket. Written over libc rather
//! than taken from a crate: xdpilone is EUPL-1.2 and xsk-rs needs clang/libelf at build time;
//! see docs/DESIGN-NOTES.md.
//!
//! Frames are built in place in UMEM frames (no copy in user space). `send` writes one TX
//! descriptor per frame, publishes them with one release store, and kicks the kernel with
//! `sendto` until it has taken every descriptor, so a departure leaves when `send` returns,
//! as with AF_PACKET. In copy mode (any driver; the only mode on veth) the kernel copies each
//! frame into an skb during the kick, at most 32 per kick on veth. In zero-copy mode the NIC
//! reads the UMEM itself. Completed frames return through the completion ring to a free list.
//!
//! Holds the socket (this file) and its XDP [`program`]. May import `socket`, `kernel`, `tx`
//! (the TxBackend trait) and `rx` (the RxSource trait); nothing in the crate imports it.

pub mod program;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use gapless_core::result::departure_stamps::TxStampStats;

use crate::error::IoError;
use crate::kernel::nic::{iface_info, IfaceInfo};
use crate::kernel::socket::{clock_ns, tai_offset_ns, wait_readable};
use crate::rx::{RxFrame, RxSource, RxStats};
use crate::tx::TxBackend;
use program::{
    attach_name, refusals_text, XdpAttach, XdpProgram, XdpStamp, META_LEN, META_MAGIC, PREFIX_LEN, PREFIX_MAGIC,
};

/// An OS error with what was being done.
fn os_err(what: &'static str) -> impl Fn(std::io::Error) -> IoError {
    move |e| IoError::Os {
        context: what.into(),
        cause: e,
    }
}

/// Which AF_XDP mode to bind in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// The best the driver offers: zero-copy where it has it, else copy.
    Auto,
    Copy,
    ZeroCopy,
}

/// Bytes per UMEM frame (one page: the frame size every driver accepts).
pub const UMEM_FRAME: usize = 4096;
/// TX: UMEM frames and ring entries.
const UMEM_FRAMES: u32 = 4096;
const RING: u32 = 2048;
/// RX: the RX and fill rings and the UMEM hold this many frames, all of them in the fill ring
/// at the start: 36 ms of frames at 0.45 Mpps (64 MiB), room for the meter thread to be
/// descheduled as long as the AF_PACKET ring allows.
const RX_RING: u32 = 16384;

/// One mmapped ring: producer, consumer, flags words and the descriptor array.
struct Ring {
    map: *mut libc::c_void,
    map_len: usize,
    prod: *const AtomicU32,
    cons: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut u8,
    mask: u32,
}

impl Ring {
    fn map(
        fd: &OwnedFd,
        off: &libc::xdp_ring_offset,
        elem: usize,
        pgoff: u64,
        what: &str,
        n: u32,
    ) -> Result<Ring, IoError> {
        let map_len = off.desc as usize + n as usize * elem;
        // SAFETY: mapping a ring the kernel allocated for this socket at the given page offset.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(IoError::last_os(format!("mmap of the AF_XDP {what} ring")));
        }
        let b = map as *mut u8;
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS and lie inside the mapping.
        unsafe {
            Ok(Ring {
                map,
                map_len,
                prod: b.add(off.producer as usize) as *const AtomicU32,
                cons: b.add(off.consumer as usize) as *const AtomicU32,
                flags: b.add(off.flags as usize) as *const AtomicU32,
                desc: b.add(off.desc as usize),
                mask: n - 1,
            })
        }
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping; the kernel updates it concurrently.
        unsafe { &*self.prod }
    }
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.cons }
    }
    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.flags }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping what map() mapped.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

fn setsockopt<T>(fd: &OwnedFd, name: libc::c_int, v: &T) -> std::io::Result<()> {
    crate::kernel::socket::sockopt(fd, libc::SOL_XDP, name, v)
}

/// The error for a failed socket(AF_XDP): no permission, or a kernel without AF_XDP
/// (EAFNOSUPPORT: built without CONFIG_XDP_SOCKETS, or older than 4.18).
fn socket_failed(e: std::io::Error) -> IoError {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => IoError::NoPermission,
        _ => IoError::XdpUnsupported(e.to_string()),
    }
}

/// What a socket is for: which of the TX and RX rings it gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Tx,
    Rx,
}

impl Dir {
    /// Entries of every ring of the socket.
    fn ring(self) -> u32 {
        match self {
            Dir::Tx => RING,
            Dir::Rx => RX_RING,
        }
    }
    fn umem_frames(self) -> u32 {
        match self {
            Dir::Tx => UMEM_FRAMES,
            Dir::Rx => RX_RING,
        }
    }
}

/// A bound AF_XDP socket with its UMEM, fill and completion rings, and its TX or RX ring
/// (returned beside it, so that the owner drops the ring before the socket).
struct Xsk {
    // Field order is drop order: rings are unmapped before the socket closes.
    cq: Ring,
    fq: Ring,
    fd: OwnedFd,
    umem: *mut u8,
    umem_len: usize,
    info: IfaceInfo,
    queue: u32,
    zerocopy: bool,
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // SAFETY: the UMEM was mapped in open(); the rings (fields) are unmapped after this,
        // but the kernel holds its own reference to the pages until the socket closes.
        unsafe { libc::munmap(self.umem as *mut libc::c_void, self.umem_len) };
    }
}

impl Xsk {
    /// Makes the socket, registers a UMEM, maps the rings and binds to `queue` of the
    /// interface (the caller has looked it up and checked that it is up).
    /// Registers the UMEM with the socket and sizes its fill, completion and data rings.
    fn register(fd: &OwnedFd, umem: *mut u8, umem_len: usize, dir: Dir, tx_meta_len: u32) -> Result<(), IoError> {
        let os = os_err;
        let reg = libc::xdp_umem_reg {
            addr: umem as u64,
            len: umem_len as u64,
            chunk_size: UMEM_FRAME as u32,
            headroom: 0,
            flags: if tx_meta_len > 0 {
                libc::XDP_UMEM_TX_METADATA_LEN
            } else {
                0
            },
            tx_metadata_len: tx_meta_len,
        };
        setsockopt(fd, libc::XDP_UMEM_REG, &reg).map_err(|e| {
            if tx_meta_len > 0 && e.raw_os_error() == Some(libc::EINVAL) {
                IoError::Xdp {
                    what: "XDP_UMEM_REG with TX metadata".into(),
                    detail: format!("the kernel refused a {tx_meta_len} B TX metadata area ({e})"),
                    fix: "use Linux 6.11 or newer for AF_XDP TX timestamps and launch time, or send with AF_PACKET"
                        .into(),
                }
            } else if e.raw_os_error() == Some(libc::ENOMEM) || e.raw_os_error() == Some(libc::EPERM) {
                IoError::Os {
                    context: format!(
                        "XDP_UMEM_REG of {} MiB (the locked-memory limit; raise it with `ulimit -l unlimited`)",
                        umem_len >> 20
                    ),
                    cause: e,
                }
            } else {
                os("XDP_UMEM_REG")(e)
            }
        })?;
        let ring_n = dir.ring();
        let n = ring_n as libc::c_int;
        setsockopt(fd, libc::XDP_UMEM_FILL_RING, &n).map_err(os("XDP_UMEM_FILL_RING"))?;
        setsockopt(fd, libc::XDP_UMEM_COMPLETION_RING, &n).map_err(os("XDP_UMEM_COMPLETION_RING"))?;
        let (ring_opt, ring_name) = match dir {
            Dir::Tx => (libc::XDP_TX_RING, "XDP_TX_RING"),
            Dir::Rx => (libc::XDP_RX_RING, "XDP_RX_RING"),
        };
        setsockopt(fd, ring_opt, &n).map_err(os(ring_name))?;
        Ok(())
    }

    /// Maps the fill, completion and data (TX or RX) rings.
    fn map_rings(fd: &OwnedFd, dir: Dir) -> Result<(Ring, Ring, Ring), IoError> {
        let ring_n = dir.ring();
        // SAFETY: xdp_mmap_offsets is plain data.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: off and len are valid for the call.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                &mut off as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc < 0 {
            return Err(IoError::last_os("XDP_MMAP_OFFSETS"));
        }
        let fq = Ring::map(fd, &off.fr, 8, libc::XDP_UMEM_PGOFF_FILL_RING, "fill", ring_n)?;
        let cq = Ring::map(
            fd,
            &off.cr,
            8,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            "completion",
            ring_n,
        )?;
        let desc = std::mem::size_of::<libc::xdp_desc>();
        let ring = match dir {
            Dir::Tx => Ring::map(fd, &off.tx, desc, libc::XDP_PGOFF_TX_RING as u64, "TX", ring_n),
            Dir::Rx => Ring::map(fd, &off.rx, desc, libc::XDP_PGOFF_RX_RING as u64, "RX", ring_n),
        }?;
        Ok((fq, cq, ring))
    }

    /// Binds the socket to `queue` of the interface, in need-wakeup mode. A socket closed just
    /// before (the previous run on this queue) is released by the kernel a little later.
    fn bind(fd: &OwnedFd, info: &IfaceInfo, queue: u32, mode: XdpMode) -> Result<(), IoError> {
        let iface = info.name.as_str();
        let mode_flag = match mode {
            XdpMode::Auto => 0,
            XdpMode::Copy => libc::XDP_COPY,
            XdpMode::ZeroCopy => libc::XDP_ZEROCOPY,
        };
        let sxdp = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: libc::XDP_USE_NEED_WAKEUP | mode_flag,
            sxdp_ifindex: info.index,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // A socket closed just before (the previous run on this queue) is released by the
        // kernel a little later: retry EBUSY for up to 1 s before calling the queue busy.
        let t0 = std::time::Instant::now();
        let rc = loop {
            // SAFETY: sxdp is a valid sockaddr_xdp of the size passed.
            let rc = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    &sxdp as *const _ as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_xdp>() as u32,
                )
            };
            let busy = rc < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBUSY);
            if !busy || t0.elapsed() > std::time::Duration::from_secs(1) {
                break rc;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) if mode == XdpMode::ZeroCopy => IoError::XdpZeroCopyUnsupported {
                    iface: iface.to_string(),
                },
                Some(libc::EBUSY) => IoError::XdpQueueBusy {
                    iface: iface.to_string(),
                    queue,
                },
                Some(libc::EINVAL) => IoError::Os {
                    context: format!(
                        "bind AF_XDP to {iface} queue {queue} (does the interface have that queue? `ethtool -l {iface}`)"
                    ),
                    cause: e,
                },
                _ => IoError::Os {
                    context: format!("bind AF_XDP to {iface} queue {queue}"),
                    cause: e,
                },
            });
        }
        Ok(())
    }

    /// Whether the kernel bound the socket in zero-copy mode.
    fn is_zerocopy(fd: &OwnedFd) -> bool {
        let mut opts = libc::xdp_options { flags: 0 };
        let mut len = std::mem::size_of::<libc::xdp_options>() as libc::socklen_t;
        // SAFETY: opts and len are valid for the call.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_OPTIONS,
                &mut opts as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        rc == 0 && opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0
    }

    fn open(info: IfaceInfo, queue: u32, mode: XdpMode, dir: Dir, tx_meta_len: u32) -> Result<(Xsk, Ring), IoError> {
        // SAFETY: plain socket(2).
        let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(socket_failed(std::io::Error::last_os_error()));
        }
        // SAFETY: fd is fresh and valid.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let umem_len = dir.umem_frames() as usize * UMEM_FRAME;
        // SAFETY: an anonymous private mapping for the UMEM.
        let umem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if umem == libc::MAP_FAILED {
            return Err(IoError::last_os("mmap of the AF_XDP UMEM"));
        }
        let umem = umem as *mut u8;
        let set_up = || -> Result<(Ring, Ring, Ring), IoError> {
            Xsk::register(&fd, umem, umem_len, dir, tx_meta_len)?;
            let rings = Xsk::map_rings(&fd, dir)?;
            Xsk::bind(&fd, &info, queue, mode)?;
            Ok(rings)
        };
        let (fq, cq, ring) = set_up().inspect_err(|_| {
            // SAFETY: unmapping the UMEM mapped above, on an error path before it is owned.
            unsafe { libc::munmap(umem as *mut libc::c_void, umem_len) };
        })?;
        let zerocopy = Xsk::is_zerocopy(&fd);
        Ok((
            Xsk {
                cq,
                fq,
                fd,
                umem,
                umem_len,
                info,
                queue,
                zerocopy,
            },
            ring,
        ))
    }

    /// One TX wakeup: the kernel takes TX descriptors (and in copy mode sends them). An
    /// RX-only socket needs none: `poll` wakes the driver for the fill ring.
    fn wake(&self) -> std::io::Result<()> {
        // SAFETY: sendto with no data on our socket.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn mode_name(&self) -> &'static str {
        if self.zerocopy {
            "zero-copy"
        } else {
            "copy"
        }
    }

    /// The UMEM bytes at offset `addr` (aligned mode: offsets within a chunk allowed).
    ///
    /// # Safety
    /// `addr + len` must lie inside the UMEM, in a frame that is not in a kernel ring.
    unsafe fn frame(&self, addr: u64, len: usize) -> &[u8] {
        // SAFETY: per the contract.
        unsafe { std::slice::from_raw_parts(self.umem.add(addr as usize), len) }
    }

    /// As [`Xsk::frame`], to write.
    ///
    /// # Safety
    /// As [`Xsk::frame`].
    unsafe fn frame_mut(&mut self, addr: u64, len: usize) -> &mut [u8] {
        // SAFETY: per the contract; &mut self makes the slice the only one.
        unsafe { std::slice::from_raw_parts_mut(self.umem.add(addr as usize), len) }
    }
}

pub struct AfXdpTx {
    // Field order is drop order: the TX ring before the socket.
    tx: Ring,
    xsk: Xsk,
    /// Free UMEM frame addresses.
    free: Vec<u64>,
    /// Frames taken by `buf` for the batch being built.
    batch: Vec<u64>,
    max_batch: usize,
    tx_prod: u32,
    kicks: u64,
    errors: u64,
    last_errno: i32,
    /// TX metadata asked for, and what it needs per frame.
    meta: Meta,
}

// SAFETY: the mappings are owned by the struct and touched only through &mut self.
unsafe impl Send for AfXdpTx {}

/// What AF_XDP's TX metadata (Linux 6.8+; copy mode 6.11+; launch time 6.15+) carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpTxMeta {
    /// A completion timestamp per frame (the NIC's in zero-copy, the kernel's software TAI
    /// clock when the frame is freed in copy mode).
    pub timestamps: bool,
    /// Each frame's launch time (a NIC with launch-time offload, e.g. igc, in zero-copy).
    pub launch_time: bool,
}

/// `struct xsk_tx_metadata`: flags, then the request (csum_start, csum_offset, launch_time
/// at +16) or, once completed, the completion (tx_timestamp at +8).
const TX_META_LEN: u32 = 24;
/// Frame data starts here in its UMEM chunk when metadata is on (the metadata just before).
const TX_DATA_OFF: u64 = 32;
const XDP_TXMD_FLAGS_LAUNCH_TIME: u64 = 1 << 2;

/// One frame's `struct xsk_tx_metadata` as the kernel reads it: flags, then the request
/// (csum_start and csum_offset left 0, launch_time at +16).
fn tx_meta_bytes(flags: u64, launch_time_ns: u64) -> [u8; TX_META_LEN as usize] {
    let mut md = [0u8; TX_META_LEN as usize];
    md[..8].copy_from_slice(&flags.to_ne_bytes());
    md[16..24].copy_from_slice(&launch_time_ns.to_ne_bytes());
    md
}

/// The per-frame state of TX metadata.
#[derive(Default)]
struct Meta {
    ask: XdpTxMeta,
    data_off: u64,
    stamps: Option<TxStampStats>,
    /// The stamp number of the frame in each UMEM chunk.
    keys: Vec<u32>,
    next_key: u32,
    due: Vec<u64>,
    read_ns: u64,
    tai_off_ns: i64,
}

impl AfXdpTx {
    /// Binds an AF_XDP socket to queue `queue` of `iface` for sending.
    pub fn open(
        iface: &str,
        queue: u32,
        mode: XdpMode,
        max_frame: usize,
        max_batch: usize,
        ask: XdpTxMeta,
    ) -> Result<AfXdpTx, IoError> {
        let on = ask.timestamps || ask.launch_time;
        if max_frame + if on { TX_DATA_OFF as usize } else { 0 } > UMEM_FRAME {
            return Err(IoError::XdpFrameTooLarge {
                stream: String::new(),
                frame: max_frame,
                max: UMEM_FRAME,
            });
        }
        let info = iface_info(iface)?;
        if !info.up || !info.running {
            return Err(IoError::InterfaceDown(iface.to_string()));
        }
        let (xsk, tx) = Xsk::open(info, queue, mode, Dir::Tx, if on { TX_META_LEN } else { 0 })?;
        let mut s = AfXdpTx {
            tx,
            xsk,
            free: (0..UMEM_FRAMES)
                .rev()
                .map(|i| u64::from(i) * UMEM_FRAME as u64)
                .collect(),
            batch: Vec::with_capacity(max_batch),
            max_batch: max_batch.clamp(1, RING as usize / 2),
            tx_prod: 0,
            kicks: 0,
            errors: 0,
            last_errno: 0,
            meta: Meta {
                ask,
                data_off: if on { TX_DATA_OFF } else { 0 },
                stamps: ask.timestamps.then(TxStampStats::default),
                keys: vec![0; UMEM_FRAMES as usize],
                tai_off_ns: tai_offset_ns(),
                ..Meta::default()
            },
        };
        s.tx_prod = s.tx.prod().load(Ordering::Relaxed);
        Ok(s)
    }

    /// Writes frame `j`'s TX metadata (chunk at `chunk`) and returns the descriptor options.
    fn write_meta(&mut self, j: usize, chunk: u64) -> u32 {
        let m = &mut self.meta;
        if m.data_off == 0 {
            return 0;
        }
        let due = m.due.get(j).copied().unwrap_or(m.read_ns);
        let mut flags = 0u64;
        if m.ask.timestamps {
            flags |= u64::from(libc::XDP_TXMD_FLAGS_TIMESTAMP);
            if let Some(st) = &mut m.stamps {
                st.sent(due, m.read_ns);
            }
            m.keys[(chunk / UMEM_FRAME as u64) as usize] = m.next_key;
            m.next_key = m.next_key.wrapping_add(1);
        }
        let launch = if m.ask.launch_time {
            flags |= XDP_TXMD_FLAGS_LAUNCH_TIME;
            due.saturating_add_signed(m.tai_off_ns)
        } else {
            0
        };
        let md = tx_meta_bytes(flags, launch);
        let off = chunk + m.data_off - u64::from(TX_META_LEN);
        // SAFETY: the metadata area lies inside the chunk, which is ours until it is sent.
        unsafe { self.xsk.frame_mut(off, TX_META_LEN as usize) }.copy_from_slice(&md);
        libc::XDP_TX_METADATA
    }

    /// A completed frame's timestamp (TAI), matched to its number.
    fn completed(&mut self, chunk: u64) {
        let off = chunk + self.meta.data_off - u64::from(TX_META_LEN) + 8;
        // SAFETY: the chunk is back from the completion ring: ours, inside the UMEM.
        let b = unsafe { self.xsk.frame_mut(off, 8) };
        let ts = u64::from_ne_bytes(b[..8].try_into().expect("8 bytes"));
        let key = self.meta.keys[(chunk / UMEM_FRAME as u64) as usize];
        if let Some(st) = &mut self.meta.stamps {
            if ts != 0 {
                st.stamp(key, ts.saturating_add_signed(-self.meta.tai_off_ns));
            }
        }
    }

    /// Frames back from the completion ring onto the free list (their TX stamps read first).
    fn reclaim(&mut self) {
        let prod = self.xsk.cq.prod().load(Ordering::Acquire);
        let mut cons = self.xsk.cq.cons().load(Ordering::Relaxed);
        let stamps = self.meta.stamps.is_some();
        while cons != prod {
            let cq = &self.xsk.cq;
            // SAFETY: entry `cons & mask` is inside the ring and owned by us until cons moves.
            let addr = unsafe { (cq.desc as *const u64).add((cons & cq.mask) as usize).read() };
            let chunk = addr & !(UMEM_FRAME as u64 - 1);
            if stamps {
                self.completed(chunk);
            }
            self.free.push(chunk);
            cons = cons.wrapping_add(1);
        }
        self.xsk.cq.cons().store(cons, Ordering::Release);
    }

    /// One wakeup: the kernel takes TX descriptors (and in copy mode sends them).
    fn kick(&mut self) -> Result<(), IoError> {
        self.kicks += 1;
        if let Err(e) = self.xsk.wake() {
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {}
                Some(libc::ENETDOWN) | Some(libc::ENXIO) | Some(libc::ENODEV) => {
                    let name = &self.xsk.info.name;
                    return Err(crate::kernel::nic::link_fault(name).unwrap_or(IoError::LinkLost {
                        iface: name.clone(),
                        what: "refused the AF_XDP wakeup (ENETDOWN)".into(),
                    }));
                }
                Some(errno) => self.last_errno = errno,
                None => {}
            }
        }
        Ok(())
    }
    /// TX descriptors the kernel has not taken yet.
    fn in_tx_ring(&self) -> u32 {
        self.tx_prod.wrapping_sub(self.tx.cons().load(Ordering::Acquire))
    }
}

impl TxBackend for AfXdpTx {
    fn name(&self) -> &'static str {
        "afxdp"
    }

    fn describe(&self) -> String {
        format!(
            "AF_XDP on {} (ifindex {}) queue {}, {} mode, need_wakeup, UMEM {} x {} B, rings {}",
            self.xsk.info.name,
            self.xsk.info.index,
            self.xsk.queue,
            self.xsk.mode_name(),
            UMEM_FRAMES,
            UMEM_FRAME,
            RING
        )
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }

    fn buf(&mut self, i: usize) -> &mut [u8] {
        while self.batch.len() <= i {
            if self.free.is_empty() {
                self.reclaim();
            }
            let mut spins = 0u32;
            while self.free.is_empty() {
                // Every frame is in flight: wake the kernel and wait for completions.
                let _ = self.kick();
                self.reclaim();
                spins += 1;
                if spins.is_multiple_of(1024) {
                    std::thread::yield_now();
                }
            }
            let a = self.free.pop().expect("not empty");
            self.batch.push(a);
        }
        let a = self.batch[i] + self.meta.data_off;
        // SAFETY: a is inside a UMEM chunk owned by us (not in any ring), data_off from its start.
        unsafe { self.xsk.frame_mut(a, UMEM_FRAME - self.meta.data_off as usize) }
    }

    fn send(&mut self, lens: &[usize], _at_ns: &[u64]) -> Result<usize, IoError> {
        let n = lens.len();
        debug_assert!(n <= self.batch.len());
        // Room in the TX ring (at most RING / 2 per batch, so this ends).
        while RING - self.in_tx_ring() < n as u32 {
            self.kick()?;
            self.reclaim();
        }
        for (j, &len) in lens.iter().enumerate() {
            let idx = self.tx_prod.wrapping_add(j as u32) & self.tx.mask;
            let chunk = self.batch[j];
            let options = self.write_meta(j, chunk);
            let d = libc::xdp_desc {
                addr: chunk + self.meta.data_off,
                len: len as u32,
                options,
            };
            // SAFETY: idx is inside the descriptor array; the slot is ours until prod moves.
            unsafe { (self.tx.desc as *mut libc::xdp_desc).add(idx as usize).write(d) };
        }
        self.tx_prod = self.tx_prod.wrapping_add(n as u32);
        self.tx.prod().store(self.tx_prod, Ordering::Release);
        // Frames the batch did not use go back.
        for a in self.batch.drain(n..) {
            self.free.push(a);
        }
        self.batch.clear();
        // Kick until the kernel has taken every descriptor: the frames leave now.
        let mut tries = 0u32;
        let mut stuck = 0usize;
        loop {
            let need = self.tx.flags().load(Ordering::Acquire) & libc::XDP_RING_NEED_WAKEUP != 0;
            if need || !self.xsk.zerocopy {
                self.kick()?;
            }
            if self.in_tx_ring() == 0 {
                break;
            }
            tries += 1;
            if tries.is_multiple_of(4096) {
                let name = &self.xsk.info.name;
                if let Some(e) = crate::kernel::nic::link_fault(name) {
                    return Err(e);
                }
            }
            if tries > 100_000 {
                stuck = self.in_tx_ring() as usize;
                self.errors += stuck as u64;
                break;
            }
        }
        self.reclaim();
        Ok(n.saturating_sub(stuck))
    }

    fn finish(&mut self) -> Result<(), IoError> {
        // Let the last frames complete so none is cut off when the socket closes.
        let t0 = std::time::Instant::now();
        while self.free.len() < UMEM_FRAMES as usize && t0.elapsed() < std::time::Duration::from_millis(500) {
            let _ = self.kick();
            self.reclaim();
        }
        Ok(())
    }

    fn errors(&self) -> u64 {
        self.errors
    }

    fn last_error(&self) -> Option<String> {
        (self.last_errno != 0).then(|| std::io::Error::from_raw_os_error(self.last_errno).to_string())
    }

    fn wants_due_times(&self) -> bool {
        self.meta.ask.timestamps || self.meta.ask.launch_time
    }

    fn due_times(&mut self, due_real_ns: &[u64], read_real_ns: u64) {
        self.meta.due.clear();
        self.meta.due.extend_from_slice(due_real_ns);
        self.meta.read_ns = read_real_ns;
    }

    fn take_tx_stamps(&mut self) -> Option<TxStampStats> {
        let _ = self.finish();
        self.meta.stamps.take()
    }

    fn tx_stamp_source(&self) -> Option<&'static str> {
        self.meta.ask.timestamps.then_some(if self.xsk.zerocopy {
            "AF_XDP TX metadata completion stamp (zero-copy: the NIC's, XDP_TXMD_FLAGS_TIMESTAMP)"
        } else {
            "AF_XDP TX metadata completion stamp (copy mode: the kernel's TAI clock as the frame is freed, XDP_TXMD_FLAGS_TIMESTAMP)"
        })
    }

    fn is_live(&self) -> bool {
        true
    }
}

/// AF_XDP RX for the meter: the XDP program redirects the queue's frames to this socket,
/// each stamped at the XDP hook with the kernel's TAI clock (converted to CLOCK_REALTIME,
/// the signature's clock). Frames return to the fill ring as soon as the meter has read them.
pub struct AfXdpRx {
    // Field order is drop order: detach the program, unmap the RX ring, close the socket.
    prog: XdpProgram,
    rx: Ring,
    xsk: Xsk,
    fq_prod: u32,
    /// CLOCK_TAI − CLOCK_REALTIME, whole seconds in ns.
    tai_offset_ns: i64,
    frames: u64,
    /// Frames without the program's stamp (stamped in user space when read).
    unstamped: u64,
    /// RX queues of the interface, where the driver reports them.
    rx_queues: Option<u32>,
    /// Drops by kind at the last `stats`: RX ring full, fill ring empty, other.
    drop_kinds: [u64; 3],
}

// SAFETY: the mappings and the program are owned by the struct and touched only through
// &mut self.
unsafe impl Send for AfXdpRx {}

impl AfXdpRx {
    /// Attaches the receive program that carries `stamp` (Auto: the first this kernel takes)
    /// to `iface` and binds a socket to its RX queue `queue`.
    pub fn open(
        iface: &str,
        queue: u32,
        mode: XdpMode,
        attach: XdpAttach,
        stamp: XdpStamp,
    ) -> Result<AfXdpRx, IoError> {
        let info = iface_info(iface)?;
        if !info.up {
            return Err(IoError::InterfaceDown(iface.to_string()));
        }
        let prog = XdpProgram::attach(iface, info.index, attach, stamp)?;
        // Generic XDP hands the socket skbs: only copy mode can take them.
        let mode = match (prog.mode, mode) {
            (XdpAttach::Generic, XdpMode::ZeroCopy) => {
                return Err(IoError::XdpZeroCopyUnsupported {
                    iface: iface.to_string(),
                })
            }
            (XdpAttach::Generic, _) => XdpMode::Copy,
            (_, m) => m,
        };
        let (xsk, rx) = Xsk::open(info, queue, mode, Dir::Rx, 0)?;
        let mut s = AfXdpRx {
            prog,
            rx,
            xsk,
            fq_prod: 0,
            tai_offset_ns: tai_offset_ns(),
            frames: 0,
            unstamped: 0,
            rx_queues: crate::kernel::nic::rx_queues(iface),
            drop_kinds: [0; 3],
        };
        // Every frame the fill ring holds is a buffer the kernel may receive into.
        s.fq_prod = s.xsk.fq.prod().load(Ordering::Relaxed);
        for i in 0..RX_RING {
            s.fill(u64::from(i) * UMEM_FRAME as u64);
        }
        s.xsk.fq.prod().store(s.fq_prod, Ordering::Release);
        let fd = s.xsk.fd.as_raw_fd();
        s.prog.register(queue, &fd)?;
        Ok(s)
    }

    /// Queues one frame for the kernel (published by the caller).
    fn fill(&mut self, addr: u64) {
        let fq = &self.xsk.fq;
        let idx = self.fq_prod & fq.mask;
        // SAFETY: idx is inside the fill ring; there is room, as at most RX_RING frames
        // circulate.
        unsafe {
            (fq.desc as *mut u64)
                .add(idx as usize)
                .write(addr & !(UMEM_FRAME as u64 - 1))
        };
        self.fq_prod = self.fq_prod.wrapping_add(1);
    }

    /// Where the program ran: "native" or "generic".
    pub fn attach_mode(&self) -> &'static str {
        attach_name(self.prog.mode)
    }

    /// The stamp its program carries: Metadata, Prefix or Socket.
    pub fn stamp(&self) -> XdpStamp {
        self.prog.stamp
    }
}

/// The kernel's TAI stamp on a received frame, and where the frame itself starts and its
/// length, for a program that carries `stamp`: `meta` is the 16 bytes before the frame in
/// its UMEM chunk (None at the chunk's start), `data` what the socket handed over (with the
/// prefix program's 16 bytes in front, which are cut off). No stamp when the frame has none
/// of ours.
pub fn kernel_stamp(stamp: XdpStamp, meta: Option<&[u8]>, data: &[u8]) -> (Option<u64>, usize) {
    let u32_at = |b: &[u8], i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |b: &[u8], i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    match stamp {
        XdpStamp::Auto | XdpStamp::Metadata => {
            let tai = meta
                .filter(|m| m.len() >= META_LEN && u32_at(m, 8) == META_MAGIC)
                .map(|m| u64_at(m, 0));
            (tai, 0)
        }
        XdpStamp::Prefix if data.len() >= PREFIX_LEN => {
            let tai = u64_at(data, 0);
            if u32_at(data, 8) == PREFIX_MAGIC && u32_at(data, 12) == !(tai as u32) {
                (Some(tai), PREFIX_LEN)
            } else {
                (None, 0)
            }
        }
        XdpStamp::Prefix | XdpStamp::Socket => (None, 0),
    }
}

impl RxSource for AfXdpRx {
    fn poll(&mut self, timeout_ms: i32, f: &mut dyn FnMut(RxFrame<'_>)) -> Result<u64, IoError> {
        let empty = |r: &Ring| r.prod().load(Ordering::Acquire) == r.cons().load(Ordering::Relaxed);
        if empty(&self.rx) {
            // poll(2) also wakes the driver when the fill ring asks for it (need_wakeup).
            let rx = &self.rx;
            wait_readable(&self.xsk.fd, timeout_ms, &self.xsk.info.name, || !empty(rx))?;
        }
        let prod = self.rx.prod().load(Ordering::Acquire);
        let mut cons = self.rx.cons().load(Ordering::Relaxed);
        let n = prod.wrapping_sub(cons);
        if n == 0 {
            return Ok(0);
        }
        let mut user_now = None;
        while cons != prod {
            // SAFETY: the descriptor at `cons` is ours until cons moves past it.
            let d = unsafe {
                (self.rx.desc as *const libc::xdp_desc)
                    .add((cons & self.rx.mask) as usize)
                    .read()
            };
            let in_chunk = d.addr as usize & (UMEM_FRAME - 1);
            // SAFETY: the kernel wrote `len` bytes at `addr`, inside one UMEM frame that stays
            // ours until it returns to the fill ring below; the metadata precedes it in the
            // same frame.
            let (meta, data) = unsafe {
                let meta = (in_chunk >= META_LEN).then(|| self.xsk.frame(d.addr - META_LEN as u64, META_LEN));
                (meta, self.xsk.frame(d.addr, d.len as usize))
            };
            let (stamped, start) = kernel_stamp(self.prog.stamp, meta, data);
            let data = &data[start..];
            let ts_ns = match stamped {
                Some(tai) => (tai as i64 - self.tai_offset_ns) as u64,
                // The socket stamp: each frame as it is read, so their order and spacing
                // survive within a batch.
                None if self.prog.stamp == XdpStamp::Socket => {
                    self.unstamped += 1;
                    clock_ns(libc::CLOCK_REALTIME) as u64
                }
                None => {
                    self.unstamped += 1;
                    *user_now.get_or_insert_with(|| clock_ns(libc::CLOCK_REALTIME) as u64)
                }
            };
            f(RxFrame {
                ts_ns,
                data,
                wire_len: data.len() as u32,
                hw: false,
                port: 0,
            });
            self.fill(d.addr);
            cons = cons.wrapping_add(1);
        }
        self.rx.cons().store(cons, Ordering::Release);
        self.xsk.fq.prod().store(self.fq_prod, Ordering::Release);
        self.frames += u64::from(n);
        Ok(u64::from(n))
    }

    fn stats(&mut self) -> RxStats {
        // SAFETY: xdp_statistics is plain data.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: st and len are valid for the call.
        let rc = unsafe {
            libc::getsockopt(
                self.xsk.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc == 0 {
            self.drop_kinds = [st.rx_ring_full, st.rx_fill_ring_empty_descs, st.rx_dropped];
        }
        let drops = if rc == 0 {
            st.rx_dropped + st.rx_ring_full + st.rx_fill_ring_empty_descs
        } else {
            0
        };
        RxStats {
            packets: self.frames + drops,
            drops,
            freeze_count: 0,
            user_stamped: self.unstamped,
        }
    }

    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.xsk.fd.as_raw_fd())
    }

    fn timestamp_source(&self) -> String {
        match self.prog.stamp {
            XdpStamp::Socket => format!(
                "meter's CLOCK_REALTIME as it read the AF_XDP ring (XDP program attached {} mode, no kernel stamp: the kernel took no stamping program): includes the meter's wake-up and batching delay",
                self.attach_mode()
            ),
            s => format!(
                "kernel TAI stamp at the XDP hook ({} mode; {}), minus the TAI offset of {} s = CLOCK_REALTIME",
                self.attach_mode(),
                s.describe(),
                self.tai_offset_ns / 1_000_000_000
            ),
        }
    }

    fn stamp(&self) -> &'static str {
        match self.prog.stamp {
            XdpStamp::Socket => "socket",
            XdpStamp::Prefix => "xdp-prefix",
            XdpStamp::Auto | XdpStamp::Metadata => "xdp-metadata",
        }
    }

    fn describe(&self) -> String {
        let [full, empty, other] = self.drop_kinds;
        let drops = if full + empty + other > 0 {
            format!("; drops: RX ring full {full}, fill ring empty {empty}, other {other}")
        } else {
            String::new()
        };
        format!(
            "AF_XDP on {} (ifindex {}) queue {}, XDP program attached {}, {} mode, UMEM {} x {} B, rings {}{drops}",
            self.xsk.info.name,
            self.xsk.info.index,
            self.xsk.queue,
            self.attach_mode(),
            self.xsk.mode_name(),
            RX_RING,
            UMEM_FRAME,
            RX_RING
        )
    }

    fn info(&self) -> &IfaceInfo {
        &self.xsk.info
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if !self.prog.refused.is_empty() {
            w.push(format!(
                "this kernel refused {}. The AF_XDP meter uses the {} stamp instead ({})",
                refusals_text(&self.prog.refused),
                self.prog.stamp.name(),
                self.prog.stamp.describe()
            ));
        }
        w.extend(self.queue_warning());
        w
    }
}

impl AfXdpRx {
    /// A warning when the interface has more RX queues than the one metered.
    fn queue_warning(&self) -> Option<String> {
        match self.rx_queues {
            Some(n) if n > 1 => Some(format!(
                "{} has {n} RX queues and the AF_XDP meter reads queue {} only: frames the NIC puts on other queues go to the host's stack unmetered and count as lost. Fix: steer the traffic to queue {} (e.g. `ethtool -N {} flow-type udp4 ... action {}`, or `ethtool -X {} equal 1`), or meter with --rx-backend afpacket",
                self.xsk.info.name, self.xsk.queue, self.xsk.queue, self.xsk.info.name, self.xsk.queue, self.xsk.info.name
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_metadata_is_laid_out_as_the_kernel_reads_it() {
        // struct xsk_tx_metadata { __u64 flags; union { struct { __u16 csum_start;
        // __u16 csum_offset; __u64 launch_time; } request; struct { __u64 tx_timestamp; }
        // completion; }; }: 24 bytes, launch_time at 16, tx_timestamp at 8.
        let f = u64::from(libc::XDP_TXMD_FLAGS_TIMESTAMP) | XDP_TXMD_FLAGS_LAUNCH_TIME;
        let md = tx_meta_bytes(f, 0x1122_3344_5566_7788);
        assert_eq!(md.len(), 24);
        assert_eq!(u64::from_ne_bytes(md[..8].try_into().unwrap()), 0b101);
        assert_eq!(
            &md[8..16],
            &[0; 8],
            "checksum request unused, and the completion slot starts clear"
        );
        assert_eq!(u64::from_ne_bytes(md[16..].try_into().unwrap()), 0x1122_3344_5566_7788);
    }

    #[test]
    fn a_kernel_without_af_xdp_gets_the_fix() {
        // What socket(AF_XDP) returns on a kernel built without CONFIG_XDP_SOCKETS; this
        // kernel has them, so only the mapping to the message can be tested here.
        let e = socket_failed(std::io::Error::from_raw_os_error(libc::EAFNOSUPPORT)).to_string();
        assert!(e.contains("this kernel has no AF_XDP sockets"), "{e}");
        assert!(
            e.contains("AF_PACKET socket") && e.contains("CONFIG_XDP_SOCKETS"),
            "{e}"
        );
        assert!(matches!(
            socket_failed(std::io::Error::from_raw_os_error(libc::EPERM)),
            IoError::NoPermission
        ));
    }

    #[test]
    fn each_program_s_stamp_is_read_where_it_writes_it() {
        let tai: u64 = 0x1234_5678_9abc_def0;
        let frame = [7u8; 60];
        let mut meta = tai.to_ne_bytes().to_vec();
        meta.extend(META_MAGIC.to_ne_bytes());
        meta.extend([0; 4]);
        assert_eq!(kernel_stamp(XdpStamp::Metadata, Some(&meta), &frame), (Some(tai), 0));
        assert_eq!(
            kernel_stamp(XdpStamp::Metadata, None, &frame),
            (None, 0),
            "no room before it"
        );
        let mut wrong = meta.clone();
        wrong[8] ^= 1;
        assert_eq!(kernel_stamp(XdpStamp::Metadata, Some(&wrong), &frame), (None, 0));
        // The prefix program's 16 bytes: stamp, magic, check word; cut off the frame.
        let mut prefixed = tai.to_ne_bytes().to_vec();
        prefixed.extend(PREFIX_MAGIC.to_ne_bytes());
        prefixed.extend((!(tai as u32)).to_ne_bytes());
        prefixed.extend(frame);
        assert_eq!(kernel_stamp(XdpStamp::Prefix, None, &prefixed), (Some(tai), 16));
        // A frame the program could not prefix is read whole, even when its bytes 8..12 hold
        // the magic (the check word differs).
        let mut bad = prefixed.clone();
        bad[15] ^= 0x80;
        assert_eq!(kernel_stamp(XdpStamp::Prefix, None, &bad), (None, 0));
        assert_eq!(kernel_stamp(XdpStamp::Prefix, None, &frame[..10]), (None, 0));
        // The socket program carries none, and metadata left by another program is not read.
        assert_eq!(kernel_stamp(XdpStamp::Socket, Some(&meta), &prefixed), (None, 0));
    }

    #[test]
    fn the_tai_offset_is_whole_seconds() {
        let o = tai_offset_ns();
        assert_eq!(o % 1_000_000_000, 0);
        assert!((0..=100_000_000_000).contains(&o), "{o}");
    }
}
