//! The pacer's clock: the TSC read through quanta, scaled to ns by gapless's own calibration
//! against CLOCK_MONOTONIC (once per process, shared by every send loop), read as ns since
//! the run's start; and CLOCK_REALTIME read directly for the run's start time and the
//! signature timestamps.
//!
//! Why not quanta's own scale: it calibrates over a short window and was 35-70 ppm fast on
//! this project's VMs (a 100 kpps run arrived at 100 004.5-100 007 pps at the sink), where a
//! 100 ms calibration is within 10-15 ppm (bench/ceiling.sh; DESIGN-NOTES 28).

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Instant;

use gapless_core::verdict::STALL_NS;

pub struct RunClock {
    clock: quanta::Clock,
    t0_raw: u64,
    /// CLOCK_REALTIME at the run's start, ns since the Unix epoch.
    pub realtime0_ns: u64,
    waits: Cell<WaitStats>,
}

/// What the busy-wait saw: time spent waiting, and stalls (gaps of more than
/// [`STALL_NS`] between two reads of the clock while spinning: the CPU was taken away).
#[derive(Clone, Copy, Default, Debug)]
pub struct WaitStats {
    pub waiting_ns: u64,
    pub stalls: u64,
    pub stall_ns: u64,
    pub stall_max_ns: u64,
}

impl RunClock {
    pub fn new() -> RunClock {
        let clock = quanta::Clock::new();
        let t0_raw = clock.raw();
        let realtime0_ns = Self::realtime_now_ns();
        RunClock {
            clock,
            t0_raw,
            realtime0_ns,
            waits: Cell::new(WaitStats::default()),
        }
    }

    /// ns since the clock was made.
    #[inline(always)]
    pub fn now_ns(&self) -> u64 {
        scale().ns(self.clock.raw().saturating_sub(self.t0_raw))
    }

    /// CLOCK_REALTIME now, ns since the Unix epoch: the clock the kernel stamps received
    /// frames with. Read directly (vDSO, ~30 ns), not derived from the TSC: quanta's TSC
    /// calibration is good to ~15 ppm, which is 15 µs of error per second of run.
    #[inline(always)]
    pub fn realtime_now_ns() -> u64 {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes into a valid timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// The raw counter now (TSC ticks when quanta runs on the TSC): the same on every core,
    /// so send loops can share one zero.
    pub fn raw(&self) -> u64 {
        self.clock.raw()
    }

    /// Sets the run's zero to the raw instant `t0_raw` (taken by [`RunClock::raw`], maybe on
    /// another core), and the wall-clock start to match it.
    pub fn restart_at(&mut self, t0_raw: u64) {
        self.t0_raw = t0_raw;
        let since = scale().ns(self.clock.raw().saturating_sub(t0_raw));
        self.realtime0_ns = Self::realtime_now_ns() - since;
    }

    /// Restarts the run's zero at the current instant.
    pub fn restart(&mut self) {
        self.t0_raw = self.clock.raw();
        self.realtime0_ns = Self::realtime_now_ns();
    }

    /// Raw ticks per second, as calibrated: about the TSC frequency when quanta runs on the
    /// TSC, 1e9 when it fell back to the OS clock.
    pub fn raw_hz(&self) -> f64 {
        scale().hz
    }

    /// What the busy-wait saw so far.
    pub fn wait_stats(&self) -> WaitStats {
        self.waits.get()
    }

    /// Busy-waits until `at_ns`, sleeping first when the wait is long. Returns early if `stop`
    /// is raised during a sleep. Counts the time waited and the stalls the spin saw.
    #[inline]
    pub fn wait_until(&self, at_ns: u64, stop: &std::sync::atomic::AtomicBool) -> u64 {
        const SPIN_NS: u64 = 200_000;
        let start = self.now_ns();
        if start >= at_ns {
            // Late already: no wait, nothing to count.
            return start;
        }
        let mut w = self.waits.get();
        let mut prev = start;
        let now = loop {
            let now = self.now_ns();
            let gap = now.saturating_sub(prev);
            if gap > STALL_NS {
                w.stalls += 1;
                w.stall_ns += gap;
                w.stall_max_ns = w.stall_max_ns.max(gap);
            }
            prev = now;
            if now >= at_ns {
                break now;
            }
            let left = at_ns - now;
            if left > 2 * SPIN_NS {
                std::thread::sleep(std::time::Duration::from_nanos((left - SPIN_NS).min(50_000_000)));
                prev = self.now_ns();
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break prev;
                }
            } else {
                std::hint::spin_loop();
            }
        };
        w.waiting_ns += now.saturating_sub(start);
        self.waits.set(w);
        now
    }
}

/// ns from raw ticks: `ns = ticks · mult / 2^32`, one multiply.
struct Scale {
    mult: u128,
    hz: f64,
}

impl Scale {
    #[inline(always)]
    fn ns(&self, ticks: u64) -> u64 {
        ((u128::from(ticks) * self.mult) >> 32) as u64
    }
}

/// The process's calibration, made on first use.
fn scale() -> &'static Scale {
    static SCALE: OnceLock<Scale> = OnceLock::new();
    SCALE.get_or_init(|| calibrate(std::time::Duration::from_millis(100)))
}

/// Counts raw ticks against CLOCK_MONOTONIC over `span`. Each end is the tightest of a few
/// (monotonic, raw, monotonic) reads, so a preemption between two reads costs nothing.
fn calibrate(span: std::time::Duration) -> Scale {
    let clock = quanta::Clock::new();
    let pair = || {
        (0..16)
            .map(|_| {
                let a = Instant::now();
                let r = clock.raw();
                let b = Instant::now();
                (b - a, a + (b - a) / 2, r)
            })
            .min_by_key(|p| p.0)
            .map(|p| (p.1, p.2))
            .expect("16 reads")
    };
    let (i0, r0) = pair();
    std::thread::sleep(span);
    let (i1, r1) = pair();
    let hz = r1.wrapping_sub(r0) as f64 / (i1 - i0).as_secs_f64();
    Scale {
        mult: ((1e9 / hz) * 4_294_967_296.0).round() as u128,
        hz,
    }
}

impl Default for RunClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_turns_ticks_into_the_monotonic_clocks_ns() {
        let c = RunClock::new();
        let (a, i0) = (c.now_ns(), Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (b, i1) = (c.now_ns(), Instant::now());
        let want = (i1 - i0).as_nanos() as f64;
        let err = (b - a) as f64 / want - 1.0;
        // A preemption between the paired reads here costs at most a few µs of 300 ms.
        assert!(
            err.abs() < 1e-4,
            "expected within 100 ppm of CLOCK_MONOTONIC, got {:.1} ppm",
            err * 1e6
        );
        let s = scale();
        assert_eq!(s.ns(0), 0);
        assert!(
            (s.ns(s.hz as u64) as f64 - 1e9).abs() < 2.0,
            "one second of ticks is 1e9 ns"
        );
    }
}
