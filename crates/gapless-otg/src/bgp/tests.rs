use serde_json::{json, Value};

use super::*;

fn cfg(peer: Value) -> Value {
    json!({ "devices": [{ "name": "d1", "ethernets": [{ "name": "d1.eth", "mac": "02:00:00:00:00:01",
        "connection": { "port_name": "p1" },
        "ipv4_addresses": [{ "name": "d1.v4", "address": "1.1.1.1", "prefix": 24, "gateway": "1.1.1.2" }] }],
        "bgp": { "router_id": "1.1.1.1", "ipv4_interfaces": [{ "ipv4_name": "d1.v4", "peers": [peer] }] } }] })
}

fn peer() -> Value {
    json!({ "name": "d1.peer", "peer_address": "1.1.1.2", "as_type": "ebgp", "as_number": 65001,
        "v4_routes": [{ "name": "d1.r4", "addresses": [{ "address": "10.10.0.0", "prefix": 24, "count": 3, "step": 2 }],
            "next_hop_mode": "manual", "next_hop_ipv4_address": "1.1.1.9",
            "advanced": { "multi_exit_discriminator": 50, "origin": "egp", "local_preference": 200 },
            "communities": [{ "type": "manual_as_number", "as_number": 65000, "as_custom": 7 }, { "type": "no_export" }],
            "as_path": { "segments": [{ "type": "as_seq", "as_numbers": [65010, 65011] }] } }],
        "v6_routes": [{ "name": "d1.r6", "addresses": [{ "address": "2001:db8:1::", "prefix": 64, "count": 2 }] }] })
}

fn routers(c: &Value) -> Result<Vec<Router>, Invalid> {
    let eths = crate::devices::parse(c)?;
    parse(c, &eths)
}

#[test]
fn a_peer_and_its_ranges_are_read_and_written_as_bgpd_configuration() {
    let r = routers(&cfg(peer())).expect("a valid BGP config");
    let p = &r[0].peers[0];
    assert_eq!(
        (r[0].eth.as_str(), p.ebgp, p.asn, p.hold_s),
        ("d1.eth", true, 65001, 90)
    );
    let nets: Vec<String> = p.routes[0].blocks[0]
        .prefixes()
        .iter()
        .map(|(a, l)| format!("{a}/{l}"))
        .collect();
    assert_eq!(
        nets,
        ["10.10.0.0/24", "10.10.2.0/24", "10.10.4.0/24"],
        "count 3, step 2"
    );
    let c = frr_config(&r[0]);
    for line in [
        "router bgp 65001",
        " no bgp ebgp-requires-policy",
        " neighbor 1.1.1.2 remote-as external",
        "  network 10.10.4.0/24 route-map GL-RR-0-0",
        "  network 2001:db8:1:1::/64 route-map GL-RR-0-1",
        "  neighbor 1.1.1.2 route-map GL-IN in",
        "  neighbor 1.1.1.2 allowas-in",
        " set ip next-hop 1.1.1.9",
        " set tag 1",
        " match tag 1",
        " match tag 2",
        " set metric 50",
        " set origin egp",
        " set local-preference 200",
        " set community 65000:7 no-export",
        " set as-path prepend 65010 65011",
        "route-map GL-OUT-0-4 deny 65535",
    ] {
        assert!(c.lines().any(|l| l == line), "expected the line {line:?} in\n{c}");
    }
    assert_eq!(find_range(&r, "d1.r6").map(|x| x.2.v6), Some(true));
}

#[test]
fn bad_bgp_input_is_refused_with_its_path() {
    let with = |f: &dyn Fn(&mut Value)| {
        let mut p = peer();
        f(&mut p);
        routers(&cfg(p)).expect_err("refused").0
    };
    type Case = (Box<dyn Fn(&mut Value)>, &'static str);
    let cases: Vec<Case> = vec![
        (Box::new(|p| p["as_number"] = json!(0)), "peers[0].as_number: 0 is not an AS number"),
        (Box::new(|p| {
            p["as_number_width"] = json!("two");
            p["as_number"] = json!(70000)
        }), "as_number: 70000 is not an AS number (1..=65535)"),
        (Box::new(|p| p["v4_routes"][0]["addresses"][0] = json!({ "address": "255.255.0.0", "prefix": 24, "count": 300 })),
            "v4_routes[0].addresses[0]: 300 prefixes of /24 from 255.255.0.0, 1 apart, run past the end of the address space"),
        (Box::new(|p| p["peer_address"] = json!("2001:db8::1")), "peers[0].peer_address: give the peer's IPv4 address"),
        (Box::new(|p| p["v4_routes"][0]["add_path"] = json!({ "path_id": 1 })), "v4_routes[0].add_path: not supported"),
        // A line break would write bgpd configuration of its own.
        (Box::new(|p| p["name"] = json!("x\nlog file /etc/passwd")), "peers[0].name: every peer needs a name"),
        (Box::new(|p| p["advanced"] = json!({ "md5_key": "k\n!" })), "peers[0].advanced.md5_key: give up to 80"),
    ];
    for (f, want) in cases {
        let e = with(&*f);
        assert!(e.contains(want), "expected {want:?}; got {e}");
    }
    let mut c = cfg(peer());
    c["devices"][0]["bgp"]["ipv4_interfaces"][0]["ipv4_name"] = json!("nosuch");
    let e = routers(&c).unwrap_err().0;
    assert!(
        e.contains("devices[0].bgp.ipv4_interfaces[0].ipv4_name: no IPv4 address named \"nosuch\""),
        "{e}"
    );
}

/// Every line written is one FRR 8.4's bgpd takes (its dry run, `-C`).
#[test]
fn bgpd_takes_every_line_written() {
    let mut p = peer();
    p["advanced"] =
        json!({ "md5_key": "s3cret", "passive_mode": true, "hold_time_interval": 9, "keep_alive_interval": 3 });
    let r = routers(&cfg(p)).unwrap();
    let text = frr_config(&r[0]);
    let refused = crate::frr::dry::refused("bgpd", &text);
    assert!(
        refused.is_empty(),
        "expected bgpd to take every line; it refused {refused:?} of:\n{text}"
    );
}

#[test]
fn a_block_is_covered_by_the_fewest_aligned_networks_holding_exactly_its_prefixes() {
    let b = |first: &str, prefix: u8, count: u32, step: u32| Block {
        first: first.parse().unwrap(),
        prefix,
        count,
        step,
    };
    let show = |v: Vec<(IpAddr, u8)>| v.iter().map(|(a, l)| format!("{a}/{l}")).collect::<Vec<_>>();
    assert_eq!(show(b("10.10.0.0", 24, 3, 1).cover()), ["10.10.0.0/23", "10.10.2.0/24"]);
    assert_eq!(
        show(b("10.10.1.0", 24, 4, 1).cover()),
        ["10.10.1.0/24", "10.10.2.0/23", "10.10.4.0/24"]
    );
    assert_eq!(
        show(b("10.10.0.0", 24, 3, 2).cover()),
        ["10.10.0.0/24", "10.10.2.0/24", "10.10.4.0/24"],
        "step 2: one each"
    );
    assert_eq!(show(b("2001:db8::", 64, 2, 1).cover()), ["2001:db8::/63"]);
    // 100 000 /32s: every prefix inside the cover, and the cover no larger than the block.
    let big = b("20.0.0.0", 32, 100_000, 1);
    let cover = big.cover();
    assert!(
        cover.len() <= 2 * 17,
        "expected a few entries for 100 000 prefixes; got {}",
        cover.len()
    );
    let inside: u64 = cover.iter().map(|(_, l)| 1u64 << (32 - u32::from(*l))).sum();
    assert_eq!(
        inside, 100_000,
        "expected the cover to hold exactly the block's prefixes"
    );
    let last = big.prefixes().last().copied().unwrap();
    let (net, len) = cover.last().copied().unwrap();
    let (IpAddr::V4(n), IpAddr::V4(l)) = (net, last.0) else {
        unreachable!()
    };
    let mask = u32::MAX << (32 - u32::from(len));
    assert_eq!(
        u32::from(l) & mask,
        u32::from(n),
        "expected the last prefix in the last network"
    );
}

#[test]
fn of_two_own_devices_peering_with_each_other_the_higher_address_waits_for_the_connection() {
    let dev = |k: u8, peer: &str| {
        json!({ "name": format!("d{k}"), "ethernets": [{ "name": format!("d{k}.eth"), "mac": format!("02:00:00:00:00:0{k}"),
            "connection": { "port_name": format!("p{k}") },
            "ipv4_addresses": [{ "name": format!("d{k}.v4"), "address": format!("1.1.1.{k}"), "prefix": 24, "gateway": peer }] }],
            "bgp": { "router_id": format!("1.1.1.{k}"), "ipv4_interfaces": [{ "ipv4_name": format!("d{k}.v4"),
                "peers": [{ "name": format!("d{k}.peer"), "peer_address": peer, "as_type": "ebgp", "as_number": 65000 + u32::from(k) }] }] } })
    };
    // d1 and d2 peer with each other; d3's peer (1.1.1.9) is outside the config.
    let c = json!({ "devices": [dev(1, "1.1.1.2"), dev(2, "1.1.1.1"), dev(3, "1.1.1.9")] });
    let r = routers(&c).unwrap();
    let passive: Vec<bool> = r.iter().map(|x| x.peers[0].passive).collect();
    assert_eq!(
        passive,
        [false, true, false],
        "expected only d2 (1.1.1.2, peering with d1) passive"
    );
}

/// No string of a request adds a line to bgpd's configuration: with a hostile value in any
/// string field the config is refused with that field's path, or written with exactly the
/// lines of a harmless one.
#[test]
fn no_request_string_adds_a_line_to_the_configuration() {
    let lines = |c: &Value| routers(c).map(|r| frr_config(&r[0]).lines().count());
    let base = lines(&cfg(peer())).expect("a valid config");
    let hostile = [
        "igp\nexit\nlog file /tmp/gl-pwned",
        "x\rlog file /tmp/gl-pwned",
        "a b",
        "igp ",
        "",
        "x".repeat(81).leak(),
    ];
    type Field = (&'static str, fn(&mut Value, &str));
    let fields: [Field; 6] = [
        ("v4_routes[0].advanced.origin", |p, s| {
            p["v4_routes"][0]["advanced"]["origin"] = json!(s)
        }),
        ("peers[0].name", |p, s| p["name"] = json!(s)),
        ("peers[0].advanced.md5_key", |p, s| {
            p["advanced"] = json!({ "md5_key": s })
        }),
        ("v4_routes[0].name", |p, s| p["v4_routes"][0]["name"] = json!(s)),
        ("v4_routes[0].communities[0].type", |p, s| {
            p["v4_routes"][0]["communities"][0]["type"] = json!(s)
        }),
        ("v4_routes[0].as_path.segments[0].type", |p, s| {
            p["v4_routes"][0]["as_path"]["segments"][0]["type"] = json!(s)
        }),
    ];
    for (path, set) in fields {
        for s in hostile {
            let mut p = peer();
            set(&mut p, s);
            match lines(&cfg(p)) {
                Err(e) => assert!(
                    e.0.contains(path.split('.').next().unwrap()),
                    "expected {path} named; got {}",
                    e.0
                ),
                Ok(n) => assert_eq!(n, base, "expected {base} lines with {path} = {s:?}; got {n}"),
            }
        }
    }
    let mut p = peer();
    p["v4_routes"][0]["advanced"]["origin"] = json!("igp\nexit\nlog file /tmp/gl-pwned");
    let e = routers(&cfg(p)).unwrap_err().0;
    assert!(
        e.contains("v4_routes[0].advanced.origin:") && e.contains("give \"igp\", \"egp\" or \"incomplete\""),
        "expected the origin refused with its path and the values it takes; got {e}"
    );
}

/// A next hop mode or family outside the model's enum was read as the default (found by
/// `frr_fuzz`: the manual next hop silently dropped); it is refused with its path.
#[test]
fn an_unknown_next_hop_mode_is_refused_with_its_path_not_read_as_local() {
    for (key, bad) in [("next_hop_mode", "manaul"), ("next_hop_address_type", "ipv5")] {
        let mut p = peer();
        p["v4_routes"][0][key] = json!(bad);
        let e = routers(&cfg(p)).unwrap_err().0;
        assert!(
            e.contains(&format!("v4_routes[0].{key}: \"{bad}\" is not one of its values; give")),
            "expected {key} refused with its path and values; got {e}"
        );
    }
}
