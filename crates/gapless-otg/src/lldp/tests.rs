use serde_json::json;

use super::*;

fn ports() -> Vec<String> {
    vec!["p1".into(), "p2".into()]
}

fn one(l: serde_json::Value) -> Result<Vec<Agent>, Invalid> {
    parse(&json!({ "lldp": [l] }), &ports())
}

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

#[test]
fn defaults_are_the_ports_mac_and_interface_a_120_s_hold_and_30_s_interval() {
    let a = &one(json!({ "name": "l1", "connection": { "choice": "port_name", "port_name": "p1" } })).unwrap()[0];
    assert_eq!((a.hold_time_s, a.interval_s), (120, 30));
    assert_eq!((&a.chassis, &a.port_id), (&Id::Mac(None), &Id::InterfaceName(None)));
    let f = frame(a, MAC, "veth-a", a.hold_time_s);
    assert_eq!(&f[..14], &[1, 0x80, 0xc2, 0, 0, 0x0e, 2, 0, 0, 0, 0, 1, 0x88, 0xcc]);
    // Chassis ID TLV: type 1, length 7, subtype 4 (MAC), the MAC.
    assert_eq!(&f[14..23], &[0x02, 0x07, 4, 2, 0, 0, 0, 0, 1]);
    let n = decode(&f).unwrap();
    assert_eq!(
        (n.chassis_id.as_str(), n.port_id.as_str(), n.ttl_s),
        ("02:00:00:00:00:01", "veth-a", 120)
    );
    assert_eq!(
        n.system_name.as_deref(),
        Some("l1"),
        "system name auto: the agent's name"
    );
}

#[test]
fn configured_ids_name_ttl_and_org_tlvs_round_trip_into_the_neighbour_state() {
    let a = &one(json!({ "name": "l1", "connection": { "port_name": "p2" }, "hold_time": 60, "advertisement_interval": 5,
        "chassis_id": { "choice": "mac_address_subtype", "mac_address_subtype": { "choice": "value", "value": "00:00:00:aa:bb:cc" } },
        "port_id": { "choice": "local_subtype", "local_subtype": "port-7" },
        "system_name": { "choice": "value", "value": "tester" },
        "org_infos": [{ "oui": "0080c2", "subtype": 1, "information": { "choice": "info", "info": "0064" } }] }))
    .unwrap()[0];
    let n = decode(&frame(a, MAC, "x", 60)).unwrap();
    let s = neighbor_state("l2", &n, 3, 1);
    assert_eq!(s["chassis_id"], "00:00:00:aa:bb:cc");
    assert_eq!(s["chassis_id_type"], "mac_address");
    assert_eq!(
        (s["port_id"].as_str(), s["port_id_type"].as_str()),
        (Some("port-7"), Some("local"))
    );
    assert_eq!(
        (s["ttl"].as_u64(), s["system_name"].as_str()),
        (Some(60), Some("tester"))
    );
    assert_eq!(
        s["custom_tlvs"][0],
        json!({ "custom_type": 127, "oui": "0080c2", "oui_subtype": 1, "information": "0064" })
    );
    assert_eq!(s["neighbor_id"], "00:00:00:aa:bb:cc/port-7");
}

/// A frame as another stack sends it, with the optional TLVs gapless does not send:
/// system description, capabilities, a management address, and one of an unknown type.
#[test]
fn a_foreign_lldpdu_with_optional_and_unknown_tlvs_is_read() {
    let mut f = vec![1, 0x80, 0xc2, 0, 0, 0x0e, 0xaa, 0xbb, 0xcc, 0, 0, 1, 0x88, 0xcc];
    let mut put = |t: u8, v: &[u8]| tlv(&mut f, t, v);
    put(1, &[4, 0xaa, 0xbb, 0xcc, 0, 0, 1]);
    put(2, b"\x05eth0");
    put(3, &[0, 120]);
    put(4, b"uplink");
    put(6, b"Debian GNU/Linux 12");
    put(7, &[0, 0x14, 0, 0x10]); // bridge and router; router enabled
    put(8, &[5, 1, 192, 0, 2, 1, 2, 0, 0, 0, 1, 0]);
    put(42, b"?");
    put(0, &[]);
    let n = decode(&f).unwrap();
    assert_eq!(n.port_description.as_deref(), Some("uplink"));
    assert_eq!(n.capabilities, vec![(2, false), (4, true)]);
    assert_eq!(n.management_address.as_deref(), Some("192.0.2.1"));
    assert_eq!(n.unknown_tlvs, 1);
    let s = neighbor_state("l1", &n, 0, 0);
    assert_eq!(
        s["capabilities"][1],
        json!({ "capability_name": "router", "capability_enabled": true })
    );
    assert_eq!(s["management_address_type"], "ipv4");
}

#[test]
fn a_malformed_lldpdu_says_what_is_wrong() {
    let a = &one(json!({ "name": "l1", "connection": { "port_name": "p1" } })).unwrap()[0];
    let f = frame(a, MAC, "e", 120);
    let cut = &f[..f.len() - 6];
    assert!(decode(cut).unwrap_err().0.contains("runs past the frame") || decode(cut).unwrap_err().0.contains("End"));
    let mut swapped = f.clone();
    swapped[14] = 0x04; // the first TLV's type: 2, not 1
    assert!(decode(&swapped)
        .unwrap_err()
        .0
        .contains("TLV 0 is not a well-formed type 1"));
}

#[test]
fn bad_input_names_its_path() {
    let base = json!({ "name": "l1", "connection": { "port_name": "p1" } });
    let cases = [
        (
            json!({ "connection": { "port_name": "p9" } }),
            "lldp[0].connection.port_name: no port named \"p9\"",
        ),
        (json!({ "hold_time": 5 }), "lldp[0]: hold_time 5"),
        (
            json!({ "chassis_id": { "choice": "mac_address_subtype", "mac_address_subtype": { "choice": "value", "value": "zz" } } }),
            "lldp[0].chassis_id.mac_address_subtype.value: \"zz\" is not a MAC address",
        ),
        (
            json!({ "org_infos": [{ "oui": "12", "subtype": 1 }] }),
            "lldp[0].org_infos[0].oui",
        ),
        (json!({ "name": "" }), "lldp[0].name"),
    ];
    for (change, want) in cases {
        let mut l = base.clone();
        for (k, v) in change.as_object().unwrap() {
            l[k] = v.clone();
        }
        let e = one(l).unwrap_err().0;
        assert!(e.starts_with(want), "expected {want:?}, got {e:?}");
    }
    let two = json!({ "lldp": [base.clone(), base] });
    assert!(parse(&two, &ports())
        .unwrap_err()
        .0
        .contains("give each port one agent"));
}
