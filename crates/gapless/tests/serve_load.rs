//! `gapless serve` stays off the packet path: a 100 kpps run on the testbed keeps its send
//! loop's core while clients on the other core poll the API and read its event stream as
//! fast as they can over kept-alive connections; the server's own threads never run on that core; and 1,000 idle event
//! streams are bounded (the rest answered 503) without the server's memory growing with them.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gapless_serve::testing::{http, json};

/// One test at a time: each test's server holds a core for its run, and two servers (two
/// processes) would each pick a send-loop core without knowing of the other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Each thread of `pid`: (name, allowed cores as the kernel lists them).
fn thread_masks(pid: u32) -> Vec<(String, String)> {
    let dir = format!("/proc/{pid}/task");
    let Ok(tasks) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| {
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            let field = |k: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(k))
                    .map(|v| v.trim().to_string())
            };
            Some((field("Name:")?, field("Cpus_allowed_list:")?))
        })
        .collect()
}

/// Cores of a kernel list such as `0-2,5`.
fn cores_of(list: &str) -> Vec<usize> {
    list.split(',')
        .filter(|p| !p.is_empty())
        .flat_map(|p| match p.split_once('-') {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).collect::<Vec<usize>>(),
            None => vec![p.parse().unwrap()],
        })
        .collect()
}

/// Pins the calling thread (and the threads it starts from now on) to `cores`.
fn pin_here(cores: &[usize]) {
    // SAFETY: an all-zero cpu_set_t is valid; CPU_SET writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cores {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(
        rc,
        0,
        "sched_setaffinity to {cores:?}: {}",
        std::io::Error::last_os_error()
    );
}

/// What the load got: requests answered 2xx, 429 and otherwise.
#[derive(Default)]
struct Load {
    ok: AtomicU64,
    limited: AtomicU64,
    other: AtomicU64,
    events: AtomicU64,
}

/// An HTTP/1.1 connection kept alive: GET requests, bodies read by Content-Length.
struct KeepAlive {
    s: std::io::BufReader<TcpStream>,
    addr: SocketAddr,
}

impl KeepAlive {
    fn connect(addr: SocketAddr) -> KeepAlive {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        KeepAlive {
            s: std::io::BufReader::new(s),
            addr,
        }
    }

    /// The status of one GET, or None when the connection is gone.
    fn get(&mut self, path: &str) -> Option<u16> {
        use std::io::BufRead;
        let head = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", self.addr);
        self.s.get_mut().write_all(head.as_bytes()).ok()?;
        let (mut line, mut len, mut status) = (String::new(), 0usize, None);
        loop {
            line.clear();
            if self.s.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let l = line.trim_end();
            if status.is_none() {
                status = l.get(9..12).and_then(|c| c.parse().ok());
            } else if l.is_empty() {
                break;
            } else if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().ok()?;
            }
        }
        let mut body = vec![0u8; len];
        self.s.read_exact(&mut body).ok()?;
        status
    }
}

/// 16 pollers of the run list and the run, and 32 readers of its event stream, until `stop`.
fn load(addr: SocketAddr, id: i64, stop: Arc<AtomicBool>, got: Arc<Load>) -> Vec<std::thread::JoinHandle<()>> {
    let mut hs = Vec::new();
    for i in 0..16 {
        let (stop, got) = (stop.clone(), got.clone());
        let path = if i % 2 == 0 {
            "/api/runs".to_string()
        } else {
            format!("/api/runs/{id}")
        };
        hs.push(std::thread::spawn(move || {
            // One connection kept alive, as a browser or requests.Session does; a new one
            // when the server closes it.
            while !stop.load(Ordering::Relaxed) {
                let mut c = KeepAlive::connect(addr);
                while !stop.load(Ordering::Relaxed) {
                    let Some(st) = c.get(&path) else { break };
                    let counter = match st {
                        200 => &got.ok,
                        429 => &got.limited,
                        _ => &got.other,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for _ in 0..32 {
        let (stop, got) = (stop.clone(), got.clone());
        hs.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
                let head = format!("GET /api/runs/{id}/events HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
                s.write_all(head.as_bytes()).unwrap();
                let mut buf = [0u8; 65536];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buf[..n]);
                    got.events
                        .fetch_add(text.matches("event: snapshot").count() as u64, Ordering::Relaxed);
                }
            }
        }));
    }
    hs
}

#[test]
fn a_run_keeps_its_core_while_clients_poll_and_read_its_events() {
    let _one = one_at_a_time();
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let (srv, addr) = serve_process(&dir.path().join("g.db"));
    let pid = srv.0.as_ref().unwrap().id();
    let toml = "[[stream]]\nname = \"a\"\nsize = 64\n[stream.timing]\nrate_pps = 100000\nduration_s = 6\n";
    let tb = bed.0.tx_ns().trim_end_matches("-tx").to_string();
    let id = start_run(addr, serde_json::json!({ "toml": toml, "testbed": tb }));
    // The server's threads, once the run holds its core: the load goes where they are.
    std::thread::sleep(Duration::from_millis(600));
    let during = thread_masks(pid);
    let workers: Vec<&(String, String)> = during.iter().filter(|t| t.0.starts_with("tokio-rt-worker")).collect();
    assert!(
        !workers.is_empty(),
        "expected the server's tokio threads; got {during:?}"
    );
    let rest = cores_of(&workers[0].1);
    let (stop, got) = (Arc::new(AtomicBool::new(false)), Arc::new(Load::default()));
    let t0 = Instant::now();
    pin_here(&rest);
    let hs = load(addr, id, stop.clone(), got.clone());
    // The load covers the whole send period (6 s from the run's start, 0.6 s before t0);
    // it then stops, so that this thread's polls are not refused 429 by the per-address
    // bound that the 16 pollers keep drained.
    std::thread::sleep(Duration::from_millis(6000));
    let secs = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    let run = loop {
        let (st, b) = http(addr, "GET", &format!("/api/runs/{id}"), b"", None);
        if st == 200 && json(&b)["status"] != "running" {
            break json(&b);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "expected the run to end within 30 s; got status {st} and {}",
            b.chars().take(300).collect::<String>()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    let (ok, limited, other) = (
        got.ok.load(Ordering::Relaxed),
        got.limited.load(Ordering::Relaxed),
        got.other.load(Ordering::Relaxed),
    );
    eprintln!(
        "load on cores {rest:?} for {secs:.1} s: {ok} answered, {limited} rate-limited (429), {other} other, {} snapshot events read",
        got.events.load(Ordering::Relaxed)
    );
    assert!(ok >= 1000, "expected the load to get at least 1000 answers; got {ok}");
    assert!(
        got.events.load(Ordering::Relaxed) >= 32,
        "expected the event readers to read snapshots"
    );
    let r = &run["result"];
    let core = r["environment"]["tx_core"].as_u64().expect("the send loop's core") as usize;
    for (name, mask) in &during {
        let on = cores_of(mask);
        let pinned_here = on == vec![core];
        assert!(
            !on.contains(&core) || pinned_here,
            "expected every server thread but the send loop off core {core} during the run; {name} may run on {mask}"
        );
    }
    assert!(
        !rest.contains(&core),
        "expected the load's cores {rest:?} to exclude the send loop's {core}"
    );
    let v = &r["verdict"];
    let lp = &v["loops"][0];
    let (wait, wall) = (
        lp["runqueue_wait_ns"].as_u64().unwrap_or(0),
        lp["wall_ns"].as_u64().unwrap(),
    );
    let share = wait as f64 / wall as f64;
    // Under 1 %, unless the host took the core away: then the run's own verdict must say the
    // schedule was not held and name that wait (the VM's steal time, larger, beside it).
    let steal = lp["steal_ns"].as_u64().unwrap_or(0);
    let named = v["causes"].as_array().is_some_and(|c| {
        c.iter().any(|x| {
            x.as_str()
                .is_some_and(|t| t.contains("while the send loop waited to run"))
        })
    });
    assert!(
        share < 0.01 || (v["schedule"] == "NOT held" && named && steal > wait),
        "expected the send loop to wait for its core under 1 % of the run with the load on other cores, or the verdict to say why (not held, the wait named, the host's steal time larger); got {:.3} % ({wait} ns of {wall} ns, {steal} ns stolen); verdict: {v}",
        share * 100.0
    );
    assert_eq!(
        lp["exclusive"], true,
        "expected the loop's core to be the packet path's alone: {v}"
    );
    if v["held"] == false {
        // The server's threads cannot be among them (their masks were checked above): what
        // is left is the kernel's and other programs' work on that core, and the host.
        let causes = v["causes"].as_array().unwrap();
        assert!(
            causes.iter().all(|c| !c.as_str().unwrap().starts_with("other tasks took")),
            "the run was NOT held: expected host stalls, steal or tasks outside gapless as its causes, never gapless's own threads on its core; got {causes:?}"
        );
    }
}

/// Resident memory of `pid`, KiB.
fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_thousand_idle_event_streams_are_bounded() {
    let _one = one_at_a_time();
    raise_fd_limit();
    let dir = tempfile::tempdir().unwrap();
    let (srv, addr) = serve_process(&dir.path().join("g.db"));
    let pid = srv.0.as_ref().unwrap().id();
    let toml = "[[stream]]\nname = \"a\"\n[stream.timing]\nrate_pps = 1000\nduration_s = 60\n";
    let id = start_run(
        addr,
        serde_json::json!({ "toml": toml, "options": { "null": true, "pace": true } }),
    );
    let before = rss_kib(pid);
    let mut open = Vec::new();
    let (mut streaming, mut refused) = (0, 0);
    for _ in 0..1000 {
        let mut s = TcpStream::connect(addr).expect("connect");
        write!(s, "GET /api/runs/{id}/events HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut head = [0u8; 12];
        s.read_exact(&mut head).expect("a status line");
        match &head[9..12] {
            b"200" => streaming += 1,
            b"503" => refused += 1,
            other => panic!("expected 200 or 503; got {}", String::from_utf8_lossy(other)),
        }
        open.push(s); // idle: never read again
    }
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib(pid);
    eprintln!("1000 event streams: {streaming} open, {refused} refused (503); server RSS {before} -> {after} KiB");
    assert_eq!(
        (streaming, refused),
        (256, 744),
        "expected the default bound of 256 open streams"
    );
    assert!(
        after < before + 64 * 1024,
        "expected the server's memory to stay within 64 MiB of {before} KiB with 1000 idle streams; got {after} KiB"
    );
    // The refusal says why and what to do; the API still answers; the run goes on.
    let (st, b) = http(addr, "GET", &format!("/api/runs/{id}/events"), b"", None);
    assert!(
        st == 503 && b.contains("--max-event-streams"),
        "expected 503 naming the flag; got {st}: {b}"
    );
    let (st, b) = http(addr, "GET", &format!("/api/runs/{id}"), b"", None);
    assert_eq!((st, json(&b)["status"].as_str()), (200, Some("running")), "{b}");
    drop(open);
    let (st, b) = http(addr, "POST", &format!("/api/runs/{id}/stop"), b"", None);
    assert!((200..300).contains(&st), "expected the run to stop; got {st}: {b}");
}

/// This test holds 1000 sockets: the soft limit on open files goes up to the hard one.
fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit read and write a valid rlimit.
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    r.rlim_cur = r.rlim_max;
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    assert!(
        r.rlim_cur >= 1100,
        "expected a hard limit of at least 1100 open files; got {}",
        r.rlim_cur
    );
}
