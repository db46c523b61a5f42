//! Each direction's figures in an experiment over several ports: per trial
//! ([`DirectionRun`], which the runner fills in), and at the trials the results rest on
//! ([`DirectionSummary`]: each goal's lower bound, each latency point, each throughput).
//! The search itself judges the aggregate, as FD.io CSIT does.

use serde::{Deserialize, Serialize};

use crate::experiment::ports::Direction;
use crate::experiment::{ExperimentResult, TrialRecord};
use crate::meter::report::LatencySummary;

/// One direction of a trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionRun {
    /// "gl-tx0→gl-rx0".
    pub direction: String,
    /// Frames sent after the warm-up, and distinct frames of them received at the
    /// direction's own port.
    pub sent: u64,
    pub received: u64,
    /// (sent − received) / sent (0 when nothing was sent).
    pub loss_ratio: f64,
    /// Received frames per second over the metered part.
    pub rx_pps: Option<f64>,
    pub latency: Option<LatencySummary>,
    /// Metered frames of the direction (after the warm-up) that arrived on another
    /// receiving port than its own (a bridge that flooded them, a misroute).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub misdelivered: u64,
    /// Frames of `sent` that the sending device refused (ENOBUFS: its queue was full, as
    /// when flow control pauses the port).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl DirectionRun {
    /// The loss ratio of `sent` and `received`.
    pub fn ratio(sent: u64, received: u64) -> f64 {
        if sent == 0 {
            0.0
        } else {
            sent.saturating_sub(received) as f64 / sent as f64
        }
    }
}

/// A direction's figures at the trials the experiment's results rest on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionSummary {
    pub name: String,
    /// Indices into the experiment's ports.
    pub from: usize,
    pub to: usize,
    pub at: Vec<DirectionAt>,
}

/// One direction at one trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionAt {
    /// What the trial stands for: "NDR lower bound", "latency at 50 % of PDR", ….
    pub what: String,
    pub trial: usize,
    /// This direction's share of the trial's offered load (the trial's rate split evenly;
    /// with the profile's own rates, what the direction sent per metered second).
    pub offered_pps: f64,
    pub sent: u64,
    pub received: u64,
    pub loss_ratio: f64,
    pub latency: Option<LatencySummary>,
}

/// Fills `r.directions` from the trials its results rest on.
pub fn summarize(r: &mut ExperimentResult, dirs: &[Direction]) {
    let picks = key_trials(r);
    r.directions = dirs
        .iter()
        .map(|d| DirectionSummary {
            name: d.name.clone(),
            from: d.from,
            to: d.to,
            at: picks
                .iter()
                .filter_map(|(what, i)| at(&r.trials, *i, d, what, dirs.len()))
                .collect(),
        })
        .collect();
}

fn at(trials: &[TrialRecord], i: usize, d: &Direction, what: &str, n: usize) -> Option<DirectionAt> {
    let t = trials.iter().find(|t| t.index == i)?;
    let run = t.run.directions.iter().find(|x| x.direction == d.name)?;
    Some(DirectionAt {
        what: what.to_string(),
        trial: i,
        offered_pps: match t.plan.rate_pps {
            _ if !t.plan.loads.is_empty() => t
                .plan
                .loads
                .iter()
                .find(|l| (l.from, l.to) == (d.from, d.to))
                .map_or(0.0, |l| l.pps),
            Some(r) => r / n as f64,
            // The profile's own rates (a repeat): what the direction sent over the trial.
            None => run.sent as f64 / t.plan.duration_s,
        },
        sent: run.sent,
        received: run.received,
        loss_ratio: run.loss_ratio,
        latency: run.latency.clone(),
    })
}

/// The trials each result rests on, with what each stands for.
fn key_trials(r: &ExperimentResult) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    if let Some(m) = &r.mlrsearch {
        for g in &m.goals {
            let Some(lb) = g.lower_bound_pps else { continue };
            // The bound's longest trial (the final one, when it ran).
            let best = m
                .trials
                .iter()
                .filter(|t| (t.search.load_pps - lb).abs() <= lb * 1e-9)
                .max_by(|a, b| a.search.duration_s.total_cmp(&b.search.duration_s));
            out.extend(best.map(|t| (format!("{} lower bound", g.goal.name), t.trial)));
        }
        for l in &m.latency {
            let what = format!("latency at {:.0} % of {}", l.fraction * 100.0, l.goal);
            out.extend(l.point.trials.first().map(|&t| (what, t)));
        }
    }
    for s in &r.rfc2544 {
        for t in &s.throughput {
            let what = format!("throughput {} B, loss ≤ {} %", s.frame_size, t.loss_tolerance_pct);
            let passed = t.trials.iter().rev().find(|&&i| {
                r.trials
                    .iter()
                    .any(|x| x.index == i && x.plan.rate_pps == t.throughput_pps)
            });
            out.extend(t.final_trial.or(passed.copied()).map(|i| (what, i)));
        }
        if let Some(l) = &s.latency {
            out.extend(l.trials.iter().map(|&i| (format!("latency {} B", s.frame_size), i)));
        }
    }
    if let Some(m) = r.rfc2889.as_ref().and_then(|x| x.fully_meshed.as_ref()) {
        out.extend(
            m.trials
                .first()
                .map(|&i| ("fully meshed, the maximum offered load".to_string(), i)),
        );
        let at_tp = m.trials.iter().rev().find(|&&i| {
            r.trials
                .iter()
                .any(|x| x.index == i && x.plan.rate_pps == m.throughput_pps)
        });
        out.extend(at_tp.map(|&i| ("fully meshed throughput".to_string(), i)));
    }
    if let Some(c) = r.rfc2889.as_ref().and_then(|x| x.congestion_control.as_ref()) {
        out.extend(c.trials.last().map(|&i| ("congestion control".to_string(), i)));
    }
    if let Some(p) = &r.repeat {
        out.extend(p.trials.iter().map(|&i| ("repeat".to_string(), i)));
    }
    for c in &r.sweep {
        for p in &c.points {
            let what: Vec<String> = p.settings.iter().map(|s| s.label()).collect();
            out.extend(p.trials.iter().map(|&i| (what.join(", "), i)));
        }
    }
    out
}
