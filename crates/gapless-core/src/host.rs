//! Where a run happened: the host, its kernel, CPU and clock, the interface, and the
//! pre-flight probe of the cores. Both a run's result and a meter's report carry it.

use serde::{Deserialize, Serialize};

/// Where and how the run happened.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Environment {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    /// The clock the pacer reads, e.g. "TSC, disciplined to CLOCK_MONOTONIC".
    pub clock: String,
    /// The counter's rate the pacer used, as measured against CLOCK_MONOTONIC over the run.
    pub tsc_hz: Option<f64>,
    /// That rate's uncertainty (ppm): what the clock reads cost over the span measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_hz_uncertainty_ppm: Option<f64>,
    /// How the pacer's clock was kept on CLOCK_MONOTONIC during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_discipline: Option<ClockDiscipline>,
    pub tx_core: Option<usize>,
    pub iface: Option<String>,
    pub driver: Option<String>,
    pub mtu: Option<u32>,
    pub link_speed_bps: Option<f64>,
    pub netns: Option<String>,
    /// The pre-flight probe of each allowed core (paced runs): the share of a 100 ms spin
    /// that the core lost to other work. The send loop took the quietest unless told.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub core_probe: Vec<CoreLoad>,
}

/// The pacer's clock against CLOCK_MONOTONIC over a run: comparisons made (one per 50 ms),
/// and the offsets found (ns, + = the pacer ahead), each steered out within a second.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClockDiscipline {
    pub samples: u32,
    pub last_offset_ns: i64,
    pub max_offset_ns: i64,
}

/// One core's pre-flight probe.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CoreLoad {
    pub core: usize,
    pub lost_fraction: f64,
    pub longest_gap_ns: u64,
}
