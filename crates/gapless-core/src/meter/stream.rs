//! One stream's meter: counts, sequence, latency, inter-arrival, rate jitter, IPDV and a
//! per-second series. Fed one frame at a time in arrival order; no allocation per frame.

use super::lazy::LazyHist;
use super::reference::{self, Departures, GapReference};
use super::report::{hist_b64, InterArrivalSummary, IpdvSummary, LatencySummary, Percentiles, SecondPoint, StreamRx};
use super::seq::{SeqEvent, SeqTracker};
use super::signed::SignedHist;
use super::windows::Windows;
use super::MeterConfig;

pub use super::windows::RATE_WINDOWS;
/// A gap between two arrivals longer than this is a jump of the clock (or of the capture),
/// counted and warned about.
pub const TIME_JUMP_NS: u64 = 3_600_000_000_000;

struct Second {
    idx: u64,
    rx: u64,
    bytes: u64,
    expected_before: u64,
    unique_before: u64,
    lat: SignedHist,
    lat_min: i64,
    lat_max: i64,
}

/// RX − TX − offset, saturated into i64. Stamps and offset under 2^62 (146 years of ns) can't
/// overflow i64; stamps from a hostile capture may be anything, and go through i128.
#[inline(always)]
fn latency(ts: u64, tx_ns: u64, offset_ns: i64) -> i64 {
    if (ts | tx_ns | offset_ns.unsigned_abs()) < 1 << 62 {
        return ts as i64 - tx_ns as i64 - offset_ns;
    }
    (i128::from(ts) - i128::from(tx_ns) - i128::from(offset_ns)).clamp(i128::from(i64::MIN), i128::from(i64::MAX))
        as i64
}

/// A stream's gap reference as the meter follows it.
enum Reference {
    TargetGap,
    Schedule {
        deps: Box<Departures>,
        /// The last frame's (sequence number, arrival, scheduled departure).
        prev: Option<(u32, u64, u64)>,
    },
    Unknown(String),
}

impl Reference {
    fn of(gaps: &GapReference, target_gap: Option<f64>) -> Reference {
        match gaps {
            GapReference::TargetGap if target_gap.is_some() => Reference::TargetGap,
            GapReference::TargetGap => Reference::Unknown("the stream has no target rate".into()),
            GapReference::Schedule(s, bytes) => Reference::Schedule {
                deps: Box::new(Departures::new((**s).clone(), *bytes)),
                prev: None,
            },
            GapReference::Unknown(why) => Reference::Unknown(why.clone()),
        }
    }

    fn name(&self) -> String {
        match self {
            Reference::TargetGap => reference::TARGET_GAP.into(),
            Reference::Schedule { .. } => reference::SCHEDULE.into(),
            Reference::Unknown(why) => format!("{}{why}", reference::NONE),
        }
    }
}

/// The meter of one stream (signed) or one 5-tuple flow (unsigned).
pub struct StreamMeter {
    pub name: String,
    pub id: Option<u16>,
    pub flow: Option<String>,
    target_gap_ns: Option<f64>,
    target_pps: Option<f64>,
    unit: u64,
    offset_ns: i64,
    latency_on: bool,
    rx: u64,
    bytes: u64,
    first_ns: u64,
    last_ns: u64,
    /// A meter on several ports: what each took (empty for one port).
    ports: Vec<super::report::PortTally>,
    /// One tracker per lane (none for an unsigned flow).
    seq: Vec<SeqTracker>,
    lanes: u32,
    // latency
    lat: Option<SignedHist>,
    lat_min: i64,
    lat_max: i64,
    lat_sum: f64,
    prev_seq_lat: Option<(u32, i64)>,
    // inter-arrival
    gaps: LazyHist,
    gap_min: u64,
    gap_max: u64,
    backwards: u64,
    jumps: u64,
    err: Option<LazyHist>,
    /// Gaps compared with their reference (all gaps for the target gap; consecutive frames
    /// for a schedule).
    err_n: u64,
    sq_sum: f64,
    bursts: u64,
    /// What the gaps are measured against, and for a schedule the last frame compared.
    reference: Reference,
    windows: Windows,
    // IPDV
    ipdv: Option<LazyHist>,
    ipdv_min: i64,
    ipdv_max: i64,
    // per second
    t0: u64,
    sec: Option<Second>,
    /// Where the current second ends (0 before the first frame).
    sec_until: u64,
    series: Vec<SecondPoint>,
    /// Its frames by the value of its metric tags (a stream with tags only).
    tags: Option<super::tags::TagTable>,
}

impl StreamMeter {
    pub(crate) fn new(
        name: String,
        id: Option<u16>,
        flow: Option<String>,
        target_pps: Option<f64>,
        cfg: &MeterConfig,
        t0: u64,
    ) -> StreamMeter {
        let signed = id.is_some();
        let target = id.and_then(|i| cfg.targets.get(&i));
        let lanes = target.map_or(1, |t| t.lanes);
        let latency_on = signed && cfg.latency;
        let target_pps = target_pps.filter(|p| *p > 0.0);
        let reference = match target {
            Some(t) => Reference::of(&t.gaps, target_pps),
            None if target_pps.is_some() => Reference::TargetGap,
            None => Reference::Unknown("the sender's profile was not given".into()),
        };
        StreamMeter {
            name,
            id,
            flow,
            target_gap_ns: target_pps.map(|p| 1e9 / p),
            target_pps,
            unit: cfg.latency_unit_ns.max(1),
            offset_ns: cfg.latency_offset_ns,
            latency_on,
            rx: 0,
            bytes: 0,
            first_ns: 0,
            last_ns: 0,
            ports: Vec::new(),
            seq: if signed {
                (0..lanes.max(1)).map(|_| SeqTracker::new()).collect()
            } else {
                Vec::new()
            },
            lanes: lanes.max(1),
            lat: latency_on.then(|| SignedHist::new(cfg.latency_unit_ns, 3)),
            lat_min: i64::MAX,
            lat_max: i64::MIN,
            lat_sum: 0.0,
            prev_seq_lat: None,
            gaps: LazyHist::new(3),
            gap_min: u64::MAX,
            gap_max: 0,
            backwards: 0,
            jumps: 0,
            err: (!matches!(reference, Reference::Unknown(_))).then(|| LazyHist::new(3)),
            err_n: 0,
            sq_sum: 0.0,
            bursts: 0,
            reference,
            windows: Windows::new(),
            ipdv: latency_on.then(|| LazyHist::new(3)),
            ipdv_min: i64::MAX,
            ipdv_max: i64::MIN,
            t0,
            sec: None,
            sec_until: 0,
            series: Vec::new(),
            tags: target
                .filter(|t| !t.tags.is_empty())
                .map(|t| super::tags::TagTable::new(t.tags.clone())),
        }
    }

    /// Counts a frame by its metric tags (after [`Self::on_frame`]; none without tags).
    #[inline]
    pub fn on_tags(&mut self, ts: u64, frame: &[u8], len: u32) {
        if let Some(t) = self.tags.as_mut() {
            t.on_frame(ts, frame, len);
        }
    }

    /// No reference from here on, and none of the gap errors measured so far (see
    /// [`crate::meter::Meter::rate_changed`]).
    pub fn drop_reference(&mut self, why: &str) {
        self.reference = Reference::Unknown(why.to_string());
        self.target_pps = None;
        self.target_gap_ns = None;
        self.err = None;
        (self.err_n, self.sq_sum, self.bursts) = (0, 0.0, 0);
    }

    /// One gap against its reference gap.
    #[inline]
    fn record_err(&mut self, gap: u64, reference: f64) {
        // `as f64` of a u64 is seven SSE2 instructions; below 2^63 (always, but for a
        // hostile capture) the signed conversion is one, and the same value.
        let g = if gap >> 63 == 0 { gap as i64 as f64 } else { gap as f64 };
        let e = g - reference;
        self.sq_sum += e * e;
        self.err_n += 1;
        if let Some(err) = self.err.as_mut() {
            // Half up, as `round` for a non-negative value, without its call; through i64:
            // one instruction, and the same value once clamped at 1000 s.
            err.record((e.abs() + 0.5) as i64 as u64);
        }
        if g < reference / 2.0 {
            self.bursts += 1;
        }
    }

    /// The gap from the previous frame against the gap between their scheduled departures,
    /// when the two are consecutive frames of the stream (a loss or a reordering skips one).
    #[inline]
    fn against_schedule(&mut self, ts: u64, seq: u32) {
        let Reference::Schedule { deps, prev } = &mut self.reference else {
            return;
        };
        let Some(d) = deps.at(u64::from(seq)) else { return };
        let last = prev.replace((seq, ts, d));
        if let Some((ps, pts, pd)) = last {
            if ps.wrapping_add(1) == seq && ts >= pts {
                self.record_err(ts - pts, d.saturating_sub(pd) as f64);
            }
        }
    }

    /// Counts a frame on port `port` of a meter on several ports (after [`Self::on_frame`]).
    #[inline]
    pub fn on_port(&mut self, port: u8, ts: u64, len: u32) {
        let p = port as usize;
        if p >= self.ports.len() {
            self.ports.resize(p + 1, Default::default());
        }
        self.ports[p].add(ts, len);
    }

    /// Takes one frame: its RX time (ns), its length at L2 without FCS, and its sequence
    /// number and TX time when it carries a signature.
    #[inline]
    pub fn on_frame(&mut self, ts: u64, len: u32, sig: Option<(u32, u64)>) {
        // Seconds on the latest time seen: a stamp that goes back stays in the current
        // second, and seconds without frames are never materialised (the series is sparse).
        // The latest time never goes back, so a new second begins only past the current one.
        let latest = ts.max(self.last_ns);
        if latest >= self.sec_until {
            self.roll_second(latest);
        }
        // Inter-arrival, in arrival order.
        if self.rx > 0 {
            let gap = if ts >= self.last_ns {
                if ts - self.last_ns > TIME_JUMP_NS {
                    self.jumps += 1;
                }
                ts - self.last_ns
            } else {
                self.backwards += 1;
                0
            };
            self.gaps.record(gap);
            self.gap_min = self.gap_min.min(gap);
            self.gap_max = self.gap_max.max(gap);
            if let (Reference::TargetGap, Some(tg)) = (&self.reference, self.target_gap_ns) {
                self.record_err(gap, tg);
            }
        } else {
            self.first_ns = ts;
        }
        self.windows.push(latest);
        self.rx += 1;
        self.bytes += u64::from(len);
        if let (Some((seq, _)), Reference::Schedule { .. }) = (sig, &self.reference) {
            self.against_schedule(ts, seq);
        }
        self.last_ns = latest;
        let sec = self.sec.as_mut().expect("rolled above");
        sec.rx += 1;
        sec.bytes += u64::from(len);

        let Some((seq, tx_ns)) = sig else { return };
        let ev = if self.seq.is_empty() {
            None
        } else {
            let l = self.lanes;
            // One lane, the usual case: no division.
            let (lane, s) = if l == 1 { (0, seq) } else { (seq % l, seq / l) };
            Some(self.seq[lane as usize].observe_at(s, ts))
        };
        if !self.latency_on {
            return;
        }
        let lat = latency(ts, tx_ns, self.offset_ns);
        self.lat_min = self.lat_min.min(lat);
        self.lat_max = self.lat_max.max(lat);
        self.lat_sum += lat as f64;
        // Both histograms have the stream's unit: the value is divided into it once.
        let units = sec.lat.units(lat);
        if let Some(h) = self.lat.as_mut() {
            debug_assert_eq!(h.unit(), sec.lat.unit());
            h.record_units(units);
        }
        sec.lat.record_units(units);
        sec.lat_min = sec.lat_min.min(lat);
        sec.lat_max = sec.lat_max.max(lat);
        // IPDV (RFC 3393) between consecutive sequence numbers.
        if !matches!(ev, Some(SeqEvent::Duplicate)) {
            if let Some((ps, pl)) = self.prev_seq_lat {
                if seq == ps.wrapping_add(self.lanes) {
                    let d = lat.saturating_sub(pl);
                    self.ipdv_min = self.ipdv_min.min(d);
                    self.ipdv_max = self.ipdv_max.max(d);
                    if let Some(h) = self.ipdv.as_mut() {
                        h.record(d.unsigned_abs());
                    }
                }
            }
            self.prev_seq_lat = Some((seq, lat));
        }
    }

    #[cold]
    fn roll_second(&mut self, latest: u64) {
        let idx = latest.saturating_sub(self.t0) / 1_000_000_000;
        self.sec_until = self.t0.saturating_add((idx + 1).saturating_mul(1_000_000_000));
        if self.sec.as_ref().is_some_and(|s| s.idx == idx) {
            // Only where the end saturated, at the end of time.
            return;
        }
        let (hi, uniq) = self.seq_state();
        let lat = match self.sec.take() {
            Some(old) => {
                let p = self.second_point(&old, hi, uniq);
                self.series.push(p);
                let mut lat = old.lat;
                lat.reset();
                lat
            }
            None => SignedHist::new(self.unit, 2),
        };
        self.sec = Some(Second {
            idx,
            rx: 0,
            bytes: 0,
            expected_before: hi,
            unique_before: uniq,
            lat,
            lat_min: i64::MAX,
            lat_max: i64::MIN,
        });
    }

    fn seq_state(&self) -> (u64, u64) {
        self.seq
            .iter()
            .fold((0, 0), |(e, u), t| (e + t.expected(), u + t.unique()))
    }

    /// The point for second `s`, given the sequence state (expected, distinct) at its end.
    fn second_point(&self, s: &Second, hi: u64, uniq: u64) -> SecondPoint {
        // Loss in a second: how far the highest number advanced, less the new numbers that
        // arrived. Reordering across a second boundary moves loss between neighbours.
        let advanced = hi - s.expected_before;
        let lost = advanced.saturating_sub(uniq - s.unique_before);
        let has_lat = self.latency_on && !s.lat.is_empty();
        let q = |p: f64| has_lat.then(|| s.lat.quantile(p, s.lat_min, s.lat_max));
        SecondPoint {
            t_s: s.idx,
            rx_frames: s.rx,
            rx_bytes: s.bytes,
            lost: (!self.seq.is_empty()).then_some(lost),
            latency_p50_ns: q(0.5),
            latency_p99_ns: q(0.99),
            latency_max_ns: has_lat.then_some(s.lat_max),
        }
    }

    /// Sequence figures, the lanes added up; first/highest as numbered on the wire.
    fn seq_summary(&self) -> Option<super::seq::SeqSummary> {
        let l = self.lanes;
        let parts: Vec<_> = self
            .seq
            .iter()
            .enumerate()
            .filter_map(|(lane, t)| {
                t.summary().map(|mut q| {
                    q.first_seq = q.first_seq.wrapping_mul(l).wrapping_add(lane as u32);
                    q.highest_seq = q.highest_seq.wrapping_mul(l).wrapping_add(lane as u32);
                    q
                })
            })
            .collect();
        super::seq::merge(&parts)
    }

    /// The loss episodes, the lanes merged by time (none for an unsigned flow).
    fn loss_episodes(&self) -> Option<super::episodes::LossEpisodes> {
        if self.seq.is_empty() {
            return None;
        }
        let lanes: Vec<_> = self.seq.iter().map(|t| t.episodes()).collect();
        let highest = self.seq.iter().map(|t| t.highest_ns()).max().unwrap_or(0);
        Some(super::episodes::summarize(&lanes, highest))
    }

    /// The running counts, cheap enough to take several times a second (no histogram is
    /// serialised): for live views while the meter runs.
    pub fn live(&self) -> super::LiveRx {
        let q = self.seq_summary();
        let eps = self.loss_episodes();
        let lat = self.lat.as_ref().filter(|h| !h.is_empty());
        super::LiveRx {
            name: self.name.clone(),
            id: self.id,
            received: self.rx,
            bytes: self.bytes,
            lost: q.as_ref().map_or(0, |q| q.lost),
            reordered: q.as_ref().map_or(0, |q| q.reordered),
            duplicated: q.as_ref().map_or(0, |q| q.duplicated),
            loss_episodes: eps.as_ref().map_or(0, |e| e.count),
            longest_outage_ns: eps.as_ref().map_or(0, |e| e.longest_ns),
            latency_p50_ns: lat.map(|h| h.quantile(0.5, self.lat_min, self.lat_max)),
            latency_p99_ns: lat.map(|h| h.quantile(0.99, self.lat_min, self.lat_max)),
            latency_p99_9_ns: lat.map(|h| h.quantile(0.999, self.lat_min, self.lat_max)),
            ports: self.ports.iter().map(|p| p.rx_frames).collect(),
            tags: self.tags.as_ref().map(super::tags::TagTable::report),
        }
    }

    /// The stream's report so far (the current second included).
    pub fn report(&self) -> StreamRx {
        let mut series = self.series.clone();
        if let Some(s) = &self.sec {
            let (hi, uniq) = self.seq_state();
            series.push(self.second_point(s, hi, uniq));
        }
        let gaps = self.rx.saturating_sub(1);
        let span = self.last_ns - self.first_ns;
        let rate_pps = if span > 0 { gaps as f64 * 1e9 / span as f64 } else { 0.0 };
        let inter = (gaps > 0).then(|| {
            let h = self.gaps.view();
            let err = self.err.as_ref().map(|e| e.view());
            let err = err.as_deref();
            InterArrivalSummary {
                gaps,
                min_ns: self.gap_min,
                mean_ns: h.mean(),
                max_ns: self.gap_max,
                p1_ns: h.value_at_quantile(0.01),
                p50_ns: h.value_at_quantile(0.5),
                p99_ns: h.value_at_quantile(0.99),
                p99_9_ns: h.value_at_quantile(0.999),
                stddev_ns: h.stdev(),
                rate_pps,
                target_pps: self.target_pps,
                target_gap_ns: self.target_gap_ns,
                rate_error_rel: self.target_pps.map(|t| rate_pps / t - 1.0),
                mse_ns2: (self.err_n > 0).then(|| self.sq_sum / self.err_n as f64),
                burst_fraction: (self.err_n > 0).then(|| self.bursts as f64 / self.err_n as f64),
                gap_reference: self.reference.name(),
                abs_err_p50_ns: err.filter(|e| !e.is_empty()).map(|e| e.value_at_quantile(0.5)),
                abs_err_p99_ns: err.filter(|e| !e.is_empty()).map(|e| e.value_at_quantile(0.99)),
                abs_err_p99_9_ns: err.filter(|e| !e.is_empty()).map(|e| e.value_at_quantile(0.999)),
                timestamps_backwards: self.backwards,
                timestamps_jumped: self.jumps,
                histogram_unit_ns: 1,
                histogram_v2_deflate_b64: hist_b64(&h),
            }
        });
        let latency = self.lat.as_ref().filter(|h| !h.is_empty()).map(|h| {
            let u = self.unit;
            let neg = h.negatives();
            LatencySummary {
                count: h.len(),
                unit_ns: u,
                offset_subtracted_ns: self.offset_ns,
                min_ns: self.lat_min,
                mean_ns: self.lat_sum / h.len() as f64,
                max_ns: self.lat_max,
                percentiles_ns: Percentiles::of_signed(h, self.lat_min, self.lat_max),
                negative: neg,
                negative_fraction: neg as f64 / h.len() as f64,
                histogram_v2_deflate_b64: hist_b64(&h.pos.view()),
                negative_histogram_v2_deflate_b64: (neg > 0).then(|| hist_b64(&h.neg.view())),
            }
        });
        let ipdv = self.ipdv.as_ref().filter(|h| !h.is_empty()).map(|h| {
            let h = h.view();
            let max_abs = self.ipdv_min.unsigned_abs().max(self.ipdv_max.unsigned_abs());
            IpdvSummary {
                pairs: h.len(),
                min_ns: self.ipdv_min,
                max_ns: self.ipdv_max,
                max_abs_ns: max_abs,
                abs_percentiles_ns: Percentiles::of(&h, 1, max_abs),
                histogram_v2_deflate_b64: hist_b64(&h),
            }
        });
        let reference = self.target_pps.unwrap_or(rate_pps);
        StreamRx {
            name: self.name.clone(),
            id: self.id,
            flow: self.flow.clone(),
            rx_frames: self.rx,
            rx_bytes_l2: self.bytes,
            first_rx_ns: self.first_ns,
            last_rx_ns: self.last_ns,
            seq: self.seq_summary(),
            loss_episodes: self.loss_episodes(),
            rx_ports: self.ports.clone(),
            tx_sent: None,
            lost_vs_tx: None,
            warmup_frames: 0,
            latency,
            interarrival: inter,
            rate_jitter_reference: if self.target_pps.is_some() { "target" } else { "mean" }.into(),
            rate_jitter: self.windows.summary(reference),
            ipdv,
            series,
            tags: self.tags.as_ref().map(super::tags::TagTable::report),
        }
    }
}
