//! `rate_control = "filler"`: a backend wrapper that sends every payload frame back to back
//! with filler frames sized so that each payload frame starts on the wire at its scheduled
//! time ([`gapless_core::packet::filler::FillerPlan`]). On a live link the frames leave unpaced, as
//! fast as the link takes them; into a pcap they are stamped with their wire start times.
//!
//! Fillers are dropped by the device under test: either they carry a bad FCS (SO_NOFCS, where
//! the driver lets user space supply the FCS), or they go to an IEEE 802.1 reserved group
//! address that bridges never forward.

use gapless_core::packet::filler::{write_filler, FillerCounts, FillerPlan, FILLER_DST, WIRE_OVERHEAD};

use crate::error::IoError;
use crate::tx::TxBackend;

/// How fillers get dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillerKind {
    /// A bad FCS, supplied by gapless with SO_NOFCS.
    BadFcs,
    /// An IEEE 802.1 reserved group destination (01:80:C2:00:00:0x).
    LinkLocal([u8; 6]),
}

/// Writes a filler of `size` bytes with a bad FCS (the CRC-32 inverted, so never right) into
/// `out`, for a socket with SO_NOFCS. Returns the length to send.
pub fn write_bad_fcs_filler(out: &mut [u8], size: usize, src: [u8; 6]) -> usize {
    write_filler(out, size - 4, FILLER_DST, src);
    let fcs = !crc32fast::hash(&out[..size - 4]);
    out[size - 4..size].copy_from_slice(&fcs.to_le_bytes());
    size
}

/// Sends through `inner` with fillers in the gaps.
pub struct FillerTx {
    inner: Box<dyn TxBackend>,
    plan: FillerPlan,
    kind: FillerKind,
    /// The engine builds its frames here.
    bufs: Vec<Vec<u8>>,
    sizes: Vec<u64>,
    lens: Vec<usize>,
    ats: Vec<u64>,
}

impl FillerTx {
    /// Wraps `inner` for a link of `link_bps` whose largest frame is `max_frame` B with FCS.
    pub fn new(mut inner: Box<dyn TxBackend>, link_bps: f64, max_frame: u64, kind: FillerKind) -> FillerTx {
        let n = inner.max_batch().max(1);
        let len = inner.buf(0).len();
        FillerTx {
            plan: FillerPlan::new(link_bps, max_frame),
            kind,
            bufs: (0..n).map(|_| vec![0u8; len]).collect(),
            sizes: Vec::new(),
            lens: Vec::new(),
            ats: Vec::new(),
            inner,
        }
    }

    /// Sends what is staged in the inner backend's buffers.
    fn flush(&mut self) -> Result<(), IoError> {
        if !self.lens.is_empty() {
            self.inner.send(&self.lens, &self.ats)?;
            self.lens.clear();
            self.ats.clear();
        }
        Ok(())
    }

    /// Stages one frame (`fill`: a filler of `size` B with FCS; else payload `i`) at wire
    /// time `at_ns`.
    fn stage(&mut self, payload: Option<usize>, size: u64, at_ns: u64) -> Result<(), IoError> {
        if self.lens.len() == self.inner.max_batch() {
            self.flush()?;
        }
        let j = self.lens.len();
        let out = self.inner.buf(j);
        let len = match payload {
            Some(i) => {
                let l = size as usize - 4;
                out[..l].copy_from_slice(&self.bufs[i][..l]);
                if self.kind == FillerKind::BadFcs {
                    // SO_NOFCS: the NIC appends no FCS to any frame of the socket.
                    let fcs = crc32fast::hash(&out[..l]);
                    out[l..l + 4].copy_from_slice(&fcs.to_le_bytes());
                    l + 4
                } else {
                    l
                }
            }
            None => {
                let src: [u8; 6] = self.bufs[0][6..12].try_into().expect("6 bytes");
                match self.kind {
                    FillerKind::LinkLocal(dst) => {
                        write_filler(out, size as usize - 4, dst, src);
                        size as usize - 4
                    }
                    FillerKind::BadFcs => write_bad_fcs_filler(out, size as usize, src),
                }
            }
        };
        self.lens.push(len);
        self.ats.push(at_ns);
        Ok(())
    }
}

impl TxBackend for FillerTx {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn describe(&self) -> String {
        format!(
            "{} with filler frames ({})",
            self.inner.describe(),
            match self.kind {
                FillerKind::BadFcs => "bad FCS, SO_NOFCS".to_string(),
                FillerKind::LinkLocal(d) => format!(
                    "to {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                    d[0], d[1], d[2], d[3], d[4], d[5]
                ),
            }
        )
    }
    fn max_batch(&self) -> usize {
        self.bufs.len()
    }
    fn buf(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    fn send(&mut self, lens: &[usize], at_ns: &[u64]) -> Result<usize, IoError> {
        let before = self.inner.errors();
        for (i, (&len, &at)) in lens.iter().zip(at_ns).enumerate() {
            let mut sizes = std::mem::take(&mut self.sizes);
            sizes.clear();
            let placed = self.plan.place(at as f64, len as u64 + 4, &mut sizes);
            // The fillers run back to back up to the payload frame's start.
            let mut t = placed.start - sizes.iter().map(|s| s + WIRE_OVERHEAD).sum::<u64>();
            for &s in &sizes {
                let ns = self.plan.ns(t).round() as u64;
                self.stage(None, s, ns)?;
                t += s + WIRE_OVERHEAD;
            }
            self.sizes = sizes;
            let ns = self.plan.ns(placed.start).round() as u64;
            self.stage(Some(i), len as u64 + 4, ns)?;
        }
        self.flush()?;
        let failed = (self.inner.errors() - before) as usize;
        Ok(lens.len().saturating_sub(failed))
    }
    fn finish(&mut self) -> Result<(), IoError> {
        self.inner.finish()
    }
    fn errors(&self) -> u64 {
        self.inner.errors()
    }
    fn last_error(&self) -> Option<String> {
        self.inner.last_error()
    }
    fn is_live(&self) -> bool {
        self.inner.is_live()
    }
    fn on_schedule_time(&self) -> bool {
        self.inner.on_schedule_time()
    }
    fn filler_stats(&self) -> Option<FillerCounts> {
        Some(self.plan.counts.clone())
    }
}
