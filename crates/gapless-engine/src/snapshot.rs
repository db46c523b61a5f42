//! Live views of a run: [`Snapshot`], taken from the loops' atomic counters and the meter's
//! published counts, without a lock on any send path.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use crate::live::{Live, RxLive, TxCounts};

/// A run as it stands: per stream of the profile and in total.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Seconds since the run started.
    pub elapsed_s: f64,
    pub streams: Vec<StreamSnapshot>,
    pub total: StreamSnapshot,
    /// Every frame the meter took (signed, flows and foreign); None without a meter.
    pub rx_frames: Option<u64>,
}

/// One stream (or the total).
#[derive(Debug, Clone, Serialize, Default)]
pub struct StreamSnapshot {
    pub name: String,
    pub tx: TxSnapshot,
    /// None without a meter, or before the meter saw the stream.
    pub rx: Option<RxSnapshot>,
}

#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct TxSnapshot {
    pub sent: u64,
    pub bytes: u64,
    /// Frames per second since the previous snapshot (since the start for the first).
    pub rate_pps: f64,
    /// How late the last departure left, ns (the worst over the loops of a split stream).
    pub lag_ns: u64,
    /// Frames that left more than one gap late so far.
    pub late_over_gap: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct RxSnapshot {
    pub received: u64,
    pub bytes: u64,
    /// Gaps in the sequence numbers so far (the tail is known at the end).
    pub lost: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub latency_p50_ns: Option<i64>,
    pub latency_p99_ns: Option<i64>,
    pub latency_p99_9_ns: Option<i64>,
    pub rate_pps: f64,
}

/// What a snapshot is taken from: shared by the run's threads and its handle.
pub(crate) struct Board {
    pub names: Vec<String>,
    pub ids: Vec<u16>,
    /// Each loop's counters and its map to the profile's streams.
    pub loops: Vec<(Arc<Live>, Vec<usize>)>,
    pub rx: Option<Arc<RxLive>>,
    pub t0: Instant,
    /// The previous snapshot's time and counts (tx sent, rx received), for rates.
    prev: Mutex<(Instant, Vec<(u64, u64)>)>,
}

impl Board {
    pub fn new(
        names: Vec<String>,
        ids: Vec<u16>,
        loops: Vec<(Arc<Live>, Vec<usize>)>,
        rx: Option<Arc<RxLive>>,
    ) -> Board {
        let now = Instant::now();
        Board {
            prev: Mutex::new((now, vec![(0, 0); names.len()])),
            names,
            ids,
            loops,
            rx,
            t0: now,
        }
    }

    /// The loops' counters summed per stream of the profile.
    fn tx(&self) -> Vec<TxCounts> {
        let mut sums = vec![TxCounts::default(); self.names.len()];
        for (live, map) in &self.loops {
            for (i, c) in live.read().into_iter().enumerate() {
                let t = &mut sums[map[i]];
                t.sent += c.sent;
                t.bytes += c.bytes;
                t.late_over_gap += c.late_over_gap;
                t.lag_ns = t.lag_ns.max(c.lag_ns);
            }
        }
        sums
    }

    pub fn snapshot(&self) -> Snapshot {
        let now = Instant::now();
        let tx = self.tx();
        let rx_streams = self.rx.as_ref().map(|r| r.streams());
        let mut prev = self.prev.lock().unwrap_or_else(|p| p.into_inner());
        let dt = now.duration_since(prev.0).as_secs_f64().max(1e-9);
        let mut streams = Vec::with_capacity(tx.len());
        let mut total = StreamSnapshot {
            name: "total".into(),
            ..Default::default()
        };
        for (i, c) in tx.iter().enumerate() {
            let (p_tx, p_rx) = prev.1[i];
            let tx = TxSnapshot {
                sent: c.sent,
                bytes: c.bytes,
                rate_pps: c.sent.saturating_sub(p_tx) as f64 / dt,
                lag_ns: c.lag_ns,
                late_over_gap: c.late_over_gap,
            };
            let rx = rx_streams
                .as_ref()
                .and_then(|v| v.iter().find(|s| s.id == Some(self.ids[i])))
                .map(|s| RxSnapshot {
                    received: s.received,
                    bytes: s.bytes,
                    lost: s.lost,
                    reordered: s.reordered,
                    duplicated: s.duplicated,
                    latency_p50_ns: s.latency_p50_ns,
                    latency_p99_ns: s.latency_p99_ns,
                    latency_p99_9_ns: s.latency_p99_9_ns,
                    rate_pps: s.received.saturating_sub(p_rx) as f64 / dt,
                });
            prev.1[i] = (c.sent, rx.map_or(p_rx, |r| r.received));
            add(&mut total, &tx, rx.as_ref());
            streams.push(StreamSnapshot {
                name: self.names[i].clone(),
                tx,
                rx,
            });
        }
        prev.0 = now;
        Snapshot {
            elapsed_s: now.duration_since(self.t0).as_secs_f64(),
            streams,
            total,
            rx_frames: self
                .rx
                .as_ref()
                .map(|r| r.frames.load(std::sync::atomic::Ordering::Relaxed)),
        }
    }
}

fn add(total: &mut StreamSnapshot, tx: &TxSnapshot, rx: Option<&RxSnapshot>) {
    let t = &mut total.tx;
    t.sent += tx.sent;
    t.bytes += tx.bytes;
    t.rate_pps += tx.rate_pps;
    t.lag_ns = t.lag_ns.max(tx.lag_ns);
    t.late_over_gap += tx.late_over_gap;
    if let Some(r) = rx {
        let a = total.rx.get_or_insert_with(RxSnapshot::default);
        a.received += r.received;
        a.bytes += r.bytes;
        a.lost += r.lost;
        a.reordered += r.reordered;
        a.duplicated += r.duplicated;
        a.rate_pps += r.rate_pps;
    }
}
