//! This host's clock: its state as the kernel (adjtimex, read only), linuxptp (`pmc`, where
//! installed and answering) and chrony (`chronyc`, likewise) report it, and the wall clock
//! in ns. gapless checks the clock; it never sets it.

use std::process::{Command, Stdio};
use std::time::Duration;

use gapless_core::timing::clocks::{self, ClockState};

/// STA_UNSYNC in `timex.status`: the clock is not synchronised.
const STA_UNSYNC: i32 = 0x0040;

/// The wall clock (CLOCK_REALTIME), ns since the epoch.
pub fn realtime_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// The clock's state now. The kernel's part always; linuxptp's and chrony's where their
/// tools answer within a second (absent otherwise: not every host runs them).
pub fn state() -> ClockState {
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: modes = 0 reads only; tx is a valid timex for the kernel to fill.
    let rc = unsafe { libc::adjtimex(&mut tx) };
    ClockState {
        // TIME_ERROR (5) also says the clock is not synchronised.
        unsynchronised: rc == libc::TIME_ERROR || tx.status & STA_UNSYNC != 0,
        maxerror_ns: tx.maxerror as i64 * 1000,
        esterror_ns: tx.esterror as i64 * 1000,
        ptp: tool("pmc", &["-u", "-b", "0", "GET PORT_DATA_SET", "GET CURRENT_DATA_SET"])
            .and_then(|o| clocks::parse_pmc(&o)),
        chrony: tool("chronyc", &["-c", "tracking"]).and_then(|o| clocks::parse_chrony_tracking(&o)),
    }
}

/// A tool's output, when it is installed and answers within a second.
fn tool(cmd: &str, args: &[&str]) -> Option<String> {
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let t0 = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if t0.elapsed() > Duration::from_secs(1) => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_clock_state_and_the_wall_clock_are_read() {
        let s = state();
        assert!(
            s.maxerror_ns >= 0 && s.esterror_ns >= 0,
            "expected errors ≥ 0; got {s:?}"
        );
        let (a, b) = (realtime_ns(), realtime_ns());
        let sys = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64;
        assert!(
            b >= a && (sys - b).abs() < 1_000_000_000,
            "expected the wall clock; got {a}, {b} vs {sys}"
        );
        assert_eq!(tool("gapless-no-such-tool", &[]), None);
    }
}
