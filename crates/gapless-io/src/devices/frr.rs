//! FRR routing daemons for emulated devices: one daemon started in a device's network
//! namespace with a configuration file, driven through its vty socket (a command, then a
//! NUL; the reply ends in three NULs and a status byte: 0.1–0.3 ms a command, where one
//! `vtysh -c` costs 30–50 ms), stopped by its PID. Each runs in a directory of its own,
//! `/run/gapless-frr/<server pid>-<k>/`, owned by FRR's user; [`remove_stale`] stops the
//! daemons of a server that is gone and removes their directories. May import `error`,
//! `kernel` and `socket` (`wire`).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::IoError;
use crate::kernel::nic;

pub(crate) mod keeper;
pub mod wire;

/// Where the daemons' directories are.
pub const ROOT: &str = "/run/gapless-frr";
/// Where Debian's `frr` package puts the daemons.
pub const BIN: &str = "/usr/lib/frr";

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    /// `bgpd`, `isisd`, ...
    pub kind: String,
    pub netns: String,
    pub pid: i32,
    dir: PathBuf,
}

/// The daemon's binary, or an error that says how to install FRR.
pub fn binary(kind: &str) -> Result<PathBuf, IoError> {
    let p = Path::new(BIN).join(kind);
    if p.exists() {
        Ok(p)
    } else {
        Err(IoError::MissingCapabilities {
            what: format!("FRR's {kind} ({})", p.display()),
            missing: "the frr package".into(),
            fix: "apt-get install frr (bash scripts/setup.sh installs it)".into(),
        })
    }
}

impl Daemon {
    /// Starts `kind` in `netns` with `config`, in directory `<ROOT>/<pid>-<k>`; waits up to
    /// 5 s for its vty socket. A `bgpd` alone runs without zebra (`-Z`); the daemons of one
    /// directory otherwise share its zebra (`zserv.api` there), which starts first.
    pub fn start(kind: &str, netns: &str, k: usize, config: &str) -> Result<Daemon, IoError> {
        check_lines(kind, config)?;
        let bin = binary(kind)?;
        let dir = Path::new(ROOT).join(format!("{}-{k}", std::process::id()));
        let mut daemon = Daemon {
            kind: kind.to_string(),
            netns: netns.to_string(),
            pid: 0,
            dir,
        };
        daemon.remove_files();
        std::fs::create_dir_all(&daemon.dir).map_err(|e| io(&daemon.dir, e))?;
        chown_frr(&daemon.dir)?;
        let conf = daemon.file("conf");
        std::fs::write(&conf, config).map_err(|e| io(&conf, e))?;
        chown_frr(&conf)?;
        let pidfile = daemon.file("pid");
        let d = daemon.dir.display();
        let zserv = daemon.dir.join("zserv.api");
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", netns])
            .arg(&bin)
            .args(["-d", "-P", "0", "-u", "frr", "-g", "frr"]);
        if kind == "bgpd" && !zserv.exists() {
            cmd.arg("-Z");
        }
        let instance = format!("gl{}-{k}", std::process::id());
        let out = cmd
            .arg("-z")
            .arg(&zserv)
            .arg("-N")
            .arg(&instance)
            .arg("-f")
            .arg(&conf)
            .arg("-i")
            .arg(&pidfile)
            .arg(format!("--vty_socket={d}"))
            .arg(format!("--log=file:{d}/{kind}.log"))
            .output()
            .map_err(|e| io(&bin, e))?;
        if !out.status.success() {
            return Err(IoError::Command {
                cmd: format!("ip netns exec {netns} {} -d -f {}", bin.display(), conf.display()),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        daemon.pid = match wait_for_pid(&pidfile, &daemon.file("vty")) {
            Ok(pid) => pid,
            Err(e) => {
                // Stopped, not forgotten: its PID file may not be there to name it.
                for pid in instance_pids(kind, &instance) {
                    stop_pid(pid);
                }
                daemon.remove_files();
                return Err(e);
            }
        };
        if let Err(e) = keeper::register(daemon.pid) {
            daemon.stop();
            return Err(e);
        }
        daemon.check_config(&conf, config.lines().count())?;
        Ok(daemon)
    }

    /// The daemon's file with extension `ext` (`conf`, `pid`, `vty`, `log`).
    fn file(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.kind))
    }

    /// Removes the daemon's files (and zebra's socket with zebra's), then the directory if
    /// no other daemon's are left in it.
    fn remove_files(&self) {
        for ext in ["conf", "pid", "vty", "log"] {
            let _ = std::fs::remove_file(self.file(ext));
        }
        if self.kind == "zebra" {
            let _ = std::fs::remove_file(self.dir.join("zserv.api"));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }

    /// Whether the daemon still runs.
    pub fn alive(&self) -> bool {
        running(self.pid)
    }

    /// The daemon's whole log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.file("log")).unwrap_or_default()
    }

    /// The daemon's log (its last lines), for an error that says why it exited.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.file("log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(3)..].join(" | ")
    }

    /// Runs `commands` in one vty session, after `enable`; returns each reply. A command
    /// the daemon refuses (a status byte other than 0) is an error naming it.
    pub fn vty(&self, commands: &[String]) -> Result<Vec<String>, IoError> {
        self.vty_within(commands, Duration::from_secs(10))
    }

    /// [`Daemon::vty`], each reply awaited up to `within`.
    fn vty_within(&self, commands: &[String], within: Duration) -> Result<Vec<String>, IoError> {
        let path = self.file("vty");
        let mut s = UnixStream::connect(&path).map_err(|e| io(&path, e))?;
        s.set_read_timeout(Some(within)).map_err(|e| io(&path, e))?;
        let mut out = Vec::with_capacity(commands.len());
        for c in std::iter::once("enable").chain(commands.iter().map(String::as_str)) {
            if !one_line(c) {
                return Err(IoError::Input {
                    path: format!("{} vty", self.kind),
                    message: format!("{c:?} is not one printable line"),
                    fix: "this is a fault of gapless's FRR mapping, not of the request: report it".into(),
                });
            }
            let (text, status) = exchange(&mut s, c).map_err(|e| io(&path, e))?;
            if status != 0 {
                return Err(IoError::Command {
                    cmd: format!("{} vty: {c}", self.kind),
                    stderr: format!("status {status}: {}", text.trim()),
                });
            }
            if c != "enable" {
                out.push(text);
            }
        }
        Ok(out)
    }

    /// Stops the daemon (SIGTERM, then SIGKILL after 2 s) and removes its files, and its
    /// directory when it was the last daemon there.
    pub fn stop(&mut self) {
        if self.pid > 0 {
            keeper::unregister(self.pid);
            stop_pid(self.pid);
            self.pid = 0;
        }
        self.remove_files();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One command and its reply (the text, and the status byte).
fn exchange(s: &mut UnixStream, command: &str) -> std::io::Result<(String, u8)> {
    s.write_all(command.as_bytes())?;
    s.write_all(&[0])?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the daemon closed its vty",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        let k = buf.len();
        if k >= 4 && buf[k - 4..k - 1] == [0, 0, 0] {
            let status = buf[k - 1];
            buf.truncate(k - 4);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), status));
        }
    }
}

/// The first words of every configuration line gapless writes, for any daemon. A line that
/// starts otherwise (`log file PATH`, `password`, `line vty`, ...) was not written by the
/// mapping, and nothing writes it.
const FIRST_WORDS: &[&str] = &[
    "!",
    "address-family",
    "area-password",
    "attached-bit",
    "bgp",
    "domain-password",
    "exit",
    "exit-address-family",
    "frr",
    "hostname",
    "interface",
    "ip",
    "ipv6",
    "is-type",
    "isis",
    "log-adjacency-changes",
    "lsp-gen-interval",
    "lsp-refresh-interval",
    "match",
    "max-lsp-lifetime",
    "metric-style",
    "neighbor",
    "net",
    "network",
    "no",
    "ospf",
    "ospf6",
    "redistribute",
    "refresh",
    "route-map",
    "router",
    "set",
    "spf-interval",
    "timers",
];

/// The last gate before FRR: every line of `config` is printable ASCII and starts with one
/// of [`FIRST_WORDS`], and every vty command is one printable line. The mapping checks each
/// string it writes (`gapless_otg::frr::gate`); this refuses, naming the line, what a fault
/// there would let through.
pub fn check_lines(kind: &str, config: &str) -> Result<(), IoError> {
    for (n, line) in config.split('\n').enumerate() {
        let first = line.split_whitespace().next().unwrap_or("!");
        if !line.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) || !FIRST_WORDS.contains(&first) {
            return Err(IoError::Input {
                path: format!("{kind}'s configuration, line {}", n + 1),
                message: format!("{line:?} is not a line gapless writes"),
                fix: "this is a fault of gapless's FRR mapping, not of the config: report it with the config".into(),
            });
        }
    }
    Ok(())
}

/// Whether `command` is one vty line: printable ASCII (spaces allowed), no line break.
fn one_line(command: &str) -> bool {
    command.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
}

/// The lines of a daemon's log (or of its dry run, `-C`) that say it refused a line of its
/// configuration. Not any line with "failed": FRR's own `failed to mkdir
/// "/var/tmp/frr/bgpd.PID": File exists` (a stale directory of an earlier daemon with the
/// same PID, of which a busy machine keeps thousands) is not a refusal.
pub fn refused_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("config line") || l.contains("Configuration failed") || l.contains("YANG error"))
        .map(|l| l.split("] ").last().unwrap_or(l).trim())
        .collect()
}

impl Daemon {
    /// Whether the running daemon took every line of its configuration: a line it refuses
    /// is logged and skipped, so its log is read once the configuration is in. The daemon
    /// reads it in its first event, before it answers its vty, so one vty exchange waits for
    /// it. A daemon that refused a line, or did not answer, is stopped. This replaced a dry
    /// run (`-C`) before the start, which cost a process of 20–40 ms a device (DESIGN-NOTES 75).
    ///
    /// The wait grows with the configuration: staticd's load time grows with the square of
    /// its routes (1 000 took 8.6 s here), so a daemon's first answer may be that late.
    fn check_config(&mut self, conf: &Path, lines: usize) -> Result<(), IoError> {
        let within = Duration::from_secs(10) + Duration::from_millis(30 * lines as u64);
        let checked = self.vty_within(&[], within).and_then(|_| {
            let log = self.log();
            let refused = refused_lines(&log);
            if refused.is_empty() {
                return Ok(());
            }
            Err(IoError::Input {
                path: conf.display().to_string(),
                message: format!("FRR's {} refused its configuration: {}", self.kind, refused.join(" | ")),
                fix: "the value on that line is one FRR does not take (gapless writes configurations for Debian's FRR 8.4.4; another version may differ): change it in the config, or report the line".into(),
            })
        });
        if checked.is_err() {
            self.stop();
        }
        checked
    }
}

fn wait_for_pid(pidfile: &Path, vty: &Path) -> Result<i32, IoError> {
    let t0 = Instant::now();
    loop {
        let pid = std::fs::read_to_string(pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        if let (Some(pid), true) = (pid, vty.exists()) {
            return Ok(pid);
        }
        if t0.elapsed() > Duration::from_secs(5) {
            return Err(IoError::Command {
                cmd: format!("waiting for {}", vty.display()),
                stderr: "the daemon did not open its vty socket within 5 s".into(),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The PIDs of the processes of daemon `kind` started as `-N instance`, from their command
/// lines in /proc.
fn instance_pids(kind: &str, instance: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
            let of_kind = args.first().is_some_and(|a| a.ends_with(format!("/{kind}").as_bytes()));
            of_kind && args.windows(2).any(|w| w[0] == b"-N" && w[1] == instance.as_bytes())
        })
        .collect()
}

/// Whether `pid` runs: it exists and is not a zombie. A daemon forks away from its
/// starter, so when it exits nobody here reaps it, and a signal 0 would still find it.
fn running(pid: i32) -> bool {
    crate::devices::liveness::stat_of(pid).is_some_and(|(_, runs)| runs)
}

fn stop_pid(pid: i32) {
    // SAFETY: signals to a PID this server started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let t0 = Instant::now();
    while running(pid) && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    if running(pid) {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

fn chown_frr(p: &Path) -> Result<(), IoError> {
    let name = std::ffi::CString::new("frr").expect("no NUL");
    // SAFETY: getpwnam with a valid C string; the result is read at once.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        return Err(binary("bgpd").err().unwrap_or(IoError::MissingCapabilities {
            what: "FRR's user".into(),
            missing: "the frr user".into(),
            fix: "apt-get install --reinstall frr".into(),
        }));
    }
    // SAFETY: pw is non-null and points to a passwd entry.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    std::os::unix::fs::chown(p, Some(uid), Some(gid)).map_err(|e| io(p, e))
}

fn io(p: &Path, cause: std::io::Error) -> IoError {
    IoError::Os {
        context: p.display().to_string(),
        cause,
    }
}

/// Sets the stub interface `name` in `netns` up or down: a route range announced from it
/// comes or goes (its connected routes with its carrier).
pub fn set_stub(netns: &str, name: &str, up: bool) -> Result<(), IoError> {
    let state = if up { "up" } else { "down" };
    nic::ip(&["-n", netns, "link", "set", name, state]).map(drop)
}

/// Makes (again) a stub interface `name` in `netns`: a veth pair (`name`, `name`p) inside the
/// namespace, both up, `name` holding `addrs`. A routing daemon announces the prefixes of its
/// addresses; nothing is sent on it. The namespace's removal removes it.
pub fn stub_interface(netns: &str, name: &str, addrs: &[(std::net::IpAddr, u8)]) -> Result<(), IoError> {
    let _ = nic::ip(&["-n", netns, "link", "del", name]);
    let peer = format!("{name}p");
    nic::ip(&["-n", netns, "link", "add", name, "type", "veth", "peer", "name", &peer])?;
    keep_addresses_when_down(netns, name)?;
    let mut batch: String = addrs
        .iter()
        .map(|(a, len)| format!("addr add {a}/{len} dev {name}\n"))
        .collect();
    batch += &format!("link set {peer} up\nlink set {name} up\n");
    nic::ip_batch(Some(netns), &batch)
}

/// Linux drops an interface's IPv6 addresses when it goes down; a stub set down to withdraw
/// its range ([`set_stub`]) must find them again when it comes up.
fn keep_addresses_when_down(netns: &str, name: &str) -> Result<(), IoError> {
    let key = format!("net.ipv6.conf.{name}.keep_addr_on_down=1");
    nic::ip(&["netns", "exec", netns, "sysctl", "-q", "-w", &key]).map(drop)
}

/// Stops the daemons of servers that are gone (their PID no longer runs) and removes their
/// directories; returns the directories removed.
pub fn remove_stale() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(ROOT) else {
        return Vec::new();
    };
    let mut gone = Vec::new();
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(owner) = name.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        // The directory changes as the owner starts each daemon in it: an owner that runs
        // started before that (liveness::owner_runs; a later process took a freed PID).
        let made = crate::devices::liveness::made_at(&e.path()).unwrap_or_else(std::time::SystemTime::now);
        if owner == std::process::id() as i32 || crate::devices::liveness::owner_runs(owner, made) {
            continue;
        }
        for f in std::fs::read_dir(e.path()).into_iter().flatten().flatten() {
            let path = f.path();
            let kind = path.file_stem().map(|s| s.to_string_lossy().into_owned());
            let pid = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok());
            // Only a daemon of the kind the PID file names: a PID may have been reused.
            let comm = pid.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).ok());
            let ours = path.extension().is_some_and(|x| x == "pid") && comm.map(|c| c.trim().to_string()) == kind;
            if let (true, Some(pid)) = (ours, pid) {
                stop_pid(pid);
            }
        }
        let _ = std::fs::remove_dir_all(e.path());
        gone.push(name);
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A namespace of its own for one test, removed when dropped.
    struct Netns(String);
    impl Drop for Netns {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }

    /// A server's directory whose PID now names a process that started after it was made
    /// (the PID was freed and taken again) is stale; one whose owner runs is kept.
    #[test]
    fn a_directory_is_stale_when_its_pid_now_names_a_later_process() {
        let mut later = Command::new("sleep").arg("30").spawn().expect("sleep runs");
        let pid = later.id() as i32;
        let (stale, kept) = (
            Path::new(ROOT).join(format!("{pid}-7")),
            Path::new(ROOT).join(format!("{}-8", std::process::id())),
        );
        for d in [&stale, &kept] {
            std::fs::create_dir_all(d).expect("made under /run (run as root)");
        }
        // Made an hour before the process under its PID started: a reused PID.
        let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
        let f = std::fs::File::open(&stale).expect("opened");
        f.set_modified(hour_ago).expect("mtime set");
        let gone = remove_stale();
        let _ = later.kill();
        let _ = later.wait();
        let _ = std::fs::remove_dir_all(&kept);
        let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            gone.contains(&name(&stale)) && !stale.exists(),
            "expected {} removed (its PID is a later process); removed {gone:?}",
            name(&stale)
        );
        assert!(
            !gone.contains(&name(&kept)),
            "expected this process's own directory kept; removed {gone:?}"
        );
    }

    #[test]
    fn only_lines_gapless_writes_reach_a_daemon() {
        let good = "frr defaults traditional\n!\nrouter bgp 65001\n bgp router-id 1.1.1.1\n neighbor 1.1.1.2 password k3y!\n!\n";
        assert!(check_lines("bgpd", good).is_ok(), "expected bgpd's own lines to pass");
        for (bad, line) in [
            ("router bgp 1\nlog file /tmp/x\n", 2),
            ("router bgp 1\n set origin igp\rlog file /tmp/x\n", 2),
            ("line vty\n", 1),
            ("hostname a\u{1b}b\n", 1),
        ] {
            let e = check_lines("bgpd", bad).expect_err("refused").to_string();
            assert!(
                e.contains(&format!("line {line}")),
                "expected line {line} named for {bad:?}; got {e}"
            );
        }
        assert!(
            !one_line("show bgp summary\nconfigure"),
            "expected a vty command with a line break refused"
        );
        assert!(one_line("show ip route json"));
    }

    #[test]
    fn a_daemon_that_refuses_a_line_of_its_configuration_is_stopped_and_the_error_names_the_line() {
        let ns = Netns(format!("glfrrt-{}", std::process::id()));
        let made = Command::new("ip").args(["netns", "add", &ns.0]).status().unwrap();
        assert!(
            made.success(),
            "expected ip netns add {} to succeed (run as root)",
            ns.0
        );
        let good = "frr defaults traditional\nrouter bgp 65001\n bgp router-id 1.1.1.1\n!\n";
        let mut d = Daemon::start("bgpd", &ns.0, 90_001, good).expect("bgpd takes a valid configuration");
        assert!(running(d.pid), "expected bgpd to run");
        d.stop();
        let bad = good.replace(
            " bgp router-id 1.1.1.1\n",
            " bgp router-id 1.1.1.1\n bgp no-such-knob 7\n",
        );
        let e = Daemon::start("bgpd", &ns.0, 90_002, &bad)
            .expect_err("a refused line is an error")
            .to_string();
        assert!(
            e.contains("bgpd refused its configuration") && e.contains("config line 4") && e.contains("no-such-knob"),
            "expected the refused line named; got {e}"
        );
        let left = std::fs::read_dir(ROOT)
            .map(|r| r.flatten().any(|f| f.file_name().to_string_lossy().ends_with("-90002")))
            .unwrap_or(false);
        assert!(!left, "expected the refusing daemon's files removed");
    }
}
