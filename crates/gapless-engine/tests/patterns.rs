//! Patterns checked in the pcap a run writes: streams that cycle through templates, and
//! frame sizes that follow a list or a ramp.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use gapless_core::signature::Signature;
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
    gapless_io::capture::read_pcap(&path, &AtomicBool::new(false), &mut |ts, d, _| {
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
