//! The compiled profile: what [`super::compile`] makes from a spec and what a send loop runs.
//! It cannot fail at run time.

use std::fmt;
use std::sync::Arc;

use crate::packet::rewrite::Rewriter;
use crate::packet::sizes::SizeGen;
use crate::packet::variant::{Variant, VariantPick};
use crate::spec::files::{CaptureSource, CaptureStats};
use crate::spec::{OnLate, ProfileSpec, SplitKind};
use crate::timing::curve::RateCurve;
use crate::timing::departures::{Pattern, Rate, Schedule};
use crate::timing::seed::derive_seed;

pub(crate) fn gap_depends_on_size(rate: &Rate, variants: &[Variant]) -> bool {
    let fixed = |v: &Variant| match v.sizes {
        SizeGen::Fixed(s) => Some(s),
        _ => None,
    };
    let one_size = variants
        .iter()
        .all(|v| fixed(v).is_some() && fixed(v) == fixed(&variants[0]));
    matches!(rate, Rate::Bps { .. }) && !one_size
}

/// One compiled stream.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    pub index: usize,
    pub name: String,
    pub id: u16,
    /// The packets the stream sends (one, or several it cycles through), and how it picks.
    pub variants: Vec<Variant>,
    pub pick: VariantPick,
    pub pattern: Pattern,
    pub rate: Rate,
    pub burst: u32,
    pub count: Option<u64>,
    pub duration_ns: Option<u64>,
    pub start_offset_ns: u64,
    pub seed: u64,
    /// Target frames per second.
    pub target_pps: f64,
    /// Target bits per second at L1 (frame + 20 B).
    pub target_bps_l1: f64,
    pub mean_size: f64,
    /// A stream split over `lanes` send loops: this part numbers its frames
    /// `lane, lane + lanes, lane + 2·lanes, …` (1 and 0 when not split).
    pub lanes: u32,
    pub lane: u32,
    /// `core` from the profile: the send loop the whole stream runs on.
    pub core: Option<usize>,
    pub split: SplitKind,
    /// A time-varying rate (vary, or a self-similar fGn): a factor on `rate` over time.
    pub curve: Option<Arc<RateCurve>>,
    /// The parameters of a varying or self-similar pattern and what its schedule achieved.
    pub pattern_report: Option<serde_json::Value>,
    /// A replayed capture: its frames, and its timing unless `rate` is fixed.
    pub replay: Option<crate::profile::model::Replay>,
    /// Bits of each received frame the meter counts the stream's frames by.
    pub tags: Vec<crate::spec::TagField>,
}

impl StreamConfig {
    /// The stream's schedule, as its generator runs it.
    pub fn schedule(&self) -> Schedule {
        Schedule::new(
            self.pattern.clone(),
            self.rate,
            self.burst,
            self.start_offset_ns,
            derive_seed(self.seed, 3, 0),
        )
        .with_curve(self.curve.clone())
    }

    /// Single-frame Poisson departures: k independent parts at rate/k overlay to the same
    /// process, so the stream may be split over send loops.
    pub fn is_memoryless(&self) -> bool {
        matches!(
            self.pattern,
            Pattern::Random(crate::timing::dist::UnitDist::Exponential(_))
        ) && self.burst == 1
    }

    /// Whether the stream is shared out over `k` send loops: Poisson unless told not to, CBR
    /// when asked (`split = "phase"`), never a stream placed on a core.
    pub fn splits_over(&self, k: usize) -> bool {
        k > 1
            && self.core.is_none()
            && match self.split {
                SplitKind::Auto => self.is_memoryless(),
                SplitKind::None => false,
                SplitKind::Phase => true,
            }
    }

    /// Whether each gap depends on its frame's size (a bit rate with frames of several sizes),
    /// so the schedule cannot be phase-split.
    pub fn gap_depends_on_size(&self) -> bool {
        gap_depends_on_size(&self.rate, &self.variants)
    }

    /// The largest frame of any variant (with FCS).
    pub fn max_size(&self) -> u32 {
        self.variants.iter().map(|v| v.sizes.max()).max().unwrap_or(0)
    }

    /// The smallest frame of any variant (with FCS).
    pub fn min_size(&self) -> u32 {
        self.variants.iter().map(|v| v.sizes.min()).min().unwrap_or(0)
    }

    /// The whole stream's gap between departures (ns), for a phase split.
    pub fn phase_gap_ns(&self) -> f64 {
        f64::from(self.burst) * 1e9 / self.target_pps
    }

    /// The stream as `k` lanes at rate/k each: own seeds, the count shared out, sequence
    /// numbers interleaved (lane j sends j, j + k, …) so a meter told the lanes can still
    /// count loss and reordering per lane.
    pub fn split(&self, k: u32) -> Vec<StreamConfig> {
        let k = k.max(1);
        (0..k)
            .map(|j| {
                let mut c = self.clone();
                c.rate = match self.rate {
                    Rate::Pps(p) => Rate::Pps(p / f64::from(k)),
                    Rate::Bps { bps, overhead_bytes } => Rate::Bps {
                        bps: bps / f64::from(k),
                        overhead_bytes,
                    },
                };
                c.target_pps = self.target_pps / f64::from(k);
                c.target_bps_l1 = self.target_bps_l1 / f64::from(k);
                c.count = self
                    .count
                    .map(|n| n / u64::from(k) + u64::from(u64::from(j) < n % u64::from(k)));
                c.seed = derive_seed(self.seed, 100 + u64::from(j), u64::from(k));
                c.lanes = k;
                c.lane = j;
                if self.split == SplitKind::Phase {
                    // Part j takes departures j, j + k, … of the whole schedule.
                    let shift = (f64::from(j) * self.phase_gap_ns()).round() as u64;
                    c.start_offset_ns = self.start_offset_ns + shift;
                    c.duration_ns = self.duration_ns.map(|d| d.saturating_sub(shift));
                }
                c
            })
            .collect()
    }
    /// Mean time between departures (ns): the lateness unit of the `on_late` policy.
    pub fn mean_gap_ns(&self) -> f64 {
        let frames = match &self.pattern {
            Pattern::OnOff {
                size,
                peak_gap_ns: None,
                ..
            } => size.mean(),
            Pattern::OnOff { .. } => 1.0,
            _ => f64::from(self.burst),
        };
        frames * 1e9 / self.target_pps
    }
}

/// A compiled profile.
#[derive(Debug, Clone)]
pub struct Profile {
    pub seed: u64,
    pub on_late: OnLate,
    pub link_speed_bps: Option<f64>,
    pub streams: Vec<StreamConfig>,
    /// The spec it came from (for the result file), shared by every copy of the profile (the
    /// plan's per loop): with 10 000 streams it is 15 MB.
    pub spec: Arc<ProfileSpec>,
}

impl Profile {
    /// Largest frame of any stream (with FCS).
    pub fn max_frame(&self) -> u32 {
        self.streams.iter().map(|s| s.max_size()).max().unwrap_or(0)
    }
    /// Whether every stream ends by count or duration.
    pub fn is_bounded(&self) -> bool {
        self.streams
            .iter()
            .all(|s| s.count.is_some() || s.duration_ns.is_some())
    }
}

/// A compiled replay.
#[derive(Clone)]
pub struct Replay {
    pub path: String,
    pub source: Arc<dyn CaptureSource>,
    pub stats: CaptureStats,
    /// File timing divided by this (2 = twice as fast). 1 with a fixed rate.
    pub speed: f64,
    /// Times through the file; `None` = until stopped.
    pub loops: Option<u64>,
    /// The stream's rate key replaces the file's timing.
    pub fixed_rate: bool,
    /// The stream's `[[stream.field]]` ops, applied to each replayed frame.
    pub rewrite: Rewriter,
    pub seed: u64,
    /// Sign the frames that can carry the signature (UDP/TCP with 16 B of payload).
    pub sign: bool,
}

impl fmt::Debug for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replay")
            .field("path", &self.path)
            .field("stats", &self.stats)
            .field("speed", &self.speed)
            .field("loops", &self.loops)
            .field("fixed_rate", &self.fixed_rate)
            .finish()
    }
}

impl Replay {
    /// The time from one loop's first frame to the next loop's first frame, ns (file time,
    /// before `speed`): the file's span plus one mean gap.
    pub fn loop_period_ns(&self) -> f64 {
        let s = &self.stats;
        let span = s.span_ns() as f64;
        if s.frames > 1 {
            span + span / (s.frames - 1) as f64
        } else {
            0.0
        }
    }

    /// Frames the whole replay sends (`None`: until stopped).
    pub fn total_frames(&self) -> Option<u64> {
        self.loops.map(|l| l * self.stats.frames)
    }
}
