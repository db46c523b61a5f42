//! Results that can be trusted: the verdict, core choice, faults that end runs, signed
//! latencies, snap-length captures, size bounds, invalid calibrations, broken pipes.

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const CBR_PCAP: &str =
    "seed = 3\n[[stream]]\nname = \"cbr\"\nsize = 64\n[stream.timing]\nrate_pps = 100_000\ncount = 2_000\n";

#[test]
fn an_overloaded_paced_run_says_not_held_and_why() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    // 50 Mpps on the null backend: far above what one loop builds and "sends" here.
    let p = write(
        dir.path(),
        "p.toml",
        "[[stream]]\nname = \"fast\"\n[stream.timing]\nrate_pps = 50_000_000\ncount = 3_000_000\n",
    );
    let j = dir.path().join("r.json");
    let o = paced_null(&p, &j, &[]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let r = read_json(&j);
    let v = &r["verdict"];
    assert_eq!(v["schedule"], "NOT held", "expected NOT held at 50 Mpps, got {v}");
    assert!(
        v["late_fraction"].as_f64().unwrap() > 0.5,
        "expected most frames late, got {v}"
    );
    let causes = v["causes"].to_string();
    assert!(
        causes.contains("waiting for departures"),
        "expected the saturated-loop cause, got {causes}"
    );
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("NOT held")),
        "expected the verdict in warnings: {}",
        r["warnings"]
    );
    // The summary ends with the verdict, in words.
    let out = String::from_utf8_lossy(&o.stdout);
    // The verdict's line, then one line per cause (as many as the machine gave).
    let tail: Vec<&str> = out
        .lines()
        .rev()
        .skip_while(|l| l.starts_with("  cause:"))
        .take(1)
        .collect();
    assert!(
        tail.iter().any(|l| l.starts_with("schedule: NOT held")),
        "expected the verdict right before its causes at the end, got {tail:?} in\n{out}"
    );
    // An unpaced run has no schedule to hold, and no rate error is printed for it.
    let o = gapless(&["run", p.to_str().unwrap(), "--null", "--duration", "0.01"]);
    let t = text(&o);
    assert!(t.contains("schedule: not paced"), "{t}");
    let row = t.lines().find(|l| l.starts_with("fast ")).expect("the stream's row");
    assert!(
        !row.contains('%'),
        "expected no rate error for an unpaced run, got {row:?}"
    );
}

/// `run P --null --pace on -q --json J` plus `extra`: a paced run with no wire.
fn paced_null(p: &std::path::Path, j: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        p.to_str().unwrap(),
        "--null",
        "--pace",
        "on",
        "-q",
        "--json",
        j.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    gapless(&args)
}

/// A busy loop pinned to `core`, running once this returns; killed when dropped.
fn hog(core: usize) -> KillOnDrop {
    let h = KillOnDrop(Some(
        Command::new("taskset")
            .args(["-c", &core.to_string(), "sh", "-c", "while :; do :; done"])
            .spawn()
            .expect("taskset (util-linux)"),
    ));
    std::thread::sleep(Duration::from_millis(200));
    h
}

#[test]
fn the_send_loop_takes_the_quietest_core() {
    let _x = exclusive();
    let allowed = gapless_engine::rx::allowed_cores();
    assert!(allowed.len() >= 2, "this test needs 2 cores, got {allowed:?}");
    let hog_core = *allowed.last().unwrap();
    // A busy loop pinned to the core that used to be the default.
    let mut hog = hog(hog_core);
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "p.toml",
        "[[stream]]\nname = \"c\"\n[stream.timing]\nrate_pps = 10_000\ncount = 2_000\n",
    );
    let j = dir.path().join("r.json");
    let o = paced_null(&p, &j, &[]);
    drop(hog.take().kill());
    assert!(o.status.success(), "{}", text(&o));
    let r = read_json(&j);
    let probe = r["environment"]["core_probe"].as_array().unwrap().clone();
    let lost = |c: usize| {
        probe
            .iter()
            .find(|p| p["core"] == c)
            .and_then(|p| p["lost_fraction"].as_f64())
            .unwrap_or_else(|| panic!("no probe of core {c}: {probe:?}"))
    };
    assert!(
        lost(hog_core) > 0.3,
        "expected the hogged core {hog_core} to lose > 30 % of the probe, got {probe:?}"
    );
    let quietest = allowed
        .iter()
        .copied()
        .min_by(|a, b| lost(*a).total_cmp(&lost(*b)))
        .unwrap();
    assert_eq!(
        r["environment"]["tx_core"], quietest,
        "expected the quietest core, probe {probe:?}"
    );
    assert_ne!(r["environment"]["tx_core"], hog_core);
}

#[test]
fn a_busy_core_chosen_by_hand_gets_a_warning_that_names_it() {
    let _x = exclusive();
    let c = *gapless_engine::rx::allowed_cores().last().unwrap();
    let mut hog = hog(c);
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "p.toml",
        "[[stream]]\nname = \"c\"\n[stream.timing]\nrate_pps = 10_000\ncount = 500\n",
    );
    let j = dir.path().join("r.json");
    let o = paced_null(&p, &j, &["--core", &c.to_string()]);
    drop(hog.take().kill());
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let want = format!("core {c} is busy");
    assert!(t.contains(&want), "expected {want:?} in the summary, got {t}");
    let r = read_json(&j);
    assert!(r["warnings"].to_string().contains(&want), "{}", r["warnings"]);
}

/// Sends for 3 s and does `fault` to the testbed after 0.7 s; the run must end within 1 s of
/// it, exit non-zero, and write what it sent, marked interrupted.
fn run_with_fault(fault: impl FnOnce(&Bed), want: &str) {
    let _x = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "p.toml",
        "[[stream]]\nname = \"c\"\nsize = 64\n[stream.timing]\nrate_pps = 100_000\nduration_s = 3\n",
    );
    let j = dir.path().join("r.json");
    let (ns, ifc) = (bed.tx_ns(), bed.tx_if());
    let mut child = KillOnDrop(Some(
        Command::new(bin())
            .args([
                "run",
                p.to_str().unwrap(),
                "--netns",
                &ns,
                "--iface",
                &ifc,
                "-q",
                "--json",
                j.to_str().unwrap(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    std::thread::sleep(Duration::from_millis(700));
    let t0 = Instant::now();
    fault(&bed);
    let o = child.take().wait_with_output().unwrap();
    let took = t0.elapsed();
    let t = text(&o);
    assert!(
        took < Duration::from_secs(1),
        "expected the run to end within 1 s of the fault, took {took:?}: {t}"
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "expected exit 2, got {:?}: {t}",
        o.status.code()
    );
    assert!(t.contains(want), "expected {want:?} in the output, got {t}");
    let r: Value = read_json(&j);
    assert_eq!(r["interrupted"], true, "{}", r["stop_reason"]);
    assert!(
        r["stop_reason"].as_str().unwrap().contains(want),
        "{}",
        r["stop_reason"]
    );
    let sent = r["sent_frames"].as_u64().unwrap();
    assert!(
        sent > 10_000 && sent < 300_000,
        "expected what was sent before the fault, got {sent}"
    );
    assert_eq!(r["verdict"]["schedule"], "NOT held");
}

#[test]
fn a_link_that_goes_down_ends_the_run() {
    run_with_fault(
        |bed| {
            let s = Command::new("ip")
                .args(["-n", &bed.rx_ns(), "link", "set", &bed.rx_if(), "down"])
                .status()
                .unwrap();
            assert!(s.success());
        },
        "lost its carrier",
    );
}

#[test]
fn a_deleted_namespace_ends_the_run() {
    run_with_fault(
        |bed| {
            let s = Command::new("ip")
                .args(["netns", "del", &bed.rx_ns()])
                .status()
                .unwrap();
            assert!(s.success());
        },
        "went away",
    );
}

#[test]
fn a_closed_stdout_ends_quietly() {
    // One at a time: the fault tests in this file time a run.
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "p.toml", CBR_PCAP);
    let mut c = Command::new(bin())
        .args(["run", p.to_str().unwrap(), "--null"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(c.stdout.take()); // like `| head` that has gone
    let o = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(0),
        "expected exit 0 on a closed pipe, got {:?}: {err}",
        o.status.code()
    );
    assert!(!err.contains("panicked"), "expected no panic, got {err}");
}

fn pcap_of(dir: &std::path::Path, size: u32) -> std::path::PathBuf {
    let p = write(dir, "p.toml", &CBR_PCAP.replace("size = 64", &format!("size = {size}")));
    let out = dir.join(format!("full{size}.pcap"));
    let o = gapless(&["run", p.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    out
}

fn editcap(args: &[&str]) {
    let s = Command::new("editcap").args(args).status().expect("editcap (tshark)");
    assert!(s.success(), "editcap {args:?}");
}

#[test]
fn snap_length_captures_are_metered_from_the_headers_present() {
    // One at a time: the fault tests in this file time a run.
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    for (size, snap, format) in [
        (1000, 96, "pcap"),
        (1000, 96, "pcapng"),
        (64, 42, "pcap"),
        (64, 42, "pcapng"),
    ] {
        let full = pcap_of(dir.path(), size);
        let cut = dir.path().join(format!("cut{size}-{snap}.{format}"));
        editcap(&[
            "-F",
            format,
            "-s",
            &snap.to_string(),
            full.to_str().unwrap(),
            cut.to_str().unwrap(),
        ]);
        let j = dir.path().join("a.json");
        let o = gapless(&["analyze", cut.to_str().unwrap(), "--json", j.to_str().unwrap()]);
        let t = text(&o);
        assert!(o.status.success(), "{t}");
        let r = read_json(&j);
        let what = format!("{size} B cut to {snap} B ({format})");
        assert_eq!(r["foreign"]["malformed"], 0, "{what}: {}", r["foreign"]);
        let s = &r["streams"][0];
        assert_eq!(s["rx_frames"], 2_000, "{what}: every frame metered by 5-tuple: {s}");
        assert!(
            s["flow"].as_str().unwrap().starts_with("udp 198.18.0.1:"),
            "{what}: {s}"
        );
        let c = &r["capture"]["cut"];
        assert_eq!(c["frames"], 2_000, "{what}: {c}");
        assert_eq!(c["captured_max"], snap, "{what}: {c}");
        assert_eq!(c["missing_max"], size - 4 - snap, "{what}: {c}");
        assert!(t.contains("captured short of their length"), "{what}: {t}");
    }
    // A cut that keeps the signature (only Ethernet padding goes) still meters the stream.
}

#[test]
fn latencies_below_zero_stay_in_the_percentiles() {
    // One at a time: the fault tests in this file time a run.
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let full = pcap_of(dir.path(), 64);
    // On a pcap written by --out every latency is 0; an offset of 401 ns makes them −401.
    let cal = dir.path().join("cal.json");
    std::fs::write(&cal, calibration_json(401, true)).unwrap();
    let (t, r) = analyze_calibrated(&full, &cal, &[]);
    let l = &r["streams"][0]["latency"];
    assert_eq!(l["negative"], 2_000, "{l}");
    assert_eq!(l["percentiles_ns"]["p50"], -401, "expected p50 −401 ns, got {l}");
    assert_eq!(l["percentiles_ns"]["p99_9999"], -401, "{l}");
    assert!(t.contains("2000 latencies (100.0 %) are below zero"), "{t}");
    assert!(t.contains("lat p50*"), "expected the calibrated columns starred: {t}");
}

/// `analyze CAPTURE --calibration CAL` plus `extra`: its output and result.
fn analyze_calibrated(capture: &std::path::Path, cal: &std::path::Path, extra: &[&str]) -> (String, Value) {
    let j = capture.with_extension("json");
    let mut args = vec![
        "analyze",
        capture.to_str().unwrap(),
        "--calibration",
        cal.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", j.to_str().unwrap()]);
    let o = gapless(&args);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    (t, read_json(&j))
}

fn calibration_json(offset: i64, valid: bool) -> String {
    format!(
        r#"{{"kind":"gapless-calibration","version":"0.1.0","created_unix_ns":1,"hostname":"h","tx_iface":"a","rx_iface":"b","rx_timestamp_source":"","rate_pps":10000.0,"frames":20000,"lost":0,"latency_offset_ns":{offset},"latency_min_ns":1,"latency_p99_ns":2,"floor_abs_err_p50_ns":5000,"floor_abs_err_p99_ns":9000,"floor_mse_ns2":1.0,"floor_latency_p99_minus_p50_ns":1,"valid":{valid}{}}}"#,
        if valid {
            String::new()
        } else {
            r#","invalid_reason":"its precision floor |err| p50 of 5000 ns is above 1 % of its 100000 ns gap""#.into()
        }
    )
}

#[test]
fn an_invalid_calibration_warns_and_is_not_subtracted_unless_asked() {
    // One at a time: the fault tests in this file time a run.
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let full = pcap_of(dir.path(), 64);
    let cal = dir.path().join("cal.json");
    std::fs::write(&cal, calibration_json(401, false)).unwrap();
    let (t, r) = analyze_calibrated(&full, &cal, &[]);
    assert!(t.contains("is invalid") && t.contains("NOT subtracted"), "{t}");
    assert_eq!(r["streams"][0]["latency"]["offset_subtracted_ns"], 0);
    assert_eq!(r["calibration"]["subtracted"], false);
    let (_, r) = analyze_calibrated(&full, &cal, &["--use-invalid-calibration"]);
    assert_eq!(r["streams"][0]["latency"]["offset_subtracted_ns"], 401);
    assert!(
        r["warnings"].to_string().contains("--use-invalid-calibration"),
        "{}",
        r["warnings"]
    );
}

#[test]
fn sizes_that_a_distribution_cannot_reach_are_refused() {
    // One at a time: the fault tests in this file time a run.
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "n.toml",
        "[[stream]]\nname = \"n\"\nsize = { kind = \"normal\", mean = 700, cv = 0.5, max = 1518 }\n[stream.timing]\nrate_pps = 1000\ncount = 10\n",
    );
    expect_error(
        &gapless(&["check", p.to_str().unwrap()]),
        &[
            "stream[0].size.max",
            "nothing above 1400",
            "Fix: set max to at most 1400",
        ],
    );
    let p = write(
        dir.path(),
        "i.toml",
        "[[stream]]\nname = \"i\"\nsize = { imix = \"ipv6\" }\ntemplate = { ip_src = \"2001:db8::1\", ip_dst = \"2001:db8::2\" }\n[stream.timing]\nrate_pps = 1000\ncount = 10\n",
    );
    expect_error(
        &gapless(&["check", p.to_str().unwrap()]),
        &[
            "stream[0].size.imix",
            "preset \"ipv6\" has 78 B frames",
            "82 B",
            "signature = false",
        ],
    );
}
