//! The live meter on the testbed (root): `run --rx`, a tcpdump cross-check, calibration,
//! `measure` with foreign traffic and Ctrl-C, and the hardware-timestamp error on veth.

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const CBR: &str = r#"
seed = 11
[[stream]]
name = "cbr"
size = 64
[stream.timing]
rate_pps = 100_000
duration_s = 2
"#;

#[test]
fn run_rx_at_100kpps_meters_every_frame_and_agrees_with_tcpdump() {
    let _x = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let prof = write(dir.path(), "cbr.toml", CBR);
    let cap = Capture::start(&bed, &dir.path().join("rx.pcap"));
    let res = dir.path().join("r.json");
    let rep = dir.path().join("rep");
    let o = bed.run_rx(&prof, &res, &["--report-dir", rep.to_str().unwrap()]);
    let pcap = cap.stop();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("meter: iface"), "{t}");
    let r = read_json(&res);
    let rx = &r["rx"];
    assert_eq!(rx["capture"]["kernel_drops"], 0, "the meter kept up");
    assert_eq!(rx["environment"]["iface"], bed.rx_if());
    assert!(rx["rx_timestamp_source"].as_str().unwrap().contains("SO_TIMESTAMPING"));
    let s = &rx["streams"][0];
    assert_eq!(s["name"], "cbr");
    assert_eq!(s["tx_sent"], r["sent_frames"]);
    assert_eq!(s["lost_vs_tx"], 0, "zero loss: {s}");
    assert_eq!(s["seq"]["lost"], 0);
    assert_eq!(s["seq"]["duplicated"], 0);
    assert_eq!(s["rx_frames"], r["sent_frames"]);
    // Latency: positive and percentiles in order.
    let l = &s["latency"];
    assert!(l["min_ns"].as_i64().unwrap() > 0, "{l}");
    assert_eq!(l["negative"], 0);
    let p = &l["percentiles_ns"];
    let v: Vec<u64> = ["p50", "p90", "p99", "p99_9", "p99_99", "p99_999", "p99_9999"]
        .iter()
        .map(|k| p[k].as_u64().unwrap())
        .collect();
    assert!(v.windows(2).all(|w| w[0] <= w[1]), "{p}");
    assert!(v[0] > 0 && v[6] <= l["max_ns"].as_u64().unwrap(), "{l}");
    // Accuracy within 0.1 % at the sink; rate jitter for every window up to 8000.
    let ia = &s["interarrival"];
    held_or_honest(&r, &[(0, ia["rate_pps"].as_f64().unwrap())], || {
        let err = ia["rate_error_rel"].as_f64().unwrap();
        assert!(err.abs() < 1e-3, "expected |sink rate error| < 0.1 %, got {err}");
    });
    assert_eq!(s["rate_jitter"].as_array().unwrap().len(), 7);
    assert!(s["ipdv"]["pairs"].as_u64().unwrap() > 190_000);
    assert!(s["series"].as_array().unwrap().len() >= 2);
    assert!(rep.join("cbr-latency-ccdf.svg").exists());

    // Cross-check: tcpdump's capture of the same run, through `analyze`. Both read the
    // kernel's RX stamp of the same frames, so the inter-arrival figures must agree closely:
    // rate within 0.01 %, |err| p50 within 50 ns, MSE within 5 %.
    let a = dir.path().join("a.json");
    let o = gapless(&[
        "analyze",
        pcap.to_str().unwrap(),
        "--profile",
        res.to_str().unwrap(),
        "--signed-only",
        "--json",
        a.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let b = &read_json(&a)["streams"][0];
    assert_eq!(b["rx_frames"], s["rx_frames"], "tcpdump saw every frame too");
    let (ia2, ia1) = (&b["interarrival"], ia);
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap();
    assert!(
        (f(ia1, "rate_pps") / f(ia2, "rate_pps") - 1.0).abs() < 1e-4,
        "{ia1}\n{ia2}"
    );
    assert!(
        (f(ia1, "abs_err_p50_ns") - f(ia2, "abs_err_p50_ns")).abs() <= 50.0,
        "{ia1}\n{ia2}"
    );
    assert!(
        (f(ia1, "mse_ns2") / f(ia2, "mse_ns2") - 1.0).abs() < 0.05,
        "{ia1}\n{ia2}"
    );
    eprintln!(
        "cross-check: live MSE {:.4e} vs tcpdump {:.4e}; |err| p50 {} vs {}; rate {} vs {}",
        f(ia1, "mse_ns2"),
        f(ia2, "mse_ns2"),
        ia1["abs_err_p50_ns"],
        ia2["abs_err_p50_ns"],
        ia1["rate_pps"],
        ia2["rate_pps"]
    );
}

#[test]
fn calibrate_then_subtract_the_offset() {
    let _x = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let cal = dir.path().join("cal.json");
    let o = gapless(&[
        "calibrate",
        "--tx",
        &bed.tx_if(),
        "--tx-netns",
        &bed.tx_ns(),
        "--rx",
        &bed.rx_if(),
        "--rx-netns",
        &bed.rx_ns(),
        "--rate-pps",
        "20000",
        "--duration",
        "1",
        "--out",
        cal.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let c = read_json(&cal);
    assert_eq!(c["kind"], "gapless-calibration");
    assert_eq!(c["frames"], 20_000);
    assert_eq!(c["lost"], 0);
    let off = c["latency_offset_ns"].as_i64().unwrap();
    assert!(off > 0 && off < 1_000_000, "a veth hop takes µs: {c}");
    assert!(c["floor_mse_ns2"].as_f64().unwrap() > 0.0);

    let prof = write(dir.path(), "cbr.toml", &CBR.replace("duration_s = 2", "duration_s = 1"));
    let res = dir.path().join("r.json");
    let o = bed.run_rx(&prof, &res, &["--calibration", cal.to_str().unwrap()]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let r = read_json(&res);
    let rc = &r["rx"]["calibration"];
    assert_eq!(rc["path"], cal.to_str().unwrap());
    assert_eq!(rc["latency_offset_ns"], off);
    let l = &r["rx"]["streams"][0]["latency"];
    if c["valid"] == false {
        // Calibrated on a busy moment: the file says why, and the run subtracts nothing.
        let why = c["invalid_reason"].as_str().unwrap();
        eprintln!("the calibration was invalid: {why}");
        assert!(t.contains("NOT subtracted") && t.contains("is invalid"), "{t}");
        assert_eq!(l["offset_subtracted_ns"], 0);
        let floor_over = c["floor_abs_err_p50_ns"].as_f64().unwrap() > 0.01 * 1e5;
        assert!(
            why.contains("did not hold") || (floor_over && why.contains("precision floor")),
            "expected a reason that the calibration's own figures support, got {why:?}: {c}"
        );
        return;
    }
    assert!(
        t.contains("subtracted from the latency columns; precision floor"),
        "{t}"
    );
    assert_eq!(l["offset_subtracted_ns"], off);
    // After subtracting the median of the direct link, the median latency is near zero.
    let p50 = l["percentiles_ns"]["p50"].as_i64().unwrap();
    assert!(p50 < off, "p50 {p50} after subtracting {off}");
}

#[test]
fn measure_counts_foreign_traffic_and_writes_its_result_on_ctrl_c() {
    let _x = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("m.json");
    let mut child = KillOnDrop(Some(
        Command::new(bin())
            .args(["measure", "--netns", &bed.rx_ns(), "--iface", &bed.rx_if(), "--json"])
            .arg(&res)
            .args(["-q", "--target-pps", "20000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    std::thread::sleep(Duration::from_millis(800));
    // Stream "a" is signed; "icmp" (echo requests) and "plain" (UDP) carry no signature:
    // the first is foreign, the second an unsigned flow metered by its 5-tuple.
    let prof = write(
        dir.path(),
        "p.toml",
        r#"
[[stream]]
name = "a"
size = 100
[stream.timing]
rate_pps = 20_000
count = 4000

[[stream]]
name = "icmp"
size = 80
signature = false
[stream.template]
l4 = "icmp"
[stream.timing]
rate_pps = 100
count = 5

[[stream]]
name = "plain"
size = 70
signature = false
[stream.template]
src_port = 5555
dst_port = 6666
[stream.timing]
rate_pps = 1000
count = 200
"#,
    );
    let o = bed.run(&prof, &["-q"]);
    assert!(o.status.success(), "{}", text(&o));
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.0.as_ref().unwrap().id() as i32, libc::SIGINT) };
    let out = child.take().wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let r = read_json(&res);
    assert_eq!(r["interrupted"], true);
    assert_eq!(r["environment"]["driver"], "veth");
    assert!(!r["environment"]["kernel"].as_str().unwrap().is_empty());
    let s = &r["streams"][0];
    assert_eq!(s["name"], "stream 0");
    assert_eq!(s["rx_frames"], 4000);
    assert_eq!(s["seq"]["lost"], 0);
    assert_eq!(s["rx_bytes_l2"], 4000 * 96, "100 B frames, captured without FCS");
    assert_eq!(r["foreign"]["no_ports"], 5, "{}", r["foreign"]);
    let streams = r["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2, "ICMP echo without a signature is not a stream");
    let f = &streams[1];
    assert_eq!(f["flow"], "udp 198.18.0.1:5555 > 198.18.0.2:6666");
    assert_eq!(f["rx_frames"], 200);
    assert!(f["seq"].is_null() && f["latency"].is_null());
    let ia = &f["interarrival"];
    assert!((ia["rate_pps"].as_f64().unwrap() / 1000.0 - 1.0).abs() < 0.01, "{ia}");
}

#[test]
fn meter_errors_name_the_fix() {
    let bed = Bed::up();
    let o = gapless(&[
        "measure",
        "--netns",
        &bed.rx_ns(),
        "--iface",
        &bed.rx_if(),
        "--timestamps",
        "hardware",
        "--duration",
        "1",
    ]);
    expect_error(
        &o,
        &[
            "cannot timestamp received frames in hardware",
            "software-receive",
            "--timestamps software",
        ],
    );
    expect_error(
        &gapless(&[
            "measure",
            "--netns",
            &bed.rx_ns(),
            "--iface",
            "nope0",
            "--duration",
            "1",
        ]),
        &["\"nope0\" does not exist"],
    );
    let dir = tempfile::tempdir().unwrap();
    let prof = write(dir.path(), "p.toml", CBR);
    let pcap = dir.path().join("x.pcap");
    expect_error(
        &gapless(&[
            "run",
            prof.to_str().unwrap(),
            "--out",
            pcap.to_str().unwrap(),
            "--rx",
            "lo",
        ]),
        &["--rx meters what an interface sends"],
    );
    expect_error(
        &gapless(&["measure", "--iface", "lo", "--duration", "-1"]),
        &["--duration -1"],
    );
    expect_error(
        &gapless(&[
            "calibrate",
            "--tx",
            &bed.tx_if(),
            "--rx",
            &bed.rx_if(),
            "--rate-pps",
            "0",
        ]),
        &["--rate-pps 0"],
    );
}

#[test]
fn measure_stops_with_an_error_when_its_interface_goes_away() {
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("m.json");
    let mut child = KillOnDrop(Some(
        Command::new(bin())
            .args([
                "measure",
                "--netns",
                &bed.rx_ns(),
                "--iface",
                &bed.rx_if(),
                "-q",
                "--json",
            ])
            .arg(&res)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    std::thread::sleep(Duration::from_millis(800));
    drop(bed);
    let t0 = std::time::Instant::now();
    let mut c = child.take();
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            let out = c.wait_with_output().unwrap();
            assert_eq!(st.code(), Some(2), "{}", text(&out));
            assert!(text(&out).contains("went away or down"), "{}", text(&out));
            assert!(res.exists(), "the result is still written");
            break;
        }
        if t0.elapsed() > Duration::from_secs(5) {
            let _ = c.kill();
            panic!("measure kept running after its interface was deleted");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `(|err| p50, |err| p99, gap reference)` the sink measured for a 2 s run of one stream
/// at 50 kpps with the timing `pattern` line, or `None` when the schedule was not held (the
/// verdict is checked against the sink then).
fn precision_of(bed: &Bed, pattern: &str) -> Option<(u64, u64, String)> {
    let dir = tempfile::tempdir().unwrap();
    let prof = write(
        dir.path(),
        "p.toml",
        &format!("seed = 5\n[[stream]]\nname = \"s\"\nsize = 64\n[stream.timing]\nrate_pps = 50_000\nduration_s = 2\n{pattern}\n"),
    );
    let res = dir.path().join("r.json");
    let o = bed.run_rx(&prof, &res, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let r = read_json(&res);
    let ia = &r["rx"]["streams"][0]["interarrival"];
    let got = (
        ia["abs_err_p50_ns"].as_u64().expect("an |err| p50"),
        ia["abs_err_p99_ns"].as_u64().expect("an |err| p99"),
        ia["gap_reference"].as_str().unwrap().to_string(),
    );
    held_or_honest(&r, &[(0, ia["rate_pps"].as_f64().unwrap())], || {}).then_some(got)
}

#[test]
fn a_poisson_streams_gaps_are_measured_against_its_own_schedule() {
    let _x = exclusive();
    let bed = Bed::up();
    let cbr = precision_of(&bed, "");
    let poisson = precision_of(&bed, "pattern = \"poisson\"");
    if let Some((_, _, r)) = &cbr {
        assert_eq!(r, "target gap");
    }
    let Some((p50, p99, r)) = poisson else { return };
    assert!(
        r.starts_with("schedule"),
        "expected the schedule as the reference, got {r}"
    );
    // Against the mean gap, exponential gaps spread by ~14 µs at the median (what the meter
    // printed before); against their own schedule only the pacer and the path remain.
    assert!(
        p50 < 1_000,
        "expected a Poisson |err| p50 under 1 µs against its schedule, got {p50} ns"
    );
    if let Some((_, cbr_p99, _)) = cbr {
        assert!(
            p99 <= 2 * cbr_p99 + 5_000,
            "expected a Poisson |err| p99 comparable to CBR's ({cbr_p99} ns), got {p99} ns"
        );
    }
}

#[test]
fn a_split_stream_says_why_it_has_no_precision_figures_unless_its_parts_interleave_into_its_cbr() {
    let _x = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    // Poisson split over two loops: each part draws its own schedule, so the merged stream has
    // none the meter can regenerate.
    let prof = write(
        dir.path(),
        "p.toml",
        "[[stream]]\nname = \"s\"\nsize = 64\n[stream.timing]\npattern = \"poisson\"\nrate_pps = 20_000\ncount = 20_000\n",
    );
    let res = dir.path().join("r.json");
    let o = bed.run_rx(&prof, &res, &["--cores", "0,1"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let r = read_json(&res);
    let ia = &r["rx"]["streams"][0]["interarrival"];
    assert_eq!(
        ia["gap_reference"], "none: the stream was split over 2 send loops, each with its own schedule",
        "{ia}"
    );
    assert!(
        ia["abs_err_p50_ns"].is_null() && ia["mse_ns2"].is_null(),
        "expected no precision figures, got {ia}"
    );
    assert!(
        t.contains("s: no |err|, MSE or burst figures: the stream was split over 2 send loops"),
        "{t}"
    );
    // CBR split by phase: part j sends departures j, j + 2, … of the one schedule, so the
    // sink's gaps are measured against the stream's own target gap.
    let prof = write(
        dir.path(),
        "c.toml",
        "[[stream]]\nname = \"c\"\nsize = 64\nsplit = \"phase\"\n[stream.timing]\nrate_pps = 20_000\ncount = 20_000\n",
    );
    let o = bed.run_rx(&prof, &res, &["--cores", "0,1"]);
    assert!(o.status.success(), "{}", text(&o));
    let ia = &read_json(&res)["rx"]["streams"][0]["interarrival"];
    assert_eq!(ia["gap_reference"], "target gap", "{ia}");
    assert!(
        ia["abs_err_p50_ns"].is_u64() && ia["mse_ns2"].is_f64() && ia["target_pps"] == 20_000.0,
        "expected precision figures against the aggregate 20 000 pps, got {ia}"
    );
}
