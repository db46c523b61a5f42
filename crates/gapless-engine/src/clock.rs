//! The pacer's clock: the TSC (through quanta's raw counter), disciplined to CLOCK_MONOTONIC
//! while the run goes, read as ns since the run's start; and CLOCK_REALTIME read directly
//! for the run's start time and the signature timestamps.
//!
//! Why disciplined: a receiver stamps frames with CLOCK_REALTIME, which runs at
//! CLOCK_MONOTONIC's rate. A TSC frequency measured once over a few milliseconds (quanta's
//! calibration) is off by 15–50 ppm on this project's machines, and every ns of the schedule
//! inherits it: a 100 kpps stream arrives at 100 001.8 pps. So the clock maps ticks to ns
//! with a rate that it re-measures every [`SAMPLE_NS`] against CLOCK_MONOTONIC, over the whole
//! span since the run's start (its error shrinks as 1/span), and steers out any offset it
//! finds within [`SLEW_NS`], without a step: the map stays continuous and increasing.
//! CLOCK_MONOTONIC and not CLOCK_MONOTONIC_RAW: MONOTONIC is the rate NTP or PTP gives the
//! wall clock the receiver stamps with; RAW is the oscillator before that correction.

use std::cell::Cell;
use std::sync::OnceLock;

use gapless_core::result::verdict::{StallSpan, LONG_STALLS_KEPT, LONG_STALL_NS, STALL_NS};

/// How often the clock compares itself with CLOCK_MONOTONIC (ns of run time).
pub const SAMPLE_NS: u64 = 50_000_000;
/// An offset found is steered out over this long (ns).
pub const SLEW_NS: f64 = 1e9;
/// The steering never changes the rate by more than this (a fraction).
const MAX_SLEW: f64 = 100e-6;
/// A (ticks, CLOCK_MONOTONIC) pair is read up to 8 times and the tightest kept, unless one
/// takes under this: its half is the pair's uncertainty, and an interrupted read is wide.
const PAIR_GOOD_NS: f64 = 60.0;
/// Fixed-point shift of the ns-per-tick multiplier.
const SHIFT: u32 = 32;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Ticks and CLOCK_MONOTONIC read together: the ticks at the middle of the kernel read, and
/// half the time the reads took (the pair's own uncertainty, ticks).
fn pair(clock: &quanta::Clock, ns_per_tick: f64) -> (u64, u64, u64) {
    let mut best = (0, 0, u64::MAX);
    for _ in 0..8 {
        let r0 = clock.raw();
        let m = monotonic_ns();
        let r1 = clock.raw();
        let half = r1.saturating_sub(r0) / 2;
        if half < best.2 {
            best = (r0 + half, m, half);
        }
        if (r1.saturating_sub(r0)) as f64 * ns_per_tick < PAIR_GOOD_NS {
            break;
        }
    }
    best
}

/// The process's first estimate of ns per tick: 50 ms of ticks against CLOCK_MONOTONIC, once.
/// Each run then refines its own from there.
fn first_ns_per_tick(clock: &quanta::Clock) -> f64 {
    static NS_PER_TICK: OnceLock<f64> = OnceLock::new();
    *NS_PER_TICK.get_or_init(|| {
        let guess = clock.delta_as_nanos(0, 1_000_000_000) as f64 / 1e9;
        let (r0, m0, _) = pair(clock, guess);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (r1, m1, _) = pair(clock, guess);
        if r1 > r0 && m1 > m0 {
            (m1 - m0) as f64 / (r1 - r0) as f64
        } else {
            guess
        }
    })
}

/// The map from ticks to ns since the run's start, and what the discipline has measured.
#[derive(Clone, Copy, Debug)]
struct Map {
    /// The map itself, and when the next comparison is due.
    hot: Hot,
    /// The pair read when the run started (ticks, CLOCK_MONOTONIC, the pair's uncertainty in
    /// ticks): the reference the rate is measured from.
    anchor: (u64, u64, u64),
    /// CLOCK_MONOTONIC at the run's zero.
    mono0: u64,
    /// The rate measured over the span so far (ns per tick) and its uncertainty (fraction).
    ns_per_tick: f64,
    uncertainty: f64,
    interval_raw: u64,
    samples: u32,
    last_offset_ns: i64,
    max_offset_ns: i64,
}

impl Map {
    fn start(clock: &quanta::Clock, t0_raw: u64) -> Map {
        let npt = first_ns_per_tick(clock);
        let anchor = pair(clock, npt);
        let since = (anchor.0.saturating_sub(t0_raw) as f64 * npt) as u64;
        let interval_raw = (SAMPLE_NS as f64 / npt) as u64;
        Map {
            hot: Hot {
                base_raw: t0_raw,
                base_ns: 0,
                mult: (npt * (1u64 << SHIFT) as f64) as u64,
                next_raw: anchor.0 + interval_raw,
            },
            anchor,
            mono0: anchor.1.saturating_sub(since),
            ns_per_tick: npt,
            uncertainty: f64::NAN,
            interval_raw,
            samples: 0,
            last_offset_ns: 0,
            max_offset_ns: 0,
        }
    }

    fn ns_at(&self, raw: u64) -> u64 {
        self.hot.ns_at(raw)
    }

    /// Compares with CLOCK_MONOTONIC, re-measures the rate over the whole span since the
    /// anchor, and sets the map's rate so that the offset goes within SLEW_NS. The map stays
    /// continuous.
    fn discipline(&mut self, clock: &quanta::Clock) {
        let (raw, mono, err) = pair(clock, self.ns_per_tick);
        let ours = self.ns_at(raw);
        let offset = ours as i64 - mono.saturating_sub(self.mono0) as i64;
        let (a_raw, a_mono, a_err) = self.anchor;
        if raw > a_raw && mono > a_mono {
            let span_ns = (mono - a_mono) as f64;
            self.ns_per_tick = span_ns / (raw - a_raw) as f64;
            self.uncertainty = (err + a_err) as f64 * self.ns_per_tick / span_ns;
        }
        let steer = (-(offset as f64) / SLEW_NS).clamp(-MAX_SLEW, MAX_SLEW);
        self.hot = Hot {
            base_raw: raw,
            base_ns: ours,
            mult: (self.ns_per_tick * (1.0 + steer) * (1u64 << SHIFT) as f64) as u64,
            next_raw: raw + self.interval_raw,
        };
        self.samples += 1;
        self.last_offset_ns = offset;
        if offset.unsigned_abs() > self.max_offset_ns.unsigned_abs() {
            self.max_offset_ns = offset;
        }
    }

    fn report(&self) -> ClockReport {
        let ppm = self.uncertainty * 1e6;
        ClockReport {
            hz: 1e9 / self.ns_per_tick,
            uncertainty_ppm: ppm.is_finite().then_some(ppm),
            samples: self.samples,
            last_offset_ns: self.last_offset_ns,
            max_offset_ns: self.max_offset_ns,
        }
    }
}

/// What the discipline measured over a run: the counter's rate against CLOCK_MONOTONIC and
/// its uncertainty, and the offsets it steered out.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClockReport {
    /// Ticks per second.
    pub hz: f64,
    /// The rate's uncertainty (ppm): the two pairs' read times over the span between them.
    /// `None` before the first comparison (a run shorter than SAMPLE_NS).
    pub uncertainty_ppm: Option<f64>,
    /// Comparisons made.
    pub samples: u32,
    /// The offset found at the last comparison, and the largest (ns, + = the pacer ahead).
    pub last_offset_ns: i64,
    pub max_offset_ns: i64,
}

/// The part of the map every read needs, kept apart so a read copies 32 bytes:
/// ns = base_ns + (raw - base_raw) · mult / 2^SHIFT.
#[derive(Clone, Copy, Debug)]
struct Hot {
    base_raw: u64,
    base_ns: u64,
    mult: u64,
    next_raw: u64,
}

impl Hot {
    #[inline(always)]
    fn ns_at(&self, raw: u64) -> u64 {
        let d = raw.saturating_sub(self.base_raw) as u128;
        self.base_ns + ((d * self.mult as u128) >> SHIFT) as u64
    }
}

pub struct RunClock {
    clock: quanta::Clock,
    hot: Cell<Hot>,
    map: Cell<Map>,
    /// CLOCK_REALTIME at the run's start, ns since the Unix epoch.
    pub realtime0_ns: u64,
    waits: Cell<WaitStats>,
    /// Stalls of at least `LONG_STALL_NS`: (start on this clock, length).
    long: std::cell::RefCell<Vec<(u64, u64)>>,
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
        let map = Map::start(&clock, t0_raw);
        RunClock {
            clock,
            hot: Cell::new(map.hot),
            map: Cell::new(map),
            realtime0_ns,
            waits: Cell::new(WaitStats::default()),
            long: std::cell::RefCell::new(Vec::new()),
        }
    }

    /// ns since the run's start, on the disciplined map; compares with CLOCK_MONOTONIC when
    /// a comparison is due (every SAMPLE_NS; ~100 ns).
    #[inline(always)]
    pub fn now_ns(&self) -> u64 {
        let raw = self.clock.raw();
        let h = self.hot.get();
        if raw >= h.next_raw {
            return self.discipline(raw);
        }
        h.ns_at(raw)
    }

    #[cold]
    #[inline(never)]
    fn discipline(&self, raw: u64) -> u64 {
        let mut m = self.map.get();
        m.discipline(&self.clock);
        self.set_map(m);
        m.ns_at(raw.max(m.hot.base_raw))
    }

    fn set_map(&self, m: Map) {
        self.hot.set(m.hot);
        self.map.set(m);
    }

    /// CLOCK_REALTIME now, ns since the Unix epoch: the clock the kernel stamps received
    /// frames with. Read directly (vDSO, ~30 ns), not derived from the TSC.
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
    /// another core), and the wall-clock start to match it. The discipline starts afresh.
    pub fn restart_at(&mut self, t0_raw: u64) {
        let map = Map::start(&self.clock, t0_raw);
        let since = map.ns_at(self.clock.raw());
        self.set_map(map);
        self.realtime0_ns = Self::realtime_now_ns() - since;
    }

    /// Restarts the run's zero at the current instant.
    pub fn restart(&mut self) {
        let t0 = self.clock.raw();
        self.set_map(Map::start(&self.clock, t0));
        self.realtime0_ns = Self::realtime_now_ns();
    }

    /// What the discipline measured so far.
    pub fn report(&self) -> ClockReport {
        self.map.get().report()
    }

    /// What the busy-wait saw so far.
    pub fn wait_stats(&self) -> WaitStats {
        self.waits.get()
    }

    #[cold]
    fn keep_stall(&self, at: u64, ns: u64) {
        let mut l = self.long.borrow_mut();
        if l.len() < LONG_STALLS_KEPT {
            l.push((at, ns));
        }
    }

    /// The long stalls the busy-wait saw, on CLOCK_REALTIME (the run's start on it, plus
    /// this clock's ns since then).
    pub fn long_stalls(&self) -> Vec<StallSpan> {
        self.long
            .borrow()
            .iter()
            .map(|&(at, ns)| StallSpan {
                from_ns: self.realtime0_ns + at,
                ns,
            })
            .collect()
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
                if gap >= LONG_STALL_NS {
                    self.keep_stall(prev, gap);
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the clock in a loop for `ms`: it never goes back.
    fn spin(c: &RunClock, ms: u64) {
        let end = std::time::Instant::now() + std::time::Duration::from_millis(ms);
        let mut prev = c.now_ns();
        while std::time::Instant::now() < end {
            let n = c.now_ns();
            assert!(n >= prev, "the clock went back: {prev} ns, then {n} ns");
            prev = n;
        }
    }

    #[test]
    fn the_clock_compares_itself_every_50_ms_and_never_steps_back() {
        let c = RunClock::new();
        spin(&c, 300);
        let r = c.report();
        assert!(r.samples >= 4, "expected a comparison per 50 ms over 300 ms, got {r:?}");
        eprintln!("after 300 ms: {r:?}");
        let ppm = r.uncertainty_ppm.expect("an uncertainty once compared");
        assert!(
            ppm < 2.0,
            "expected the rate known within 2 ppm after 300 ms, got {ppm} ppm"
        );
    }

    #[test]
    fn a_rate_100_ppm_off_is_steered_back_onto_monotonic() {
        let mut c = RunClock::new();
        c.restart();
        // Spoil the map: 100 ppm fast. Left alone, it would be 30 µs ahead after 300 ms.
        let mut m = c.map.get();
        m.hot.mult = (m.hot.mult as f64 * (1.0 + 100e-6)) as u64;
        c.set_map(m);
        spin(&c, 300);
        let r = c.report();
        assert!(
            r.max_offset_ns.abs() < 15_000 && r.last_offset_ns.abs() < 10_000,
            "expected the offset held under 15 µs and shrinking (30 µs undisciplined), got {r:?}"
        );
    }
}
