//! FRR's JSON (Debian's FRR 8.4) as OTG BGP metrics and states, sans IO: the server asks
//! bgpd over its vty and hands the replies here. Tested with outputs recorded from that FRR
//! (`testdata/`).
//!
//! What FRR does not give is absent, not zero: `route_withdraws_sent` and
//! `route_withdraws_received` (its JSON counts UPDATEs, not the withdrawals in them), and a
//! received route's `local_preference` and `communities` (`received-routes json` leaves them
//! out).

use serde_json::{json, Map, Value};

use super::Peer;

/// `bgpv4_metrics[]` / `bgpv6_metrics[]` entry of `peer`, from `show bgp neighbors json`
/// (`neighbors`, Null when the daemon did not answer) and the routes received in all
/// families (from `received-routes json`'s `totalPrefixCounter`).
pub fn metric(peer: &Peer, neighbors: &Value, received: Option<u64>) -> Value {
    let n = &neighbors[peer.address.to_string()];
    // FRR's own states (Clearing, Deleted) are on the way down: the model's idle.
    let frr = n["bgpState"].as_str().unwrap_or("Idle").to_ascii_lowercase();
    let state = match frr.as_str() {
        "idle" | "connect" | "active" | "opensent" | "openconfirm" | "established" => frr.as_str(),
        _ => "idle",
    };
    let mut m = Map::new();
    m.insert("name".into(), json!(peer.name));
    m.insert(
        "session_state".into(),
        json!(if state == "established" { "up" } else { "down" }),
    );
    m.insert("fsm_state".into(), json!(state));
    if n.is_object() {
        let s = &n["messageStats"];
        for (otg, frr) in [
            ("updates_sent", "updatesSent"),
            ("updates_received", "updatesRecv"),
            ("opens_sent", "opensSent"),
            ("opens_received", "opensRecv"),
            ("keepalives_sent", "keepalivesSent"),
            ("keepalives_received", "keepalivesRecv"),
            ("notifications_sent", "notificationsSent"),
            ("notifications_received", "notificationsRecv"),
        ] {
            if let Some(v) = s[frr].as_u64() {
                m.insert(otg.into(), json!(v));
            }
        }
        if let Some(d) = n["connectionsDropped"].as_u64() {
            m.insert("session_flap_count".into(), json!(d));
        }
        let families = n["addressFamilyInfo"].as_object().cloned().unwrap_or_default();
        let sent: u64 = families.values().filter_map(|f| f["sentPrefixCounter"].as_u64()).sum();
        m.insert("routes_advertised".into(), json!(sent));
        let eor = n["gracefulRestartInfo"]["endOfRibRecv"].as_object();
        let eor = eor.map_or(0, |o| o.values().filter(|v| v.as_bool() == Some(true)).count());
        m.insert("end_of_rib_received".into(), json!(eor));
        if let Some(r) = received {
            m.insert("routes_received".into(), json!(r));
        }
    }
    Value::Object(m)
}

/// The routes a `received-routes json` reply lists.
pub fn received_count(reply: &Value) -> u64 {
    reply["totalPrefixCounter"]
        .as_u64()
        .unwrap_or_else(|| reply["receivedRoutes"].as_object().map_or(0, |o| o.len() as u64))
}

/// What a `bgp_prefixes` request keeps.
#[derive(Debug, Default, Clone)]
pub struct PrefixFilter {
    pub v4: bool,
    pub v6: bool,
    /// Only these addresses (empty: all), and this prefix length and origin when given.
    pub addresses: Vec<String>,
    pub prefix_length: Option<u64>,
    pub origin: Option<String>,
}

impl PrefixFilter {
    /// From a `BgpPrefix.State.Request` (the unicast filters of both families merged).
    pub fn of(req: &Value) -> PrefixFilter {
        let fams: Vec<&str> = req["prefix_filters"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut f = PrefixFilter {
            v4: fams.is_empty() || fams.contains(&"ipv4_unicast"),
            v6: fams.is_empty() || fams.contains(&"ipv6_unicast"),
            ..PrefixFilter::default()
        };
        for key in ["ipv4_unicast_filters", "ipv6_unicast_filters"] {
            for x in req[key].as_array().cloned().unwrap_or_default() {
                f.addresses.extend(
                    x["addresses"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|a| a.as_str().map(str::to_string)),
                );
                f.prefix_length = f.prefix_length.or(x["prefix_length"].as_u64());
                f.origin = f.origin.clone().or(x["origin"].as_str().map(str::to_string));
            }
        }
        f
    }

    fn keeps(&self, p: &Value, v6: bool) -> bool {
        let addr = p[if v6 { "ipv6_address" } else { "ipv4_address" }]
            .as_str()
            .unwrap_or_default();
        (self.addresses.is_empty() || self.addresses.iter().any(|a| a == addr))
            && self
                .prefix_length
                .is_none_or(|l| p["prefix_length"].as_u64() == Some(l))
            && self.origin.as_deref().is_none_or(|o| p["origin"].as_str() == Some(o))
    }
}

/// A `bgp_prefixes[]` entry: the routes received from `peer` in each family's
/// `received-routes json` reply, in the model's form.
pub fn prefixes(peer: &Peer, v4: &Value, v6: &Value, f: &PrefixFilter) -> Value {
    let list = |reply: &Value, six: bool| -> Vec<Value> {
        let routes = reply["receivedRoutes"].as_object().cloned().unwrap_or_default();
        routes
            .values()
            .map(|r| route(r, six))
            .filter(|p| f.keeps(p, six))
            .collect()
    };
    let mut out = json!({ "bgp_peer_name": peer.name });
    if f.v4 {
        out["ipv4_unicast_prefixes"] = json!(list(v4, false));
    }
    if f.v6 {
        out["ipv6_unicast_prefixes"] = json!(list(v6, true));
    }
    out
}

fn route(r: &Value, v6: bool) -> Value {
    let origin = match r["bgpOriginCode"].as_str() {
        Some("e") => "egp",
        Some("?") => "incomplete",
        _ => "igp",
    };
    let mut p = json!({
        if v6 { "ipv6_address" } else { "ipv4_address" }: r["addrPrefix"],
        "prefix_length": r["prefixLen"],
        "origin": origin,
        "as_path": { "segments": as_path(r["path"].as_str().unwrap_or_default()) },
    });
    if let Some(m) = r["metric"].as_u64() {
        p["multi_exit_discriminator"] = json!(m);
    }
    let hop = r["nextHop"]
        .as_str()
        .or(r["nextHopGlobal"].as_str())
        .unwrap_or_default();
    match hop.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => p["ipv4_next_hop"] = json!(a.to_string()),
        Ok(std::net::IpAddr::V6(a)) => {
            p["ipv6_next_hop"] = json!(a.to_string());
            // An IPv6 route over an IPv4 session: FRR's next hop is the IPv4-mapped address,
            // written in hex (snappi's IPv6 check refuses the dotted form).
            if let Some(v4) = a.to_ipv4_mapped() {
                let s = a.segments();
                p["ipv6_next_hop"] = json!(format!("::ffff:{:x}:{:x}", s[6], s[7]));
                p["ipv4_next_hop"] = json!(v4.to_string());
            }
        }
        Err(_) => {}
    }
    p
}

/// FRR's path text (`65001 {65010,65011} 65002`) as the model's segments.
fn as_path(text: &str) -> Vec<Value> {
    let mut segs: Vec<Value> = Vec::new();
    let mut seq: Vec<u64> = Vec::new();
    for word in text.split_whitespace() {
        if let Some(set) = word.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
            if !seq.is_empty() {
                segs.push(json!({ "type": "as_seq", "as_numbers": std::mem::take(&mut seq) }));
            }
            let n: Vec<u64> = set.split(',').filter_map(|x| x.parse().ok()).collect();
            segs.push(json!({ "type": "as_set", "as_numbers": n }));
        } else if let Ok(n) = word.parse() {
            seq.push(n);
        }
    }
    if !seq.is_empty() {
        segs.push(json!({ "type": "as_seq", "as_numbers": seq }));
    }
    segs
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn peer() -> Peer {
        Peer {
            name: "d2.peer".into(),
            local: "10.9.0.2".parse().unwrap(),
            address: "10.9.0.1".parse().unwrap(),
            ebgp: true,
            asn: 65002,
            hold_s: 90,
            keepalive_s: 30,
            passive: false,
            md5: None,
            routes: Vec::new(),
        }
    }

    fn data(name: &str) -> Value {
        let text = match name {
            "neighbors" => include_str!("testdata/neighbors.json"),
            "v4" => include_str!("testdata/received-v4.json"),
            _ => include_str!("testdata/received-v6.json"),
        };
        serde_json::from_str(text).expect("recorded FRR JSON parses")
    }

    #[test]
    fn a_recorded_neighbor_is_an_otg_metric_with_what_frr_does_not_count_left_out() {
        let n = data("neighbors");
        let got = received_count(&data("v4")) + received_count(&data("v6"));
        let m = metric(&peer(), &n, Some(got));
        let want = json!({ "name": "d2.peer", "session_state": "up", "fsm_state": "established",
            "updates_sent": 7, "updates_received": 11, "opens_sent": 2, "opens_received": 2, "keepalives_sent": 84,
            "keepalives_received": 84, "notifications_sent": 1, "notifications_received": 0, "session_flap_count": 1,
            "routes_advertised": 2, "end_of_rib_received": 2, "routes_received": 5 });
        assert_eq!(m, want);
        let gone = metric(&peer(), &Value::Null, None);
        assert_eq!(
            gone,
            json!({ "name": "d2.peer", "session_state": "down", "fsm_state": "idle" }),
            "a dead daemon's session is down"
        );
    }

    #[test]
    fn recorded_received_routes_are_prefix_states_with_next_hops_and_paths() {
        let all = prefixes(&peer(), &data("v4"), &data("v6"), &PrefixFilter::of(&json!({})));
        let v4 = all["ipv4_unicast_prefixes"].as_array().unwrap();
        assert_eq!(v4.len(), 4);
        assert_eq!(
            v4[0],
            json!({ "ipv4_address": "20.0.0.0", "prefix_length": 24, "origin": "igp", "ipv4_next_hop": "10.9.0.1",
                "multi_exit_discriminator": 0, "as_path": { "segments": [{ "type": "as_seq", "as_numbers": [65001] }] } })
        );
        let v6 = &all["ipv6_unicast_prefixes"][0];
        assert_eq!(
            (v6["ipv6_next_hop"].as_str(), v6["ipv4_next_hop"].as_str()),
            (Some("::ffff:a09:1"), Some("10.9.0.1"))
        );
        let only = PrefixFilter::of(&json!({ "prefix_filters": ["ipv4_unicast"],
            "ipv4_unicast_filters": [{ "addresses": ["20.0.1.0"] }] }));
        let one = prefixes(&peer(), &data("v4"), &data("v6"), &only);
        assert_eq!(one["ipv4_unicast_prefixes"].as_array().map(Vec::len), Some(1));
        assert!(one.get("ipv6_unicast_prefixes").is_none());
        assert_eq!(
            as_path("65001 {65010,65011} 65002"),
            vec![
                json!({ "type": "as_seq", "as_numbers": [65001] }),
                json!({ "type": "as_set", "as_numbers": [65010, 65011] }),
                json!({ "type": "as_seq", "as_numbers": [65002] })
            ]
        );
    }
}
