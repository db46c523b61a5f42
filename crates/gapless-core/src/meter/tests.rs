//! The meter's math against hand-computed vectors.

use super::*;
use crate::packet::signature::Signature;
use etherparse::PacketBuilder;

fn frame(stream: u16, seq: u32, tx_ns: u64) -> Vec<u8> {
    let mut payload = vec![0u8; 18];
    Signature { stream, seq, tx_ns }.write(&mut payload[2..]);
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(1000, 2000);
    let mut out = Vec::new();
    b.write(&mut out, &payload).unwrap();
    out
}

fn meter(target: Option<f64>) -> Meter {
    Meter::new(MeterConfig {
        default_target_pps: target,
        ..Default::default()
    })
}

#[test]
fn precision_figures_by_hand() {
    let mut m = meter(Some(1e6));
    for (i, t) in [0u64, 1000, 2100, 2900, 4000].into_iter().enumerate() {
        m.on_frame(1_000_000 + t, &frame(0, i as u32, 1_000_000 + t - 500), 60);
    }
    let r = m.report();
    let s = &r.streams[0];
    let ia = s.interarrival.as_ref().unwrap();
    // gaps 1000 1100 800 1100; errors 0 +100 -200 +100
    assert_eq!(ia.gaps, 4);
    assert_eq!((ia.min_ns, ia.max_ns), (800, 1100));
    assert!((ia.mean_ns - 1000.0).abs() < 1.0);
    assert!((ia.rate_pps - 1e6).abs() < 1e-6);
    assert!(ia.rate_error_rel.unwrap().abs() < 1e-12);
    assert!((ia.mse_ns2.unwrap() - 15_000.0).abs() < 1e-9);
    assert_eq!(ia.burst_fraction, Some(0.0));
    assert_eq!(ia.abs_err_p50_ns, Some(100));
    assert_eq!(ia.abs_err_p99_ns, Some(200));
    let l = s.latency.as_ref().unwrap();
    assert_eq!((l.min_ns, l.max_ns, l.percentiles_ns.p50), (500, 500, 500));
}

#[test]
fn bursts_are_gaps_under_half_the_target() {
    let mut m = meter(Some(1e6));
    for (i, t) in [0u64, 100, 200, 3000, 4000].into_iter().enumerate() {
        m.on_frame(t, &frame(0, i as u32, 0), 60);
    }
    let ia = m.report().streams[0].interarrival.clone().unwrap();
    assert_eq!(ia.burst_fraction, Some(0.5));
    // (−900)² + (−900)² + 1800² + 0 = 4 860 000 / 4
    assert!((ia.mse_ns2.unwrap() - 1_215_000.0).abs() < 1e-6);
}

#[test]
fn latency_percentiles_by_hand() {
    let mut m = meter(None);
    // latencies 100, 200, ..., 1000 ns (exact multiples of the 10 ns unit)
    for i in 0..10u64 {
        let t = 1_000_000 + i * 10_000;
        m.on_frame(t, &frame(3, i as u32, t - (i + 1) * 100), 60);
    }
    let s = m.report().streams.remove(0);
    assert_eq!(s.id, Some(3));
    let l = s.latency.unwrap();
    assert_eq!(l.count, 10);
    assert_eq!((l.min_ns, l.max_ns), (100, 1000));
    assert!((l.mean_ns - 550.0).abs() < 1e-9);
    let p = &l.percentiles_ns;
    assert_eq!((p.p50, p.p90, p.p99, p.p99_9999), (500, 900, 1000, 1000));
    // The histogram round-trips, in units of 10 ns.
    let h = report::hist_from_b64(&l.histogram_v2_deflate_b64).unwrap();
    assert_eq!((h.len(), h.min(), h.max()), (10, 10, 100));
}

#[test]
fn percentiles_to_six_nines_on_a_million() {
    let mut m = meter(None);
    // 10^6 frames: latency 1 µs (ranks 1..=999 990), then 9 at 50 µs, then one at 1 ms.
    let n = 1_000_000u64;
    for i in 0..n {
        let lat = if i == n - 1 {
            1_000_000
        } else if i >= n - 10 {
            50_000
        } else {
            1_000
        };
        let t = 10_000_000 + i * 1000;
        m.on_frame(t, &frame(0, i as u32, t - lat), 60);
    }
    let l = m.report().streams.remove(0).latency.unwrap();
    let p = l.percentiles_ns;
    assert_eq!((p.p50, p.p99, p.p99_9, p.p99_99), (1000, 1000, 1000, 1000));
    // 99.999 % is rank 999 990: the last 1 µs frame.
    assert_eq!(p.p99_999, 1000);
    // 99.9999 % -> rank 999 999: a 50 µs frame (within the histogram's 0.1 %).
    assert!((50_000..=50_050).contains(&p.p99_9999), "{}", p.p99_9999);
    assert_eq!(l.max_ns, 1_000_000);
}

#[test]
fn ipdv_between_consecutive_numbers() {
    let mut m = meter(None);
    // seq 0,1,2 latencies 100, 300, 250 -> IPDV +200, -50; seq 4 (3 lost) 1000: no pair.
    for (seq, lat) in [(0u32, 100u64), (1, 300), (2, 250), (4, 1000)] {
        let t = 1_000_000 + u64::from(seq) * 10_000;
        m.on_frame(t, &frame(0, seq, t - lat), 60);
    }
    let s = m.report().streams.remove(0);
    let d = s.ipdv.unwrap();
    assert_eq!((d.pairs, d.min_ns, d.max_ns, d.max_abs_ns), (2, -50, 200, 200));
    assert_eq!(d.abs_percentiles_ns.p50, 50);
    assert_eq!(s.seq.unwrap().lost, 1);
}

#[test]
fn window_rates_by_hand() {
    let mut m = meter(Some(1e6));
    // 300 arrivals 1000 ns apart, except gap 150 (index 149 -> 150) is 500 ns.
    let mut t = 0u64;
    for i in 0..300u32 {
        if i > 0 {
            t += if i == 150 { 500 } else { 1000 };
        }
        m.on_frame(t, &frame(0, i, 0), 60);
    }
    let s = m.report().streams.remove(0);
    let w100 = &s.rate_jitter[0];
    assert_eq!(w100.packets, 100);
    assert_eq!(w100.windows, 201);
    // shortest 99-gap span holds the 500 ns gap: 98 500 ns; longest: 99 000 ns
    assert!((w100.max_pps - 99e9 / 98_500.0).abs() < 1e-6);
    assert!((w100.min_pps - 1e6).abs() < 1e-6);
    assert!((w100.max_pct - 100.0 * 99e9 / 98_500.0 / 1e6).abs() < 1e-9);
    // 99 of the 201 windows hold the short gap.
    let avg = (102.0 * 1e6 + 99.0 * 99e9 / 98_500.0) / 201.0;
    assert!((w100.avg_pps - avg).abs() < 1e-3, "{} vs {avg}", w100.avg_pps);
    let w200 = &s.rate_jitter[1];
    assert_eq!((w200.packets, w200.windows), (200, 101));
    assert_eq!(s.rate_jitter.len(), 2, "no window of 500 in 300 frames");
}

#[test]
fn counts_loss_reorder_duplicates_and_foreign() {
    let mut m = meter(None);
    let mut t = 1000;
    for seq in [0u32, 1, 3, 2, 5, 5, 6, 1, 9, 7] {
        t += 1000;
        m.on_frame(t, &frame(0, seq, t - 10), 60);
    }
    // Foreign: an ARP-like non-IP frame, garbage, an ICMP error quoting a signed frame.
    m.on_frame(t + 1, &[0xff; 60], 60);
    m.on_frame(t + 2, &[1, 2, 3], 3);
    let quoted = frame(0, 99, 0);
    let icmp = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
        .ipv4([198, 18, 0, 2], [198, 18, 0, 1], 64)
        .icmpv4(etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::Port,
        ));
    let mut f = Vec::new();
    icmp.write(&mut f, &quoted[14..]).unwrap();
    m.on_frame(t + 3, &f, f.len() as u32);
    let r = m.report();
    assert_eq!(r.streams.len(), 1);
    let q = r.streams[0].seq.clone().unwrap();
    assert_eq!((q.lost, q.reordered, q.duplicated, q.unique), (2, 2, 2, 8));
    assert_eq!(r.streams[0].rx_frames, 10);
    assert_eq!(r.foreign.total, 3);
    assert_eq!(r.foreign.icmp_error, 1);
    assert_eq!(r.foreign.not_ip + r.foreign.malformed, 2);
}

#[test]
fn unsigned_frames_are_flows_by_five_tuple() {
    let mut m = meter(Some(1e5));
    for i in 0..20u64 {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(1000 + (i % 2) as u16, 9);
        let mut f = Vec::new();
        b.write(&mut f, &[0; 22]).unwrap();
        m.on_frame(i * 5_000, &f, 64);
    }
    let r = m.report();
    assert_eq!(r.streams.len(), 2);
    assert_eq!(r.streams[0].flow.as_deref(), Some("udp 10.0.0.1:1000 > 10.0.0.2:9"));
    let ia = r.streams[0].interarrival.as_ref().unwrap();
    assert_eq!(ia.min_ns, 10_000);
    assert!(ia.rate_error_rel.unwrap().abs() < 1e-12);
    assert!(r.streams[0].seq.is_none() && r.streams[0].latency.is_none());
}

#[test]
fn per_second_series_counts_frames_and_loss() {
    let mut m = meter(None);
    // 10 frames per second for 3 s; seq 15 and 16 lost (second 1); nothing in second 3; one frame in 4.
    let mut seq = 0u32;
    for sec in 0..3u64 {
        for k in 0..10u64 {
            let t = 1_000_000_000 * sec + k * 100_000_000;
            if seq != 15 && seq != 16 {
                m.on_frame(t + 10, &frame(0, seq, t), 60);
            }
            seq += 1;
        }
    }
    m.on_frame(4_500_000_000, &frame(0, seq, 4_500_000_000 - 7), 60);
    let s = m.report().streams.remove(0);
    let rx: Vec<u64> = s.series.iter().map(|p| p.rx_frames).collect();
    let lost: Vec<u64> = s.series.iter().map(|p| p.lost.unwrap()).collect();
    // Second 3 had no frame: the series is sparse and leaves it out.
    assert_eq!(rx, [10, 8, 10, 1]);
    assert_eq!(lost, [0, 2, 0, 0]);
    assert_eq!(s.series[0].latency_p50_ns, Some(10));
    assert_eq!(s.series[3].t_s, 4);
}

#[test]
fn hostile_timestamps_do_not_materialise_empty_seconds() {
    let mut m = meter(None);
    // One frame at time 0, then 999 at today's time (~1.7e18 ns): a jump of 54 years.
    m.on_frame(0, &frame(0, 0, 0), 60);
    let now = 1_700_000_000_000_000_000u64;
    for k in 1..1000u32 {
        let t = now + u64::from(k) * 1_000;
        m.on_frame(t, &frame(0, k, t - 100), 60);
    }
    // Then random-looking stamps, back and forth over 4e9 s.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for k in 1000..3000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let t = x % 4_000_000_000_000_000_000;
        m.on_frame(t, &frame(0, k, t), 60);
    }
    m.on_frame(u64::MAX, &frame(0, 3000, 0), 60);
    let s = m.report().streams.remove(0);
    assert!(
        s.series.len() <= 64,
        "expected a sparse series, got {} points",
        s.series.len()
    );
    let ia = s.interarrival.unwrap();
    assert!(
        ia.timestamps_jumped >= 1,
        "expected the 54-year jump counted, got {}",
        ia.timestamps_jumped
    );
    assert!(
        ia.timestamps_backwards > 500,
        "expected the stamps that went back counted, got {}",
        ia.timestamps_backwards
    );
    assert_eq!(s.rx_frames, 3001);
}

#[test]
fn lanes_of_a_split_stream_are_counted_apart() {
    let mut targets = std::collections::HashMap::new();
    targets.insert(
        0,
        StreamTarget {
            name: "p".into(),
            target_pps: None,
            lanes: 2,
            gaps: Default::default(),
            tags: Vec::new(),
            plan: Vec::new(),
        },
    );
    let mut m = Meter::new(MeterConfig {
        targets,
        ..Default::default()
    });
    // Lane 0 sends 0 2 4 6 8, lane 1 sends 1 3 5 (7 lost) 9; they interleave at random.
    for (k, seq) in [0u32, 2, 1, 4, 3, 6, 5, 8, 9].into_iter().enumerate() {
        let t = 1_000_000 + k as u64 * 1000;
        m.on_frame(t, &frame(0, seq, t - 100), 60);
    }
    let q = m.report().streams[0].seq.clone().unwrap();
    assert_eq!((q.lost, q.reordered, q.duplicated, q.unique), (1, 0, 0, 9));
    assert_eq!((q.first_seq, q.highest_seq), (0, 9));
}

#[test]
fn a_calibration_judges_itself() {
    let mut c = report::Calibration {
        rate_pps: 10_000.0,
        floor_abs_err_p50_ns: 999,
        valid: true,
        ..Default::default()
    };
    c.judge(Some(true));
    assert!(c.valid && c.invalid_reason.is_none(), "999 ns < 1 % of 100 µs: {c:?}");
    c.floor_abs_err_p50_ns = 1_001;
    c.lost = 2;
    c.judge(Some(false));
    assert!(!c.valid);
    let why = c.invalid_reason.clone().unwrap();
    for part in [
        "2 frames were lost",
        "1001 ns is above 1 % of its 100000 ns gap",
        "did not hold",
    ] {
        assert!(why.contains(part), "expected {part:?} in {why:?}");
    }
    assert!(!c.reference("x").valid);
}

#[test]
fn hostile_stamps_saturate_instead_of_wrapping() {
    // Found by the classify fuzz target: RX and TX stamps far apart overflowed i64.
    let mut m = meter(None);
    m.on_frame(u64::MAX, &frame(0, 0, 0), 60);
    m.on_frame(0, &frame(0, 1, u64::MAX), 60);
    let l = m.report().streams.remove(0).latency.unwrap();
    assert_eq!((l.max_ns, l.min_ns), (i64::MAX, i64::MIN), "{l:?}");
    let p = &l.percentiles_ns;
    assert!(p.p50 >= l.min_ns && p.p99_9999 <= l.max_ns, "{p:?}");
}

#[test]
fn a_rate_changed_while_running_drops_the_precision_figures_with_the_reason() {
    let mut m = meter(Some(1e6));
    for (i, t) in [0u64, 1000, 2100].into_iter().enumerate() {
        m.on_frame(1_000_000 + t, &frame(0, i as u32, 1_000_000 + t - 500), 60);
    }
    m.rate_changed(0, "changed");
    m.rate_changed(9, "a stream not seen yet is no error");
    for (i, t) in [2600u64, 3100].into_iter().enumerate() {
        m.on_frame(1_000_000 + t, &frame(0, 3 + i as u32, 1_000_000 + t - 500), 60);
    }
    let r = m.report();
    let ia = r.streams[0].interarrival.as_ref().unwrap();
    assert_eq!(ia.gaps, 4, "expected every gap still counted");
    assert_eq!(ia.gap_reference, format!("{}changed", reference::NONE));
    assert_eq!(
        (ia.abs_err_p50_ns, ia.mse_ns2, ia.target_pps),
        (None, None, None),
        "expected no precision figures, got {ia:?}"
    );
    assert_eq!(r.streams[0].rx_frames, 5);
}

#[test]
fn a_stream_moving_between_ports_is_one_sequence_counted_per_port() {
    let mut m = meter(None);
    m.set_ports(2);
    // Frames 0-4 on port 0, 5-6 lost in the switch, 7-9 on port 1.
    for seq in 0..10u32 {
        if seq == 5 || seq == 6 {
            continue;
        }
        m.at_port(u8::from(seq > 6));
        let f = frame(1, seq, 1_000 * u64::from(seq));
        m.on_frame(10_000 + 1_000 * u64::from(seq), &f, f.len() as u32);
    }
    let r = m.report();
    let s = &r.streams[0];
    let q = s.seq.as_ref().expect("a signed stream has a sequence");
    assert_eq!(
        (s.rx_frames, q.lost),
        (8, 2),
        "expected 8 received and 2 lost, got {s:?}"
    );
    let ports: Vec<(u64, u64, u64)> = s
        .rx_ports
        .iter()
        .map(|p| (p.rx_frames, p.first_rx_ns, p.last_rx_ns))
        .collect();
    assert_eq!(
        ports,
        vec![(5, 10_000, 14_000), (3, 17_000, 19_000)],
        "expected per-port counts and arrival spans"
    );
    let e = s.loss_episodes.as_ref().expect("one outage");
    assert_eq!(
        (e.count, e.longest_frames, e.longest_ns),
        (1, 2, 3_000),
        "expected the switch as one 2-frame outage of 3 µs"
    );
    assert_eq!(m.live()[0].ports, vec![5, 3], "expected live per-port counts");

    let mut one = meter(None);
    let f = frame(1, 0, 0);
    one.on_frame(1, &f, f.len() as u32);
    assert!(
        one.report().streams[0].rx_ports.is_empty(),
        "a meter on one port lists no ports"
    );
}

/// A template without a layer 4 header (`l4 = "none"`) at `len` bytes: signed when `sig`.
fn bare_ip_frame(v6: bool, vlan: u16, len: usize, sig: Option<u32>) -> (crate::packet::template::Template, Vec<u8>) {
    use crate::spec::{L4Kind, TemplateSpec, VlanSpec};
    let mut s = TemplateSpec {
        l4: L4Kind::None,
        vlan: vec![VlanSpec {
            id: vlan,
            pcp: 0,
            dei: false,
            tpid: None,
        }],
        ..TemplateSpec::default()
    };
    if v6 {
        s.ip_src = "2001:2::1".into();
        s.ip_dst = "2001:2::2".into();
    }
    let t = crate::packet::template::Template::build(&s, len, sig.is_some(), Vec::new(), 1, "t").unwrap();
    let mut f = t.bytes.clone();
    if let Some(seq) = sig {
        let at = f.len() - 16;
        crate::packet::signature::Signature {
            stream: 3,
            seq,
            tx_ns: 5,
        }
        .write(&mut f[at..]);
        t.finish_reference(&mut f);
    }
    (t, f)
}

#[test]
fn a_bare_ip_frame_is_read_by_its_signature_at_the_ip_payload_s_end() {
    let (_, f) = bare_ip_frame(false, 5, 100, Some(9));
    assert_eq!(f[12 + 4 + 2 + 9], 61, "expected IPv4 protocol 61; got {}", f[27]);
    match super::classify(&f) {
        Class::Signed(s) => assert_eq!((s.stream, s.seq), (3, 9), "got {s:?}"),
        other => panic!("expected a signed frame; got {other:?}"),
    }
}

#[test]
fn unsigned_streams_are_counted_by_the_plan_and_others_stay_foreign() {
    use crate::meter::plan::PlanMatch;
    let (t10, f10) = bare_ip_frame(true, 10, 60, None);
    let (t11, f11) = bare_ip_frame(true, 11, 60, None);
    let (_, f12) = bare_ip_frame(true, 12, 60, None);
    let mut targets = std::collections::HashMap::new();
    for (id, t) in [(1u16, &t10), (2, &t11)] {
        let target = StreamTarget {
            name: format!("flow {id}"),
            target_pps: None,
            lanes: 1,
            gaps: Default::default(),
            tags: Vec::new(),
            plan: vec![PlanMatch::of(t, &[]).unwrap()],
        };
        targets.insert(id, target);
    }
    let mut m = Meter::new(MeterConfig {
        targets,
        ..Default::default()
    });
    for i in 0..5u64 {
        m.on_frame(1000 * i, &f10, 60);
    }
    m.on_frame(9000, &f11, 60);
    m.on_frame(9500, &f12, 60);
    let r = m.report();
    let got: Vec<(String, u64)> = r.streams.iter().map(|s| (s.name.clone(), s.rx_frames)).collect();
    assert_eq!(
        got,
        vec![("flow 1".to_string(), 5), ("flow 2".to_string(), 1)],
        "expected flow 1: 5, flow 2: 1"
    );
    assert_eq!(
        r.foreign.total, 1,
        "expected VLAN 12's frame foreign; got {:?}",
        r.foreign
    );
    assert!(
        r.streams[0].latency.is_none(),
        "an unsigned stream has no latency; got one"
    );
}

#[test]
fn a_stream_whose_hand_lengths_mislead_parsers_is_read_by_its_signature_at_the_frame_s_end() {
    use crate::meter::plan::PlanMatch;
    use crate::packet::signature::Signature;
    use crate::spec::{HandSpec, TemplateSpec};
    let s = TemplateSpec {
        hand: HandSpec {
            ip_length: Some(40),
            l4_length: Some(2000),
            ..HandSpec::default()
        },
        ..TemplateSpec::default()
    };
    let t = crate::packet::template::Template::build(&s, 100, true, Vec::new(), 1, "t").unwrap();
    let m0 = PlanMatch::of(&t, &[]).unwrap();
    assert!(
        m0.sig_at_end,
        "expected the plan to read the signature at the end; got {m0:?}"
    );
    let target = StreamTarget {
        name: "hand".into(),
        target_pps: None,
        lanes: 1,
        gaps: Default::default(),
        tags: Vec::new(),
        plan: vec![m0],
    };
    let mut m = Meter::new(MeterConfig {
        targets: [(4u16, target)].into_iter().collect(),
        ..Default::default()
    });
    for seq in [0u32, 1, 3] {
        let mut f = t.bytes.clone();
        let sig = Signature {
            stream: 4,
            seq,
            tx_ns: 1_000,
        };
        sig.write(&mut f[84..]);
        t.finish_with(&mut f, 0, 0, Some(&sig));
        assert!(
            !matches!(super::classify(&f), Class::Signed(_)),
            "expected a parser to miss the signature of a frame with IP length 40"
        );
        m.on_frame(2_000 + u64::from(seq), &f, 100);
    }
    let r = m.report();
    let s = &r.streams[0];
    assert_eq!(
        (s.rx_frames, r.foreign.total),
        (3, 0),
        "expected 3 frames of the stream, none foreign; got {} and {:?}",
        s.rx_frames,
        r.foreign
    );
    assert!(s.latency.is_some(), "expected latency from the signatures; got none");
    let lost = s.seq.as_ref().map(|q| q.lost);
    assert_eq!(lost, Some(1), "expected seq 2 lost; got {lost:?}");
}
