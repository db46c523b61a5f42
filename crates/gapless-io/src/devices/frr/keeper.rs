//! The keeper: a process forked once per server, when it starts its first FRR daemon, that
//! stops the server's daemons when the server is gone, however it went (`kill -9` included).
//!
//! A parent-death signal set on a daemon does not hold: FRR's daemons fork away (`-d`) and
//! change user (`-u frr`), and either clears it. So the keeper holds the read end of a pipe
//! whose only write end is the server's (close-on-exec: no daemon inherits it). The server
//! writes each daemon's PID as it starts it (`+PID\n`) and as it stops it (`-PID\n`). When
//! the pipe reads end of file the server is gone: the keeper sends SIGTERM to every PID it
//! still holds (bgpd then closes its sessions with a Cease), SIGKILL 300 ms later, removes
//! the server's device and LAG namespaces (`gapless-dev-<server pid>-*` under /run/netns:
//! unmounted and unlinked as `ip netns del` does, so their macvlans and veths on the test
//! ports go with them and nothing is left answering ARP or ND), and exits. It starts with the
//! server's first daemon or first namespace ([`watch`]), whichever comes first.
//!
//! A PID is known by its start time as well (read when it is registered): one that was
//! reused by another process by then is not signalled. A keeper that died is replaced at the
//! server's next line to it (its pipe is broken), and the new one is told every daemon still
//! registered. The keeper closes every inherited descriptor, one by one where `close_range`
//! is refused (a kernel before 5.9, a seccomp profile).
//!
//! The child of `fork` in a threaded process may only make async-signal-safe calls: it
//! reads, parses into an array on its stack, signals and sleeps, and allocates nothing.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

use crate::error::IoError;

/// The write end of the keeper's pipe, once it runs.
static PIPE: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// The daemons registered and not stopped, so that a keeper started in place of one that
/// died is told them all.
static LIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// The keeper's PID (0 before it starts).
static KEEPER: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The most daemons one keeper holds (a server with more stops those above by itself).
const MAX_PIDS: usize = 8192;

/// Tells the keeper (started on the first call) that `pid` is a daemon of this server.
pub(crate) fn register(pid: i32) -> Result<(), IoError> {
    say(b'+', pid)
}

/// Starts the keeper (if it does not run yet), so the namespaces this server makes are removed
/// when it is gone.
pub(crate) fn watch() -> Result<(), IoError> {
    let mut pipe = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    if pipe.is_none() {
        *pipe = Some(start()?);
    }
    Ok(())
}

/// Tells the keeper that `pid` was stopped by the server.
pub(crate) fn unregister(pid: i32) {
    let _ = say(b'-', pid);
}

/// Tells the keeper one line; a keeper that died (its pipe broken) is replaced by a new one,
/// told every daemon still registered.
fn say(sign: u8, pid: i32) -> Result<(), IoError> {
    let mut pipe = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    match sign {
        b'+' => live.push(pid),
        _ => live.retain(|&p| p != pid),
    }
    let line = format!("{}{pid}\n", sign as char);
    let told = pipe.as_mut().map(|p| p.write_all(line.as_bytes()));
    if matches!(told, Some(Ok(()))) {
        return Ok(());
    }
    // None started yet, or the keeper is gone: a new one, told every live daemon.
    let mut fresh = start()?;
    let all: String = live.iter().map(|p| format!("+{p}\n")).collect();
    fresh
        .write_all(all.as_bytes())
        .map_err(|e| os("writing to the daemons' keeper", e))?;
    *pipe = Some(fresh);
    Ok(())
}

fn os(context: &str, cause: std::io::Error) -> IoError {
    IoError::Os {
        context: context.into(),
        cause,
    }
}

/// Forks the keeper; returns the write end of its pipe.
fn start() -> Result<std::fs::File, IoError> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors; both are owned below.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os("making the daemons' keeper's pipe", std::io::Error::last_os_error()));
    }
    // SAFETY: fresh descriptors from pipe2, owned once each.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let null = std::fs::File::open("/dev/null").map_err(|e| os("opening /dev/null", e))?;
    // The namespaces' prefix, made before the fork (the child allocates nothing).
    let mut prefix = [0u8; PREFIX_MAX];
    let p = format!("{NETNS_PREFIX}{}-", std::process::id());
    prefix[..p.len()].copy_from_slice(p.as_bytes());
    let prefix_len = p.len();
    // SAFETY: the child runs only `keep`, which makes async-signal-safe calls and never returns.
    match unsafe { libc::fork() } {
        -1 => Err(os("forking the daemons' keeper", std::io::Error::last_os_error())),
        0 => unsafe { keep(read.as_raw_fd(), null.as_raw_fd(), &prefix[..prefix_len]) },
        child => {
            let old = KEEPER.swap(child, std::sync::atomic::Ordering::Relaxed);
            if old > 0 {
                // SAFETY: reaps the keeper this one replaces (our child) if it is gone.
                unsafe { libc::waitpid(old, std::ptr::null_mut(), libc::WNOHANG) };
            }
            Ok(std::fs::File::from(write))
        }
    }
}

/// The keeper's life: the pipe on its stdin, nothing else open, deaf to the signals that
/// stop a server (a terminal's Ctrl-C reaches its whole process group), until end of file.
///
/// # Safety
/// Only in the child of `fork`, with `read` and `null` open descriptors.
unsafe fn keep(read: i32, null: i32, prefix: &[u8]) -> ! {
    // SAFETY: async-signal-safe calls on descriptors and constants of this process.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::setsid();
        libc::dup2(read, 0);
        libc::dup2(null, 1);
        libc::dup2(null, 2);
        close_from_3();
    }
    let mut pids = [(0i32, 0u64); MAX_PIDS];
    let n = hold(&mut pids);
    let wait = libc::timespec {
        tv_sec: 0,
        tv_nsec: 300_000_000,
    };
    // SAFETY: signals to the PIDs the server registered that are still the processes it
    // registered (the same start time), a sleep, and the child's exit.
    unsafe {
        for &(pid, t) in &pids[..n] {
            if start_time(pid) == t {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        libc::nanosleep(&wait, std::ptr::null_mut());
        for &(pid, t) in &pids[..n] {
            if start_time(pid) == t {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        remove_namespaces(prefix);
        libc::_exit(0)
    }
}

/// Closes every descriptor from 3 up: `close_range`, or where the kernel (before 5.9) or a
/// seccomp profile refuses it, each one up to the descriptor limit. Otherwise the keeper
/// would keep the server's listening sockets and its own pipe's write end.
///
/// # Safety
/// Only in the keeper, which uses no descriptor above 2.
unsafe fn close_from_3() {
    // SAFETY: plain syscalls on this process's descriptors.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) == 0 {
            return;
        }
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let top = match libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) {
            0 => rl.rlim_cur.min(1 << 20) as i32,
            _ => 65_536,
        };
        for fd in 3..top {
            libc::close(fd);
        }
    }
}

/// A process's start time (clock ticks since boot, field 22 of /proc/PID/stat), 0 if it is
/// gone: a PID with another start time was reused by another process. Allocates nothing.
fn start_time(pid: i32) -> u64 {
    let mut path = [0u8; 32];
    let mut at = 0;
    for &b in b"/proc/" {
        path[at] = b;
        at += 1;
    }
    let mut digits = [0u8; 10];
    let (mut k, mut p) = (0, pid.max(0) as u32);
    loop {
        digits[k] = b'0' + (p % 10) as u8;
        k += 1;
        p /= 10;
        if p == 0 {
            break;
        }
    }
    for i in (0..k).rev() {
        path[at] = digits[i];
        at += 1;
    }
    path[at..at + 5].copy_from_slice(b"/stat");
    let mut buf = [0u8; 1024];
    // SAFETY: a NUL-terminated path on the stack; a read into a buffer of its length.
    let n = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return 0;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    crate::devices::liveness::stat_start_time(&buf[..n.max(0) as usize])
}

/// What the names of a server's device and LAG namespaces start with, before its PID
/// (`devices::hosts::NETNS_PREFIX` is this).
pub(crate) const NETNS_PREFIX: &str = "gapless-dev-";

/// The longest namespace prefix (`gapless-dev-<pid>-`).
const PREFIX_MAX: usize = 48;

/// Removes every namespace under /run/netns whose name starts with `prefix`, as `ip netns
/// del` does (a lazy unmount, then the file); scans again until a scan removes none (a
/// directory read while its entries go may skip one), at most eight times. Allocates nothing.
fn remove_namespaces(prefix: &[u8]) {
    for _ in 0..8 {
        if remove_pass(prefix) == 0 {
            return;
        }
    }
}

/// One scan of /run/netns; returns how many namespaces it removed.
fn remove_pass(prefix: &[u8]) -> usize {
    // SAFETY: open, getdents64 into a stack buffer, umount2, unlink and close: plain syscalls.
    unsafe {
        let fd = libc::open(
            c"/run/netns".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return 0;
        }
        let mut buf = [0u8; 4096];
        let mut removed = 0;
        loop {
            let n = libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len());
            if n <= 0 {
                break;
            }
            let mut at = 0usize;
            while at + 19 < n as usize {
                let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
                let name = &buf[at + 19..at + reclen];
                let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                if name[..len].starts_with(prefix) && remove_one(&name[..len]) {
                    removed += 1;
                }
                at += reclen.max(1);
            }
        }
        libc::close(fd);
        removed
    }
}

/// Unmounts and unlinks /run/netns/`name`; whether the file went.
fn remove_one(name: &[u8]) -> bool {
    const DIR: &[u8] = b"/run/netns/";
    let mut path = [0u8; 300];
    if DIR.len() + name.len() + 1 > path.len() {
        return false;
    }
    path[..DIR.len()].copy_from_slice(DIR);
    path[DIR.len()..DIR.len() + name.len()].copy_from_slice(name);
    // SAFETY: a NUL-terminated path on the stack.
    unsafe {
        libc::umount2(path.as_ptr().cast(), libc::MNT_DETACH);
        libc::unlink(path.as_ptr().cast()) == 0
    }
}

/// Reads `+PID` and `-PID` lines from stdin until end of file; returns how many PIDs of
/// `pids` are held, each with its start time when it was added. Allocates nothing (it runs
/// in the keeper).
fn hold(pids: &mut [(i32, u64); MAX_PIDS]) -> usize {
    let mut buf = [0u8; 512];
    let mut line = Line::default();
    let mut n = 0;
    loop {
        // SAFETY: reads into a buffer of its length; errno is this thread's.
        let r = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if r == 0 || (r < 0 && unsafe { *libc::__errno_location() } != libc::EINTR) {
            return n;
        }
        for &b in &buf[..r.max(0) as usize] {
            if let Some((add, pid)) = line.push(b) {
                n = apply(pids, n, add, (pid, if add { start_time(pid) } else { 0 }));
            }
        }
    }
}

/// One `+PID` or `-PID` line being read.
#[derive(Default)]
struct Line {
    add: Option<bool>,
    pid: i32,
}

impl Line {
    /// Takes byte `b`; at the line's end, its sign and PID (none for a malformed line).
    fn push(&mut self, b: u8) -> Option<(bool, i32)> {
        match b {
            b'+' | b'-' => {
                self.add = Some(b == b'+');
                self.pid = 0;
            }
            b'0'..=b'9' => self.pid = self.pid.saturating_mul(10).saturating_add((b - b'0') as i32),
            b'\n' => {
                let done = self.add.take().filter(|_| self.pid > 0).map(|a| (a, self.pid));
                self.pid = 0;
                return done;
            }
            _ => self.add = None,
        }
        None
    }
}

/// Adds or removes `pid` (with its start time) among the first `n` of `pids`; returns the
/// new count.
fn apply(pids: &mut [(i32, u64); MAX_PIDS], n: usize, add: bool, pid: (i32, u64)) -> usize {
    match pids[..n].iter().position(|p| p.0 == pid.0) {
        Some(i) if !add => {
            pids[i] = pids[n - 1];
            n - 1
        }
        None if add && n < MAX_PIDS => {
            pids[n] = pid;
            n + 1
        }
        _ => n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keeper_removes_the_namespaces_of_its_prefix_only() {
        // SAFETY: geteuid has no preconditions.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "expected root (namespaces); CI runs as root"
        );
        let pid = std::process::id();
        let mine = [format!("gapless-dev-{pid}-0"), format!("gapless-dev-{pid}-lag1")];
        let other = format!("gapless-dev-{}-0", pid + 1);
        for n in mine.iter().chain([&other]) {
            crate::kernel::nic::ip(&["netns", "add", n]).expect("netns add");
        }
        let prefix = format!("gapless-dev-{pid}-");
        remove_namespaces(prefix.as_bytes());
        let left = |n: &str| std::path::Path::new("/run/netns").join(n).exists();
        let gone: Vec<bool> = mine.iter().map(|n| !left(n)).collect();
        let kept = left(&other);
        let _ = crate::kernel::nic::ip(&["netns", "del", &other]);
        assert_eq!(gone, [true, true], "expected this server's namespaces removed");
        assert!(kept, "expected another server's namespace {other} kept");
    }

    #[test]
    fn the_keeper_holds_the_pids_added_and_not_removed() {
        let mut pids = [(0i32, 0u64); MAX_PIDS];
        let mut line = Line::default();
        let mut n = 0;
        for b in b"+12\n+34\nx+5\n-12\n+34\n+\n-99\n+56\n".iter() {
            if let Some((add, pid)) = line.push(*b) {
                n = apply(&mut pids, n, add, (pid, 1));
            }
        }
        let mut held: Vec<i32> = pids[..n].iter().map(|p| p.0).collect();
        held.sort_unstable();
        assert_eq!(
            held,
            [5, 34, 56],
            "expected 12 removed, 34 once, the malformed lines skipped"
        );
    }
}

#[cfg(test)]
mod identity {
    use super::*;
    use crate::devices::liveness::stat_start_time;

    #[test]
    fn a_pid_is_known_by_its_start_time_and_a_gone_one_has_none() {
        let line = b"4242 (bgpd) x (y) S 1 4242 4242 0 -1 4194560 10 0 0 0 1 2 0 0 20 0 3 0 987654 1000 100";
        assert_eq!(
            stat_start_time(line),
            987654,
            "expected field 22 after a command with spaces and parentheses"
        );
        let me = std::process::id() as i32;
        let t = start_time(me);
        assert!(t > 0, "expected this process's start time; got {t}");
        assert_eq!(start_time(me), t, "expected the same start time read twice");
        assert_eq!(
            start_time(i32::MAX),
            0,
            "expected no start time for a PID that does not exist"
        );
    }

    #[test]
    fn a_keeper_that_died_is_replaced_and_told_the_live_daemons() {
        let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
        let pid = sleeper.id() as i32;
        register(pid).expect("registered");
        let first = KEEPER.load(std::sync::atomic::Ordering::Relaxed);
        assert!(first > 0, "expected a keeper started");
        // SAFETY: SIGKILL to the keeper this process forked.
        unsafe { libc::kill(first, libc::SIGKILL) };
        // SAFETY: reaps it, so its PID no longer names a zombie.
        unsafe { libc::waitpid(first, std::ptr::null_mut(), 0) };
        // The first write after its death may still fit in the pipe; the second finds it broken.
        let mut second = first;
        for _ in 0..2 {
            unregister(pid);
            register(pid).expect("registered again, by a new keeper");
            second = KEEPER.load(std::sync::atomic::Ordering::Relaxed);
        }
        assert_ne!(
            second, first,
            "expected a new keeper after the first died; got the same PID {first}"
        );
        assert!(start_time(second) > 0, "expected the new keeper {second} alive");
        assert_eq!(*LIVE.lock().unwrap(), vec![pid], "expected the daemon registered once");
        unregister(pid);
        let _ = sleeper.kill();
        let _ = sleeper.wait();
    }
}
