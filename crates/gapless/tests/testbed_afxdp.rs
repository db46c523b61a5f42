//! AF_XDP on the testbed (root): TX in copy mode delivers every frame, with valid
//! signatures and checksums; the AF_XDP meter in native and generic mode; each AF_XDP error
//! with its fix.

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::Duration;

const CBR: &str = r#"
seed = 4
[[stream]]
name = "x"
size = { kind = "uniform", min = 64, max = 1518 }
[[stream.field]]
field = "src_port"
op = "random"
from = 1024
to = 65535
[stream.timing]
rate_pps = 50_000
count = 50_000
"#;

#[test]
fn afxdp_copy_mode_delivers_every_frame_with_valid_signatures() {
    let _x = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let prof = write(dir.path(), "p.toml", CBR);
    for mode in ["auto", "copy"] {
        let res = dir.path().join(format!("{mode}.json"));
        let cap = Capture::start(&bed, &dir.path().join(format!("{mode}.pcap")));
        let o = bed.run_rx(&prof, &res, &["--backend", "afxdp", "--xdp-mode", mode]);
        let pcap = cap.stop();
        assert!(o.status.success(), "{mode}: {}", text(&o));
        let r = read_json(&res);
        assert_eq!(r["backend"], "afxdp");
        assert!(
            r["backend_detail"].as_str().unwrap().contains("copy mode"),
            "veth has copy mode only: {}",
            r["backend_detail"]
        );
        assert_eq!(r["sent_frames"], 50_000);
        assert_eq!(r["send_errors"], 0);
        let s = &r["rx"]["streams"][0];
        assert_eq!(s["lost_vs_tx"], 0, "{mode}: every frame arrives: {s}");
        assert_eq!(s["seq"]["reordered"], 0);
        assert_eq!(s["seq"]["duplicated"], 0);
        assert!(s["latency"]["min_ns"].as_i64().unwrap() > 0);
        // Checksums and sizes of what tcpdump saw, frame by frame.
        let frames = read_pcap(&pcap);
        let ours: Vec<_> = frames
            .iter()
            .filter(|(_, f)| f.len() >= 60 && f[12..14] == [0x08, 0x00] && f[23] == 17)
            .collect();
        assert_eq!(ours.len(), 50_000, "{mode}");
        let mut sizes = std::collections::BTreeSet::new();
        for (_, f) in &ours {
            check_frame(f);
            sizes.insert(f.len());
        }
        assert!(
            sizes.len() > 500 && *sizes.last().unwrap() == 1514,
            "sizes up to 1518 B with FCS"
        );
    }
}

#[test]
fn afxdp_errors_name_the_fix() {
    let _x = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let prof = write(
        dir.path(),
        "p.toml",
        "[[stream]]\nsize = 64\n[stream.timing]\nrate_pps = 1000\nduration_s = 3\n",
    );
    expect_error(
        &bed.run(&prof, &["--backend", "afxdp", "--xdp-mode", "zerocopy", "-q"]),
        &["refuses AF_XDP zero-copy (EOPNOTSUPP)", "--xdp-mode copy"],
    );
    expect_error(
        &bed.run(&prof, &["--backend", "afxdp", "--xdp-queue", "7", "-q"]),
        &["queue 7", "ethtool -l"],
    );
    // The profile can choose the backend; a bad choice names the good ones.
    let bad = write(
        dir.path(),
        "bad.toml",
        "[output]\nbackend = \"dpdk\"\n[[stream]]\n[stream.timing]\nrate_pps = 10\ncount = 1\n",
    );
    expect_error(
        &bed.run(&bad, &["-q"]),
        &["unknown variant `dpdk`", "afpacket", "afxdp"],
    );
    let good = write(
        dir.path(),
        "good.toml",
        "[output]\nbackend = \"afxdp\"\n[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 100\n",
    );
    let res = dir.path().join("good.json");
    let o = bed.run(&good, &["-q", "--json", res.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read_json(&res)["backend"], "afxdp");
    // A second AF_XDP socket on a queue that one already owns.
    let (ns, ifc) = (bed.tx_ns(), bed.tx_if());
    let _first = KillOnDrop(Some(
        Command::new(bin())
            .args([
                "run",
                prof.to_str().unwrap(),
                "--netns",
                &ns,
                "--iface",
                &ifc,
                "--backend",
                "afxdp",
                "-q",
                "--duration",
                "8",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    ));
    std::thread::sleep(Duration::from_millis(1500));
    let o = bed.run(&prof, &["--backend", "afxdp", "-q"]);
    drop(_first);
    expect_error(&o, &["queue 0 of", "is busy", "--xdp-queue"]);
    // A frame larger than a UMEM frame (4 KiB): raise the MTU so the interface allows it.
    let mtu = Command::new("ip")
        .args(["-n", &ns, "link", "set", &ifc, "mtu", "9000"])
        .status()
        .unwrap();
    assert!(mtu.success());
    let big = write(
        dir.path(),
        "big.toml",
        "[[stream]]\nname = \"jumbo\"\nsize = 6000\n[stream.timing]\nrate_pps = 1000\ncount = 10\n",
    );
    expect_error(
        &bed.run(&big, &["--backend", "afxdp", "-q"]),
        &[
            "\"jumbo\" has frames of up to 6000 B but an AF_XDP UMEM frame holds",
            "--backend afpacket",
        ],
    );
}

/// `ip -d link show` of an interface in a namespace.
fn link_detail(ns: &str, ifc: &str) -> String {
    let o = Command::new("ip")
        .args(["-n", ns, "-d", "link", "show", "dev", ifc])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn afxdp_meter_receives_every_frame_in_native_and_generic_mode() {
    let _x = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let prof = write(dir.path(), "p.toml", CBR);
    // A calibration of the native AF_XDP meter.
    let cal = dir.path().join("cal.json");
    let (tx_if, tx_ns, rx_if, rx_ns) = (bed.tx_if(), bed.tx_ns(), bed.rx_if(), bed.rx_ns());
    let o = gapless(&[
        "calibrate",
        "--tx",
        &tx_if,
        "--tx-netns",
        &tx_ns,
        "--rx",
        &rx_if,
        "--rx-netns",
        &rx_ns,
        "--rate-pps",
        "20000",
        "--duration",
        "1",
        "--rx-backend",
        "afxdp",
        "--xdp-attach",
        "native",
        "--out",
        cal.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let c = read_json(&cal);
    let offset = c["latency_offset_ns"].as_i64().unwrap();
    assert!(offset > 0, "{offset}");
    // A calibration made while the machine was busy is invalid (it says why), and runs then
    // subtract nothing: the rest of the test checks against what was subtracted.
    let subtracted = if c["valid"] == true { offset } else { 0 };
    eprintln!("calibration valid: {}, reason: {}", c["valid"], c["invalid_reason"]);
    // Native with AF_XDP at both ends; generic behind AF_PACKET.
    for (attach, tx) in [("native", "afxdp"), ("generic", "afpacket")] {
        let res = dir.path().join(format!("{attach}.json"));
        let o = bed.run_rx(
            &prof,
            &res,
            &[
                "--backend",
                tx,
                "--rx-backend",
                "afxdp",
                "--xdp-attach",
                attach,
                "--calibration",
                cal.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{attach}: {}", text(&o));
        let r = read_json(&res);
        let rx = &r["rx"];
        // The calibration holds for the stamps it was made with, and says so otherwise.
        let warned = rx["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("was made with other RX stamps"));
        assert_eq!(warned, attach == "generic", "{attach}: {}", rx["warnings"]);
        assert_eq!(rx["streams"][0]["latency"]["offset_subtracted_ns"], subtracted);
        let method = rx["capture"]["method"].as_str().unwrap();
        assert!(
            method.contains("AF_XDP") && method.contains(&format!("attached {attach}")) && method.contains("copy mode"),
            "{method}"
        );
        assert_eq!(rx["capture"]["kernel_drops"], 0, "{attach}");
        // The stamp the probe kept: the metadata one, unless the run names the kernel's
        // refusal of it (issue 66: a kernel build that refused bpf_xdp_adjust_meta).
        let stamp = rx["verdict"]["rx_stamp"].as_str().unwrap().to_string();
        if stamp != "xdp-metadata" {
            let w = rx["warnings"].to_string();
            assert!(
                w.contains("this kernel refused the metadata stamp's program (gapless_rx)"),
                "{attach}: the probe kept {stamp}, so the warnings must name the refusal, got {w}"
            );
        }
        if stamp == "socket" {
            assert_eq!(rx["verdict"]["complete"], false, "{attach}: {}", rx["verdict"]);
            assert_eq!(rx["streams"][0]["rx_frames"], 50_000, "{attach}");
            continue;
        }
        assert!(
            rx["capture"].get("user_stamped").is_none(),
            "every frame has the XDP stamp"
        );
        let src = rx["rx_timestamp_source"].as_str().unwrap();
        assert!(src.contains("XDP hook") && src.contains(attach), "{src}");
        // Every frame arrived, each with a valid signature (only those count for the stream).
        let s = &rx["streams"][0];
        assert_eq!(s["rx_frames"], 50_000, "{attach}: {s}");
        assert_eq!(s["lost_vs_tx"], 0);
        assert_eq!(s["seq"]["reordered"], 0);
        assert_eq!(s["seq"]["duplicated"], 0);
        let lat = &s["latency"];
        // Raw latency (the offset added back) is positive: the XDP stamp is on the sender's
        // clock.
        let (min, p50) = (
            lat["min_ns"].as_i64().unwrap(),
            lat["percentiles_ns"]["p50"].as_i64().unwrap(),
        );
        assert!(
            min + subtracted > 0 && p50 + subtracted < 1_000_000,
            "latency over a veth: {lat}"
        );
        let sink = s["interarrival"]["rate_pps"].as_f64().unwrap();
        held_or_honest(&r, &[(0, sink)], || {
            let err = s["interarrival"]["rate_error_rel"].as_f64().unwrap();
            assert!(err.abs() < 0.01, "expected |sink rate error| < 1 %, got {err}");
        });
        // The program left with the meter.
        let link = link_detail(&bed.rx_ns(), &bed.rx_if());
        assert!(
            !link.contains("prog/xdp"),
            "the XDP program is detached after the run: {link}"
        );
    }
}

#[test]
fn afxdp_meter_falls_back_to_generic_and_names_each_error() {
    let _x = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let (ns, rx_if) = (bed.rx_ns(), bed.rx_if());
    let ip = |args: &[&str]| {
        let o = Command::new("ip").arg("-n").arg(&ns).args(args).output().unwrap();
        assert!(
            o.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    // A bridge has no native XDP: auto falls back to generic; native is refused.
    ip(&["link", "add", "gd0", "type", "bridge"]);
    ip(&["link", "set", "gd0", "up"]);
    let res = dir.path().join("dummy.json");
    let o = gapless(&[
        "measure",
        "--iface",
        "gd0",
        "--netns",
        &ns,
        "--rx-backend",
        "afxdp",
        "--duration",
        "0.3",
        "-q",
        "--json",
        res.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let method = read_json(&res)["capture"]["method"].as_str().unwrap().to_string();
    assert!(method.contains("attached generic"), "{method}");
    let measure = |extra: &[&str]| {
        let mut a = vec![
            "measure",
            "--netns",
            &ns,
            "--rx-backend",
            "afxdp",
            "--duration",
            "0.3",
            "-q",
        ];
        a.extend_from_slice(extra);
        gapless(&a)
    };
    expect_error(
        &measure(&["--iface", "gd0", "--xdp-attach", "native"]),
        &["attaching XDP natively to gd0", "no native XDP", "--xdp-attach generic"],
    );
    // No such queue.
    expect_error(
        &measure(&["--iface", &rx_if, "--rx-queue", "5"]),
        &["queue 5", "ethtool -l"],
    );
    // Hardware stamps are AF_PACKET's.
    expect_error(
        &measure(&["--iface", &rx_if, "--timestamps", "hardware"]),
        &["--timestamps hardware needs --rx-backend afpacket"],
    );
    // Another program already on the interface (here one loaded by iproute2).
    let obj = concat!(env!("CARGO_MANIFEST_DIR"), "/../gapless-io/xdp/gapless_xdp.o");
    ip(&["link", "set", "dev", &rx_if, "xdpgeneric", "obj", obj, "sec", "xdp"]);
    let o = measure(&["--iface", &rx_if]);
    ip(&["link", "set", "dev", &rx_if, "xdpgeneric", "off"]);
    expect_error(
        &o,
        &[
            "already has an XDP program attached",
            "xdp off",
            "--rx-backend afpacket",
        ],
    );
    // AF_PACKET meters beside it.
    ip(&["link", "set", "dev", &rx_if, "xdpgeneric", "obj", obj, "sec", "xdp"]);
    let o = gapless(&["measure", "--netns", &ns, "--iface", &rx_if, "--duration", "0.3", "-q"]);
    ip(&["link", "set", "dev", &rx_if, "xdpgeneric", "off"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Each RX stamp the probe can fall back to, forced with `--xdp-stamp` on this kernel (which
/// takes all three programs): every frame arrives and is counted at its sent size (the prefix
/// program's 16 bytes are cut off), and the verdict names the stamp. Kernel stamps keep the
/// verdict complete; the socket stamp makes it INCOMPLETE, naming the meter's own stamps.
#[test]
fn afxdp_meter_counts_every_frame_with_each_rx_stamp_and_the_verdict_names_it() {
    let _x = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let prof = write(dir.path(), "p.toml", CBR);
    for (stamp, attach, tx) in [
        ("prefix", "generic", "afpacket"),
        ("prefix", "native", "afxdp"),
        ("socket", "generic", "afpacket"),
        ("metadata", "generic", "afpacket"),
    ] {
        let what = format!("--xdp-stamp {stamp} --xdp-attach {attach}");
        let res = dir.path().join(format!("{stamp}-{attach}.json"));
        let o = bed.run_rx(
            &prof,
            &res,
            &[
                "--backend",
                tx,
                "--rx-backend",
                "afxdp",
                "--xdp-attach",
                attach,
                "--xdp-stamp",
                stamp,
            ],
        );
        assert!(o.status.success(), "{what}: {}", text(&o));
        let r = read_json(&res);
        let rx = &r["rx"];
        let s = &rx["streams"][0];
        assert_eq!(s["rx_frames"], 50_000, "{what}: {s}");
        assert_eq!(s["lost_vs_tx"], 0, "{what}");
        assert_eq!(
            (s["seq"]["reordered"].as_u64(), s["seq"]["duplicated"].as_u64()),
            (Some(0), Some(0))
        );
        // Sent bytes count the FCS, received ones do not.
        assert_eq!(
            s["rx_bytes_l2"].as_u64().unwrap() + 4 * 50_000,
            r["streams"][0]["sent_bytes_l2"].as_u64().unwrap(),
            "{what}: every frame counted at the size it was sent (the prefix cut off)"
        );
        let v = &rx["verdict"];
        let src = rx["rx_timestamp_source"].as_str().unwrap();
        match stamp {
            "socket" => {
                assert_eq!(v["rx_stamp"], "socket", "{what}: {v}");
                assert_eq!(
                    rx["capture"]["user_stamped"], 50_000,
                    "{what}: every frame is the meter's"
                );
                assert_eq!(v["complete"], false, "{what}: {v}");
                assert!(
                    v["reasons"]
                        .to_string()
                        .contains("stamped by the meter, not the kernel"),
                    "{what}: expected the verdict to name the meter's stamps, got {v}"
                );
                assert!(src.contains("as it read the AF_XDP ring"), "{what}: {src}");
            }
            _ => {
                assert_eq!(v["rx_stamp"], format!("xdp-{stamp}"), "{what}: {v}");
                assert!(
                    rx["capture"].get("user_stamped").is_none(),
                    "{what}: every frame has the kernel's stamp, got {}",
                    rx["capture"]
                );
                assert!(
                    src.contains("XDP hook")
                        && src.contains(if stamp == "prefix" {
                            "16 bytes before the frame"
                        } else {
                            "XDP metadata"
                        }),
                    "{what}: {src}"
                );
                // The kernel's stamp is on the sender's clock: a veth's latency.
                let p50 = s["latency"]["percentiles_ns"]["p50"].as_i64().unwrap();
                assert!(
                    (0..1_000_000).contains(&p50),
                    "{what}: expected a latency p50 in 0..1 ms, got {p50} ns"
                );
            }
        }
        assert!(
            !link_detail(&bed.rx_ns(), &bed.rx_if()).contains("prog/xdp"),
            "{what}: the XDP program is detached after the run"
        );
    }
}
