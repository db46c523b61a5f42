//! What takes CPU time from a send loop or a meter: the kernel's scheduler statistics for the
//! thread, the host's steal time for its core, and a pre-flight probe that measures every
//! allowed core's stalls before a run so that the loop can take the quietest one.

use std::time::{Duration, Instant};

use gapless_core::result::verdict::LoopHealth;

use crate::clock::WaitStats;

/// A gap between two clock reads of the probe's spin longer than this is time lost.
const PROBE_GAP_NS: u64 = 5_000;
/// A core that lost more than this share of the probe is named in a warning.
pub const NOISY_CORE_FRACTION: f64 = 0.05;

/// This thread's (time on CPU, time runnable but waiting for a CPU), ns: the first two
/// fields of /proc/thread-self/schedstat.
pub fn thread_schedstat() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut it = s.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// Steal time the host reported for `core`, ns (/proc/stat, in clock ticks).
pub fn core_steal_ns(core: usize) -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let name = format!("cpu{core}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    let steal: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| steal * 1_000_000_000 / hz as u64)
}

/// Watches the calling thread's core from `start` to `finish`.
pub struct CoreWatch {
    core: Option<usize>,
    sched0: Option<(u64, u64)>,
    steal0: Option<u64>,
    rt_priority: Option<u32>,
    /// The core was the packet path's alone when the loop started.
    exclusive0: bool,
}

impl CoreWatch {
    /// Call on the loop's thread, after pinning it to `core`.
    pub fn start(core: Option<usize>, rt_priority: Option<u32>) -> CoreWatch {
        CoreWatch {
            core,
            sched0: thread_schedstat(),
            steal0: core.and_then(core_steal_ns),
            rt_priority,
            exclusive0: core.is_some_and(crate::cores::exclusive),
        }
    }

    /// What took time from the loop, with what its busy-wait saw.
    pub fn finish(
        &self,
        wall_ns: u64,
        waits: WaitStats,
        long_stalls: Vec<gapless_core::result::verdict::StallSpan>,
    ) -> LoopHealth {
        let wait = match (self.sched0, thread_schedstat()) {
            (Some(a), Some(b)) => Some(b.1.saturating_sub(a.1)),
            _ => None,
        };
        let steal = match (self.steal0, self.core.and_then(core_steal_ns)) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        LoopHealth {
            core: self.core,
            wall_ns,
            runqueue_wait_ns: wait,
            steal_ns: steal,
            stalls: waits.stalls,
            stall_ns: waits.stall_ns,
            stall_max_ns: waits.stall_max_ns,
            waiting_ns: waits.waiting_ns,
            rt_priority: self.rt_priority,
            exclusive: self.exclusive0 && self.core.is_some_and(crate::cores::exclusive),
            long_stalls,
        }
    }
}

/// One core's pre-flight probe.
#[derive(Debug, Clone, Copy)]
pub struct CoreProbe {
    pub core: usize,
    /// Share of the probe's time the spin did not run (gaps over 5 µs between clock reads).
    pub lost_fraction: f64,
    pub longest_gap_ns: u64,
}

/// Spins on each of `cores` at once for `dur`, pinned, and measures the time each lost.
pub fn probe_cores(cores: &[usize], dur: Duration) -> Vec<CoreProbe> {
    std::thread::scope(|sc| {
        let hs: Vec<_> = cores.iter().map(|&c| sc.spawn(move || probe_one(c, dur))).collect();
        hs.into_iter().filter_map(|h| h.join().ok().flatten()).collect()
    })
}

fn probe_one(core: usize, dur: Duration) -> Option<CoreProbe> {
    crate::cores::mark_pinned();
    if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
        return None;
    }
    let clock = quanta::Clock::new();
    let (t0, end) = (clock.raw(), Instant::now() + dur);
    let mut prev = t0;
    let (mut lost, mut longest, mut n) = (0u64, 0u64, 0u32);
    loop {
        let now = clock.raw();
        let gap = clock.delta_as_nanos(prev, now);
        if gap > PROBE_GAP_NS {
            lost += gap;
            longest = longest.max(gap);
        }
        prev = now;
        n = n.wrapping_add(1);
        if n.is_multiple_of(1024) && Instant::now() >= end {
            break;
        }
    }
    let total = clock.delta_as_nanos(t0, prev).max(1);
    Some(CoreProbe {
        core,
        lost_fraction: lost as f64 / total as f64,
        longest_gap_ns: longest,
    })
}

/// The `k` quietest probed cores (least time lost), and a warning for each chosen core
/// that lost more than [`NOISY_CORE_FRACTION`].
pub fn quietest(probes: &[CoreProbe], k: usize) -> (Vec<usize>, Vec<String>) {
    let mut p = probes.to_vec();
    p.sort_by(|a, b| a.lost_fraction.total_cmp(&b.lost_fraction));
    let chosen: Vec<CoreProbe> = p.into_iter().take(k).collect();
    let warnings = chosen
        .iter()
        .filter(|c| c.lost_fraction > NOISY_CORE_FRACTION)
        .map(|c| {
            format!(
                "core {} is busy: a 100 ms pre-flight spin on it lost {:.1} % of its time (longest gap {:.2} ms), and it was the quietest core allowed. Timing may not hold. Fix: stop other work on this machine, move it to other cores (taskset), or give gapless an isolated core (isolcpus) with --core",
                c.core,
                c.lost_fraction * 100.0,
                c.longest_gap_ns as f64 / 1e6
            )
        })
        .collect();
    (chosen.iter().map(|c| c.core).collect(), warnings)
}

/// Runs the calling thread under SCHED_FIFO at `prio` (1–99).
pub fn set_rt_priority(prio: u32) -> Result<(), std::io::Error> {
    let param = libc::sched_param {
        sched_priority: prio as i32,
    };
    // SAFETY: sched_setscheduler reads a valid sched_param; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Pins the calling thread to `core`, or else to a core no run holds other than `avoid`:
/// the last such (a send loop) or the first (a meter). The thread is marked pinned first, so
/// [`crate::cores`] never moves it. Returns the core, None if pinning failed.
pub fn pin(core: Option<usize>, avoid: Option<usize>, last: bool) -> Option<usize> {
    let free = crate::cores::available();
    let mut others = free.iter().copied().filter(|&c| Some(c) != avoid);
    let c = match core {
        Some(c) => crate::cores::cpuset().contains(&c).then_some(c),
        None if last => others.next_back(),
        None => others.next(),
    }?;
    crate::cores::mark_pinned();
    core_affinity::set_for_current(core_affinity::CoreId { id: c }).then_some(c)
}

/// The send loops' cores: the ones asked for, else the quietest allowed core by a 100 ms
/// pre-flight probe (paced runs only). Every chosen core that the probe found busy gets a
/// warning.
pub fn choose_cores(
    cores: Vec<Option<usize>>,
    allowed: &[usize],
    probe: bool,
) -> (Vec<Option<usize>>, Vec<String>, Vec<gapless_core::host::CoreLoad>) {
    if !probe || allowed.is_empty() {
        return (cores, Vec::new(), Vec::new());
    }
    let probes = probe_cores(allowed, Duration::from_millis(100));
    let loads = probes
        .iter()
        .map(|p| gapless_core::host::CoreLoad {
            core: p.core,
            lost_fraction: p.lost_fraction,
            longest_gap_ns: p.longest_gap_ns,
        })
        .collect();
    if cores.iter().all(Option::is_none) && cores.len() == 1 {
        let (c, w) = quietest(&probes, 1);
        return (c.first().map(|&c| vec![Some(c)]).unwrap_or(cores), w, loads);
    }
    let mine: Vec<_> = probes.into_iter().filter(|p| cores.contains(&Some(p.core))).collect();
    let (_, w) = quietest(&mine, mine.len());
    (cores, w, loads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_and_steal_are_readable_here() {
        // The kernel updates a thread's run time at ticks and switches: spin past a few.
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(30) {
            std::hint::spin_loop();
        }
        std::thread::yield_now();
        let (run, _wait) = thread_schedstat().expect("/proc/thread-self/schedstat");
        assert!(run > 0, "expected CPU time > 0 for this thread, got {run}");
        assert!(core_steal_ns(0).is_some(), "expected cpu0's steal field in /proc/stat");
    }

    #[test]
    fn quietest_orders_and_warns() {
        let p = [
            CoreProbe {
                core: 0,
                lost_fraction: 0.5,
                longest_gap_ns: 9_000_000,
            },
            CoreProbe {
                core: 1,
                lost_fraction: 0.01,
                longest_gap_ns: 100_000,
            },
        ];
        assert_eq!(quietest(&p, 1), (vec![1], vec![]));
        let (c, w) = quietest(&p, 2);
        assert_eq!(c, vec![1, 0]);
        assert_eq!(w.len(), 1, "expected one warning for core 0, got {w:?}");
        assert!(w[0].contains("core 0 is busy") && w[0].contains("50.0 %"), "{w:?}");
    }
}
