use serde_json::{json, Value};

use super::*;

fn ports() -> Vec<PortName<'static>> {
    ["p1", "p2", "p3", "p4"]
        .into_iter()
        .map(|name| PortName { name, agent: None })
        .chain(std::iter::once(PortName {
            name: "far",
            agent: Some("10.0.0.2:8443"),
        }))
        .collect()
}

fn member(port: &str, mac: &str) -> Value {
    json!({ "port_name": port, "ethernet": { "name": format!("{port}-eth"), "mac": mac } })
}

fn lag(name: &str, members: &[&str], protocol: Value) -> Value {
    let ms: Vec<Value> = members
        .iter()
        .enumerate()
        .map(|(k, p)| member(p, &format!("02:00:00:00:00:{:02x}", k + 1)))
        .collect();
    json!({ "name": name, "ports": ms, "protocol": protocol })
}

fn err(cfg: Value) -> String {
    parse(&cfg, &ports()).expect_err("expected a refusal").0
}

#[test]
fn snappis_zero_defaults_become_what_a_partner_can_tell_apart() {
    let cfg = json!({ "lags": [lag("l1", &["p1", "p2"], json!({ "choice": "lacp", "lacp": {
        "actor_system_id": "00:00:00:00:00:00", "actor_key": 0, "actor_system_priority": 0 } })),
        lag("l2", &["p3"], Value::Null)] });
    let lags = parse(&cfg, &ports()).expect("valid");
    let c = lags[0].lacp(1).expect("an LACP LAG");
    assert_eq!(
        c.actor.system,
        [2, 0, 0, 0, 0, 1],
        "system id 0: the first member's MAC"
    );
    assert_eq!((c.actor.key, c.actor.port, c.actor.port_priority), (1, 2, 1));
    assert_eq!((c.active, c.timeout_s, c.periodic_s), (true, 0, 0));
    assert!(c.short_timeout(), "auto asks for short timeouts");
    let c2 = lags[1].lacp(0).expect("lacp is the default protocol");
    assert_eq!((c2.actor.key, c2.actor.port), (2, 1), "the second LAG's key is 2");
    assert_eq!(lags[0].min_links, 1);
}

#[test]
fn a_members_settings_are_taken_as_given() {
    let mut l = lag(
        "l1",
        &["p1"],
        json!({ "choice": "lacp", "lacp": {
        "actor_system_id": "00:11:22:33:44:55", "actor_key": 7, "actor_system_priority": 100 } }),
    );
    l["ports"][0]["lacp"] = json!({ "actor_port_number": 9, "actor_port_priority": 4096,
        "actor_activity": "passive", "lacpdu_periodic_time_interval": 30, "lacpdu_timeout": 90 });
    let lags = parse(&json!({ "lags": [l] }), &ports()).expect("valid");
    let c = lags[0].lacp(0).expect("lacp");
    assert_eq!(c.actor.system, [0, 0x11, 0x22, 0x33, 0x44, 0x55]);
    assert_eq!(
        (
            c.actor.system_priority,
            c.actor.key,
            c.actor.port,
            c.actor.port_priority
        ),
        (100, 7, 9, 4096)
    );
    assert_eq!((c.active, c.periodic_s, c.timeout_s), (false, 30, 90));
    assert!(!c.short_timeout(), "90 s asks for long timeouts");
}

#[test]
fn a_static_lag_has_no_lacp() {
    let cfg = json!({ "lags": [lag("s", &["p1", "p2"], json!({ "choice": "static", "static": { "lag_id": 5 } }))] });
    let lags = parse(&cfg, &ports()).expect("valid");
    assert_eq!(lags[0].protocol, Protocol::Static { lag_id: 5 });
    assert!(lags[0].lacp(0).is_none());
}

#[test]
fn each_bad_lag_is_refused_with_its_path() {
    let lacp =
        |key: u64| json!({ "choice": "lacp", "lacp": { "actor_system_id": "00:00:00:00:00:01", "actor_key": key } });
    let cases: Vec<(Value, &str)> = vec![
        (json!({ "lags": [lag("a", &["p1"], lacp(1)), lag("b", &["p1", "p2"], lacp(2))] }),
         "lags[1].ports[0].port_name: port \"p1\" is already a member of LAG \"a\""),
        (json!({ "lags": [lag("a", &["p1"], lacp(1)), lag("b", &["p2"], lacp(1))] }),
         "lags[1].protocol.lacp: LAG \"a\" has the same actor_system_id and actor_key"),
        (json!({ "lags": [{ "name": "a", "min_links": 3, "ports": [member("p1", "02:00:00:00:00:01")] }] }),
         "lags[0].min_links: 3 is more than the LAG's 1 members"),
        (json!({ "lags": [lag("a", &["far"], lacp(1))] }),
         "lags[0].ports[0].port_name: port \"far\" is on agent 10.0.0.2:8443"),
        (json!({ "lags": [lag("a", &["p9"], lacp(1))] }), "lags[0].ports[0].port_name: no port named \"p9\""),
        (json!({ "lags": [lag("p2", &["p1"], lacp(1))] }), "lags[0].name: \"p2\" is already a port's or a LAG's name"),
        (json!({ "lags": [{ "name": "a", "ports": [] }] }), "lags[0].ports: a LAG has 1 to 32 members; got 0"),
        (json!({ "lags": [lag("a", &["p1"], json!({ "choice": "lacp", "lacp": { "actor_system_id": "zz" } }))] }),
         "lags[0].protocol.lacp.actor_system_id: \"zz\" is not a MAC address"),
        (json!({ "lags": [lag("a", &["p1"], json!({ "choice": "bonded" }))] }), "lags[0].protocol.choice"),
        (json!({ "lags": [{ "name": "a", "ports": [{ "port_name": "p1", "ethernet": { "mac": "02:00:00:00:00:01" },
            "macsec": {} }] }] }), "lags[0].ports[0].macsec: MACsec on a LAG member is not supported"),
        (json!({ "lags": [{ "name": "a", "ports": [{ "port_name": "p1", "ethernet": {} }] }] }),
         "lags[0].ports[0].ethernet.mac: give the member's MAC address"),
        (json!({ "lags": [{ "name": "a", "ports": [{ "port_name": "p1", "ethernet": { "mac": "02:00:00:00:00:01" },
            "lacp": { "lacpdu_timeout": 70000 } }] }] }), "lags[0].ports[0].lacp.lacpdu_timeout: 70000 is not an integer in 0..=65535"),
        (json!({ "lags": [{ "name": "a", "ports": [{ "port_name": "p1", "ethernet": { "mac": "02:00:00:00:00:01" },
            "lacp": { "actor_activity": "eager" } }] }] }), "lags[0].ports[0].lacp.actor_activity"),
        (json!({ "lags": [lag("a", &["p1", "p2"], lacp(1))],
                 "flows": [{ "name": "f", "tx_rx": { "choice": "port", "port": { "tx_name": "p3", "rx_names": ["p2"] } } }] }),
         "flows[0].tx_rx.port.rx_names[0]: port \"p2\" is a member of LAG \"a\"; a flow goes on the LAG. Fix: name \"a\""),
    ];
    for (cfg, want) in cases {
        let got = err(cfg);
        assert!(got.contains(want), "expected an error containing {want:?}; got {got:?}");
    }
}
