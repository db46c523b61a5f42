//! pcap replay on the veth testbed at 100 kpps: the gaps a tcpdump on the receiving end sees
//! match the file's gaps about as well as a CBR stream's match its own. When the run's own
//! verdict says the schedule was not held, the sink must show the stall it reports.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use gapless_engine::{Pacing, ProfileSource, Run, RunSpec, TxTarget};
use gapless_io::testbed::{Testbed, RX_MAC, TX_MAC};

const FRAMES: usize = 20_000;

struct Bed(Testbed);
impl Drop for Bed {
    fn drop(&mut self) {
        let _ = self.0.down();
    }
}

fn mac(s: &str) -> Vec<u8> {
    s.split(':').map(|h| u8::from_str_radix(h, 16).unwrap()).collect()
}

/// 20 000 frames at gaps of 5 and 15 µs in turn (mean 100 kpps), EtherType 0x88b5.
fn capture(path: &Path) -> Vec<u64> {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    let header = PcapHeader {
        ts_resolution: pcap_file::pcap::PcapTsResolution::NanoSecond,
        ..Default::default()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), header).unwrap();
    let mut frame = [mac(RX_MAC), mac(TX_MAC), vec![0x88, 0xb5]].concat();
    frame.resize(128, 0x5a);
    let mut t = 1_000_000_000u64;
    let mut gaps = Vec::new();
    for i in 0..FRAMES {
        let g = if i % 2 == 0 { 5_000 } else { 15_000 };
        if i > 0 {
            t += g;
            gaps.push(g);
        }
        let p = PcapPacket::new(Duration::from_nanos(t), frame.len() as u32, &frame).unwrap();
        w.write_packet(&p).unwrap();
    }
    gaps
}

/// tcpdump on the receiving end, ns stamps, frames matching `filter`.
fn sink(bed: &Testbed, out: &Path, filter: &str) -> Child {
    let c = Command::new("ip")
        .args([
            "netns",
            "exec",
            &bed.rx_ns(),
            "tcpdump",
            "-i",
            &bed.rx_if(),
            "-nn",
            "-U",
        ])
        .args(["--time-stamp-precision=nano", "-w", out.to_str().unwrap(), filter])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tcpdump runs (scripts/setup.sh installs it)");
    std::thread::sleep(Duration::from_millis(1500));
    c
}

fn stop(mut c: Child) {
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let _ = c.wait();
}

fn arrivals(path: &Path) -> Vec<u64> {
    let mut t = Vec::new();
    gapless_io::files::capture::read_pcap(path, &AtomicBool::new(false), &mut |ts, _, _| t.push(ts))
        .expect("the sink's pcap");
    t
}

/// (|error| p50, max) of the sink's gaps against the expected ones, ns.
fn gap_errors(rx: &[u64], want: &[u64]) -> (u64, u64) {
    let mut e: Vec<u64> = rx
        .windows(2)
        .zip(want)
        .map(|(w, g)| (w[1] - w[0]).abs_diff(*g))
        .collect();
    e.sort_unstable();
    (e[e.len() / 2], e[e.len() - 1])
}

/// Runs `profile` paced from the testbed's sender; returns (schedule held?, verdict text).
fn send(bed: &Testbed, profile: &Path) -> (Option<bool>, String) {
    let target = TxTarget::Iface {
        name: bed.tx_if(),
        socket: None,
    };
    let spec = RunSpec {
        netns: Some(bed.tx_ns()),
        pacing: Pacing::On,
        ..RunSpec::new(
            ProfileSource::from_file(profile).unwrap_or_else(|e| panic!("{e}")),
            target,
        )
    };
    let r = Run::start(spec)
        .and_then(|h| h.wait())
        .unwrap_or_else(|e| panic!("the run failed: {e}"));
    assert!(r.failure().is_none(), "expected no failure, got {:?}", r.failure());
    (r.result.verdict.held, r.result.verdict.text())
}

#[test]
fn a_replay_keeps_the_files_gaps_at_the_sink_as_well_as_cbr_keeps_its_own() {
    assert!(
        unsafe { libc::geteuid() } == 0,
        "this test needs root (namespaces, raw sockets): run the tests as root, as CI does"
    );
    let bed = Bed(Testbed::new(&format!("rp{}", std::process::id() % 10_000)).unwrap());
    bed.0.up().expect("testbed up");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gaps.pcap");
    let want = capture(&file);
    let replay = dir.path().join("replay.toml");
    std::fs::write(
        &replay,
        "[[stream]]\n[stream.replay]\nfile = \"gaps.pcap\"\n[stream.timing]\n",
    )
    .unwrap();
    let cbr = dir.path().join("cbr.toml");
    std::fs::write(
        &cbr,
        format!("[[stream]]\nsize = 128\n[stream.timing]\nrate_pps = 100000\ncount = {FRAMES}\n"),
    )
    .unwrap();
    let mut seen = Vec::new();
    for (name, profile, filter, gaps) in [
        ("replay", &replay, "ether proto 0x88b5", want.clone()),
        ("cbr", &cbr, "udp", vec![10_000; FRAMES - 1]),
    ] {
        let out: PathBuf = dir.path().join(format!("{name}-rx.pcap"));
        let t = sink(&bed.0, &out, filter);
        let (held, verdict) = send(&bed.0, profile);
        std::thread::sleep(Duration::from_millis(300));
        stop(t);
        let rx = arrivals(&out);
        assert_eq!(
            rx.len(),
            FRAMES,
            "{name}: expected {FRAMES} frames at the sink, got {}",
            rx.len()
        );
        let (p50, max) = gap_errors(&rx, &gaps);
        println!("{name}: sink |gap error| p50 {p50} ns, max {max} ns; {verdict}");
        if held != Some(true) {
            assert!(max > 5_000, "{name}: the verdict says the schedule was not held, but the sink saw no gap off by more than 5 µs (max {max} ns): {verdict}");
        }
        seen.push((held, p50));
    }
    let ((rh, rp), (ch, cp)) = (seen[0], seen[1]);
    if rh == Some(true) && ch == Some(true) {
        let bound = (2 * cp).max(cp + 1_000);
        assert!(
            rp <= bound,
            "replay |gap error| p50 expected <= {bound} ns (CBR's {cp} ns x 2, or + 1 µs), got {rp} ns"
        );
    }
}
