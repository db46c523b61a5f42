//! Templates and the field engine, checked frame by frame against etherparse's own parser and
//! checksum code: every protocol combination, odd and even sizes, with and without signature.

use etherparse::{NetHeaders, PacketHeaders, TransportHeader};
use gapless_core::packet::signature::Signature;
use gapless_core::spec::files::NoFiles;
use gapless_core::{CompileCtx, ProfileSpec, StreamGen};

/// What an independent parse of a frame found.
#[derive(Debug)]
struct Checked {
    vlans: Vec<(u16, u8)>,
    ttl: u8,
    tos: u8,
    ports: Option<(u16, u16)>,
    src_ip: Vec<u8>,
    sig: Option<Signature>,
}

/// Parses with etherparse and asserts lengths and checksums are right.
fn check(frame: &[u8]) -> Checked {
    let h = PacketHeaders::from_ethernet_slice(frame).unwrap_or_else(|e| panic!("etherparse rejects the frame: {e:?}"));
    let payload = h.payload.slice();
    let vlans = h
        .link_exts
        .iter()
        .map(|e| match e {
            etherparse::LinkExtHeader::Vlan(v) => (v.vlan_id.value(), v.pcp.value()),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let (ttl, tos, src_ip) = match h.net.as_ref().expect("an IP header") {
        NetHeaders::Ipv4(ip, _) => {
            assert_eq!(ip.header_checksum, ip.calc_header_checksum(), "IPv4 header checksum");
            let l4_hdr = h.transport.as_ref().unwrap().header_len();
            assert_eq!(usize::from(ip.total_len), ip.header_len() + l4_hdr + payload.len());
            (
                ip.time_to_live,
                (ip.dscp.value() << 2) | ip.ecn.value(),
                ip.source.to_vec(),
            )
        }
        NetHeaders::Ipv6(ip, _) => (ip.hop_limit, ip.traffic_class, ip.source.to_vec()),
        other => panic!("unexpected {other:?}"),
    };
    let ports = match (
        h.net.as_ref().unwrap(),
        h.transport.as_ref().expect("a transport header"),
    ) {
        (NetHeaders::Ipv4(ip, _), TransportHeader::Udp(u)) => {
            assert_eq!(
                u.checksum,
                u.calc_checksum_ipv4(ip, payload).unwrap(),
                "UDP/IPv4 checksum"
            );
            assert_eq!(usize::from(u.length), 8 + payload.len());
            Some((u.source_port, u.destination_port))
        }
        (NetHeaders::Ipv6(ip, _), TransportHeader::Udp(u)) => {
            assert_eq!(
                u.checksum,
                u.calc_checksum_ipv6(ip, payload).unwrap(),
                "UDP/IPv6 checksum"
            );
            Some((u.source_port, u.destination_port))
        }
        (NetHeaders::Ipv4(ip, _), TransportHeader::Tcp(t)) => {
            assert_eq!(
                t.checksum,
                t.calc_checksum_ipv4(ip, payload).unwrap(),
                "TCP/IPv4 checksum"
            );
            Some((t.source_port, t.destination_port))
        }
        (NetHeaders::Ipv6(ip, _), TransportHeader::Tcp(t)) => {
            assert_eq!(
                t.checksum,
                t.calc_checksum_ipv6(ip, payload).unwrap(),
                "TCP/IPv6 checksum"
            );
            Some((t.source_port, t.destination_port))
        }
        (NetHeaders::Ipv4(_, _), TransportHeader::Icmpv4(i)) => {
            assert_eq!(i.checksum, i.icmp_type.calc_checksum(payload), "ICMPv4 checksum");
            None
        }
        (NetHeaders::Ipv6(ip, _), TransportHeader::Icmpv6(i)) => {
            assert_eq!(
                i.checksum,
                i.icmp_type.calc_checksum(ip.source, ip.destination, payload).unwrap(),
                "ICMPv6 checksum"
            );
            None
        }
        (n, t) => panic!("unexpected {n:?} {t:?}"),
    };
    Checked {
        vlans,
        ttl,
        tos,
        ports,
        src_ip,
        sig: Signature::from_payload_end(payload),
    }
}

fn compile(toml: &str) -> gapless_core::Profile {
    let spec = ProfileSpec::from_toml(toml, "test").unwrap();
    spec.compile(&CompileCtx {
        link_speed_bps: None,
        files: &NoFiles,
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_protocol_combination_parses_with_valid_checksums() {
    let vlans = [
        "",
        "vlan = [{ id = 100, pcp = 5 }]",
        "vlan = [{ id = 10 }, { id = 20, pcp = 3 }]",
    ];
    let ips = [("198.18.0.1", "198.18.0.2"), ("2001:2::1", "2001:2::2")];
    let l4s = ["udp", "tcp", "icmp"];
    let mut n = 0;
    for v in vlans {
        for (s, d) in ips {
            for l4 in l4s {
                for sig in [true, false] {
                    let toml = format!(
                        r#"
                        [[stream]]
                        signature = {sig}
                        size = {{ kind = "uniform", min = 110, max = 301 }}
                        [stream.template]
                        {v}
                        ip_src = "{s}"
                        ip_dst = "{d}"
                        l4 = "{l4}"
                        dscp = 46
                        ecn = 1
                        ttl = 33
                        tcp_flags = "SA"
                        payload = {{ pattern = "random" }}
                        [stream.timing]
                        rate_pps = 1000
                        "#
                    );
                    let p = compile(&toml);
                    let mut g = StreamGen::new(p.streams[0].clone());
                    let mut buf = vec![0u8; 2048];
                    for k in 0..50u64 {
                        let len = g.build(&mut buf, 1_000 + k);
                        let c = check(&buf[..len]);
                        assert_eq!(c.ttl, 33);
                        assert_eq!(c.tos, (46 << 2) | 1);
                        assert_eq!(c.vlans.len(), v.matches("id =").count());
                        if sig {
                            assert_eq!(
                                c.sig,
                                Some(Signature {
                                    stream: 0,
                                    seq: k as u32,
                                    tx_ns: 1_000 + k
                                })
                            );
                        } else {
                            assert_eq!(c.sig, None);
                        }
                        if l4 != "icmp" {
                            assert_eq!(c.ports, Some((1024, 1024)));
                        }
                        n += 1;
                    }
                }
            }
        }
    }
    assert_eq!(n, 3 * 2 * 3 * 2 * 50);
}

#[test]
fn qinq_uses_8021ad_outer_tpid_and_vlan_fields_vary() {
    let p = compile(
        r#"
        [[stream]]
        size = 70
        [stream.template]
        vlan = [{ id = 10 }, { id = 20 }]
        [[stream.field]]
        field = "vlan_id"
        vlan = 1
        op = "inc"
        from = 100
        to = 102
        [[stream.field]]
        field = "vlan_pcp"
        op = "list"
        values = [1, 7]
        [stream.timing]
        rate_pps = 10
        "#,
    );
    let mut g = StreamGen::new(p.streams[0].clone());
    let mut buf = vec![0u8; 70];
    let mut seen = Vec::new();
    for _ in 0..4 {
        let len = g.build(&mut buf, 0);
        assert_eq!(len, 66);
        assert_eq!(&buf[12..14], &[0x88, 0xa8]);
        assert_eq!(&buf[16..18], &[0x81, 0x00]);
        seen.push(check(&buf[..len]).vlans);
    }
    assert_eq!(
        seen,
        vec![
            vec![(10, 1), (100, 0)],
            vec![(10, 7), (101, 0)],
            vec![(10, 1), (102, 0)],
            vec![(10, 7), (100, 0)]
        ]
    );
}

#[test]
fn field_engine_sequences_reach_the_wire_with_valid_checksums() {
    let p = compile(
        r#"
        seed = 9
        [[stream]]
        size = { imix = [[70, 7], [570, 4], [1518, 1]] }
        [stream.template]
        l4 = "udp"
        [[stream.field]]
        field = "ip_src"
        op = "inc"
        from = "198.18.0.250"
        to = "198.18.1.2"
        step = 3
        [[stream.field]]
        field = "src_port"
        op = "random"
        from = 5000
        to = 5009
        [[stream.field]]
        field = "dst_port"
        op = "dec"
        from = 7
        to = 9
        [[stream.field]]
        field = "payload"
        offset = 3
        width = 4
        op = "inc"
        from = 4294967294
        to = 4294967295
        [[stream.field]]
        field = "mac_src"
        op = "list"
        values = ["02:00:00:00:00:0a", "02:00:00:00:00:0b"]
        [[stream.field]]
        field = "ttl"
        op = "list"
        values = [1, 255]
        [stream.timing]
        rate_pps = 10
        "#,
    );
    let mut g = StreamGen::new(p.streams[0].clone());
    let mut buf = vec![0u8; 1600];
    // 198.18.0.250 .. 198.18.1.2 holds 9 addresses; step 3 visits 250, 253, 0+256, then wraps.
    let want_ip = [[198, 18, 0, 250], [198, 18, 0, 253], [198, 18, 1, 0], [198, 18, 0, 250]];
    for k in 0..400usize {
        let len = g.build(&mut buf, 5);
        let c = check(&buf[..len]);
        assert!([70, 570, 1518].contains(&(len + 4)), "imix size {}", len + 4);
        if k < 4 {
            assert_eq!(c.src_ip, want_ip[k].to_vec());
        }
        let (sp, dp) = c.ports.unwrap();
        assert!((5000..=5009).contains(&sp));
        assert_eq!(dp, [9, 8, 7][k % 3]);
        assert_eq!(c.ttl, [1, 255][k % 2]);
        assert_eq!(buf[11], [0x0a, 0x0b][k % 2]);
        let pl = 14 + 20 + 8 + 3;
        let v = u32::from_be_bytes(buf[pl..pl + 4].try_into().unwrap());
        assert_eq!(v, [4294967294, 4294967295][k % 2]);
    }
}

#[test]
fn ipv6_address_ops_vary_the_interface_id() {
    let p = compile(
        r#"
        [[stream]]
        size = 128
        [stream.template]
        ip_src = "2001:2::1"
        ip_dst = "2001:2::2"
        [[stream.field]]
        field = "ip_dst"
        op = "inc"
        from = "2001:2::ffff:fffe"
        to = "2001:2::1:0:1"
        [[stream.field]]
        field = "tos"
        op = "inc"
        from = 0
        to = 255
        [stream.timing]
        rate_pps = 10
        "#,
    );
    let mut g = StreamGen::new(p.streams[0].clone());
    let mut buf = vec![0u8; 200];
    let mut dsts = Vec::new();
    for k in 0..4u8 {
        let len = g.build(&mut buf, 0);
        let c = check(&buf[..len]);
        assert_eq!(c.tos, k);
        dsts.push(std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&buf[38..54]).unwrap()).to_string());
    }
    assert_eq!(
        dsts,
        [
            "2001:2::ffff:fffe",
            "2001:2::ffff:ffff",
            "2001:2::1:0:0",
            "2001:2::1:0:1"
        ]
    );
}

#[test]
fn patched_tx_timestamp_keeps_checksums_valid() {
    for (l4, ip) in [
        ("udp", "198.18.0.9"),
        ("tcp", "2001:2::9"),
        ("icmp", "198.18.0.9"),
        ("icmp", "2001:2::9"),
    ] {
        let dst = if ip.contains(':') { "2001:2::1" } else { "198.18.0.1" };
        let p = compile(&format!(
            "[[stream]]\nsize = {{ kind = \"uniform\", min = 100, max = 107 }}\n[stream.template]\nl4 = \"{l4}\"\nip_src = \"{ip}\"\nip_dst = \"{dst}\"\n[stream.timing]\nrate_pps = 1\n"
        ));
        let mut g = StreamGen::new(p.streams[0].clone());
        let mut buf = vec![0u8; 200];
        for k in 0..64u64 {
            let len = g.build(&mut buf, 0);
            let ts = 0x0123_4567_89ab_cdef_u64.wrapping_mul(k + 1);
            g.template(0).patch_tx_ns(&mut buf[..len], ts);
            let c = check(&buf[..len]);
            assert_eq!(c.sig.unwrap().tx_ns, ts, "{l4} {ip}");
        }
    }
}

#[test]
fn same_seed_same_frames_other_seed_other_frames() {
    let toml = |seed: u64| {
        format!(
            "seed = {seed}\n[[stream]]\nsize = {{ kind = \"uniform\", min = 64, max = 1518 }}\n[[stream.field]]\nfield = \"src_port\"\nop = \"random\"\nfrom = 1\nto = 65535\n[stream.timing]\nrate_pps = 1\n"
        )
    };
    let run = |seed| {
        let p = compile(&toml(seed));
        let mut g = StreamGen::new(p.streams[0].clone());
        let mut buf = vec![0u8; 2000];
        (0..100)
            .flat_map(|_| {
                let n = g.build(&mut buf, 7);
                buf[..n].to_vec()
            })
            .collect::<Vec<u8>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn ops_on_the_same_bytes_compose_and_keep_the_checksum() {
    // dscp and tos both write the IPv4 TOS byte; vlan_id and vlan_pcp share one TCI.
    let p = compile(
        r#"
        [[stream]]
        size = 80
        [stream.template]
        vlan = [{ id = 5 }]
        ecn = 2
        [[stream.field]]
        field = "tos"
        op = "inc"
        from = 1
        to = 3
        [[stream.field]]
        field = "dscp"
        op = "list"
        values = [46, 10]
        [[stream.field]]
        field = "vlan_id"
        op = "inc"
        from = 100
        to = 101
        [[stream.field]]
        field = "vlan_pcp"
        op = "list"
        values = [7, 2]
        [stream.timing]
        rate_pps = 1
        "#,
    );
    assert!(
        !p.streams[0].variants[0].ops[0].rmw
            && p.streams[0].variants[0].ops[1].rmw
            && p.streams[0].variants[0].ops[3].rmw
    );
    let mut g = StreamGen::new(p.streams[0].clone());
    let mut buf = vec![0u8; 100];
    for k in 0..6usize {
        let len = g.build(&mut buf, 0);
        let c = check(&buf[..len]);
        let tos = [1u8, 2, 3][k % 3];
        let dscp = [46u8, 10][k % 2];
        assert_eq!(c.tos, (dscp << 2) | (tos & 3), "k={k}");
        assert_eq!(c.vlans, vec![([100u16, 101][k % 2], [7u8, 2][k % 2])]);
    }
}

/// The inner packet of a tunnelled frame as an Ethernet frame of its own (for [`check`]), and
/// asserts on the outer headers: the outer IPv4 total length and checksum, the outer UDP
/// length and GTP-U's length for this frame's size, the VNI, the labels.
fn untunnel(frame: &[u8], kind: &str, vlans: usize, inner_type: [u8; 2]) -> Vec<u8> {
    let eth = 14 + 4 * vlans;
    let ethertype = [frame[eth - 2], frame[eth - 1]];
    let (len, wrap) = (frame.len(), |at: usize| {
        [&[0u8; 12][..], &inner_type, &frame[at..]].concat()
    });
    if kind == "mpls" {
        assert_eq!(ethertype, [0x88, 0x47], "MPLS ethertype");
        let (l0, l1) = (
            u32::from_be_bytes(frame[eth..eth + 4].try_into().unwrap()),
            u32::from_be_bytes(frame[eth + 4..eth + 8].try_into().unwrap()),
        );
        assert_eq!(
            (l0 >> 12, l0 >> 8 & 1, l1 >> 12, l1 >> 8 & 1),
            (100, 0, 200, 1),
            "labels 100, 200 with bottom-of-stack on the last"
        );
        return wrap(eth + 8);
    }
    assert_eq!(ethertype, [0x08, 0x00], "outer IPv4 ethertype");
    let ip = etherparse::Ipv4HeaderSlice::from_slice(&frame[eth..])
        .expect("an outer IPv4 header")
        .to_header();
    assert_eq!(
        (usize::from(ip.total_len), ip.header_checksum),
        (len - eth, ip.calc_header_checksum()),
        "outer IPv4 length and checksum"
    );
    let l4 = eth + 20;
    if kind == "gre" {
        assert_eq!(
            (ip.protocol.0, &frame[l4..l4 + 4]),
            (47, &[0, 0, inner_type[0], inner_type[1]][..]),
            "GRE header"
        );
        return wrap(l4 + 4);
    }
    assert_eq!(
        u16::from_be_bytes([frame[l4 + 4], frame[l4 + 5]]) as usize,
        len - l4,
        "outer UDP length"
    );
    let t = l4 + 8;
    if kind == "vxlan" {
        assert_eq!(
            (u16::from_be_bytes([frame[l4 + 2], frame[l4 + 3]]), &frame[t..t + 8]),
            (4789, &[8, 0, 0, 0, 0, 0x12, 0x34, 0][..]),
            "VXLAN to 4789, VNI 0x1234"
        );
        return frame[t + 8..].to_vec();
    }
    assert_eq!(&frame[t..t + 2], &[0x30, 0xff], "GTP-U v1 G-PDU");
    assert_eq!(
        u16::from_be_bytes([frame[t + 2], frame[t + 3]]) as usize,
        len - t - 8,
        "GTP-U length"
    );
    assert_eq!(u32::from_be_bytes(frame[t + 4..t + 8].try_into().unwrap()), 77, "TEID");
    wrap(t + 8)
}

#[test]
fn tunnelled_frames_have_right_outer_and_inner_lengths_and_checksums_and_the_meter_finds_them() {
    let tunnels = [
        ("vxlan", "vni = 0x1234"),
        ("gre", ""),
        ("mpls", "labels = [{ label = 100 }, { label = 200, tc = 5 }]"),
        ("gtpv1", "teid = 77"),
    ];
    let mut n = 0;
    for (kind, extra) in tunnels {
        for (vlan, vlans) in [("", 0), ("vlan = [{ id = 7 }]", 1)] {
            for (s, d, inner_type) in [
                ("10.0.0.1", "10.0.0.2", [8, 0]),
                ("2001:2::1", "2001:2::2", [0x86, 0xdd]),
            ] {
                for l4 in ["udp", "tcp"] {
                    let toml = format!(
                        r#"
                        [[stream]]
                        size = {{ kind = "uniform", min = 160, max = 301 }}
                        [stream.template]
                        {vlan}
                        ip_src = "{s}"
                        ip_dst = "{d}"
                        l4 = "{l4}"
                        tunnel = {{ kind = "{kind}", ip_src = "192.0.2.1", ip_dst = "192.0.2.2", {extra} }}
                        [[stream.field]]
                        field = "src_port"
                        op = "inc"
                        from = 1000
                        to = 1003
                        [stream.timing]
                        rate_pps = 1000
                        "#
                    );
                    let toml = toml.replace(", }", " }");
                    let p = compile(&toml);
                    let mut g = StreamGen::new(p.streams[0].clone());
                    let mut buf = vec![0u8; 2048];
                    for k in 0..20u64 {
                        let len = g.build(&mut buf, 5_000 + k);
                        let frame = &buf[..len];
                        let inner = untunnel(frame, kind, vlans, inner_type);
                        let c = check(&inner);
                        let sig = Signature {
                            stream: 0,
                            seq: k as u32,
                            tx_ns: 5_000 + k,
                        };
                        assert_eq!(
                            (c.sig, c.ports),
                            (Some(sig), Some((1000 + k as u16 % 4, 1024))),
                            "{kind} {s} {l4} frame {k}"
                        );
                        assert_eq!(
                            gapless_core::meter::classify::classify(frame),
                            gapless_core::meter::classify::Class::Signed(sig),
                            "expected the meter to find the signature of a {kind} frame"
                        );
                        n += 1;
                    }
                }
            }
        }
    }
    assert_eq!(n, 4 * 2 * 2 * 2 * 20);
}

#[test]
fn tunnel_errors_name_the_key() {
    let spec = |t: &str| {
        let toml =
            format!("[[stream]]\nsize = 128\n[stream.template]\ntunnel = {t}\n[stream.timing]\nrate_pps = 1000\n");
        ProfileSpec::from_toml(&toml, "test")
            .and_then(|s| {
                s.compile(&CompileCtx {
                    link_speed_bps: None,
                    files: &NoFiles,
                })
            })
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = spec(r#"{ kind = "vxlan", vni = 16777216 }"#);
    assert!(e.contains("tunnel.vni") && e.contains("24 bits"), "{e}");
    let e = spec(r#"{ kind = "mpls" }"#);
    assert!(e.contains("tunnel.labels") && e.contains("at least one label"), "{e}");
    let e = spec(r#"{ kind = "gre", ip_src = "2001:db8::1" }"#);
    assert!(
        e.contains("tunnel.ip_dst") && e.contains("two IP versions"),
        "expected mixed outer versions refused; got {e}"
    );
    let e = spec(r#"{ kind = "gre", ip_src = "2001:db8::x" }"#);
    assert!(e.contains("tunnel.ip_src") && e.contains("not an IP address"), "{e}");
    let e = spec(r#"{ kind = "ipip" }"#);
    assert!(e.contains("ipip"), "expected the unknown kind named; got {e}");
}

#[test]
fn arp_templates_parse_as_arp_with_varying_fields_and_the_meter_finds_their_signature() {
    use etherparse::{ArpOperation, LinkExtHeader};
    use gapless_core::meter::{classify, Class};
    let p = compile(
        r#"
        [[stream]]
        size = 68
        [stream.template]
        l4 = "arp"
        vlan = [{ id = 7 }]
        eth_dst = "ff:ff:ff:ff:ff:ff"
        ip_src = "192.0.2.1"
        ip_dst = "192.0.2.100"
        arp_op = 2
        arp_tha = "02:00:00:00:00:99"
        [[stream.field]]
        field = "ip_dst"
        op = "inc"
        from = "192.0.2.100"
        to = "192.0.2.102"
        [[stream.field]]
        field = "arp_sha"
        op = "list"
        values = ["02:00:00:00:00:0a", "02:00:00:00:00:0b"]
        [stream.timing]
        rate_pps = 1000
        "#,
    );
    let mut g = StreamGen::new(p.streams[0].clone());
    let mut buf = vec![0u8; 2048];
    for k in 0..6u64 {
        let len = g.build(&mut buf, 5_000 + k);
        let f = &buf[..len];
        assert_eq!(len, 64, "expected a 64 B frame (68 with FCS), got {len}");
        let h = PacketHeaders::from_ethernet_slice(f).unwrap_or_else(|e| panic!("frame {k}: {e}"));
        assert!(matches!(h.link_exts.as_slice(), [LinkExtHeader::Vlan(v)] if v.vlan_id.value() == 7));
        let Some(NetHeaders::Arp(a)) = &h.net else {
            panic!("frame {k}: expected ARP, got {:?}", h.net)
        };
        assert_eq!(a.operation, ArpOperation::REPLY);
        assert_eq!(a.sender_protocol_addr(), &[192, 0, 2, 1]);
        assert_eq!(
            a.target_protocol_addr(),
            &[192, 0, 2, 100 + (k % 3) as u8],
            "frame {k}: ip_dst inc"
        );
        assert_eq!(
            a.sender_hw_addr(),
            &[2, 0, 0, 0, 0, 0x0a + (k % 2) as u8],
            "frame {k}: arp_sha list"
        );
        assert_eq!(a.target_hw_addr(), &[2, 0, 0, 0, 0, 0x99]);
        let want = Signature {
            stream: 0,
            seq: k as u32,
            tx_ns: 5_000 + k,
        };
        assert_eq!(
            classify(f),
            Class::Signed(want),
            "frame {k}: the meter reads the signature at the frame's end"
        );
    }
    for (toml, want) in [
        (
            "ip_src = \"2001:db8::1\"\nip_dst = \"2001:db8::2\"",
            "an ARP packet carries IPv4 addresses",
        ),
        (
            "[[stream.field]]\nfield = \"src_port\"\nop = \"inc\"\nfrom = 1\nto = 2",
            "src_port on an ARP template",
        ),
    ] {
        let (tmpl, field) = if toml.starts_with("[[") { ("", toml) } else { (toml, "") };
        let text =
            format!("[[stream]]\n[stream.template]\nl4 = \"arp\"\n{tmpl}\n{field}\n[stream.timing]\nrate_pps = 10\n");
        let err = ProfileSpec::from_toml(&text, "t")
            .unwrap()
            .compile(&CompileCtx {
                link_speed_bps: None,
                files: &NoFiles,
            })
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains(want), "expected {want:?}; got {err:?}");
    }
}

/// The outer header at `ip` (IPv4 or IPv6) checked against etherparse's sums: lengths, the
/// IPv4 header checksum, and over IPv6 the outer UDP checksum over the whole inner packet.
/// Returns the offset after the outer IP header.
fn check_outer(frame: &[u8], ip: usize, udp: bool, what: &str) -> usize {
    let len = frame.len();
    if frame[ip] >> 4 == 4 {
        let h = etherparse::Ipv4HeaderSlice::from_slice(&frame[ip..])
            .unwrap()
            .to_header();
        assert_eq!(
            (usize::from(h.total_len), h.header_checksum),
            (len - ip, h.calc_header_checksum()),
            "{what}: outer IPv4 length and checksum"
        );
        return ip + 20;
    }
    let h = etherparse::Ipv6HeaderSlice::from_slice(&frame[ip..])
        .unwrap()
        .to_header();
    assert_eq!(
        usize::from(h.payload_length),
        len - ip - 40,
        "{what}: outer IPv6 payload length"
    );
    let u = ip + 40;
    if udp {
        let uh = etherparse::UdpHeaderSlice::from_slice(&frame[u..]).unwrap().to_header();
        let want = uh.calc_checksum_ipv6(&h, &frame[u + 8..]).unwrap();
        assert_eq!(usize::from(uh.length), len - u, "{what}: outer UDP length");
        assert!(
            uh.checksum != 0,
            "{what}: a zero UDP checksum over IPv6 is dropped by Linux"
        );
        assert_eq!(uh.checksum, want, "{what}: outer UDP checksum over IPv6");
    }
    u
}

#[test]
fn outer_ipv6_and_varying_outer_fields_keep_every_checksum_right_and_the_stamp_keeps_them() {
    let kinds = [
        (
            "vxlan",
            "vni = 10",
            "vni",
            "op = \"list\"\nvalues = [10, 20, 30]",
            [10u64, 20, 30],
        ),
        ("gtpv1", "teid = 7", "teid", "op = \"inc\"\nfrom = 7\nto = 9", [7, 8, 9]),
        (
            "gre",
            "gre_key = 5",
            "gre_key",
            "op = \"dec\"\nfrom = 3\nto = 5",
            [5, 4, 3],
        ),
    ];
    let mut n = 0;
    for (kind, extra, field, op, want) in kinds {
        for (os, od) in [("2001:db8::1", "2001:db8::2"), ("192.0.2.1", "192.0.2.2")] {
            let v6 = os.contains(':');
            let port_op = match kind {
                "gre" => "[[stream.field]]\nfield = \"outer_ttl\"\nop = \"list\"\nvalues = [9, 8]".to_string(),
                _ => "[[stream.field]]\nfield = \"outer_src_port\"\nop = \"inc\"\nfrom = 5000\nto = 5001".to_string(),
            };
            let toml = format!(
                r#"
                [[stream]]
                size = {{ kind = "uniform", min = 160, max = 301 }}
                [stream.template]
                ip_src = "10.0.0.1"
                ip_dst = "10.0.0.2"
                tunnel = {{ kind = "{kind}", ip_src = "{os}", ip_dst = "{od}", {extra} }}
                [[stream.field]]
                field = "{field}"
                {op}
                {port_op}
                [[stream.field]]
                field = "outer_ip_src"
                op = "inc"
                from = "{os}"
                to = "{}"
                [stream.timing]
                rate_pps = 1000
                "#,
                if v6 { "2001:db8::3" } else { "192.0.2.3" }
            );
            let p = compile(&toml);
            let t = p.streams[0].variants[0].template.clone();
            let mut g = StreamGen::new(p.streams[0].clone());
            let mut buf = vec![0u8; 2048];
            for k in 0..12u64 {
                let len = g.build(&mut buf, 9_000 + k);
                let what = format!("{kind} over {os}, frame {k}");
                let frame = &mut buf[..len];
                assert_eq!(
                    &frame[12..14],
                    if v6 { [0x86, 0xdd] } else { [8, 0] },
                    "{what}: ethertype"
                );
                let udp = kind != "gre";
                let after = check_outer(frame, 14, udp, &what);
                let src_low = if v6 { frame[14 + 23] } else { frame[14 + 15] };
                assert_eq!(
                    u64::from(src_low),
                    1 + k % 3,
                    "{what}: outer source address walks 1, 2, 3"
                );
                let (value, inner) = match kind {
                    "vxlan" => {
                        let port = u16::from_be_bytes([frame[after], frame[after + 1]]);
                        assert_eq!(u64::from(port), 5000 + k % 2, "{what}: outer source port");
                        let vni = u32::from_be_bytes([0, frame[after + 12], frame[after + 13], frame[after + 14]]);
                        (u64::from(vni), frame[after + 16..].to_vec())
                    }
                    "gtpv1" => {
                        let teid = u32::from_be_bytes(frame[after + 12..after + 16].try_into().unwrap());
                        let ip = [&[0u8; 12][..], &[8, 0], &frame[after + 16..]].concat();
                        (u64::from(teid), ip)
                    }
                    _ => {
                        let ttl = if v6 { frame[14 + 7] } else { frame[14 + 8] };
                        assert_eq!(u64::from(ttl), 9 - k % 2, "{what}: outer TTL");
                        let key = u32::from_be_bytes(frame[after + 4..after + 8].try_into().unwrap());
                        (u64::from(key), [&[0u8; 12][..], &[8, 0], &frame[after + 8..]].concat())
                    }
                };
                assert_eq!(value, want[k as usize % 3], "{what}: {field}");
                let c = check(&inner);
                let sig = Signature {
                    stream: 0,
                    seq: k as u32,
                    tx_ns: 9_000 + k,
                };
                assert_eq!(c.sig, Some(sig), "{what}: the inner packet's signature");
                assert_eq!(
                    gapless_core::meter::classify::classify(frame),
                    gapless_core::meter::classify::Class::Signed(sig),
                    "{what}: the meter finds the signature"
                );
                // The engine stamps the TX time just before the frame leaves: the outer
                // checksums must still hold.
                t.patch_tx_ns(frame, 123_456_789_000 + k);
                check_outer(frame, 14, udp, &format!("{what}, stamped"));
                n += 1;
            }
        }
    }
    assert_eq!(n, 72);
}

/// ECN, IPv4's identification and DF bit, IPv6's flow label and each TCP flag take field ops
/// (issue 67): each value lands at its bits, the bits beside it keep the template's, and the
/// checksums stay right (etherparse checks them).
#[test]
fn ecn_identification_df_flow_label_and_tcp_flags_vary() {
    let v4 = compile(
        r#"
        [[stream]]
        size = 80
        [stream.template]
        l4 = "tcp"
        dscp = 46
        tcp_flags = "A"
        [[stream.field]]
        field = "ecn"
        op = "list"
        values = [1, 2, 3]
        [[stream.field]]
        field = "ip_id"
        op = "inc"
        from = 7
        to = 9
        [[stream.field]]
        field = "df"
        op = "list"
        values = [1, 0]
        [[stream.field]]
        field = "tcp_syn"
        op = "list"
        values = [1, 0]
        [[stream.field]]
        field = "tcp_cwr"
        op = "list"
        values = [0, 0, 1]
        [stream.timing]
        rate_pps = 10
        "#,
    );
    let mut g = StreamGen::new(v4.streams[0].clone());
    let mut buf = vec![0u8; 80];
    for i in 0..6u16 {
        let len = g.build(&mut buf, 0);
        let c = check(&buf[..len]);
        let ip = &buf[14..34];
        let ecn = [1, 2, 3][i as usize % 3];
        assert_eq!(c.tos, 46 << 2 | ecn, "frame {i}: DSCP kept, ECN {ecn}");
        assert_eq!(
            u16::from_be_bytes([ip[4], ip[5]]),
            7 + i % 3,
            "frame {i}: identification"
        );
        assert_eq!(ip[6] & 0x40 != 0, i % 2 == 0, "frame {i}: DF");
        let flags = buf[34 + 13];
        let want = 0x10 | if i % 2 == 0 { 0x02 } else { 0 } | if i % 3 == 2 { 0x80 } else { 0 };
        assert_eq!(flags, want, "frame {i}: ACK kept, SYN and CWR as listed");
    }
    let v6 = compile(
        r#"
        [[stream]]
        size = 90
        [stream.template]
        ip_src = "2001:2::1"
        ip_dst = "2001:2::2"
        tos = 0xb8
        flow_label = 0xfffff
        [[stream.field]]
        field = "flow_label"
        op = "inc"
        from = 1
        to = 2
        [[stream.field]]
        field = "ecn"
        op = "list"
        values = [3, 1]
        [stream.timing]
        rate_pps = 10
        "#,
    );
    let mut g = StreamGen::new(v6.streams[0].clone());
    let mut buf = vec![0u8; 90];
    for i in 0..4u32 {
        let len = g.build(&mut buf, 0);
        let c = check(&buf[..len]);
        let word = u32::from_be_bytes(buf[14..18].try_into().unwrap());
        assert_eq!(word >> 28, 6, "frame {i}: version");
        assert_eq!(c.tos, 0xb8 | [3, 1][i as usize % 2], "frame {i}: DSCP kept, ECN listed");
        assert_eq!(word & 0xfffff, 1 + i % 2, "frame {i}: flow label");
    }
    // On a header without the field, the op is refused naming the fix.
    for (toml, want) in [
        ("l4 = \"udp\"\n[[stream.field]]\nfield = \"tcp_syn\"\nop = \"list\"\nvalues = [1]", "use a tcp template"),
        ("ip_src = \"2001:2::1\"\nip_dst = \"2001:2::2\"\n[[stream.field]]\nfield = \"df\"\nop = \"list\"\nvalues = [1]", "IPv6 has no identification"),
        ("[[stream.field]]\nfield = \"flow_label\"\nop = \"list\"\nvalues = [1]", "the flow label is IPv6's"),
    ] {
        let text = format!("[[stream]]\nsize = 128\n[stream.template]\n{toml}\n[stream.timing]\nrate_pps = 10\n");
        let e = ProfileSpec::from_toml(&text, "t")
            .and_then(|s| s.compile(&CompileCtx { link_speed_bps: None, files: &NoFiles }))
            .err()
            .unwrap_or_else(|| panic!("expected {want:?} refused"))
            .to_string();
        assert!(e.contains(want), "expected {want:?}, got {e}");
    }
}

/// A VXLAN tunnel with `inner_fcs` (as ixia-c sends VXLAN: its issue #112): the inner
/// Ethernet frame ends with its own CRC-32, the inner lengths leave room for it, the outer
/// lengths and checksums cover it, the meter finds the signature before it, and the TX stamp
/// written just before the frame leaves keeps the FCS and the outer checksums right.
#[test]
fn vxlan_inner_fcs_is_a_crc_of_the_inner_frame_its_lengths_leave_room_and_the_stamp_keeps_it() {
    let mut n = 0;
    for (os, od) in [("2001:db8::1", "2001:db8::2"), ("192.0.2.1", "192.0.2.2")] {
        for (s, d) in [("10.0.0.1", "10.0.0.2"), ("2001:2::1", "2001:2::2")] {
            for l4 in ["udp", "tcp"] {
                let toml = format!(
                    r#"
                    [[stream]]
                    size = {{ kind = "uniform", min = 170, max = 301 }}
                    [stream.template]
                    ip_src = "{s}"
                    ip_dst = "{d}"
                    l4 = "{l4}"
                    tunnel = {{ kind = "vxlan", ip_src = "{os}", ip_dst = "{od}", vni = 9, inner_fcs = true }}
                    [stream.timing]
                    rate_pps = 1000
                    "#
                );
                let p = compile(&toml);
                let t = p.streams[0].variants[0].template.clone();
                let mut g = StreamGen::new(p.streams[0].clone());
                let mut buf = vec![0u8; 2048];
                for k in 0..10u64 {
                    let len = g.build(&mut buf, 7_000 + k);
                    let what = format!("vxlan over {os}, inner {s} {l4}, frame {k} of {len} B");
                    let frame = &mut buf[..len];
                    let after = check_outer(frame, 14, true, &what);
                    let inner = after + 16;
                    let fcs = |f: &[u8]| crc32fast::hash(&f[inner..len - 4]).to_le_bytes();
                    assert_eq!(frame[len - 4..], fcs(frame), "{what}: the inner FCS");
                    // Strict: etherparse refuses an inner IP length that counts the FCS.
                    let c = check(&frame[inner..len - 4]);
                    let sig = Signature {
                        stream: 0,
                        seq: k as u32,
                        tx_ns: 7_000 + k,
                    };
                    assert_eq!(c.sig, Some(sig), "{what}: the inner packet's signature");
                    assert_eq!(
                        gapless_core::meter::classify::classify(frame),
                        gapless_core::meter::classify::Class::Signed(sig),
                        "{what}: the meter finds the signature before the inner FCS"
                    );
                    t.patch_tx_ns(frame, 123_456_789_000 + k);
                    let what = format!("{what}, stamped");
                    check_outer(frame, 14, true, &what);
                    assert_eq!(frame[len - 4..], fcs(frame), "{what}: the inner FCS");
                    let c = check(&frame[inner..len - 4]);
                    assert_eq!(c.sig.map(|s| s.tx_ns), Some(123_456_789_000 + k), "{what}");
                    n += 1;
                }
            }
        }
    }
    assert_eq!(n, 2 * 2 * 2 * 10);
}

#[test]
fn inner_fcs_outside_vxlan_is_refused_by_its_path() {
    let toml = "[[stream]]\nsize = 128\n[stream.template]\n\
                tunnel = { kind = \"gre\", inner_fcs = true }\n[stream.timing]\nrate_pps = 1000\n";
    let e = ProfileSpec::from_toml(toml, "test")
        .and_then(|s| {
            s.compile(&CompileCtx {
                link_speed_bps: None,
                files: &NoFiles,
            })
        })
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("tunnel.inner_fcs") && e.contains("only a VXLAN tunnel"),
        "expected a refusal naming tunnel.inner_fcs; got {e:?}"
    );
}

/// IPv4 options sit after the 20-byte header, padded to whole words; the header length,
/// the total length and both checksums count them, frame by frame as the sizes and an
/// IPv4 field op vary, and the meter still finds the signature.
#[test]
fn ipv4_options_are_written_padded_and_counted_by_the_lengths_and_checksums() {
    for (hex, want) in [("94040000", "94040000"), ("8603aa", "8603aa00"), ("00", "00000000")] {
        for l4 in ["udp", "tcp", "none"] {
            let toml = format!(
                r#"
                [[stream]]
                size = {{ kind = "uniform", min = 90, max = 301 }}
                [stream.template]
                l4 = "{l4}"
                ip_options = "{hex}"
                [[stream.field]]
                field = "ip_id"
                op = "inc"
                from = 1
                to = 9
                [stream.timing]
                rate_pps = 1000
                "#
            );
            let p = compile(&toml);
            let mut g = StreamGen::new(p.streams[0].clone());
            let mut buf = vec![0u8; 2048];
            for k in 0..12u64 {
                let len = g.build(&mut buf, 3_000 + k);
                let f = &buf[..len];
                let what = format!("options {hex} over {l4}, frame {k} of {len} B");
                let h = etherparse::Ipv4HeaderSlice::from_slice(&f[14..]).expect("an IPv4 header");
                let want_opts = (0..want.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&want[i..i + 2], 16).unwrap());
                assert_eq!(
                    (
                        h.ihl(),
                        h.options().to_vec(),
                        usize::from(h.total_len()),
                        h.identification()
                    ),
                    (6, want_opts.collect::<Vec<_>>(), len - 14, 1 + k as u16 % 9),
                    "{what}: header length, options, total length, id"
                );
                assert_eq!(
                    h.header_checksum(),
                    h.to_header().calc_header_checksum(),
                    "{what}: IPv4 checksum"
                );
                let sig = Signature {
                    stream: 0,
                    seq: k as u32,
                    tx_ns: 3_000 + k,
                };
                if l4 != "none" {
                    assert_eq!(check(f).sig, Some(sig), "{what}: L4 checksum, lengths and signature");
                }
                assert_eq!(
                    gapless_core::meter::classify::classify(f),
                    gapless_core::meter::classify::Class::Signed(sig),
                    "{what}: the meter finds the signature"
                );
            }
        }
    }
}

#[test]
fn ipv4_options_over_40_bytes_or_on_ipv6_are_refused_by_their_path() {
    let err = |t: &str| {
        let toml = format!("[[stream]]\nsize = 256\n[stream.template]\n{t}\n[stream.timing]\nrate_pps = 1000\n");
        ProfileSpec::from_toml(&toml, "test")
            .and_then(|s| {
                s.compile(&CompileCtx {
                    link_speed_bps: None,
                    files: &NoFiles,
                })
            })
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = err(&format!("ip_options = \"{}\"", "01".repeat(41)));
    assert!(
        e.contains("ip_options") && e.contains("at most 40"),
        "expected 41 bytes refused; got {e:?}"
    );
    let e = err("ip_src = \"2001:db8::1\"\nip_dst = \"2001:db8::2\"\nip_options = \"94040000\"");
    assert!(
        e.contains("ip_options") && e.contains("IPv6"),
        "expected IPv6 options refused; got {e:?}"
    );
}
