//! The experiment driver: the trials each method needs, invalid trials run again, and the
//! figures across repetitions.

use std::collections::HashMap;

use super::spec::{ExperimentSpec, Method, Rfc2544Spec, Rfc2544Test, Setting};
use super::{
    l1_bps, BackToBack, Curve, ExperimentResult, LossStep, PointResult, SizeResult, Throughput, TrialError, TrialPlan,
    TrialRecord, TrialRun, Trials,
};
use super::{LatencyAt, MlrsearchResult, MlrsearchTrial};
use crate::experiment::mlr::spec::MlrsearchSpec;
use crate::experiment::mlr::{Mlr, SenderFailure};
use crate::experiment::search::{Search, SearchSpec};
use crate::experiment::stats::{mean_ci, median_range};

/// Runs the experiment `spec` (checked) with `trials`; `base_seed` seeds repetition k with
/// `base_seed + k`. Stops early on [`TrialError`], keeping what was measured.
pub fn run(spec: &ExperimentSpec, base_seed: u64, trials: &mut dyn Trials) -> ExperimentResult {
    let mut d = Driver {
        spec,
        base_seed,
        trials,
        out: ExperimentResult {
            name: spec.name.clone(),
            method: spec.method,
            confidence: spec.trial.confidence,
            trials: Vec::new(),
            rfc2544: Vec::new(),
            sweep: Vec::new(),
            repeat: None,
            mlrsearch: None,
            rfc2889: None,
            directions: Vec::new(),
            repeats: 0,
            stopped: false,
            error: None,
            warnings: Vec::new(),
        },
        cache: HashMap::new(),
    };
    let res = match spec.method {
        Method::Rfc2544 => d.rfc2544(spec.rfc2544.as_ref().expect("checked")),
        Method::Sweep => d.sweep(),
        Method::Repeat => d.point(Vec::new(), "repeat").map(|p| d.out.repeat = Some(p)),
        Method::Mlrsearch => d.mlrsearch(spec.mlrsearch.as_ref().expect("checked")),
        Method::Rfc2889 => d.rfc2889(spec.rfc2889.as_ref().expect("checked")),
    };
    if let Err(e) = res {
        d.out.stopped = true;
        if let TrialError::Failed(m) = e {
            d.out.error = Some(m);
        }
    }
    if spec.multi_port() {
        if let Ok(dirs) = spec.directions() {
            super::directions::summarize(&mut d.out, &dirs);
        }
    }
    d.out
}

pub(super) type Step<T> = Result<T, TrialError>;

pub(super) struct Driver<'a> {
    pub(super) spec: &'a ExperimentSpec,
    pub(super) base_seed: u64,
    pub(super) trials: &'a mut dyn Trials,
    pub(super) out: ExperimentResult,
    /// Search trials by (size, rate bits): a rate tried for one tolerance serves the others.
    pub(super) cache: HashMap<(u32, u64), usize>,
}

impl Driver<'_> {
    pub(super) fn plan(&self, purpose: String, settings: &[Setting], rep: u32) -> TrialPlan {
        let mut p = TrialPlan {
            purpose,
            rate_pps: None,
            size: None,
            burst: None,
            pattern: None,
            duration_s: self.spec.trial.duration_s,
            warmup_s: self.spec.trial.warmup_s,
            count: None,
            seed: self.base_seed + u64::from(rep),
            learning: None,
            loads: Vec::new(),
        };
        for s in settings {
            match *s {
                Setting::Rate(r) => p.rate_pps = Some(r),
                Setting::Burst(b) => p.burst = Some(b),
                Setting::Size(z) => p.size = Some(z),
                Setting::Pattern(k) => p.pattern = Some(k),
            }
        }
        p
    }

    /// Runs `plan`, and again while the sender fell behind, up to the retry limit. Returns
    /// the index of the attempt that counts (the first valid one, else the last).
    pub(super) fn trial(&mut self, plan: TrialPlan) -> Step<usize> {
        let mut attempt = 0;
        loop {
            let index = self.out.trials.len();
            let run = self.trials.run(index, &plan)?;
            let rec = judge(index, plan.clone(), run, &self.spec.trial);
            self.trials.judged(&rec);
            let valid = rec.valid;
            self.out.trials.push(rec);
            if valid || attempt >= self.spec.trial.max_retries {
                return Ok(index);
            }
            self.out.trials[index].repeated = true;
            self.out.repeats += 1;
            attempt += 1;
        }
    }

    /// `repetitions` trials of one point, and their figures.
    fn point(&mut self, settings: Vec<Setting>, what: &str) -> Step<PointResult> {
        let mut idx = Vec::new();
        for rep in 0..self.spec.trial.repetitions {
            let purpose = format!("{what} rep {}", rep + 1);
            idx.push(self.trial(self.plan(purpose, &settings, rep))?);
        }
        Ok(summarise(settings, &self.out.trials, &idx, self.spec.trial.confidence))
    }

    fn sweep(&mut self) -> Step<()> {
        let s = self.spec.sweep.as_ref().expect("checked");
        let xs = s.x.settings("sweep").expect("checked");
        let curves: Vec<Option<Setting>> = match &s.curves {
            Some(c) => c
                .settings("sweep.curves")
                .expect("checked")
                .into_iter()
                .map(Some)
                .collect(),
            None => vec![None],
        };
        for c in curves {
            self.out.sweep.push(Curve {
                curve: c,
                points: Vec::new(),
            });
            for &x in &xs {
                let settings: Vec<Setting> = c.into_iter().chain([x]).collect();
                let what = settings.iter().map(Setting::label).collect::<Vec<_>>().join(", ");
                let p = self.point(settings, &format!("sweep {what}"))?;
                self.out.sweep.last_mut().expect("pushed").points.push(p);
            }
        }
        Ok(())
    }

    fn rfc2544(&mut self, r: &Rfc2544Spec) -> Step<()> {
        for &size in &r.frame_sizes {
            self.out.rfc2544.push(SizeResult {
                frame_size: size,
                throughput: Vec::new(),
                latency: None,
                frame_loss: Vec::new(),
                back_to_back: None,
            });
            if r.tests.contains(&Rfc2544Test::Throughput) || r.tests.contains(&Rfc2544Test::Latency) {
                self.throughputs(r, size)?;
            }
            if r.tests.contains(&Rfc2544Test::Latency) {
                self.latency(size)?;
            }
            if r.tests.contains(&Rfc2544Test::FrameLoss) {
                self.frame_loss(r, size)?;
            }
            if r.tests.contains(&Rfc2544Test::BackToBack) {
                self.back_to_back(r, size)?;
            }
        }
        Ok(())
    }

    fn last_size(&mut self) -> &mut SizeResult {
        self.out.rfc2544.last_mut().expect("pushed")
    }

    fn throughputs(&mut self, r: &Rfc2544Spec, size: u32) -> Step<()> {
        for &tol in &r.loss_tolerance_pct {
            let t = self.throughput(r, size, tol)?;
            self.last_size().throughput.push(t);
        }
        Ok(())
    }

    /// The binary search at one tolerance; rates already tried at this size are not run again.
    pub(super) fn throughput(&mut self, r: &Rfc2544Spec, size: u32, tol_pct: f64) -> Step<Throughput> {
        let mut search = Search::new(SearchSpec {
            min_pps: r.min_rate(size),
            max_pps: r.max_rate(size),
            resolution: r.resolution().expect("checked"),
            max_iterations: r.max_iterations,
            tolerance: tol_pct / 100.0,
        })
        .expect("checked");
        let mut used = Vec::new();
        while let Some(rate) = search.next_rate() {
            let i = match self.cache.get(&(size, rate.to_bits())) {
                Some(&i) => i,
                None => {
                    let purpose = format!("throughput {size} B, loss ≤ {tol_pct} %: {rate:.0} pps");
                    let i = self.trial(self.plan(purpose, &[Setting::Size(size), Setting::Rate(rate)], 0))?;
                    self.cache.insert((size, rate.to_bits()), i);
                    i
                }
            };
            let t = &self.out.trials[i].run;
            search.record(t.sent, t.received);
            used.push(i);
        }
        let res = search.result();
        let (final_trial, final_passed) = match (self.spec.trial.final_duration_s, res.throughput_pps) {
            (Some(d), Some(rate)) => {
                let mut p = self.plan(
                    format!("throughput {size} B, loss ≤ {tol_pct} %: final trial at {rate:.0} pps"),
                    &[Setting::Size(size), Setting::Rate(rate)],
                    0,
                );
                p.duration_s = d;
                let i = self.trial(p)?;
                (Some(i), Some(self.out.trials[i].loss_pct <= tol_pct))
            }
            _ => (None, None),
        };
        Ok(Throughput {
            loss_tolerance_pct: tol_pct,
            throughput_pps: res.throughput_pps,
            throughput_bps_l1: res.throughput_pps.map(|p| l1_bps(p, size)),
            search: res,
            trials: used,
            final_trial,
            final_passed,
        })
    }

    /// MLRsearch: each trial the search asks for (run again while the sender fell behind),
    /// the result kept current so that a stop keeps what was found; then latency at the
    /// fractions asked for.
    fn mlrsearch(&mut self, m: &MlrsearchSpec) -> Step<()> {
        let mut search = Mlr::new(m.search(self.spec.final_duration()).expect("checked")).expect("checked");
        let mut used: Vec<usize> = Vec::new();
        self.out.mlrsearch = Some(self.mlr_result(&search, &used));
        while let Some(n) = search.next_trial() {
            let secs = format!("{:.3}", n.duration_s);
            let secs = secs.trim_end_matches('0').trim_end_matches('.');
            let purpose = format!("mlrsearch {}: {:.0} pps for {secs} s", n.purpose, n.load);
            let mut p = self.plan(purpose, &[Setting::Rate(n.load)], 0);
            p.duration_s = n.duration_s;
            let first = self.out.trials.len();
            let i = self.trial(p)?;
            if !self.out.trials[i].valid {
                let seconds = self.out.trials[first..].iter().map(|t| t.plan.duration_s).sum();
                let hint = self.sender_hint(i, n.load);
                let failure = search.sender_failed(hint, seconds);
                self.out
                    .warnings
                    .push(self.sender_failed_warning(i, n.load, hint, failure));
                self.out.mlrsearch = Some(self.mlr_result(&search, &used));
                continue;
            }
            let t = &self.out.trials[i].run;
            search.record(t.sent, t.received);
            used.push(i);
            self.out.mlrsearch = Some(self.mlr_result(&search, &used));
        }
        if search.sender_below_minimum() {
            self.out.warnings.push(
                "mlrsearch has no answer: the sender could not hold even the minimum load on this machine (min_load_pps); see the trials' reasons".into(),
            );
        }
        if search.sender_gave_up() {
            self.out.warnings.push(format!(
                "mlrsearch stopped after the sender could not hold {} loads on this machine: its bounds are as far as it got (run it on a quieter machine, or lower max_rate_pps)",
                super::mlr::MAX_SENDER_FAILURES
            ));
        } else if search.ran_out() {
            self.out.warnings.push(
                "mlrsearch reached search_duration_max_s with a goal unmet: its bounds are as far as it got".into(),
            );
        }
        self.latency_at(m, &search)
    }

    /// The warning for trial `i` at `load`, whose every attempt the sender failed.
    fn sender_failed_warning(&self, i: usize, load: f64, hint: f64, failure: SenderFailure) -> String {
        let why = self.out.trials[i].invalid_reason.as_deref().unwrap_or("fell behind");
        match failure {
            SenderFailure::Stall => format!(
                "mlrsearch: the sender failed {load:.0} frames/s (trial {}, every attempt: {why}) after it had held as much: a stall of this machine, so the load is tried again",
                i + 1
            ),
            SenderFailure::Cap => format!(
                "mlrsearch: the sender could not hold {load:.0} frames/s on this machine (trial {}, every attempt: {why}); its loss is not the device's, and the search goes on at {:.0} frames/s or below",
                i + 1,
                hint.min(load)
            ),
        }
    }

    /// The load the sender's own figures say it holds, after trial `i` at `load` fell behind:
    /// the rate it achieved when it fell behind all along (it ended more than a tenth of the
    /// trial late), else the load at which its worst stall's burst would have fit, half the
    /// load at least.
    fn sender_hint(&self, i: usize, load: f64) -> f64 {
        let t = &self.out.trials[i];
        let span = t.plan.warmup_s + t.plan.duration_s;
        let late_s = t.run.late_max_ns as f64 / 1e9;
        if late_s > 0.1 * span {
            return load * span / (span + late_s);
        }
        let achieved = load * (1.0 - t.rate_shortfall);
        let max_burst = self.spec.trial.max_burst_frames as f64;
        match t.burst_frames.max(t.stalled_frames) as f64 {
            b if b > max_burst => achieved.min(load * (max_burst / b).max(0.5)),
            _ => achieved,
        }
    }

    fn mlr_result(&self, search: &Mlr, used: &[usize]) -> MlrsearchResult {
        let retried: Vec<&TrialRecord> = self.out.trials.iter().filter(|t| t.repeated).collect();
        MlrsearchResult {
            goals: search.results(),
            trials: used
                .iter()
                .zip(search.trials())
                .map(|(&trial, s)| MlrsearchTrial { trial, search: s })
                .collect(),
            trial_seconds: search.trial_seconds(),
            retried_trials: retried.len(),
            retried_trial_seconds: retried.iter().map(|t| t.plan.duration_s).fold(0.0, |a, b| a + b),
            sender_failed_seconds: search.sender_failed_seconds(),
            ran_out: search.ran_out(),
            sender_cap_pps: search.sender_cap_pps(),
            sender_gave_up: search.sender_gave_up(),
            sender_stalls: search.sender_stalls(),
            sender: sender_verdict(search),
            latency: Vec::new(),
        }
    }

    /// Trials at `latency_at` fractions of the latency goal's conditional throughput.
    fn latency_at(&mut self, m: &MlrsearchSpec, search: &Mlr) -> Step<()> {
        let g = m.latency_goal();
        let goal = &search.results()[g];
        for &f in &m.latency_at {
            let Some(tp) = goal.conditional_throughput_pps else {
                self.out.warnings.push(format!(
                    "{} has no conditional throughput, so latency at fractions of it was not measured",
                    goal.goal.name
                ));
                return Ok(());
            };
            let rate = tp * f;
            let what = format!("latency at {:.0} % of {} ({rate:.0} pps)", f * 100.0, goal.goal.name);
            let point = self.point(vec![Setting::Rate(rate)], &what)?;
            let entry = LatencyAt {
                fraction: f,
                goal: goal.goal.name.clone(),
                rate_pps: rate,
                point,
            };
            if let Some(r) = self.out.mlrsearch.as_mut() {
                r.latency.push(entry);
            }
        }
        Ok(())
    }

    /// Latency at the first tolerance's throughput, over the repetitions.
    fn latency(&mut self, size: u32) -> Step<()> {
        let rate = self.last_size().throughput.first().and_then(|t| t.throughput_pps);
        let Some(rate) = rate else {
            self.out.warnings.push(format!(
                "{size} B: no throughput was found, so latency was not measured"
            ));
            return Ok(());
        };
        let p = self.point(
            vec![Setting::Size(size), Setting::Rate(rate)],
            &format!("latency {size} B at {rate:.0} pps"),
        )?;
        self.last_size().latency = Some(p);
        Ok(())
    }

    /// Loss at 100 %, 90 %, … of the maximum rate, until two steps in a row lose nothing.
    fn frame_loss(&mut self, r: &Rfc2544Spec, size: u32) -> Step<()> {
        let mut clean = 0;
        for k in 0..10 {
            let load = 100.0 - 10.0 * f64::from(k);
            let rate = r.max_rate(size) * load / 100.0;
            let purpose = format!("frame loss {size} B at {load:.0} % ({rate:.0} pps)");
            let i = self.trial(self.plan(purpose, &[Setting::Size(size), Setting::Rate(rate)], 0))?;
            let loss_pct = self.out.trials[i].loss_pct;
            self.last_size().frame_loss.push(LossStep {
                load_pct: load,
                rate_pps: rate,
                loss_pct,
                trial: i,
            });
            clean = if loss_pct == 0.0 { clean + 1 } else { 0 };
            if clean == 2 {
                break;
            }
        }
        Ok(())
    }

    /// The longest burst at the maximum rate with no loss, searched per repetition.
    fn back_to_back(&mut self, r: &Rfc2544Spec, size: u32) -> Step<()> {
        let line = r.max_rate(size);
        let mut b2b = BackToBack {
            rate_pps: line,
            bursts: Vec::new(),
            burst_frames: None,
            trials: Vec::new(),
        };
        for rep in 0..self.spec.trial.repetitions {
            let (mut lo, mut hi) = (0u64, u64::from(r.max_burst) + 1);
            let mut n = u64::from(r.max_burst);
            while hi - lo > 1 {
                let mut p = self.plan(
                    format!("back-to-back {size} B: burst of {n} at {line:.0} pps"),
                    &[Setting::Size(size), Setting::Rate(line), Setting::Burst(n as u32)],
                    rep,
                );
                (p.count, p.warmup_s) = (Some(n), 0.0);
                let i = self.trial(p)?;
                b2b.trials.push(i);
                let t = &self.out.trials[i].run;
                if t.sent > 0 && t.received >= t.sent {
                    lo = n;
                } else {
                    hi = n;
                }
                n = (lo + hi) / 2;
            }
            b2b.bursts.push(lo);
        }
        let xs: Vec<f64> = b2b.bursts.iter().map(|&b| b as f64).collect();
        b2b.burst_frames = mean_ci(&xs, self.spec.trial.confidence).ok();
        self.last_size().back_to_back = Some(b2b);
        Ok(())
    }
}

/// What the search's answer says of the sender: whether it held every load, or which load
/// bounds the answer, or that there is none.
fn sender_verdict(search: &Mlr) -> String {
    let stalls = match search.sender_stalls() {
        0 => String::new(),
        n => format!(" ({n} attempts at loads it had held failed by a stall of this machine and were run again)"),
    };
    let gave_up = super::mlr::MAX_SENDER_FAILURES;
    match search.sender_cap_pps() {
        Some(_) if search.sender_below_minimum() => {
            "could not hold even the minimum load on this machine: no answer".into()
        }
        Some(c) if search.sender_gave_up() => format!(
            "could not hold {c:.0} frames/s on this machine and failed {gave_up} loads in all{stalls}, so the search stopped: the bounds it has are the device's, and a goal without a lower bound was not reached"
        ),
        None if search.sender_gave_up() => format!(
            "held every load the search kept, but failed {gave_up} attempts{stalls}, so the search stopped: the bounds it has are the device's, and a goal without a lower bound was not reached"
        ),
        None => format!("held every load the search kept{stalls}: the bounds are the device's"),
        Some(c) => format!(
            "could not hold {c:.0} frames/s on this machine{stalls}: the bounds are the device's below it, and a goal whose lower bound is the largest load tried is bounded by the sender, not the device"
        ),
    }
}

/// A trial's record: loss, lateness, and whether its sender kept up ([`super::sender`]).
fn judge(index: usize, plan: TrialPlan, run: TrialRun, spec: &super::spec::TrialSpec) -> TrialRecord {
    let loss_pct = if run.sent == 0 {
        100.0
    } else {
        run.sent.saturating_sub(run.received) as f64 * 100.0 / run.sent as f64
    };
    let j = super::sender::judge(&plan, &run, spec);
    let invalid_reason = (!j.reasons.is_empty()).then(|| {
        format!(
            "the sender fell behind: {}; schedule: {}",
            j.reasons.join("; "),
            run.schedule
        )
    });
    TrialRecord {
        index,
        plan,
        loss_pct,
        late_share: j.late_share,
        burst_frames: j.burst_frames,
        stalled_frames: j.stalled_frames,
        rate_shortfall: j.rate_shortfall,
        valid: invalid_reason.is_none(),
        invalid_reason,
        repeated: false,
        run,
    }
}

/// Mean ± CI of loss and rate, and mean ± CI plus median/range of the latency percentiles.
pub(crate) fn summarise(settings: Vec<Setting>, all: &[TrialRecord], idx: &[usize], level: f64) -> PointResult {
    let ts: Vec<&TrialRecord> = idx.iter().map(|&i| &all[i]).collect();
    let col = |f: &dyn Fn(&TrialRecord) -> Option<f64>| -> Option<Vec<f64>> {
        let v: Option<Vec<f64>> = ts.iter().map(|t| f(t)).collect();
        v.filter(|v| !v.is_empty())
    };
    let est = |v: &Option<Vec<f64>>| v.as_ref().and_then(|v| mean_ci(v, level).ok());
    let spread = |v: &Option<Vec<f64>>| v.as_ref().and_then(|v| median_range(v));
    let lat = |f: fn(&crate::meter::report::LatencySummary) -> i64| {
        col(&|t: &TrialRecord| t.run.latency.as_ref().map(|l| f(l) as f64))
    };
    let (p50, p99, p999, max) = (
        lat(|l| l.percentiles_ns.p50),
        lat(|l| l.percentiles_ns.p99),
        lat(|l| l.percentiles_ns.p99_9),
        lat(|l| l.max_ns),
    );
    let loss: Vec<f64> = ts.iter().map(|t| t.loss_pct).collect();
    PointResult {
        settings,
        trials: idx.to_vec(),
        loss_pct: mean_ci(&loss, level).expect("a point has ≥ 1 repetition, and losses are finite"),
        rx_pps: est(&col(&|t: &TrialRecord| t.run.rx_pps)),
        latency_p50_ns: est(&p50),
        latency_p99_ns: est(&p99),
        latency_p99_9_ns: est(&p999),
        latency_p50_spread: spread(&p50),
        latency_p99_spread: spread(&p99),
        latency_p99_9_spread: spread(&p999),
        latency_max_spread: spread(&max),
        invalid_used: ts.iter().filter(|t| !t.valid).count(),
    }
}
