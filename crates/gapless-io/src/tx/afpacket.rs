//! AF_PACKET TX: a raw socket bound to one interface, PACKET_QDISC_BYPASS, and `sendmmsg`
//! batches (one system call per departure at batch 1).
//!
//! Why `sendmmsg` and not PACKET_TX_RING: on this project's machines (veth, 64 B) both were
//! measured equally fast, and `sendmmsg` sends exactly the frames of one departure with one
//! kick and no ring bookkeeping. TX_RING pays off for large frames and is left for later.

use std::os::fd::{AsRawFd, OwnedFd};

use gapless_core::result::departure_stamps::TxStampStats;

use crate::error::IoError;
use crate::kernel::nic::{iface_info, IfaceInfo};
use crate::kernel::socket::{bind_packet, packet_socket, sockopt};
use crate::tx::TxBackend;

const PACKET_QDISC_BYPASS: libc::c_int = 20;

pub struct AfPacketTx {
    sock: TxSocket,
    bufs: Vec<Vec<u8>>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    /// One SCM_TXTIME control message per frame (launch time), and CLOCK_TAI - REALTIME.
    cmsgs: Vec<[u8; crate::kernel::timestamping::TXTIME_CMSG_LEN]>,
    tai_off_ns: i64,
}

// SAFETY: the raw pointers in `iovs`/`msgs` point into `bufs`/`iovs`, which the struct owns
// and never reallocates; moving the struct to another thread keeps them valid.
unsafe impl Send for AfPacketTx {}

fn setsockopt_int(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> std::io::Result<()> {
    sockopt(fd, level, name, &v)
}

/// What an AF_PACKET TX socket does besides sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfPacketOptions {
    /// Skip the qdisc (PACKET_QDISC_BYPASS): off when a qdisc shapes or launches the frames.
    pub bypass_qdisc: bool,
    /// Kernel or NIC TX timestamps, matched to the frames.
    pub tx_stamps: Option<crate::kernel::timestamping::TxStampKind>,
    /// Each frame carries its launch time (SO_TXTIME, SCM_TXTIME).
    pub txtime: bool,
    /// Frames carry their own FCS (SO_NOFCS): filler frames with a bad one.
    pub nofcs: bool,
    /// Open on an interface that is down, too: a LAG's member, which the LAG's driver keeps
    /// out of the frames' choice while it is down (a frame sent on it would be refused).
    pub even_down: bool,
}

impl Default for AfPacketOptions {
    fn default() -> Self {
        AfPacketOptions {
            bypass_qdisc: true,
            tx_stamps: None,
            txtime: false,
            nofcs: false,
            even_down: false,
        }
    }
}

/// SO_NOFCS (asm-generic/socket.h).
const SO_NOFCS: libc::c_int = 43;

/// Turns SO_NOFCS on and proves the driver takes it: the kernel checks the device only when
/// a frame is sent, so one filler frame (which the device under test drops anyway) goes out.
fn nofcs(fd: &OwnedFd, info: &IfaceInfo) -> Result<(), IoError> {
    let refused = |cause: std::io::Error| IoError::NoFcsUnsupported {
        iface: info.name.clone(),
        driver: info.driver.clone().unwrap_or_else(|| "unknown".into()),
        cause: cause.to_string(),
    };
    setsockopt_int(fd, libc::SOL_SOCKET, SO_NOFCS, 1).map_err(refused)?;
    let mut probe = [0u8; 64];
    crate::tx::filler::write_bad_fcs_filler(&mut probe, 64, [0x02, 0, 0, 0, 0, 0]);
    // SAFETY: sending 64 bytes from a live buffer on our socket.
    let rc = unsafe { libc::send(fd.as_raw_fd(), probe.as_ptr() as *const libc::c_void, 64, 0) };
    if rc < 0 {
        return Err(refused(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// How long a frame the kernel refuses for a full queue (ENOBUFS, EAGAIN) is retried.
const RETRY_FOR: std::time::Duration = std::time::Duration::from_millis(2);

/// A bound AF_PACKET TX socket with PACKET_QDISC_BYPASS and a raised send buffer.
struct TxSocket {
    fd: OwnedFd,
    info: IfaceInfo,
    qdisc_bypass: bool,
    sndbuf: i32,
    /// Frames that failed to send, and the last errno.
    errors: u64,
    last_errno: i32,
    /// TX stamps asked for, and those collected.
    stamps: Option<(crate::kernel::timestamping::TxStampKind, TxStampStats)>,
    /// SO_TXTIME is on.
    txtime: bool,
    /// The next send's frames: due on the wall clock, and the wall clock read before it.
    due: Vec<u64>,
    read_ns: u64,
}

impl TxSocket {
    fn open(iface: &str, opts: AfPacketOptions) -> Result<TxSocket, IoError> {
        let info = iface_info(iface)?;
        if !opts.even_down && (!info.up || !info.running) {
            return Err(IoError::InterfaceDown(iface.to_string()));
        }
        // Protocol 0: this socket sends only and receives nothing.
        let fd = packet_socket()?;
        if bind_packet(&fd, info.index, 0) < 0 {
            return Err(IoError::last_os(format!("bind AF_PACKET socket to {iface}")));
        }
        let qdisc_bypass = opts.bypass_qdisc && setsockopt_int(&fd, libc::SOL_PACKET, PACKET_QDISC_BYPASS, 1).is_ok();
        if let Some(kind) = opts.tx_stamps {
            crate::kernel::timestamping::enable(&fd, iface, kind)?;
        }
        if opts.txtime {
            crate::kernel::timestamping::enable_txtime(&fd, iface)?;
        }
        if opts.nofcs {
            nofcs(&fd, &info)?;
        }
        let want = 4 << 20;
        let sndbuf = if setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, want).is_ok()
            || setsockopt_int(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, want).is_ok()
        {
            want
        } else {
            0
        };
        Ok(TxSocket {
            fd,
            info,
            qdisc_bypass,
            sndbuf,
            errors: 0,
            last_errno: 0,
            stamps: opts.tx_stamps.map(|k| (k, TxStampStats::default())),
            txtime: opts.txtime,
            due: Vec::new(),
            read_ns: 0,
        })
    }

    fn fail(&mut self, frames: u64, errno: i32) {
        self.errors += frames;
        self.last_errno = errno;
    }

    /// A send failure that ends the run: the link is down, without carrier or gone. `errno`
    /// is the failure; a full queue (ENOBUFS) is fatal only when the link is not up.
    fn fatal(&self, errno: i32) -> Option<IoError> {
        let gone = matches!(errno, libc::ENETDOWN | libc::ENXIO | libc::ENODEV);
        if !gone && errno != libc::ENOBUFS {
            return None;
        }
        crate::kernel::nic::link_fault_by(&self.fd, &self.info.name).or_else(|| {
            gone.then(|| IoError::LinkLost {
                iface: self.info.name.clone(),
                what: format!("failed to send ({})", std::io::Error::from_raw_os_error(errno)),
            })
        })
    }

    fn last_error(&self) -> Option<String> {
        (self.last_errno != 0).then(|| std::io::Error::from_raw_os_error(self.last_errno).to_string())
    }

    fn describe(&self, method: &str) -> String {
        let mut d = format!(
            "AF_PACKET on {} (ifindex {}), {method}, PACKET_QDISC_BYPASS {}, SO_SNDBUF {} B",
            self.info.name,
            self.info.index,
            if self.qdisc_bypass {
                "on"
            } else {
                "off (through the qdisc)"
            },
            self.sndbuf
        );
        if let Some((k, _)) = &self.stamps {
            d += &format!(", TX stamps: {}", k.source());
        }
        if self.txtime {
            d += ", SO_TXTIME (CLOCK_TAI) per frame";
        }
        d
    }

    /// The next send's due times (TX stamps, launch time).
    fn set_due(&mut self, due_real_ns: &[u64], read_real_ns: u64) {
        self.due.clear();
        self.due.extend_from_slice(due_real_ns);
        self.read_ns = read_real_ns;
    }

    /// Frame `j`'s due time (the clock read before the send, if the engine gave none).
    fn due_at(due: &[u64], read_ns: u64, j: usize) -> u64 {
        due.get(j).copied().unwrap_or(read_ns)
    }

    /// Frames `from..to` of the batch were accepted by the kernel.
    fn accepted(&mut self, from: usize, to: usize) {
        if let Some((_, st)) = &mut self.stamps {
            for j in from..to {
                st.sent(Self::due_at(&self.due, self.read_ns, j), self.read_ns);
            }
        }
    }

    /// Reads the stamps waiting, when enough frames wait for theirs.
    fn drain(&mut self, at_least: usize) {
        if let Some((k, st)) = &mut self.stamps {
            if st.waiting() >= at_least {
                crate::kernel::timestamping::drain(&self.fd, *k, st);
            }
        }
    }

    /// At the end: the stamps still in flight. A qdisc (a shaper) may hold frames for long
    /// after the last send, so this waits while stamps keep coming: until 200 ms pass without
    /// one, or 30 s in all.
    fn take_stamps(&mut self) -> Option<TxStampStats> {
        use std::time::{Duration, Instant};
        let (t0, mut last) = (Instant::now(), Instant::now());
        while let Some((k, st)) = &mut self.stamps {
            if st.waiting() == 0
                || last.elapsed() > Duration::from_millis(200)
                || t0.elapsed() > Duration::from_secs(30)
            {
                break;
            }
            if crate::kernel::timestamping::drain(&self.fd, *k, st) > 0 {
                last = Instant::now();
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        self.stamps.take().map(|(_, s)| s)
    }
}

impl AfPacketTx {
    /// Hands frames `done..n` to the kernel; returns how many it took, or -1 (errno set).
    /// One frame without a control message goes by send(2): at batch 1 that is every
    /// departure, and it skips sendmmsg's copy-in of the message header and its loop.
    #[inline]
    fn kick(&mut self, done: usize, n: usize) -> i32 {
        let fd = self.sock.fd.as_raw_fd();
        if n - done == 1 && !self.sock.txtime {
            let buf = &self.bufs[done];
            // SAFETY: buf is live and at least iov_len long (the TxBackend contract).
            let rc = unsafe { libc::send(fd, buf.as_ptr() as *const libc::c_void, self.iovs[done].iov_len, 0) };
            return if rc < 0 { -1 } else { 1 };
        }
        // SAFETY: msgs[done..n] are valid mmsghdrs pointing at live iovecs and buffers.
        unsafe { libc::sendmmsg(fd, self.msgs.as_mut_ptr().add(done), (n - done) as u32, 0) }
    }

    /// Opens a TX socket on `iface` with room for `max_batch` frames of `max_frame` bytes.
    pub fn open(iface: &str, max_frame: usize, max_batch: usize, opts: AfPacketOptions) -> Result<AfPacketTx, IoError> {
        let sock = TxSocket::open(iface, opts)?;
        let n = max_batch.max(1);
        let mut bufs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; max_frame]).collect();
        let mut iovs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr() as *mut libc::c_void,
                iov_len: 0,
            })
            .collect();
        let msgs = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: msghdr is plain data; zeroed is valid (no name, no control).
                let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                h.msg_iov = iov as *mut libc::iovec;
                h.msg_iovlen = 1;
                libc::mmsghdr { msg_hdr: h, msg_len: 0 }
            })
            .collect();
        let mut tx = AfPacketTx {
            sock,
            bufs,
            iovs,
            msgs,
            cmsgs: Vec::new(),
            tai_off_ns: 0,
        };
        if opts.txtime {
            tx.cmsgs = vec![[0u8; crate::kernel::timestamping::TXTIME_CMSG_LEN]; n];
            tx.tai_off_ns = crate::kernel::socket::tai_offset_ns();
            for (m, c) in tx.msgs.iter_mut().zip(tx.cmsgs.iter_mut()) {
                m.msg_hdr.msg_control = c.as_mut_ptr() as *mut libc::c_void;
                m.msg_hdr.msg_controllen = c.len();
            }
        }
        Ok(tx)
    }

    /// Each frame's launch time: its due time on CLOCK_TAI.
    fn fill_txtimes(&mut self, n: usize) {
        for j in 0..n.min(self.cmsgs.len()) {
            let due = TxSocket::due_at(&self.sock.due, self.sock.read_ns, j).saturating_add_signed(self.tai_off_ns);
            crate::kernel::timestamping::txtime_cmsg(&mut self.cmsgs[j], due);
        }
    }
}

impl TxBackend for AfPacketTx {
    fn name(&self) -> &'static str {
        "afpacket"
    }
    fn describe(&self) -> String {
        self.sock.describe("sendmmsg")
    }
    fn max_batch(&self) -> usize {
        self.bufs.len()
    }
    fn buf(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    #[inline]
    fn send(&mut self, lens: &[usize], _at_ns: &[u64]) -> Result<usize, IoError> {
        let n = lens.len();
        for (iov, &l) in self.iovs.iter_mut().zip(lens) {
            iov.iov_len = l;
        }
        if self.sock.txtime {
            self.fill_txtimes(n);
        }
        let mut done = 0usize;
        // Retries of the frame at `done`, and when they began: a full queue is retried for
        // at most RETRY_FOR, so a frame the kernel will not take costs 2 ms, not seconds.
        let mut retries = 0u32;
        let mut since: Option<std::time::Instant> = None;
        let mut failed = 0usize;
        while done < n {
            let rc = self.kick(done, n);
            if rc > 0 {
                self.sock.accepted(done, done + rc as usize);
                done += rc as usize;
                (retries, since) = (0, None);
                continue;
            }
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            // A full queue may be a dead link: look at the first retry and every 256th, and
            // at once for errors that only a dead link gives.
            if e != libc::ENOBUFS || retries.is_multiple_of(256) {
                if let Some(fatal) = self.sock.fatal(e) {
                    return Err(fatal);
                }
            }
            let transient = e == libc::ENOBUFS || e == libc::EAGAIN || e == libc::EINTR;
            if transient && since.get_or_insert_with(std::time::Instant::now).elapsed() < RETRY_FOR {
                retries += 1;
                std::hint::spin_loop();
                continue;
            }
            // The frame at `done` failed: count it and go on with the rest.
            self.sock.fail(1, e);
            failed += 1;
            done += 1;
            (retries, since) = (0, None);
        }
        self.sock.drain(64);
        Ok(n - failed)
    }
    fn finish(&mut self) -> Result<(), IoError> {
        Ok(())
    }
    fn errors(&self) -> u64 {
        self.sock.errors
    }
    fn last_error(&self) -> Option<String> {
        self.sock.last_error()
    }
    fn wants_due_times(&self) -> bool {
        self.sock.stamps.is_some() || self.sock.txtime
    }
    fn due_times(&mut self, due_real_ns: &[u64], read_real_ns: u64) {
        self.sock.set_due(due_real_ns, read_real_ns);
    }
    fn take_tx_stamps(&mut self) -> Option<TxStampStats> {
        self.sock.take_stamps()
    }
    fn is_live(&self) -> bool {
        true
    }
}

// ---------------------------------------------------------------- PACKET_TX_RING

const PACKET_VERSION: libc::c_int = 10;
const PACKET_TX_RING: libc::c_int = 13;
const TPACKET_V2: libc::c_int = 1;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;
/// TX data starts at TPACKET2_HDRLEN - sizeof(sockaddr_ll) = 32 (linux/if_packet.h).
const TX_DATA_OFF: usize = 32;

#[repr(C)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

/// AF_PACKET TX through a TPACKET_V2 PACKET_TX_RING: frames are built in place in the
/// shared ring, marked SEND_REQUEST, and one blocking `send` per departure kicks them out
/// (the kernel returns once they have left, so the slots are free again).
pub struct AfPacketRingTx {
    sock: TxSocket,
    ring: *mut u8,
    ring_len: usize,
    frame_size: usize,
    frame_nr: usize,
    head: usize,
    batch: usize,
}

// SAFETY: the mapping belongs to this struct (unmapped in Drop) and is only touched through
// &mut self.
unsafe impl Send for AfPacketRingTx {}

impl AfPacketRingTx {
    /// Opens a TX ring on `iface` for departures of up to `max_batch` frames of up to
    /// `max_frame` bytes.
    pub fn open(
        iface: &str,
        max_frame: usize,
        max_batch: usize,
        opts: AfPacketOptions,
    ) -> Result<AfPacketRingTx, IoError> {
        if opts.txtime {
            return Err(IoError::TxStamps {
                iface: iface.into(),
                what: "launch time needs a control message per frame, which PACKET_TX_RING cannot carry".into(),
                fix: "send with sendmmsg (--tx-method sendmmsg, the default)".into(),
            });
        }
        let sock = TxSocket::open(iface, opts)?;
        let fd = sock.fd.as_raw_fd();
        setsockopt_int(&sock.fd, libc::SOL_PACKET, PACKET_VERSION, TPACKET_V2).map_err(|e| IoError::Os {
            context: "setsockopt(PACKET_VERSION, TPACKET_V2)".into(),
            cause: e,
        })?;
        let frame_size = (max_frame + TX_DATA_OFF).next_power_of_two().max(2048);
        let block_size = frame_size.max(4096);
        let per_block = block_size / frame_size;
        let want = max_batch.max(1).max(256);
        let block_nr = want.div_ceil(per_block);
        let req = TpacketReq {
            block_size: block_size as u32,
            block_nr: block_nr as u32,
            frame_size: frame_size as u32,
            frame_nr: (block_nr * per_block) as u32,
        };
        // SAFETY: req is a valid tpacket_req of the size passed.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_PACKET,
                PACKET_TX_RING,
                &req as *const _ as *const libc::c_void,
                std::mem::size_of::<TpacketReq>() as u32,
            )
        };
        if rc < 0 {
            return Err(IoError::last_os("setsockopt(PACKET_TX_RING)"));
        }
        let ring_len = block_size * block_nr;
        // SAFETY: mapping the ring the kernel just allocated for this socket.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(IoError::last_os("mmap(PACKET_TX_RING)"));
        }
        Ok(AfPacketRingTx {
            sock,
            ring: ring as *mut u8,
            ring_len,
            frame_size,
            frame_nr: block_nr * per_block,
            head: 0,
            batch: max_batch.max(1),
        })
    }

    fn status(&self, slot: usize) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: slot < frame_nr, so the header lies inside the mapping; tp_status is the
        // first, 4-byte aligned u32 of each 16-byte aligned frame.
        unsafe { &*(self.ring.add(slot * self.frame_size) as *const std::sync::atomic::AtomicU32) }
    }
}

impl TxBackend for AfPacketRingTx {
    fn name(&self) -> &'static str {
        "afpacket"
    }
    fn describe(&self) -> String {
        self.sock.describe(&format!(
            "PACKET_TX_RING (TPACKET_V2, {} frames of {} B)",
            self.frame_nr, self.frame_size
        ))
    }
    fn max_batch(&self) -> usize {
        self.batch
    }
    fn buf(&mut self, i: usize) -> &mut [u8] {
        use std::sync::atomic::Ordering;
        let slot = (self.head + i) % self.frame_nr;
        // A blocking send returns once its frames left, so the slot is normally free already.
        let mut spins = 0u32;
        while self.status(slot).load(Ordering::Acquire) != TP_STATUS_AVAILABLE && spins < 1_000_000 {
            std::hint::spin_loop();
            spins += 1;
        }
        // SAFETY: the data area of a free slot inside the mapping; the kernel does not touch
        // it until we set SEND_REQUEST.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ring.add(slot * self.frame_size + TX_DATA_OFF),
                self.frame_size - TX_DATA_OFF,
            )
        }
    }
    fn send(&mut self, lens: &[usize], _at_ns: &[u64]) -> Result<usize, IoError> {
        use std::sync::atomic::Ordering;
        for (i, &len) in lens.iter().enumerate() {
            let slot = (self.head + i) % self.frame_nr;
            // SAFETY: tp_len is the u32 at offset 4 of the slot's header.
            unsafe { (self.ring.add(slot * self.frame_size + 4) as *mut u32).write_volatile(len as u32) };
            self.status(slot).store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        }
        // SAFETY: a zero-length send on our socket kicks the ring.
        let rc = unsafe { libc::send(self.sock.fd.as_raw_fd(), std::ptr::null(), 0, 0) };
        let errno = if rc < 0 {
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
        } else {
            0
        };
        if rc < 0 {
            if let Some(fatal) = self.sock.fatal(errno) {
                return Err(fatal);
            }
        }
        let mut failed = 0;
        for i in 0..lens.len() {
            let slot = (self.head + i) % self.frame_nr;
            let st = self.status(slot).load(Ordering::Acquire);
            if st & TP_STATUS_WRONG_FORMAT != 0 || (rc < 0 && st != TP_STATUS_AVAILABLE) {
                self.sock.fail(1, if errno != 0 { errno } else { libc::EINVAL });
                self.status(slot).store(TP_STATUS_AVAILABLE, Ordering::Release);
                failed += 1;
            }
        }
        self.head = (self.head + lens.len()) % self.frame_nr;
        self.sock.accepted(0, lens.len() - failed);
        self.sock.drain(64);
        Ok(lens.len() - failed)
    }
    fn finish(&mut self) -> Result<(), IoError> {
        Ok(())
    }
    fn errors(&self) -> u64 {
        self.sock.errors
    }
    fn last_error(&self) -> Option<String> {
        self.sock.last_error()
    }
    fn wants_due_times(&self) -> bool {
        self.sock.stamps.is_some()
    }
    fn due_times(&mut self, due_real_ns: &[u64], read_real_ns: u64) {
        self.sock.set_due(due_real_ns, read_real_ns);
    }
    fn take_tx_stamps(&mut self) -> Option<TxStampStats> {
        self.sock.take_stamps()
    }
    fn is_live(&self) -> bool {
        true
    }
}

impl Drop for AfPacketRingTx {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.ring as *mut libc::c_void, self.ring_len) };
    }
}
