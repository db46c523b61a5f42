//! The verdict: was the schedule held, and if not, why. Pure rules over what the engine
//! measured; the engine reads the clocks and the kernel's counters.
//!
//! A paced run *held* its schedule when both hold, for the run as a whole:
//! - at most [`MAX_LATE_FRACTION`] of its frames left more than one mean gap after their
//!   scheduled time (`late_over_one_gap / sent`), and
//! - every stream's rate over its sent frames is within [`MAX_RATE_ERROR`] of the rate its
//!   own schedule asked for over the same frames (so a Poisson stream's random rate is not
//!   counted against it: only what the sender added).
//!
//! Otherwise the verdict lists the causes the engine measured on the send cores, biggest
//! first: time other tasks took on the core, steal time the host reported, stalls the
//! busy-wait saw (a vCPU stopped by the host shows here, not as steal), a link that went
//! down, send failures, and a send path slower than the schedule (the loop hardly waited).

use serde::{Deserialize, Serialize};

/// Largest fraction of frames that may leave more than one gap late for a held schedule.
pub const MAX_LATE_FRACTION: f64 = 0.001;
/// Largest |rate error| against the schedule for a held schedule.
pub const MAX_RATE_ERROR: f64 = 0.001;
/// A gap between two reads of the clock in the busy-wait longer than this is a stall.
pub const STALL_NS: u64 = 20_000;
/// Below this share of the run spent waiting for departures, the send path itself was the
/// bottleneck.
const BUSY_WAIT_FLOOR: f64 = 0.02;
/// A measured cause is named when it took at least this share of the run.
const CAUSE_FLOOR: f64 = 0.001;

/// What one send loop measured about its core while it ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LoopHealth {
    pub core: Option<usize>,
    /// The loop's wall time, ns.
    pub wall_ns: u64,
    /// Time the loop was runnable but another task had its core (schedstat), ns.
    pub runqueue_wait_ns: Option<u64>,
    /// Steal time the host reported for its core (/proc/stat), ns.
    pub steal_ns: Option<u64>,
    /// Stalls the busy-wait saw (a gap of more than 20 µs between two clock reads), and
    /// their total length.
    pub stalls: u64,
    pub stall_ns: u64,
    /// Longest stall, ns.
    pub stall_max_ns: u64,
    /// Time the loop spent waiting for departures (spinning or sleeping), ns.
    pub waiting_ns: u64,
    /// SCHED_FIFO priority the loop ran at, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt_priority: Option<u32>,
    /// The loop's core was the packet path's alone: every other thread of gapless's process
    /// was kept off it (affinity), so any run-queue wait was taken by tasks outside gapless.
    #[serde(default)]
    pub exclusive: bool,
    /// Each stall of at least [`LONG_STALL_NS`] the busy-wait saw (the first
    /// [`LONG_STALLS_KEPT`]): when it began (CLOCK_REALTIME ns, the RX stamps' clock) and how
    /// long it lasted. Frames due meanwhile left late, in a burst.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub long_stalls: Vec<StallSpan>,
}

/// A stall of the sender: from when, how long (ns).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StallSpan {
    pub from_ns: u64,
    pub ns: u64,
}

/// A stall this long or longer is kept with its time ([`LoopHealth::long_stalls`]).
pub const LONG_STALL_NS: u64 = 1_000_000;
/// Long stalls kept per send loop.
pub const LONG_STALLS_KEPT: usize = 1024;

/// A stream's part of the verdict.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamFacts {
    pub sent: u64,
    pub late_over_one_gap: u64,
    /// Sent-time span against the scheduled-time span of the same frames; None with fewer
    /// than two departures.
    pub rate_error_vs_schedule: Option<f64>,
}

/// What ended the run, as far as the verdict cares.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    pub paced: bool,
    pub send_errors: u64,
    pub backend_error: Option<String>,
}

/// Every result's answer to "can I trust this timing?".
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    /// "held", "NOT held", or "not paced" (pcap, null, --pace off: no schedule to hold).
    pub schedule: String,
    pub held: Option<bool>,
    /// Frames more than one gap late / frames sent, and its bound.
    pub late_fraction: f64,
    pub late_fraction_max: f64,
    /// The worst stream's rate error against its own schedule, and its bound.
    pub rate_error_rel: f64,
    pub rate_error_max: f64,
    /// Why not held (or what else the reader must know), measured during the run.
    pub causes: Vec<String>,
    /// Each send loop's core and what took time from it.
    pub loops: Vec<LoopHealth>,
}

fn ms(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.2} s", ns as f64 / 1e9)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

fn core_name(c: Option<usize>) -> String {
    c.map_or("its core".into(), |c| format!("core {c}"))
}

/// A cause this big is named: `CAUSE_FLOOR` of the loop's time, or, at a high rate, time
/// worth a tenth of the frames that left late (a 200 µs stall at 100 kpps holds back 20
/// departures, and the catch-up after it as many again).
#[derive(Clone, Copy, Debug)]
struct Weight {
    /// The loop's mean time between departures (ns).
    gap_ns: f64,
    /// Frames of the loop that left more than one gap late.
    late: f64,
}

impl Weight {
    /// The run's figures shared over its loops.
    fn of(sent: u64, late: u64, loops: &[LoopHealth]) -> Weight {
        let n = loops.len().max(1) as f64;
        let wall = loops.iter().map(|l| l.wall_ns).max().unwrap_or(0) as f64;
        let per_loop = sent as f64 / n;
        Weight {
            gap_ns: if per_loop > 0.0 { wall / per_loop } else { f64::INFINITY },
            late: late as f64 / n,
        }
    }

    fn counts(&self, ns: u64, share: f64) -> bool {
        share >= CAUSE_FLOOR || (self.late > 0.0 && ns as f64 / self.gap_ns >= 0.1 * self.late)
    }
}

/// The causes one loop measured, each with its share of the loop's time.
fn loop_causes(l: &LoopHealth, weight: Weight) -> Vec<(f64, String)> {
    let wall = l.wall_ns.max(1) as f64;
    let share = |ns: u64| ns as f64 / wall;
    // The CPU taken away in several ways at once is judged as a whole: two kinds, each just
    // under the bar, that hold back a tenth of the late frames together are both named
    // (each that is at least a tenth of the whole).
    let stalls = if l.stalls > 0 { l.stall_ns } else { 0 };
    let total = l.runqueue_wait_ns.unwrap_or(0) + l.steal_ns.unwrap_or(0) + stalls;
    let joint = weight.counts(total, share(total));
    let counts = |ns: u64| weight.counts(ns, share(ns)) || (joint && ns > 0 && ns >= total / 10);
    let mut out = Vec::new();
    if let Some(w) = l.runqueue_wait_ns.filter(|&w| counts(w)) {
        let who = if l.exclusive {
            "tasks outside gapless (the kernel's or other programs'; gapless kept its own threads off this core)"
        } else {
            "other tasks"
        };
        out.push((share(w), format!(
            "{who} took {} ({:.2} % of the run) on {} while the send loop waited to run (schedstat). Fix: move other work off that core (taskset), use --rt-priority, or pick another --core",
            ms(w), share(w) * 100.0, core_name(l.core)
        )));
    }
    if let Some(s) = l.steal_ns.filter(|&s| counts(s)) {
        out.push((
            share(s),
            format!(
            "the host took {} ({:.2} % of the run) of steal time from {} (/proc/stat): the VM's vCPU was not running",
            ms(s), share(s) * 100.0, core_name(l.core)
        ),
        ));
    }
    if l.stalls > 0 && counts(l.stall_ns) {
        out.push((share(l.stall_ns), format!(
            "the busy-wait on {} saw {} stall(s) of more than 20 µs, {} in all ({:.2} % of the run, the time of {:.0} departures at this rate), the longest {}: the CPU was taken away (a host that stops the vCPU shows here, not as steal)",
            core_name(l.core), l.stalls, ms(l.stall_ns), share(l.stall_ns) * 100.0, l.stall_ns as f64 / weight.gap_ns, ms(l.stall_max_ns)
        )));
    }
    out
}

/// Judges a run: `streams` per stream, `loops` per send loop.
pub fn judge(streams: &[StreamFacts], loops: Vec<LoopHealth>, run: &RunFacts) -> Verdict {
    let sent: u64 = streams.iter().map(|s| s.sent).sum();
    let late: u64 = streams.iter().map(|s| s.late_over_one_gap).sum();
    let late_fraction = if sent > 0 { late as f64 / sent as f64 } else { 0.0 };
    let rate_error_rel = streams
        .iter()
        .filter_map(|s| s.rate_error_vs_schedule)
        .fold(0.0f64, |a, e| if e.abs() > a.abs() { e } else { a });
    let mut v = Verdict {
        late_fraction,
        late_fraction_max: MAX_LATE_FRACTION,
        rate_error_rel,
        rate_error_max: MAX_RATE_ERROR,
        ..Default::default()
    };
    let failed = run.backend_error.is_some() || run.send_errors > 0;
    if !run.paced {
        v.schedule = "not paced".into();
        v.loops = loops;
        return v;
    }
    let held = late_fraction <= MAX_LATE_FRACTION && rate_error_rel.abs() <= MAX_RATE_ERROR && !failed;
    v.schedule = if held { "held" } else { "NOT held" }.into();
    v.held = Some(held);
    if let Some(e) = &run.backend_error {
        v.causes.push(format!("the backend failed and ended the run: {e}"));
    }
    if run.send_errors > 0 {
        v.causes.push(format!(
            "{} frame(s) failed to send: the counts are what the kernel took, not what reached the wire",
            run.send_errors
        ));
    }
    let weight = Weight::of(sent, late, &loops);
    let mut measured: Vec<(f64, String)> = loops.iter().flat_map(|l| loop_causes(l, weight)).collect();
    measured.sort_by(|a, b| b.0.total_cmp(&a.0));
    if !held {
        v.causes.extend(measured.into_iter().map(|(_, c)| c));
        if let Some(c) = too_slow(&loops) {
            v.causes.push(c);
        }
        if v.causes.is_empty() {
            v.causes.push(
                "no interference was measured on the send cores: the lateness came from the send path itself (system calls, the qdisc, the driver)".into(),
            );
        }
    } else if !measured.is_empty() {
        // Held, but say what the run weathered.
        v.causes
            .extend(measured.into_iter().map(|(_, c)| format!("held despite this: {c}")));
    }
    v.loops = loops;
    v
}

/// The send path was the bottleneck when a loop hardly waited for its departures.
fn too_slow(loops: &[LoopHealth]) -> Option<String> {
    let l = loops
        .iter()
        .filter(|l| l.wall_ns > 0)
        .min_by(|a, b| (a.waiting_ns as f64 / a.wall_ns as f64).total_cmp(&(b.waiting_ns as f64 / b.wall_ns as f64)))?;
    let share = l.waiting_ns as f64 / l.wall_ns as f64;
    (share < BUSY_WAIT_FLOOR).then(|| format!(
        "the send loop on {} spent only {:.1} % of the run waiting for departures: the rate asked for is above what this backend sends at this batch size here. Fix: lower the rate, use --batch N (throughput mode), --backend afxdp, or more --cores",
        core_name(l.core), share * 100.0
    ))
}

impl Verdict {
    /// The lines a summary ends with.
    pub fn text(&self) -> String {
        let mut s = match self.held {
            None => "schedule: not paced (no schedule to hold: frames went out as fast as the backend took them)\n".to_string(),
            Some(true) => format!(
                "schedule: held ({:.4} % of frames more than one gap late, bound {:.1} %; rate error {:+.4} %, bound ±{:.1} %)\n",
                self.late_fraction * 100.0, self.late_fraction_max * 100.0, self.rate_error_rel * 100.0, self.rate_error_max * 100.0
            ),
            Some(false) => format!(
                "schedule: NOT held — {:.4} % of frames left more than one gap late (bound {:.1} %), rate error {:+.4} % (bound ±{:.1} %). Timing figures describe what was sent, not the profile\n",
                self.late_fraction * 100.0, self.late_fraction_max * 100.0, self.rate_error_rel * 100.0, self.rate_error_max * 100.0
            ),
        };
        for c in &self.causes {
            s.push_str(&format!("  cause: {c}\n"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(sent: u64, late: u64, err: f64) -> StreamFacts {
        StreamFacts {
            sent,
            late_over_one_gap: late,
            rate_error_vs_schedule: Some(err),
        }
    }

    fn paced() -> RunFacts {
        RunFacts {
            paced: true,
            ..Default::default()
        }
    }

    #[test]
    fn held_within_bounds() {
        let v = judge(&[facts(100_000, 100, 0.0009)], vec![], &paced());
        assert_eq!((v.schedule.as_str(), v.held), ("held", Some(true)), "{v:?}");
        assert!(v.causes.is_empty());
    }

    #[test]
    fn late_fraction_over_bound_is_not_held_with_measured_cause() {
        let l = LoopHealth {
            core: Some(1),
            wall_ns: 1_000_000_000,
            runqueue_wait_ns: Some(300_000_000),
            stalls: 4,
            stall_ns: 20_000_000,
            stall_max_ns: 9_000_000,
            waiting_ns: 500_000_000,
            ..Default::default()
        };
        let v = judge(&[facts(100_000, 101, 0.0)], vec![l.clone()], &paced());
        assert_eq!(v.held, Some(false));
        assert!(
            v.causes[0].contains("other tasks took 300.0 ms (30.00 %") && v.causes[0].contains("core 1"),
            "{:?}",
            v.causes
        );
        assert!(v.causes[1].contains("4 stall(s)"), "{:?}", v.causes);
        assert!(v.text().contains("schedule: NOT held"));
        // A core gapless kept to the loop alone: the wait was someone else's.
        let v = judge(
            &[facts(100_000, 101, 0.0)],
            vec![LoopHealth { exclusive: true, ..l }],
            &paced(),
        );
        assert!(
            v.causes[0].starts_with("tasks outside gapless (the kernel's or other programs'"),
            "{:?}",
            v.causes
        );
    }

    #[test]
    fn kinds_of_interference_each_under_the_bar_are_named_together() {
        // Seen in CI: 100 kpps for 5 s, 4320 frames late; stalls worth 412 departures and a
        // run-queue wait worth 374, each under a tenth of the late frames, together over it.
        let l = LoopHealth {
            core: Some(0),
            exclusive: true,
            runqueue_wait_ns: Some(3_739_668),
            steal_ns: Some(0),
            stalls: 116,
            stall_ns: 4_123_423,
            stall_max_ns: 151_464,
            waiting_ns: 2_431_763_213,
            wall_ns: 5_000_201_127,
            rt_priority: None,
            long_stalls: Vec::new(),
        };
        let v = judge(&[facts(500_000, 4320, 0.0)], vec![l.clone()], &paced());
        assert_eq!(
            v.causes.len(),
            2,
            "expected the stalls and the run-queue wait, got {:?}",
            v.causes
        );
        assert!(v.causes[0].contains("116 stall(s)"), "{:?}", v.causes);
        assert!(v.causes[1].contains("schedstat"), "{:?}", v.causes);
        // Together under the time floor (0.08 % of the run) and far fewer departures than
        // the late frames: neither is the cause.
        let small = LoopHealth {
            stall_ns: 2_000_000,
            runqueue_wait_ns: Some(2_000_000),
            ..l
        };
        let v = judge(&[facts(500_000, 20_000, 0.0)], vec![small], &paced());
        assert!(
            v.causes[0].starts_with("no interference was measured"),
            "expected the send path named, got {:?}",
            v.causes
        );
    }

    #[test]
    fn short_stalls_at_a_high_rate_are_named_by_the_departures_they_hold_back() {
        // Seen on the testbed: 100 kpps for 2 s, 61 stalls of 1.85 ms in all (0.09 % of the
        // run, under the time floor), yet 1095 frames late: a 224 µs stall holds back 22
        // departures and the catch-up after it as many again.
        let l = LoopHealth {
            core: Some(0),
            wall_ns: 2_000_000_000,
            stalls: 61,
            stall_ns: 1_850_579,
            stall_max_ns: 224_194,
            waiting_ns: 1_106_078_151,
            exclusive: true,
            ..Default::default()
        };
        let v = judge(&[facts(200_000, 1095, 0.0)], vec![l.clone()], &paced());
        assert_eq!(v.held, Some(false));
        assert!(
            v.causes[0].contains("61 stall(s)") && v.causes[0].contains("the time of 185 departures"),
            "expected the stalls named with the departures they cover, got {:?}",
            v.causes
        );
        // The same stalls beside far more late frames than they explain are not the cause.
        let v = judge(&[facts(200_000, 20_000, 0.0)], vec![l], &paced());
        assert!(
            v.causes[0].starts_with("no interference was measured"),
            "expected no measured cause, got {:?}",
            v.causes
        );
    }

    #[test]
    fn rate_error_alone_fails_and_a_saturated_loop_is_named() {
        let l = LoopHealth {
            core: Some(0),
            wall_ns: 1_000_000_000,
            waiting_ns: 1_000_000,
            ..Default::default()
        };
        let v = judge(&[facts(10, 0, -0.3)], vec![l], &paced());
        assert_eq!(v.held, Some(false));
        assert!((v.rate_error_rel + 0.3).abs() < 1e-12);
        assert!(
            v.causes.iter().any(|c| c.contains("only 0.1 % of the run waiting")),
            "{:?}",
            v.causes
        );
    }

    #[test]
    fn send_errors_and_backend_failure_are_not_held() {
        let run = RunFacts {
            paced: true,
            send_errors: 5,
            backend_error: Some("link down".into()),
        };
        let v = judge(&[facts(1000, 0, 0.0)], vec![], &run);
        assert_eq!(v.held, Some(false));
        assert!(
            v.causes[0].contains("link down") && v.causes[1].contains("5 frame(s)"),
            "{:?}",
            v.causes
        );
    }

    #[test]
    fn unpaced_runs_have_no_schedule_to_hold() {
        let v = judge(&[facts(10, 0, 5.0)], vec![], &RunFacts::default());
        assert_eq!((v.schedule.as_str(), v.held), ("not paced", None));
    }
}
