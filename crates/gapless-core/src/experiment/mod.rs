//! Experiments as data, run without IO: which trials to run (RFC 2544 searches, sweeps,
//! repetitions), which to run again because the sender fell behind, and the figures across
//! repetitions. A [`Trials`] implementation runs each trial (the engine on real sockets;
//! tests on a fake device).
//!
//! Holds: the experiment spec, the driver, the RFC 2544 [`search`] and the [`stats`] across
//! repetitions. May import `spec` and `meter`; nothing imports it but the front ends.

pub mod directions;
pub mod mlr;
pub mod ports;
pub mod rfc2889;
pub mod search;
pub mod stats;

mod drive;
mod drive_rfc2889;
mod sender;
pub mod spec;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::experiment::search::SearchResult;
use crate::experiment::stats::{Estimate, Spread};
use crate::meter::report::LatencySummary;
use crate::spec::{PatternKind, ProfileSpec, SizeSpec};

pub use drive::run;
pub use spec::{ExperimentSpec, Method, Param, Rfc2544Test, Setting, TrialSpec};

/// One trial to run: the profile's streams with these settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialPlan {
    /// What the trial is for ("throughput 64 B, loss ≤ 0 %", "sweep burst 4 at 20000 pps").
    pub purpose: String,
    /// Total frame rate over the streams (split equally); None: the profile's.
    pub rate_pps: Option<f64>,
    pub size: Option<u32>,
    pub burst: Option<u32>,
    pub pattern: Option<PatternKind>,
    /// Metered seconds (after the warm-up); with `count`, the frames instead.
    pub duration_s: f64,
    pub warmup_s: f64,
    /// Frames per stream instead of a duration (back-to-back bursts).
    pub count: Option<u64>,
    pub seed: u64,
    /// An iteration of RFC 2889's address tests instead of the profile's streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learning: Option<rfc2889::LearningPlan>,
    /// Only these directions send, each at its own rate (RFC 2889's congestion control);
    /// empty: every direction, `rate_pps` split evenly over the streams.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loads: Vec<DirectionLoad>,
}

/// A direction that sends in a trial, and its rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DirectionLoad {
    /// Indices into the experiment's ports.
    pub from: usize,
    pub to: usize,
    pub pps: f64,
}

impl TrialPlan {
    /// The profile for this trial over several ports, `stream_dirs` giving each stream's
    /// (from, to): with `loads`, only the loaded directions' streams, each direction's rate
    /// split over its streams; else [`TrialPlan::apply`]. Also the kept streams' indices in
    /// `base` (their signature ids stay theirs).
    pub fn apply_loads(&self, base: &ProfileSpec, stream_dirs: &[(usize, usize)]) -> (ProfileSpec, Vec<usize>) {
        let mut p = self.apply(base);
        if self.loads.is_empty() {
            let all = (0..p.streams.len()).collect();
            return (p, all);
        }
        let load = |k: usize| {
            let d = stream_dirs.get(k)?;
            self.loads.iter().find(|l| (l.from, l.to) == *d)
        };
        let kept: Vec<usize> = (0..p.streams.len()).filter(|&k| load(k).is_some()).collect();
        let mut streams = Vec::with_capacity(kept.len());
        for &k in &kept {
            let l = load(k).expect("kept");
            let same = kept.iter().filter(|&&j| stream_dirs[j] == stream_dirs[k]).count();
            let mut s = p.streams[k].clone();
            let t = &mut s.timing;
            (t.rate_pps, t.rate_bps_l1, t.rate_bps_l2, t.rate_pct) = (Some(l.pps / same as f64), None, None, None);
            streams.push(s);
        }
        p.streams = streams;
        (p, kept)
    }

    /// The profile for this trial: every stream gets the settings.
    pub fn apply(&self, base: &ProfileSpec) -> ProfileSpec {
        let mut p = base.clone();
        p.seed = Some(self.seed);
        let n = p.streams.len().max(1) as f64;
        p.duration_s = None;
        for s in &mut p.streams {
            let t = &mut s.timing;
            if let Some(r) = self.rate_pps {
                (t.rate_pps, t.rate_bps_l1, t.rate_bps_l2, t.rate_pct) = (Some(r / n), None, None, None);
            }
            if let Some(sz) = self.size {
                s.size = Some(SizeSpec::Fixed(sz));
            }
            if let Some(b) = self.burst {
                t.burst = (b > 1).then_some(b);
            }
            if let Some(pat) = self.pattern {
                t.pattern = pat;
            }
            match self.count {
                Some(c) => (t.count, t.duration_s) = (Some(c), None),
                None => (t.count, t.duration_s) = (None, Some(self.warmup_s + self.duration_s)),
            }
        }
        p
    }
}

/// What a trial's run gave: the runner fills these in.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialRun {
    /// Frames sent after the warm-up (the ones metered), and all of them.
    pub sent: u64,
    pub sent_total: u64,
    /// Distinct frames received after the warm-up.
    pub received: u64,
    /// Frames sent in the warm-up (the sender's count) and received in it (the meter's).
    pub warmup_sent: u64,
    pub warmup_received: u64,
    /// Frames that left more than one gap late (paced runs).
    pub late_over_gap: u64,
    /// The latest any frame left (paced runs): a stall that long sent the frames due in it
    /// back to back.
    #[serde(default)]
    pub late_max_ns: u64,
    /// The time the send loop's busy-wait was stalled in all (the verdict's stalls): the
    /// frames due meanwhile were held back, and near a device's capacity its queue does not
    /// drain between them.
    #[serde(default)]
    pub stall_ns: u64,
    /// The run's verdict: "held", or why not.
    pub schedule: String,
    pub held: bool,
    /// Received frames per second over the metered part.
    pub rx_pps: Option<f64>,
    pub latency: Option<LatencySummary>,
    /// The run's warnings.
    pub warnings: Vec<String>,
    /// Each direction's figures (experiments over several ports; the fields above are
    /// their aggregate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directions: Vec<directions::DirectionRun>,
    /// RFC 2889's address tests: test frames flooded to the monitor port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flooded: Option<u64>,
}

/// A trial as the result keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    pub index: usize,
    pub plan: TrialPlan,
    #[serde(flatten)]
    pub run: TrialRun,
    /// (sent − received) / sent, percent.
    pub loss_pct: f64,
    /// Share of the frames sent more than one gap late.
    pub late_share: f64,
    /// The frames the worst stall sent back to back on one port to catch up.
    #[serde(default)]
    pub burst_frames: u64,
    /// The frames all its stalls held back on one port.
    #[serde(default)]
    pub stalled_frames: u64,
    /// The share of its schedule's frames the sender did not send.
    #[serde(default)]
    pub rate_shortfall: f64,
    /// False when the sender fell behind: a catch-up burst over `max_burst_frames`, a rate
    /// short by more than `rate_tolerance`, or (when given) a late share over `late_limit`.
    pub valid: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_reason: Option<String>,
    /// Run again: a later trial in the list replaces this one.
    pub repeated: bool,
}

/// Why trials stopped early.
#[derive(Debug, Clone, PartialEq)]
pub enum TrialError {
    /// Ctrl-C or a stop request: the experiment ends with what it has.
    Stopped,
    /// The trial could not run (a link went down, a socket failed).
    Failed(String),
}

/// Runs trials: the engine on sockets, or a fake device in tests.
pub trait Trials {
    fn run(&mut self, index: usize, plan: &TrialPlan) -> Result<TrialRun, TrialError>;

    /// Hears of each trial once the driver has judged it (a front end's line per trial).
    fn judged(&mut self, _rec: &TrialRecord) {}
}

/// A point: the figures over its repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub settings: Vec<Setting>,
    /// Indices of its trials (the valid or last attempt of each repetition).
    pub trials: Vec<usize>,
    pub loss_pct: Estimate,
    pub rx_pps: Option<Estimate>,
    /// Mean ± CI of each repetition's percentile.
    pub latency_p50_ns: Option<Estimate>,
    pub latency_p99_ns: Option<Estimate>,
    pub latency_p99_9_ns: Option<Estimate>,
    /// Median and range across repetitions.
    pub latency_p50_spread: Option<Spread>,
    pub latency_p99_spread: Option<Spread>,
    pub latency_p99_9_spread: Option<Spread>,
    pub latency_max_spread: Option<Spread>,
    /// Repetitions whose every attempt was invalid (their last attempt is used).
    pub invalid_used: usize,
}

/// RFC 2544 throughput at one tolerance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub loss_tolerance_pct: f64,
    /// The highest rate whose loss stayed within the tolerance; None: not even the minimum.
    pub throughput_pps: Option<f64>,
    /// The same in bit/s on the wire (with preamble, FCS and inter-frame gap).
    pub throughput_bps_l1: Option<f64>,
    pub search: SearchResult,
    /// Indices of the trials the search used.
    pub trials: Vec<usize>,
    /// The confirming trial at the rate found, and whether it passed.
    pub final_trial: Option<usize>,
    pub final_passed: Option<bool>,
}

/// One row of the frame loss rate test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossStep {
    pub load_pct: f64,
    pub rate_pps: f64,
    pub loss_pct: f64,
    pub trial: usize,
}

/// The back-to-back test: the longest burst at line rate with no loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackToBack {
    pub rate_pps: f64,
    /// Per repetition: the longest burst that passed.
    pub bursts: Vec<u64>,
    pub burst_frames: Option<Estimate>,
    pub trials: Vec<usize>,
}

/// Everything RFC 2544 found for one frame size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    pub frame_size: u32,
    pub throughput: Vec<Throughput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<PointResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frame_loss: Vec<LossStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_to_back: Option<BackToBack>,
}

/// A sweep's curve: the points for one value of the curve parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    pub curve: Option<Setting>,
    pub points: Vec<PointResult>,
}

/// What an experiment found, with every trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentResult {
    pub name: Option<String>,
    pub method: Method,
    pub confidence: f64,
    pub trials: Vec<TrialRecord>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rfc2544: Vec<SizeResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<Curve>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<PointResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlrsearch: Option<MlrsearchResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rfc2889: Option<rfc2889::Rfc2889Result>,
    /// Each direction at the trials the results rest on (experiments over several ports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directions: Vec<directions::DirectionSummary>,
    /// Trials run again because the sender fell behind.
    pub repeats: usize,
    /// Stopped (Ctrl-C) or failed before the end: what is here is what was measured.
    pub stopped: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub warnings: Vec<String>,
}

/// What MLRsearch found: each goal's conditional throughput and bounds, the trials it ran
/// (indices into the experiment's trials), and what they cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlrsearchResult {
    pub goals: Vec<mlr::GoalResult>,
    pub trials: Vec<MlrsearchTrial>,
    /// Seconds of the trials the search used (full trial durations, warm-ups excluded).
    pub trial_seconds: f64,
    /// Trials run again because the sender fell behind, and their seconds: not in the above.
    pub retried_trials: usize,
    pub retried_trial_seconds: f64,
    /// Seconds of the attempts at loads the sender could not hold: not in `trial_seconds`,
    /// but counted with them against `search_duration_max_s`.
    #[serde(default)]
    pub sender_failed_seconds: f64,
    /// The search stopped at `search_duration_max_s` with a goal unmet.
    pub ran_out: bool,
    /// The smallest load the sender could not hold on this machine (every attempt fell
    /// behind) and had not held before: the search went on below it. None: it held every
    /// load the search kept.
    #[serde(default)]
    pub sender_cap_pps: Option<f64>,
    /// The search stopped because the sender could not hold
    /// [`mlr::MAX_SENDER_FAILURES`] loads: a goal may have no lower bound yet.
    #[serde(default)]
    pub sender_gave_up: bool,
    /// Attempts the sender failed at loads it had held before (stalls of this machine):
    /// run again, and not a cap.
    #[serde(default)]
    pub sender_stalls: u32,
    /// The verdict on the sender, in words.
    #[serde(default)]
    pub sender: String,
    /// Latency at fractions of the latency goal's conditional throughput.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<LatencyAt>,
}

/// One trial of the search: what the search saw, and the experiment's trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlrsearchTrial {
    pub trial: usize,
    #[serde(flatten)]
    pub search: mlr::MlrTrial,
}

/// Latency at a fraction of a goal's conditional throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyAt {
    pub fraction: f64,
    pub goal: String,
    pub rate_pps: f64,
    pub point: PointResult,
}

/// Ethernet's per-frame overhead on the wire beyond the frame with FCS: preamble + SFD (8)
/// and the inter-frame gap (12).
pub fn l1_bps(pps: f64, frame_size: u32) -> f64 {
    pps * f64::from(frame_size + 20) * 8.0
}
