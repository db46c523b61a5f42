//! Whether a trial's sender kept up, judged by what changes the load the device saw: the
//! rate it achieved, the largest burst a stall made it send back to back to catch up, and
//! what all its stalls held back (near a device's capacity their bursts add up in its
//! queue).
//! A frame one gap late changes nothing for a device; a 6 ms stall at 25 000 frames/s sends
//! 150 frames at once, which a device with a short queue drops (docs/guide/experiments.md).

use super::spec::TrialSpec;
use super::{TrialPlan, TrialRun};

/// The sender's figures for one trial, and why it fell behind (empty: it kept up).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SenderJudgement {
    pub burst_frames: u64,
    pub stalled_frames: u64,
    pub rate_shortfall: f64,
    pub late_share: f64,
    pub reasons: Vec<String>,
}

/// Judges the sender of `run` (planned as `plan`) by `spec`'s limits. A trial sent in bursts
/// by design (back-to-back), of a count, or of RFC 2889's address frames is judged by its
/// late share only, when a limit for it is given.
pub(crate) fn judge(plan: &TrialPlan, run: &TrialRun, spec: &TrialSpec) -> SenderJudgement {
    let late_share = if run.sent_total == 0 {
        0.0
    } else {
        run.late_over_gap as f64 / run.sent_total as f64
    };
    let mut j = SenderJudgement {
        burst_frames: 0,
        stalled_frames: 0,
        rate_shortfall: 0.0,
        late_share,
        reasons: Vec::new(),
    };
    let planned = plan
        .rate_pps
        .or_else(|| (!plan.loads.is_empty()).then(|| plan.loads.iter().map(|l| l.pps).sum()));
    // A trial at the profile's own rate: its rate as sent, for the burst.
    let sent_rate = (plan.duration_s > 0.0).then(|| run.sent as f64 / plan.duration_s);
    let paced = plan.count.is_none() && plan.learning.is_none() && plan.burst.is_none_or(|b| b <= 1);
    if let Some(rate) = planned.or(sent_rate).filter(|_| paced) {
        let per_port = rate / tx_ports(run) as f64;
        j.burst_frames = (run.late_max_ns as f64 * per_port / 1e9).floor() as u64;
        // Every frame sent more than one gap late left in a stall's catch-up burst.
        j.stalled_frames = run.late_over_gap / tx_ports(run) as u64;
        if j.burst_frames > spec.max_burst_frames {
            j.reasons.push(format!(
                "a stall of {:.2} ms sent {} frames back to back on a port to catch up (max_burst_frames = {})",
                run.late_max_ns as f64 / 1e6,
                j.burst_frames,
                spec.max_burst_frames
            ));
        } else if j.stalled_frames > spec.max_burst_frames {
            j.reasons.push(format!(
                "its stalls held back {} frames on a port in all (sent more than one gap late, in catch-up bursts), which a queue near the device's capacity does not drain between stalls (max_burst_frames = {})",
                j.stalled_frames,
                spec.max_burst_frames
            ));
        }
    }
    if let Some(rate) = planned.filter(|_| paced) {
        // The metered part's schedule (the warm-up's frames are counted apart).
        let due = rate * plan.duration_s;
        j.rate_shortfall = if due > 0.0 {
            (1.0 - run.sent as f64 / due).max(0.0)
        } else {
            0.0
        };
        if j.rate_shortfall > spec.rate_tolerance {
            j.reasons.push(format!(
                "it sent {:.3} % fewer frames than its schedule (rate_tolerance = {:.3} %)",
                j.rate_shortfall * 100.0,
                spec.rate_tolerance * 100.0
            ));
        }
    }
    if let Some(l) = spec.late_limit.filter(|l| late_share > *l) {
        j.reasons.push(format!(
            "{:.3} % of its frames left more than one gap late (late_limit = {:.3} %)",
            late_share * 100.0,
            l * 100.0
        ));
    }
    j
}

/// How many ports the trial sent from (its directions' sources; one without directions).
fn tx_ports(run: &TrialRun) -> usize {
    let mut from: Vec<&str> = run
        .directions
        .iter()
        .filter(|d| d.sent > 0)
        .filter_map(|d| d.direction.split('→').next())
        .collect();
    from.sort_unstable();
    from.dedup();
    from.len().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(rate: f64) -> TrialPlan {
        TrialPlan {
            purpose: "t".into(),
            rate_pps: Some(rate),
            size: None,
            burst: None,
            pattern: None,
            duration_s: 2.0,
            warmup_s: 0.5,
            count: None,
            seed: 1,
            learning: None,
            loads: Vec::new(),
        }
    }

    fn run(sent_total: u64, late_max_ns: u64, late_over_gap: u64) -> TrialRun {
        TrialRun {
            sent: sent_total - 12_500,
            sent_total,
            received: 0,
            warmup_sent: 12_500,
            warmup_received: 0,
            late_over_gap,
            late_max_ns,
            stall_ns: 0,
            schedule: "held".into(),
            held: true,
            rx_pps: None,
            latency: None,
            warnings: Vec::new(),
            directions: Vec::new(),
            flooded: None,
        }
    }

    #[test]
    fn a_late_frame_is_no_fault_and_a_stalls_catch_up_burst_is() {
        let spec = TrialSpec::default();
        // 25 000 frames/s for 0.5 + 2 s: 62 500 frames. 3 % of them 30 µs late: no burst.
        let ok = judge(&plan(25_000.0), &run(62_500, 30_000, 0), &spec);
        assert_eq!((ok.burst_frames, ok.reasons.len()), (0, 0), "{ok:?}");
        // A 2 ms stall: 50 frames sent at once, which the default (128) lets pass, and a
        // limit of 32 does not.
        let stall = judge(&plan(25_000.0), &run(62_500, 2_000_000, 50), &spec);
        assert_eq!((stall.burst_frames, stall.reasons.len()), (50, 0), "{stall:?}");
        let short_queue = TrialSpec {
            max_burst_frames: 32,
            ..TrialSpec::default()
        };
        let stall = judge(&plan(25_000.0), &run(62_500, 2_000_000, 50), &short_queue);
        assert!(stall.reasons[0].contains("sent 50 frames back to back"), "{stall:?}");
        // Many short stalls: 200 frames sent over a gap late in all, near capacity.
        let many = run(62_500, 500_000, 200);
        let m = judge(&plan(25_000.0), &many, &spec);
        assert_eq!((m.burst_frames, m.stalled_frames), (12, 200), "{m:?}");
        assert!(m.reasons[0].contains("held back 200 frames"), "{m:?}");
        // Behind at the end: 1 % of the schedule not sent.
        let short = judge(&plan(25_000.0), &run(62_000, 0, 0), &spec);
        assert!((short.rate_shortfall - 0.01).abs() < 1e-9, "{short:?}");
        assert!(short.reasons[0].contains("1.000 % fewer frames"), "{short:?}");
        // The old criterion, when asked for.
        let strict = TrialSpec {
            late_limit: Some(0.001),
            ..TrialSpec::default()
        };
        assert!(judge(&plan(25_000.0), &run(62_500, 1_000_000, 100), &strict).reasons[0].contains("late_limit"));
    }

    #[test]
    fn the_burst_is_per_port_when_the_trial_sends_from_several() {
        let mut r = run(125_000, 1_000_000, 0);
        for d in ["a→b", "b→a"] {
            r.directions.push(crate::experiment::directions::DirectionRun {
                direction: d.into(),
                sent: 1,
                received: 1,
                loss_ratio: 0.0,
                rx_pps: None,
                latency: None,
                misdelivered: 0,
                refused: 0,
            });
        }
        // 50 000 frames/s over two ports, a 1 ms stall: 25 frames on each.
        assert_eq!(judge(&plan(50_000.0), &r, &TrialSpec::default()).burst_frames, 25);
    }
}
