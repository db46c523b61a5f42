//! Helpers for the integration tests: the binary, a testbed guard, a tcpdump capture.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_gapless")
}

pub fn gapless(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("run gapless")
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Integration tests need root; they fail (never skip) without it.
pub fn require_root() {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        uid, 0,
        "this integration test needs root (network namespaces, raw sockets): run the tests as root, as CI does"
    );
}

static N: AtomicU32 = AtomicU32::new(0);

/// A testbed made for one test and removed when dropped. Its names (`tx_ns()`, `tx_if()`, ...)
/// come from `gapless_io::testbed::Testbed`.
pub struct Bed(pub gapless_io::testbed::Testbed);

impl std::ops::Deref for Bed {
    type Target = gapless_io::testbed::Testbed;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Bed {
    pub fn up() -> Bed {
        Bed::up_with_queues(1)
    }

    /// A testbed whose veth ends have `queues` TX and RX queues.
    pub fn up_with_queues(queues: u32) -> Bed {
        require_root();
        let name = format!("t{}x{}", std::process::id() % 100_000, N.fetch_add(1, Ordering::SeqCst));
        let q = queues.to_string();
        let o = gapless(&["testbed", "up", "--name", &name, "--queues", &q]);
        assert!(o.status.success(), "testbed up: {}", text(&o));
        Bed(gapless_io::testbed::Testbed::new(&name).expect("a valid name"))
    }

    /// `run PROFILE` across the testbed metered at its far end (`--rx`), the result in
    /// `res`, quietly, plus `extra`.
    pub fn run_rx(&self, prof: &Path, res: &Path, extra: &[&str]) -> Output {
        let (rx_if, rx_ns) = (self.rx_if(), self.rx_ns());
        let mut args = vec![
            "--rx",
            &rx_if,
            "--rx-netns",
            &rx_ns,
            "--json",
            res.to_str().unwrap(),
            "-q",
        ];
        args.extend_from_slice(extra);
        self.run(prof, &args)
    }

    /// `gapless run PROFILE --netns <tx> --iface <tx0>` plus `extra`.
    pub fn run(&self, profile: &Path, extra: &[&str]) -> Output {
        let (ns, ifc) = (self.tx_ns(), self.tx_if());
        let mut args = vec!["run", profile.to_str().unwrap(), "--netns", &ns, "--iface", &ifc];
        args.extend_from_slice(extra);
        gapless(&args)
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = gapless(&["testbed", "down", "--name", &self.0.name]);
    }
}

/// Asserts that a command failed with exit code 2 and that its output holds every `want`.
pub fn expect_error(o: &Output, wants: &[&str]) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    for w in wants {
        assert!(t.contains(w), "expected {w:?} in: {t}");
    }
}

/// Parses a frame with etherparse and asserts its IPv4 header and UDP/TCP checksums, computed
/// by etherparse's own code. Returns the L3/L4 headers and the L4 payload.
pub fn check_frame(f: &[u8]) -> etherparse::PacketHeaders<'_> {
    use etherparse::{NetHeaders, TransportHeader};
    let h = etherparse::PacketHeaders::from_ethernet_slice(f)
        .unwrap_or_else(|e| panic!("etherparse rejects a frame: {e:?}"));
    let payload = h.payload.slice();
    if let Some(NetHeaders::Ipv4(ip, _)) = &h.net {
        assert_eq!(ip.header_checksum, ip.calc_header_checksum(), "IPv4 header checksum");
    }
    match (&h.net, &h.transport) {
        (Some(NetHeaders::Ipv4(ip, _)), Some(TransportHeader::Udp(u))) => {
            assert_eq!(
                u.checksum,
                u.calc_checksum_ipv4(ip, payload).unwrap(),
                "UDP/IPv4 checksum"
            )
        }
        (Some(NetHeaders::Ipv6(ip, _)), Some(TransportHeader::Udp(u))) => {
            assert_eq!(
                u.checksum,
                u.calc_checksum_ipv6(ip, payload).unwrap(),
                "UDP/IPv6 checksum"
            )
        }
        (Some(NetHeaders::Ipv4(ip, _)), Some(TransportHeader::Tcp(t))) => {
            assert_eq!(
                t.checksum,
                t.calc_checksum_ipv4(ip, payload).unwrap(),
                "TCP/IPv4 checksum"
            )
        }
        (Some(NetHeaders::Ipv6(ip, _)), Some(TransportHeader::Tcp(t))) => {
            assert_eq!(
                t.checksum,
                t.calc_checksum_ipv6(ip, payload).unwrap(),
                "TCP/IPv6 checksum"
            )
        }
        _ => {}
    }
    h
}

/// tcpdump on the receiving end, nanosecond timestamps, until stopped.
pub struct Capture {
    child: Child,
    pub path: PathBuf,
}

impl Capture {
    pub fn start(bed: &Bed, path: &Path) -> Capture {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &bed.rx_ns(), "tcpdump", "-i", &bed.rx_if(), "-w"])
            .arg(path)
            .args(["--time-stamp-precision=nano", "-B", "131072", "-s", "2048"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump (apt-get install tcpdump)");
        let err = child.stderr.take().unwrap();
        let mut r = BufReader::new(err);
        let t0 = Instant::now();
        let mut line = String::new();
        while t0.elapsed() < Duration::from_secs(10) {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            if line.contains("listening on") {
                break;
            }
        }
        assert!(line.contains("listening on"), "tcpdump did not start: {line}");
        std::thread::spawn(move || {
            let mut sink = String::new();
            while r.read_line(&mut sink).unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        Capture {
            child,
            path: path.to_path_buf(),
        }
    }

    /// Stops tcpdump (SIGINT, so it flushes) and waits for it. libpcap hands TPACKET_V3
    /// blocks to tcpdump when full or after a 1 s timeout, and frames in an unretired block
    /// are lost at SIGINT: wait past the timeout first.
    pub fn stop(mut self) -> PathBuf {
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        self.path.clone()
    }
}

/// (timestamp ns, frame) of every packet in a pcap.
pub fn read_pcap(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let f = std::fs::File::open(path).expect("open pcap");
    let mut r = pcap_file::pcap::PcapReader::new(f).expect("pcap header");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("pcap packet");
        out.push((p.timestamp().as_nanos() as u64, p.data().to_vec()));
    }
    out
}

/// A JSON file gapless wrote (a result, a calibration), parsed.
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

static EXCLUSIVE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Serialises the tests that measure timing: each send loop pins itself to the last core,
/// and two at once would stall each other.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    EXCLUSIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A child process killed when the test ends, also when it panics first.
pub struct KillOnDrop(pub Option<Child>);

impl KillOnDrop {
    /// The child, for waiting on it; it is not killed afterwards.
    pub fn take(&mut self) -> Child {
        self.0.take().expect("taken once")
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The rule for timing assertions on a busy machine (the host here stalls a busy vCPU for
/// milliseconds, and CI runs tests side by side). When the run's own verdict says its
/// schedule was held, `timing` (the test's timing assertions) must pass. When it says NOT
/// held, the verdict must be honest instead:
/// - it agrees with its own figures (late fraction or rate error over its bound, or send
///   failures);
/// - it names a cause it measured (a quiet machine has none, so a run that is not held there
///   fails the test: the fault is gapless's);
/// - for each `(stream index, sink rate)` given, the sender's achieved rate is what the sink
///   saw (first-to-last arrival), within 0.1 %.
///
/// Returns whether the schedule was held.
pub fn held_or_honest(r: &serde_json::Value, sink: &[(usize, f64)], timing: impl FnOnce()) -> bool {
    let v = &r["verdict"];
    let held = v["held"]
        .as_bool()
        .unwrap_or_else(|| panic!("expected a paced run with a verdict, got verdict {v}"));
    if held {
        timing();
        return true;
    }
    let f = |k: &str| v[k].as_f64().unwrap();
    let over = f("late_fraction") > f("late_fraction_max") || f("rate_error_rel").abs() > f("rate_error_max");
    assert!(
        over || r["send_errors"].as_u64().unwrap_or(0) > 0,
        "the verdict says NOT held, but its own figures are within bounds: {v}"
    );
    let causes: Vec<&str> = v["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        causes.iter().any(|c| !c.starts_with("no interference was measured")),
        "the schedule was NOT held on a machine where the run measured no interference: expected held, got {v}"
    );
    for &(i, sink_pps) in sink {
        let tx = r["streams"][i]["achieved_pps"].as_f64().unwrap();
        assert!(
            (tx / sink_pps - 1.0).abs() < 1e-3,
            "stream {i}: the sender reported {tx} pps, the sink saw {sink_pps} pps (expected within 0.1 %)"
        );
    }
    eprintln!("schedule NOT held, and the verdict explains it: {causes:?}");
    false
}

/// Runs gapless with `args` and returns its exit code, its output (stdout then stderr) and
/// its own peak RSS in KiB (wait4 on that child, not the maximum over every child so far).
// The child is reaped by wait4 (which std's wait cannot give the rusage of).
#[allow(clippy::zombie_processes)]
pub fn gapless_rss(args: &[&str]) -> (Option<i32>, String, i64) {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let child = std::process::Command::new(bin())
        .args(args)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: wait4 on our own child with valid out-pointers.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut u) };
    assert_eq!(pid, child.id() as i32);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let text = std::fs::read_to_string(&out).unwrap() + &std::fs::read_to_string(&err).unwrap();
    (code, text, u.ru_maxrss)
}

/// A nanosecond pcap of the given frames.
pub fn pcap_of_frames(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (t, f) in frames {
        b.extend_from_slice(&((t / 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&((t % 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    b
}

static PORTS: AtomicU32 = AtomicU32::new(0);

/// A free loopback port for a server this test starts, below the kernel's ephemeral range
/// (32768-60999), so that no other test's `bind(":0")` can be handed the same port between our
/// probe and the server's bind; distinct per test process.
pub fn local_port() -> u16 {
    loop {
        let n = PORTS.fetch_add(1, Ordering::SeqCst);
        let port = 20_000 + (std::process::id() % 500) * 24 + n % 24;
        assert!(n < 24 * 4, "no free loopback port in this process's range near {port}");
        if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
}

/// `gapless serve --no-otg` on a free loopback port with the database `db`: the process
/// (killed when dropped) and its address.
pub fn serve_process(db: &Path) -> (KillOnDrop, std::net::SocketAddr) {
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], local_port()).into();
    let child = Command::new(bin())
        .args(["serve", "--no-otg", "--listen", &addr.to_string(), "--db"])
        .arg(db)
        .stdout(Stdio::null())
        .stderr(serve_log(addr, db))
        .spawn()
        .expect("start gapless serve");
    let t0 = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "gapless serve did not listen on {addr} within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (KillOnDrop(Some(child)), addr)
}

static SERVE_LOGS: std::sync::Mutex<Vec<(std::net::SocketAddr, PathBuf)>> = std::sync::Mutex::new(Vec::new());

/// The file a server process at `addr` writes its stderr to, beside its database.
fn serve_log(addr: std::net::SocketAddr, db: &Path) -> Stdio {
    let path = db.with_extension(format!("{}.log", addr.port()));
    let f = std::fs::File::create(&path).expect("create the server's log");
    SERVE_LOGS.lock().unwrap_or_else(|e| e.into_inner()).push((addr, path));
    Stdio::from(f)
}

/// What the server process at `addr` wrote to stderr, for a failure message.
pub fn serve_log_of(addr: std::net::SocketAddr) -> String {
    let logs = SERVE_LOGS.lock().unwrap_or_else(|e| e.into_inner());
    let path = logs.iter().rev().find(|(a, _)| *a == addr).map(|(_, p)| p.clone());
    path.and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_else(|| "(no log)".into())
}

/// Starts a run through the server's API; its id.
pub fn start_run(addr: std::net::SocketAddr, body: serde_json::Value) -> i64 {
    let (st, b) = gapless_serve::testing::try_http(addr, "POST", "/api/runs", body.to_string().as_bytes(), None)
        .unwrap_or_else(|e| {
            panic!(
                "expected an answer to POST /api/runs from the server at {addr}; got {e}. Its stderr:\n{}",
                serve_log_of(addr)
            )
        });
    assert_eq!(st, 201, "expected 201 for {body}; got {st}: {b}");
    gapless_serve::testing::json(&b)["id"].as_i64().unwrap()
}
