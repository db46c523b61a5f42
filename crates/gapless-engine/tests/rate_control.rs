//! The rate-control methods besides software pacing, as far as this machine runs them:
//! the kernel shaper (tbf, HTB) and filler frames on the veth testbed; the NIC limiter against
//! a sysfs directory of the test's own and its refusal on veth; launch time's refusal
//! without etf or fq; kernel TX timestamps matched to every frame, and the refusal of
//! hardware ones.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use gapless_engine::{
    EngineError, Pacing, ProfileSource, RateControlKind, Run, RunReport, RunSpec, RxSpec, TxStampKind, TxTarget,
};
use gapless_io::testbed::Testbed;

struct Bed(Testbed);
impl Drop for Bed {
    fn drop(&mut self) {
        let _ = self.0.down();
    }
}

fn root() {
    assert!(
        unsafe { libc::geteuid() } == 0,
        "this test needs root (namespaces, raw sockets, qdiscs): run the tests as root, as CI does"
    );
}

fn bed(tag: &str) -> Bed {
    root();
    let b = Bed(Testbed::new(&format!("{tag}{}", std::process::id() % 10_000)).unwrap());
    b.0.up().expect("testbed up");
    b
}

fn profile(dir: &Path, body: &str) -> ProfileSource {
    let p = dir.join("p.toml");
    std::fs::write(&p, body).unwrap();
    ProfileSource::from_file(&p).unwrap_or_else(|e| panic!("{e}"))
}

/// A run from the testbed's sender with `method`, metered at its receiver when `meter`.
fn spec(b: &Testbed, src: ProfileSource, method: RateControlKind, meter: bool) -> RunSpec {
    let mut rx = RxSpec::new(b.rx_if());
    rx.netns = Some(b.rx_ns());
    rx.meter.signed_only = true;
    RunSpec {
        netns: Some(b.tx_ns()),
        rate_control: Some(method),
        rx: meter.then_some(rx),
        ..RunSpec::new(
            src,
            TxTarget::Iface {
                name: b.tx_if(),
                socket: None,
            },
        )
    }
}

fn run(spec: RunSpec) -> Result<RunReport, EngineError> {
    Run::start(spec).and_then(|h| h.wait())
}

/// The root qdisc of `iface` in `ns`, as `tc` names it.
fn root_qdisc(ns: &str, iface: &str) -> String {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "tc", "-j", "qdisc", "show", "dev", iface, "root"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    v[0]["kind"].as_str().unwrap_or("").to_string()
}

#[test]
fn the_kernel_shaper_holds_the_sink_at_its_rate_and_is_removed_after_the_run() {
    let b = bed("sh");
    let dir = tempfile::tempdir().unwrap();
    for qdisc in ["tbf", "htb"] {
        // 20 kpps of 128 B frames: the shaper's rate is 20 000 × 124 B × 8 = 19.84 Mbit/s.
        let src = profile(
            dir.path(),
            &format!("[output.shaper]\nqdisc = \"{qdisc}\"\n[[stream]]\nsize = 128\n[stream.timing]\nrate_pps = 20000\ncount = 20000\n"),
        );
        let r = run(spec(&b.0, src, RateControlKind::Shaper, true)).unwrap_or_else(|e| panic!("{qdisc}: {e}"));
        let rc = &r.result.rate_control_setup;
        assert_eq!(rc.method, "shaper");
        assert_eq!(
            rc.params["rate_bps"], 19_840_000,
            "{qdisc}: expected the profile's rate, got {}",
            rc.params
        );
        assert!(
            rc.confirmed
                .iter()
                .any(|c| c.contains(&format!("installed on {}: {qdisc}", b.0.tx_if()))),
            "{qdisc}: expected tc to confirm the install, got {:?}",
            rc.confirmed
        );
        assert!(rc.confirmed.iter().any(|c| c.contains("removed")), "{:?}", rc.confirmed);
        assert_eq!(
            root_qdisc(&b.0.tx_ns(), &b.0.tx_if()),
            "noqueue",
            "{qdisc}: the shaper must be gone after the run"
        );
        let rx = r.result.rx.as_ref().expect("the meter's report");
        let s = &rx.streams[0];
        assert_eq!(
            s.rx_frames, 20_000,
            "{qdisc}: expected every frame at the sink, got {}",
            s.rx_frames
        );
        let ia = s.interarrival.as_ref().expect("inter-arrival summary");
        sink_at_the_rate_or_the_stall_said(qdisc, &r, ia);
        assert!(
            ia.burst_fraction.is_some(),
            "{qdisc}: the burst fraction must be reported"
        );
        assert!(!s.rate_jitter.is_empty(), "{qdisc}: the rate jitter must be reported");
        println!(
            "{qdisc}: sink {:.1} pps, |gap err| p50 {:?} p99 {:?} ns, burst fraction {:?}",
            ia.rate_pps, ia.abs_err_p50_ns, ia.abs_err_p99_ns, ia.burst_fraction
        );
    }
}

/// The sink within 2 % of 20 000 pps, or, on a machine whose host stalled the run, the
/// run's own verdict saying so: its schedule not held or its loops stalled for at least half
/// the time the sink lost, and the sink's longest gap a quarter of it at least (a shaper
/// meters a stall's catch-up burst out at its rate, so the time lost is never made up).
fn sink_at_the_rate_or_the_stall_said(
    qdisc: &str,
    r: &gapless_engine::RunReport,
    ia: &gapless_core::meter::report::InterArrivalSummary,
) {
    let err = (ia.rate_pps - 20_000.0).abs() / 20_000.0;
    if err < 0.02 {
        return;
    }
    let lost_ns = (19_999.0 * 1e9 / ia.rate_pps - 19_999.0 * 1e9 / 20_000.0).abs() as u64;
    let v = &r.result.verdict;
    let stalled: u64 = v.loops.iter().map(|l| l.stall_ns).sum();
    assert!(
        v.held == Some(false) || stalled >= lost_ns / 2,
        "{qdisc}: expected the sink within 2 % of 20 000 pps, got {:.1} pps ({:.2} %, {lost_ns} ns lost), and the verdict does not say why: schedule {}, loops stalled {stalled} ns",
        ia.rate_pps,
        err * 100.0,
        v.schedule
    );
    assert!(
        ia.max_ns >= lost_ns / 4,
        "{qdisc}: the verdict says the run stalled ({}, {stalled} ns); expected the sink's longest gap ≥ {} ns, got {} ns",
        v.schedule,
        lost_ns / 4,
        ia.max_ns
    );
    println!(
        "{qdisc}: sink {:.1} pps after a stall the verdict reports ({})",
        ia.rate_pps,
        v.text()
    );
}

#[test]
fn a_stopped_shaper_run_still_removes_its_qdisc() {
    let b = bed("ss");
    let dir = tempfile::tempdir().unwrap();
    let src = profile(dir.path(), "[[stream]]\nsize = 128\n[stream.timing]\nrate_pps = 5000\n");
    let h = Run::start(spec(&b.0, src, RateControlKind::Shaper, false)).unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        root_qdisc(&b.0.tx_ns(), &b.0.tx_if()),
        "tbf",
        "expected tbf installed during the run"
    );
    h.stop();
    let r = h.wait().unwrap();
    assert!(r.result.interrupted);
    assert_eq!(
        root_qdisc(&b.0.tx_ns(), &b.0.tx_if()),
        "noqueue",
        "expected the shaper removed after a stop"
    );
}

#[test]
fn the_nic_limiter_is_refused_on_veth_and_set_and_restored_on_a_sysfs_of_its_own() {
    let b = bed("nl");
    let dir = tempfile::tempdir().unwrap();
    let body = "[[stream]]\nsize = 128\n[stream.timing]\nrate_pps = 10000\ncount = 2000\n";
    let e = run(spec(&b.0, profile(dir.path(), body), RateControlKind::Nic, false))
        .expect_err("veth has no hardware limiter: expected a refusal");
    let m = e.to_string();
    assert!(
        m.contains("veth") && m.contains("software") && m.contains("tx_maxrate"),
        "expected the refusal to name veth, tx_maxrate and the fix, got: {m}"
    );
    // The same run against a sysfs of the test's own: queue 0 and 1 of the interface.
    let sys = dir.path().join("sys");
    for (q, v) in [(0, 0), (1, 300)] {
        let d = sys.join(b.0.tx_if()).join("queues").join(format!("tx-{q}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("tx_maxrate"), format!("{v}\n")).unwrap();
    }
    let mut s = spec(&b.0, profile(dir.path(), body), RateControlKind::Nic, false);
    s.sysfs_net = Some(sys.clone());
    let r = run(s).unwrap_or_else(|e| panic!("{e}"));
    let rc = &r.result.rate_control_setup;
    // 10 000 × 128 B × 8 = 10.24 Mbit/s over two queues: 6 Mbit/s each (rounded up).
    assert_eq!(rc.params["tx_maxrate_mbps"], 6, "got {}", rc.params);
    assert!(
        rc.confirmed
            .iter()
            .any(|c| c == "tx-1: tx_maxrate 6 Mbit/s (was 300; read back 6)"),
        "{:?}",
        rc.confirmed
    );
    assert!(r.result.rate_control.starts_with("nic:"), "{}", r.result.rate_control);
    assert!(
        r.result.warnings.iter().any(|w| w.contains("Mind the Gap")),
        "{:?}",
        r.result.warnings
    );
    for (q, v) in [(0, "0"), (1, "300")] {
        let p = sys.join(b.0.tx_if()).join(format!("queues/tx-{q}/tx_maxrate"));
        assert_eq!(
            std::fs::read_to_string(&p).unwrap().trim(),
            v,
            "tx-{q} must be restored after the run"
        );
    }
    assert_eq!(r.result.sent_frames, 2000);
    // A stopped run (Ctrl-C raises the same flag) restores the queues too.
    let src = profile(dir.path(), "[[stream]]\nsize = 128\n[stream.timing]\nrate_pps = 1000\n");
    let mut s = spec(&b.0, src, RateControlKind::Nic, false);
    s.sysfs_net = Some(sys.clone());
    let h = Run::start(s).unwrap_or_else(|e| panic!("{e}"));
    std::thread::sleep(Duration::from_millis(300));
    let during = std::fs::read_to_string(sys.join(b.0.tx_if()).join("queues/tx-1/tx_maxrate")).unwrap();
    assert_eq!(during.trim(), "1", "expected 1 Mbit/s set during the run");
    h.stop();
    assert!(h.wait().unwrap().result.interrupted);
    for (q, v) in [(0, "0"), (1, "300")] {
        let p = sys.join(b.0.tx_if()).join(format!("queues/tx-{q}/tx_maxrate"));
        assert_eq!(
            std::fs::read_to_string(&p).unwrap().trim(),
            v,
            "tx-{q} must be restored after a stop"
        );
    }
}

#[test]
fn launch_time_is_refused_without_etf_or_fq() {
    let b = bed("lt");
    let dir = tempfile::tempdir().unwrap();
    let src = profile(dir.path(), "[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 10\n");
    let m = run(spec(&b.0, src, RateControlKind::LaunchTime, false))
        .expect_err("no etf or fq on the testbed: expected a refusal")
        .to_string();
    assert!(
        m.contains("etf") && m.contains("fq") && m.contains("noqueue") && m.contains("software"),
        "expected the refusal to name the qdisc found and the fix, got: {m}"
    );
}

#[test]
fn kernel_tx_timestamps_match_every_frame_and_hardware_ones_are_refused_on_veth() {
    let b = bed("ts");
    let dir = tempfile::tempdir().unwrap();
    let body = "[[stream]]\nsize = 128\n[stream.timing]\nrate_pps = 50000\ncount = 20000\n";
    let mut s = spec(&b.0, profile(dir.path(), body), RateControlKind::Software, false);
    s.tx_stamps = Some(TxStampKind::Kernel);
    s.pacing = Pacing::On;
    let r = run(s).unwrap_or_else(|e| panic!("{e}"));
    let t = r.result.tx_timestamps.as_ref().expect("a TX stamp report");
    assert_eq!(t.frames_sent, 20_000, "{t:?}");
    assert_eq!(
        (t.matched, t.missing, t.unmatched),
        (20_000, 0, 0),
        "expected every frame stamped: {t:?}"
    );
    let (d, p) = (&t.departure_error, &t.send_path);
    assert!(
        p.p50_ns > 0 && p.p50_ns < 1_000_000,
        "the send path (stamp - clock before the send) p50 expected in (0, 1 ms), got {p:?}"
    );
    assert!(
        d.p50_ns >= p.min_ns,
        "the departure error includes the send path: {d:?} vs {p:?}"
    );
    // The departure error is the engine's lateness plus the send path, frame by frame.
    let lat = r.result.lateness.p50_ns as i64;
    assert!(
        (d.p50_ns - (lat + p.p50_ns)).abs() < 50_000,
        "departure error p50 {} ns expected near lateness p50 {lat} + send path p50 {} ns",
        d.p50_ns,
        p.p50_ns
    );
    println!("departure error {d:?}\nsend path {p:?}");
    let mut s = spec(&b.0, profile(dir.path(), body), RateControlKind::Software, false);
    s.tx_stamps = Some(TxStampKind::Hardware);
    let m = run(s).expect_err("veth has no hardware TX stamps").to_string();
    assert!(
        m.contains("cannot timestamp transmitted frames in hardware") && m.contains("kernel"),
        "got: {m}"
    );
}

/// Frames of a pcap: (ns, bytes).
fn read_pcap(p: &Path) -> Vec<(u64, Vec<u8>)> {
    let mut r = pcap_file::pcap::PcapReader::new(std::fs::File::open(p).unwrap()).unwrap();
    let mut v = Vec::new();
    while let Some(pk) = r.next_packet() {
        let pk = pk.unwrap();
        v.push((pk.timestamp().as_nanos() as u64, pk.data().to_vec()));
    }
    v
}

#[test]
fn fillers_put_each_payload_frame_on_the_wire_within_a_byte_time_of_its_target() {
    let dir = tempfile::tempdir().unwrap();
    // (link, sizes, rate): every gap is at least a 64 B filler long.
    let cases = [
        (10e9, "size = 64", 7_000_000.0),
        (10e9, "size = { imix = \"simple\" }", 500_000.0),
        (1e9, "size = 64", 700_000.0),
        (1e9, "size = { imix = \"simple\" }", 50_000.0),
    ];
    for (link, size, rate) in cases {
        let body = format!(
            "link_speed_bps = {link}\n[output]\nrate_control = \"filler\"\n[[stream]]\n{size}\n[stream.timing]\nrate_pps = {rate}\ncount = 5000\n"
        );
        let out = dir.path().join("f.pcap");
        let r = run(RunSpec::new(profile(dir.path(), &body), TxTarget::Pcap(out.clone())))
            .unwrap_or_else(|e| panic!("{e}"));
        let frames = read_pcap(&out);
        let payload: Vec<u64> = frames
            .iter()
            .filter(|(_, f)| !gapless_core::packet::filler::is_filler(f))
            .map(|(t, _)| *t)
            .collect();
        let fillers = frames.len() - payload.len();
        assert_eq!(
            payload.len(),
            5000,
            "{link} {size}: expected 5000 payload frames, got {}",
            payload.len()
        );
        assert!(
            fillers >= 4999,
            "{link} {size}: expected a filler in every gap, got {fillers}"
        );
        let byte_ns = 8e9 / link;
        let gap = 1e9 / rate;
        let worst = payload
            .iter()
            .enumerate()
            .map(|(k, &t)| ((t - payload[0]) as f64 - k as f64 * gap).abs())
            .fold(0.0, f64::max);
        // One byte time, plus the pcap's rounding of each stamp to the ns (twice: t and t0).
        assert!(
            worst <= byte_ns + 1.0,
            "{link} {size}: expected every payload frame within {byte_ns} ns (+1 ns of pcap rounding) of its target, worst {worst:.2} ns"
        );
        // The wire is never double-booked: each frame starts after the previous one ends.
        for w in frames.windows(2) {
            let wire = (w[0].1.len() as f64 + 24.0) * byte_ns;
            assert!(
                (w[1].0 - w[0].0) as f64 >= wire - 1.0,
                "{link} {size}: frames overlap on the wire"
            );
        }
        assert_eq!(r.result.rate_control_setup.params["fillers"]["frames"], fillers as u64);
    }
}

/// Three namespaces: the sender's, a bridge's, and the receiver's.
struct Bridged(String);
impl Bridged {
    fn up(tag: &str) -> Bridged {
        let b = Bridged(format!("{tag}{}", std::process::id() % 10_000));
        let n = &b.0;
        let sh = |c: String| {
            let o = Command::new("sh").arg("-c").arg(&c).output().unwrap();
            assert!(
                o.status.success(),
                "`{c}` failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        for ns in ["t", "b", "r"] {
            sh(format!("ip netns add {n}{ns}"));
        }
        sh(format!(
            "ip link add {n}t0 netns {n}t type veth peer name {n}t1 netns {n}b"
        ));
        sh(format!(
            "ip link add {n}r0 netns {n}r type veth peer name {n}r1 netns {n}b"
        ));
        sh(format!("ip -n {n}b link add br0 type bridge && ip -n {n}b link set {n}t1 master br0 && ip -n {n}b link set {n}r1 master br0"));
        for (ns, ifs) in [("t", vec!["t0"]), ("b", vec!["t1", "r1"]), ("r", vec!["r0"])] {
            for i in ifs {
                sh(format!("ip -n {n}{ns} link set {n}{i} up"));
            }
        }
        sh(format!("ip -n {n}b link set br0 up"));
        // The kernel enables a bridge port when it sees the carrier (linkwatch, up to 1 s).
        let t0 = std::time::Instant::now();
        loop {
            let o = Command::new("bridge")
                .args(["-n", &format!("{n}b"), "link", "show"])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            if text.matches("state forwarding").count() == 2 {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "expected both bridge ports forwarding within 10 s, got: {text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        b
    }
}
impl Drop for Bridged {
    fn drop(&mut self) {
        for ns in ["t", "b", "r"] {
            let _ = Command::new("ip")
                .args(["netns", "del", &format!("{}{ns}", self.0)])
                .status();
        }
    }
}

#[test]
fn a_bridge_drops_the_fillers_and_forwards_every_payload_frame() {
    root();
    let br = Bridged::up("fb");
    let n = &br.0;
    let dir = tempfile::tempdir().unwrap();
    let body = "link_speed_bps = 1e9\n[output]\nrate_control = \"filler\"\n[[stream]]\nsize = 128\n[stream.timing]\nrate_pps = 20000\ncount = 5000\n";
    let mut rx = RxSpec::new(format!("{n}r0"));
    rx.netns = Some(format!("{n}r"));
    let s = RunSpec {
        netns: Some(format!("{n}t")),
        rx: Some(rx),
        ..RunSpec::new(
            profile(dir.path(), body),
            TxTarget::Iface {
                name: format!("{n}t0"),
                socket: None,
            },
        )
    };
    let r = run(s).unwrap_or_else(|e| panic!("{e}"));
    let rc = &r.result.rate_control_setup;
    assert_eq!(rc.params["kind"], "link-local", "veth refuses SO_NOFCS: {rc:?}");
    assert!(
        rc.confirmed.iter().any(|c| c.contains("SO_NOFCS")),
        "the refusal must be recorded: {:?}",
        rc.confirmed
    );
    let sent_fillers = rc.params["fillers"]["frames"].as_u64().unwrap();
    assert!(
        sent_fillers >= 4999,
        "expected fillers in every gap, got {sent_fillers}"
    );
    assert_eq!(r.result.send_errors, 0);
    let rx = r.result.rx.as_ref().unwrap();
    assert_eq!(
        rx.fillers, 0,
        "expected the bridge to drop every filler, {} reached the sink",
        rx.fillers
    );
    let s = rx.streams.iter().find(|s| s.id.is_some()).unwrap_or_else(|| {
        let got: Vec<_> = rx.streams.iter().map(|s| (&s.name, s.rx_frames)).collect();
        panic!(
            "expected the stream at the sink, got {} frames: {got:?}, foreign {:?}",
            rx.capture.frames, rx.foreign
        )
    });
    assert_eq!(
        s.rx_frames, 5000,
        "expected every payload frame at the sink, got {}",
        s.rx_frames
    );
}

#[test]
fn rate_control_errors_name_the_cause_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let body = "[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 10\n";
    let cases: Vec<(RunSpec, &str)> = vec![
        (
            RunSpec {
                rate_control: Some(RateControlKind::Shaper),
                ..RunSpec::new(profile(dir.path(), body), TxTarget::Null)
            },
            "it acts on an interface: give --iface",
        ),
        (
            RunSpec {
                rate_control: Some(RateControlKind::Filler),
                ..RunSpec::new(profile(dir.path(), body), TxTarget::Pcap(dir.path().join("x.pcap")))
            },
            "give link_speed_bps in the profile",
        ),
        (
            RunSpec::new(
                profile(dir.path(), &format!("link_speed_bps = 1e9\n[output]\nrate_control = \"filler\"\nfiller = {{ dst = \"01:80:c2:00:00:01\" }}\n{body}")),
                TxTarget::Pcap(dir.path().join("x.pcap")),
            ),
            "01:80:c2:00:00:03 to 01:80:c2:00:00:0f",
        ),
        (
            RunSpec {
                cores: vec![0, 1],
                ..RunSpec::new(
                    profile(dir.path(), &format!("link_speed_bps = 1e9\n[output]\nrate_control = \"filler\"\n{body}")),
                    TxTarget::Pcap(dir.path().join("x.pcap")),
                )
            },
            "send from one core",
        ),
        (
            RunSpec {
                tx_stamps: Some(TxStampKind::Kernel),
                ..RunSpec::new(profile(dir.path(), body), TxTarget::Null)
            },
            "give --iface",
        ),
    ];
    for (spec, want) in cases {
        let m = run(spec).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(m.contains(want), "expected an error containing {want:?}, got {m:?}");
    }
    let e = ProfileSource::from_file(&{
        let p = dir.path().join("bad.toml");
        std::fs::write(&p, format!("[output]\nrate_control = \"hardware\"\n{body}")).unwrap();
        p
    })
    .expect_err("an unknown method is refused")
    .to_string();
    assert!(
        e.contains("rate_control") && e.contains("shaper"),
        "expected the known methods listed, got {e}"
    );
}

#[test]
fn afxdp_tx_metadata_stamps_match_every_frame_in_copy_mode() {
    let b = bed("xs");
    let dir = tempfile::tempdir().unwrap();
    let body = "[[stream]]\nsize = 128\n[stream.timing]\nrate_pps = 20000\ncount = 5000\n";
    let xdp = |mode| TxTarget::Iface {
        name: b.0.tx_if(),
        socket: Some(gapless_engine::TxSocket::AfXdp { mode, queue: 0 }),
    };
    let mut s = spec(&b.0, profile(dir.path(), body), RateControlKind::Software, false);
    s.target = xdp(gapless_io::xdp::XdpMode::Copy);
    s.tx_stamps = Some(TxStampKind::Kernel);
    let r = run(s).unwrap_or_else(|e| panic!("{e}"));
    let t = r.result.tx_timestamps.as_ref().expect("a TX stamp report");
    assert!(
        t.source.contains("AF_XDP TX metadata") && t.source.contains("copy mode"),
        "{}",
        t.source
    );
    assert_eq!(
        (t.frames_sent, t.matched, t.unmatched),
        (5000, 5000, 0),
        "expected every frame stamped: {t:?}"
    );
    let p = &t.send_path;
    assert!(
        p.p50_ns > 0 && p.p50_ns < 1_000_000,
        "the send path p50 expected in (0, 1 ms), got {p:?}"
    );
    println!(
        "AF_XDP copy mode: departure error {:?}\nsend path {p:?}",
        t.departure_error
    );
    let mut s = spec(&b.0, profile(dir.path(), body), RateControlKind::Software, false);
    s.target = xdp(gapless_io::xdp::XdpMode::Copy);
    s.tx_stamps = Some(TxStampKind::Hardware);
    let m = run(s).expect_err("hardware stamps in copy mode").to_string();
    assert!(
        m.contains("zero-copy") && m.contains("--tx-timestamps kernel"),
        "got: {m}"
    );
}
