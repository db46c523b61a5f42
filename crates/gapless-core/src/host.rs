//! Where a run happened: the host, its kernel, CPU and clock, the interface, and the
//! pre-flight probe of the cores. Both a run's result and a meter's report carry it.

use serde::{Deserialize, Serialize};

/// Where and how the run happened.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Environment {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    /// The clock the pacer reads, e.g. "tsc via quanta".
    pub clock: String,
    pub tsc_hz: Option<f64>,
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

/// One core's pre-flight probe.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CoreLoad {
    pub core: usize,
    pub lost_fraction: f64,
    pub longest_gap_ns: u64,
}
