//! AF_XDP TX on the testbed (root): copy mode over veth delivers every frame, with valid
//! signatures and checksums; and each AF_XDP error with its fix.

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

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

fn json(p: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

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
        let r = json(&res);
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
    assert_eq!(json(&res)["backend"], "afxdp");
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
