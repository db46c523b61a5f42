//! AF_XDP TX: a UMEM of 4 KiB frames, its fill and completion rings, a TX ring, and
//! need_wakeup. Written over libc (about 300 lines) rather than taken from a crate: xdpilone
//! is EUPL-1.2 and xsk-rs needs clang/libelf at build time; see docs/DESIGN-NOTES.md.
//!
//! Frames are built in place in UMEM frames (no copy in user space). `send` writes one TX
//! descriptor per frame, publishes them with one release store, and kicks the kernel with
//! `sendto` until it has taken every descriptor, so a departure leaves when `send` returns,
//! as with AF_PACKET. In copy mode (any driver; the only mode on veth) the kernel copies each
//! frame into an skb during the kick, at most 32 per kick on veth. In zero-copy mode the NIC
//! reads the UMEM itself. Completed frames return through the completion ring to a free list.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::IoError;
use crate::nic::{iface_info, IfaceInfo};
use crate::TxBackend;

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
const UMEM_FRAMES: u32 = 4096;
const RING: u32 = 2048;

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
    fn map(fd: &OwnedFd, off: &libc::xdp_ring_offset, elem: usize, pgoff: u64, what: &str) -> Result<Ring, IoError> {
        let map_len = off.desc as usize + RING as usize * elem;
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
                mask: RING - 1,
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
    crate::afpacket::sockopt(fd, libc::SOL_XDP, name, v)
}

pub struct AfXdpTx {
    // Field order is drop order: rings are unmapped before the socket closes, the UMEM last.
    tx: Ring,
    cq: Ring,
    _fq: Ring,
    fd: OwnedFd,
    umem: *mut u8,
    umem_len: usize,
    info: IfaceInfo,
    queue: u32,
    zerocopy: bool,
    /// Free UMEM frame addresses.
    free: Vec<u64>,
    /// Frames taken by `buf` for the batch being built.
    batch: Vec<u64>,
    max_batch: usize,
    tx_prod: u32,
    kicks: u64,
    errors: u64,
    last_errno: i32,
}

// SAFETY: the mappings are owned by the struct and touched only through &mut self.
unsafe impl Send for AfXdpTx {}

impl AfXdpTx {
    /// Binds an AF_XDP socket to queue `queue` of `iface` for sending.
    pub fn open(
        iface: &str,
        queue: u32,
        mode: XdpMode,
        max_frame: usize,
        max_batch: usize,
    ) -> Result<AfXdpTx, IoError> {
        let info = iface_info(iface)?;
        if !info.up || !info.running {
            return Err(IoError::InterfaceDown(iface.to_string()));
        }
        // SAFETY: plain socket(2).
        let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => IoError::NoPermission,
                _ => IoError::XdpUnsupported(e.to_string()),
            });
        }
        // SAFETY: fd is fresh and valid.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let os = |what: &'static str| {
            move |e: std::io::Error| IoError::Os {
                context: what.into(),
                cause: e,
            }
        };
        let umem_len = UMEM_FRAMES as usize * UMEM_FRAME;
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
        let unmap = |e: IoError| {
            // SAFETY: unmapping the UMEM mapped above, on an error path before it is owned.
            unsafe { libc::munmap(umem as *mut libc::c_void, umem_len) };
            e
        };
        let reg = libc::xdp_umem_reg {
            addr: umem as u64,
            len: umem_len as u64,
            chunk_size: UMEM_FRAME as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(&fd, libc::XDP_UMEM_REG, &reg)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ENOMEM) || e.raw_os_error() == Some(libc::EPERM) {
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
            })
            .map_err(unmap)?;
        let n = RING as libc::c_int;
        setsockopt(&fd, libc::XDP_UMEM_FILL_RING, &n)
            .map_err(os("XDP_UMEM_FILL_RING"))
            .map_err(unmap)?;
        setsockopt(&fd, libc::XDP_UMEM_COMPLETION_RING, &n)
            .map_err(os("XDP_UMEM_COMPLETION_RING"))
            .map_err(unmap)?;
        setsockopt(&fd, libc::XDP_TX_RING, &n)
            .map_err(os("XDP_TX_RING"))
            .map_err(unmap)?;
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
            return Err(unmap(IoError::last_os("XDP_MMAP_OFFSETS")));
        }
        let fq = Ring::map(&fd, &off.fr, 8, libc::XDP_UMEM_PGOFF_FILL_RING, "fill").map_err(unmap)?;
        let cq = Ring::map(&fd, &off.cr, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING, "completion").map_err(unmap)?;
        let tx = Ring::map(
            &fd,
            &off.tx,
            std::mem::size_of::<libc::xdp_desc>(),
            libc::XDP_PGOFF_TX_RING as u64,
            "TX",
        )
        .map_err(unmap)?;
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
            return Err(unmap(match e.raw_os_error() {
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
            }));
        }
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
        let zerocopy = rc == 0 && opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0;
        let mut s = AfXdpTx {
            tx,
            cq,
            _fq: fq,
            fd,
            umem,
            umem_len,
            info,
            queue,
            zerocopy,
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
        };
        s.tx_prod = s.tx.prod().load(Ordering::Relaxed);
        if max_frame > UMEM_FRAME {
            return Err(IoError::XdpFrameTooLarge {
                stream: String::new(),
                frame: max_frame,
                max: UMEM_FRAME,
            });
        }
        Ok(s)
    }

    /// Frames back from the completion ring onto the free list.
    fn reclaim(&mut self) {
        let prod = self.cq.prod().load(Ordering::Acquire);
        let mut cons = self.cq.cons().load(Ordering::Relaxed);
        while cons != prod {
            // SAFETY: entry `cons & mask` is inside the ring and owned by us until cons moves.
            let addr = unsafe { (self.cq.desc as *const u64).add((cons & self.cq.mask) as usize).read() };
            self.free.push(addr & !(UMEM_FRAME as u64 - 1));
            cons = cons.wrapping_add(1);
        }
        self.cq.cons().store(cons, Ordering::Release);
    }

    /// One wakeup: the kernel takes TX descriptors (and in copy mode sends them).
    fn kick(&mut self) -> Result<(), IoError> {
        self.kicks += 1;
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
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {}
                Some(libc::ENETDOWN) | Some(libc::ENXIO) => {
                    return Err(IoError::InterfaceDown(self.info.name.clone()));
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
            self.info.name,
            self.info.index,
            self.queue,
            if self.zerocopy { "zero-copy" } else { "copy" },
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
        let a = self.batch[i] as usize;
        // SAFETY: a is a frame offset inside the UMEM, owned by us (not in any ring).
        unsafe { std::slice::from_raw_parts_mut(self.umem.add(a), UMEM_FRAME) }
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
            let d = libc::xdp_desc {
                addr: self.batch[j],
                len: len as u32,
                options: 0,
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
        loop {
            let need = self.tx.flags().load(Ordering::Acquire) & libc::XDP_RING_NEED_WAKEUP != 0;
            if need || !self.zerocopy {
                self.kick()?;
            }
            if self.in_tx_ring() == 0 {
                break;
            }
            tries += 1;
            if tries > 100_000 {
                self.errors += u64::from(self.in_tx_ring());
                break;
            }
        }
        self.reclaim();
        Ok(n)
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

    fn is_live(&self) -> bool {
        true
    }
}

impl Drop for AfXdpTx {
    fn drop(&mut self) {
        // SAFETY: the UMEM was mapped in open(); the rings (fields) are unmapped after this,
        // but the kernel holds its own reference to the pages until the socket closes.
        unsafe { libc::munmap(self.umem as *mut libc::c_void, self.umem_len) };
    }
}
