//! Patterns checked in the pcap a run writes: streams that cycle through templates, and
//! frame sizes that follow a list or a ramp.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use gapless_core::packet::signature::Signature;
use gapless_core::ProfileSpec;
use gapless_engine::{ProfileSource, Run, RunSpec, TxTarget};

/// One frame of the pcap: its timestamp, bytes, and signature.
struct Frame {
    ts: u64,
    data: Vec<u8>,
    sig: Option<Signature>,
}

fn source(toml: &str) -> ProfileSource {
    ProfileSource {
        spec: ProfileSpec::from_toml(toml, "test").unwrap_or_else(|e| panic!("{e}")),
        dir: ".".into(),
        label: "test".into(),
    }
}

/// Runs `toml` to a pcap and reads it back.
fn run_to_pcap(toml: &str, name: &str) -> Vec<Frame> {
    let path: PathBuf = std::env::temp_dir().join(format!("gapless-patterns-{name}-{}.pcap", std::process::id()));
    let r = Run::start(RunSpec::new(source(toml), TxTarget::Pcap(path.clone())))
        .and_then(|h| h.wait())
        .unwrap_or_else(|e| panic!("the run failed: {e}"));
    assert!(r.failure().is_none(), "expected no failure, got {:?}", r.failure());
    let mut out = Vec::new();
    gapless_io::files::capture::read_pcap(&path, &AtomicBool::new(false), &mut |ts, d, _| {
        let sig = match SlicedPacket::from_ethernet(d).ok().and_then(|p| p.transport) {
            Some(TransportSlice::Udp(u)) => Signature::from_payload_end(u.payload()),
            Some(TransportSlice::Tcp(t)) => Signature::from_payload_end(t.payload()),
            _ => None,
        };
        out.push(Frame {
            ts,
            data: d.to_vec(),
            sig,
        });
    })
    .expect("the pcap reads back");
    let _ = std::fs::remove_file(&path);
    out
}

/// Whether the frame's L4 checksum is right (UDP or TCP over IPv4).
fn l4_checksum_ok(d: &[u8]) -> bool {
    let p = SlicedPacket::from_ethernet(d).expect("an Ethernet frame");
    let Some(NetSlice::Ipv4(ip)) = p.net else { return false };
    let h = ip.header().to_header();
    match p.transport {
        Some(TransportSlice::Udp(u)) => u.to_header().calc_checksum_ipv4(&h, u.payload()).ok() == Some(u.checksum()),
        Some(TransportSlice::Tcp(t)) => t.to_header().calc_checksum_ipv4(&h, t.payload()).ok() == Some(t.checksum()),
        _ => false,
    }
}

fn proto(d: &[u8]) -> &'static str {
    match SlicedPacket::from_ethernet(d).ok().and_then(|p| p.transport) {
        Some(TransportSlice::Udp(_)) => "udp",
        Some(TransportSlice::Tcp(_)) => "tcp",
        _ => "other",
    }
}

const CYCLE: &str = r#"
[[stream]]
name = "mix"
id = 7
variant_order = "sequence"
[stream.timing]
rate_pps = 1e6
count = 40
[[stream.variant]]
name = "A"
size = 100
repeat = 3
[stream.variant.template]
dst_port = 1000
[[stream.variant.field]]
field = "src_port"
op = "inc"
from = 2000
to = 2002
[[stream.variant]]
name = "B"
size = 200
[stream.variant.template]
l4 = "tcp"
tcp_flags = "PA"
"#;

#[test]
fn a_sequence_of_variants_leaves_in_its_exact_order_as_one_stream() {
    let frames = run_to_pcap(CYCLE, "cycle");
    assert_eq!(frames.len(), 40, "expected 40 frames, got {}", frames.len());
    for (k, f) in frames.iter().enumerate() {
        let (want_proto, want_len) = if k % 4 == 3 { ("tcp", 196) } else { ("udp", 96) };
        assert_eq!(
            (proto(&f.data), f.data.len()),
            (want_proto, want_len),
            "frame {k}: expected {want_proto} of {want_len} B"
        );
        let sig = f.sig.as_ref().unwrap_or_else(|| panic!("frame {k} has no signature"));
        assert_eq!(
            (sig.stream, sig.seq),
            (7, k as u32),
            "frame {k}: one stream id, one sequence"
        );
        assert!(l4_checksum_ok(&f.data), "frame {k}: wrong L4 checksum");
    }
    // Variant A's own field op advances only on A's frames: 2000, 2001, 2002, 2000, ...
    let ports: Vec<u16> = frames
        .iter()
        .filter(|f| proto(&f.data) == "udp")
        .take(5)
        .map(|f| u16::from_be_bytes([f.data[34], f.data[35]]))
        .collect();
    assert_eq!(ports, [2000, 2001, 2002, 2000, 2001]);
}

#[test]
fn random_variants_keep_their_weights_and_the_rate() {
    let toml = r#"
[[stream]]
variant_order = "random"
[stream.timing]
rate_pps = 1e6
count = 20000
[[stream.variant]]
size = 64
weight = 1
[[stream.variant]]
size = 1518
weight = 3
"#;
    let frames = run_to_pcap(toml, "weights");
    let n = frames.len() as f64;
    let big = frames.iter().filter(|f| f.data.len() == 1514).count() as f64;
    // Binomial(20000, 0.75): 3.29 standard deviations is the two-sided α = 0.001 bound.
    let sd = (n * 0.75 * 0.25).sqrt();
    assert!(
        (big - 0.75 * n).abs() < 3.29 * sd,
        "expected {:.0} ± {:.0} large frames, got {big}",
        0.75 * n,
        3.29 * sd
    );
    let span = (frames[frames.len() - 1].ts - frames[0].ts) as f64;
    let want = (n - 1.0) * 1e3;
    assert!(
        (span - want).abs() <= 1.0,
        "a pps rate: expected {want} ns end to end, got {span}"
    );
}

#[test]
fn sizes_follow_a_ramp_and_a_list_exactly() {
    let toml = "[[stream]]\nsize = { ramp = [64, 1518] }\n[stream.timing]\nrate_pps = 1e6\ncount = 2910\n";
    let got: Vec<usize> = run_to_pcap(toml, "ramp").iter().map(|f| f.data.len() + 4).collect();
    let want: Vec<usize> = (64..=1518).chain(64..=1518).collect();
    assert_eq!(got, want, "expected 64..=1518 twice");
    let toml = "[[stream]]\nsize = { ramp = [1518, 64], step = 500 }\n[stream.timing]\nrate_pps = 1e6\ncount = 5\n";
    let got: Vec<usize> = run_to_pcap(toml, "down").iter().map(|f| f.data.len() + 4).collect();
    assert_eq!(got, [1518, 1018, 518, 1518, 1018]);
    let toml = "[[stream]]\nsize = { list = [64, 1518, 128] }\n[stream.timing]\nrate_pps = 1e6\ncount = 7\n";
    let got: Vec<usize> = run_to_pcap(toml, "list").iter().map(|f| f.data.len() + 4).collect();
    assert_eq!(got, [64, 1518, 128, 64, 1518, 128, 64]);
}

/// Departures per 100 ms bin of the pcap against `rate · ∫ factor` over each bin.
fn follows_curve(name: &str, vary: &str, seconds: f64, integral: impl Fn(f64) -> f64) {
    let toml = format!("[[stream]]\n[stream.timing]\nrate_pps = 100000\nduration_s = {seconds}\nvary = {vary}\n");
    let frames = run_to_pcap(&toml, name);
    let t0 = frames[0].ts;
    let bins = (seconds * 10.0).round() as usize;
    let mut counts = vec![0u64; bins];
    for f in &frames {
        let b = ((f.ts - t0) / 100_000_000) as usize;
        counts[b.min(bins - 1)] += 1;
    }
    for (b, &got) in counts.iter().enumerate() {
        let (a, z) = (b as f64 * 0.1, (b + 1) as f64 * 0.1);
        let want = 100_000.0 * (integral(z) - integral(a));
        assert!(
            (got as f64 - want).abs() <= 0.01 * want,
            "{name}: bin {b} ({a:.1}-{z:.1} s): expected {want:.0} departures ± 1 %, got {got}"
        );
    }
}

#[test]
fn cbr_follows_a_ramp_steps_and_a_sine() {
    // Ramp 0.1 -> 1 over 2 s, then held: Λ(t) = 0.1 t + 0.225 t² up to 2 s.
    follows_curve(
        "ramp",
        "{ kind = \"ramp\", from = 0.1, to = 1.0, over_s = 2 }",
        3.0,
        |t| {
            let r = t.min(2.0);
            0.1 * r + 0.225 * r * r + (t - r)
        },
    );
    follows_curve(
        "steps",
        "{ kind = \"steps\", steps = [[0, 0.2], [0.5, 1.0], [1.2, 0.5]] }",
        2.0,
        |t| 0.2 * t.min(0.5) + (t.clamp(0.5, 1.2) - 0.5) + 0.5 * (t.max(1.2) - 1.2),
    );
    let w = 2.0 * std::f64::consts::PI;
    follows_curve(
        "sine",
        "{ kind = \"sine\", amplitude = 0.8, period_s = 1 }",
        2.0,
        move |t| t + 0.8 / w * (1.0 - (w * t).cos()),
    );
}

/// A capture with irregular gaps and sizes, written by pcap-file (not by gapless): ns pcap,
/// or µs pcapng. Returns (relative ns, bytes) of each frame as written.
fn irregular_capture(path: &std::path::Path, pcapng: bool) -> Vec<(u64, Vec<u8>)> {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
    use pcap_file::pcapng::PcapNgWriter;
    use std::time::Duration;
    let mut frames = Vec::new();
    let mut t = 1_700_000_000_000_000_000u64;
    for i in 0..500u64 {
        let gap = [1_234u64, 77_777, 5_003, 250_001, 9][(i * 7 % 5) as usize] * if pcapng { 1000 } else { 1 };
        t += gap;
        let len = 60 + (i * 37 % 1400) as usize;
        let data: Vec<u8> = (0..len).map(|j| (i as usize * 31 + j) as u8).collect();
        frames.push((t, data));
    }
    let f = std::fs::File::create(path).unwrap();
    if pcapng {
        let mut w = PcapNgWriter::new(f).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: pcap_file::DataLink::ETHERNET,
            snaplen: 0,
            options: vec![],
        })
        .unwrap();
        for (ts, d) in &frames {
            w.write_pcapng_block(EnhancedPacketBlock {
                interface_id: 0,
                timestamp: Duration::from_nanos(*ts),
                original_len: d.len() as u32,
                data: d.as_slice().into(),
                options: vec![],
            })
            .unwrap();
        }
    } else {
        let header = PcapHeader {
            ts_resolution: pcap_file::pcap::PcapTsResolution::NanoSecond,
            ..Default::default()
        };
        let mut w = PcapWriter::with_header(f, header).unwrap();
        for (ts, d) in &frames {
            w.write_packet(&PcapPacket::new(Duration::from_nanos(*ts), d.len() as u32, d).unwrap())
                .unwrap();
        }
    }
    let t0 = frames[0].0;
    frames.into_iter().map(|(t, d)| (t - t0, d)).collect()
}

fn replay_profile(dir: &std::path::Path, file: &str, replay: &str, timing: &str) -> String {
    let p = dir.join("replay.toml");
    std::fs::write(
        &p,
        format!("[[stream]]\n[stream.replay]\nfile = \"{file}\"\n{replay}\n[stream.timing]\n{timing}\n"),
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

fn run_file_to_pcap(profile: &str, name: &str) -> Vec<Frame> {
    let src = ProfileSource::from_file(std::path::Path::new(profile)).unwrap_or_else(|e| panic!("{e}"));
    let path = std::env::temp_dir().join(format!("gapless-replay-{name}-{}.pcap", std::process::id()));
    let r = Run::start(RunSpec::new(src, TxTarget::Pcap(path.clone())))
        .and_then(|h| h.wait())
        .unwrap_or_else(|e| panic!("the replay failed: {e}"));
    assert!(r.failure().is_none(), "expected no failure, got {:?}", r.failure());
    let mut out = Vec::new();
    gapless_io::files::capture::read_pcap(&path, &AtomicBool::new(false), &mut |ts, d, _| {
        out.push(Frame {
            ts,
            data: d.to_vec(),
            sig: None,
        })
    })
    .expect("the pcap reads back");
    let _ = std::fs::remove_file(&path);
    out
}

#[test]
fn a_replay_keeps_the_files_gaps_to_the_nanosecond_and_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for (pcapng, file) in [(false, "ns.pcap"), (true, "us.pcapng")] {
        let want = irregular_capture(&dir.path().join(file), pcapng);
        let got = run_file_to_pcap(&replay_profile(dir.path(), file, "", ""), file);
        assert_eq!(got.len(), want.len(), "{file}: expected every frame");
        let t0 = got[0].ts;
        for (k, (g, (wt, wd))) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.ts - t0,
                *wt,
                "{file}: frame {k}'s time, expected {wt} ns after the first"
            );
            assert!(g.data == *wd, "{file}: frame {k}'s bytes differ");
        }
    }
}

#[test]
fn speed_and_loops_are_exact_and_a_rate_replaces_the_timing() {
    let dir = tempfile::tempdir().unwrap();
    let want = irregular_capture(&dir.path().join("c.pcap"), false);
    let got = run_file_to_pcap(
        &replay_profile(dir.path(), "c.pcap", "speed = 2\nloops = 3", ""),
        "loops",
    );
    let n = want.len();
    assert_eq!(
        got.len(),
        3 * n,
        "3 loops: expected {} frames, got {}",
        3 * n,
        got.len()
    );
    let span = want[n - 1].0 as f64;
    let period = span + span / (n - 1) as f64;
    let t0 = got[0].ts;
    for (k, g) in got.iter().enumerate() {
        let (lp, i) = (k / n, k % n);
        let expect = ((want[i].0 as f64 + lp as f64 * period) / 2.0) as u64;
        assert_eq!(
            g.ts - t0,
            expect,
            "frame {k} (loop {lp}, frame {i}): expected {expect} ns"
        );
        assert!(g.data == want[i].1, "frame {k}: bytes differ");
    }
    let got = run_file_to_pcap(
        &replay_profile(dir.path(), "c.pcap", "loops = 2", "rate_pps = 1e6"),
        "rate",
    );
    assert_eq!(got.len(), 2 * n);
    for w in got.windows(2) {
        assert_eq!(w[1].ts - w[0].ts, 1000, "a fixed rate of 1 Mpps: expected 1000 ns gaps");
    }
}

#[test]
fn bad_captures_are_refused_with_the_readers_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = |file: &str, replay: &str| {
        let p = replay_profile(dir.path(), file, replay, "");
        match ProfileSource::from_file(std::path::Path::new(&p)).and_then(|s| s.compile(None)) {
            Ok(_) => panic!("{file}: expected an error"),
            Err(e) => e.to_string(),
        }
    };
    std::fs::write(dir.path().join("junk.pcap"), b"\x01\x02\x03\x04 not a capture").unwrap();
    let e = err("junk.pcap", "");
    assert!(
        e.contains("stream[0].replay.file") && e.contains("unknown file type"),
        "{e}"
    );
    let e = err("missing.pcap", "");
    assert!(e.contains("stream[0].replay.file") && e.contains("cannot open"), "{e}");
    irregular_capture(&dir.path().join("ok.pcap"), false);
    let whole = std::fs::read(dir.path().join("ok.pcap")).unwrap();
    std::fs::write(dir.path().join("cut.pcap"), &whole[..whole.len() - 100]).unwrap();
    let e = err("cut.pcap", "");
    assert!(e.contains("breaks off after 499 frames"), "{e}");
    let e = err("ok.pcap", "speed = 0");
    assert!(e.starts_with("stream[0].replay.speed: speed 0 is not above 0"), "{e}");
}

#[test]
fn field_ops_rewrite_replayed_frames_and_fix_their_checksums() {
    // A capture with valid checksums (the sample in examples/ was taken on a veth with
    // checksum offload, so its UDP checksums are partial): UDP, TCP and ICMP frames, and an
    // ARP-like frame that is not IP.
    let dir = tempfile::tempdir().unwrap();
    let made = run_to_pcap(
        "[[stream]]\n[stream.timing]\nrate_pps = 1e5\ncount = 60\n[[stream.variant]]\nsize = 100\nrepeat = 2\n\
         [[stream.variant]]\nsize = 100\n[stream.variant.template]\nl4 = \"tcp\"\n[[stream.variant]]\nsize = 100\n[stream.variant.template]\nl4 = \"icmp\"\n",
        "rwsrc",
    );
    let mut src: Vec<Vec<u8>> = made.into_iter().map(|f| f.data).collect();
    let mut arp = src[0].clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    src.push(arp);
    {
        use pcap_file::pcap::{PcapPacket, PcapWriter};
        let mut w = PcapWriter::new(std::fs::File::create(dir.path().join("s.pcap")).unwrap()).unwrap();
        for (i, d) in src.iter().enumerate() {
            let ts = std::time::Duration::from_micros(10 * i as u64);
            w.write_packet(&PcapPacket::new(ts, d.len() as u32, d).unwrap())
                .unwrap();
        }
    }
    assert!(
        src.iter().filter(|d| proto(d) != "other").all(|d| l4_checksum_ok(d)),
        "the source's checksums are valid"
    );
    let ops = "[[stream.field]]\nfield = \"ip_dst\"\nop = \"list\"\nvalues = [\"10.9.8.7\"]\n\
               [[stream.field]]\nfield = \"dst_port\"\nop = \"inc\"\nfrom = 7000\nto = 7009\n\
               [[stream.field]]\nfield = \"mac_src\"\nop = \"list\"\nvalues = [\"02:00:00:00:00:99\"]\n";
    let p = dir.path().join("rw.toml");
    std::fs::write(
        &p,
        format!("[[stream]]\n{ops}[stream.replay]\nfile = \"s.pcap\"\n[stream.timing]\n"),
    )
    .unwrap();
    let got = run_file_to_pcap(p.to_str().unwrap(), "rewrite");
    assert_eq!(got.len(), src.len());
    let (mut udp, mut port) = (0, 7000u16);
    for (k, (g, s)) in got.iter().zip(&src).enumerate() {
        assert_eq!(g.data.len(), s.len(), "frame {k}: the length is kept");
        match SlicedPacket::from_ethernet(&g.data).ok().and_then(|p| p.net) {
            Some(NetSlice::Ipv4(ip)) => {
                assert_eq!(ip.header().destination(), [10, 9, 8, 7], "frame {k}: ip_dst rewritten");
                assert_eq!(&g.data[6..12], &[2, 0, 0, 0, 0, 0x99], "frame {k}: mac_src rewritten");
                let h = ip.header().to_header();
                assert_eq!(
                    h.calc_header_checksum(),
                    h.header_checksum,
                    "frame {k}: IPv4 header checksum"
                );
                if matches!(proto(&g.data), "udp" | "tcp") {
                    udp += u32::from(proto(&g.data) == "udp");
                    assert!(
                        l4_checksum_ok(&g.data),
                        "frame {k}: wrong L4 checksum after the rewrite"
                    );
                    let dport = u16::from_be_bytes([g.data[36], g.data[37]]);
                    assert_eq!(dport, port, "frame {k}: dst_port steps through the frames with ports");
                    port = if port == 7009 { 7000 } else { port + 1 };
                }
            }
            _ => assert!(g.data == *s, "frame {k}: a non-IP frame (ARP) leaves as captured"),
        }
    }
    assert_eq!(udp, 30, "expected the 30 UDP frames rewritten");
}

#[test]
fn a_signed_replay_numbers_its_udp_and_tcp_frames_as_one_stream() {
    let dir = tempfile::tempdir().unwrap();
    let made = run_to_pcap(
        "[[stream]]\n[stream.timing]\nrate_pps = 1e5\ncount = 30\n[[stream.variant]]\nsize = 100\n\
         [[stream.variant]]\nsize = 100\n[stream.variant.template]\nl4 = \"tcp\"\n[[stream.variant]]\nsize = 100\n[stream.variant.template]\nl4 = \"icmp\"\n",
        "signsrc",
    );
    {
        use pcap_file::pcap::{PcapPacket, PcapWriter};
        let mut w = PcapWriter::new(std::fs::File::create(dir.path().join("s.pcap")).unwrap()).unwrap();
        for (i, f) in made.iter().enumerate() {
            let ts = std::time::Duration::from_micros(10 * i as u64);
            w.write_packet(&PcapPacket::new(ts, f.data.len() as u32, &f.data).unwrap())
                .unwrap();
        }
    }
    let p = dir.path().join("sign.toml");
    std::fs::write(
        &p,
        "[[stream]]\nid = 77\n[stream.replay]\nfile = \"s.pcap\"\nsign = true\nloops = 2\n[stream.timing]\n",
    )
    .unwrap();
    let got = run_file_to_pcap(p.to_str().unwrap(), "sign");
    assert_eq!(got.len(), 60);
    let mut seq = 0;
    for (k, g) in got.iter().enumerate() {
        let sig = match SlicedPacket::from_ethernet(&g.data).ok().and_then(|p| p.transport) {
            Some(TransportSlice::Udp(u)) => Signature::from_payload_end(u.payload()),
            Some(TransportSlice::Tcp(t)) => Signature::from_payload_end(t.payload()),
            _ => None,
        };
        if proto(&g.data) == "other" {
            assert!(g.data == made[k % 30].data, "frame {k}: ICMP leaves as captured");
            continue;
        }
        let sig = sig.unwrap_or_else(|| panic!("frame {k}: no signature"));
        assert_eq!(
            (sig.stream, sig.seq),
            (77, seq),
            "frame {k}: expected stream 77, seq {seq}"
        );
        assert!(l4_checksum_ok(&g.data), "frame {k}: wrong checksum after signing");
        seq += 1;
    }
    assert_eq!(seq, 40, "expected the 40 UDP and TCP frames of 2 loops signed");
}
