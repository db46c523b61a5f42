//! The command line without a network: pcap and null backends, bad input, Ctrl-C, late
//! policies.

mod common;
use common::*;

use std::time::Duration;

const MIXED: &str = r#"
seed = 11
[[stream]]
name = "poisson-imix"
size = { imix = "simple" }
[[stream.field]]
field = "ip_src"
op = "random"
from = "198.18.0.1"
to = "198.18.0.254"
[stream.timing]
pattern = "poisson"
rate_pps = 50000
count = 20000

[[stream]]
name = "pareto"
size = { kind = "uniform", min = 78, max = 1518 }
[stream.template]
l4 = "tcp"
vlan = [{ id = 7 }]
[stream.timing]
pattern = "distribution"
dist = { kind = "pareto", shape = 1.8 }
rate_bps_l1 = 1e9
count = 20000

[[stream]]
name = "onoff"
[stream.timing]
pattern = "bursty"
burst_size = { kind = "uniform", min = 1, max = 32, mean = 16 }
off = { kind = "exponential" }
rate_pps = 20000
count = 20000
"#;

#[test]
fn same_profile_and_seed_give_the_same_pcap_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "p.toml", MIXED);
    let run = |out: &str, extra: &[&str]| {
        let path = dir.path().join(out);
        let mut args = vec!["run", p.to_str().unwrap(), "--out", path.to_str().unwrap(), "-q"];
        args.extend_from_slice(extra);
        let o = gapless(&args);
        assert!(o.status.success(), "{}", text(&o));
        std::fs::read(path).unwrap()
    };
    let a = run("a.pcap", &[]);
    let b = run("b.pcap", &[]);
    let c = run("c.pcap", &["--seed", "12"]);
    assert!(a.len() > 60_000 * 60);
    assert_eq!(a, b, "same seed, different pcap");
    assert_ne!(a, c, "another seed gave the same pcap");

    // The file's own timing is the schedule: merged streams in time order, 60000 frames.
    let frames = read_pcap(&dir.path().join("a.pcap"));
    assert_eq!(frames.len(), 60_000);
    assert!(frames.windows(2).all(|w| w[0].0 <= w[1].0), "pcap not in time order");
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn bad_input_gets_a_clear_message_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "malformed.toml",
            "[[stream]\nrate_pps = ",
            &["TOML parse error", "line 1"],
        ),
        (
            "unknown.toml",
            "[[stream]]\n[stream.timing]\nrate_pps = 1\nburts = 4\n",
            &["unknown field `burts`", "expected one of"],
        ),
        (
            "zero.toml",
            "[[stream]]\n[stream.timing]\nrate_pps = 0\ncount = 1\n",
            &["stream[0].timing.rate_pps: 0 is not a positive number", "Fix:"],
        ),
        (
            "negative.toml",
            "[[stream]]\n[stream.timing]\nrate_bps_l2 = -1\ncount = 1\n",
            &["stream[0].timing.rate_bps_l2: -1 is not a positive number"],
        ),
        (
            "link.toml",
            "link_speed_bps = 1e9\n[[stream]]\n[stream.timing]\nrate_pps = 2e6\ncount = 1\n",
            &["above the link speed of 1.0000 Gbit/s", "Fix: lower the rate"],
        ),
        (
            "unbounded.toml",
            "[[stream]]\n[stream.timing]\nrate_pps = 10\n",
            &["a pcap output needs every stream to end", "Fix:"],
        ),
    ];
    for (name, body, wants) in cases {
        let p = write(dir.path(), name, body);
        let out = dir.path().join("o.pcap");
        let o = gapless(&["run", p.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
        let t = text(&o);
        assert!(t.starts_with("error: "), "{name}: {t}");
        for w in *wants {
            assert!(t.contains(w), "{name}: expected {w:?} in {t}");
        }
        assert!(!out.exists(), "{name}: an output file was written");
    }
    let o = gapless(&["run", "/nonexistent/p.toml", "--null"]);
    assert!(
        text(&o).contains("cannot read profile /nonexistent/p.toml") && text(&o).contains("Fix:"),
        "{}",
        text(&o)
    );
    let p = write(
        dir.path(),
        "ok.toml",
        "[[stream]]\n[stream.timing]\nrate_pps = 10\ncount = 1\n",
    );
    let o = gapless(&["run", p.to_str().unwrap()]);
    assert!(text(&o).contains("no output: give --iface IF"), "{}", text(&o));
    let o = gapless(&["run", p.to_str().unwrap(), "--null", "--duration", "-1"]);
    assert!(
        text(&o).contains("--duration -1: give a positive number"),
        "{}",
        text(&o)
    );
}

#[test]
fn ctrl_c_still_writes_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "p.toml", "[[stream]]\n[stream.timing]\nrate_pps = 100000\n");
    let json = dir.path().join("r.json");
    let child = std::process::Command::new(bin())
        .args([
            "run",
            p.to_str().unwrap(),
            "--null",
            "--pace",
            "on",
            "--json",
            json.to_str().unwrap(),
            "-q",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    let r: serde_json::Value = read_json(&json);
    assert_eq!(r["interrupted"], true);
    assert_eq!(r["stop_reason"], "interrupted (signal)");
    let sent = r["sent_frames"].as_u64().unwrap();
    // About 1 s at 100 kpps (the process also needs a moment to start).
    assert!((50_000..=130_000).contains(&sent), "sent {sent}");
    assert!(r["lateness"]["count"].as_u64().unwrap() == sent);
    assert!(String::from_utf8_lossy(&o.stdout).contains("interrupted (signal)"));
}

/// 50 Mpps for 0.05 s on the paced null backend: far beyond what the loop can do, so every
/// departure is late and each policy shows its nature.
#[test]
fn late_policies_catch_up_skip_and_shift() {
    let dir = tempfile::tempdir().unwrap();
    let run = |policy: &str| -> serde_json::Value {
        let p = write(
            dir.path(),
            &format!("{policy}.toml"),
            &format!("on_late = \"{policy}\"\n[[stream]]\n[stream.timing]\nrate_pps = 5e7\nduration_s = 0.05\n"),
        );
        let json = dir.path().join(format!("{policy}.json"));
        let o = gapless(&[
            "run",
            p.to_str().unwrap(),
            "--null",
            "--pace",
            "on",
            "--json",
            json.to_str().unwrap(),
            "-q",
        ]);
        assert!(o.status.success(), "{}", text(&o));
        read_json(&json)
    };
    let scheduled = 2_500_000u64;
    let c = run("catch-up");
    assert_eq!(c["late"]["policy"], "catch-up");
    assert_eq!(
        c["sent_frames"].as_u64().unwrap(),
        scheduled,
        "catch-up sends every departure"
    );
    assert!(c["late"]["events"].as_u64().unwrap() > 0);
    assert!(c["lateness"]["late_over_one_gap"].as_u64().unwrap() > 0);

    let s = run("skip");
    let sent = s["sent_frames"].as_u64().unwrap();
    let skipped = s["late"]["skipped_frames"].as_u64().unwrap();
    assert!(skipped > 0 && sent < scheduled, "sent {sent} skipped {skipped}");
    assert_eq!(sent + skipped, scheduled, "every departure is either sent or skipped");

    let h = run("shift");
    assert_eq!(
        h["sent_frames"].as_u64().unwrap(),
        scheduled,
        "shift sends every departure, later"
    );
    assert!(h["late"]["shifted_ns"].as_u64().unwrap() > 0);
    assert!(h["duration_ns"].as_u64().unwrap() > 50_000_000);
}

/// Every profile in examples/ runs (0.2 s of it, to a pcap), every frame parses with valid
/// checksums, and each stream's mean rate in the file is near its target.
#[test]
fn every_example_runs_and_its_frames_are_valid() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    for e in std::fs::read_dir(&examples).unwrap() {
        let path = e.unwrap().path();
        if path.extension().and_then(|x| x.to_str()) != Some("toml") {
            continue;
        }
        // Experiment files (rfc2544_dut.toml) are run by tests/experiments.rs.
        if std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .any(|l| l.starts_with("method = "))
        {
            continue;
        }
        n += 1;
        let out = dir.path().join("x.pcap");
        let json = dir.path().join("x.json");
        let o = gapless(&[
            "run",
            path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "--duration",
            "0.2",
            "-q",
        ]);
        assert!(o.status.success(), "{}: {}", path.display(), text(&o));
        let frames = read_pcap(&out);
        assert!(!frames.is_empty(), "{}", path.display());
        let profile = std::fs::read_to_string(&path).unwrap();
        if profile.contains("[stream.replay]") {
            // The example rewrites ip_dst and signs UDP/TCP payload tails: IPv4 frames go to
            // 198.18.0.2 with a valid header checksum, at a captured length; the rest (ARP)
            // leave as captured, byte for byte.
            let src = read_pcap(&examples.join("replay-sample.pcap"));
            let lens: std::collections::HashSet<usize> = src.iter().map(|(_, f)| f.len()).collect();
            let same: std::collections::HashSet<&[u8]> = src.iter().map(|(_, f)| f.as_slice()).collect();
            for (_, f) in &frames {
                assert!(
                    lens.contains(&f.len()),
                    "{}: a {} B frame, no such length in the capture",
                    path.display(),
                    f.len()
                );
                match etherparse::PacketHeaders::from_ethernet_slice(f)
                    .ok()
                    .and_then(|h| h.net)
                {
                    Some(etherparse::NetHeaders::Ipv4(ip, _)) => {
                        assert_eq!(
                            ip.destination,
                            [198, 18, 0, 2],
                            "{}: ip_dst not rewritten",
                            path.display()
                        );
                        assert_eq!(
                            ip.header_checksum,
                            ip.calc_header_checksum(),
                            "{}: IPv4 checksum",
                            path.display()
                        );
                    }
                    _ => assert!(
                        same.contains(f.as_slice()),
                        "{}: a non-IPv4 frame not in the capture",
                        path.display()
                    ),
                }
            }
            assert!(
                frames.len() <= 3 * src.len(),
                "{}: at most 3 loops of {} frames, got {}",
                path.display(),
                src.len(),
                frames.len()
            );
            continue;
        }
        for (_, f) in &frames {
            let h = check_frame(f);
            assert!(h.transport.is_some(), "{}: no transport header", path.display());
        }
        let r: serde_json::Value = read_json(&json);
        for s in r["streams"].as_array().unwrap() {
            let (t, a, sent) = (
                s["target_pps"].as_f64().unwrap(),
                s["achieved_pps"].as_f64().unwrap(),
                s["sent_frames"].as_u64().unwrap(),
            );
            // 0.2 s of a random pattern: allow 6 standard errors of a Poisson count, and more
            // for heavy tails and bursts.
            let tol = 6.0 / (sent.max(1) as f64).sqrt() + 0.01;
            if sent > 200 && !s["name"].as_str().unwrap().starts_with("onoff") && s["name"] != "pareto" {
                assert!(
                    (a / t - 1.0).abs() < tol.max(0.05),
                    "{} {}: achieved {a} vs target {t}",
                    path.display(),
                    s["name"]
                );
            }
        }
    }
    assert!(n >= 9, "only {n} examples found");
}

/// `[output]` in the profile chooses the output when the command line does not; the command
/// line wins when it does.
#[test]
fn profile_output_table_and_command_line_precedence() {
    let dir = tempfile::tempdir().unwrap();
    let from_profile = dir.path().join("from-profile.pcap");
    let p = write(
        dir.path(),
        "p.toml",
        &format!(
            "[output]\npcap = \"{}\"\n[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 5\n",
            from_profile.display()
        ),
    );
    let o = gapless(&["run", p.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read_pcap(&from_profile).len(), 5);

    std::fs::remove_file(&from_profile).unwrap();
    let o = gapless(&["run", p.to_str().unwrap(), "--null", "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("null"), "{}", text(&o));
    assert!(!from_profile.exists(), "--null should win over the profile's pcap");
}

/// tshark, a parser that shares no code with gapless, validates the IPv4, UDP, TCP, ICMP and
/// ICMPv6 checksums of every header stack (no VLAN, 802.1Q, QinQ) x (IPv4, IPv6) x
/// (UDP, TCP, ICMP echo), with random sizes and a field op on the pseudo header's source.
#[test]
fn tshark_validates_every_protocol_combination() {
    let mut profile = String::from("seed = 5\n");
    for v in [
        "",
        "vlan = [{ id = 100, pcp = 5 }]",
        "vlan = [{ id = 10 }, { id = 20, pcp = 3 }]",
    ] {
        for (s, d, hi) in [
            ("198.18.0.1", "198.18.0.2", "198.18.0.9"),
            ("2001:2::1", "2001:2::2", "2001:2::9"),
        ] {
            for l4 in ["udp", "tcp", "icmp"] {
                profile += &format!(
                    "[[stream]]\nsize = {{ kind = \"uniform\", min = 110, max = 301 }}\n\
                     [[stream.field]]\nfield = \"ip_src\"\nop = \"random\"\nfrom = \"{s}\"\nto = \"{hi}\"\n\
                     [stream.template]\n{v}\nip_src = \"{s}\"\nip_dst = \"{d}\"\nl4 = \"{l4}\"\ndscp = 10\n\
                     payload = {{ pattern = \"random\" }}\n[stream.timing]\nrate_pps = 1000\ncount = 50\n"
                );
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "combos.toml", &profile);
    let pcap = dir.path().join("combos.pcap");
    let o = gapless(&["run", p.to_str().unwrap(), "--out", pcap.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = std::process::Command::new("tshark")
        .args([
            "-r",
            pcap.to_str().unwrap(),
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
        ])
        .args(["-o", "tcp.check_checksum:TRUE", "-T", "fields", "-e", "frame.protocols"])
        .args([
            "-e",
            "ip.checksum.status",
            "-e",
            "udp.checksum.status",
            "-e",
            "tcp.checksum.status",
        ])
        .args(["-e", "icmp.checksum.status", "-e", "icmpv6.checksum.status"])
        .output()
        .expect("tshark (apt-get install tshark)");
    let out = String::from_utf8_lossy(&t.stdout);
    let mut stacks = std::collections::BTreeMap::new();
    for line in out.lines() {
        let mut cols = line.split('\t');
        let protos = cols.next().unwrap().trim_end_matches(":data").to_string();
        let statuses: Vec<&str> = cols.filter(|c| !c.is_empty()).collect();
        // One status for IPv6 (no header checksum), two for IPv4; "1" is Good.
        assert!(!statuses.is_empty() && statuses.iter().all(|s| *s == "1"), "{line}");
        *stacks.entry(protos).or_insert(0) += 1;
    }
    assert_eq!(stacks.len(), 18, "{stacks:?}");
    assert!(stacks.values().all(|n| *n == 50), "{stacks:?}");
}

#[test]
fn throughput_mode_reports_the_bursts_its_batches_make() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "b.toml",
        "[[stream]]\nname = \"cbr\"\nsize = 64\n[stream.timing]\nrate_pps = 100_000\ncount = 20_000\n",
    );
    let j = dir.path().join("b.json");
    let o = gapless(&[
        "run",
        p.to_str().unwrap(),
        "--null",
        "--pace",
        "on",
        "--batch",
        "8",
        "-q",
        "--json",
        j.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("throughput mode, batch 8"), "{t}");
    let r: serde_json::Value = read_json(&j);
    assert!(r["rate_control"].as_str().unwrap().contains("throughput mode"));
    let s = &r["streams"][0];
    assert_eq!(s["sent_frames"], 20_000);
    let e = &s["early"];
    assert_eq!(e["batch"], 8);
    // 2500 sends of 8 frames: frame k of a send is scheduled k gaps (10 µs) after the first,
    // so 7 of 8 leave early (17 500), by up to 70 µs, on an idle machine. A loaded one (CI runs
    // tests side by side on 2 cores) falls behind now and then, and a batch sent behind
    // schedule has fewer early frames: the bounds hold for both.
    let early = e["count"].as_u64().unwrap();
    assert_eq!(early + s["lateness"]["count"].as_u64().unwrap(), 20_000);
    let f = e["burst_fraction"].as_f64().unwrap();
    assert_eq!((f * 20_000.0).round() as u64, e["over_half_gap"].as_u64().unwrap());
    assert!(
        e["max_ns"].as_u64().unwrap() <= 70_100,
        "expected no frame more than 7 gaps early: {e}"
    );
    held_or_honest(&r, &[], || {
        assert!(
            (5_000..=17_500).contains(&early),
            "expected 5 000..17 500 early frames, got {early}: {e}"
        );
        assert!(
            (0.25..=0.875).contains(&f),
            "expected a burst fraction of 0.25..0.875, got {f}: {e}"
        );
        // The mean rate still holds.
        let err = s["rate_error_rel"].as_f64().unwrap();
        assert!(err.abs() < 0.01, "expected |rate error| < 1 %, got {err}");
    });
    // Precise mode has no early frames and no `early` block.
    let o = gapless(&[
        "run",
        p.to_str().unwrap(),
        "--null",
        "--pace",
        "on",
        "-q",
        "--json",
        j.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let r: serde_json::Value = read_json(&j);
    assert!(r["streams"][0].get("early").is_none());
    expect_error(
        &gapless(&["run", p.to_str().unwrap(), "--null", "--batch", "0"]),
        &["--batch 0"],
    );
}

#[test]
fn streams_placed_on_cores_and_the_phase_split() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "placed.toml",
        "[[stream]]\nname = \"a\"\ncore = 0\n[stream.timing]\nrate_pps = 20_000\ncount = 2000\n\
         [[stream]]\nname = \"b\"\ncore = 1\n[stream.timing]\nrate_pps = 20_000\ncount = 2000\n\
         [[stream]]\nname = \"c\"\n[stream.timing]\nrate_pps = 20_000\ncount = 2000\npattern = \"poisson\"\n",
    );
    let j = dir.path().join("placed.json");
    // Without --cores, the streams' cores make the send loops.
    let o = gapless(&[
        "run",
        p.to_str().unwrap(),
        "--null",
        "-q",
        "--json",
        j.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = read_json(&j);
    let s = &r["streams"];
    assert_eq!(s[0]["cores"], serde_json::json!([0]));
    assert_eq!(s[1]["cores"], serde_json::json!([1]));
    // The Poisson stream is split over both loops.
    assert_eq!(s[2]["cores"], serde_json::json!([0, 1]));
    assert_eq!(s[2]["split"]["kind"], "poisson");
    assert_eq!(s[2]["lanes"], 2);
    for st in s.as_array().unwrap() {
        assert_eq!(st["sent_frames"], 2000, "{st}");
    }
    // A core the loops do not run on.
    expect_error(
        &gapless(&["run", p.to_str().unwrap(), "--null", "-q", "--cores", "0"]),
        &["stream \"b\" is placed on core 1", "list core 1 in --cores"],
    );
    // The opt-in phase-shifted CBR split.
    let cbr = write(
        dir.path(),
        "cbr.toml",
        "[[stream]]\nname = \"cbr\"\n[stream.timing]\nrate_pps = 20_000\ncount = 20_000\n",
    );
    let j = dir.path().join("phase.json");
    let o = gapless(&[
        "run",
        cbr.to_str().unwrap(),
        "--null",
        "--pace",
        "on",
        "--cores",
        "0,1",
        "--split-cbr",
        "--json",
        j.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("cbr: split (phase) over 2 send loops on cores [0, 1]"),
        "{t}"
    );
    let r: serde_json::Value = read_json(&j);
    let s = &r["streams"][0];
    assert_eq!(s["sent_frames"], 20_000);
    assert_eq!(s["split"]["kind"], "phase");
    assert_eq!(s["split"]["parts"], 2);
    assert_eq!(s["split"]["gap_ns"], 50_000.0);
    let over = s["split"]["late_over_half_gap"].as_u64().unwrap();
    let frac = s["split"]["late_over_half_gap_fraction"].as_f64().unwrap();
    assert!((frac * 20_000.0 - over as f64).abs() < 1.0, "{s}");
    held_or_honest(&r, &[], || {
        let err = s["rate_error_rel"].as_f64().unwrap();
        assert!(err.abs() < 0.01, "expected |rate error| < 1 %, got {err}");
    });
}
