//! RFC 2889 (benchmarking LAN switching devices), without IO: the `[rfc2889]` table, the
//! searches, and what each test found with the procedure it followed.
//!
//! - **Address caching capacity** (§5.7): the learning port sends frames from N source
//!   addresses to the test port; the test port then sends N frames to those addresses. N
//!   passes when every test frame reaches the learning port and none is flooded to the
//!   monitor port. A binary search finds the largest N that passes. The table is emptied
//!   before each iteration (flushed on the reference bridge, else aged out), and the test
//!   port's own address, learned first so that the learning frames are not flooded, takes
//!   one entry: the capacity is the largest N plus that one.
//! - **Address learning rate** (§5.8): the same iteration with N addresses (the caching
//!   capacity found, or given), searched over the learning frames' rate.
//! - **Fully meshed** (§5.1): every port sends to every other at once; the throughput (no
//!   loss) by binary search over the aggregate load, and the forwarding rate at the
//!   maximum offered load.
//! - **Congestion control** (§5.5): four ports with the same maximum offered load (MOL).
//!   Source A sends half its MOL to C and half to D; source B sends its whole MOL to C. C is
//!   congested (150 % of its MOL), D is not (50 %). Frames lost on the way to D are
//!   head-of-line blocking; sources held back below their intended load (the sending device
//!   refused frames, as a port paused by flow control does) are back pressure. It needs a
//!   device with a shared buffer to mean anything; a veth bridge has none, so the engine
//!   refuses it on the reference bridge.

use serde::{Deserialize, Serialize};

use crate::experiment::search::SearchResult;

/// The tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rfc2889Test {
    AddressCaching,
    AddressLearningRate,
    FullyMeshed,
    CongestionControl,
}

/// The `[rfc2889]` table.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rfc2889Spec {
    #[serde(default = "default_tests")]
    pub tests: Vec<Rfc2889Test>,
    #[serde(default = "default_size")]
    pub frame_size: u32,
    /// Indices into `ports`: where addresses are learned, where test frames come from, and
    /// where flooding is watched for.
    #[serde(default)]
    pub learning_port: usize,
    #[serde(default = "one")]
    pub test_port: usize,
    #[serde(default = "two")]
    pub monitor_port: usize,
    /// Address caching: the range of N searched.
    #[serde(default = "one_u32")]
    pub min_addresses: u32,
    #[serde(default = "default_max_addresses")]
    pub max_addresses: u32,
    /// The learning frames' and the test frames' rate (address caching).
    #[serde(default = "default_rate")]
    pub learning_rate_pps: f64,
    #[serde(default = "default_rate")]
    pub test_rate_pps: f64,
    /// A real switch's address aging time: waited (plus a second) before each iteration.
    /// The reference bridge is flushed instead.
    pub aging_time_s: Option<f64>,
    /// Address learning rate: N (default: the caching capacity found, less the test port's
    /// entry; else `max_addresses`), and the learning rates searched.
    pub learning_addresses: Option<u32>,
    #[serde(default = "default_learning_min")]
    pub learning_min_rate_pps: f64,
    #[serde(default = "default_learning_max")]
    pub learning_max_rate_pps: f64,
    /// Fully meshed: the aggregate load range, and the searches' resolution.
    pub max_rate_pps: Option<f64>,
    pub min_rate_pps: Option<f64>,
    #[serde(default = "default_resolution")]
    pub resolution_pct: f64,
    /// Congestion control: indices into `ports` of source A, source B, the congested port C
    /// and the uncongested port D.
    #[serde(default = "default_congestion_ports")]
    pub congestion_ports: [usize; 4],
    /// Congestion control: every port's maximum offered load (MOL), frames/s: what one of
    /// the switch's ports forwards at most.
    pub congestion_load_pps: Option<f64>,
}

fn default_congestion_ports() -> [usize; 4] {
    [0, 1, 2, 3]
}

fn default_tests() -> Vec<Rfc2889Test> {
    vec![
        Rfc2889Test::AddressCaching,
        Rfc2889Test::AddressLearningRate,
        Rfc2889Test::FullyMeshed,
    ]
}
fn default_size() -> u32 {
    64
}
fn one() -> usize {
    1
}
fn two() -> usize {
    2
}
fn one_u32() -> u32 {
    1
}
fn default_max_addresses() -> u32 {
    4096
}
fn default_rate() -> f64 {
    10_000.0
}
fn default_learning_min() -> f64 {
    100.0
}
fn default_learning_max() -> f64 {
    100_000.0
}
fn default_resolution() -> f64 {
    1.0
}

impl Rfc2889Spec {
    /// Checks every value against `ports` ports; errors name `rfc2889.KEY`.
    pub fn check(&self, ports: usize) -> Result<(), String> {
        if self.tests.is_empty() {
            return Err("rfc2889.tests is empty: give one or more of \"address_caching\", \"address_learning_rate\", \"fully_meshed\", \"congestion_control\"".into());
        }
        if !(60..=9216).contains(&self.frame_size) {
            return Err(format!(
                "rfc2889.frame_size = {}: give 60 to 9216 bytes",
                self.frame_size
            ));
        }
        let roles = [
            ("learning_port", self.learning_port),
            ("test_port", self.test_port),
            ("monitor_port", self.monitor_port),
        ];
        if self.learns() {
            for (k, p) in roles {
                if p >= ports {
                    return Err(format!(
                        "rfc2889.{k} = {p}: there are {ports} ports (0 to {})",
                        ports.saturating_sub(1)
                    ));
                }
            }
            if self.learning_port == self.test_port
                || self.monitor_port == self.learning_port
                || self.monitor_port == self.test_port
            {
                return Err("rfc2889: learning_port, test_port and monitor_port must be three different ports".into());
            }
        }
        if self.min_addresses == 0 || self.min_addresses > self.max_addresses || self.max_addresses > 1 << 20 {
            return Err(format!(
                "rfc2889.min_addresses = {}, max_addresses = {}: give 1 ≤ min ≤ max ≤ 1048576",
                self.min_addresses, self.max_addresses
            ));
        }
        let pos = |x: f64| x.is_finite() && x > 0.0;
        for (k, v) in [
            ("learning_rate_pps", self.learning_rate_pps),
            ("test_rate_pps", self.test_rate_pps),
            ("learning_min_rate_pps", self.learning_min_rate_pps),
            ("learning_max_rate_pps", self.learning_max_rate_pps),
            ("resolution_pct", self.resolution_pct),
        ] {
            if !pos(v) {
                return Err(format!("rfc2889.{k} = {v}: give a positive number"));
            }
        }
        if self.learning_min_rate_pps >= self.learning_max_rate_pps {
            return Err(format!(
                "rfc2889.learning_min_rate_pps = {}: give a rate below learning_max_rate_pps ({})",
                self.learning_min_rate_pps, self.learning_max_rate_pps
            ));
        }
        if let Some(a) = self.aging_time_s.filter(|a| !pos(*a)) {
            return Err(format!(
                "rfc2889.aging_time_s = {a}: give the switch's aging time in seconds"
            ));
        }
        if self.tests.contains(&Rfc2889Test::FullyMeshed) && self.max_rate_pps.is_none_or(|m| !pos(m)) {
            return Err(
                "rfc2889: fully_meshed needs max_rate_pps, the aggregate offered load over every port (frames/s)"
                    .into(),
            );
        }
        if self.tests.contains(&Rfc2889Test::CongestionControl) {
            self.check_congestion(ports)?;
        }
        Ok(())
    }

    fn check_congestion(&self, ports: usize) -> Result<(), String> {
        let c = self.congestion_ports;
        if let Some(p) = c.iter().find(|&&p| p >= ports) {
            return Err(format!(
                "rfc2889.congestion_ports = {c:?}: port {p} is not among the {ports} ports; congestion_control needs four (0 to {})",
                ports.saturating_sub(1)
            ));
        }
        if (0..4).any(|i| c[i + 1..].contains(&c[i])) {
            return Err(format!(
                "rfc2889.congestion_ports = {c:?}: give four different ports (source A, source B, congested C, uncongested D)"
            ));
        }
        match self.congestion_load_pps {
            Some(m) if m.is_finite() && m > 0.0 => Ok(()),
            _ => Err("rfc2889: congestion_control needs congestion_load_pps, every port's maximum offered load (frames/s): what one port of the switch forwards at most".into()),
        }
    }

    /// Congestion control's directions as (from, to, frames/s): A→C and A→D at half the
    /// MOL, B→C at the whole MOL.
    pub fn congestion_loads(&self) -> Vec<(usize, usize, f64)> {
        let [a, b, c, d] = self.congestion_ports;
        let mol = self.congestion_load_pps.unwrap_or(0.0);
        vec![(a, c, mol / 2.0), (a, d, mol / 2.0), (b, c, mol)]
    }

    /// Whether a test learns addresses (and needs the three port roles).
    pub fn learns(&self) -> bool {
        self.tests
            .iter()
            .any(|t| matches!(t, Rfc2889Test::AddressCaching | Rfc2889Test::AddressLearningRate))
    }
}

/// One iteration of the address tests: what the engine runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearningPlan {
    pub addresses: u32,
    pub learning_pps: f64,
    pub test_pps: f64,
    pub learning_port: usize,
    pub test_port: usize,
    pub monitor_port: usize,
    /// A real switch's aging time, waited before the iteration (None: flush the bridge).
    pub aging_time_s: Option<f64>,
}

/// A binary search over whole numbers: the largest that passes in `min..=max`.
#[derive(Debug, Clone, PartialEq)]
pub struct Bisect {
    min: u32,
    max: u32,
    /// The largest that passed, and the smallest that failed.
    passed: Option<u32>,
    failed: Option<u32>,
}

impl Bisect {
    pub fn new(min: u32, max: u32) -> Bisect {
        Bisect {
            min,
            max,
            passed: None,
            failed: None,
        }
    }

    /// The next N to try (the maximum first), or None when the answer is known.
    pub fn next(&self) -> Option<u32> {
        match (self.passed, self.failed) {
            (None, None) => Some(self.max),
            (Some(_), None) => None,
            (None, Some(f)) if f == self.min => None,
            (None, Some(f)) => Some(self.min + (f - self.min) / 2),
            (Some(p), Some(f)) if f - p <= 1 => None,
            (Some(p), Some(f)) => Some(p + (f - p) / 2),
        }
    }

    pub fn record(&mut self, n: u32, passed: bool) {
        if passed {
            self.passed = self.passed.max(Some(n));
        } else {
            self.failed = Some(self.failed.map_or(n, |f| f.min(n)));
        }
    }

    /// The largest N that passed (None: not even the minimum).
    pub fn result(&self) -> Option<u32> {
        self.passed
    }
}

/// What RFC 2889 found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rfc2889Result {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_caching: Option<CachingResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_learning_rate: Option<LearningRateResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fully_meshed: Option<MeshResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_control: Option<CongestionResult>,
}

/// Address caching capacity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachingResult {
    /// The largest N of test addresses learned with no flooding (None: not even the minimum).
    pub addresses: Option<u32>,
    /// Entries the test ports' own addresses took (the test port's, learned first).
    pub own_entries: u32,
    /// `addresses + own_entries`: the table's capacity.
    pub capacity: Option<u32>,
    /// N passed at `max_addresses`: the capacity is at least that, not found.
    pub at_max: bool,
    pub procedure: String,
    pub trials: Vec<usize>,
}

/// Address learning rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearningRateResult {
    /// The highest learning frames' rate at which all N addresses were learned.
    pub rate_pps: Option<f64>,
    pub addresses: u32,
    pub procedure: String,
    pub search: SearchResult,
    pub trials: Vec<usize>,
}

/// Fully meshed forwarding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshResult {
    pub ports: usize,
    /// The highest aggregate load with no loss.
    pub throughput_pps: Option<f64>,
    /// At the maximum offered load: received frames per second, and the loss.
    pub offered_pps: f64,
    pub forwarding_rate_pps: Option<f64>,
    pub loss_pct: f64,
    pub procedure: String,
    pub search: SearchResult,
    pub trials: Vec<usize>,
}

/// Congestion control (§5.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CongestionResult {
    /// Indices into `ports`: source A, source B, congested C, uncongested D.
    pub ports: [usize; 4],
    /// Every port's maximum offered load (MOL), frames/s.
    pub load_pps: f64,
    /// Frames lost on the way to the uncongested port (A→D), and to the congested one
    /// (A→C and B→C together), as % of those sent.
    pub uncongested_loss_pct: f64,
    pub congested_loss_pct: f64,
    /// What the congested port loses when it forwards exactly its MOL and nothing holds the
    /// sources back: 1 − 1/1.5 = 33.3 %.
    pub expected_congested_loss_pct: f64,
    /// Frames per second the congested port and the uncongested port received.
    pub congested_rate_pps: Option<f64>,
    pub uncongested_rate_pps: Option<f64>,
    /// Each source's offered load against its intended load (frames/s over the metered
    /// part; frames the sending device refused are not offered).
    pub offered_pps: [f64; 2],
    pub intended_pps: [f64; 2],
    /// Frames lost to the uncongested port: congestion elsewhere blocked them. None: not
    /// judged (see `not_judged`).
    pub head_of_line_blocking: Option<bool>,
    /// A source offered less than intended: its device refused frames, as a port paused by
    /// flow control does. None: not judged.
    pub back_pressure: Option<bool>,
    /// Why neither could be judged: the trial's sender fell behind its schedule on every
    /// attempt (the verdict's reason). A source blocked by flow control also falls behind,
    /// so on a real switch this can itself be back pressure; the trial's warnings and the
    /// sending host's load tell which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_judged: Option<String>,
    pub procedure: String,
    pub trials: Vec<usize>,
}

/// The procedure text of congestion control.
pub fn congestion_procedure(s: &Rfc2889Spec, duration_s: f64) -> String {
    let [a, b, c, d] = s.congestion_ports;
    let mol = s.congestion_load_pps.unwrap_or(0.0);
    format!(
        "RFC 2889 §5.5: every port's maximum offered load (MOL) {mol} frames/s, {} B frames, {duration_s} s; port {a} sends {} frames/s to port {c} and {} to port {d}, port {b} sends {mol} to port {c} (port {c} congested at 150 % of its MOL, port {d} not at 50 %); the receiving ports announce their addresses first; head-of-line blocking when port {d} lost frames, back pressure when a source offered less than intended",
        s.frame_size,
        mol / 2.0,
        mol / 2.0
    )
}

/// The procedure text of address caching.
pub fn caching_procedure(s: &Rfc2889Spec, flush: &str) -> String {
    format!(
        "RFC 2889 §5.7: the test port's address learned first; learning frames from N source addresses sent from port {} at {} frames/s, then N test frames to them from port {} at {} frames/s; N passes when all reach port {} and none is flooded to port {}; binary search over N from {} to {}; before each iteration {flush}",
        s.learning_port, s.learning_rate_pps, s.test_port, s.test_rate_pps, s.learning_port, s.monitor_port, s.min_addresses, s.max_addresses
    )
}

/// The procedure text of the address learning rate.
pub fn learning_procedure(s: &Rfc2889Spec, n: u32, flush: &str) -> String {
    format!(
        "RFC 2889 §5.8: as §5.7 with N = {n} addresses, the learning frames' rate searched from {} to {} frames/s to {} %; a rate passes when every test frame reaches port {} and none is flooded to port {}; before each iteration {flush}",
        s.learning_min_rate_pps, s.learning_max_rate_pps, s.resolution_pct, s.learning_port, s.monitor_port
    )
}

/// The procedure text of fully meshed forwarding.
pub fn mesh_procedure(s: &Rfc2889Spec, ports: usize) -> String {
    format!(
        "RFC 2889 §5.1: each of {ports} ports sends to every other ({} directions) at once, {} B frames, the load split evenly; the forwarding rate at the maximum offered load {} frames/s, and the throughput (no loss) by binary search to {} %",
        ports * (ports - 1),
        s.frame_size,
        s.max_rate_pps.unwrap_or(0.0),
        s.resolution_pct
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bisection_finds_the_largest_that_passes() {
        for cap in [0u32, 1, 2, 37, 63, 64, 100] {
            let mut b = Bisect::new(1, 64);
            let mut tries = 0;
            while let Some(n) = b.next() {
                b.record(n, n <= cap);
                tries += 1;
                assert!(tries <= 8, "expected at most 8 tries for 1..=64; cap {cap}");
            }
            let want = (cap >= 1).then_some(cap.min(64));
            assert_eq!(b.result(), want, "cap {cap}: expected {want:?}, got {:?}", b.result());
        }
    }

    #[test]
    fn bad_tables_name_the_key() {
        let mut s: Rfc2889Spec = toml::from_str("max_rate_pps = 1000").unwrap();
        assert_eq!(s.check(3), Ok(()));
        assert!(s.check(2).unwrap_err().contains("rfc2889.monitor_port = 2"));
        s.monitor_port = 1;
        assert!(s.check(3).unwrap_err().contains("three different ports"));
        s.monitor_port = 2;
        s.max_rate_pps = None;
        assert!(s.check(3).unwrap_err().contains("fully_meshed needs max_rate_pps"));
        let s: Rfc2889Spec =
            toml::from_str("tests = [\"address_caching\"]\nmin_addresses = 9\nmax_addresses = 8").unwrap();
        assert!(s.check(3).unwrap_err().contains("rfc2889.min_addresses = 9"));
    }
}
