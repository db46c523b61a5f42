//! Experiments: the reference device under test, RFC 2544 against it, warm-up exclusion, and
//! bad experiment files. Real namespaces, veths, a Linux bridge or router and a tbf.

mod common;

use std::process::Command;

use common::*;
use gapless_io::testbed::Testbed;

/// A testbed with a device in the middle, removed when dropped.
struct DutBed(Testbed);

impl DutBed {
    fn up(tag: &str, args: &[&str]) -> (DutBed, String) {
        require_root();
        let name = format!("d{}{tag}", std::process::id() % 100_000);
        let mut a = vec!["testbed", "up", "--name", &name];
        a.extend_from_slice(args);
        let o = gapless(&a);
        assert!(o.status.success(), "testbed up {args:?}: {}", text(&o));
        (DutBed(Testbed::new(&name).unwrap()), text(&o))
    }
}

impl Drop for DutBed {
    fn drop(&mut self) {
        let _ = gapless(&["testbed", "down", "--name", &self.0.name]);
    }
}

fn netns_list() -> String {
    String::from_utf8_lossy(&Command::new("ip").args(["netns", "list"]).output().unwrap().stdout).into_owned()
}

/// Frames the device's port towards the receiver sent (its veth counters).
fn dut_forwarded(t: &Testbed) -> u64 {
    let out = Command::new("ip")
        .args(["-n", &t.dut_ns(), "-j", "-s", "link", "show", &t.dut_ports().1])
        .output()
        .unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    j[0]["stats64"]["tx"]["packets"].as_u64().unwrap()
}

#[test]
fn the_reference_dut_comes_up_once_forwards_and_goes() {
    let _g = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let prof = write(
        dir.path(),
        "p.toml",
        "[[stream]]\nsize = 64\n[stream.timing]\nrate_pps = 2000\ncount = 1000\n",
    );
    for kind in ["bridge", "router"] {
        let (bed, first) = DutBed::up(&kind[..1], &["--dut", kind, "--dut-rate", "24mbit"]);
        let t = &bed.0;
        assert!(first.contains("is up") && first.contains("64 B 50000"), "{first}");
        let again = gapless(&[
            "testbed",
            "up",
            "--name",
            &t.name,
            "--dut",
            kind,
            "--dut-rate",
            "24mbit",
        ]);
        assert!(
            text(&again).contains("was already up"),
            "idempotent up: {}",
            text(&again)
        );
        let before = dut_forwarded(t);
        let res = dir.path().join(format!("{kind}.json"));
        let o = gapless(&[
            "run",
            prof.to_str().unwrap(),
            "--netns",
            &t.tx_ns(),
            "--iface",
            &t.tx_if(),
            "--rx",
            &t.rx_if(),
            "--rx-netns",
            &t.rx_ns(),
            "--json",
            res.to_str().unwrap(),
            "-q",
        ]);
        assert!(o.status.success(), "{kind}: {}", text(&o));
        let r = read_json(&res);
        let s = &r["rx"]["streams"][0];
        assert_eq!(
            s["rx_frames"], 1000,
            "{kind}: expected 1000 frames through the device, got {s}"
        );
        assert_eq!(s["lost_vs_tx"], 0, "{kind}: {s}");
        let fwd = dut_forwarded(t) - before;
        assert!(
            fwd >= 1000,
            "{kind}: expected the device's egress port to send the 1000 frames, its counter says {fwd}"
        );
        let down = gapless(&["testbed", "down", "--name", &t.name]);
        assert!(text(&down).contains("removed"), "{}", text(&down));
        let ns = netns_list();
        for n in [t.tx_ns(), t.rx_ns(), t.dut_ns()] {
            assert!(
                !ns.lines().any(|l| l.split_whitespace().next() == Some(&n)),
                "{n} left after down: {ns}"
            );
        }
        let down2 = gapless(&["testbed", "down", "--name", &t.name]);
        assert!(text(&down2).contains("was not up"), "{}", text(&down2));
    }
}

/// An htb device is read back as it was asked: `up` again is idempotent and names its rate.
#[test]
fn an_htb_device_is_read_back_with_its_rate() {
    let (bed, first) = DutBed::up("h", &["--dut", "router", "--dut-rate", "24mbit", "--dut-qdisc", "htb"]);
    assert!(
        first.contains("htb 24.000 Mbit/s") && first.contains("queue 256 frames"),
        "{first}"
    );
    let again = gapless(&[
        "testbed",
        "up",
        "--name",
        &bed.0.name,
        "--dut",
        "router",
        "--dut-rate",
        "24mbit",
        "--dut-qdisc",
        "htb",
    ]);
    assert!(text(&again).contains("was already up"), "{}", text(&again));
}

#[test]
fn a_direct_testbed_replaces_a_dut_one_and_the_router_decrements_the_ttl() {
    let _g = exclusive();
    let (bed, _) = DutBed::up("t", &["--dut", "router"]);
    let t = &bed.0;
    assert!(t.has_dut());
    // A frame through the router arrives with TTL 63 (the profile sends 64).
    let dir = tempfile::tempdir().unwrap();
    let prof = write(
        dir.path(),
        "p.toml",
        "[[stream]]\nsize = 64\n[stream.timing]\nrate_pps = 1000\ncount = 50\n",
    );
    let pcap = dir.path().join("rx.pcap");
    let mut dump = KillOnDrop(Some(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &t.rx_ns(),
                "tcpdump",
                "-i",
                &t.rx_if(),
                "-w",
                pcap.to_str().unwrap(),
                "-c",
                "50",
                "udp",
            ])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    ));
    std::thread::sleep(std::time::Duration::from_millis(700));
    let o = gapless(&[
        "run",
        prof.to_str().unwrap(),
        "--netns",
        &t.tx_ns(),
        "--iface",
        &t.tx_if(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let st = dump.take().wait().unwrap();
    assert!(st.success());
    let frames = read_pcap(&pcap);
    assert_eq!(frames.len(), 50);
    for (_, f) in &frames {
        assert_eq!(f[14 + 8], 63, "expected TTL 63 after one router hop, got {}", f[14 + 8]);
    }
    let o = gapless(&["testbed", "up", "--name", &t.name]);
    assert!(text(&o).contains("is up"), "{}", text(&o));
    assert!(!t.has_dut(), "a plain `testbed up` makes the direct testbed");
}

/// Whether the trials near both the capacity and the answer include one the experiment
/// marked invalid (its sender fell behind): the only excuse for missing the bound.
fn excused(r: &serde_json::Value, size: u64, lo: f64, hi: f64) -> bool {
    r["trials"].as_array().unwrap().iter().any(|t| {
        let rate = t["plan"]["rate_pps"].as_f64().unwrap_or(0.0);
        t["plan"]["size"] == size && rate >= lo && rate <= hi && t["valid"] == false
    })
}

/// RFC 2544 throughput against a router whose egress tbf carries 24 Mbit/s: the example file
/// at 64 B, and the command-line shortcut at 512 B.
#[test]
fn rfc2544_finds_the_dut_capacity_at_64_and_512_bytes() {
    let _g = exclusive();
    let (bed, _) = DutBed::up("f", &["--dut", "router", "--dut-rate", "24mbit"]);
    let t = &bed.0;
    let dir = tempfile::tempdir().unwrap();
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/rfc2544_dut.toml")).unwrap();
    // 1 s trials where the file has 2 (CI's time: both searches took 97 s); the file is the
    // README's otherwise. The 512 B search keeps 2 s: the tbf's bucket, which passes a burst
    // above the rate, added 3.2 % to a 1 s trial's throughput there.
    let example = example.replace("gl-", &format!("{}-", t.name));
    assert!(example.contains("duration_s = 2 "), "expected the example's 2 s trials");
    let file = write(
        dir.path(),
        "e.toml",
        &example.replace("duration_s = 2 ", "duration_s = 1 "),
    );
    let j64 = dir.path().join("r64.json");
    let o = gapless(&["experiment", file.to_str().unwrap(), "--json", j64.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let lines = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.starts_with("trial"))
        .count();
    let j512 = dir.path().join("r512.json");
    let o2 = gapless(&[
        "rfc2544",
        "--testbed",
        &t.name,
        "--sizes",
        "512",
        "--max-rate-bps",
        "40e6",
        "--min-rate",
        "500",
        "--resolution-pct",
        "0.5",
        "--duration",
        "2",
        "--warmup",
        "0.3",
        "--settle",
        "0.3",
        "--max-retries",
        "2",
        "--json",
        j512.to_str().unwrap(),
        "-q",
    ]);
    assert!(o2.status.success(), "{}", text(&o2));
    for (path, size, printed) in [(&j64, 64u64, Some(lines)), (&j512, 512, None)] {
        let r = read_json(path);
        let cap = gapless_io::testbed::dut::pps_at(24_000_000, size as u32);
        let tp = &r["rfc2544"][0]["throughput"][0];
        let got = tp["throughput_pps"]
            .as_f64()
            .unwrap_or_else(|| panic!("{size} B: no throughput in {tp}"));
        let (lo, hi) = (cap.min(got) * 0.97, cap.max(got) * 1.03);
        assert!(
            (got - cap).abs() <= 0.03 * cap || excused(&r, size, lo, hi),
            "{size} B: expected a throughput within 3 % of {cap:.0} frames/s, got {got:.0}, and no trial near it was marked invalid"
        );
        // The result holds every trial: the search's, and the repeats.
        let trials = r["trials"].as_array().unwrap();
        if let Some(n) = printed {
            assert_eq!(trials.len(), n, "expected every printed trial in the result");
        }
        for i in tp["trials"].as_array().unwrap() {
            let i = i.as_u64().unwrap() as usize;
            assert_eq!(trials[i]["index"], i as u64);
        }
        let repeated = trials.iter().filter(|t| t["repeated"] == true).count();
        assert_eq!(r["repeats"], repeated as u64, "repeats counted");
        assert!(r["dut"]["kind"].as_str().unwrap().contains("router"), "{}", r["dut"]);
        assert!(r["machine"]["hostname"].is_string(), "{}", r["machine"]);
    }
}

/// Back-to-back measures the device's buffer: its queue plus the frames its bucket passes at
/// once. 2 Mbit/s drains a 512-byte frame every 2 ms, so a host stall during a burst can add a
/// frame only per 2 ms it lasts.
#[test]
fn back_to_back_finds_the_dut_queue_plus_its_bucket() {
    let _g = exclusive();
    let (bed, _) = DutBed::up("q", &["--dut", "router", "--dut-rate", "2mbit", "--dut-queue", "100"]);
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("b2b.json");
    let o = gapless(&[
        "rfc2544",
        "--testbed",
        &bed.0.name,
        "--sizes",
        "512",
        "--tests",
        "back-to-back",
        "--max-rate-bps",
        "1e9",
        "--max-burst",
        "400",
        "--settle",
        "0.4",
        "--json",
        j.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r = read_json(&j);
    let b = r["rfc2544"][0]["back_to_back"]["bursts"][0].as_u64().unwrap();
    // The bucket is 3028 bytes (two full frames): 5 frames of 508 bytes as tbf counts them.
    let expect = 100 + 5;
    assert!(
        (expect..=expect + 10).contains(&b),
        "expected a burst of {expect} frames (queue 100 + bucket 5), up to 10 more for stalls, got {b}"
    );
    // The search's trials: the longest passing burst, and one more frame lost.
    let trials = r["trials"].as_array().unwrap();
    let at = |n: u64| trials.iter().find(|t| t["plan"]["count"] == n);
    if let Some(t) = at(b + 1) {
        assert!(
            t["received"].as_u64() < t["sent"].as_u64(),
            "burst {} should lose: {t}",
            b + 1
        );
    }
    assert_eq!(
        at(b).map(|t| t["received"] == t["sent"]),
        Some(true),
        "burst {b} passed"
    );
}

/// A sweep over a list with curves and repetitions, on the direct testbed: every point has its
/// repetitions, each with its own seed, and the figures carry intervals.
#[test]
fn a_sweep_runs_each_point_with_its_repetitions() {
    let _g = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().join("s.json");
    let rep = dir.path().join("rep");
    let o = gapless(&[
        "sweep",
        "--testbed",
        &bed.name,
        "--param",
        "pattern",
        "--values",
        "cbr,poisson",
        "--curves",
        "rate=5000,10000",
        "--repetitions",
        "2",
        "--duration",
        "0.5",
        "--warmup",
        "0.1",
        "--settle",
        "0.1",
        "--max-retries",
        "0",
        "--json",
        j.to_str().unwrap(),
        "--report-dir",
        rep.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r = read_json(&j);
    assert_eq!(
        r["trials"].as_array().unwrap().len(),
        8,
        "2 curves × 2 patterns × 2 repetitions"
    );
    let seeds: Vec<u64> = r["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["plan"]["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(&seeds[..2], &[1, 2], "repetition k has seed + k: {seeds:?}");
    for c in r["sweep"].as_array().unwrap() {
        for p in c["points"].as_array().unwrap() {
            assert_eq!(p["loss_pct"]["n"], 2, "{p}");
            assert_eq!(p["loss_pct"]["mean"], 0.0, "nothing lost on the direct link: {p}");
            assert!(
                p["latency_p50_ns"]["half_width"].is_number(),
                "an interval from 2 repetitions: {p}"
            );
        }
    }
    for t in r["trials"].as_array().unwrap() {
        let want = (t["plan"]["rate_pps"].as_f64().unwrap() * 0.5).round() as u64;
        let sent = t["sent"].as_u64().unwrap();
        // Poisson counts in a window spread by √n: 5σ.
        let bound = 5 * (want as f64).sqrt() as u64 + 2;
        assert!(
            sent.abs_diff(want) <= bound,
            "{want} ± {bound} frames metered per trial, got {sent}: {t}"
        );
    }
    assert!(rep.join("sweep_latency_p50.png").exists() && rep.join("trials.csv").exists());
    let summary = text(&o);
    assert!(
        summary.contains("sweep 5000 pps:") && summary.contains("poisson"),
        "{summary}"
    );
}

/// `method = "repeat"` with a calibration: the offset is subtracted from every trial's
/// latency (when the calibration is valid) and named in the result.
#[test]
fn a_repeat_experiment_subtracts_and_names_its_calibration() {
    let _g = exclusive();
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
    let body = format!(
        "method = \"repeat\"\ncalibration = \"cal.json\"\ntx = {{ iface = \"{}\", netns = \"{}\" }}\nrx = {{ iface = \"{}\", netns = \"{}\" }}\n[trial]\nrepetitions = 2\nduration_s = 0.5\nwarmup_s = 0.1\nsettle_s = 0.1\nmax_retries = 0\n[profile]\n[[profile.stream]]\nsize = 64\n[profile.stream.timing]\nrate_pps = 10000\n",
        bed.tx_if(), bed.tx_ns(), bed.rx_if(), bed.rx_ns()
    );
    let f = write(dir.path(), "rep.toml", &body);
    let j = dir.path().join("rep.json");
    let o = gapless(&["experiment", f.to_str().unwrap(), "--json", j.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    let r = read_json(&j);
    assert_eq!(r["repeat"]["loss_pct"]["n"], 2, "{}", r["repeat"]);
    assert!(
        r["calibration"]["path"].as_str().unwrap().ends_with("cal.json"),
        "{}",
        r["calibration"]
    );
    let valid = c["valid"] == true;
    assert_eq!(r["calibration"]["subtracted"], valid);
    let want = if valid {
        c["latency_offset_ns"].as_i64().unwrap()
    } else {
        0
    };
    for t in r["trials"].as_array().unwrap() {
        assert_eq!(
            t["latency"]["offset_subtracted_ns"].as_i64(),
            Some(want),
            "each trial's latency: {}",
            t["latency"]
        );
    }
    let named = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("cal.json"));
    assert!(named, "the calibration is named in the warnings: {}", r["warnings"]);
}

/// Warm-up frames are told apart by their TX time: exact counts in a pcap (scheduled times),
/// and sender and meter agree frame for frame on a live run.
#[test]
fn warm_up_frames_are_counted_apart_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let prof = write(
        dir.path(),
        "p.toml",
        "[[stream]]\nsize = 64\n[stream.timing]\nrate_pps = 1000\nduration_s = 2\n",
    );
    let pcap = dir.path().join("o.pcap");
    let tx = dir.path().join("tx.json");
    let o = gapless(&[
        "run",
        prof.to_str().unwrap(),
        "--out",
        pcap.to_str().unwrap(),
        "--warmup",
        "0.5",
        "--json",
        tx.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        read_json(&tx)["streams"][0]["warmup_frames"],
        500,
        "frames scheduled in the first 0.5 s"
    );
    let an = dir.path().join("an.json");
    let o = gapless(&[
        "analyze",
        pcap.to_str().unwrap(),
        "--warmup",
        "0.5",
        "--no-latency",
        "--json",
        an.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r = read_json(&an);
    assert_eq!(r["warmup_frames"], 500, "{}", r["warmup_frames"]);
    let s = &r["streams"][0];
    assert_eq!(
        (s["warmup_frames"].as_u64(), s["rx_frames"].as_u64()),
        (Some(500), Some(1500)),
        "{s}"
    );
    assert_eq!(
        s["seq"]["first_seq"], 500,
        "the first metered frame is the first after the warm-up"
    );

    // Live: the sender's count and the meter's agree, so nothing is lost in between.
    let _g = exclusive();
    let bed = Bed::up();
    let res = dir.path().join("live.json");
    let o = bed.run_rx(&prof, &res, &["--warmup", "0.5"]);
    assert!(o.status.success(), "{}", text(&o));
    let r = read_json(&res);
    let (txw, rx) = (&r["streams"][0]["warmup_frames"], &r["rx"]["streams"][0]);
    assert!(txw.as_u64().unwrap() > 400, "about 500 warm-up frames, got {txw}");
    assert_eq!(
        &rx["warmup_frames"], txw,
        "sender and meter count the same warm-up frames: {rx}"
    );
    assert_eq!(rx["lost_vs_tx"], 0, "{rx}");
    assert_eq!(
        rx["tx_sent"].as_u64().unwrap() + txw.as_u64().unwrap(),
        r["streams"][0]["sent_frames"].as_u64().unwrap()
    );
}

#[test]
fn bad_experiment_files_are_refused_with_the_key_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let head = "method = \"rfc2544\"\ntx = { iface = \"a\" }\nrx = { iface = \"b\" }\n";
    let cases = [
        ("missing_table.toml", format!("profile = \"p.toml\"\n{head}"), vec!["[rfc2544] table"]),
        ("typo.toml", format!("profile = \"p.toml\"\n{head}[trial]\nwarmup = 1\n[rfc2544]\nmax_rate_pps = 1\n"), vec!["unknown field `warmup`", "warmup_s"]),
        ("range.toml", format!("profile = \"p.toml\"\n{head}[rfc2544]\nmax_rate_pps = 100\nloss_tolerance_pct = [0, 150]\n"), vec!["rfc2544.loss_tolerance_pct[1] = 150"]),
        ("no_profile.toml", format!("profile = \"nothere.toml\"\n{head}[rfc2544]\nmax_rate_pps = 100\n"), vec!["nothere.toml"]),
        ("bad_inline.toml", format!("{head}[rfc2544]\nmax_rate_pps = 100\n[profile]\n[[profile.stream]]\nsize = 10\n[profile.stream.timing]\nrate_pps = 1\n"), vec!["its profile", "size"]),
    ];
    for (name, body, wants) in cases {
        let f = write(dir.path(), name, &body);
        let o = gapless(&["experiment", f.to_str().unwrap()]);
        let mut w: Vec<&str> = wants.clone();
        w.push(name);
        expect_error(&o, &w);
    }
    let o = gapless(&["experiment", dir.path().join("absent.toml").to_str().unwrap()]);
    expect_error(&o, &["absent.toml"]);
}
