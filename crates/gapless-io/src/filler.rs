//! `rate_control = "filler"`: a backend wrapper that sends every payload frame back to back
//! with filler frames sized so that each payload frame starts on the wire at its scheduled
//! time ([`gapless_core::filler::FillerPlan`]). On a live link the frames leave unpaced, as
//! fast as the link takes them; into a pcap they are stamped with their wire start times.
//!
//! Fillers are dropped by the device under test: either they carry a bad FCS (SO_NOFCS, where
//! the driver lets user space supply the FCS), or they go to an IEEE 802.1 reserved group
//! address that bridges never forward.

use gapless_core::filler::{write_filler, FillerPlan};

use crate::error::IoError;
use crate::TxBackend;

/// How fillers get dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillerKind {
    /// A bad FCS, supplied by gapless with SO_NOFCS.
    BadFcs,
    /// An IEEE 802.1 reserved group destination (01:80:C2:00:00:0x).
    LinkLocal([u8; 6]),
}

/// What the wrapper did, for the result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FillerStats {
    pub fillers: u64,
    pub filler_bytes: u64,
    pub payloads: u64,
    /// Payload frames early because their gap was too short for a filler.
    pub carried: u64,
    /// Payload frames late because the link was still busy.
    pub late: u64,
    /// The largest |start − target| of a payload frame after a filled gap, byte times.
    pub max_abs_error_bytes: f64,
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
    payload_out: usize,
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
            payload_out: 0,
            inner,
        }
    }

    pub fn stats(&self) -> FillerStats {
        FillerStats {
            fillers: self.plan.fillers,
            filler_bytes: self.plan.filler_bytes,
            payloads: self.plan.payloads,
            carried: self.plan.carried,
            late: self.plan.late,
            max_abs_error_bytes: self.plan.max_abs_error,
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
                    FillerKind::BadFcs => {
                        let l = size as usize;
                        write_filler(out, l - 4, gapless_core::filler::FILLER_DST, src);
                        let fcs = !crc32fast::hash(&out[..l - 4]);
                        out[l - 4..l].copy_from_slice(&fcs.to_le_bytes());
                        l
                    }
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
            self.sizes.clear();
            let mut sizes = std::mem::take(&mut self.sizes);
            let placed = self.plan.place(at as f64, len as u64 + 4, &mut sizes);
            let mut t = placed.start - sizes.iter().map(|s| s + 20).sum::<u64>();
            for &s in &sizes {
                let ns = self.plan.ns(t).round() as u64;
                self.stage(None, s, ns)?;
                t += s + 20;
            }
            self.sizes = sizes;
            let ns = self.plan.ns(placed.start).round() as u64;
            self.stage(Some(i), len as u64 + 4, ns)?;
            self.payload_out += 1;
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
    fn filler_stats(&self) -> Option<FillerStats> {
        Some(self.stats())
    }
}
