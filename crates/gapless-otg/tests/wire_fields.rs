//! What a script sets is what goes on the wire (issue 67), sans IO: an OTG flow's headers are
//! planned, its group's profile compiled by gapless-core, and its frames built and read at each
//! field's place. A field gapless does not apply is refused with its path. Scapy reads the
//! same fields off veths in python/tests/test_otg_wire.py.

use gapless_otg::config::plan;
use gapless_otg::config::preview::preview;
use serde_json::{json, Value};

/// The config of one port flow of 128 B with these headers.
fn config(packet: Value) -> Value {
    json!({
        "ports": [{ "name": "p1", "location": "a" }, { "name": "p2", "location": "b" }],
        "flows": [{ "name": "f", "tx_rx": { "choice": "port", "port": { "tx_name": "p1", "rx_names": ["p2"] } },
                    "size": { "choice": "fixed", "fixed": 128 }, "packet": packet }],
    })
}

/// The first `n` frames the flow sends, as `gapless otg frames` gives them.
fn frames(packet: Value, n: usize) -> Vec<Vec<u8>> {
    let p = preview(&config(packet), n).unwrap_or_else(|e| panic!("expected the flow planned, got {}", e.0));
    p.flows.into_iter().next().expect("the flow").frames
}

fn refused(packet: Value) -> String {
    match plan(&config(packet)) {
        Ok(_) => panic!("expected the flow refused"),
        Err(e) => e.0,
    }
}

fn h(choice: &str, body: Value) -> Value {
    json!({ "choice": choice, choice: body })
}

fn eth() -> Value {
    h("ethernet", json!({ "dst": { "value": "02:00:00:00:00:02" } }))
}

fn v(x: u64) -> Value {
    json!({ "choice": "value", "value": x })
}

fn vals(x: &[u64]) -> Value {
    json!({ "choice": "values", "values": x })
}

/// The IPv4 header of an untagged frame.
fn ip4(f: &[u8]) -> &[u8] {
    &f[14..34]
}

#[test]
fn ipv4_priority_reaches_the_tos_byte_whole() {
    let udp = h("udp", json!({}));
    let raw = h("ipv4", json!({ "priority": { "choice": "raw", "raw": v(184) } }));
    assert_eq!(ip4(&frames(json!([eth(), raw, udp]), 1)[0])[1], 184, "raw 184");
    let dscp = h(
        "ipv4",
        json!({ "priority": { "choice": "dscp", "dscp": { "phb": v(46), "ecn": v(2) } } }),
    );
    assert_eq!(
        ip4(&frames(json!([eth(), dscp, udp]), 1)[0])[1],
        46 << 2 | 2,
        "DSCP 46 with ECN 2"
    );
    let tos = h(
        "ipv4",
        json!({ "priority": { "choice": "tos", "tos": { "precedence": v(5), "delay": v(1), "monetary": v(1) } } }),
    );
    assert_eq!(
        ip4(&frames(json!([eth(), tos, udp]), 1)[0])[1],
        5 << 5 | 1 << 4 | 1 << 1,
        "TOS bits"
    );
    // Lists: the raw byte and ECN each vary, frame by frame.
    let raw = h(
        "ipv4",
        json!({ "priority": { "choice": "raw", "raw": vals(&[0, 32, 255]) } }),
    );
    let got: Vec<u8> = frames(json!([eth(), raw, udp]), 4).iter().map(|f| ip4(f)[1]).collect();
    assert_eq!(got, [0, 32, 255, 0]);
    let ecn = h(
        "ipv4",
        json!({ "priority": { "dscp": { "phb": v(10), "ecn": vals(&[1, 3]) } } }),
    );
    let got: Vec<u8> = frames(json!([eth(), ecn, udp]), 3).iter().map(|f| ip4(f)[1]).collect();
    assert_eq!(got, [10 << 2 | 1, 10 << 2 | 3, 10 << 2 | 1]);
    let bit_list = h(
        "ipv4",
        json!({ "priority": { "choice": "tos", "tos": { "delay": vals(&[0, 1]) } } }),
    );
    let e = refused(json!([eth(), bit_list, udp]));
    assert!(e.contains("priority.tos.delay: a TOS part takes one value"), "{e}");
}

#[test]
fn ipv4_df_follows_the_model_and_identification_and_df_vary() {
    let udp = h("udp", json!({}));
    let plain = h("ipv4", json!({}));
    assert_eq!(
        ip4(&frames(json!([eth(), plain, udp]), 1)[0])[6] & 0x40,
        0,
        "DF 0 by default, as the model"
    );
    let df = h("ipv4", json!({ "dont_fragment": v(1) }));
    assert_eq!(ip4(&frames(json!([eth(), df, udp]), 1)[0])[6] & 0x40, 0x40);
    let varying = h(
        "ipv4",
        json!({ "identification": { "choice": "increment", "increment": { "start": 100, "step": 5, "count": 3 } },
                "dont_fragment": vals(&[1, 0]) }),
    );
    let fs = frames(json!([eth(), varying, udp]), 4);
    let ids: Vec<u16> = fs.iter().map(|f| u16::from_be_bytes([ip4(f)[4], ip4(f)[5]])).collect();
    let dfs: Vec<bool> = fs.iter().map(|f| ip4(f)[6] & 0x40 != 0).collect();
    assert_eq!((ids, dfs), (vec![100, 105, 110, 100], vec![true, false, true, false]));
}

#[test]
fn an_ipv6_header_leaves_as_ipv6_and_its_class_and_label_vary() {
    let udp = h("udp", json!({}));
    let bare = h("ipv6", json!({ "hop_limit": v(9) }));
    let f = &frames(json!([eth(), bare, udp]), 1)[0];
    assert_eq!(
        (&f[12..14], f[14] >> 4, f[21]),
        (&[0x86, 0xdd][..], 6, 9),
        "IPv6, hop limit 9"
    );
    assert_eq!(f[22..38], "2001:2::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
    let varying = h(
        "ipv6",
        json!({ "traffic_class": vals(&[0xb8, 0x20]),
                "flow_label": { "choice": "increment", "increment": { "start": 7, "step": 1, "count": 3 } } }),
    );
    let got: Vec<(u32, u32)> = frames(json!([eth(), varying, udp]), 3)
        .iter()
        .map(|f| {
            let w = u32::from_be_bytes(f[14..18].try_into().unwrap());
            (w >> 20 & 0xff, w & 0xfffff)
        })
        .collect();
    assert_eq!(got, [(0xb8, 7), (0x20, 8), (0xb8, 9)]);
}

#[test]
fn tcp_flag_lists_vary_frame_by_frame() {
    let tcp = h(
        "tcp",
        json!({ "ctl_ack": v(1), "ctl_syn": vals(&[1, 0]), "ecn_cwr": vals(&[0, 0, 1]) }),
    );
    let got: Vec<u8> = frames(json!([eth(), h("ipv4", json!({})), tcp]), 6)
        .iter()
        .map(|f| f[34 + 13])
        .collect();
    assert_eq!(got, [0x12, 0x10, 0x92, 0x10, 0x12, 0x90]);
}

#[test]
fn a_field_gapless_does_not_send_is_refused_with_its_path() {
    let udp = || h("udp", json!({}));
    for (packet, want) in [
        (
            json!([eth(), h("ipv4", json!({ "more_fragments": v(1) })), udp()]),
            "flows[0].packet[1].ipv4.more_fragments: gapless sends the model's default, 0",
        ),
        (
            json!([eth(), h("ipv4", json!({ "total_length": vals(&[100, 200]) })), udp()]),
            "flows[0].packet[1].ipv4.total_length: a field set by hand takes one value",
        ),
        (
            json!([
                eth(),
                h("ipv4", json!({})),
                h("udp", json!({ "checksum": { "choice": "custom", "custom": 70000 } }))
            ]),
            "flows[0].packet[2].udp.checksum.custom: give the checksum as a number from 0 to 65535",
        ),
        (
            json!([eth(), h("ipv4", json!({})), h("tcp", json!({ "ecn_ns": v(1) }))]),
            "flows[0].packet[2].tcp.ecn_ns",
        ),
        (
            json!([
                eth(),
                h("ipv4", json!({ "header_checksum": { "choice": "generated", "generated": "bad" } })),
                udp(),
                h("vxlan", json!({})),
                eth(),
                h("ipv4", json!({})),
                udp()
            ]),
            "flows[0].packet[1].ipv4.header_checksum: gapless computes a good checksum (generated: good) in a tunnel's outer header",
        ),
        (
            json!([
                h("ethernet", json!({ "ether_type": v(0x88b5) })),
                h("ipv4", json!({})),
                udp(),
                h("vxlan", json!({})),
                eth(),
                h("ipv4", json!({})),
                udp()
            ]),
            "flows[0].packet[0].ethernet.ether_type: gapless writes 2048 here in a tunnel flow's Ethernet header",
        ),
        (
            json!([
                eth(),
                h("ipv4", json!({})),
                udp(),
                h("vxlan", json!({})),
                h("ethernet", json!({ "ether_type": v(0x88b5) })),
                h("ipv4", json!({})),
                udp()
            ]),
            "flows[0].packet[4].ethernet.ether_type: gapless writes 2048 here in a tunnel flow's Ethernet header",
        ),
        (
            json!([
                eth(),
                h("ipv4", json!({ "priority": { "choice": "raw", "raw": v(184) } })),
                udp(),
                h("vxlan", json!({})),
                eth(),
                h("ipv4", json!({})),
                udp()
            ]),
            "flows[0].packet[1].ipv4.priority: gapless sends the model's default, 0 in a tunnel's outer header",
        ),
    ] {
        let e = refused(packet);
        assert!(e.contains(want), "expected {want:?}, got {e}");
    }
    // A tunnel flow's outer EtherType at the value gapless writes (IPv4 outside, IPv6
    // inside GRE) is taken, and goes out.
    let outer4 = json!([
        h(
            "ethernet",
            json!({ "ether_type": v(0x0800), "dst": { "value": "02:00:00:00:00:02" } })
        ),
        h("ipv4", json!({})),
        h("gre", json!({})),
        h("ipv6", json!({})),
        udp()
    ]);
    let f = &frames(outer4, 1)[0];
    assert_eq!(
        (&f[12..14], &f[36..38]),
        (&[0x08, 0x00][..], &[0x86, 0xdd][..]),
        "expected the outer EtherType 0x0800 and GRE's protocol 0x86dd"
    );
    // The same fields at their defaults, or at what gapless writes there, are taken.
    let ip = h(
        "ipv4",
        json!({ "version": v(4), "header_length": { "choice": "auto" }, "protocol": v(17), "more_fragments": v(0),
                "header_checksum": { "choice": "generated", "generated": "good" } }),
    );
    let e = h(
        "ethernet",
        json!({ "ether_type": v(0x0800), "dst": { "value": "02:00:00:00:00:02" } }),
    );
    assert_eq!(
        frames(json!([e, ip, h("udp", json!({ "length": v(0) }))]), 1)[0][23],
        17
    );
}

#[test]
fn versions_lengths_protocols_and_checksums_set_by_hand_are_at_their_places() {
    let ip = h(
        "ipv4",
        json!({ "version": v(6), "header_length": v(7), "total_length": v(3000), "protocol": v(200),
                "header_checksum": { "choice": "custom", "custom": 0xabcd } }),
    );
    let udp = h(
        "udp",
        json!({ "length": v(4), "checksum": { "choice": "generated", "generated": "bad" } }),
    );
    let e = h(
        "ethernet",
        json!({ "ether_type": v(0x88b5), "dst": { "value": "02:00:00:00:00:02" } }),
    );
    for f in frames(json!([e, ip, udp]), 3) {
        let be16 = |at: usize| u16::from_be_bytes([f[at], f[at + 1]]);
        let got = (be16(12), f[14], be16(16), f[23], be16(24), be16(38));
        assert_eq!(
            got,
            (0x88b5, 0x67, 3000, 200, 0xabcd, 4),
            "EtherType, version/IHL, total length, protocol, checksum, UDP length"
        );
    }
    let ip6 = h(
        "ipv6",
        json!({ "version": v(4), "payload_length": v(1), "next_header": v(17) }),
    );
    let tcp = h(
        "tcp",
        json!({ "data_offset": v(8), "checksum": { "choice": "custom", "custom": 7 } }),
    );
    for f in frames(json!([eth(), ip6, tcp]), 2) {
        let got = (
            f[14] >> 4,
            u16::from_be_bytes([f[18], f[19]]),
            f[20],
            f[54 + 12] >> 4,
            u16::from_be_bytes([f[54 + 16], f[54 + 17]]),
        );
        assert_eq!(
            got,
            (4, 1, 17, 8, 7),
            "IPv6 version, payload length, next header (17 over TCP's 6), data offset, checksum"
        );
    }
}
