//! Counters the send loop publishes while it runs: one writer (the loop), read by any other
//! thread. Relaxed atomics, no locks on the hot path. [`crate::RunHandle::snapshot`] sums
//! them per stream.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Default)]
pub struct StreamLive {
    pub sent: AtomicU64,
    pub bytes: AtomicU64,
    /// Lateness of the last departure, ns.
    pub lag_ns: AtomicU64,
    /// Frames that left more than one gap late so far.
    pub late_over_gap: AtomicU64,
    /// Set by a front end (OTG `flow_transmit` pause): the loop sends nothing of the stream
    /// and moves its schedule on, so it resumes within [`crate::run::PAUSE_POLL_NS`] of
    /// being cleared, on time, with no burst to catch up.
    pub paused: AtomicBool,
    /// A factor for the stream's rate that the loop has not applied yet (f64 bits; 0: none).
    /// Set by [`crate::Pauser::scale_rate`]; the loop takes it at the stream's next departure.
    pub rate_scale: AtomicU64,
    /// The stream recompiled with other frame sizes, for the loop to take at the stream's
    /// next departure ([`crate::Pauser::replace_variants`]); `variants_pending` says one is here.
    pub variants: std::sync::Mutex<Option<Vec<gapless_core::packet::variant::Variant>>>,
    pub variants_pending: AtomicBool,
}

impl StreamLive {
    /// Asks for the rate times `k`, after any factor not applied yet.
    pub fn scale_rate(&self, k: f64) {
        let _ = self.rate_scale.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
            let pending = if b == 0 { 1.0 } else { f64::from_bits(b) };
            Some((pending * k).to_bits())
        });
    }
}

/// One loop's counters, a [`StreamLive`] per stream it sends.
pub struct Live {
    pub streams: Vec<StreamLive>,
}

/// One stream's counters as read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxCounts {
    pub sent: u64,
    pub bytes: u64,
    pub lag_ns: u64,
    pub late_over_gap: u64,
    pub paused: bool,
}

impl Live {
    pub fn new(streams: usize) -> Live {
        Live {
            streams: (0..streams).map(|_| StreamLive::default()).collect(),
        }
    }

    /// The counts of every stream now.
    pub fn read(&self) -> Vec<TxCounts> {
        self.streams
            .iter()
            .map(|s| TxCounts {
                sent: s.sent.load(Ordering::Relaxed),
                bytes: s.bytes.load(Ordering::Relaxed),
                lag_ns: s.lag_ns.load(Ordering::Relaxed),
                late_over_gap: s.late_over_gap.load(Ordering::Relaxed),
                paused: s.paused.load(Ordering::Relaxed),
            })
            .collect()
    }
}

/// What the meter loop publishes: the frames it took (every poll) and each stream's running
/// counts (ten times a second, under a lock the send loops never touch).
#[derive(Default)]
pub struct RxLive {
    pub frames: AtomicU64,
    /// Streams whose rate the sender changed while running, for the meter to take up
    /// ([`gapless_core::meter::Meter::rate_changed`]) at its next publication.
    pub rate_changed: std::sync::Mutex<Vec<u16>>,
    /// The streams' counts and the time they were taken (the publication).
    pub streams: std::sync::Mutex<(Option<std::time::Instant>, Vec<gapless_core::meter::LiveRx>)>,
}

impl RxLive {
    /// The last publication: when, and the streams' counts then.
    pub fn published(&self) -> (Option<std::time::Instant>, Vec<gapless_core::meter::LiveRx>) {
        self.streams.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// Publishes the streams' counts, taken now.
    pub fn publish(&self, streams: Vec<gapless_core::meter::LiveRx>) {
        if let Ok(mut s) = self.streams.lock() {
            *s = (Some(std::time::Instant::now()), streams);
        }
    }
}
