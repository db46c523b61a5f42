//! The `[mlrsearch]` table of an experiment file, and its checks. Errors name the TOML path.
//!
//! Defaults (RFC 9971 leaves them to the user): a goal's exceed ratio 0.5 and duration sum
//! one final trial, so that a single full-length trial decides a load as RFC 2544's does;
//! an initial trial duration of 1 s (or the final one, if shorter); two preceding targets.

use serde::{Deserialize, Serialize};

use super::{Goal, MlrSpec};

/// `[mlrsearch]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MlrsearchSpec {
    pub goals: Vec<GoalSpec>,
    /// Goal Final Trial Duration for every goal that gives none (`final_duration_s` is
    /// accepted too, as `[trial]` names it); else `trial.final_duration_s`, else
    /// `trial.duration_s`.
    #[serde(default, alias = "final_duration_s")]
    pub final_trial_duration_s: Option<f64>,
    #[serde(default)]
    pub initial_trial_duration_s: Option<f64>,
    #[serde(default)]
    pub duration_sum_s: Option<f64>,
    #[serde(default)]
    pub exceed_ratio: Option<f64>,
    /// Goal Width for every goal that gives none (default 0.005).
    #[serde(default)]
    pub width_goal: Option<f64>,
    #[serde(default)]
    pub preceding_targets: Option<u32>,
    /// The load range, frames/s (aggregate over every direction).
    #[serde(default)]
    pub min_rate_pps: Option<f64>,
    pub max_rate_pps: f64,
    /// The search stops, its goals unmet, after this many trial seconds (default 1200),
    /// those of loads the sender could not hold included.
    #[serde(default)]
    pub search_duration_max_s: Option<f64>,
    /// After the search: trials at these fractions of the latency goal's conditional
    /// throughput, for their latency (e.g. [0.1, 0.5, 0.9]).
    #[serde(default)]
    pub latency_at: Vec<f64>,
    /// The goal `latency_at` is a fraction of: default the one named "PDR", else the last.
    #[serde(default)]
    pub latency_goal: Option<String>,
}

/// One goal.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GoalSpec {
    pub name: String,
    /// Goal Loss Ratio; or `loss_tolerance_pct`, in percent, as `[rfc2544]` names it.
    #[serde(default)]
    pub loss_ratio: Option<f64>,
    #[serde(default)]
    pub loss_tolerance_pct: Option<f64>,
    #[serde(default)]
    pub exceed_ratio: Option<f64>,
    #[serde(default)]
    pub width: Option<f64>,
    #[serde(default, alias = "final_duration_s")]
    pub final_trial_duration_s: Option<f64>,
    #[serde(default)]
    pub initial_trial_duration_s: Option<f64>,
    #[serde(default)]
    pub duration_sum_s: Option<f64>,
    #[serde(default)]
    pub preceding_targets: Option<u32>,
}

impl MlrsearchSpec {
    /// The search, checked; `final_default` is the final trial duration when the table
    /// gives none (from `[trial]`).
    pub fn search(&self, final_default: f64) -> Result<MlrSpec, String> {
        let goals = self
            .goals
            .iter()
            .enumerate()
            .map(|(i, g)| self.goal(i, g, final_default))
            .collect::<Result<Vec<_>, _>>()?;
        let spec = MlrSpec {
            goals,
            min_load: self.min_rate_pps.unwrap_or(self.max_rate_pps / 100.0),
            max_load: self.max_rate_pps,
            search_duration_max_s: self.search_duration_max_s.unwrap_or(1200.0),
        };
        spec.check()?;
        for (i, &f) in self.latency_at.iter().enumerate() {
            if !(f.is_finite() && f > 0.0 && f <= 1.0) {
                return Err(format!(
                    "mlrsearch.latency_at[{i}] = {f}: give a fraction above 0, at most 1 (0.5 is half the throughput)"
                ));
            }
        }
        if let Some(n) = &self.latency_goal {
            if !spec.goals.iter().any(|g| &g.name == n) {
                return Err(format!("mlrsearch.latency_goal = {n:?}: name one of the goals"));
            }
        }
        Ok(spec)
    }

    /// Which goal `latency_at` is a fraction of.
    pub fn latency_goal(&self) -> usize {
        let named = |n: &str| self.goals.iter().position(|g| g.name == n);
        self.latency_goal
            .as_deref()
            .and_then(named)
            .or_else(|| named("PDR"))
            .unwrap_or(self.goals.len().saturating_sub(1))
    }

    fn goal(&self, i: usize, g: &GoalSpec, final_default: f64) -> Result<Goal, String> {
        let path = format!("mlrsearch.goals[{i}]");
        let loss_ratio = match (g.loss_ratio, g.loss_tolerance_pct) {
            (Some(r), None) => r,
            (None, Some(p)) => p / 100.0,
            (Some(_), Some(_)) => return Err(format!("{path}: give loss_ratio or loss_tolerance_pct, not both")),
            (None, None) => {
                return Err(format!(
                    "{path}: give its loss_ratio (0 for NDR, 0.005 for a PDR of 0.5 %)"
                ))
            }
        };
        let final_s = g
            .final_trial_duration_s
            .or(self.final_trial_duration_s)
            .unwrap_or(final_default);
        Ok(Goal {
            name: g.name.clone(),
            loss_ratio,
            exceed_ratio: g.exceed_ratio.or(self.exceed_ratio).unwrap_or(0.5),
            width: g.width.or(self.width_goal).unwrap_or(0.005),
            initial_trial_duration_s: g
                .initial_trial_duration_s
                .or(self.initial_trial_duration_s)
                .unwrap_or(final_s.min(1.0)),
            final_trial_duration_s: final_s,
            duration_sum_s: g.duration_sum_s.or(self.duration_sum_s).unwrap_or(final_s),
            preceding_targets: g.preceding_targets.or(self.preceding_targets).unwrap_or(2),
        })
    }
}
