//! Hostile input and faults: outputs that would destroy inputs, unwritable outputs, stale
//! temporary files, SIGHUP, a start after the run's end, and captures whose timestamps
//! would blow up memory.

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::Duration;

const P: &str = "seed = 1\n[[stream]]\nname = \"s\"\nsize = 64\n[stream.timing]\nrate_pps = 1000\ncount = 100\n";

#[test]
fn an_output_that_is_an_input_is_refused_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "my.toml", P);
    let ps = p.to_str().unwrap();
    expect_error(
        &gapless(&["run", ps, "--null", "--json", ps]),
        &["--json", "is also the profile", "Fix:"],
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), P, "the profile must be untouched");
    let x = dir.path().join("x.pcap");
    let xs = x.to_str().unwrap();
    expect_error(
        &gapless(&["run", ps, "--out", xs, "--json", xs]),
        &["both name", "Fix:"],
    );
    assert!(!x.exists(), "nothing may be written when refused");
    let o = gapless(&["run", ps, "--out", xs, "-q"]);
    assert!(o.status.success(), "{}", text(&o));
    let before = std::fs::read(&x).unwrap();
    // The same file reached through another spelling of its path.
    let other = dir.path().join(".").join("x.pcap");
    expect_error(
        &gapless(&["analyze", xs, "--json", other.to_str().unwrap()]),
        &["is also the capture"],
    );
    assert_eq!(std::fs::read(&x).unwrap(), before, "the capture must be untouched");
}

#[test]
fn an_unwritable_result_path_is_found_before_sending() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "p.toml", &P.replace("count = 100", "count = 100_000"));
    let t0 = std::time::Instant::now();
    let o = gapless(&[
        "run",
        p.to_str().unwrap(),
        "--null",
        "--pace",
        "on",
        "--json",
        "/nonexistent/dir/r.json",
    ]);
    expect_error(
        &o,
        &["--json /nonexistent/dir/r.json", "cannot write there", "before sending"],
    );
    // 100 000 frames at 1 kpps would take 100 s: the refusal came first.
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "expected a refusal before sending, took {:?}",
        t0.elapsed()
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("sent"), "{}", text(&o));
    expect_error(
        &gapless(&["analyze", p.to_str().unwrap(), "--report-dir", "/proc/nope"]),
        &["--report-dir /proc/nope", "cannot create it"],
    );
}

#[test]
fn stale_temporary_files_of_ours_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "p.toml", P);
    // What a SIGKILLed run leaves: a temporary file of a process that is gone.
    let stale = dir.path().join(".gapless-3999999-Ab12Cd.tmp");
    std::fs::write(&stale, vec![0u8; 4096]).unwrap();
    let out = dir.path().join("o.pcap");
    let o = gapless(&["run", p.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(!stale.exists(), "expected the stale temporary file removed: {t}");
    assert!(
        t.contains("removed") && t.contains(".gapless-3999999-Ab12Cd.tmp"),
        "expected a note naming it, got {t}"
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".tmp")),
        "expected no temporary file left, got {names:?}"
    );
}

#[test]
fn sighup_writes_the_result_like_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "p.toml", &P.replace("count = 100", "count = 100_000"));
    let j = dir.path().join("r.json");
    let mut c = KillOnDrop(Some(
        Command::new(bin())
            .args([
                "run",
                p.to_str().unwrap(),
                "--null",
                "--pace",
                "on",
                "-q",
                "--json",
                j.to_str().unwrap(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    std::thread::sleep(Duration::from_millis(800));
    let child = c.take();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGHUP) }, 0);
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "expected exit 130 after SIGHUP, got {:?}: {}",
        o.status.code(),
        text(&o)
    );
    let r = read_json(&j);
    assert_eq!(r["interrupted"], true);
    let sent = r["sent_frames"].as_u64().unwrap();
    assert!(sent > 0 && sent < 100_000, "expected a partial run, got {sent} frames");
}

#[test]
fn a_stream_that_starts_after_the_run_ends_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "p.toml",
        "duration_s = 1\n[[stream]]\nname = \"late\"\n[stream.timing]\nrate_pps = 1000\nstart_offset_ns = 5_000_000_000\n",
    );
    expect_error(
        &gapless(&["check", p.to_str().unwrap()]),
        &["stream[0].timing.start_offset_ns", "would send nothing", "Fix:"],
    );
}

/// A nanosecond pcap of 64-byte Ethernet/IPv4/UDP frames (unsigned) at the given times.
fn pcap_with_times(times: &[u64]) -> Vec<u8> {
    let mut frame = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(1024, 1024)
        .write(&mut frame, &[0u8; 18])
        .unwrap();
    let frames: Vec<(u64, Vec<u8>)> = times.iter().map(|&t| (t, frame.clone())).collect();
    pcap_of_frames(&frames)
}

#[test]
fn hostile_timestamps_are_analysed_in_bounded_memory() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let now = 1_700_000_000_000_000_000u64;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut random = Vec::new();
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        random.push(x % (u64::from(u32::MAX) * 1_000_000_000));
    }
    let cases: Vec<(&str, Vec<u64>)> = vec![
        (
            "one frame at 0",
            std::iter::once(0).chain((0..999).map(|k| now + k * 10_000)).collect(),
        ),
        ("4e9 s apart", vec![1_000, 4_000_000_000 * 1_000_000_000 + 1_000, 2_000]),
        ("all ones", vec![u64::from(u32::MAX) * 1_000_000_000 + 999_999_999; 100]),
        ("random", random),
    ];
    for (what, times) in cases {
        let f = dir.path().join("h.pcap");
        std::fs::write(&f, pcap_with_times(&times)).unwrap();
        let j = dir.path().join("h.json");
        let (code, t, rss) = gapless_rss(&["analyze", f.to_str().unwrap(), "--json", j.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{what}: {t}");
        let r = read_json(&j);
        assert_eq!(r["capture"]["frames"], times.len(), "{what}");
        let points = r["streams"][0]["series"].as_array().unwrap().len();
        assert!(
            points <= times.len(),
            "{what}: expected at most one point per frame, got {points}"
        );
        assert!(rss < 200 * 1024, "{what}: expected under 200 MB RSS, got {rss} KiB");
        if what != "all ones" {
            assert!(
                t.contains("jumped forward") || t.contains("stamped earlier"),
                "{what}: expected a warning about the timestamps, got {t}"
            );
        }
    }
}

#[test]
fn analyze_stops_on_ctrl_c_and_writes_what_it_has() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("big.csv");
    let mut rows = String::from("rx_ns\n");
    for i in 0..5_000_000u64 {
        rows.push_str(&(1_000_000_000 + i * 1_000).to_string());
        rows.push('\n');
    }
    std::fs::write(&csv, rows).unwrap();
    let j = dir.path().join("a.json");
    let mut c = KillOnDrop(Some(
        Command::new(bin())
            .args(["analyze", csv.to_str().unwrap(), "--json", j.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    std::thread::sleep(Duration::from_millis(300));
    let child = c.take();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    let t = text(&o);
    assert_eq!(
        o.status.code(),
        Some(130),
        "expected exit 130 after Ctrl-C (5 M rows take over 1 s), got {:?}: {t}",
        o.status.code()
    );
    let r = read_json(&j);
    assert_eq!(r["interrupted"], true);
    let n = r["capture"]["frames"].as_u64().unwrap();
    assert!(n > 0 && n < 5_000_000, "expected a partial analysis, got {n} frames");
    assert!(t.contains("stopped by a signal"), "{t}");
}

#[test]
fn a_missing_capability_is_named_up_front() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "p.toml", P);
    // As root with CAP_SYS_ADMIN dropped from the bounding set: entering a namespace is
    // refused before anything starts, with the capability and the setcap line.
    let o = Command::new("setpriv")
        .args([
            "--bounding-set=-sys_admin",
            bin(),
            "run",
            p.to_str().unwrap(),
            "--null",
            "--netns",
            "gl-tx",
        ])
        .output()
        .expect("setpriv (util-linux)");
    expect_error(&o, &["needs cap_sys_admin", "setcap cap_sys_admin+ep"]);
    let o = Command::new("setpriv")
        .args([
            "--bounding-set=-net_raw",
            bin(),
            "run",
            p.to_str().unwrap(),
            "--iface",
            "lo",
        ])
        .output()
        .unwrap();
    expect_error(&o, &["needs cap_net_raw", "setcap cap_net_raw+ep"]);
}

/// A little-endian pcapng of `frames` on one Ethernet interface with `if_tsresol` = `resol`,
/// each time given in that unit.
fn pcapng_with_resolution(resol: u8, frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    fn block(out: &mut Vec<u8>, t: u32, body: &[u8]) {
        let len = (12 + body.len().div_ceil(4) * 4) as u32;
        out.extend(t.to_le_bytes());
        out.extend(len.to_le_bytes());
        out.extend(body);
        out.resize(out.len() + (len as usize - 12 - body.len()), 0);
        out.extend(len.to_le_bytes());
    }
    let mut out = Vec::new();
    let shb = [&0x1a2b_3c4du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xff; 8]].concat();
    block(&mut out, 0x0a0d_0d0a, &shb);
    let idb = [
        &[1, 0, 0, 0][..],
        &65535u32.to_le_bytes(),
        &[9, 0, 1, 0, resol, 0, 0, 0],
        &[0; 4],
    ]
    .concat();
    block(&mut out, 1, &idb);
    for (t, f) in frames {
        let len = (f.len() as u32).to_le_bytes();
        let head = [
            &[0u8; 4][..],
            &((t >> 32) as u32).to_le_bytes(),
            &(*t as u32).to_le_bytes(),
            &len,
            &len,
        ]
        .concat();
        block(&mut out, 6, &[&head[..], f].concat());
    }
    out
}

#[test]
fn a_picosecond_pcapng_is_read_as_tshark_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let frame = pcap_with_times(&[0])[40..].to_vec();
    // 2,000 frames 1.0000000005 ms apart from 1 s, in ps (u64 ps reach only 213 days).
    let t0 = 1_000_000_000_000u64;
    let frames: Vec<(u64, Vec<u8>)> = (0..2_000u64).map(|k| (t0 + k * 1_000_000_500, frame.clone())).collect();
    let f = dir.path().join("ps.pcapng");
    std::fs::write(&f, pcapng_with_resolution(12, &frames)).unwrap();
    let o = Command::new("tshark")
        .args(["-r", f.to_str().unwrap(), "-T", "fields", "-e", "frame.time_epoch"])
        .output()
        .expect("tshark is installed by scripts/setup.sh");
    assert!(o.status.success(), "tshark refused the test's pcapng: {}", text(&o));
    let tshark: Vec<String> = String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect();
    assert_eq!(tshark.len(), 2_000, "expected tshark to read 2000 frames");
    let j = dir.path().join("a.json");
    let o = gapless(&["analyze", f.to_str().unwrap(), "--json", j.to_str().unwrap()]);
    let t = text(&o);
    assert!(
        o.status.success(),
        "expected the picosecond capture to be analysed, got {t}"
    );
    let r = read_json(&j);
    assert_eq!(r["capture"]["frames"], 2_000, "{t}");
    assert!(t.contains("ps (kept to ns)"), "expected the resolution named, got {t}");
    // tshark 4.0 reads the file but wraps ps fractions past 18.4 ms (2^64 / 10^9 ps): its
    // first 18 gaps are right, and match the file; gapless's whole-run mean is checked below.
    let times: Vec<f64> = tshark.iter().take(18).map(|l| l.parse().unwrap()).collect();
    for w in times.windows(2) {
        let gap = (w[1] - w[0]) * 1e9;
        assert!(
            (gap - 1_000_000.0).abs() < 2.0,
            "expected tshark's early gaps to be 1 ms, got {gap} ns"
        );
    }
    // Kept to the ns: 10^12 ps and (10^12 + 1999 × 1,000,000,500) ps, floored.
    let st = &r["streams"][0];
    assert_eq!(st["first_rx_ns"], 1_000_000_000u64, "first frame");
    assert_eq!(st["last_rx_ns"], 2_999_000_999u64, "last frame");
}

#[test]
fn a_pcapng_block_that_breaks_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let frame = pcap_with_times(&[0])[40..].to_vec();
    let frames: Vec<(u64, Vec<u8>)> = (0..100).map(|k| (1_000_000 + k * 1000, frame.clone())).collect();
    let mut b = pcapng_with_resolution(6, &frames);
    // Corrupt the trailing length of the 51st packet block.
    let shb_idb = 28 + 32;
    let epb = (b.len() - shb_idb) / 100;
    let at = shb_idb + 51 * epb - 4;
    b[at] ^= 0x40;
    let f = dir.path().join("bad.pcapng");
    std::fs::write(&f, b).unwrap();
    let j = dir.path().join("a.json");
    let o = gapless(&["analyze", f.to_str().unwrap(), "--json", j.to_str().unwrap()]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert_eq!(read_json(&j)["capture"]["frames"], 50, "{t}");
    assert!(
        t.contains("says length") && t.contains("after 50 frames"),
        "expected the broken block named, got {t}"
    );
    assert!(t.contains("µs timestamps"), "expected the µs warning, got {t}");
}

/// A 256 KiB tmpfs mounted on a temporary directory, unmounted on drop.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount() -> SmallDisk {
        require_root();
        let d = tempfile::tempdir().unwrap();
        let s = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs", d.path().to_str().unwrap()])
            .status()
            .unwrap();
        assert!(s.success(), "expected to mount a small tmpfs (the test runs as root)");
        SmallDisk(d)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_disk_ends_the_run_and_leaves_no_file_it_did_not_write() {
    let disk = SmallDisk::mount();
    let dir = tempfile::tempdir().unwrap();
    // 2,000 frames of 1000 bytes: 2 MB into 256 KiB.
    let p = write(
        dir.path(),
        "p.toml",
        "[[stream]]\nname = \"c\"\nsize = 1000\n[stream.timing]\nrate_pps = 100_000\ncount = 2000\n",
    );
    let pcap = disk.0.path().join("x.pcap");
    let j = dir.path().join("r.json");
    let o = gapless(&[
        "run",
        p.to_str().unwrap(),
        "--out",
        pcap.to_str().unwrap(),
        "--json",
        j.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "expected exit 2 on a full disk, got {:?}: {t}",
        o.status.code()
    );
    assert!(t.contains("disk has space"), "expected the fix named, got {t}");
    let left: Vec<_> = std::fs::read_dir(disk.0.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        left.is_empty(),
        "expected no partial or temporary file on the full disk, got {left:?}"
    );
    assert!(
        !t.contains(&format!("pcap: {}", pcap.display())),
        "a pcap that was not written was claimed: {t}"
    );
    let r = read_json(&j);
    assert_eq!(r["interrupted"], true);
    assert!(
        r["stop_reason"].as_str().unwrap().contains("x.pcap"),
        "{}",
        r["stop_reason"]
    );
    // A disk that fills up before the result is written: the summary is still printed, the
    // error says why, and no partial result is left.
    let mut fill = std::fs::File::create(disk.0.path().join("fill")).unwrap();
    while std::io::Write::write_all(&mut fill, &[0u8; 4096]).is_ok() {}
    let j2 = disk.0.path().join("r.json");
    let o = gapless(&["run", p.to_str().unwrap(), "--null", "--json", j2.to_str().unwrap()]);
    let t = text(&o);
    assert_ne!(
        o.status.code(),
        Some(0),
        "expected a failed result write to fail the run: {t}"
    );
    assert!(
        t.contains("No space left on device"),
        "expected the cause named, got {t}"
    );
    assert!(
        t.contains("achieved") && t.contains("sent"),
        "expected the summary printed, got {t}"
    );
    let left: Vec<_> = std::fs::read_dir(disk.0.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("fill")],
        "expected no partial result file"
    );
}
