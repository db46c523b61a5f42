//! The leaves of the OTG state trees now, gathered from the same handlers that answer the
//! OTG API's `monitor/metrics` and `monitor/states` (one source: the two APIs cannot
//! disagree). Only the trees asked for are gathered: BGP, IS-IS and OSPF figures are vty
//! exchanges with each device's daemons.

use std::collections::BTreeSet;

use gapless_gnmi::state::{self, Leaf};
use serde_json::{json, Value};

use crate::otg::metrics::metrics_for;
use crate::Shared;

/// The trees this server fills, by their top-level node.
pub const ROOTS: [&str; 10] = [
    "flows",
    "ports",
    "interfaces",
    "bgp-peers",
    "isis-routers",
    "ospfv2-routers",
    "ospfv3-routers",
    "lldps",
    "lags",
    "lacp",
];

/// Every leaf of the trees in `roots` (all when none), on the calling (blocking) thread. A
/// tree whose source has nothing yet (no config, no run, no device) is empty, not an error:
/// a client waits on it for entries to come.
pub fn leaves(s: &Shared, roots: Option<&BTreeSet<String>>) -> Vec<Leaf> {
    let wanted = |r: &str| roots.is_none_or(|set| set.contains(r));
    let mut out = Vec::new();
    for root in ROOTS.into_iter().filter(|r| wanted(r)) {
        out.extend(match root {
            "flows" => state::flows(&list(s, "flow", "flow_metrics")),
            "ports" => state::ports(&list(s, "port", "port_metrics")),
            "bgp-peers" => {
                let mut all = list(s, "bgpv4", "bgpv4_metrics");
                all.extend(list(s, "bgpv6", "bgpv6_metrics"));
                let mut leaves = state::bgp_peers(&all);
                leaves.extend(state::bgp_prefixes(&states(s, "bgp_prefixes")));
                leaves
            }
            "isis-routers" => {
                let mut leaves = state::isis_routers(&list(s, "isis", "isis_metrics"));
                leaves.extend(state::isis_lsps(&states(s, "isis_lsps")));
                leaves
            }
            "ospfv2-routers" => {
                let mut leaves = state::ospfv2_routers(&list(s, "ospfv2", "ospfv2_metrics"));
                leaves.extend(state::ospf_lsas(&states(s, "ospfv2_lsas"), false));
                leaves
            }
            "ospfv3-routers" => {
                let mut leaves = state::ospfv3_routers(&list(s, "ospfv3", "ospfv3_metrics"));
                leaves.extend(state::ospf_lsas(&states(s, "ospfv3_lsas"), true));
                leaves
            }
            "lldps" => state::lldps(&list(s, "lldp", "lldp_metrics"), &states(s, "lldp_neighbors")),
            "lags" => state::lags(&list(s, "lag", "lag_metrics")),
            "lacp" => state::lacp(&list(s, "lacp", "lacp_metrics")),
            _ => state::neighbors(&states(s, "ipv4_neighbors"), &states(s, "ipv6_neighbors")),
        });
    }
    out
}

/// The entries of one metrics choice (none when it has nothing to say yet).
fn list(s: &Shared, choice: &str, key: &str) -> Vec<Value> {
    entries(metrics_for(s, &json!({ "choice": choice })), key)
}

/// The entries of one states choice (`ipv4_neighbors`, `bgp_prefixes`, `lldp_neighbors`).
fn states(s: &Shared, choice: &str) -> Vec<Value> {
    entries(crate::otg::devices::states_now(s, &json!({ "choice": choice })), choice)
}

/// The list under `key` of an answer; none when the answer is an error (no config yet).
fn entries(answer: Result<Value, gapless_otg::OtgError>, key: &str) -> Vec<Value> {
    match answer.map(|mut v| v.get_mut(key).map(Value::take)) {
        Ok(Some(Value::Array(a))) => a,
        _ => Vec::new(),
    }
}
