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

/// A testbed made for one test and removed when dropped.
pub struct Bed {
    pub name: String,
}

impl Bed {
    pub fn up() -> Bed {
        require_root();
        let name = format!("t{}x{}", std::process::id() % 100_000, N.fetch_add(1, Ordering::SeqCst));
        let o = gapless(&["testbed", "up", "--name", &name]);
        assert!(o.status.success(), "testbed up: {}", text(&o));
        Bed { name }
    }
    pub fn tx_ns(&self) -> String {
        format!("{}-tx", self.name)
    }
    pub fn rx_ns(&self) -> String {
        format!("{}-rx", self.name)
    }
    pub fn tx_if(&self) -> String {
        format!("{}-tx0", self.name)
    }
    pub fn rx_if(&self) -> String {
        format!("{}-rx0", self.name)
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = gapless(&["testbed", "down", "--name", &self.name]);
    }
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

pub fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}
