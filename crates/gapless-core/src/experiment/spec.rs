//! The experiment file as the user writes it (TOML), and its checks. Every table denies
//! unknown keys; every error names the TOML path of the value and the fix.

use serde::{Deserialize, Serialize};

use crate::experiment::mlr::spec::MlrsearchSpec;
use crate::experiment::ports::{directions, Direction, Pair, Pairs, PairsKind, PortId};
use crate::experiment::rfc2889::Rfc2889Spec;
use crate::experiment::search::Resolution;
use crate::spec::{BackendKind, PatternKind, ProfileSpec};

/// RFC 2544's frame sizes for Ethernet.
pub const RFC2544_SIZES: [u32; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// A whole experiment.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSpec {
    #[serde(default)]
    pub name: Option<String>,
    pub method: Method,
    /// The profile: a path (relative to the experiment file) or an inline table.
    pub profile: ProfileRef,
    /// Where the frames leave (the one-way form; or `ports`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx: Option<Port>,
    /// Where they are metered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx: Option<Port>,
    /// Several ports, each sending and metering (`pairs` says which sends to which).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    /// `"bidirectional"` (the default for two ports), `"full-mesh"`, or a list of pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<Pairs>,
    /// `[[pair]]` tables: the pairs as tables (instead of `pairs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pair: Vec<Pair>,
    /// What is under test, for the report (`gapless testbed up --dut ...` makes one).
    #[serde(default)]
    pub dut: Option<DutInfo>,
    #[serde(default)]
    pub trial: TrialSpec,
    /// A calibration file (from `gapless calibrate`) whose offset is subtracted.
    #[serde(default)]
    pub calibration: Option<String>,
    #[serde(default)]
    pub rfc2544: Option<Rfc2544Spec>,
    #[serde(default)]
    pub sweep: Option<SweepSpec>,
    #[serde(default)]
    pub mlrsearch: Option<MlrsearchSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rfc2889: Option<Rfc2889Spec>,
}

/// What the experiment does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Rfc2544,
    Sweep,
    Repeat,
    /// RFC 9971's Multiple Loss Ratio Search: every goal (NDR, PDR, …) in one search.
    Mlrsearch,
    /// RFC 2889's switch tests: address caching capacity, address learning rate, fully
    /// meshed forwarding.
    Rfc2889,
}

/// A profile by path, or inline.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ProfileRef {
    Path(String),
    Inline(Box<ProfileSpec>),
}

impl<'de> Deserialize<'de> for ProfileRef {
    /// A string is a path; a table is a profile, whose errors are named under `profile`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::String(p) => Ok(ProfileRef::Path(p)),
            v @ toml::Value::Table(_) => v
                .try_into::<ProfileSpec>()
                .map(|p| ProfileRef::Inline(Box::new(p)))
                .map_err(|e| D::Error::custom(format!("in the [profile] table: {}", e.to_string().trim_end()))),
            v => Err(D::Error::custom(format!(
                "profile = {v}: give a profile file's path (profile = \"cbr.toml\") or a [profile] table"
            ))),
        }
    }
}

/// An interface in a network namespace.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Port {
    pub iface: String,
    #[serde(default)]
    pub netns: Option<String>,
    /// The sender's socket (tx only): afpacket (default) or afxdp.
    #[serde(default)]
    pub backend: Option<BackendKind>,
    /// In `ports`: the port's MAC and IP address as its frames carry them (default: the
    /// interface's MAC and first IPv4 address, read from the kernel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// In `ports`: the MAC this port sends every direction's frames to (a router's port).
    /// Default: the port's neighbour entry for the receiving port's address, else the
    /// receiving port's MAC (a bridge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_hop_mac: Option<String>,
    /// In `ports`: the gapless agent (`HOST:PORT`, its OTG listener) whose host has the
    /// interface; every port of such an experiment is on an agent, with its `mac` and `ip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl Port {
    /// An interface in a namespace, with every other key at its default.
    pub fn new(iface: String, netns: Option<String>) -> Port {
        Port {
            iface,
            netns,
            backend: None,
            mac: None,
            ip: None,
            next_hop_mac: None,
            agent: None,
        }
    }
}

/// The device under test, as the report names it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DutInfo {
    /// "bridge", "router", or what it is ("switch X, firmware Y").
    pub kind: String,
    /// Its capacity as configured, e.g. "24mbit".
    #[serde(default)]
    pub rate: Option<String>,
    /// Its queue limit in frames.
    #[serde(default)]
    pub queue: Option<u32>,
    #[serde(default)]
    pub note: Option<String>,
}

impl DutInfo {
    /// How the report names the device: its kind, egress rate, queue and note.
    pub fn text(&self) -> String {
        let mut s = self.kind.clone();
        if let Some(r) = &self.rate {
            s.push_str(&format!(", egress {r}"));
        }
        if let Some(q) = self.queue {
            s.push_str(&format!(", queue {q} frames"));
        }
        if let Some(n) = &self.note {
            s.push_str(&format!(" ({n})"));
        }
        s
    }
}

/// The default largest catch-up burst, in frames, of a valid trial: what the reference
/// device's shaper holds (a bucket of 1 ms of its rate and a queue of one frame more) at
/// the rates the tests use (docs/guide/experiments.md).
pub const DEFAULT_MAX_BURST_FRAMES: u64 = 128;

/// How each trial runs.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrialSpec {
    /// Seconds metered per trial (after the warm-up).
    pub duration_s: f64,
    /// The confirming trial at the rate found (RFC 2544 throughput); None: no final trial.
    pub final_duration_s: Option<f64>,
    /// Seconds sent first and not metered.
    pub warmup_s: f64,
    /// Seconds for queues to drain: the meter keeps listening this long (at least 0.3 s)
    /// after a trial's last frame, and the next trial waits as long again.
    pub settle_s: f64,
    /// Runs per point, each with its own seed.
    pub repetitions: u32,
    /// Of the confidence intervals.
    pub confidence: f64,
    /// How many times an invalid trial (its sender fell behind) is run again.
    pub max_retries: u32,
    /// A trial's sender fell behind when a stall made it send more than this many frames
    /// back to back on one port to catch up (its worst lateness times the port's rate): the
    /// burst that a device may drop, and a late frame does not.
    pub max_burst_frames: u64,
    /// A trial's sender fell behind when it sent this share fewer frames than its schedule.
    pub rate_tolerance: f64,
    /// Also: when more than this share of its frames left over one gap late (None: not
    /// judged by that share; a frame 30 µs late makes no device lose frames).
    pub late_limit: Option<f64>,
}

impl Default for TrialSpec {
    fn default() -> Self {
        TrialSpec {
            duration_s: 2.0,
            final_duration_s: None,
            warmup_s: 0.5,
            settle_s: 0.5,
            repetitions: 1,
            confidence: 0.95,
            max_retries: 3,
            max_burst_frames: DEFAULT_MAX_BURST_FRAMES,
            rate_tolerance: 0.001,
            late_limit: None,
        }
    }
}

/// Which RFC 2544 tests to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rfc2544Test {
    Throughput,
    Latency,
    FrameLoss,
    BackToBack,
}

/// The `[rfc2544]` table.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rfc2544Spec {
    #[serde(default = "default_tests")]
    pub tests: Vec<Rfc2544Test>,
    #[serde(default = "default_sizes")]
    pub frame_sizes: Vec<u32>,
    /// Loss tolerances in percent of the frames sent: one throughput per tolerance.
    #[serde(default = "default_tolerances")]
    pub loss_tolerance_pct: Vec<f64>,
    /// The search's range in frames per second. The maximum is also the "line rate" of the
    /// frame loss and back-to-back tests. Give `max_rate_pps`, or `max_rate_bps`: bit/s on
    /// the wire (with preamble and gap), from which each frame size gets its own maximum.
    pub min_rate_pps: Option<f64>,
    pub max_rate_pps: Option<f64>,
    pub max_rate_bps: Option<f64>,
    /// The search stops when the interval is this narrow: pps, or percent of the rate.
    pub resolution_pps: Option<f64>,
    pub resolution_pct: Option<f64>,
    #[serde(default = "default_iterations")]
    pub max_iterations: u32,
    /// Back-to-back: the longest burst tried, in frames.
    #[serde(default = "default_max_burst")]
    pub max_burst: u32,
}

fn default_tests() -> Vec<Rfc2544Test> {
    vec![Rfc2544Test::Throughput]
}
fn default_sizes() -> Vec<u32> {
    RFC2544_SIZES.to_vec()
}
fn default_tolerances() -> Vec<f64> {
    vec![0.0]
}
fn default_iterations() -> u32 {
    16
}
fn default_max_burst() -> u32 {
    10_000
}

/// A swept parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Param {
    /// Mean rate, frames per second.
    Rate,
    /// Frames per departure, back to back (the mean rate kept).
    Burst,
    /// Frame size in bytes.
    Size,
    /// Arrival pattern: "cbr" or "poisson".
    Pattern,
}

/// Values of a parameter: a list, or a range.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    pub parameter: Param,
    /// The values (numbers; names for `pattern`).
    #[serde(default)]
    pub values: Option<Vec<toml::Value>>,
    /// Or from..=to in `steps` equal steps (numeric parameters).
    #[serde(default)]
    pub from: Option<f64>,
    #[serde(default)]
    pub to: Option<f64>,
    #[serde(default)]
    pub steps: Option<u32>,
}

/// The `[sweep]` table: x values, and optionally one curve per value of another parameter.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSpec {
    #[serde(flatten)]
    pub x: Axis,
    /// One curve per value of this (e.g. burst sizes 1, 4, 16, 64).
    #[serde(default)]
    pub curves: Option<Axis>,
}

/// One setting of a swept parameter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Setting {
    Rate(f64),
    Burst(u32),
    Size(u32),
    Pattern(PatternKind),
}

impl Setting {
    /// The value as a number for plots (a pattern: 0 CBR, 1 Poisson).
    pub fn x(&self) -> f64 {
        match *self {
            Setting::Rate(r) => r,
            Setting::Burst(b) | Setting::Size(b) => f64::from(b),
            Setting::Pattern(p) => f64::from(u8::from(p != PatternKind::Cbr)),
        }
    }

    /// How tables name the value.
    pub fn label(&self) -> String {
        match *self {
            Setting::Rate(r) => format!("{r:.0} pps"),
            Setting::Burst(b) => format!("burst {b}"),
            Setting::Size(s) => format!("{s} B"),
            Setting::Pattern(p) => format!("{p:?}").to_lowercase(),
        }
    }
}

impl Axis {
    /// The settings, checked; `path` is the axis's TOML path for errors.
    pub fn settings(&self, path: &str) -> Result<Vec<Setting>, String> {
        let nums: Vec<f64> = match (&self.values, self.from, self.to, self.steps) {
            (Some(v), None, None, None) if self.parameter == Param::Pattern => {
                return v
                    .iter()
                    .enumerate()
                    .map(|(i, x)| pattern_of(x, &format!("{path}.values[{i}]")))
                    .collect();
            }
            (Some(v), None, None, None) => v
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    x.as_float()
                        .or_else(|| x.as_integer().map(|n| n as f64))
                        .ok_or_else(|| format!("{path}.values[{i}] = {x}: give a number"))
                })
                .collect::<Result<_, _>>()?,
            (None, Some(a), Some(b), Some(n)) if n >= 1 && self.parameter != Param::Pattern => {
                (0..=n).map(|k| a + (b - a) * f64::from(k) / f64::from(n)).collect()
            }
            _ => {
                return Err(format!(
                    "{path}: give `values = [...]`, or `from`, `to` and `steps` (≥ 1) for a numeric parameter"
                ))
            }
        };
        if nums.is_empty() {
            return Err(format!("{path}.values is empty: give at least one value"));
        }
        nums.iter().map(|&v| self.setting(v, path)).collect()
    }

    fn setting(&self, v: f64, path: &str) -> Result<Setting, String> {
        let whole = |lo: f64, hi: f64, what: &str| {
            if v.fract() == 0.0 && (lo..=hi).contains(&v) {
                Ok(v as u32)
            } else {
                Err(format!("{path}: {what} {v}: give a whole number from {lo} to {hi}"))
            }
        };
        Ok(match self.parameter {
            Param::Rate if v.is_finite() && v > 0.0 => Setting::Rate(v),
            Param::Rate => return Err(format!("{path}: rate {v}: give a positive rate in frames per second")),
            Param::Burst => Setting::Burst(whole(1.0, 65_536.0, "burst")?),
            Param::Size => Setting::Size(whole(60.0, 9_216.0, "frame size")?),
            Param::Pattern => unreachable!("patterns are names"),
        })
    }
}

fn pattern_of(v: &toml::Value, path: &str) -> Result<Setting, String> {
    match v.as_str() {
        Some("cbr") => Ok(Setting::Pattern(PatternKind::Cbr)),
        Some("poisson") => Ok(Setting::Pattern(PatternKind::Poisson)),
        _ => Err(format!("{path} = {v}: give \"cbr\" or \"poisson\"")),
    }
}

impl TrialSpec {
    /// Checks the numbers; errors name `trial.KEY`.
    pub fn check(&self) -> Result<(), String> {
        let pos = |x: f64| x.is_finite() && x > 0.0;
        let nonneg = |x: f64| x.is_finite() && x >= 0.0;
        if !pos(self.duration_s) {
            return Err(format!(
                "trial.duration_s = {}: give a positive number of seconds",
                self.duration_s
            ));
        }
        if let Some(f) = self.final_duration_s.filter(|&f| !pos(f)) {
            return Err(format!(
                "trial.final_duration_s = {f}: give a positive number of seconds"
            ));
        }
        for (k, v) in [("warmup_s", self.warmup_s), ("settle_s", self.settle_s)] {
            if !nonneg(v) {
                return Err(format!("trial.{k} = {v}: give 0 or more seconds"));
            }
        }
        if self.repetitions == 0 || self.repetitions > 1000 {
            return Err(format!("trial.repetitions = {}: give 1 to 1000", self.repetitions));
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(format!(
                "trial.confidence = {}: give a level between 0 and 1, e.g. 0.95",
                self.confidence
            ));
        }
        if self.max_retries > 100 {
            return Err(format!("trial.max_retries = {}: give 0 to 100", self.max_retries));
        }
        if let Some(l) = self.late_limit.filter(|l| !(l.is_finite() && (0.0..1.0).contains(l))) {
            return Err(format!(
                "trial.late_limit = {l}: give a fraction from 0 to below 1 (0.001 = 0.1 %), or leave it out"
            ));
        }
        if !(self.rate_tolerance.is_finite() && (0.0..1.0).contains(&self.rate_tolerance)) {
            return Err(format!(
                "trial.rate_tolerance = {}: give a fraction from 0 to below 1 (0.001 = 0.1 %)",
                self.rate_tolerance
            ));
        }
        if self.max_burst_frames == 0 {
            return Err("trial.max_burst_frames = 0: give the largest catch-up burst a trial may have, from 1 (32 is the default)".into());
        }
        Ok(())
    }
}

impl Rfc2544Spec {
    /// The search resolution; errors name `rfc2544.KEY`.
    pub fn resolution(&self) -> Result<Resolution, String> {
        match (self.resolution_pps, self.resolution_pct) {
            (Some(_), Some(_)) => Err("rfc2544: give resolution_pps or resolution_pct, not both".into()),
            (Some(r), None) if r.is_finite() && r > 0.0 => Ok(Resolution::Pps(r)),
            (Some(r), None) => Err(format!("rfc2544.resolution_pps = {r}: give a positive rate")),
            (None, Some(p)) if p.is_finite() && p > 0.0 && p < 100.0 => Ok(Resolution::Relative(p / 100.0)),
            (None, Some(p)) => Err(format!(
                "rfc2544.resolution_pct = {p}: give a percentage above 0 and below 100"
            )),
            (None, None) => Ok(Resolution::Relative(0.005)),
        }
    }

    /// The highest rate for frames of `size` bytes.
    pub fn max_rate(&self, size: u32) -> f64 {
        match (self.max_rate_pps, self.max_rate_bps) {
            (Some(p), _) => p,
            (None, Some(b)) => b / (8.0 * f64::from(size + 20)),
            (None, None) => f64::NAN,
        }
    }

    /// The search's minimum: given, else 1 % of the maximum.
    pub fn min_rate(&self, size: u32) -> f64 {
        self.min_rate_pps.unwrap_or(self.max_rate(size) / 100.0)
    }

    /// Checks every value; errors name `rfc2544.KEY`.
    pub fn check(&self) -> Result<(), String> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        match (self.max_rate_pps, self.max_rate_bps) {
            (Some(_), Some(_)) => return Err("rfc2544: give max_rate_pps or max_rate_bps, not both".into()),
            (None, None) => return Err(
                "rfc2544: give max_rate_pps (frames/s) or max_rate_bps (bit/s on the wire): the search starts there"
                    .into(),
            ),
            (Some(p), None) if !ok(p) => {
                return Err(format!(
                    "rfc2544.max_rate_pps = {p}: give a positive rate in frames per second"
                ))
            }
            (None, Some(b)) if !ok(b) => {
                return Err(format!("rfc2544.max_rate_bps = {b}: give a positive rate in bit/s"))
            }
            _ => {}
        }
        self.resolution()?;
        if self.tests.is_empty() {
            return Err("rfc2544.tests is empty: give one or more of \"throughput\", \"latency\", \"frame-loss\", \"back-to-back\"".into());
        }
        if self.frame_sizes.is_empty() {
            return Err("rfc2544.frame_sizes is empty: give sizes in bytes, e.g. [64, 512, 1518]".into());
        }
        for (i, &s) in self.frame_sizes.iter().enumerate() {
            if !(60..=9216).contains(&s) {
                return Err(format!(
                    "rfc2544.frame_sizes[{i}] = {s}: give a frame size from 60 to 9216 bytes"
                ));
            }
            let (min, max) = (self.min_rate(s), self.max_rate(s));
            if !(ok(min) && min < max) {
                return Err(format!(
                    "rfc2544.min_rate_pps = {min}: give a positive rate below the maximum ({max:.0} frames/s at {s} B)"
                ));
            }
        }
        if self.loss_tolerance_pct.is_empty() {
            return Err("rfc2544.loss_tolerance_pct is empty: give [0] for no loss".into());
        }
        for (i, &t) in self.loss_tolerance_pct.iter().enumerate() {
            if !(t.is_finite() && (0.0..100.0).contains(&t)) {
                return Err(format!(
                    "rfc2544.loss_tolerance_pct[{i}] = {t}: give a percentage from 0 to below 100"
                ));
            }
        }
        if self.max_iterations == 0 || self.max_iterations > 64 {
            return Err(format!(
                "rfc2544.max_iterations = {}: give 1 to 64",
                self.max_iterations
            ));
        }
        if self.max_burst == 0 {
            return Err("rfc2544.max_burst = 0: give the longest burst to try, in frames".into());
        }
        Ok(())
    }
}

impl ExperimentSpec {
    /// The final trial duration where a method needs one and the file gives none there.
    pub fn final_duration(&self) -> f64 {
        self.trial.final_duration_s.unwrap_or(self.trial.duration_s)
    }

    /// Parses an experiment file; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<ExperimentSpec, String> {
        let spec: ExperimentSpec =
            toml::from_str(text).map_err(|e| format!("{origin}: {}", e.to_string().trim_end()))?;
        spec.check().map_err(|e| format!("{origin}: {e}"))?;
        Ok(spec)
    }

    /// Checks that the method has its table and every value is in range.
    pub fn check(&self) -> Result<(), String> {
        self.trial.check()?;
        match self.method {
            Method::Rfc2544 => self
                .rfc2544
                .as_ref()
                .ok_or("method = \"rfc2544\" needs an [rfc2544] table with at least max_rate_pps or max_rate_bps")?
                .check()?,
            Method::Sweep => {
                let s = self
                    .sweep
                    .as_ref()
                    .ok_or("method = \"sweep\" needs a [sweep] table: parameter and values")?;
                s.x.settings("sweep")?;
                if let Some(c) = &s.curves {
                    c.settings("sweep.curves")?;
                    if c.parameter == s.x.parameter {
                        return Err("sweep.curves.parameter is the swept parameter too: give another (e.g. sweep rate, curves burst)".into());
                    }
                }
            }
            Method::Mlrsearch => {
                self.mlrsearch
                    .as_ref()
                    .ok_or("method = \"mlrsearch\" needs an [mlrsearch] table: goals and max_rate_pps")?
                    .search(self.final_duration())?;
            }
            Method::Rfc2889 => {
                let r = self
                    .rfc2889
                    .as_ref()
                    .ok_or("method = \"rfc2889\" needs an [rfc2889] table: tests, and max_rate_pps for fully_meshed")?;
                if !self.multi_port() {
                    return Err("method = \"rfc2889\" tests a switch between ports: give ports = [{ iface = ..., netns = ... }, ...] (three or more for the address tests)".into());
                }
                r.check(self.ports.len())?;
                if r.tests.contains(&super::rfc2889::Rfc2889Test::CongestionControl) {
                    let dirs = self.directions()?;
                    for (from, to, _) in r.congestion_loads() {
                        if !dirs.iter().any(|d| (d.from, d.to) == (from, to)) {
                            return Err(format!("pairs: congestion_control sends from port {from} to port {to}, which pairs leaves out. Fix: leave pairs out (a full mesh), or add {{ from = {from}, to = {to} }}"));
                        }
                    }
                }
            }
            Method::Repeat => {}
        }
        self.check_ports()
    }

    /// The one-way `tx`/`rx`, or `ports` with their pairs; errors name the key.
    fn check_ports(&self) -> Result<(), String> {
        if !self.ports.is_empty() {
            return self.check_port_list();
        }
        if self.pairs.is_some() || !self.pair.is_empty() {
            return Err("pairs: give the ports they pair (ports = [{ iface = ..., netns = ... }, ...]); tx and rx are the one-way form".into());
        }
        let (Some(tx), Some(rx)) = (&self.tx, &self.rx) else {
            return Err("give tx and rx ({ iface = ..., netns = ... }), or ports = [...] with pairs".into());
        };
        for (k, p) in [("tx", tx), ("rx", rx)] {
            if p.iface.is_empty() {
                return Err(format!("{k}.iface is empty: give the interface name"));
            }
            if p.mac.is_some() || p.ip.is_some() || p.next_hop_mac.is_some() || p.agent.is_some() {
                return Err(format!(
                    "{k}: mac, ip, next_hop_mac and agent are keys of `ports`; the one-way form sends the profile's own addresses on this host. Fix: give ports = [tx, rx] with pairs = [{{ from = 0, to = 1 }}]"
                ));
            }
        }
        if rx.backend.is_some() {
            return Err("rx.backend: the meter's socket is AF_PACKET; drop the key".into());
        }
        Ok(())
    }

    fn check_port_list(&self) -> Result<(), String> {
        if self.tx.is_some() || self.rx.is_some() {
            return Err("give tx and rx (one way), or ports (several directions), not both".into());
        }
        if self.ports.len() < 2 {
            return Err(format!("ports has {}: give at least two", self.ports.len()));
        }
        for (i, p) in self.ports.iter().enumerate() {
            if p.iface.is_empty() {
                return Err(format!("ports[{i}].iface is empty: give the interface name"));
            }
            if p.backend.is_some_and(|b| b != BackendKind::Afpacket) {
                return Err(format!(
                    "ports[{i}].backend: one send loop serves every port over AF_PACKET; drop the key"
                ));
            }
        }
        if self.pairs.is_some() && !self.pair.is_empty() {
            return Err("give pairs or [[pair]] tables, not both".into());
        }
        self.check_agents()?;
        self.directions().map(|_| ())
    }

    /// Ports on agents: all of them or none, each with its addresses; RFC 2889 stays on
    /// this host (it empties a bridge's table here).
    fn check_agents(&self) -> Result<(), String> {
        let on = self.ports.iter().filter(|p| p.agent.is_some()).count();
        if on == 0 {
            return Ok(());
        }
        if let Some(i) = self.ports.iter().position(|p| p.agent.is_none()) {
            return Err(format!("ports[{i}].agent: every port of an experiment across hosts is on an agent, and this one is not. Fix: give it agent = \"HOST:PORT\" (this host's ports through an agent running beside it)"));
        }
        for (i, p) in self.ports.iter().enumerate() {
            let a = p.agent.as_deref().unwrap_or("");
            let port_ok = a
                .rsplit_once(':')
                .is_some_and(|(h, n)| !h.is_empty() && n.parse::<u16>().is_ok_and(|n| n > 0));
            if !port_ok {
                return Err(format!(
                    "ports[{i}].agent = {a:?}: give the agent's OTG listener as HOST:PORT, e.g. \"198.18.100.2:8443\""
                ));
            }
            if p.mac.is_none() || p.ip.is_none() {
                return Err(format!("ports[{i}]: a port on an agent needs its mac and ip (this host cannot read another host's interfaces). Fix: give mac = \"..\" and ip = \"..\" as the port's frames carry them"));
            }
        }
        if self.method == Method::Rfc2889 {
            return Err("method = \"rfc2889\" on agents: its address tests empty the bridge's table from this host. Fix: run it on the host the switch's ports are on".into());
        }
        Ok(())
    }

    /// Whether the experiment's ports are on agents (other hosts).
    pub fn on_agents(&self) -> bool {
        self.ports.iter().any(|p| p.agent.is_some())
    }

    /// The ports: `ports`, or the one-way form's tx and rx.
    pub fn port_list(&self) -> Vec<Port> {
        match (&self.tx, &self.rx) {
            (Some(t), Some(r)) if self.ports.is_empty() => vec![t.clone(), r.clone()],
            _ => self.ports.clone(),
        }
    }

    /// Whether the experiment names `ports` (its profile is made per direction).
    pub fn multi_port(&self) -> bool {
        !self.ports.is_empty()
    }

    /// Which port sends to which: `pairs` over `ports` (two ports: both ways by default),
    /// or the one-way form's tx → rx.
    pub fn directions(&self) -> Result<Vec<Direction>, String> {
        let ports = self.port_list();
        let pairs = match (&self.pairs, self.pair.is_empty()) {
            _ if !self.multi_port() => Pairs::List(vec![Pair {
                from: PortId::Index(0),
                to: PortId::Index(1),
            }]),
            (Some(p), _) => p.clone(),
            (None, false) => Pairs::List(self.pair.clone()),
            (None, true) if self.method == Method::Rfc2889 => Pairs::Named(PairsKind::FullMesh),
            (None, true) if ports.len() == 2 => Pairs::Named(PairsKind::Bidirectional),
            (None, true) => {
                return Err(format!(
                    "{} ports: say which sends to which with pairs = \"full-mesh\", \"bidirectional\", or a list of {{ from, to }}",
                    ports.len()
                ))
            }
        };
        let names: Vec<&str> = ports.iter().map(|p| p.iface.as_str()).collect();
        directions(&names, &pairs)
    }
}
