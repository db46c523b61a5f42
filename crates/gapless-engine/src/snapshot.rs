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
    /// Paused by a front end ([`crate::RunHandle::pause`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct RxSnapshot {
    pub received: u64,
    pub bytes: u64,
    /// Gaps in the sequence numbers so far (the tail is known at the end).
    pub lost: u64,
    pub reordered: u64,
    pub duplicated: u64,
    /// Loss episodes so far, and the arrival gap around the longest (ns).
    pub loss_episodes: u64,
    pub longest_outage_ns: u64,
    pub latency_p50_ns: Option<i64>,
    pub latency_p99_ns: Option<i64>,
    pub latency_p99_9_ns: Option<i64>,
    pub rate_pps: f64,
    /// A meter on several ports: frames received on each, in port order (else empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<u64>,
}

/// What a snapshot is taken from: shared by the run's threads and its handle.
pub(crate) struct Board {
    pub names: Vec<String>,
    pub ids: Vec<u16>,
    /// Each loop's counters and its map to the profile's streams.
    pub loops: Vec<(Arc<Live>, Vec<usize>)>,
    pub rx: Option<Arc<RxLive>>,
    pub t0: Instant,
    /// The run's own link while a user holds it down ([`crate::events::Expected`]).
    pub link: Arc<crate::events::Expected>,
    /// Recent counts per stream (tx sent, rx received), each with the time it was taken,
    /// for rates over a window (see [`RateWindow`]).
    rates: Mutex<Vec<(RateWindow, RateWindow)>>,
}

/// A rate over the last [`RateWindow::SPAN`] or more of a counter's samples, each at the time
/// its count was taken. Rates between consecutive snapshots went wrong two ways: the meter
/// publishes its counts ten times a second, so a snapshot soon after the previous one saw no
/// new frames (or a whole publication's worth), and every reader (the event stream, a
/// checkpoint, the OTG metrics) took snapshots from one shared "previous", so one reader's
/// snapshot shrank the next one's interval. A window of at least half a second, timed by
/// when the counts were taken, draws a steady line for a steady rate whoever reads.
#[derive(Debug, Clone)]
pub struct RateWindow {
    samples: std::collections::VecDeque<(Instant, u64)>,
}

impl RateWindow {
    pub const SPAN: std::time::Duration = std::time::Duration::from_millis(500);

    /// A window starting at `t0` with a count of 0.
    pub fn new(t0: Instant) -> RateWindow {
        RateWindow {
            samples: std::collections::VecDeque::from([(t0, 0)]),
        }
    }

    /// Adds the count taken at `at` (ignored if not newer than the last) and returns the rate
    /// per second over the newest window of at least [`RateWindow::SPAN`] (over all samples
    /// while younger).
    pub fn push(&mut self, at: Instant, count: u64) -> f64 {
        if self.samples.back().is_some_and(|b| at > b.0) {
            self.samples.push_back((at, count));
        }
        let (t1, c1) = *self.samples.back().expect("never empty");
        // Keep the newest sample at least SPAN older than the last, and what follows it.
        while self.samples.len() > 2 && t1.duration_since(self.samples[1].0) >= Self::SPAN {
            self.samples.pop_front();
        }
        let (t0, c0) = self.samples[0];
        let dt = t1.duration_since(t0).as_secs_f64();
        if dt <= 0.0 {
            return 0.0;
        }
        c1.saturating_sub(c0) as f64 / dt
    }
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
            link: Arc::default(),
            rates: Mutex::new(vec![(RateWindow::new(now), RateWindow::new(now)); names.len()]),
            names,
            ids,
            loops,
            rx,
            t0: now,
        }
    }

    /// Calls `f` with stream `stream`'s live counters in every loop that sends it (each lane
    /// of a split stream); false if the profile has no such stream.
    fn each_lane(&self, stream: usize, f: impl Fn(&crate::live::StreamLive)) -> bool {
        let mut found = false;
        for (live, map) in &self.loops {
            for (i, _) in map.iter().enumerate().filter(|(_, &m)| m == stream) {
                f(&live.streams[i]);
                found = true;
            }
        }
        found
    }

    /// Pauses or resumes stream `stream` of the profile in every loop that sends it; false if
    /// the profile has no such stream.
    pub fn pause(&self, stream: usize, on: bool) -> bool {
        self.each_lane(stream, |l| l.paused.store(on, std::sync::atomic::Ordering::Relaxed))
    }

    /// Multiplies stream `stream`'s rate by `k` in every loop that sends it (each lane of a
    /// split stream by the same factor), and tells the meter; false if no such stream.
    pub fn scale_rate(&self, stream: usize, k: f64) -> bool {
        let found = self.each_lane(stream, |l| l.scale_rate(k));
        if found {
            self.tell_meter(stream);
        }
        found
    }

    /// Stream `stream`'s frames come from `variants` from its next departure on, in every
    /// loop that sends it; false if no such stream.
    pub fn replace_variants(&self, stream: usize, variants: &[gapless_core::packet::variant::Variant]) -> bool {
        let found = self.each_lane(stream, |l| {
            *l.variants.lock().unwrap_or_else(|p| p.into_inner()) = Some(variants.to_vec());
            l.variants_pending.store(true, std::sync::atomic::Ordering::Release);
        });
        if found {
            self.tell_meter(stream);
        }
        found
    }

    /// The meter's precision reference for `stream` no longer holds.
    fn tell_meter(&self, stream: usize) {
        if let Some(rx) = &self.rx {
            rx.rate_changed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(self.ids[stream]);
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
                t.paused |= c.paused;
            }
        }
        sums
    }

    pub fn snapshot(&self) -> Snapshot {
        let now = Instant::now();
        let tx = self.tx();
        let published = self.rx.as_ref().map(|r| r.published());
        let rx_at = published.as_ref().and_then(|p| p.0);
        let rx_streams = published.map(|p| p.1);
        let mut rates = self.rates.lock().unwrap_or_else(|p| p.into_inner());
        let mut streams = Vec::with_capacity(tx.len());
        let mut total = StreamSnapshot {
            name: "total".into(),
            ..Default::default()
        };
        for (i, c) in tx.iter().enumerate() {
            let (w_tx, w_rx) = &mut rates[i];
            let tx = TxSnapshot {
                sent: c.sent,
                bytes: c.bytes,
                rate_pps: w_tx.push(now, c.sent),
                lag_ns: c.lag_ns,
                late_over_gap: c.late_over_gap,
                paused: c.paused,
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
                    loss_episodes: s.loss_episodes,
                    longest_outage_ns: s.longest_outage_ns,
                    latency_p50_ns: s.latency_p50_ns,
                    latency_p99_ns: s.latency_p99_ns,
                    latency_p99_9_ns: s.latency_p99_9_ns,
                    rate_pps: w_rx.push(rx_at.unwrap_or(now), s.received),
                    ports: s.ports.clone(),
                });
            add(&mut total, &tx, rx.as_ref());
            streams.push(StreamSnapshot {
                name: self.names[i].clone(),
                tx,
                rx,
            });
        }
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
        a.loss_episodes += r.loss_episodes;
        a.longest_outage_ns = a.longest_outage_ns.max(r.longest_outage_ns);
        a.rate_pps += r.rate_pps;
        if a.ports.len() < r.ports.len() {
            a.ports.resize(r.ports.len(), 0);
        }
        for (t, n) in a.ports.iter_mut().zip(&r.ports) {
            *t += n;
        }
    }
}

#[cfg(test)]
mod rate_tests {
    use super::RateWindow;
    use std::time::{Duration, Instant};

    /// What the dashboard's RX line saw: the meter publishes its count when 100 ms have
    /// passed at its next poll, so about every 120 ms here (1000 frames/s, steady, no loss);
    /// the event stream reads every 200 ms, and a checkpoint reads once a second, 10 ms before
    /// one of the stream's reads. (reader, read time, the count published last and when), 5 s.
    fn reads() -> Vec<(&'static str, Duration, u64, Duration)> {
        let mut out = Vec::new();
        for ms in (205..5000u64).step_by(200) {
            if ms % 1000 == 5 {
                out.push(("checkpoint", ms - 10));
            }
            out.push(("events", ms));
        }
        out.into_iter()
            .map(|(who, ms)| {
                let published = ms / 120 * 120; // the last publication before the read
                (
                    who,
                    Duration::from_millis(ms),
                    published,
                    Duration::from_millis(published),
                )
            })
            .collect()
    }

    #[test]
    fn one_previous_snapshot_shared_by_readers_dips_and_the_window_does_not() {
        let t0 = Instant::now();
        // The old way: the count now against the previous snapshot's, whoever took it.
        let (mut prev_t, mut prev_c, mut old) = (Duration::ZERO, 0u64, Vec::new());
        for (who, at, count, _) in reads() {
            let rate = (count - prev_c) as f64 / (at - prev_t).as_secs_f64();
            (prev_t, prev_c) = (at, count);
            if who == "events" && at > Duration::from_millis(600) {
                old.push(rate);
            }
        }
        let low = old.iter().cloned().fold(f64::MAX, f64::min);
        assert!(
            low < 600.0,
            "expected the old rates to dip well below 1000/s (the cause); lowest {low}"
        );
        // The window, timed by each count's publication.
        let mut w = RateWindow::new(t0);
        for (who, at, count, published) in reads() {
            let rate = w.push(t0 + published, count);
            if who == "events" && at > Duration::from_millis(600) {
                assert!(
                    (rate - 1000.0).abs() < 1.0,
                    "expected 1000 frames/s at {at:?} ({who}); got {rate}"
                );
            }
        }
    }
}
