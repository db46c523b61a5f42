//! The keeper: a process forked once per server, when it starts its first FRR daemon, that
//! stops the server's daemons when the server is gone, however it went (`kill -9` included).
//!
//! A parent-death signal set on a daemon does not hold: FRR's daemons fork away (`-d`) and
//! change user (`-u frr`), and either clears it. So the keeper holds the read end of a pipe
//! whose only write end is the server's (close-on-exec: no daemon inherits it). The server
//! writes each daemon's PID as it starts it (`+PID\n`) and as it stops it (`-PID\n`). When
//! the pipe reads end of file the server is gone: the keeper sends SIGTERM to every PID it
//! still holds (bgpd then closes its sessions with a Cease), SIGKILL 300 ms later, and exits.
//!
//! The child of `fork` in a threaded process may only make async-signal-safe calls: it
//! reads, parses into an array on its stack, signals and sleeps, and allocates nothing.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

use crate::error::IoError;

/// The write end of the keeper's pipe, once it runs.
static PIPE: Mutex<Option<std::fs::File>> = Mutex::new(None);

/// The most daemons one keeper holds (a server with more stops those above by itself).
const MAX_PIDS: usize = 8192;

/// Tells the keeper (started on the first call) that `pid` is a daemon of this server.
pub(crate) fn register(pid: i32) -> Result<(), IoError> {
    say(b'+', pid)
}

/// Tells the keeper that `pid` was stopped by the server.
pub(crate) fn unregister(pid: i32) {
    let _ = say(b'-', pid);
}

fn say(sign: u8, pid: i32) -> Result<(), IoError> {
    let mut pipe = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    if pipe.is_none() {
        *pipe = Some(start()?);
    }
    let line = format!("{}{pid}\n", sign as char);
    pipe.as_mut()
        .expect("started")
        .write_all(line.as_bytes())
        .map_err(|e| os("writing to the daemons' keeper", e))
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
    // SAFETY: the child runs only `keep`, which makes async-signal-safe calls and never returns.
    match unsafe { libc::fork() } {
        -1 => Err(os("forking the daemons' keeper", std::io::Error::last_os_error())),
        0 => unsafe { keep(read.as_raw_fd(), null.as_raw_fd()) },
        _ => Ok(std::fs::File::from(write)),
    }
}

/// The keeper's life: the pipe on its stdin, nothing else open, deaf to the signals that
/// stop a server (a terminal's Ctrl-C reaches its whole process group), until end of file.
///
/// # Safety
/// Only in the child of `fork`, with `read` and `null` open descriptors.
unsafe fn keep(read: i32, null: i32) -> ! {
    // SAFETY: async-signal-safe calls on descriptors and constants of this process.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::setsid();
        libc::dup2(read, 0);
        libc::dup2(null, 1);
        libc::dup2(null, 2);
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
    }
    let mut pids = [0i32; MAX_PIDS];
    let n = hold(&mut pids);
    let wait = libc::timespec {
        tv_sec: 0,
        tv_nsec: 300_000_000,
    };
    // SAFETY: signals to the PIDs the server registered, a sleep, and the child's exit.
    unsafe {
        for &pid in &pids[..n] {
            libc::kill(pid, libc::SIGTERM);
        }
        libc::nanosleep(&wait, std::ptr::null_mut());
        for &pid in &pids[..n] {
            libc::kill(pid, libc::SIGKILL);
        }
        libc::_exit(0)
    }
}

/// Reads `+PID` and `-PID` lines from stdin until end of file; returns how many PIDs of
/// `pids` are held. Allocates nothing (it runs in the keeper).
fn hold(pids: &mut [i32; MAX_PIDS]) -> usize {
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
                n = apply(pids, n, add, pid);
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

/// Adds or removes `pid` among the first `n` of `pids`; returns the new count.
fn apply(pids: &mut [i32; MAX_PIDS], n: usize, add: bool, pid: i32) -> usize {
    match pids[..n].iter().position(|&p| p == pid) {
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
    fn the_keeper_holds_the_pids_added_and_not_removed() {
        let mut pids = [0i32; MAX_PIDS];
        let mut line = Line::default();
        let mut n = 0;
        for b in b"+12\n+34\nx+5\n-12\n+34\n+\n-99\n+56\n".iter() {
            if let Some((add, pid)) = line.push(*b) {
                n = apply(&mut pids, n, add, pid);
            }
        }
        let mut held = pids[..n].to_vec();
        held.sort_unstable();
        assert_eq!(
            held,
            [5, 34, 56],
            "expected 12 removed, 34 once, the malformed lines skipped"
        );
    }
}
