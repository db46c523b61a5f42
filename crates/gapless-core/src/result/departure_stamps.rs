//! Kernel TX timestamps, matched to frames: how far each frame's real departure (the
//! kernel's or the NIC's stamp) was from its scheduled time, apart from the engine's own
//! pre-send lateness.
//!
//! The IO layer reads the stamps from the socket's error queue (SO_TIMESTAMPING with
//! OPT_ID: the kernel numbers the frames 0, 1, 2, … in the order they were sent) and hands
//! them here with the frame's number. The engine says, for every frame it sends, when the
//! frame was due on the wall clock (CLOCK_REALTIME, the clock the kernel stamps with) and
//! when the wall clock was read just before the send.

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Up to 1000 s either way, 3 significant digits.
fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1_000_000_000_000, 3).expect("valid bounds")
}

/// A signed quantity: its late (≥ 0) and early (< 0) parts in two histograms.
#[derive(Debug, Clone)]
struct Signed {
    late: Histogram<u64>,
    early: Histogram<u64>,
    sum: f64,
}

impl Signed {
    fn new() -> Signed {
        Signed {
            late: hist(),
            early: hist(),
            sum: 0.0,
        }
    }
    fn record(&mut self, v: i64) {
        self.sum += v as f64;
        let h = if v < 0 { &mut self.early } else { &mut self.late };
        h.saturating_record(v.unsigned_abs().max(1));
    }
    fn add(&mut self, o: &Signed) {
        self.late.add(&o.late).expect("same bounds");
        self.early.add(&o.early).expect("same bounds");
        self.sum += o.sum;
    }
    fn count(&self) -> u64 {
        self.late.len() + self.early.len()
    }
    /// The value at quantile `q` of the whole signed distribution.
    fn quantile(&self, q: f64) -> i64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let fe = self.early.len() as f64 / n as f64;
        if q < fe {
            -(self.early.value_at_quantile(1.0 - q / fe) as i64)
        } else {
            let ql = if fe < 1.0 { (q - fe) / (1.0 - fe) } else { 1.0 };
            self.late.value_at_quantile(ql) as i64
        }
    }
    fn summary(&self) -> SignedSummary {
        let n = self.count();
        SignedSummary {
            count: n,
            mean_ns: if n == 0 { 0.0 } else { self.sum / n as f64 },
            min_ns: if self.early.is_empty() {
                self.late.min() as i64
            } else {
                -(self.early.max() as i64)
            },
            p1_ns: self.quantile(0.01),
            p50_ns: self.quantile(0.5),
            p99_ns: self.quantile(0.99),
            p99_9_ns: self.quantile(0.999),
            max_ns: if self.late.is_empty() {
                -(self.early.min() as i64)
            } else {
                self.late.max() as i64
            },
        }
    }
}

/// Percentiles of a signed time, ns.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SignedSummary {
    pub count: u64,
    pub mean_ns: f64,
    pub min_ns: i64,
    pub p1_ns: i64,
    pub p50_ns: i64,
    pub p99_ns: i64,
    pub p99_9_ns: i64,
    pub max_ns: i64,
}

/// One frame sent and not yet stamped: its number and its times.
#[derive(Debug, Clone, Copy)]
struct Pending {
    key: u32,
    due_real_ns: u64,
    read_real_ns: u64,
}

/// The frames sent, the stamps that came back, and their differences.
#[derive(Debug, Clone)]
pub struct TxStampStats {
    pending: VecDeque<Pending>,
    next_key: u32,
    departure: Signed,
    path: Signed,
    sent: u64,
    matched: u64,
    /// Stamps whose number matched no frame waiting (the kernel numbered differently).
    unmatched: u64,
    /// Frames passed over: a later frame's stamp came first, or none came.
    missed: u64,
}

impl Default for TxStampStats {
    fn default() -> Self {
        TxStampStats {
            pending: VecDeque::new(),
            next_key: 0,
            departure: Signed::new(),
            path: Signed::new(),
            sent: 0,
            matched: 0,
            unmatched: 0,
            missed: 0,
        }
    }
}

/// How many frames may wait for their stamps before the oldest count as missed.
const MAX_PENDING: usize = 1 << 16;

impl TxStampStats {
    /// A frame went to the kernel: due at `due_real_ns`, the wall clock read just before the
    /// send `read_real_ns` (both CLOCK_REALTIME ns).
    pub fn sent(&mut self, due_real_ns: u64, read_real_ns: u64) {
        self.pending.push_back(Pending {
            key: self.next_key,
            due_real_ns,
            read_real_ns,
        });
        self.next_key = self.next_key.wrapping_add(1);
        self.sent += 1;
        if self.pending.len() > MAX_PENDING {
            self.pending.pop_front();
            self.missed += 1;
        }
    }

    /// Frames whose send failed: the kernel gave them no number.
    pub fn unsent(&mut self, n: usize) {
        for _ in 0..n.min(self.pending.len()) {
            self.pending.pop_back();
            self.next_key = self.next_key.wrapping_sub(1);
            self.sent -= 1;
        }
    }

    /// The kernel's stamp for frame `key`.
    pub fn stamp(&mut self, key: u32, stamp_real_ns: u64) {
        while let Some(p) = self.pending.front().copied() {
            let ahead = key.wrapping_sub(p.key);
            if ahead == 0 {
                self.pending.pop_front();
                self.departure.record(stamp_real_ns as i64 - p.due_real_ns as i64);
                self.path.record(stamp_real_ns as i64 - p.read_real_ns as i64);
                self.matched += 1;
                return;
            }
            if ahead > u32::MAX / 2 {
                break; // older than every frame waiting
            }
            self.pending.pop_front();
            self.missed += 1;
        }
        self.unmatched += 1;
    }

    /// Frames still waiting for their stamps.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Adds another send loop's stamps.
    pub fn absorb(&mut self, o: &TxStampStats) {
        self.departure.add(&o.departure);
        self.path.add(&o.path);
        self.sent += o.sent;
        self.matched += o.matched;
        self.unmatched += o.unmatched;
        self.missed += o.missed + o.pending.len() as u64;
    }

    /// The report, with `source` naming the stamps (e.g. "kernel software").
    pub fn report(&self, source: &str) -> TxStampReport {
        TxStampReport {
            source: source.to_string(),
            frames_sent: self.sent,
            matched: self.matched,
            missing: self.missed + self.pending.len() as u64,
            unmatched: self.unmatched,
            departure_error: self.departure.summary(),
            send_path: self.path.summary(),
        }
    }
}

/// What the kernel's TX stamps say about the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TxStampReport {
    /// E.g. "kernel software (SOF_TIMESTAMPING_TX_SOFTWARE, OPT_ID)".
    pub source: String,
    pub frames_sent: u64,
    /// Frames whose stamp came back.
    pub matched: u64,
    /// Frames without a stamp (none came, or the error queue overflowed).
    pub missing: u64,
    /// Stamps whose number matched no frame sent.
    pub unmatched: u64,
    /// The real departure error: the stamp minus the frame's scheduled time (on the wall
    /// clock). Unlike the engine's lateness, it includes the send path.
    pub departure_error: SignedSummary,
    /// The send path alone: the stamp minus the wall clock read just before the send.
    pub send_path: SignedSummary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_match_frames_by_number() {
        let mut s = TxStampStats::default();
        for i in 0..5u64 {
            s.sent(1_000 * i, 1_000 * i + 100);
        }
        s.unsent(1); // the fifth failed: numbers 0..4
        s.stamp(0, 150);
        s.stamp(1, 1_300);
        s.stamp(3, 3_120); // 2 never came
        s.stamp(3, 3_120); // again: matches nothing
        let r = s.report("test");
        assert_eq!((r.frames_sent, r.matched, r.missing, r.unmatched), (4, 3, 1, 1));
        assert_eq!(r.departure_error.min_ns, 120);
        assert_eq!(r.departure_error.max_ns, 300);
        assert_eq!(r.send_path.min_ns, 20);
        assert_eq!(r.send_path.max_ns, 200);
    }

    #[test]
    fn early_frames_are_negative() {
        let mut s = TxStampStats::default();
        for (i, d) in [-500i64, -100, 100, 200, 300].iter().enumerate() {
            s.sent(10_000, 10_000);
            s.stamp(i as u32, (10_000 + d) as u64);
        }
        let d = s.report("t").departure_error;
        assert_eq!(d.min_ns, -500);
        assert_eq!(d.max_ns, 300);
        assert_eq!(d.p50_ns, 100);
        assert!((d.mean_ns - 0.0).abs() < 1e-9);
    }
}
