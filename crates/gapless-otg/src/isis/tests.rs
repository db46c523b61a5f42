use serde_json::json;

use super::*;

fn eths() -> Vec<Eth> {
    let cfg = json!({ "devices": [{ "name": "d1", "ethernets": [{
        "name": "e1", "connection": { "port_name": "p1" }, "mac": "02:00:00:00:00:01",
        "ipv4_addresses": [{ "name": "a1", "address": "198.18.0.1", "gateway": "198.18.0.2", "prefix": 24 }],
        "ipv6_addresses": [{ "name": "a6", "address": "2001:db8::1", "gateway": "2001:db8::2", "prefix": 64 }]
    }] }] });
    crate::devices::parse(&cfg).unwrap()
}

fn cfg(isis: serde_json::Value) -> serde_json::Value {
    json!({ "devices": [{ "name": "d1", "isis": isis }] })
}

fn base() -> serde_json::Value {
    json!({ "name": "r1", "system_id": "640000000001",
        "interfaces": [{ "eth_name": "e1", "name": "i1", "network_type": "point_to_point", "level_type": "level_1_2",
                         "l1_settings": { "hello_interval": 1, "dead_interval": 3 } }],
        "v4_routes": [{ "name": "v4r", "link_metric": 20,
                        "addresses": [{ "address": "10.1.0.0", "prefix": 24, "count": 2, "step": 1 }] }],
        "v6_routes": [{ "name": "v6r", "addresses": [{ "address": "2001:db8:1::", "prefix": 64 }] }] })
}

/// The router of [`base`], parsed.
pub(crate) fn a_router() -> Router {
    parse(&cfg(base()), &eths()).unwrap().0.remove(0)
}

#[test]
fn a_router_becomes_zebra_and_isisd_configurations_and_kernel_routes() {
    let (rs, warnings) = parse(&cfg(base()), &eths()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let r = &rs[0];
    assert_eq!(
        (r.eth.as_str(), r.levels(), r.dotted_id().as_str()),
        ("e1", 3, "6400.0000.0001")
    );
    let [(_, zebra), (_, isisd)] = frr_configs(r, "gd1x0");
    assert!(zebra.starts_with("hostname d1"), "{zebra}");
    let (lines, acted) = kernel_routes(r, &[], true);
    assert_eq!(
        (lines.as_str(), acted),
        (
            "route replace blackhole 10.1.0.0/24\nroute replace blackhole 10.1.1.0/24\nroute replace blackhole 2001:db8:1::/64\n",
            vec!["v4r".to_string(), "v6r".to_string()]
        )
    );
    let (lines, _) = kernel_routes(r, &["v6r".to_string()], false);
    assert_eq!(lines, "route del blackhole 2001:db8:1::/64\n");
    for line in [
        "interface gd1x0\n ip router isis gl\n ipv6 router isis gl\n isis circuit-type level-1-2\n isis network point-to-point\n isis metric 10\n",
        " isis hello-interval level-1 1\n isis hello-multiplier level-1 3\n isis priority 0 level-1\n",
        " isis hello-interval level-2 10\n",
        " is-type level-1-2\n net 49.0001.6400.0000.0001.00\n metric-style wide\n lsp-gen-interval 1\n",
        " redistribute ipv4 kernel level-1 route-map GL-ISIS-ipv4\n redistribute ipv4 kernel level-2 route-map GL-ISIS-ipv4\n",
        "ip prefix-list GL-ISIS-PL-0 permit 10.1.0.0/23 ge 24 le 24\n",
        "route-map GL-ISIS-ipv4 permit 10\n match ip address prefix-list GL-ISIS-PL-0\n set metric 20\n",
        "route-map GL-ISIS-ipv6 permit 11\n match ipv6 address prefix-list GL-ISIS-PL-1\n set metric 0\n",
    ] {
        assert!(isisd.contains(line), "expected {line:?} in:\n{isisd}");
    }
    assert_eq!(
        find_range(&rs, "v6r").map(|(r, x)| (r.name.as_str(), x.v6)),
        Some(("r1", true))
    );
}

#[test]
fn defaults_are_the_models_level_2_broadcast_and_area_49_0001() {
    let mut x = base();
    x["interfaces"][0] = json!({ "eth_name": "e1", "name": "i1" });
    x["advanced"] = json!({ "area_addresses": ["490002", "39.0840.0001"] });
    let r = &parse(&cfg(x), &eths()).unwrap().0[0];
    let isisd = &frr_configs(r, "x")[1].1;
    assert!(isisd.contains(" is-type level-2-only\n"), "{isisd}");
    assert!(!isisd.contains("point-to-point"), "{isisd}");
    assert!(
        isisd.contains(" net 49.0002.6400.0000.0001.00\n net 39.0840.0001.6400.0000.0001.00\n"),
        "{isisd}"
    );
    assert!(!isisd.contains("level-1 route-map"), "{isisd}");
}

#[test]
fn bad_input_names_its_path() {
    let cases = [
        (
            json!({"system_id": "64"}),
            "devices[0].isis.system_id: give 12 hex digits",
        ),
        (
            json!({"interfaces": [{"eth_name": "nope", "name": "i"}]}),
            "devices[0].isis.interfaces[0].eth_name: device \"d1\" has no Ethernet named \"nope\"",
        ),
        (
            json!({"interfaces": []}),
            "devices[0].isis.interfaces: give at least one interface",
        ),
        (
            json!({"segment_routing": {"router_capability": {}}}),
            "devices[0].isis.segment_routing: not supported",
        ),
        (
            json!({"v4_routes": [{"name": "v", "addresses": [{"address": "255.255.255.0", "prefix": 24, "count": 3}]}]}),
            "devices[0].isis.v4_routes[0].addresses[0]: 3 prefixes of /24 from 255.255.255.0",
        ),
        (json!({"basic": {"hostname": "a b"}}), "devices[0].isis.basic.hostname"),
        (
            json!({"basic": {"enable_wide_metric": false}, "v4_routes": [{"name": "v", "link_metric": 64, "addresses": [{"address": "10.0.0.0"}]}]}),
            "devices[0].isis.v4_routes[0].link_metric: 64 is above 63",
        ),
        (
            json!({"interfaces": [{"eth_name": "e1", "name": "i", "l2_settings": {"hello_interval": 10, "dead_interval": 10}}]}),
            "devices[0].isis.interfaces[0].l2_settings: dead_interval 10",
        ),
        (
            json!({"advanced": {"area_addresses": ["4"]}}),
            "devices[0].isis.advanced.area_addresses[0]",
        ),
        // A step other than 1 has no cover: an entry a prefix, up to 1 000 in all.
        (
            json!({"v4_routes": [{"name": "v", "addresses": [{"address": "10.0.0.0", "prefix": 24, "count": 600, "step": 3}]},
                                 {"name": "w", "addresses": [{"address": "11.0.0.0", "prefix": 24, "count": 600, "step": 3}]}]}),
            "devices[0].isis.v4_routes[1].addresses[0]: 600 prefixes 3 apart would make its router's prefix lists longer than 1000 entries",
        ),
    ];
    for (change, want) in cases {
        let mut x = base();
        for (k, v) in change.as_object().unwrap() {
            x[k] = v.clone();
        }
        let e = parse(&cfg(x), &eths()).unwrap_err().0;
        assert!(e.starts_with(want), "expected {want:?}, got {e:?}");
    }
}

#[test]
fn what_frr_cannot_announce_is_a_warning() {
    let mut x = base();
    x["v4_routes"][0]["origin_type"] = json!("external");
    let (_, w) = parse(&cfg(x), &eths()).unwrap();
    assert!(
        w[0].contains("v4_routes[0].origin_type") && w[0].contains("internal"),
        "{w:?}"
    );
}

/// Every line written is one FRR 8.4 takes: each daemon's dry run (`-C`) of its file.
#[test]
fn frr_takes_every_line_written() {
    let mut x = base();
    x["advanced"] = json!({ "area_addresses": ["490002"], "lsp_refresh_rate": 600, "lsp_lifetime": 1200,
                            "enable_attached_bit": true });
    x["interfaces"][0]["advanced"] = json!({ "enable_hello_padding": false });
    x["interfaces"][0]["authentication"] = json!({ "auth_type": "md5", "md5": "h3llo" });
    x["router_auth"] = json!({ "ignore_receive_md5": false, "area_auth": { "auth_type": "md5", "md5": "ar3a" },
                               "domain_auth": { "auth_type": "password", "password": "d0m" } });
    let r = &parse(&cfg(x), &eths()).unwrap().0[0];
    for line in [
        " area-password md5 ar3a\n",
        " domain-password clear d0m\n",
        " isis password md5 h3llo\n",
    ] {
        assert!(
            frr_configs(r, "lo")[1].1.contains(line),
            "expected {line:?} in isisd's configuration"
        );
    }
    for (kind, text) in frr_configs(r, "lo") {
        let refused = crate::frr::dry::refused(kind, &text);
        assert!(
            refused.is_empty(),
            "expected {kind} to take every line; it refused {refused:?} of:\n{text}"
        );
    }
}
