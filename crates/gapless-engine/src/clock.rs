//! The pacer's clock: the TSC through quanta, calibrated against CLOCK_MONOTONIC, read as ns
//! since the run's start, and CLOCK_REALTIME read directly for the run's start time and the
//! signature timestamps.

use std::cell::Cell;
use std::time::Instant;

use gapless_core::result::verdict::STALL_NS;

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
        self.clock.delta_as_nanos(self.t0_raw, self.clock.raw())
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
        let since = self.clock.delta_as_nanos(t0_raw, self.clock.raw());
        self.realtime0_ns = Self::realtime_now_ns() - since;
    }

    /// Restarts the run's zero at the current instant.
    pub fn restart(&mut self) {
        self.t0_raw = self.clock.raw();
        self.realtime0_ns = Self::realtime_now_ns();
    }

    /// Counts raw ticks against CLOCK_MONOTONIC for `ms` milliseconds. Returns ticks per
    /// second: about the TSC frequency when quanta runs on the TSC, 1e9 when it fell back
    /// to the OS clock.
    pub fn raw_hz(&self, ms: u64) -> f64 {
        let (r0, i0) = (self.clock.raw(), Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(ms));
        let (r1, i1) = (self.clock.raw(), Instant::now());
        (r1 - r0) as f64 / (i1 - i0).as_secs_f64()
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

impl Default for RunClock {
    fn default() -> Self {
        Self::new()
    }
}
