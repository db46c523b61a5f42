//! The meter offline: profile -> pcap -> injected faults -> `gapless analyze`, exact counts;
//! CSV tables; bad captures; `gapless report`. No root needed.

mod common;
use common::*;

use std::path::{Path, PathBuf};

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapTsResolution, PcapWriter};
use serde_json::Value;

const PROFILE: &str = r#"
seed = 3
[[stream]]
name = "probe"
size = 64
[stream.timing]
rate_pps = 10_000
count = 1000
"#;

fn write_pcap(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let f = std::fs::File::create(path).unwrap();
    let header = PcapHeader {
        ts_resolution: PcapTsResolution::NanoSecond,
        ..Default::default()
    };
    let mut w = PcapWriter::with_header(f, header).unwrap();
    for (ts, d) in frames {
        let p = PcapPacket::new(std::time::Duration::from_nanos(*ts), d.len() as u32, &d[..]).unwrap();
        w.write_packet(&p).unwrap();
    }
}

fn seq_of(frame: &[u8]) -> u32 {
    let n = frame.len();
    // 64-byte UDP/IPv4 frame without FCS: 60 bytes, signature at the end of the UDP payload.
    let h = etherparse::SlicedPacket::from_ethernet(frame).unwrap();
    let p = match h.transport {
        Some(etherparse::TransportSlice::Udp(u)) => u.payload(),
        _ => panic!("not UDP ({n} B)"),
    };
    u32::from_be_bytes(p[p.len() - 12..p.len() - 8].try_into().unwrap())
}

/// The profile's frames, as a pcap from `gapless run --out`.
fn base(dir: &Path) -> (PathBuf, Vec<(u64, Vec<u8>)>) {
    let prof = write(dir, "p.toml", PROFILE);
    let pcap = dir.join("clean.pcap");
    let o = gapless(&["run", prof.to_str().unwrap(), "--out", pcap.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    let frames = read_pcap(&pcap);
    assert_eq!(frames.len(), 1000);
    (prof, frames)
}

fn analyze(args: &[&str], json: &Path) -> Value {
    let mut a = vec!["analyze"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--json", json.to_str().unwrap()]);
    let o = gapless(&a);
    assert!(o.status.success(), "{}", text(&o));
    read_json(json)
}

#[test]
fn analyze_counts_injected_loss_reorder_and_duplicates_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (prof, frames) = base(dir.path());
    let by_seq = |s: u32| frames.iter().find(|f| seq_of(&f.1) == s).unwrap().clone();
    // Build the arrival order: drop 10, 500, 501, 998; swap 100/101; 700 after 703;
    // 200 twice in a row; 300 again after 900; an ICMP error quoting frame 5; a non-IP frame.
    let mut order: Vec<u32> = (0..1000).filter(|s| ![10, 500, 501, 998].contains(s)).collect();
    let i = order.iter().position(|&s| s == 100).unwrap();
    order.swap(i, i + 1);
    let i = order.iter().position(|&s| s == 700).unwrap();
    order.remove(i);
    let j = order.iter().position(|&s| s == 703).unwrap();
    order.insert(j + 1, 700);
    let i = order.iter().position(|&s| s == 200).unwrap();
    order.insert(i + 1, 200);
    let i = order.iter().position(|&s| s == 900).unwrap();
    order.insert(i + 1, 300);
    // Arrival times: 100 µs apart, in the new order.
    let mut out: Vec<(u64, Vec<u8>)> = order
        .iter()
        .enumerate()
        .map(|(k, &s)| (1_000_000_000 + k as u64 * 100_000, by_seq(s).1))
        .collect();
    let quoted = by_seq(5).1;
    let mut icmp = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
        .ipv4([198, 18, 0, 2], [198, 18, 0, 1], 64)
        .icmpv4(etherparse::Icmpv4Type::DestinationUnreachable(
            etherparse::icmpv4::DestUnreachableHeader::Port,
        ))
        .write(&mut icmp, &quoted[14..])
        .unwrap();
    out.insert(50, (out[49].0 + 1, icmp));
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x06]);
    arp.resize(60, 0);
    out.insert(60, (out[59].0 + 1, arp));
    let faulty = dir.path().join("faulty.pcap");
    write_pcap(&faulty, &out);

    let r = analyze(
        &[
            faulty.to_str().unwrap(),
            "--profile",
            prof.to_str().unwrap(),
            "--no-latency",
        ],
        &dir.path().join("a.json"),
    );
    let s = &r["streams"][0];
    assert_eq!(s["name"], "probe");
    assert_eq!(s["id"], 0);
    assert_eq!(s["rx_frames"], 998);
    let q = &s["seq"];
    assert_eq!(q["lost"], 4, "{q}");
    assert_eq!(q["reordered"], 2, "{q}");
    assert_eq!(q["duplicated"], 2, "{q}");
    assert_eq!(q["unique"], 996);
    assert_eq!(q["reorder_extent_max"], 3);
    assert_eq!(r["foreign"]["total"], 2);
    assert_eq!(r["foreign"]["icmp_error"], 1);
    assert_eq!(r["foreign"]["not_ip"], 1);
    assert_eq!(
        r["streams"].as_array().unwrap().len(),
        1,
        "the ICMP error is not a stream"
    );
    // The target comes from the profile; arrivals are 100 µs apart except the two foreign
    // frames' neighbours, so the rate is exactly the target's.
    let ia = &s["interarrival"];
    assert_eq!(ia["target_pps"], 10_000.0);
    assert!(ia["rate_error_rel"].as_f64().unwrap().abs() < 1e-9, "{ia}");
    assert_eq!(ia["mse_ns2"], 0.0);
    assert!(s["latency"].is_null(), "--no-latency");
    // With the profile the meter knows the stream has one lane: no warning about lanes.
    assert!(
        !r["warnings"].to_string().contains("interleaved lanes"),
        "{}",
        r["warnings"]
    );
    // Without it, loss and reordering may be a --cores run's lanes: the result says so.
    let r = analyze(&[faulty.to_str().unwrap(), "--no-latency"], &dir.path().join("b.json"));
    let w = r["warnings"].to_string();
    assert!(
        w.contains("interleaved lanes") && w.contains("--profile RESULT.json"),
        "{w}"
    );

    // The clean pcap: no faults, and latency = 0 (pcap times are the signature's times).
    let r = analyze(
        &[dir.path().join("clean.pcap").to_str().unwrap()],
        &dir.path().join("c.json"),
    );
    let s = &r["streams"][0];
    assert_eq!(
        (s["seq"]["lost"].as_u64(), s["seq"]["reordered"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(s["latency"]["max_ns"], 0);
    assert_eq!(s["latency"]["count"], 1000);
}

#[test]
fn analyze_reads_pcapng_like_pcap() {
    let dir = tempfile::tempdir().unwrap();
    let (_prof, _) = base(dir.path());
    let clean = dir.path().join("clean.pcap");
    let ng = dir.path().join("clean.pcapng");
    let o = std::process::Command::new("editcap")
        .args(["-F", "pcapng"])
        .arg(&clean)
        .arg(&ng)
        .output()
        .expect("editcap (apt-get install tshark)");
    assert!(o.status.success(), "{}", text(&o));
    let a = analyze(
        &[clean.to_str().unwrap(), "--target-pps", "10000"],
        &dir.path().join("a.json"),
    );
    let b = analyze(
        &[ng.to_str().unwrap(), "--target-pps", "10000"],
        &dir.path().join("b.json"),
    );
    assert!(b["source"].as_str().unwrap().starts_with("pcapng "));
    assert_eq!(a["streams"][0]["interarrival"], b["streams"][0]["interarrival"]);
    assert_eq!(a["streams"][0]["seq"], b["streams"][0]["seq"]);
    assert_eq!(a["streams"][0]["rx_frames"], 1000);
}

#[test]
fn analyze_csv_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    // Stream 7: seq 0..=5 with 3 missing and 1 late; latencies 100..600 ns; gaps 1000 ns.
    let mut csv = String::from("# from a timestamper\nrx_ns,stream,seq,tx_ns,len\n");
    for (k, seq) in [0u64, 1, 2, 5, 4, 6].iter().enumerate() {
        let rx = 5_000 + k as u64 * 1000;
        csv.push_str(&format!("{rx},7,{seq},{},64\n", rx - 100 * (k as u64 + 1)));
    }
    let p = write(dir.path(), "t.csv", &csv);
    let r = analyze(
        &[p.to_str().unwrap(), "--target-pps", "1000000"],
        &dir.path().join("a.json"),
    );
    let s = &r["streams"][0];
    assert_eq!(s["id"], 7);
    assert_eq!(s["seq"]["lost"], 1);
    assert_eq!(s["seq"]["reordered"], 1);
    assert_eq!(s["latency"]["min_ns"], 100);
    assert_eq!(s["latency"]["max_ns"], 600);
    assert_eq!(s["interarrival"]["mse_ns2"], 0.0);
    assert_eq!(s["rx_bytes_l2"], 6 * 64);

    // Timestamps only: one anonymous series.
    let p = write(dir.path(), "ts.csv", "timestamp_ns\n0\n1000\n2500\n3000\n");
    let r = analyze(
        &[p.to_str().unwrap(), "--target-pps", "1000000"],
        &dir.path().join("b.json"),
    );
    let s = &r["streams"][0];
    assert_eq!(s["name"], "timestamps");
    // gaps 1000 1500 500: errors 0, 500, -500 -> MSE 166 666.67; one gap < 500? no (500 is not < 500)
    let mse = s["interarrival"]["mse_ns2"].as_f64().unwrap();
    assert!((mse - 500_000.0 / 3.0).abs() < 1e-6, "{mse}");
    assert_eq!(s["interarrival"]["burst_fraction"], 0.0);
}

#[test]
fn bad_captures_and_tables_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // CSV: a bad row names its line.
    let p = write(d, "bad.csv", "rx_ns,stream,seq\n100,0,0\n200,0,1\n3x0,0,2\n");
    expect_error(
        &gapless(&["analyze", p.to_str().unwrap()]),
        &["line 4", "column rx_ns", "\"3x0\" is not an unsigned integer"],
    );
    let p = write(d, "nocol.csv", "time,len\n1,2\n");
    expect_error(
        &gapless(&["analyze", p.to_str().unwrap()]),
        &["no rx_ns column", "Fix:"],
    );
    let p = write(d, "half.csv", "rx_ns,stream\n1,2\n");
    expect_error(&gapless(&["analyze", p.to_str().unwrap()]), &["stream and seq"]);
    let p = write(d, "empty.csv", "rx_ns\n");
    expect_error(&gapless(&["analyze", p.to_str().unwrap()]), &["no rows"]);
    // Garbage.
    let p = d.join("garbage.pcap");
    std::fs::write(&p, [0u8, 1, 2, 3, 4, 5, 6, 7, 200, 201]).unwrap();
    expect_error(
        &gapless(&["analyze", p.to_str().unwrap()]),
        &["unknown file type", "Fix:"],
    );
    let p = d.join("short.pcap");
    std::fs::write(&p, [0xd4, 0xc3]).unwrap();
    expect_error(&gapless(&["analyze", p.to_str().unwrap()]), &["not a capture"]);
    // A pcap magic with a broken header.
    let p = d.join("hdr.pcap");
    std::fs::write(&p, [0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4]).unwrap();
    expect_error(&gapless(&["analyze", p.to_str().unwrap()]), &["pcap header"]);
    expect_error(&gapless(&["analyze", "/nonexistent/x.pcap"]), &["cannot open"]);
    // Truncated in the middle of a frame: what came before is analysed, with a warning.
    let (_prof, _) = base(d);
    let clean = std::fs::read(d.join("clean.pcap")).unwrap();
    let cut = d.join("cut.pcap");
    std::fs::write(&cut, &clean[..24 + 100 * (16 + 60) + 30]).unwrap();
    let o = gapless(&["analyze", cut.to_str().unwrap()]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("WARNING: the capture breaks off after 100 frames"), "{t}");
    // Other bad options.
    let clean = d.join("clean.pcap");
    expect_error(
        &gapless(&["analyze", clean.to_str().unwrap(), "--target-pps", "0"]),
        &["--target-pps 0"],
    );
    expect_error(
        &gapless(&["analyze", clean.to_str().unwrap(), "--calibration", "/nonexistent.json"]),
        &["cannot read calibration", "gapless calibrate"],
    );
    let notcal = write(d, "notcal.json", "{\"kind\": 3}");
    expect_error(
        &gapless(&[
            "analyze",
            clean.to_str().unwrap(),
            "--calibration",
            notcal.to_str().unwrap(),
        ]),
        &["not a gapless calibration file"],
    );
}

/// The clean capture analyzed against its profile: the profile, the result file and its JSON.
fn clean_result(d: &Path) -> (PathBuf, PathBuf, Value) {
    let (prof, _) = base(d);
    let json = d.join("a.json");
    let pcap = d.join("clean.pcap");
    let result = analyze(&[pcap.to_str().unwrap(), "--profile", prof.to_str().unwrap()], &json);
    (prof, json, result)
}

#[test]
fn report_redraws_exports_and_plots_from_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (prof, json, _) = clean_result(d);
    let out = d.join("rep");
    let o = gapless(&["report", json.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    for f in [
        "probe-interarrival",
        "probe-latency-cdf",
        "probe-latency-ccdf",
        "probe-rate-jitter",
        "probe-rate",
    ] {
        let png = std::fs::read(out.join(format!("{f}.png"))).unwrap();
        assert_eq!(&png[1..4], b"PNG", "{f}.png");
        let svg = std::fs::read_to_string(out.join(format!("{f}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.contains("<text"), "{f}.svg has text");
    }
    // The inter-arrival histogram export holds every gap.
    let csv = std::fs::read_to_string(out.join("probe-interarrival.csv")).unwrap();
    let rows: Vec<Vec<u64>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.iter().map(|r| r[2]).sum::<u64>(), 999);
    assert_eq!(rows.len(), 1, "CBR gaps from a pcap are exact: {csv}");
    assert!(rows[0][0] <= 100_000 && 100_000 <= rows[0][1], "{csv}");
    let lat = std::fs::read_to_string(out.join("probe-latency.csv")).unwrap();
    assert!(
        lat.lines().last().unwrap().contains(",1.000000000,"),
        "CDF ends at 1: {lat}"
    );
    // A send-only result has nothing to draw.
    let tx = d.join("tx.json");
    let o = gapless(&[
        "run",
        prof.to_str().unwrap(),
        "--null",
        "--json",
        tx.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success());
    expect_error(
        &gapless(&["report", tx.to_str().unwrap()]),
        &["send-only result", "--rx"],
    );
}

#[test]
fn a_wild_sequence_number_is_reported_as_such_not_as_loss() {
    let dir = tempfile::tempdir().unwrap();
    let (prof, mut frames) = base(dir.path());
    // Frame 500 carries a sequence number near 2^31 (a corrupted or foreign signed frame).
    let f = &mut frames[500].1;
    let n = f.len();
    f[n - 12..n - 8].copy_from_slice(&((1u32 << 31) - 1000).to_be_bytes());
    let p = dir.path().join("wild.pcap");
    write_pcap(&p, &frames);
    let r = analyze(
        &[p.to_str().unwrap(), "--profile", prof.to_str().unwrap()],
        &dir.path().join("w.json"),
    );
    let q = &r["streams"][0]["seq"];
    assert_eq!(q["lost"], 1, "expected only frame 500's own number missing, got {q}");
    assert_eq!(q["wild"], 1, "{q}");
    assert_eq!(q["restarts"], 0, "{q}");
    let w = r["warnings"].to_string();
    assert!(
        w.contains("far from the stream's"),
        "expected a warning about the wild number, got {w}"
    );
}

#[test]
fn a_report_of_many_streams_plots_the_first_32_and_exports_every_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_, json, mut result) = clean_result(d);
    // One stream made 40, each of its own name.
    let rx = if result["rx"].is_object() {
        &mut result["rx"]
    } else {
        &mut result
    };
    let one = rx["streams"][0].clone();
    rx["streams"] = (0..40)
        .map(|i| {
            let mut s = one.clone();
            s["name"] = serde_json::json!(format!("s{i:02}"));
            s
        })
        .collect();
    std::fs::write(&json, result.to_string()).unwrap();
    let out = d.join("rep");
    let o = gapless(&["report", json.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let plotted: std::collections::BTreeSet<&str> = names
        .iter()
        .filter(|n| n.ends_with("-rate.png"))
        .map(|n| &n[..3])
        .collect();
    let exported = names.iter().filter(|n| n.ends_with("-series.csv")).count();
    assert_eq!(
        (
            plotted.len(),
            plotted.iter().next().copied(),
            plotted.iter().last().copied()
        ),
        (32, Some("s00"), Some("s31")),
        "expected the first 32 streams plotted; got {plotted:?}"
    );
    assert_eq!(exported, 40, "expected every stream's CSV export; got {exported}");
}
