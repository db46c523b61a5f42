//! Counters the send loop publishes for the live line: one writer (the loop), read by
//! another thread once a second. Relaxed atomics, no locks on the hot path.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct StreamLive {
    pub sent: AtomicU64,
    pub bytes: AtomicU64,
    /// Lateness of the last departure, ns.
    pub lag_ns: AtomicU64,
}

pub struct Live {
    pub streams: Vec<StreamLive>,
    pub names: Vec<String>,
}

impl Live {
    pub fn new(names: Vec<String>) -> Live {
        Live {
            streams: names.iter().map(|_| StreamLive::default()).collect(),
            names,
        }
    }

    /// (sent, bytes, lag) per stream.
    pub fn snapshot(&self) -> Vec<(u64, u64, u64)> {
        self.streams
            .iter()
            .map(|s| {
                (
                    s.sent.load(Ordering::Relaxed),
                    s.bytes.load(Ordering::Relaxed),
                    s.lag_ns.load(Ordering::Relaxed),
                )
            })
            .collect()
    }
}
