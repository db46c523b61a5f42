//! RFC 9971's load classification and conditional throughput, for one load and one target,
//! from the trials measured at that load (its appendices A and B).
//!
//! A trial is *long* when its duration reaches the target's trial duration, *short*
//! otherwise; *low-loss* when its loss ratio is at most the target's loss ratio, *high-loss*
//! otherwise. Short low-loss trials are ignored except that they balance short high-loss ones
//! (at the exceed ratio), and missing duration (up to the duration sum) is counted as good
//! for the optimistic estimate and bad for the pessimistic one. The load is a lower bound
//! when even the pessimistic estimate keeps the high-loss share within the exceed ratio, an
//! upper bound when even the optimistic one does not, and undecided otherwise.

/// The numbers a classification needs: a target of a search goal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// The goal loss ratio: a trial losing more is high-loss.
    pub loss_ratio: f64,
    /// The share of the duration sum that may be high-loss for a lower bound.
    pub exceed_ratio: f64,
    /// Trials at least this long (seconds) are long.
    pub trial_duration_s: f64,
    /// The duration sum (seconds) a decision assumes.
    pub duration_sum_s: f64,
}

/// A load's classification for a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Lower,
    Upper,
    Undecided,
}

/// One trial as classification sees it: its duration (s) and loss ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub duration_s: f64,
    pub loss_ratio: f64,
}

/// Duration sums of a load's trials for a target.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Sums {
    good_long: f64,
    bad_long: f64,
    good_short: f64,
    bad_short: f64,
}

fn sums(t: &Target, samples: &[Sample]) -> Sums {
    let mut s = Sums::default();
    for x in samples {
        let long = x.duration_s >= t.trial_duration_s - 1e-9;
        let bad = x.loss_ratio > t.loss_ratio;
        let slot = match (long, bad) {
            (true, false) => &mut s.good_long,
            (true, true) => &mut s.bad_long,
            (false, false) => &mut s.good_short,
            (false, true) => &mut s.bad_short,
        };
        *slot += x.duration_s;
    }
    s
}

/// Classifies a load from its trials (RFC 9971, appendix A).
pub fn classify(t: &Target, samples: &[Sample]) -> Class {
    let s = sums(t, samples);
    let balancing = s.good_short * t.exceed_ratio / (1.0 - t.exceed_ratio);
    let effective_bad = s.bad_long + (s.bad_short - balancing).max(0.0);
    let whole = (s.good_long + effective_bad).max(t.duration_sum_s);
    let quantile = whole * t.exceed_ratio;
    let pessimistic_bad = whole - s.good_long;
    // A little slack for sums of floats that are equal on paper.
    let eps = 1e-9 * whole.max(1.0);
    if pessimistic_bad <= quantile + eps {
        Class::Lower
    } else if effective_bad > quantile + eps {
        Class::Upper
    } else {
        Class::Undecided
    }
}

/// The loss ratio at the exceed-ratio quantile of the load's long trials, missing duration
/// counted as total loss (RFC 9971, appendix B); the conditional throughput is the load
/// times one minus it. Ties take the lower loss ratio.
pub fn quantile_loss_ratio(t: &Target, samples: &[Sample]) -> f64 {
    let mut long: Vec<Sample> = samples
        .iter()
        .copied()
        .filter(|x| x.duration_s >= t.trial_duration_s - 1e-9)
        .collect();
    long.sort_by(|a, b| a.loss_ratio.total_cmp(&b.loss_ratio));
    let total: f64 = long.iter().map(|x| x.duration_s).sum();
    let mut remaining = total.max(t.duration_sum_s) * (1.0 - t.exceed_ratio);
    let mut ratio = None;
    for x in &long {
        if ratio.is_some() && remaining <= 1e-9 {
            return ratio.unwrap_or(1.0);
        }
        ratio = Some(x.loss_ratio);
        remaining -= x.duration_s;
    }
    if remaining > 1e-9 {
        1.0
    } else {
        ratio.unwrap_or(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(exceed: f64, dur: f64, sum: f64) -> Target {
        Target {
            loss_ratio: 0.005,
            exceed_ratio: exceed,
            trial_duration_s: dur,
            duration_sum_s: sum,
        }
    }

    fn s(d: f64, l: f64) -> Sample {
        Sample {
            duration_s: d,
            loss_ratio: l,
        }
    }

    #[test]
    fn one_long_trial_decides_when_the_sum_is_one_trial() {
        let g = t(0.5, 2.0, 2.0);
        assert_eq!(classify(&g, &[s(2.0, 0.0)]), Class::Lower);
        assert_eq!(classify(&g, &[s(2.0, 0.01)]), Class::Upper);
        assert_eq!(classify(&g, &[]), Class::Undecided);
        // A short high-loss trial is an upper bound already: even if the rest were good,
        // 1 s of 2 s bad is above half only when more than half; 1.5 s is.
        assert_eq!(classify(&g, &[s(1.5, 0.5)]), Class::Upper);
        assert_eq!(classify(&g, &[s(1.0, 0.5)]), Class::Undecided);
        // Short low-loss trials alone never make a lower bound.
        assert_eq!(classify(&g, &[s(1.0, 0.0), s(1.0, 0.0)]), Class::Undecided);
    }

    #[test]
    fn with_a_duration_sum_of_several_trials_the_exceed_ratio_is_a_share() {
        // CSIT's PDR: 1 s trials, 21 s in all, half may exceed.
        let g = t(0.5, 1.0, 21.0);
        let good: Vec<Sample> = (0..11).map(|_| s(1.0, 0.0)).collect();
        assert_eq!(
            classify(&g, &good),
            Class::Lower,
            "11 good of 21: the rest cannot outweigh them"
        );
        assert_eq!(classify(&g, &good[..10]), Class::Undecided);
        let mut mixed = good[..10].to_vec();
        mixed.extend((0..11).map(|_| s(1.0, 0.1)));
        assert_eq!(classify(&g, &mixed), Class::Upper, "11 bad of 21 exceed half");
        // Zero exceed ratio: one bad long trial is an upper bound whatever else.
        let strict = t(0.0, 1.0, 21.0);
        assert_eq!(classify(&strict, &[s(1.0, 0.0), s(1.0, 0.1)]), Class::Upper);
    }

    #[test]
    fn short_good_trials_balance_short_bad_ones_at_the_exceed_ratio() {
        let g = t(0.5, 2.0, 2.0);
        // 1 s bad short, balanced by 1 s good short (0.5 / 0.5 = 1 s): nothing effective bad.
        assert_eq!(classify(&g, &[s(1.0, 0.1), s(1.0, 0.0), s(2.0, 0.0)]), Class::Lower);
    }

    #[test]
    fn the_quantile_takes_the_worst_trial_within_the_good_share() {
        let g = t(0.5, 1.0, 4.0);
        let xs = [s(1.0, 0.0), s(1.0, 0.001), s(1.0, 0.002), s(1.0, 0.3)];
        // 4 s in all, 2 s (1 − 0.5) from the best: the second best, 0.001.
        assert_eq!(quantile_loss_ratio(&g, &xs), 0.001);
        // Missing duration counts as total loss: one good trial of a 4 s sum at exceed 0.
        assert_eq!(quantile_loss_ratio(&t(0.0, 1.0, 4.0), &xs[..1]), 1.0);
        assert_eq!(quantile_loss_ratio(&t(0.5, 2.0, 2.0), &[s(2.0, 0.004)]), 0.004);
        // Short trials do not count.
        assert_eq!(quantile_loss_ratio(&t(0.5, 2.0, 2.0), &[s(1.0, 0.0)]), 1.0);
    }
}
