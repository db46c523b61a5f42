//! The result model: what one run writes (JSON). Plain data; the engine fills it.
//!
//! Holds: the result model (this file), the [`verdict`] on the schedule and the
//! [`departure_stamps`] (departure errors from kernel TX timestamps). May import `meter` and
//! `host`; no other module of the crate imports it.

pub mod departure_stamps;
pub mod verdict;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::host::Environment;
use crate::meter::report::hist_b64;
use crate::meter::MeterReport;

/// Summary of a departure-error (lateness) histogram in ns.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LatenessSummary {
    /// Frames recorded.
    pub count: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub max_ns: u64,
    /// Frames that left more than one mean gap after their scheduled time: the schedule
    /// fell behind and bursts formed.
    pub late_over_one_gap: u64,
    /// The full histogram, HdrHistogram V2 + deflate, base64.
    pub histogram_v2_deflate_b64: String,
}

impl LatenessSummary {
    pub fn from_histogram(h: &Histogram<u64>, late_over_one_gap: u64) -> LatenessSummary {
        LatenessSummary {
            count: h.len(),
            mean_ns: if h.is_empty() { 0.0 } else { h.mean() },
            p50_ns: h.value_at_quantile(0.5),
            p90_ns: h.value_at_quantile(0.9),
            p99_ns: h.value_at_quantile(0.99),
            p99_9_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
            late_over_one_gap,
            histogram_v2_deflate_b64: hist_b64(h),
        }
    }
}

/// Throughput mode: frames that left before their scheduled time because they were batched
/// with an earlier departure. The price of speed, in the sender's own numbers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EarlySummary {
    /// Departures coalesced into one send, at most.
    pub batch: u64,
    /// Frames that left early.
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Frames that left more than half a gap early: inside a burst.
    pub over_half_gap: u64,
    /// over_half_gap / frames sent.
    pub burst_fraction: f64,
    pub histogram_v2_deflate_b64: String,
}

impl EarlySummary {
    pub fn from_histogram(h: &Histogram<u64>, batch: u64, over_half_gap: u64, sent: u64) -> EarlySummary {
        EarlySummary {
            batch,
            count: h.len(),
            p50_ns: h.value_at_quantile(0.5),
            p99_ns: h.value_at_quantile(0.99),
            max_ns: h.max(),
            over_half_gap,
            burst_fraction: if sent > 0 {
                over_half_gap as f64 / sent as f64
            } else {
                0.0
            },
            histogram_v2_deflate_b64: hist_b64(h),
        }
    }
}

/// What the late policy did.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LateActions {
    /// The policy that ran: catch-up, skip or shift.
    pub policy: String,
    /// Departures found more than one gap late (each one the policy acted on).
    pub events: u64,
    /// Frames not sent (skip).
    pub skipped_frames: u64,
    /// Total time the schedule was moved later (shift).
    pub shifted_ns: u64,
}

fn one() -> u32 {
    1
}

/// Per-stream TX counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StreamTx {
    pub name: String,
    pub id: u16,
    pub sent_frames: u64,
    /// Bytes at L2 with FCS.
    pub sent_bytes_l2: u64,
    pub target_pps: f64,
    pub target_bps_l1: f64,
    /// Frames per second between the first and the last frame's actual send times.
    pub achieved_pps: f64,
    pub achieved_bps_l1: f64,
    /// (achieved - target) / target.
    pub rate_error_rel: f64,
    pub lateness: LatenessSummary,
    pub late: LateActions,
    /// Send loops (cores) the stream was split over; its sequence numbers interleave.
    #[serde(default = "one")]
    pub lanes: u32,
    /// Throughput mode (`--batch N`, N > 1) only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early: Option<EarlySummary>,
    /// The CPU cores of the send loops the stream ran on (empty: one loop, not pinned by the
    /// user).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cores: Vec<usize>,
    /// How the stream was shared out over several send loops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitSummary>,
    /// A varying or self-similar pattern: its parameters and what its schedule achieved
    /// (for self-similar traffic, the Hurst parameter measured on the departure counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<serde_json::Value>,
    /// Frames that carried the signature, when not every frame did (a replay): the meter's
    /// loss counts against these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_frames: Option<u64>,
    /// Frames sent during the warm-up (by their TX time): sent, and not metered.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warmup_frames: u64,
    /// Frames of the stream the backend refused or failed to send (not in `sent_frames`; the
    /// run's `send_errors` is their sum over the streams).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub send_errors: u64,
    /// How long the stream was paused (OTG `flow_transmit` pause), ns: its schedule moved on
    /// by this much, so the meter sees one gap this long.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub paused_ns: u64,
    /// Times its rate was changed while it ran (OTG `update_config`): the target rate above
    /// is the one it started with.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rate_changes: u64,
    /// Times its frame size was changed while it ran (OTG `update_config`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub size_changes: u64,
}

/// A stream shared out over send loops, and the precision the split kept on the TX side.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SplitSummary {
    /// "poisson" (parts at rate/k with their own seeds) or "phase" (CBR: part j sends
    /// departures j, j + k, … of the whole schedule).
    pub kind: String,
    pub parts: u32,
    /// The whole stream's mean gap between departures (ns).
    pub gap_ns: f64,
    /// Frames that left more than half a whole-stream gap late: nearer a neighbour part's
    /// slot than their own, where parts bunch up (for "phase", the split's loss of precision).
    pub late_over_half_gap: u64,
    pub late_over_half_gap_fraction: f64,
}

/// A rate-control method as it was set up for a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RateControlSetup {
    /// `software`, `nic`, `filler`, `launch-time` or `shaper`.
    pub method: String,
    /// Its parameters, as used (rates, burst, queues, lead, filler kind).
    pub params: serde_json::Value,
    /// What the system confirmed: values read back, the qdisc as `tc` shows it, counts.
    pub confirmed: Vec<String>,
}

/// One run's result file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunResult {
    pub tool: String,
    pub version: String,
    /// Wall-clock start, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// When the first departure left, ns since the Unix epoch (live runs that sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_departure_unix_ns: Option<u64>,
    pub profile_path: String,
    /// The profile as parsed.
    pub profile: serde_json::Value,
    pub seed: u64,
    pub environment: Environment,
    /// afpacket, pcap or null.
    pub backend: String,
    /// Backend detail, e.g. "sendmmsg, PACKET_QDISC_BYPASS".
    pub backend_detail: String,
    /// The rate-control method: "software-pacing" (busy-wait on the TSC) or "unpaced".
    pub rate_control: String,
    /// The rate-control method as set up: its parameters and what the system confirmed
    /// (tx_maxrate read back, the qdisc installed, fillers sent).
    #[serde(default)]
    pub rate_control_setup: RateControlSetup,
    /// Where the signature's TX timestamp comes from.
    pub tx_timestamp_source: String,
    /// Kernel or NIC TX timestamps matched to the frames (`--tx-timestamps`): the real
    /// departure error, apart from the engine's pre-send lateness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_timestamps: Option<crate::result::departure_stamps::TxStampReport>,
    /// True when the run was stopped early (Ctrl-C / SIGTERM).
    pub interrupted: bool,
    pub stop_reason: String,
    /// From the first scheduled departure to the last send.
    pub duration_ns: u64,
    pub sent_frames: u64,
    pub sent_bytes_l2: u64,
    /// Frames the backend refused or failed to send (counted, never fatal).
    pub send_errors: u64,
    /// The last per-frame send failure, e.g. "No buffer space available (os error 105)".
    pub last_send_error: Option<String>,
    pub achieved_pps: f64,
    pub achieved_bps_l1: f64,
    pub lateness: LatenessSummary,
    pub late: LateActions,
    pub streams: Vec<StreamTx>,
    /// Was the schedule held, and if not, why (measured during the run).
    #[serde(default)]
    pub verdict: crate::result::verdict::Verdict,
    /// Things the reader must know: the verdict's causes when not held, send failures, a
    /// noisy core, a calibration not used.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// What the meter received (`run --rx`), joined per stream with what was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx: Option<MeterReport>,
    /// Link and route changes the tester made during the run, as made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventRecord>,
    /// Frames the run's own link refused while a user's event held it down: counted as sent
    /// (the meter finds them lost), not as send errors.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub link_held_drops: u64,
}

/// A link or route change made during a run (the engine's `events`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Seconds after the run's start it was due.
    pub at_s: f64,
    /// The event in its text form, e.g. "1.2s link down gl-dut/gl-dut1".
    pub what: String,
    /// When the request left and when the kernel's ACK came back (CLOCK_REALTIME ns, the
    /// clock of the RX stamps): the change took effect between the two.
    pub sent_ns: u64,
    pub acked_ns: u64,
    /// What the stamp is: "the rtnetlink ACK".
    pub stamp: String,
    /// Why it failed, if it did (the run went on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How long before an outage a sender's stall still explains it: the frames it held back
/// leave in a burst when it ends, and the burst is what a device may drop.
pub const STALL_REACH_NS: u64 = 1_000_000;

/// Marks each stream's outages that the sender's own stalls explain (a stall that overlaps
/// the outage, or ends at most [`STALL_REACH_NS`] before it): `sender_stall_ns` says how
/// much stall time lies there, so the outage is not taken as the device's.
pub fn mark_sender_stalls(result: &mut RunResult) {
    let stalls: Vec<verdict::StallSpan> = result
        .verdict
        .loops
        .iter()
        .flat_map(|l| l.long_stalls.iter().copied())
        .collect();
    let Some(rx) = result.rx.as_mut() else { return };
    for o in rx
        .streams
        .iter_mut()
        .filter_map(|s| s.loss_episodes.as_mut())
        .flat_map(|e| e.outages.iter_mut())
    {
        let lo = o.from_ns.saturating_sub(STALL_REACH_NS);
        o.sender_stall_ns = stalls
            .iter()
            .map(|st| (st.from_ns + st.ns).min(o.to_ns).saturating_sub(st.from_ns.max(lo)))
            .sum();
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[cfg(test)]
mod stall_tests {
    use super::*;
    use crate::meter::episodes::{LossEpisodes, Outage};
    use crate::meter::report::StreamRx;

    #[test]
    fn an_outage_right_after_a_sender_stall_is_marked_and_one_far_from_it_is_not() {
        let outage = |from_ns, to_ns| Outage {
            from_ns,
            to_ns,
            frames: 100,
            sender_stall_ns: 0,
        };
        let mut r = RunResult::default();
        r.verdict.loops = vec![verdict::LoopHealth {
            long_stalls: vec![verdict::StallSpan {
                from_ns: 10_000_000,
                ns: 5_000_000,
            }],
            ..Default::default()
        }];
        let eps = LossEpisodes {
            // 0.5 ms after the stall ended (its burst), and 1 s later.
            outages: vec![outage(15_500_000, 20_000_000), outage(1_000_000_000, 1_010_000_000)],
            ..Default::default()
        };
        r.rx = Some(MeterReport {
            streams: vec![StreamRx {
                loss_episodes: Some(eps),
                ..Default::default()
            }],
            ..Default::default()
        });
        mark_sender_stalls(&mut r);
        let got: Vec<u64> = r.rx.unwrap().streams[0]
            .loss_episodes
            .as_ref()
            .unwrap()
            .outages
            .iter()
            .map(|o| o.sender_stall_ns)
            .collect();
        assert_eq!(
            got,
            vec![500_000, 0],
            "the stall's last 0.5 ms reach the first outage; the second is the device's"
        );
    }
}
