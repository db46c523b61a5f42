//! MLRsearch (RFC 9971, "Multiple Loss Ratio Search") as a state machine (sans-IO): it says
//! which load to try next and for how long, takes each trial's counts, and ends with every
//! goal's conditional throughput and its bounds. One search serves every goal (NDR, PDR, …):
//! each trial is classified for all of them.
//!
//! **The controller** (RFC 9971 leaves its choices to the implementation; this one follows
//! FD.io CSIT's):
//! - Loads lie on a logarithmic grid from the maximum load down, one step being the
//!   narrowest goal width, so that loads tried for one goal serve the others.
//! - Each goal has a chain of targets: `preceding_targets` coarser ones (twice the width
//!   each, trial durations from the goal's initial trial duration up) and the final one (the
//!   goal's own width, final trial duration and duration sum). A target is worked on once
//!   the one before it is met, so short trials find the neighbourhood and long ones only
//!   confirm it.
//! - The first trial is at the maximum load; the second at the forwarding rate it saw
//!   (corrected for the smallest goal loss ratio), as CSIT starts.
//! - Then, for the target being worked on, with its relevant bounds (RFC 9971: the
//!   smallest load that is an upper bound, and the largest lower bound below it): bisect
//!   between them in log space; with only one of them, search outwards in steps that double;
//!   a load that is undecided is measured again. Of the goals' next trials, the shortest
//!   goes first.
//! - A target is met when its bounds are no wider than its width, when the maximum load is
//!   a lower bound, or when the minimum load is an upper bound.
//! - A load the sender cannot hold on this machine ([`Mlr::sender_failed`]) caps the search:
//!   the load the sender's own figures suggest it holds becomes the maximum, and the search
//!   goes on beneath it. A goal whose lower bound is that load is bounded by the sender, not
//!   the device, and says so ([`Mlr::sender_cap_pps`]).

pub mod classify;
pub mod spec;

use serde::{Deserialize, Serialize};

use classify::{classify, quantile_loss_ratio, Class, Sample, Target};

/// A search goal in RFC 9971's terms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    pub name: String,
    /// Goal Loss Ratio.
    pub loss_ratio: f64,
    /// Goal Exceed Ratio.
    pub exceed_ratio: f64,
    /// Goal Width (relative to the upper bound).
    pub width: f64,
    /// Goal Initial Trial Duration, Goal Final Trial Duration and Goal Duration Sum (s).
    pub initial_trial_duration_s: f64,
    pub final_trial_duration_s: f64,
    pub duration_sum_s: f64,
    /// Coarser targets before the final one.
    pub preceding_targets: u32,
}

/// What to search: the goals and the load range (frames/s, aggregate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlrSpec {
    pub goals: Vec<Goal>,
    pub min_load: f64,
    pub max_load: f64,
    /// The search stops (its goals unmet) once its trials add up to this many seconds.
    pub search_duration_max_s: f64,
}

/// The next trial: its load (frames/s), its duration (s), and what it is for.
#[derive(Debug, Clone, PartialEq)]
pub struct NextTrial {
    pub load: f64,
    pub duration_s: f64,
    /// The goal it serves (None: the initial trials serve all).
    pub goal: Option<usize>,
    /// Its target: "final", "preceding N of M" or "initial".
    pub target: String,
    pub purpose: String,
}

/// One trial as the search kept it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlrTrial {
    pub load_pps: f64,
    pub duration_s: f64,
    pub loss_ratio: f64,
    /// The goal it served (None: an initial trial).
    pub goal: Option<String>,
    /// Its target: "final", or "preceding N of M".
    pub target: String,
}

/// A goal's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalResult {
    #[serde(flatten)]
    pub goal: Goal,
    /// The relevant lower bound times one minus its quantile loss ratio (None: no lower
    /// bound, the minimum load lost too much).
    pub conditional_throughput_pps: Option<f64>,
    /// The relevant lower and upper bounds (None: none in range).
    pub lower_bound_pps: Option<f64>,
    pub upper_bound_pps: Option<f64>,
    /// (upper − lower) / upper.
    pub relative_width: Option<f64>,
    /// Whether the goal was met (its width, or a bound at an end of the range).
    pub met: bool,
}

/// A load grid: load(k) = max · (1 − step)^k for k in 0..=last.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Grid {
    max: f64,
    /// ln(1 / (1 − step)).
    unit: f64,
    last: u32,
}

impl Grid {
    fn new(s: &MlrSpec) -> Grid {
        let w = s.goals.iter().map(|g| g.width).fold(f64::INFINITY, f64::min);
        let unit = -(1.0 - w).ln();
        let last = ((s.max_load / s.min_load).ln() / unit + 1e-9).floor() as u32;
        Grid {
            max: s.max_load,
            unit,
            last,
        }
    }

    fn load(&self, k: u32) -> f64 {
        self.max * (-(f64::from(k)) * self.unit).exp()
    }

    /// The grid point at or just below `load`.
    fn below(&self, load: f64) -> u32 {
        let k = ((self.max / load).ln() / self.unit - 1e-9).ceil().max(0.0);
        (k as u32).min(self.last)
    }

    /// A relative width in grid steps (at least one).
    fn steps(&self, width: f64) -> u32 {
        ((-(1.0 - width).ln() / self.unit + 1e-9).floor() as u32).max(1)
    }
}

/// A target in a goal's chain, on the grid.
#[derive(Debug, Clone, PartialEq)]
struct Step {
    target: Target,
    width: u32,
    label: String,
}

/// The search.
#[derive(Debug, Clone)]
pub struct Mlr {
    spec: MlrSpec,
    grid: Grid,
    /// Per goal: its targets, coarsest first, the final one last.
    chains: Vec<Vec<Step>>,
    /// Per goal and target: how many outward steps were taken (up, down).
    expansions: Vec<Vec<(u32, u32)>>,
    /// Trials: grid index, sample, and what it served.
    trials: Vec<(u32, Sample, MlrTrial)>,
    pending: Option<(u32, NextTrial)>,
    stopped: bool,
    /// The largest load the search may use (a grid index): 0, or below the smallest load
    /// the sender could not hold.
    top: u32,
    /// The smallest load the sender could not hold.
    sender_failed_pps: Option<f64>,
    /// How many loads the sender could not hold, and the trial seconds they took.
    sender_failures: u32,
    sender_failed_s: f64,
    /// Of those, how many were at a load the sender had held before.
    sender_stalls: u32,
}

/// What a load the sender could not hold did to the search ([`Mlr::sender_failed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenderFailure {
    /// The sender had held as large a load: a stall; the same trial is given again.
    Stall,
    /// The load and those above the sender's own figure are out of the search.
    Cap,
}

/// After this many loads the sender could not hold, the search stops with the bounds it
/// has: on a machine whose stalls fail trials at every load, each failure lowers the cap
/// only a little, and the search would otherwise walk the whole grid down.
pub const MAX_SENDER_FAILURES: u32 = 8;

impl Mlr {
    /// A search of `spec` (checked by [`MlrSpec::check`]).
    pub fn new(spec: MlrSpec) -> Result<Mlr, String> {
        spec.check()?;
        let grid = Grid::new(&spec);
        let chains: Vec<Vec<Step>> = spec.goals.iter().map(|g| chain(g, &grid)).collect();
        let expansions = chains.iter().map(|c| vec![(0, 0); c.len()]).collect();
        Ok(Mlr {
            spec,
            grid,
            chains,
            expansions,
            trials: Vec::new(),
            pending: None,
            stopped: false,
            top: 0,
            sender_failed_pps: None,
            sender_failures: 0,
            sender_failed_s: 0.0,
            sender_stalls: 0,
        })
    }

    /// The trial to run next, or None when every goal is met (or the search ran too long).
    pub fn next_trial(&mut self) -> Option<NextTrial> {
        if self.stopped {
            self.pending = None;
        } else if self.pending.is_none() {
            self.pending = self.choose();
        }
        self.pending.as_ref().map(|p| p.1.clone())
    }

    /// The counts of the trial [`Mlr::next_trial`] gave.
    pub fn record(&mut self, sent: u64, received: u64) {
        let Some((k, n)) = self.pending.take() else { return };
        let loss_ratio = if sent == 0 {
            1.0
        } else {
            sent.saturating_sub(received) as f64 / sent as f64
        };
        let sample = Sample {
            duration_s: n.duration_s,
            loss_ratio,
        };
        let trial = MlrTrial {
            load_pps: n.load,
            duration_s: n.duration_s,
            loss_ratio,
            goal: n.goal.map(|g| self.spec.goals[g].name.clone()),
            target: n.target,
        };
        self.trials.push((k, sample, trial));
        self.check_budget();
    }

    /// Stops the search when its trials, those the sender failed included, used up
    /// `search_duration_max_s`, or the sender failed [`MAX_SENDER_FAILURES`] loads.
    fn check_budget(&mut self) {
        self.stopped = self.out_of_time() || self.sender_failures >= MAX_SENDER_FAILURES;
    }

    /// Whether the trials, those the sender failed included, used up `search_duration_max_s`.
    fn out_of_time(&self) -> bool {
        self.trial_seconds() + self.sender_failed_s >= self.spec.search_duration_max_s
    }

    /// The sender could not hold the load [`Mlr::next_trial`] gave (its trial was invalid
    /// every time it ran). Its attempts took `seconds` of trials, which count towards
    /// `search_duration_max_s`, and the trial is not recorded: its loss is not the device's.
    ///
    /// When the sender already held a load as large (a recorded trial), the failure was a
    /// stall of this machine, not the sender's limit: the same trial is given again
    /// ([`SenderFailure::Stall`]). Otherwise that load and every load above `hint` (the load
    /// the sender's own figures suggest it holds; the minimum load at least) are out of the
    /// search, which goes on below ([`SenderFailure::Cap`]). Either way it counts towards
    /// [`MAX_SENDER_FAILURES`]. With no trial given, nothing is counted (read as a stall: the
    /// next trial is chosen as before).
    pub fn sender_failed(&mut self, hint: f64, seconds: f64) -> SenderFailure {
        let Some((k, load)) = self.pending.as_ref().map(|(k, n)| (*k, n.load)) else {
            return SenderFailure::Stall;
        };
        self.sender_failures += 1;
        self.sender_failed_s += seconds;
        let held = self.trials.iter().any(|t| t.2.load_pps >= load);
        let failure = if held {
            self.sender_stalls += 1;
            SenderFailure::Stall
        } else {
            self.pending = None;
            self.sender_failed_pps = Some(self.sender_failed_pps.map_or(load, |f| f.min(load)));
            self.top = self
                .top
                .max(k + 1)
                .max(self.grid.below(hint.min(load).max(f64::MIN_POSITIVE)));
            SenderFailure::Cap
        };
        self.check_budget();
        failure
    }

    /// How many attempts the sender failed at loads it had held before (stalls of this
    /// machine, given again; see [`Mlr::sender_failed`]).
    pub fn sender_stalls(&self) -> u32 {
        self.sender_stalls
    }

    /// Seconds of the attempts at loads the sender could not hold (see [`Mlr::sender_failed`]).
    pub fn sender_failed_seconds(&self) -> f64 {
        self.sender_failed_s
    }

    /// Whether the search stopped because the sender failed [`MAX_SENDER_FAILURES`] loads.
    pub fn sender_gave_up(&self) -> bool {
        self.sender_failures >= MAX_SENDER_FAILURES && !self.sender_below_minimum()
    }

    /// The smallest load the sender could not hold and had not held before, if any: every
    /// goal's bounds lie below it.
    pub fn sender_cap_pps(&self) -> Option<f64> {
        self.sender_failed_pps
    }

    /// Whether the sender could not hold even the minimum load: the search has no answer.
    pub fn sender_below_minimum(&self) -> bool {
        self.top > self.grid.last
    }

    /// The trials so far, in order.
    pub fn trials(&self) -> Vec<MlrTrial> {
        self.trials.iter().map(|t| t.2.clone()).collect()
    }

    /// Seconds of trials so far.
    pub fn trial_seconds(&self) -> f64 {
        self.trials.iter().map(|t| t.1.duration_s).fold(0.0, |a, b| a + b)
    }

    /// Whether the search stopped at its duration limit (`search_duration_max_s`, the
    /// attempts the sender failed included) with a goal unmet. A search the sender stopped
    /// first ([`Mlr::sender_gave_up`]) did not run out.
    pub fn ran_out(&self) -> bool {
        self.stopped && self.out_of_time() && (0..self.chains.len()).any(|g| self.current(g).is_some())
    }

    /// Each goal's result from the trials so far.
    pub fn results(&self) -> Vec<GoalResult> {
        (0..self.chains.len()).map(|g| self.result(g)).collect()
    }

    fn result(&self, g: usize) -> GoalResult {
        let step = self.chains[g].last().expect("a final target");
        let (lo, hi) = self.bounds(step);
        let lower = lo.map(|k| self.grid.load(k));
        let upper = hi.map(|k| self.grid.load(k));
        let cond = lo.map(|k| lower.unwrap_or(0.0) * (1.0 - quantile_loss_ratio(&step.target, &self.samples(k))));
        GoalResult {
            goal: self.spec.goals[g].clone(),
            conditional_throughput_pps: cond,
            lower_bound_pps: lower,
            upper_bound_pps: upper,
            relative_width: lower.zip(upper).map(|(l, u)| (u - l) / u),
            met: self.met(step),
        }
    }

    fn samples(&self, k: u32) -> Vec<Sample> {
        self.trials.iter().filter(|t| t.0 == k).map(|t| t.1).collect()
    }

    /// Every load tried, with its class for `step`.
    fn classes(&self, step: &Step) -> Vec<(u32, Class)> {
        let mut ks: Vec<u32> = self.trials.iter().map(|t| t.0).collect();
        ks.sort_unstable();
        ks.dedup();
        ks.into_iter()
            .map(|k| (k, classify(&step.target, &self.samples(k))))
            .collect()
    }

    /// The relevant (lower, upper) bounds of `step`, as grid indices (a larger index is a
    /// smaller load).
    fn bounds(&self, step: &Step) -> (Option<u32>, Option<u32>) {
        let cs = self.classes(step);
        let upper = cs.iter().filter(|c| c.1 == Class::Upper).map(|c| c.0).max();
        let lower = cs
            .iter()
            .filter(|c| c.1 == Class::Lower && upper.is_none_or(|u| c.0 > u))
            .map(|c| c.0)
            .min();
        (lower, upper)
    }

    fn met(&self, step: &Step) -> bool {
        match self.bounds(step) {
            (Some(lo), Some(hi)) => lo - hi <= step.width,
            (Some(lo), None) => lo <= self.top,
            (None, Some(hi)) => hi == self.grid.last,
            _ => false,
        }
    }

    /// The first target of goal `g` not yet met, with its index.
    fn current(&self, g: usize) -> Option<usize> {
        (0..self.chains[g].len()).find(|&i| !self.met(&self.chains[g][i]))
    }

    fn choose(&mut self) -> Option<(u32, NextTrial)> {
        if self.stopped || self.sender_below_minimum() {
            return None;
        }
        self.choose_any().map(|(k, mut n)| {
            // Never above what the sender holds.
            let k = k.max(self.top);
            n.load = self.grid.load(k);
            (k, n)
        })
    }

    fn choose_any(&mut self) -> Option<(u32, NextTrial)> {
        if let Some(first) = self.initial() {
            return Some(first);
        }
        let mut best: Option<(u32, NextTrial, usize, usize)> = None;
        for g in 0..self.chains.len() {
            let Some(i) = self.current(g) else { continue };
            let (k, outward) = self.candidate(&self.chains[g][i], g, i);
            let step = &self.chains[g][i];
            let next = NextTrial {
                load: self.grid.load(k),
                duration_s: step.target.trial_duration_s,
                goal: Some(g),
                target: step.label.clone(),
                purpose: format!("{} {}", self.spec.goals[g].name, step.label),
            };
            if best.as_ref().is_none_or(|b| next.duration_s < b.1.duration_s) {
                best = Some((k, next, i, outward));
            }
        }
        let (k, next, i, outward) = best?;
        let g = next.goal.expect("a goal's trial");
        match outward {
            1 => self.expansions[g][i].0 += 1,
            2 => self.expansions[g][i].1 += 1,
            _ => {}
        }
        Some((k, next))
    }

    /// The initial trials, as CSIT's: the maximum load; the forwarding rate it saw
    /// (corrected for the smallest goal loss ratio); then one coarse width above that load
    /// when it kept within the ratio, or the forwarding rate it saw when it did not.
    fn initial(&self) -> Option<(u32, NextTrial)> {
        let duration_s = self
            .chains
            .iter()
            .map(|c| c[0].target.trial_duration_s)
            .fold(0.0, f64::max);
        let least = self.spec.goals.iter().map(|g| g.loss_ratio).fold(1.0, f64::min);
        let at = |k: u32, what: &str| {
            let next = NextTrial {
                load: self.grid.load(k),
                duration_s,
                goal: None,
                target: "initial".into(),
                purpose: format!("initial, {what}"),
            };
            Some((k, next))
        };
        let hint = |k: u32, loss: f64| self.grid.below(self.grid.load(k) * (1.0 - loss) / (1.0 - least));
        let initial = |t: &(u32, Sample, MlrTrial)| t.2.target == "initial";
        let top = self.top;
        match self.trials.as_slice() {
            [] if top == 0 => at(0, "the maximum load"),
            [] => at(top, "the largest load the sender holds"),
            [first] if first.1.loss_ratio > least && hint(first.0, first.1.loss_ratio) > first.0 => at(
                hint(first.0, first.1.loss_ratio),
                "the forwarding rate seen at the maximum",
            ),
            [_, second] if initial(second) => {
                let (k, loss) = (second.0, second.1.loss_ratio);
                let coarse = self.chains.iter().map(|c| c[0].width).max().unwrap_or(1);
                if loss <= least {
                    (k > coarse).then_some(())?;
                    at(k - coarse, "one coarse width above the forwarding rate")
                } else {
                    (hint(k, loss) > k).then_some(())?;
                    at(hint(k, loss), "the forwarding rate seen there")
                }
            }
            _ => None,
        }
    }

    /// The next load for `step` (goal `g`, target `i`), and whether it is an outward step
    /// (1 up, 2 down). A bound missing is looked for first at the preceding target's bound
    /// on that side, then at a load still undecided on that side, then outwards.
    fn candidate(&self, step: &Step, g: usize, i: usize) -> (u32, usize) {
        let cs = self.classes(step);
        let undecided = |k: u32| cs.iter().find(|c| c.0 == k).is_none_or(|c| c.1 == Class::Undecided);
        let prev = match i {
            0 => (None, None),
            _ => self.bounds(&self.chains[g][i - 1]),
        };
        let open = |side: &dyn Fn(u32) -> bool| -> Vec<u32> {
            cs.iter()
                .filter(|c| c.1 == Class::Undecided && side(c.0))
                .map(|c| c.0)
                .collect()
        };
        let (up, down) = self.expansions[g][i];
        let inward = |k: u32| (k, 0);
        match self.bounds(step) {
            // Between bounds: up from the lower bound in steps that double, never past the
            // middle (the lower bound is most often the nearer, from the initial trials).
            (Some(lo), Some(hi)) => match lo.saturating_sub(step.width << up.min(20)) {
                k if k > (lo + hi) / 2 => (k, 1),
                _ => ((lo + hi) / 2, 0),
            },
            (Some(lo), None) => prev
                .1
                .filter(|&k| k < lo && undecided(k))
                .or_else(|| open(&|k| k < lo).into_iter().max())
                .map_or((lo.saturating_sub(step.width << up.min(20)), 1), inward),
            (None, Some(hi)) => prev
                .0
                .filter(|&k| k > hi && undecided(k))
                .or_else(|| open(&|k| k > hi).into_iter().min())
                .map_or(((hi + (step.width << down.min(20))).min(self.grid.last), 2), inward),
            (None, None) => prev
                .0
                .filter(|&k| undecided(k))
                .or(prev.1.filter(|&k| undecided(k)))
                .or_else(|| open(&|_| true).into_iter().min())
                .map_or((0, 0), inward),
        }
    }
}

/// A goal's targets on `grid`, coarsest first: each preceding one twice as wide as the next,
/// its duration sum (and trial duration, up to the final one) geometric from the goal's
/// initial trial duration up to its duration sum, as CSIT scales them.
fn chain(g: &Goal, grid: &Grid) -> Vec<Step> {
    let n = g.preceding_targets;
    let width = grid.steps(g.width);
    let target = |duration: f64, sum: f64| Target {
        loss_ratio: g.loss_ratio,
        exceed_ratio: g.exceed_ratio,
        trial_duration_s: duration,
        duration_sum_s: sum,
    };
    let mut steps = vec![Step {
        target: target(g.final_trial_duration_s, g.duration_sum_s),
        width,
        label: "final".into(),
    }];
    let ratio = (g.initial_trial_duration_s / g.duration_sum_s).powf(1.0 / f64::from(n.max(1)));
    for j in 1..=n {
        let sum = if j == n {
            g.initial_trial_duration_s
        } else {
            g.duration_sum_s * ratio.powi(j as i32)
        };
        steps.push(Step {
            target: target(sum.min(g.final_trial_duration_s), sum),
            width: width << j.min(20),
            label: format!("preceding {} of {n}", n + 1 - j),
        });
    }
    steps.reverse();
    steps
}

impl MlrSpec {
    /// Checks every value; errors name `mlrsearch.KEY` (goals by index).
    pub fn check(&self) -> Result<(), String> {
        let pos = |x: f64| x.is_finite() && x > 0.0;
        if !(pos(self.max_load)) {
            return Err(format!(
                "mlrsearch.max_rate_pps = {}: give a positive rate in frames per second",
                self.max_load
            ));
        }
        if !(pos(self.min_load) && self.min_load < self.max_load) {
            return Err(format!(
                "mlrsearch.min_rate_pps = {}: give a positive rate below max_rate_pps ({})",
                self.min_load, self.max_load
            ));
        }
        if self.goals.is_empty() {
            return Err(
                "mlrsearch.goals is empty: give at least one, e.g. [{ name = \"NDR\", loss_ratio = 0.0 }]".into(),
            );
        }
        for (i, g) in self.goals.iter().enumerate() {
            g.check(&format!("mlrsearch.goals[{i}]"))?;
        }
        if !pos(self.search_duration_max_s) {
            return Err(format!(
                "mlrsearch.search_duration_max_s = {}: give a positive number of seconds",
                self.search_duration_max_s
            ));
        }
        Ok(())
    }
}

impl Goal {
    fn check(&self, path: &str) -> Result<(), String> {
        let pos = |x: f64| x.is_finite() && x > 0.0;
        let ratio = |x: f64| x.is_finite() && (0.0..1.0).contains(&x);
        if !ratio(self.loss_ratio) {
            return Err(format!(
                "{path}.loss_ratio = {}: give a ratio from 0 to below 1 (0.005 is 0.5 % of the frames)",
                self.loss_ratio
            ));
        }
        if !ratio(self.exceed_ratio) {
            return Err(format!(
                "{path}.exceed_ratio = {}: give a ratio from 0 to below 1 (0.5: half the trial seconds may exceed the loss ratio)",
                self.exceed_ratio
            ));
        }
        if !(pos(self.width) && self.width < 1.0) {
            return Err(format!(
                "{path}.width = {}: give a relative width above 0 and below 1 (0.005 is 0.5 %)",
                self.width
            ));
        }
        if !(pos(self.initial_trial_duration_s) && self.initial_trial_duration_s <= self.final_trial_duration_s) {
            return Err(format!(
                "{path}.initial_trial_duration_s = {}: give a positive duration, at most the final trial duration ({} s)",
                self.initial_trial_duration_s, self.final_trial_duration_s
            ));
        }
        if self.duration_sum_s < self.final_trial_duration_s {
            return Err(format!(
                "{path}.duration_sum_s = {}: give at least the final trial duration ({} s)",
                self.duration_sum_s, self.final_trial_duration_s
            ));
        }
        if self.preceding_targets > 8 {
            return Err(format!(
                "{path}.preceding_targets = {}: give 0 to 8",
                self.preceding_targets
            ));
        }
        if self.preceding_targets == 0 && self.initial_trial_duration_s < self.final_trial_duration_s {
            return Err(format!(
                "{path}.preceding_targets = 0 with an initial trial duration below the final one: give 1 or more, or make them equal"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
