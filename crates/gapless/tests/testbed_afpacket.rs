//! On the veth testbed, as root: AF_PACKET at 100 kpps CBR for 2 s. Every frame arrives,
//! the signatures are in sequence, the checksums are valid (tshark and etherparse agree),
//! and the sink's timing matches the target.

mod common;
use common::*;

use etherparse::{NetHeaders, TransportHeader};

#[test]
fn afpacket_100kpps_cbr_every_frame_arrives_in_sequence_with_valid_checksums() {
    cbr_run_arrives_whole("sendmmsg", 100_000, 2);
}

#[test]
fn afpacket_tx_ring_delivers_the_same() {
    cbr_run_arrives_whole("ring", 50_000, 1);
}

/// Sends `pps` CBR for `secs` s with the given --tx-method and checks what tcpdump saw.
fn cbr_run_arrives_whole(method: &str, pps: u32, secs: u32) {
    let _one_at_a_time = exclusive();
    let n = pps * secs;
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let profile = write(
        dir.path(),
        "p.toml",
        &format!("seed = 3\n[[stream]]\nname = \"s\"\nsize = 64\n[[stream.field]]\nfield = \"src_port\"\nop = \"inc\"\nfrom = 1000\nto = 1999\n[stream.timing]\nrate_pps = {pps}\nduration_s = {secs}\n"),
    );
    let cap = Capture::start(&bed, &dir.path().join("rx.pcap"));
    let json = dir.path().join("r.json");
    let o = bed.run(
        &profile,
        &["--json", json.to_str().unwrap(), "-q", "--tx-method", method],
    );
    let rx = cap.stop();
    assert!(o.status.success(), "{}", text(&o));

    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["backend"], "afpacket");
    assert_eq!(r["sent_frames"], n);
    let want = if method == "ring" { "PACKET_TX_RING" } else { "sendmmsg" };
    assert!(
        r["backend_detail"].as_str().unwrap().contains(want),
        "{}",
        r["backend_detail"]
    );
    assert_eq!(r["send_errors"], 0);
    assert_eq!(r["interrupted"], false);
    assert_eq!(r["environment"]["driver"], "veth");
    assert!(r["rate_control"].as_str().unwrap().starts_with("software-pacing"));
    // From the first and last send times only, so a host stall on the last frame (up to
    // 10 ms here) can move it: a sanity bound. The sink check below is the strict one.
    let err = r["streams"][0]["rate_error_rel"].as_f64().unwrap();

    // Independent check 1: our signatures and etherparse's checksum code.
    let frames = read_pcap(&rx);
    let mut seqs = Vec::new();
    let mut times = Vec::new();
    let mut lat = Vec::new();
    for (ts, f) in &frames {
        let h = check_frame(f);
        let payload = h.payload.slice();
        // Only our UDP frames: the receiver's ICMP port-unreachable replies quote our frames
        // (signature included) and are not ours.
        let (Some(NetHeaders::Ipv4(ip, _)), Some(TransportHeader::Udp(u))) = (&h.net, &h.transport) else {
            continue;
        };
        assert_eq!(ip.source, [198, 18, 0, 1]);
        let sig =
            gapless_core::packet::signature::Signature::from_payload_end(payload).expect("every UDP frame is signed");
        assert_eq!(u.source_port, 1000 + (sig.seq % 1000) as u16);
        assert_eq!(f.len(), 60);
        seqs.push(sig.seq);
        times.push(*ts);
        lat.push(*ts as i64 - sig.tx_ns as i64);
    }
    if seqs.len() != n as usize {
        let missing: Vec<u32> = (0..n).filter(|s| seqs.binary_search(s).is_err()).collect();
        panic!(
            "{} frames arrived; missing {} seqs, first {:?}, last {:?}",
            seqs.len(),
            missing.len(),
            &missing[..missing.len().min(5)],
            missing.last()
        );
    }
    assert!(
        seqs.iter().enumerate().all(|(i, s)| *s == i as u32),
        "signatures out of sequence"
    );

    // The signature's TX time and tcpdump's RX time are both CLOCK_REALTIME, and the TX time
    // is read before the send: every frame arrives after it left, a few µs later.
    lat.sort_unstable();
    assert!(lat[0] > 0, "a frame arrived {} ns before its TX timestamp", -lat[0]);
    let median = lat[lat.len() / 2];
    assert!(median < 100_000, "median TX -> capture time {median} ns");

    // Sink timing: the mean rate, as the least-squares slope of arrival time on sequence
    // number (tcpdump's clock), within 0.1 % of the target.
    let n = times.len() as f64;
    let (km, tm) = (
        (n - 1.0) / 2.0,
        times.iter().map(|t| (t - times[0]) as f64).sum::<f64>() / n,
    );
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (k, t) in times.iter().enumerate() {
        let (dx, dy) = (k as f64 - km, (t - times[0]) as f64 - tm);
        sxy += dx * dy;
        sxx += dx * dx;
    }
    let rate = 1e9 / (sxy / sxx);
    let first_last = (n - 1.0) * 1e9 / (times[times.len() - 1] - times[0]) as f64;
    held_or_honest(&r, &[(0, first_last)], || {
        assert!(err.abs() < 0.01, "expected |TX rate error| < 1 %, got {err}");
        let e = rate / f64::from(pps) - 1.0;
        assert!(
            e.abs() < 0.001,
            "expected the sink rate within 0.1 % of {pps}, got {rate} ({e:+.5})"
        );
    });

    // Independent check 2: tshark validates the IPv4 and UDP checksums of every signed frame.
    let t = std::process::Command::new("tshark")
        .args([
            "-r",
            rx.to_str().unwrap(),
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-T",
            "fields",
            "-e",
            "ip.checksum.status",
            "-e",
            "udp.checksum.status",
            "-Y",
            "ip.src == 198.18.0.1 && udp && !icmp",
        ])
        .output()
        .expect("tshark (apt-get install tshark)");
    let out = String::from_utf8_lossy(&t.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.len(),
        n as usize,
        "tshark saw {} frames: {}",
        lines.len(),
        String::from_utf8_lossy(&t.stderr)
    );
    assert!(
        lines
            .iter()
            .all(|l| l.split_whitespace().collect::<Vec<_>>() == ["1", "1"]),
        "tshark found a bad checksum"
    );
}

#[test]
fn interface_errors_are_clear() {
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "p.toml",
        "[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 10\n",
    );
    let ps = p.to_str().unwrap();

    let o = gapless(&["run", ps, "--netns", &bed.tx_ns(), "--iface", "nope0"]);
    expect_error(
        &o,
        &["interface \"nope0\" does not exist in this network namespace. Fix:"],
    );

    let o = gapless(&["run", ps, "--netns", "no-such-ns", "--iface", "x"]);
    expect_error(&o, &["network namespace \"no-such-ns\" not found", "Fix:"]);

    // veth reports 10 Gbit/s: 20 Mpps of 64 B frames is 13.44 Gbit/s.
    let fast = write(
        dir.path(),
        "fast.toml",
        "[[stream]]\n[stream.timing]\nrate_pps = 20e6\ncount = 10\n",
    );
    expect_error(
        &bed.run(&fast, &[]),
        &["above the link speed of 10.0000 Gbit/s", "Fix: lower the rate"],
    );

    let big = write(
        dir.path(),
        "big.toml",
        "[[stream]]\nsize = 9000\n[stream.timing]\nrate_pps = 10\ncount = 1\n",
    );
    expect_error(
        &bed.run(&big, &[]),
        &[
            "frames of up to 9000 B (with FCS) but",
            "MTU of 1500 B allows at most 1518 B",
        ],
    );

    // The peer down: no carrier on the sender.
    let d = std::process::Command::new("ip")
        .args(["-n", &bed.rx_ns(), "link", "set", &bed.rx_if(), "down"])
        .status()
        .unwrap();
    assert!(d.success());
    // The carrier state reaches the flags through linkwatch, asynchronously: wait for it.
    let t0 = std::time::Instant::now();
    loop {
        let l = std::process::Command::new("ip")
            .args(["-n", &bed.tx_ns(), "link", "show", &bed.tx_if()])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&l.stdout).contains("NO-CARRIER") {
            break;
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(5), "carrier did not drop");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    expect_error(
        &bed.run(&p, &[]),
        &[&format!("interface {} is down. Fix:", bed.tx_if())],
    );
}

#[test]
fn not_root_is_a_clear_error() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "p.toml",
        "[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 10\n",
    );
    let perm = std::process::Command::new("chmod")
        .args(["755", dir.path().to_str().unwrap()])
        .status()
        .unwrap();
    assert!(perm.success());
    let nobody = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                bin(),
            ])
            .args(args)
            .output()
            .expect("setpriv (util-linux)")
    };
    let o = nobody(&["run", p.to_str().unwrap(), "--iface", "lo"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Checked up front (CapEff), before any socket: the capability and the setcap line.
    let want = "needs cap_net_raw, which this process does not have. Fix: run as root";
    assert!(text(&o).contains(want), "expected {want:?}, got {}", text(&o));
    let o = nobody(&["run", p.to_str().unwrap(), "--iface", "lo", "--backend", "afxdp"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains(want), "AF_XDP: expected {want:?}, got {}", text(&o));
    let o = nobody(&["testbed", "up", "--name", "nr"]);
    assert!(
        text(&o).contains("gapless testbed up needs root") && text(&o).contains("Fix: run it with sudo"),
        "{}",
        text(&o)
    );
}

#[test]
fn testbed_up_and_down_are_idempotent() {
    require_root();
    let name = format!("i{}", std::process::id() % 100_000);
    let up = || gapless(&["testbed", "up", "--name", &name]);
    let o = up();
    assert!(o.status.success() && text(&o).contains("is up"), "{}", text(&o));
    let o = up();
    assert!(
        o.status.success() && text(&o).contains("was already up"),
        "{}",
        text(&o)
    );
    let ns = netns_list();
    assert!(
        ns.contains(&format!("{name}-tx")) && ns.contains(&format!("{name}-rx")),
        "{ns}"
    );
    // A half-made testbed is rebuilt.
    assert!(std::process::Command::new("ip")
        .args(["netns", "del", &format!("{name}-rx")])
        .status()
        .unwrap()
        .success());
    let o = up();
    assert!(o.status.success() && text(&o).contains("is up"), "{}", text(&o));
    let down = || gapless(&["testbed", "down", "--name", &name]);
    let o = down();
    assert!(o.status.success() && text(&o).contains("removed"), "{}", text(&o));
    let o = down();
    assert!(o.status.success() && text(&o).contains("was not up"), "{}", text(&o));
    let ns = netns_list();
    assert!(!ns.contains(&format!("{name}-tx")), "{ns}");
}

fn netns_list() -> String {
    String::from_utf8(
        std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
}

#[test]
fn the_cli_maps_rate_control_and_tx_timestamps_and_prints_what_they_confirmed() {
    let _one_at_a_time = exclusive();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let profile = write(
        dir.path(),
        "p.toml",
        "[[stream]]\nsize = 128\n[stream.timing]\nrate_pps = 20000\ncount = 4000\n",
    );
    let json = dir.path().join("r.json");
    let o = bed.run(
        &profile,
        &[
            "--json",
            json.to_str().unwrap(),
            "--rate-control",
            "shaper",
            "--tx-timestamps",
            "kernel",
        ],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for want in [
        "shaper: installed on",
        "and dropped 0",
        "shaper: shaper removed",
        "TX stamps (kernel software",
        "4000 of 4000 frames matched",
    ] {
        assert!(t.contains(want), "expected {want:?} in the summary, got:\n{t}");
    }
    let r = read_json(&json);
    assert_eq!(r["rate_control_setup"]["method"], "shaper");
    assert_eq!(r["tx_timestamps"]["matched"], 4000);
    assert!(
        r["backend_detail"].as_str().unwrap().contains("through the qdisc"),
        "{}",
        r["backend_detail"]
    );
    let o = bed.run(&profile, &["--rate-control", "launch-time"]);
    expect_error(&o, &["launch-time", "etf", "noqueue"]);
}
