//! What the meter reports (JSON). Names follow the papers: accuracy (mean rate against the
//! target), precision (MSE of inter-arrival times against the target gap, ns²), rate jitter
//! (max/min/avg rate over windows of packets), IPDV (RFC 3393).

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::classify::ForeignCounts;
use super::seq::SeqSummary;

/// The quantiles every latency report gives.
pub const QUANTILES: [(f64, &str); 7] = [
    (0.5, "50"),
    (0.9, "90"),
    (0.99, "99"),
    (0.999, "99.9"),
    (0.9999, "99.99"),
    (0.99999, "99.999"),
    (0.999999, "99.9999"),
];

/// Serializes a histogram: HdrHistogram V2 + deflate, base64.
pub fn hist_b64(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    let _ = V2DeflateSerializer::new().serialize(h, &mut buf);
    base64::engine::general_purpose::STANDARD.encode(buf)
}

/// Reads a histogram written by [`hist_b64`].
pub fn hist_from_b64(s: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|e| format!("histogram: not base64: {e}"))?;
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| format!("histogram: not an HdrHistogram V2 encoding: {e:?}"))
}

/// Percentiles 50 … 99.9999, in ns.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub p99_9: i64,
    pub p99_99: i64,
    pub p99_999: i64,
    pub p99_9999: i64,
}

impl Percentiles {
    /// From a histogram whose values are in `unit` ns. Each is the highest value equivalent to
    /// the recorded ones at that rank (HdrHistogram's rule), so it never understates, capped
    /// at the exact maximum `max_ns`.
    pub fn of(h: &Histogram<u64>, unit: u64, max_ns: u64) -> Percentiles {
        Self::from_quantiles(|p| (h.highest_equivalent(h.value_at_quantile(p)) * unit).min(max_ns) as i64)
    }

    /// From a signed histogram (see [`super::signed`] for the never-understated rule),
    /// clamped to the exact min and max.
    pub fn of_signed(h: &super::signed::SignedHist, min_ns: i64, max_ns: i64) -> Percentiles {
        Self::from_quantiles(|p| h.quantile(p, min_ns, max_ns))
    }

    fn from_quantiles(q: impl Fn(f64) -> i64) -> Percentiles {
        Percentiles {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p99_9: q(0.999),
            p99_99: q(0.9999),
            p99_999: q(0.99999),
            p99_9999: q(0.999999),
        }
    }

    pub fn as_list(&self) -> [(&'static str, i64); 7] {
        [
            ("50", self.p50),
            ("90", self.p90),
            ("99", self.p99),
            ("99.9", self.p99_9),
            ("99.99", self.p99_99),
            ("99.999", self.p99_999),
            ("99.9999", self.p99_9999),
        ]
    }
}

/// One-way latency: RX timestamp - the signature's TX timestamp - the calibrated offset.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    /// The histogram's resolution: values are recorded in units of this many ns.
    pub unit_ns: u64,
    /// The calibration offset subtracted from every latency (0 without calibration).
    pub offset_subtracted_ns: i64,
    /// Exact, not from the histogram.
    pub min_ns: i64,
    pub mean_ns: f64,
    pub max_ns: i64,
    pub percentiles_ns: Percentiles,
    /// Latencies below zero (after a calibration offset, or clocks out of step). They are
    /// kept: in the percentiles, and in their own histogram of magnitudes.
    pub negative: u64,
    #[serde(default)]
    pub negative_fraction: f64,
    /// Values ≥ 0, in `unit_ns` units (⌈v / unit⌉).
    pub histogram_v2_deflate_b64: String,
    /// Magnitudes of the values < 0, in `unit_ns` units (⌊|v| / unit⌋).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub negative_histogram_v2_deflate_b64: Option<String>,
}

/// Inter-arrival times and the precision figures against the target gap.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct InterArrivalSummary {
    pub gaps: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub max_ns: u64,
    pub p1_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub stddev_ns: f64,
    /// (frames - 1) / (last - first arrival).
    pub rate_pps: f64,
    pub target_pps: Option<f64>,
    pub target_gap_ns: Option<f64>,
    /// Accuracy: rate_pps / target - 1.
    pub rate_error_rel: Option<f64>,
    /// What the gap errors below are measured against: `target gap` (CBR), `schedule (...)`
    /// (each gap against its frames' scheduled gap, any other pattern the meter can follow),
    /// or `none: <why>` (no precision figures then).
    #[serde(default)]
    pub gap_reference: String,
    /// Precision: mean of (gap - reference gap)², ns².
    pub mse_ns2: Option<f64>,
    /// Gaps under half the target gap.
    pub burst_fraction: Option<f64>,
    /// |gap - target gap| percentiles.
    pub abs_err_p50_ns: Option<u64>,
    pub abs_err_p99_ns: Option<u64>,
    pub abs_err_p99_9_ns: Option<u64>,
    /// Arrivals stamped earlier than the one before (taken as gap 0).
    pub timestamps_backwards: u64,
    /// Gaps of more than an hour between two arrivals: the clock or the capture jumped.
    #[serde(default)]
    pub timestamps_jumped: u64,
    pub histogram_unit_ns: u64,
    pub histogram_v2_deflate_b64: String,
}

/// Rate over sliding windows of `packets` consecutive arrivals ((packets - 1) gaps each).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WindowRate {
    pub packets: u64,
    pub windows: u64,
    pub min_pps: f64,
    pub avg_pps: f64,
    pub max_pps: f64,
    /// In % of the reference rate (the target, or the mean rate without one).
    pub min_pct: f64,
    pub avg_pct: f64,
    pub max_pct: f64,
}

/// Inter-packet delay variation between consecutive sequence numbers (RFC 3393 / RFC 5481).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IpdvSummary {
    pub pairs: u64,
    pub min_ns: i64,
    pub max_ns: i64,
    pub max_abs_ns: u64,
    /// Percentiles of |IPDV|.
    pub abs_percentiles_ns: Percentiles,
    pub histogram_v2_deflate_b64: String,
}

/// One second of a stream (seconds without frames are left out).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SecondPoint {
    /// Seconds since the meter's first frame.
    pub t_s: u64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Sequence numbers that the highest one passed in this second and that did not arrive.
    pub lost: Option<u64>,
    pub latency_p50_ns: Option<i64>,
    pub latency_p99_ns: Option<i64>,
    pub latency_max_ns: Option<i64>,
}

/// What the meter saw of one stream (or unsigned flow).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StreamRx {
    pub name: String,
    /// The signature's stream id; none for an unsigned flow.
    pub id: Option<u16>,
    /// The 5-tuple of an unsigned flow.
    pub flow: Option<String>,
    pub rx_frames: u64,
    /// Bytes at L2 without FCS, as captured.
    pub rx_bytes_l2: u64,
    /// First and last arrival, ns on the RX clock.
    pub first_rx_ns: u64,
    pub last_rx_ns: u64,
    pub seq: Option<SeqSummary>,
    /// Runs of missing frames, with the arrival gap around each (`meter::episodes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_episodes: Option<crate::meter::episodes::LossEpisodes>,
    /// A meter on several ports: the frames each port took, in the report's `rx_ports`
    /// order (empty for one port).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rx_ports: Vec<PortTally>,
    /// Frames the sender sent (joined runs only).
    pub tx_sent: Option<u64>,
    /// Sent - distinct received (joined runs only): includes loss after the last arrival.
    /// With a warm-up, both counts are of the frames sent after it.
    pub lost_vs_tx: Option<i64>,
    /// Frames sent during the warm-up (told apart by their TX time): received, counted
    /// here, and not metered.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warmup_frames: u64,
    pub latency: Option<LatencySummary>,
    pub interarrival: Option<InterArrivalSummary>,
    /// "target" or "mean": what the rate-jitter percentages are relative to.
    pub rate_jitter_reference: String,
    pub rate_jitter: Vec<WindowRate>,
    pub ipdv: Option<IpdvSummary>,
    pub series: Vec<SecondPoint>,
    /// A stream with metric tags: its frames by their value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<crate::meter::tags::TagsRx>,
}

/// What one of a meter's several ports took of a stream.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PortTally {
    pub rx_frames: u64,
    /// Bytes at L2 without FCS, as captured.
    pub rx_bytes_l2: u64,
    /// First and last arrival on this port, ns on the RX clock (0 when none came).
    pub first_rx_ns: u64,
    pub last_rx_ns: u64,
}

impl PortTally {
    #[inline]
    pub fn add(&mut self, ts: u64, len: u32) {
        if self.rx_frames == 0 {
            self.first_rx_ns = ts;
        }
        self.rx_frames += 1;
        self.rx_bytes_l2 += u64::from(len);
        self.last_rx_ns = self.last_rx_ns.max(ts);
    }
}

/// The capture's own counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CaptureStats {
    /// How frames were captured: the socket, its ring and mode (empty for files).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub method: String,
    /// Frames the meter read.
    pub frames: u64,
    /// Frames the kernel dropped because the meter's ring was full (PACKET_STATISTICS);
    /// none for files.
    pub kernel_drops: Option<u64>,
    /// Times the ring was frozen by a full queue.
    pub freeze_count: Option<u64>,
    /// Frames that came without a kernel stamp and were stamped when the meter read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_stamped: Option<u64>,
    /// Who stamped the frames: "kernel", "nic", "xdp-metadata", "xdp-prefix" or "socket"
    /// (the meter as it read them); empty for files.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stamp: String,
    /// Frames captured short of their length on the wire (a snap length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<CutFrames>,
}

/// Frames cut to a snap length, and by how much.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CutFrames {
    pub frames: u64,
    /// Bytes captured of a cut frame: the least and the most.
    pub captured_min: u64,
    pub captured_max: u64,
    /// Bytes missing from a cut frame: the least and the most.
    pub missing_min: u64,
    pub missing_max: u64,
}

impl CutFrames {
    pub fn note(&mut self, captured: u64, wire: u64) {
        let missing = wire - captured;
        if self.frames == 0 {
            (self.captured_min, self.missing_min) = (captured, missing);
        }
        self.frames += 1;
        self.captured_min = self.captured_min.min(captured);
        self.captured_max = self.captured_max.max(captured);
        self.missing_min = self.missing_min.min(missing);
        self.missing_max = self.missing_max.max(missing);
    }

    /// What a reader must know of the cut frames.
    pub fn warning(&self) -> String {
        format!(
            "{} frames were captured short of their length (a snap length: {}..{} B captured, {}..{} B missing). Frames whose signature was cut off were metered by their 5-tuple from the headers present: counts, rates and inter-arrival times, but no loss or latency. Fix: capture at least the whole frame (e.g. tcpdump -s 0) to meter them as streams",
            self.frames, self.captured_min, self.captured_max, self.missing_min, self.missing_max
        )
    }
}

/// The calibration a result used.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CalibrationRef {
    pub path: String,
    pub created_unix_ns: u64,
    pub latency_offset_ns: i64,
    /// The precision floor measured over the direct link: what this setup cannot resolve.
    pub floor_abs_err_p50_ns: u64,
    pub floor_abs_err_p99_ns: u64,
    pub floor_mse_ns2: f64,
    pub floor_latency_p99_minus_p50_ns: u64,
    /// The RX stamps the calibration was made with: its offset holds for these only.
    #[serde(default)]
    pub rx_timestamp_source: String,
    /// Whether the calibration passed its own checks, and why not.
    #[serde(default = "yes")]
    pub valid: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_reason: Option<String>,
    /// Whether its offset was subtracted from the latencies (an invalid one is not, unless
    /// asked with --use-invalid-calibration).
    #[serde(default = "yes")]
    pub subtracted: bool,
}

fn yes() -> bool {
    true
}

impl CalibrationRef {
    /// A warning when a live run stamps frames differently from the calibration (another
    /// RX backend, XDP attach mode or timestamp kind): the offset would not apply.
    pub fn mismatch(&self, rx_timestamp_source: &str) -> Option<String> {
        (!self.rx_timestamp_source.is_empty() && self.rx_timestamp_source != rx_timestamp_source).then(|| {
            format!(
                "the calibration {} was made with other RX stamps ({}) than this run ({}): its latency offset and floor do not apply. Fix: calibrate with the same --rx-backend, --xdp-attach, --xdp-stamp and --timestamps",
                self.path, self.rx_timestamp_source, rx_timestamp_source
            )
        })
    }
}

/// One meter's report.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MeterReport {
    pub tool: String,
    pub version: String,
    /// Wall-clock start of the meter, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// "iface gl-rx0 (netns gl-rx)", "pcap FILE", "csv FILE".
    pub source: String,
    /// E.g. "kernel software (SO_TIMESTAMPING RX_SOFTWARE, CLOCK_REALTIME)".
    pub rx_timestamp_source: String,
    /// Where the latency's other end comes from.
    pub tx_timestamp_source: String,
    pub latency_enabled: bool,
    pub calibration: Option<CalibrationRef>,
    pub interrupted: bool,
    /// From the first to the last frame, ns.
    pub duration_ns: u64,
    pub capture: CaptureStats,
    pub foreign: ForeignCounts,
    /// Filler frames received (rate_control = "filler"; a device under test should have
    /// dropped them): counted apart, never as loss or foreign traffic.
    #[serde(default)]
    pub fillers: u64,
    /// Signed frames sent during the warm-up: received and counted, not metered.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warmup_frames: u64,
    pub streams: Vec<StreamRx>,
    /// A meter on several ports: where each read (as `source` names one), in the order
    /// of the streams' `rx_ports`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rx_ports: Vec<String>,
    /// The host that metered (or analysed): name, kernel, CPU, interface, driver, netns.
    #[serde(default)]
    pub environment: crate::host::Environment,
    /// Things the reader should know (a truncated capture, capture drops, ...).
    pub warnings: Vec<String>,
    /// Can the meter's figures be trusted as a picture of what arrived?
    #[serde(default)]
    pub verdict: MeterVerdict,
}

/// The meter's own verdict: whether it saw everything that arrived, stamped in order.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MeterVerdict {
    /// "complete", or "INCOMPLETE" when the meter missed frames or stamped them badly.
    pub measurement: String,
    pub complete: bool,
    pub reasons: Vec<String>,
    /// Who stamped the frames (the capture's `stamp`): "kernel", "nic", "xdp-metadata",
    /// "xdp-prefix", or "socket" when the meter stamped every frame as it read it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rx_stamp: String,
}

impl MeterVerdict {
    /// Judges a finished report: capture drops, frames the meter stamped itself, timestamps
    /// out of order, a capture cut short or a meter that failed.
    pub fn of(r: &MeterReport, failed: Option<&str>) -> MeterVerdict {
        let mut reasons = Vec::new();
        if let Some(d) = r.capture.kernel_drops.filter(|&d| d > 0) {
            reasons.push(format!(
                "the capture dropped {d} frames (ring full): counts and loss understate what arrived"
            ));
        }
        if let Some(u) = r.capture.user_stamped.filter(|&u| u > 0) {
            reasons.push(format!(
                "{u} frames were stamped by the meter, not the kernel: their timing includes the meter's delay"
            ));
        }
        let back: u64 = r
            .streams
            .iter()
            .filter_map(|s| s.interarrival.as_ref())
            .map(|i| i.timestamps_backwards)
            .sum();
        if back > 0 {
            reasons.push(format!("{back} frames were stamped earlier than the frame before them: inter-arrival figures take those gaps as 0"));
        }
        if let Some(e) = failed {
            reasons.push(format!("the meter failed: {e}"));
        }
        let complete = reasons.is_empty();
        MeterVerdict {
            measurement: if complete { "complete" } else { "INCOMPLETE" }.into(),
            complete,
            reasons,
            rx_stamp: r.capture.stamp.clone(),
        }
    }

    /// The lines a meter summary ends with.
    pub fn text(&self) -> String {
        if self.measurement.is_empty() {
            return String::new();
        }
        let mut s = if self.complete {
            "measurement: complete (no capture drops, every frame kernel-stamped in order)\n".to_string()
        } else {
            "measurement: INCOMPLETE — the meter's figures do not cover everything that arrived\n".to_string()
        };
        for r in &self.reasons {
            s.push_str(&format!("  cause: {r}\n"));
        }
        if !self.rx_stamp.is_empty() {
            s.push_str(&format!("  RX stamps: {}\n", self.rx_stamp));
        }
        s
    }
}

/// A calibration file: what a direct link (no device under test) measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// Always "gapless-calibration".
    pub kind: String,
    pub version: String,
    pub created_unix_ns: u64,
    pub hostname: String,
    pub tx_iface: String,
    pub rx_iface: String,
    pub rx_timestamp_source: String,
    pub rate_pps: f64,
    pub frames: u64,
    pub lost: u64,
    /// The median one-way latency over the direct link: the tool's systematic offset, which
    /// later runs subtract.
    pub latency_offset_ns: i64,
    pub latency_min_ns: i64,
    pub latency_p99_ns: u64,
    /// The precision floor: inter-arrival error the setup itself adds to a perfect CBR.
    pub floor_abs_err_p50_ns: u64,
    pub floor_abs_err_p99_ns: u64,
    pub floor_mse_ns2: f64,
    /// Latency spread the setup adds (p99 - p50).
    pub floor_latency_p99_minus_p50_ns: u64,
    /// False when the calibration failed its own checks ([`Calibration::judge`]): later runs
    /// then warn and subtract nothing unless asked.
    #[serde(default = "yes")]
    pub valid: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_reason: Option<String>,
}

impl Calibration {
    pub const KIND: &'static str = "gapless-calibration";

    /// From the meter's report of a calibration run (one stream).
    pub fn from_stream(s: &StreamRx) -> Result<Calibration, String> {
        let lat = s
            .latency
            .as_ref()
            .ok_or("no latency measured: the frames carried no signature, or the clocks were not comparable")?;
        let ia = s.interarrival.as_ref().ok_or("fewer than two frames arrived")?;
        Ok(Calibration {
            kind: Self::KIND.into(),
            rate_pps: ia.target_pps.unwrap_or(ia.rate_pps),
            frames: s.rx_frames,
            lost: s.seq.as_ref().map_or(0, |q| q.lost),
            latency_offset_ns: lat.percentiles_ns.p50,
            latency_min_ns: lat.min_ns,
            latency_p99_ns: lat.percentiles_ns.p99.max(0) as u64,
            floor_abs_err_p50_ns: ia.abs_err_p50_ns.unwrap_or(0),
            floor_abs_err_p99_ns: ia.abs_err_p99_ns.unwrap_or(0),
            floor_mse_ns2: ia.mse_ns2.unwrap_or(0.0),
            floor_latency_p99_minus_p50_ns: (lat.percentiles_ns.p99 - lat.percentiles_ns.p50).max(0) as u64,
            valid: true,
            ..Default::default()
        })
    }

    /// Largest precision floor (|err| p50) a valid calibration may have, as a share of its
    /// gap: a floor above it means the setup could not hold the calibration's own schedule.
    pub const MAX_FLOOR_OF_GAP: f64 = 0.01;

    /// Checks the calibration against what it is for: no loss, a precision floor under 1 %
    /// of its gap, and a schedule that was held (`held`, from the run's verdict). Marks it
    /// invalid with every reason otherwise.
    pub fn judge(&mut self, held: Option<bool>) {
        let mut why = Vec::new();
        if self.lost > 0 {
            why.push(format!("{} frames were lost over a direct link", self.lost));
        }
        let gap = 1e9 / self.rate_pps.max(1e-9);
        if self.floor_abs_err_p50_ns as f64 > Self::MAX_FLOOR_OF_GAP * gap {
            why.push(format!(
                "its precision floor |err| p50 of {} ns is above 1 % of its {:.0} ns gap",
                self.floor_abs_err_p50_ns, gap
            ));
        }
        if held == Some(false) {
            why.push("the sender did not hold the calibration's schedule".into());
        }
        self.valid = why.is_empty();
        self.invalid_reason = (!why.is_empty()).then(|| why.join("; "));
    }

    /// What a result that used this calibration records.
    pub fn reference(&self, path: &str) -> CalibrationRef {
        CalibrationRef {
            path: path.into(),
            created_unix_ns: self.created_unix_ns,
            latency_offset_ns: self.latency_offset_ns,
            floor_abs_err_p50_ns: self.floor_abs_err_p50_ns,
            floor_abs_err_p99_ns: self.floor_abs_err_p99_ns,
            floor_mse_ns2: self.floor_mse_ns2,
            floor_latency_p99_minus_p50_ns: self.floor_latency_p99_minus_p50_ns,
            rx_timestamp_source: self.rx_timestamp_source.clone(),
            valid: self.valid,
            invalid_reason: self.invalid_reason.clone(),
            subtracted: true,
        }
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
