//! The run API in process: runs started, snapshotted, stopped and waited for; the meter
//! entry points; and each error kind the API returns, without the binary.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use gapless_core::profile::plan::PlanError;
use gapless_core::ProfileSpec;
use gapless_engine::spec::MeterSetup;
use gapless_engine::{
    AnalyzeSpec, CalibrationSpec, EngineError, Pacing, ProfileSource, Run, RunSpec, RxSpec, TxTarget,
};
use gapless_io::testbed::Testbed;
use gapless_io::IoError;

fn source(toml: &str) -> ProfileSource {
    ProfileSource {
        spec: ProfileSpec::from_toml(toml, "test").expect("a valid profile"),
        dir: ".".into(),
        label: "test".into(),
    }
}

const TWO_ENDLESS: &str = "[[stream]]\nname = \"a\"\n[stream.timing]\nrate_pps = 2000\n[[stream]]\nname = \"b\"\n[stream.timing]\nrate_pps = 20000\n";
const TWO_COUNTED: &str = "[[stream]]\nname = \"a\"\n[stream.timing]\nrate_pps = 1e6\ncount = 1000\n[[stream]]\nname = \"b\"\n[stream.timing]\nrate_pps = 1e6\ncount = 3000\n";

fn start_err(spec: RunSpec) -> EngineError {
    match Run::start(spec) {
        Ok(h) => {
            h.stop();
            panic!(
                "expected an error, got a run: {:?}",
                h.wait().map(|r| r.result.sent_frames)
            );
        }
        Err(e) => e,
    }
}

#[test]
fn a_null_run_is_snapshotted_then_stopped_and_its_report_holds_what_the_snapshots_saw() {
    let spec = RunSpec {
        pacing: Pacing::On,
        ..RunSpec::new(source(TWO_ENDLESS), TxTarget::Null)
    };
    let run = Run::start(spec).expect("a null run starts");
    let mut last = 0;
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(150));
        let s = run.snapshot();
        assert_eq!(s.streams.len(), 2, "expected 2 streams in the snapshot");
        assert_eq!(s.streams[0].name, "a");
        assert!(
            s.streams.iter().all(|st| st.rx.is_none()),
            "no meter: no RX figures expected"
        );
        assert_eq!(s.total.tx.sent, s.streams[0].tx.sent + s.streams[1].tx.sent);
        assert!(
            s.total.tx.sent > last,
            "expected the count to grow, got {} after {last}",
            s.total.tx.sent
        );
        last = s.total.tx.sent;
        assert!(!run.is_finished(), "an endless run must not finish by itself");
    }
    run.stop();
    let r = run.wait().expect("the run reports");
    assert!(r.interrupted(), "a stopped run is marked interrupted");
    assert!(r.failure().is_none(), "expected no failure, got {:?}", r.failure());
    let sent: Vec<u64> = r.result.streams.iter().map(|s| s.sent_frames).collect();
    assert!(
        sent.iter().sum::<u64>() >= last,
        "expected at least the {last} frames the snapshot saw, got {sent:?}"
    );
    // b runs at 10x a's rate on one schedule: their counts keep that ratio within a few frames.
    let ratio = sent[1] as f64 / sent[0] as f64;
    assert!((ratio - 10.0).abs() < 0.5, "expected b/a = 10, got {ratio} ({sent:?})");
}

#[test]
fn a_counted_run_ends_by_itself_with_exact_counts() {
    let run = Run::start(RunSpec::new(source(TWO_COUNTED), TxTarget::Null)).expect("starts");
    let r = run.wait().expect("reports");
    assert!(!r.interrupted());
    let sent: Vec<u64> = r.result.streams.iter().map(|s| s.sent_frames).collect();
    assert_eq!(sent, vec![1000, 3000], "expected the profile's counts");
    assert_eq!(r.result.sent_frames, 4000);
    assert_eq!(
        r.result.rate_control, "unpaced",
        "the null backend is unpaced by default"
    );
}

#[test]
fn a_pcap_target_is_written_with_every_frame_at_its_scheduled_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.pcap");
    let prof = "[[stream]]\nname = \"c\"\n[stream.timing]\nrate_pps = 1000\ncount = 50\n";
    let run = Run::start(RunSpec::new(source(prof), TxTarget::Pcap(path.clone()))).expect("starts");
    let r = run.wait().expect("reports");
    assert_eq!(
        r.pcap.as_deref(),
        Some(path.as_path()),
        "the report names the pcap written"
    );
    let stop = AtomicBool::new(false);
    let mut stamps = Vec::new();
    let info = gapless_io::files::capture::read_pcap(&path, &stop, &mut |ts, _, _| stamps.push(ts)).unwrap();
    assert_eq!(info.frames, 50, "expected 50 frames in the pcap");
    let gaps: Vec<u64> = stamps.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|&g| g == 1_000_000),
        "expected 1 ms between every frame, got {gaps:?}"
    );
    // And the same file metered offline through the API.
    let rep = gapless_engine::analyze(
        &AnalyzeSpec {
            file: path,
            targets: None,
            meter: MeterSetup {
                latency: false,
                ..Default::default()
            },
        },
        &stop,
    )
    .unwrap();
    assert_eq!(rep.streams.len(), 1);
    assert_eq!(rep.streams[0].rx_frames, 50);
    assert_eq!(rep.streams[0].seq.as_ref().map(|q| q.lost), Some(0));
}

#[test]
fn every_refusal_before_a_run_is_its_own_error_kind() {
    let counted = || source(TWO_COUNTED);
    let e = start_err(RunSpec::new(
        source("[[stream]]\n[stream.timing]\nrate_pps = 0\n"),
        TxTarget::Null,
    ));
    assert!(matches!(e, EngineError::Profile(_)), "expected Profile, got {e:?}");
    let e = start_err(RunSpec {
        rx: Some(RxSpec::new("lo")),
        ..RunSpec::new(counted(), TxTarget::Null)
    });
    assert!(matches!(e, EngineError::RxWithoutInterface), "got {e:?}");
    let pcap = || TxTarget::Pcap(std::env::temp_dir().join("gapless-never.pcap"));
    let e = start_err(RunSpec::new(source(TWO_ENDLESS), pcap()));
    assert!(matches!(e, EngineError::UnboundedPcap), "got {e:?}");
    let e = start_err(RunSpec {
        pacing: Pacing::On,
        ..RunSpec::new(counted(), pcap())
    });
    assert!(matches!(e, EngineError::PacedPcap), "got {e:?}");
    let e = start_err(RunSpec {
        cores: vec![0, 1],
        ..RunSpec::new(counted(), pcap())
    });
    assert!(matches!(e, EngineError::LoopsWithPcap), "got {e:?}");
    let e = start_err(RunSpec {
        batch: 0,
        ..RunSpec::new(counted(), TxTarget::Null)
    });
    assert!(matches!(e, EngineError::Batch(0)), "got {e:?}");
    let e = start_err(RunSpec {
        core: Some(999),
        ..RunSpec::new(counted(), TxTarget::Null)
    });
    assert!(matches!(e, EngineError::CoreNotAllowed { core: 999, .. }), "got {e:?}");
    let e = start_err(RunSpec {
        cores: vec![0, 0],
        ..RunSpec::new(counted(), TxTarget::Null)
    });
    assert!(matches!(e, EngineError::Plan(PlanError::DuplicateCore)), "got {e:?}");
    let placed = source("[[stream]]\ncore = 0\n[stream.timing]\nrate_pps = 10\ncount = 1\n");
    let e = start_err(RunSpec {
        core: Some(1),
        ..RunSpec::new(placed, TxTarget::Null)
    });
    assert!(
        matches!(&e, EngineError::Plan(PlanError::StreamCoreNotLooped { core: 0, .. })),
        "got {e:?}"
    );
    let e = start_err(RunSpec::new(
        counted(),
        TxTarget::Iface {
            name: "gapless-nope0".into(),
            socket: None,
        },
    ));
    assert!(matches!(e, EngineError::Io(IoError::NoSuchInterface(_))), "got {e:?}");
    let bad_meter = RxSpec {
        meter: MeterSetup {
            target_pps: Some(-1.0),
            ..Default::default()
        },
        ..RxSpec::new("lo")
    };
    let e = start_err(RunSpec {
        rx: Some(bad_meter),
        ..RunSpec::new(
            counted(),
            TxTarget::Iface {
                name: "lo".into(),
                socket: None,
            },
        )
    });
    assert!(matches!(e, EngineError::OutOfRange { .. }), "got {e:?}");
    let xdp = gapless_engine::RxSocket::AfXdp {
        queue: 0,
        attach: gapless_io::xdp::program::XdpAttach::Auto,
        stamp: gapless_io::xdp::program::XdpStamp::Auto,
    };
    let e = gapless_engine::spec::open_rx("lo", gapless_io::rx::RxTimestamps::Hardware, xdp).err();
    assert!(
        matches!(e, Some(EngineError::HardwareStampsNeedAfPacket)),
        "got {:?}",
        e.map(|e| e.to_string())
    );
}

#[test]
fn bad_files_given_to_the_meter_are_their_own_error_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let not_cal = dir.path().join("x.json");
    std::fs::write(&not_cal, "{\"kind\": \"something else\"}").unwrap();
    let e = gapless_engine::metering::load_calibration(&not_cal).unwrap_err();
    assert!(matches!(e, EngineError::BadFile { .. }), "got {e:?}");
    let e = gapless_engine::report::read_meter_report(Path::new("/nonexistent.json")).unwrap_err();
    assert!(matches!(e, EngineError::Unreadable { what: "", .. }), "got {e:?}");
    let e = gapless_engine::metering::load_calibration(Path::new("/nonexistent.json")).unwrap_err();
    assert!(
        matches!(
            e,
            EngineError::Unreadable {
                what: "calibration",
                ..
            }
        ),
        "got {e:?}"
    );
    let e = ProfileSource::from_file(Path::new("/nonexistent.toml")).unwrap_err();
    assert!(
        matches!(e, EngineError::Unreadable { what: "profile", .. }),
        "got {e:?}"
    );
    // A pcap of a header and no frame.
    let empty = dir.path().join("empty.pcap");
    let mut hdr = vec![0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0];
    hdr.extend([0u8; 8]);
    hdr.extend(65535u32.to_le_bytes());
    hdr.extend(1u32.to_le_bytes());
    std::fs::write(&empty, hdr).unwrap();
    let spec = AnalyzeSpec {
        file: empty,
        targets: None,
        meter: MeterSetup::default(),
    };
    let e = gapless_engine::analyze(&spec, &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(e, EngineError::EmptyCapture { .. }), "got {e:?}");
    // Plots into a place that cannot hold them.
    let rep = gapless_core::meter::MeterReport::default();
    let mut one = rep.clone();
    one.streams.push(gapless_core::meter::StreamRx {
        name: "s".into(),
        ..Default::default()
    });
    one.streams[0].series.push(Default::default());
    let e = gapless_engine::report::plots::write_all(&one, Path::new("/proc/gapless-nope")).unwrap_err();
    assert!(matches!(e, EngineError::Report(_)), "got {e:?}");
}

#[test]
fn a_pcap_that_cannot_be_finished_is_a_failure_of_the_report() {
    require_root();
    let d = tempfile::tempdir().unwrap();
    let mnt = d.path().to_str().unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt])
        .status()
        .unwrap();
    assert!(ok.success(), "expected to mount a small tmpfs (the test runs as root)");
    let prof = "[[stream]]\nname = \"c\"\nsize = 1000\n[stream.timing]\nrate_pps = 1e6\ncount = 2000\n";
    let path = d.path().join("big.pcap");
    let r = Run::start(RunSpec::new(source(prof), TxTarget::Pcap(path.clone()))).and_then(|h| h.wait());
    let _ = std::process::Command::new("umount").arg(mnt).status();
    let r = r.expect("the run itself reports");
    assert!(r.pcap.is_none(), "no pcap may be claimed");
    let e = r.failure().expect("a failure");
    assert!(matches!(e, EngineError::PcapNotWritten(_)), "got {e:?}");
    assert!(!path.exists(), "no partial pcap may be left");
}

fn require_root() {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        uid, 0,
        "this test needs root (tmpfs, namespaces, raw sockets): run the tests as root, as CI does"
    );
}

/// A testbed for one test, removed when dropped.
struct Bed(Testbed);
impl Bed {
    fn up(name: &str) -> Bed {
        require_root();
        let t = Testbed::new(name).unwrap();
        t.up().expect("testbed up");
        Bed(t)
    }

    /// A run of `prof` from the testbed's sender.
    fn send(&self, prof: &str) -> RunSpec {
        let target = TxTarget::Iface {
            name: self.0.tx_if(),
            socket: None,
        };
        RunSpec {
            netns: Some(self.0.tx_ns()),
            ..RunSpec::new(source(prof), target)
        }
    }
}
impl Drop for Bed {
    fn drop(&mut self) {
        let _ = self.0.down();
    }
}

#[test]
fn a_run_metered_over_the_testbed_joins_tx_and_rx_and_snapshots_show_rx_while_it_goes() {
    let bed = Bed::up(&format!("ea{}", std::process::id() % 10_000));
    let prof = "[[stream]]\nname = \"m\"\n[stream.timing]\nrate_pps = 5000\nduration_s = 1.5\n";
    let rx = RxSpec {
        netns: Some(bed.0.rx_ns()),
        ..RxSpec::new(bed.0.rx_if())
    };
    let spec = RunSpec {
        rx: Some(rx),
        ..bed.send(prof)
    };
    let run = Run::start(spec).expect("starts");
    std::thread::sleep(Duration::from_millis(900));
    let s = run.snapshot();
    let rx = s.streams[0]
        .clone()
        .rx
        .expect("the meter publishes the stream while the run goes");
    assert!(rx.received > 0, "expected frames received by 0.9 s, got {rx:?}");
    assert!(s.rx_frames.unwrap_or(0) >= rx.received);
    assert!(rx.latency_p50_ns.is_some(), "expected a running latency p50");
    let r = run.wait().expect("reports");
    assert!(r.failure().is_none(), "got {:?}", r.failure());
    let rx = r.result.rx.as_ref().expect("the result joins RX");
    let st = &rx.streams[0];
    assert_eq!(st.tx_sent, Some(r.result.sent_frames), "TX joined per stream");
    assert_eq!(
        st.lost_vs_tx,
        Some(0),
        "expected no loss on the testbed, got {:?}",
        st.lost_vs_tx
    );
}

#[test]
fn a_calibration_without_its_frames_and_a_stopped_one_are_their_own_errors() {
    let bed = Bed::up(&format!("ec{}", std::process::id() % 10_000));
    let spec = |rx_if: String| CalibrationSpec {
        tx: bed.0.tx_if(),
        tx_netns: Some(bed.0.tx_ns()),
        rx: RxSpec {
            netns: Some(bed.0.rx_ns()),
            ..RxSpec::new(rx_if)
        },
        rate_pps: 1000.0,
        duration_s: 0.5,
        core: None,
    };
    // Metering the far namespace's loopback: no calibration frame arrives there.
    let e = gapless_engine::calibrate(&spec("lo".into()), Arc::new(AtomicBool::new(false))).unwrap_err();
    assert!(matches!(e, EngineError::CalibrationNoFrames { .. }), "got {e:?}");
    let e = gapless_engine::calibrate(&spec(bed.0.rx_if()), Arc::new(AtomicBool::new(true))).unwrap_err();
    assert!(matches!(e, EngineError::Interrupted(_)), "got {e:?}");
    let mut bad = spec(bed.0.rx_if());
    bad.rate_pps = 0.0;
    let e = gapless_engine::calibrate(&bad, Arc::new(AtomicBool::new(false))).unwrap_err();
    assert!(matches!(e, EngineError::OutOfRange { .. }), "got {e:?}");
}

#[test]
fn a_link_that_goes_down_is_a_backend_failure_of_the_report() {
    let bed = Bed::up(&format!("el{}", std::process::id() % 10_000));
    let prof = "[[stream]]\nname = \"d\"\n[stream.timing]\nrate_pps = 10000\nduration_s = 5\n";
    let run = Run::start(bed.send(prof)).expect("starts");
    std::thread::sleep(Duration::from_millis(500));
    let ok = std::process::Command::new("ip")
        .args(["-n", &bed.0.rx_ns(), "link", "set", &bed.0.rx_if(), "down"])
        .status()
        .unwrap();
    assert!(ok.success());
    let t = std::time::Instant::now();
    let r = run.wait().expect("reports");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "expected the run to end soon after the fault, took {:?}",
        t.elapsed()
    );
    let e = r.failure().expect("a failure");
    assert!(matches!(e, EngineError::BackendFailed(_)), "got {e:?}");
    assert!(r.interrupted());
}

#[test]
fn a_paused_stream_sends_nothing_while_the_other_goes_on_and_resumes_on_its_schedule() {
    // a: 2000 frames at 5 kpps (0.4 s unpaused); b: endless at 5 kpps.
    let toml = "[[stream]]\nname = \"a\"\n[stream.timing]\nrate_pps = 5000\ncount = 2000\n\
                [[stream]]\nname = \"b\"\n[stream.timing]\nrate_pps = 5000\n";
    let spec = RunSpec {
        pacing: Pacing::On,
        ..RunSpec::new(source(toml), TxTarget::Null)
    };
    let run = Run::start(spec).expect("a null run starts");
    std::thread::sleep(Duration::from_millis(100));
    assert!(run.pause(0, true), "stream 0 exists");
    assert!(!run.pause(7, true), "expected no stream 7");
    std::thread::sleep(Duration::from_millis(50));
    let (a0, b0) = {
        let s = run.snapshot();
        (s.streams[0].tx.sent, s.streams[1].tx.sent)
    };
    std::thread::sleep(Duration::from_millis(400));
    let (a1, b1) = {
        let s = run.snapshot();
        (s.streams[0].tx.sent, s.streams[1].tx.sent)
    };
    assert_eq!(a1, a0, "expected a paused stream to send nothing: {a0} then {a1}");
    assert!(a0 < 2000, "expected a paused before its end, sent {a0}");
    assert!(
        b1 >= b0 + 1000,
        "expected b to go on (5 kpps for 0.4 s): {b0} then {b1}"
    );
    run.pause(0, false);
    std::thread::sleep(Duration::from_millis(600));
    run.stop();
    let r = run.wait().expect("the run reports");
    let a = &r.result.streams[0];
    assert_eq!(a.sent_frames, 2000, "expected every frame of a after the resume");
    assert!(
        (400_000_000..2_000_000_000).contains(&a.paused_ns),
        "expected a's schedule moved on by about the 450 ms pause, got {} ns",
        a.paused_ns
    );
    assert_eq!(r.result.streams[1].paused_ns, 0, "b was never paused");
}

#[test]
fn a_rate_scaled_while_running_takes_effect_at_the_next_departure_and_is_counted() {
    let toml = "[[stream]]\nname = \"a\"\n[stream.timing]\nrate_pps = 2000\n\
                [[stream]]\nname = \"b\"\n[stream.timing]\nrate_pps = 2000\n";
    let spec = RunSpec {
        pacing: Pacing::On,
        ..RunSpec::new(source(toml), TxTarget::Null)
    };
    let run = Run::start(spec).expect("a null run starts");
    let sent = |run: &gapless_engine::RunHandle| {
        let s = run.snapshot();
        (s.streams[0].tx.sent, s.streams[1].tx.sent)
    };
    std::thread::sleep(Duration::from_millis(200));
    let p = run.pauser();
    assert!(p.scale_rate(0, 3.0), "stream 0 exists");
    assert!(
        !p.scale_rate(0, 0.0) && !p.scale_rate(0, f64::NAN),
        "expected a factor of 0 or NaN refused"
    );
    assert!(!p.scale_rate(5, 2.0), "expected no stream 5");
    std::thread::sleep(Duration::from_millis(100));
    let (a0, b0) = sent(&run);
    std::thread::sleep(Duration::from_millis(1000));
    let (a1, b1) = sent(&run);
    run.stop();
    let r = run.wait().expect("the run reports");
    let (da, db) = ((a1 - a0) as f64, (b1 - b0) as f64);
    // Over the same second: a at 6000/s, b at 2000/s (the snapshot's timing blurs both alike).
    assert!(
        (2.5..3.5).contains(&(da / db)),
        "expected a at 3x b's rate after the change, got {da} vs {db} frames in 1 s"
    );
    assert_eq!(r.result.streams[0].rate_changes, 1, "expected one change counted for a");
    assert_eq!(r.result.streams[1].rate_changes, 0, "b was not changed");
}

#[test]
fn a_stream_recompiled_with_smaller_frames_sends_them_from_its_next_departure() {
    let toml = |size: u32| {
        format!("[[stream]]\nname = \"a\"\nsize = {size}\n[stream.timing]\nrate_pps = 2000\n[[stream]]\nname = \"b\"\nsize = 200\n[stream.timing]\nrate_pps = 2000\n")
    };
    let spec = RunSpec {
        pacing: Pacing::On,
        ..RunSpec::new(source(&toml(200)), TxTarget::Null)
    };
    let run = Run::start(spec).expect("a null run starts");
    std::thread::sleep(Duration::from_millis(200));
    let smaller = source(&toml(80)).compile(None).expect("compiles");
    assert!(run.pauser().replace_variants(0, &smaller.streams[0].variants));
    std::thread::sleep(Duration::from_millis(100));
    let s0 = run.snapshot();
    std::thread::sleep(Duration::from_millis(500));
    let s1 = run.snapshot();
    run.stop();
    let r = run.wait().expect("the run reports");
    let (frames, bytes) = (
        s1.streams[0].tx.sent - s0.streams[0].tx.sent,
        s1.streams[0].tx.bytes - s0.streams[0].tx.bytes,
    );
    assert!(frames > 500, "expected a to go on, sent {frames}");
    assert_eq!(
        bytes,
        80 * frames,
        "expected 80 B frames of a after the change: {frames} frames, {bytes} B"
    );
    let b = s1.streams[1].tx.bytes - s0.streams[1].tx.bytes;
    assert_eq!(
        b,
        200 * (s1.streams[1].tx.sent - s0.streams[1].tx.sent),
        "expected b's 200 B frames unchanged"
    );
    assert_eq!(
        (r.result.streams[0].size_changes, r.result.streams[1].size_changes),
        (1, 0)
    );
}
