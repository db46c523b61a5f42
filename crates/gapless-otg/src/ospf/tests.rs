use serde_json::json;

use super::*;

fn eths() -> Vec<Eth> {
    let cfg = json!({ "devices": [{ "name": "d1", "ethernets": [{
        "name": "e1", "connection": { "port_name": "p1" }, "mac": "02:00:00:00:00:01",
        "ipv4_addresses": [{ "name": "a1", "address": "198.18.0.1", "gateway": "198.18.0.2", "prefix": 24 }]
    }] }] });
    crate::devices::parse(&cfg).unwrap()
}

fn cfg(o: serde_json::Value) -> serde_json::Value {
    json!({ "devices": [{ "name": "d1", "ospfv2": o }] })
}

fn base() -> serde_json::Value {
    json!({ "name": "o1",
        "interfaces": [{ "name": "i1", "ipv4_name": "a1", "network_type": { "choice": "point_to_point" },
                         "advanced": { "hello_interval": 1, "dead_interval": 4 } }],
        "v4_routes": [
            { "name": "inter", "metric": 20, "addresses": [{ "address": "10.1.0.0", "prefix": 24, "count": 2 }] },
            { "name": "ext", "metric": 33, "route_origin": { "choice": "external_type_1" },
              "addresses": [{ "address": "10.9.0.0", "prefix": 24 }] },
            { "name": "intra", "route_origin": { "choice": "intra_area" }, "addresses": [{ "address": "10.8.0.1", "prefix": 32 }] }
        ] })
}

#[test]
fn a_router_becomes_ospfd_configuration_and_stub_interfaces() {
    let r = &parse(&cfg(base()), &eths()).unwrap()[0];
    assert_eq!(
        (r.router_id, r.eth.as_str()),
        (Ipv4Addr::new(198, 18, 0, 1), "e1"),
        "router id: the interface's address"
    );
    let stubs = stubs(r);
    assert_eq!(
        stubs[0].addrs,
        vec![("10.1.0.1".parse().unwrap(), 24), ("10.1.1.1".parse().unwrap(), 24)]
    );
    assert_eq!(stubs[2].addrs, vec![("10.8.0.1".parse().unwrap(), 32)]);
    let c = &frr_configs(r, "gd1x0")[1].1;
    for line in [
        "interface gd1x0\n ip ospf area 0.0.0.0\n ip ospf network point-to-point\n ip ospf hello-interval 1\n ip ospf dead-interval 4\n",
        "interface glr0\n ip ospf area 0.0.0.1\n ip ospf passive\n ip ospf cost 20\n",
        "interface glr2\n ip ospf area 0.0.0.0\n ip ospf passive\n ip ospf cost 1\n",
        "ip prefix-list GL-OSPF-PL-1 permit 10.9.0.0/24\n",
        "route-map GL-OSPF-EXT permit 11\n match ip address prefix-list GL-OSPF-PL-1\n set metric 33\n set metric-type type-1\n",
        "router ospf\n ospf router-id 198.18.0.1\n ospf abr-type standard\n log-adjacency-changes\n timers throttle lsa all 100\n timers lsa min-arrival 0\n",
        " redistribute connected route-map GL-OSPF-EXT\n",
    ] {
        assert!(c.contains(line), "expected {line:?} in:\n{c}");
    }
    assert!(
        !c.contains("interface glr1"),
        "an external range's stub is not in OSPF:\n{c}"
    );
    assert_eq!(
        find_range(std::slice::from_ref(r), "ext").map(|x| x.1.origin),
        Some(Origin::External(1))
    );
}

#[test]
fn an_interface_outside_the_backbone_puts_inter_area_ranges_in_it() {
    let mut o = base();
    o["interfaces"][0]["area"] = json!({ "choice": "id", "id": 7 });
    o["router_id"] = json!({ "choice": "custom", "custom": "9.9.9.9" });
    let r = &parse(&cfg(o), &eths()).unwrap()[0];
    let c = &frr_configs(r, "x")[1].1;
    assert!(
        c.contains(" ip ospf area 0.0.0.7\n") && c.contains("interface glr0\n ip ospf area 0.0.0.0\n"),
        "{c}"
    );
    assert!(c.contains("ospf router-id 9.9.9.9"), "{c}");
}

#[test]
fn bad_input_names_its_path() {
    let cases = [
        (
            json!({ "interfaces": [{ "name": "i", "ipv4_name": "nope" }] }),
            "devices[0].ospfv2.interfaces[0].ipv4_name: no IPv4 address named \"nope\"",
        ),
        (
            json!({ "interfaces": [] }),
            "devices[0].ospfv2.interfaces: give one interface",
        ),
        (
            json!({ "graceful_restart": { "helper_mode": true } }),
            "devices[0].ospfv2.graceful_restart: not supported",
        ),
        (
            json!({ "v4_routes": [{ "name": "n", "route_origin": { "choice": "nssa_external" }, "addresses": [{ "address": "10.0.0.0" }] }] }),
            "devices[0].ospfv2.v4_routes[0].route_origin.choice: \"nssa_external\" is not supported",
        ),
        (
            json!({ "v4_routes": [{ "name": "n", "addresses": [{ "address": "10.0.0.0", "prefix": 24, "count": 5000 }] }] }),
            "devices[0].ospfv2.v4_routes[0].addresses[0].count: 5000 prefixes",
        ),
        (
            json!({ "interfaces": [{ "name": "i", "ipv4_name": "a1", "advanced": { "hello_interval": 10, "dead_interval": 10 } }] }),
            "devices[0].ospfv2.interfaces[0].advanced.dead_interval: 10 s",
        ),
        (
            json!({ "interfaces": [{ "name": "i", "ipv4_name": "a1", "network_type": { "choice": "point_to_multipoint" } }] }),
            "devices[0].ospfv2.interfaces[0].network_type.choice: \"point_to_multipoint\"",
        ),
    ];
    for (change, want) in cases {
        let mut o = base();
        for (k, v) in change.as_object().unwrap() {
            o[k] = v.clone();
        }
        let e = parse(&cfg(o), &eths()).unwrap_err().0;
        assert!(e.starts_with(want), "expected {want:?}, got {e:?}");
    }
}

/// Every line written is one FRR 8.4 takes (each daemon's dry run, `-C`).
#[test]
fn frr_takes_every_line_written() {
    let mut o = base();
    o["lsa_refresh_time"] = json!(1800);
    o["interfaces"][0]["advanced"]["validate_received_mtu"] = json!(false);
    let r = &parse(&cfg(o), &eths()).unwrap()[0];
    for (kind, text) in frr_configs(r, "lo") {
        let refused = crate::frr::dry::refused(kind, &text);
        assert!(
            refused.is_empty(),
            "expected {kind} to take every line; it refused {refused:?} of:\n{text}"
        );
    }
}

fn v3_eths() -> Vec<Eth> {
    let cfg = json!({ "devices": [{ "name": "d1", "ethernets": [{
        "name": "e1", "connection": { "port_name": "p1" }, "mac": "02:00:00:00:00:01",
        "ipv6_addresses": [{ "name": "a6", "address": "2001:db8::1:2", "gateway": "2001:db8::2", "prefix": 64 }]
    }] }] });
    crate::devices::parse(&cfg).unwrap()
}

fn v3() -> serde_json::Value {
    json!({ "devices": [{ "name": "d1", "ospfv3": { "router_id": { "choice": "auto" }, "instances": [{ "name": "o6",
        "interfaces": [{ "name": "i6", "ipv6_name": "a6", "network_type": { "choice": "point_to_point" },
                         "advanced": { "hello_interval": 1, "dead_interval": 4, "link_metric": 7 } }],
        "v6_routes": [
            { "name": "r6", "metric": 20, "addresses": [{ "address": "2001:db8:10::", "prefix": 64, "count": 2 }] },
            { "name": "x6", "metric": 33, "route_origin": { "choice": "external_type_2" },
              "addresses": [{ "address": "2001:db8:19::", "prefix": 64 }] }] }] } }] })
}

#[test]
fn an_ospfv3_instance_becomes_ospf6d_configuration_with_an_id_from_its_address() {
    let r = &parse(&v3(), &v3_eths()).unwrap()[0];
    assert_eq!(
        (r.v6, r.router_id, r.name.as_str()),
        (true, Ipv4Addr::new(0, 1, 0, 2), "o6")
    );
    assert_eq!(
        stubs(r)[0].addrs,
        vec![
            ("2001:db8:10::1".parse().unwrap(), 64),
            ("2001:db8:10:1::1".parse().unwrap(), 64)
        ]
    );
    let [(z, _), (kind, c)] = frr_configs(r, "gd1x0").try_into().unwrap();
    assert_eq!((z, kind), ("zebra", "ospf6d"));
    for line in [
        "interface gd1x0\n ipv6 ospf6 area 0.0.0.0\n ipv6 ospf6 network point-to-point\n ipv6 ospf6 hello-interval 1\n ipv6 ospf6 dead-interval 4\n ipv6 ospf6 cost 7\n",
        "interface gl6r0\n ipv6 ospf6 area 0.0.0.1\n ipv6 ospf6 passive\n ipv6 ospf6 cost 20\n",
        "ipv6 prefix-list GL-OSPF-PL-1 permit 2001:db8:19::/64\n",
        " match ipv6 address prefix-list GL-OSPF-PL-1\n set metric 33\n set metric-type type-2\n",
        "router ospf6\n ospf6 router-id 0.1.0.2\n",
    ] {
        assert!(c.contains(line), "expected {line:?} in:\n{c}");
    }
    let refused = crate::frr::dry::refused("ospf6d", &c);
    assert!(
        refused.is_empty(),
        "expected ospf6d to take every line; it refused {refused:?} of:\n{c}"
    );
    let mut two = v3();
    let inst = two["devices"][0]["ospfv3"]["instances"][0].clone();
    two["devices"][0]["ospfv3"]["instances"] = json!([inst.clone(), inst]);
    let e = parse(&two, &v3_eths()).unwrap_err().0;
    assert!(e.starts_with("devices[0].ospfv3.instances: give one instance"), "{e}");
}

/// An external range is matched by its cover: 4 096 prefixes of step 1 are a handful of
/// prefix-list entries that FRR takes; of step 2, more entries than FRR loads in linear
/// time, refused with the path and the fix.
#[test]
fn an_external_range_is_listed_by_its_cover_and_a_long_one_of_another_step_is_refused() {
    let mut o = base();
    o["v4_routes"][1]["addresses"][0] = json!({ "address": "10.64.0.0", "prefix": 24, "count": 4096 });
    let r = &parse(&cfg(o.clone()), &eths()).unwrap()[0];
    let text = frr_configs(r, "lo").into_iter().find(|x| x.0 == "ospfd").unwrap().1;
    let entries: Vec<&str> = text.lines().filter(|l| l.contains("GL-OSPF-PL-1 permit")).collect();
    assert_eq!(
        entries,
        ["ip prefix-list GL-OSPF-PL-1 permit 10.64.0.0/12 ge 24 le 24"],
        "expected one entry covering the 4096 /24s"
    );
    let refused = crate::frr::dry::refused("ospfd", &text);
    assert!(refused.is_empty(), "expected ospfd to take it; it refused {refused:?}");
    o["v4_routes"][1]["addresses"][0] = json!({ "address": "10.64.0.0", "prefix": 24, "count": 1001, "step": 2 });
    let e = parse(&cfg(o), &eths()).unwrap_err().0;
    assert!(
        e.contains("v4_routes[1].addresses[0]: 1001 prefixes 2 apart") && e.contains("longer than 1000 entries"),
        "expected the range refused with its path and the limit; got {e}"
    );
}

/// An OSPFv3 router with two ranges (the vty tests' own).
pub(crate) fn router_v6() -> Router {
    parse(&v3(), &v3_eths()).unwrap().remove(0)
}
