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
            "interfaces": [{ "eth_name": "e1", "name": "i1", "network_type": "point_to_point", "level_type": "level_1_2" }],
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
                let got_shape = shape(&got);
                assert!(
                    within(&got_shape, &want),
                    "expected {leaf} = {value:?} to add no line and change none; got {got_shape:?}, want {want:?}"
                );
                for (kind, c) in &got {
                    let checked = gapless_io::devices::frr::check_lines(kind, c);
                    assert!(
                        checked.is_ok(),
                        "expected {leaf} = {value:?} to pass the last gate; got {checked:?}"
                    );
                }
            }
        }
    }
    assert!(
        refused > 400 && taken > 400,
        "expected both outcomes often; got {refused} refused, {taken} taken"
    );
}
