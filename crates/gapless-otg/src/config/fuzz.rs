//! Tests only: the FRR configuration writers under random request strings (issue 58: "for
//! any OTG input, the lines written are exactly those that the mapping intends"). A seeded
//! random search, not coverage-guided: a config with a BGP, an IS-IS and an OSPFv2 router has
//! one of its string values replaced by a random one, thousands of times. Each time the
//! config is refused with a path, or every daemon's configuration has no line that the
//! unchanged config lacks (compared by each line's first word, in order: one may go, when a
//! value turns a feature off), and passes the last gate
//! (`gapless_io::devices::frr::check_lines`).

use rand::{RngExt, SeedableRng};
use serde_json::{json, Value};

use crate::config::plan;

fn config() -> Value {
    json!({ "ports": [{ "name": "p1", "location": "veth0" }],
        "devices": [{ "name": "d1", "ethernets": [{ "name": "e1", "mac": "02:00:00:00:00:01",
            "connection": { "port_name": "p1" },
            "ipv4_addresses": [{ "name": "a1", "address": "1.1.1.1", "prefix": 24, "gateway": "1.1.1.2" }],
            "ipv6_addresses": [{ "name": "a6", "address": "2001:db8::1", "prefix": 64, "gateway": "2001:db8::2" }] }],
        "bgp": { "router_id": "1.1.1.1", "ipv4_interfaces": [{ "ipv4_name": "a1", "peers": [{
            "name": "d1.peer", "peer_address": "1.1.1.2", "as_type": "ebgp", "as_number": 65001,
            "advanced": { "md5_key": "k3y" },
            "v4_routes": [{ "name": "d1.r4", "addresses": [{ "address": "10.10.0.0", "prefix": 24, "count": 3 }],
                "next_hop_mode": "manual", "next_hop_ipv4_address": "1.1.1.9",
                "advanced": { "multi_exit_discriminator": 50, "origin": "egp" },
                "communities": [{ "type": "manual_as_number", "as_number": 65000, "as_custom": 7 }],
                "as_path": { "segments": [{ "type": "as_seq", "as_numbers": [65010] }] } }] }] }] },
        "isis": { "name": "r1", "system_id": "640000000001",
            "interfaces": [{ "eth_name": "e1", "name": "i1", "network_type": "point_to_point", "level_type": "level_1_2",
                             "authentication": { "auth_type": "md5", "md5": "h3llo" } }],
            "router_auth": { "ignore_receive_md5": false, "area_auth": { "auth_type": "md5", "md5": "ar3a" },
                             "domain_auth": { "auth_type": "password", "password": "d0m" } },
            "v4_routes": [{ "name": "v4r", "addresses": [{ "address": "10.1.0.0", "prefix": 24, "count": 2 }] }] },
        "ospfv2": { "name": "o1",
            "interfaces": [{ "name": "oi1", "ipv4_name": "a1", "network_type": { "choice": "point_to_point" } }],
            "v4_routes": [{ "name": "ext", "route_origin": { "choice": "external_type_1" },
                "addresses": [{ "address": "10.9.0.0", "prefix": 24 }] }] } }] })
}

/// Every daemon's configuration the config's routers are started with.
fn written(cfg: &Value) -> Result<Vec<(&'static str, String)>, String> {
    let p = plan(cfg).map_err(|e| e.0)?;
    let mut out: Vec<(&'static str, String)> = p.routers.iter().flat_map(crate::bgp::frr_configs).collect();
    out.extend(p.isis.iter().flat_map(|r| crate::isis::frr_configs(r, "gd0x0")));
    out.extend(p.ospf.iter().flat_map(|r| crate::ospf::frr_configs(r, "gd0x0")));
    Ok(out)
}

/// Each daemon and the first word of each of its lines.
fn shape(configs: &[(&'static str, String)]) -> Vec<(&'static str, Vec<String>)> {
    (configs.iter())
        .map(|(kind, c)| {
            let words = c
                .lines()
                .map(|l| l.split(' ').find(|w| !w.is_empty()).unwrap_or("").to_string());
            (*kind, words.collect())
        })
        .collect()
}

/// Whether every daemon of `got` is one of `want`'s, in order, with its lines a subsequence
/// of that daemon's: no line added or changed. A line may go: a value that turns a feature
/// off (an empty MD5 key) writes none for it.
fn within(got: &[(&'static str, Vec<String>)], want: &[(&'static str, Vec<String>)]) -> bool {
    let sub = |g: &[String], w: &[String]| {
        let mut w = w.iter();
        g.iter().all(|x| w.any(|y| y == x))
    };
    got.len() == want.len() && got.iter().zip(want).all(|(g, w)| g.0 == w.0 && sub(&g.1, &w.1))
}

/// That a config whose `leaf` was set to `value` (shown) and taken wrote no FRR line the
/// base config lacks (`want`), and that every daemon's text passes the last gate.
fn assert_within(leaf: &str, value: &str, got: &[(&'static str, String)], want: &[(&'static str, Vec<String>)]) {
    let got_shape = shape(got);
    assert!(
        within(&got_shape, want),
        "expected {leaf} = {value:?} to add no line and change none; got {got_shape:?}, want {want:?}"
    );
    for (kind, c) in got {
        let checked = gapless_io::devices::frr::check_lines(kind, c);
        assert!(
            checked.is_ok(),
            "expected {leaf} = {value:?} to pass the last gate; got {checked:?}"
        );
    }
}

/// The JSON pointer of every string in `v`.
fn strings(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::String(_) => out.push(at),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, x)| strings(x, format!("{at}/{i}"), out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| strings(x, format!("{at}/{k}"), out)),
        _ => {}
    }
}

/// A random string: half of them words FRR would take whole (the gate lets them through),
/// the others with what could add a line or an argument.
fn random_string(rng: &mut impl RngExt) -> String {
    const WORDS: &[&str] = &[
        "igp", "exit", "log", "file", "!", "#", "\"", "'", "x", "1", "/tmp/gl", "end", "-",
    ];
    const HOSTILE: &[&str] = &[
        "\n",
        "\r",
        " ",
        "\t",
        "\0",
        "é",
        "\u{85}",
        "\n!\nlog file /tmp/gl-pwned\n",
    ];
    let n = rng.random_range(0..=12);
    let hostile = rng.random_bool(0.5);
    let mut s: String = (0..n).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect();
    if hostile {
        let at = (0..=s.len()).filter(|i| s.is_char_boundary(*i)).count();
        let at = (0..=s.len())
            .filter(|i| s.is_char_boundary(*i))
            .nth(rng.random_range(0..at))
            .unwrap_or(0);
        s.insert_str(at, HOSTILE[rng.random_range(0..HOSTILE.len())]);
    }
    s
}

#[test]
fn no_request_string_adds_or_changes_a_line_of_any_daemons_configuration() {
    let base = config();
    let want = shape(&written(&base).expect("the base config is valid"));
    assert_eq!(
        want.len(),
        5,
        "expected bgpd, zebra and isisd, zebra and ospfd; got {want:?}"
    );
    let mut leaves = Vec::new();
    strings(&base, String::new(), &mut leaves);
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(58);
    let (mut refused, mut taken) = (0, 0);
    for _ in 0..4000 {
        let leaf = &leaves[rng.random_range(0..leaves.len())];
        let value = random_string(&mut rng);
        let mut cfg = base.clone();
        *cfg.pointer_mut(leaf).expect("a leaf of the base") = json!(value);
        match written(&cfg) {
            Err(e) => {
                refused += 1;
                assert!(
                    e.contains(':') && e.len() > 10,
                    "expected {leaf} = {value:?} refused with a path; got {e:?}"
                );
            }
            Ok(got) => {
                taken += 1;
                assert_within(leaf, &value, &got, &want);
            }
        }
    }
    assert!(
        refused > 400 && taken > 400,
        "expected both outcomes often; got {refused} refused, {taken} taken"
    );
}

/// A config with one of every kind of object a string names (issue 68, item 2): ports, a LAG,
/// an LLDP agent, a device with BGP, IS-IS and OSPF, a flow with metric tags, a capture.
fn full_config() -> Value {
    let mut c = config();
    c["ports"] = json!([{ "name": "p1", "location": "veth0" }, { "name": "p2", "location": "ns/veth1" },
                        { "name": "p3", "location": "veth2" }]);
    c["lags"] = json!([{ "name": "lag1", "ports": [{ "port_name": "p3",
        "ethernet": { "name": "p3-eth", "mac": "02:00:00:00:00:31" } }],
        "protocol": { "choice": "lacp", "lacp": { "actor_system_id": "02:00:00:00:00:30", "actor_key": 7 } } }]);
    c["lldp"] = json!([{ "name": "l1", "connection": { "choice": "port_name", "port_name": "p2" },
        "system_name": { "choice": "value", "value": "tester" } }]);
    c["flows"] = json!([{ "name": "f1", "tx_rx": { "choice": "port", "port": { "tx_name": "p1", "rx_names": ["p2"] } },
        "size": { "choice": "fixed", "fixed": 128 }, "rate": { "choice": "pps", "pps": 100 },
        "duration": { "choice": "fixed_packets", "fixed_packets": { "packets": 10 } },
        "metrics": { "enable": true },
        "packet": [{ "choice": "ethernet", "ethernet": { "dst": { "choice": "value", "value": "02:00:00:00:00:02" } } },
                   { "choice": "ipv4", "ipv4": { "src": { "choice": "value", "value": "192.0.2.1" },
                       "dst": { "choice": "value", "value": "192.0.2.2",
                                "metric_tags": [{ "name": "dst_tag", "offset": 24, "length": 8 }] } } },
                   { "choice": "udp", "udp": { "dst_port": { "choice": "values", "values": [5000, 5001] } } }] }]);
    c["captures"] = json!([{ "name": "c1", "port_names": ["p2"], "format": "pcap" }]);
    c
}

/// Hostile values for a string: NUL, control characters, 10,000 characters, unicode, a path,
/// shell and FRR syntax, a space, the empty string.
fn hostile() -> Vec<String> {
    vec![
        "a\0b".into(),
        "a\nb\r\tc\u{7f}".into(),
        "n".repeat(10_000),
        "é\u{202e}名前".into(),
        "../../etc/passwd".into(),
        "$(touch /tmp/gl-pwned); `id` | x".into(),
        "x\n!\nlog file /tmp/gl-pwned\nend".into(),
        " ".into(),
        String::new(),
    ]
}

#[test]
fn every_string_of_a_full_config_with_a_hostile_value_is_planned_or_refused_by_its_path() {
    let base = full_config();
    let want = shape(&written(&base).unwrap_or_else(|e| panic!("expected the full config valid; got {e}")));
    let mut leaves = Vec::new();
    strings(&base, String::new(), &mut leaves);
    assert!(
        leaves.len() > 60,
        "expected every object's strings; got {}",
        leaves.len()
    );
    let (mut refused, mut taken) = (0, 0);
    for leaf in &leaves {
        for value in hostile() {
            let mut cfg = base.clone();
            *cfg.pointer_mut(leaf).expect("a leaf of the base") = json!(value);
            let shown: String = value.chars().take(40).collect();
            let got = std::panic::catch_unwind(|| written(&cfg))
                .unwrap_or_else(|_| panic!("expected {leaf} = {shown:?} planned or refused; it panicked"));
            match got {
                Err(e) => {
                    refused += 1;
                    let path = e.split(':').next().unwrap_or("");
                    assert!(
                        !path.is_empty() && !path.contains(' ') || e.starts_with("port ") || e.starts_with("flow"),
                        "expected {leaf} = {shown:?} refused with a path first; got {e:?}"
                    );
                    let shown = crate::error::OtgError::from(crate::error::Invalid(e)).errors[0].len();
                    assert!(shown < 2_000, "expected a short refusal for {leaf}; got {shown} bytes");
                }
                Ok(got) => {
                    taken += 1;
                    assert_within(leaf, &shown, &got, &want);
                }
            }
        }
    }
    assert!(
        refused > 0 && taken > 0,
        "expected both outcomes; got {refused} refused, {taken} taken"
    );
}
