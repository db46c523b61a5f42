//! bgpd's vty: every command a server sends it, and its replies read by name.

use serde_json::Value;

use crate::bgp::frr_json::{self, PrefixFilter};
use crate::bgp::{Peer, Range};
use crate::frr::vty::{configure, Ask, Replies};

/// The daemon these commands are for.
pub const DAEMON: &str = "bgpd";

/// Every peer's state and counters (`neighbors`).
pub fn neighbors() -> Ask {
    Ask::new(DAEMON).with("neighbors", "show bgp neighbors json")
}

/// The routes received from `p`, in each family (`ipv4`, `ipv6`).
pub fn received(p: &Peer) -> Ask {
    let show = |af: &str| format!("show bgp {af} unicast neighbors {} received-routes json", p.address);
    Ask::new(DAEMON).with("ipv4", show("ipv4")).with("ipv6", show("ipv6"))
}

/// Peer `p`'s `bgpv4_metrics`/`bgpv6_metrics` entry from the `neighbors` reply (parsed once
/// for all peers) and the replies to [`received`] (asked only when `neighbors` answered).
pub fn metric(p: &Peer, neighbors: &Value, received: &Replies) -> Value {
    let got = neighbors.is_object().then(|| {
        ["ipv4", "ipv6"]
            .iter()
            .map(|af| frr_json::received_count(&received.json(af)))
            .sum()
    });
    frr_json::metric(p, neighbors, got)
}

/// Peer `p`'s `bgp_prefixes` entry from the replies to [`received`].
pub fn prefixes(p: &Peer, received: &Replies, f: &PrefixFilter) -> Value {
    frr_json::prefixes(p, &received.json("ipv4"), &received.json("ipv6"), f)
}

/// The `network` line that originates one prefix of peer `i`'s range `j` with the range's
/// attributes (route-map `GL-RR-i-j`): the same in the configuration file and over the vty.
pub fn network_line(net: std::net::IpAddr, len: u8, i: usize, j: usize) -> String {
    format!("network {net}/{len} route-map GL-RR-{i}-{j}")
}

/// Adds (or removes) peer `i`'s range `j`'s `network` lines on router `asn`.
pub fn network(asn: u32, i: usize, j: usize, x: &Range, advertise: bool) -> Vec<String> {
    let af = if x.v6 { "ipv6" } else { "ipv4" };
    let mut lines = vec![format!("router bgp {asn}"), format!("address-family {af} unicast")];
    for b in &x.blocks {
        for (net, len) in b.prefixes() {
            lines.push(if advertise {
                network_line(net, len, i, j)
            } else {
                format!("no network {net}/{len}")
            });
        }
    }
    configure(lines)
}

/// Sets the peers at `addresses` administratively up (or down) on router `asn`.
pub fn shutdown<'a>(asn: u32, addresses: impl IntoIterator<Item = &'a std::net::IpAddr>, up: bool) -> Vec<String> {
    let no = if up { "no " } else { "" };
    let mut lines = vec![format!("router bgp {asn}")];
    lines.extend(addresses.into_iter().map(|a| format!("{no}neighbor {a} shutdown")));
    configure(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_shut_down_and_brought_back_in_one_session() {
        let a: Vec<std::net::IpAddr> = vec!["10.0.0.2".parse().unwrap(), "2001:db8::2".parse().unwrap()];
        assert_eq!(
            shutdown(65001, &a, false),
            [
                "configure terminal",
                "router bgp 65001",
                "neighbor 10.0.0.2 shutdown",
                "neighbor 2001:db8::2 shutdown",
                "end"
            ]
        );
        assert_eq!(shutdown(65001, &a, true)[2], "no neighbor 10.0.0.2 shutdown");
    }

    #[test]
    fn a_peers_metric_counts_what_it_received_in_both_families_by_name() {
        let p = crate::bgp::frr_json::tests::peer();
        let neighbors: Value = serde_json::from_str(include_str!("testdata/neighbors.json")).unwrap();
        let got = received(&p).replies(vec![
            include_str!("testdata/received-v4.json").into(),
            include_str!("testdata/received-v6.json").into(),
        ]);
        let m = metric(&p, &neighbors, &got);
        assert_eq!(
            m["routes_received"], 5,
            "expected the 5 routes of the recorded replies; got {m}"
        );
        let none = metric(&p, &Value::Null, &Replies::none());
        assert_eq!(
            none.get("routes_received"),
            None,
            "expected no count without bgpd's answer; got {none}"
        );
        assert_eq!(
            received(&p).commands()[1],
            "show bgp ipv6 unicast neighbors 10.9.0.1 received-routes json"
        );
    }
}
