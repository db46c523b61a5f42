//! RFC 2544 throughput search as a state machine (sans-IO): it says which rate to try next,
//! takes each trial's counts, and ends with the highest rate whose loss stayed within the
//! tolerance. The engine runs the trials; tests drive it with a fake device under test.
//!
//! The search tries the maximum rate first (a device that keeps up ends it at once), then
//! halves the interval between the highest rate that passed and the lowest that failed
//! until it is no wider than the resolution or the iterations run out. If no rate passed by
//! then, the minimum rate is tried: a device that fails even that has no throughput in range.

use serde::{Deserialize, Serialize};

/// How fine the search goes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Resolution {
    /// In frames per second.
    Pps(f64),
    /// A fraction of the rate (0.001 = 0.1 %).
    Relative(f64),
}

/// What to search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchSpec {
    pub min_pps: f64,
    pub max_pps: f64,
    pub resolution: Resolution,
    pub max_iterations: u32,
    /// The loss allowed, as a fraction of the frames sent (0: none).
    pub tolerance: f64,
}

impl SearchSpec {
    pub fn check(&self) -> Result<(), String> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !(ok(self.min_pps) && ok(self.max_pps) && self.min_pps < self.max_pps) {
            return Err(format!(
                "min_pps {} and max_pps {}: give two positive rates, min below max",
                self.min_pps, self.max_pps
            ));
        }
        match self.resolution {
            Resolution::Pps(r) | Resolution::Relative(r) if !ok(r) => {
                return Err(format!("resolution {r}: give a positive rate (pps) or fraction"))
            }
            _ => {}
        }
        if self.max_iterations == 0 {
            return Err("max_iterations 0: give at least 1".into());
        }
        if !(self.tolerance.is_finite() && (0.0..1.0).contains(&self.tolerance)) {
            return Err(format!(
                "loss tolerance {}: give a fraction from 0 up to (not including) 1",
                self.tolerance
            ));
        }
        Ok(())
    }
}

/// One trial of the search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    pub rate_pps: f64,
    pub sent: u64,
    pub received: u64,
    /// (sent − received) / sent.
    pub loss: f64,
    pub passed: bool,
}

/// Where the search ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    /// The highest rate that passed; None when even the minimum failed.
    pub throughput_pps: Option<f64>,
    /// The interval narrowed to the resolution (else the iterations ran out first).
    pub converged: bool,
    pub tolerance: f64,
    pub trials: Vec<Trial>,
}

/// The search in progress.
#[derive(Debug, Clone)]
pub struct Search {
    spec: SearchSpec,
    /// Highest rate that passed, lowest that failed.
    passed: Option<f64>,
    failed: Option<f64>,
    trials: Vec<Trial>,
    next: Option<f64>,
}

impl Search {
    pub fn new(spec: SearchSpec) -> Result<Search, String> {
        spec.check()?;
        let first = spec.max_pps;
        Ok(Search {
            spec,
            passed: None,
            failed: None,
            trials: Vec::new(),
            next: Some(first),
        })
    }

    /// The rate of the next trial; None once the search is done.
    pub fn next_rate(&self) -> Option<f64> {
        self.next
    }

    /// Whether `lo..hi` is as narrow as the resolution asks.
    fn narrow(&self, lo: f64, hi: f64) -> bool {
        match self.spec.resolution {
            Resolution::Pps(r) => hi - lo <= r,
            Resolution::Relative(r) => hi - lo <= r * hi,
        }
    }

    /// Takes the counts of the trial at `next_rate()`.
    pub fn record(&mut self, sent: u64, received: u64) {
        let Some(rate) = self.next else { return };
        let loss = if sent == 0 {
            1.0
        } else {
            sent.saturating_sub(received) as f64 / sent as f64
        };
        let passed = sent > 0 && loss <= self.spec.tolerance;
        self.trials.push(Trial {
            rate_pps: rate,
            sent,
            received,
            loss,
            passed,
        });
        if passed {
            self.passed = Some(self.passed.map_or(rate, |p| p.max(rate)));
        } else {
            self.failed = Some(self.failed.map_or(rate, |f| f.min(rate)));
        }
        self.next = self.choose();
    }

    fn choose(&self) -> Option<f64> {
        let hi = self.failed?; // the maximum passed: done
        let lo = self.passed.unwrap_or(self.spec.min_pps);
        let out_of_turns = self.trials.len() as u32 >= self.spec.max_iterations;
        if self.narrow(lo, hi) || out_of_turns {
            // Nothing passed yet: try the minimum once, unless it was tried.
            let min_tried = self.trials.iter().any(|t| t.rate_pps == self.spec.min_pps);
            return (self.passed.is_none() && !min_tried).then_some(self.spec.min_pps);
        }
        Some((lo + hi) / 2.0)
    }

    pub fn result(&self) -> SearchResult {
        let hi = self.failed.unwrap_or(self.spec.max_pps);
        let lo = self.passed.unwrap_or(self.spec.min_pps);
        SearchResult {
            throughput_pps: self.passed,
            converged: self.failed.is_none() || self.narrow(lo, hi),
            tolerance: self.spec.tolerance,
            trials: self.trials.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device that forwards `cap` frames/s and drops the rest.
    fn dut(cap: f64, rate: f64, sent: u64) -> u64 {
        if rate <= cap {
            sent
        } else {
            (sent as f64 * cap / rate).floor() as u64
        }
    }

    fn run(spec: SearchSpec, cap: f64) -> SearchResult {
        let mut s = Search::new(spec).unwrap();
        while let Some(r) = s.next_rate() {
            let sent = (r * 10.0).round() as u64; // 10 s trials
            s.record(sent, dut(cap, r, sent));
        }
        s.result()
    }

    #[test]
    fn converges_within_the_resolution_in_the_stated_iterations() {
        for tol in [0.0, 1e-5, 1e-3, 0.05] {
            let spec = SearchSpec {
                min_pps: 1_000.0,
                max_pps: 1_488_095.0,
                resolution: Resolution::Pps(100.0),
                max_iterations: 20,
                tolerance: tol,
            };
            let cap = 500_000.0;
            let r = run(spec, cap);
            // With loss (rate − cap)/rate allowed up to tol, the true answer is cap/(1 − tol).
            let truth = cap / (1.0 - tol);
            let got = r.throughput_pps.unwrap();
            assert!(r.converged, "tol {tol}: {r:?}");
            assert!(
                got <= truth + 1.0 && truth - got <= 100.0,
                "tol {tol}: expected within 100 pps below {truth}, got {got}"
            );
            // log2(1 487 095 / 100) = 13.9: the maximum, then 14 halvings.
            assert!(r.trials.len() <= 15, "tol {tol}: {} trials", r.trials.len());
            assert!(r.trials.iter().all(|t| t.passed == (t.loss <= tol)));
        }
    }

    #[test]
    fn relative_resolution_and_the_ends_of_the_range() {
        let spec = |min: f64| SearchSpec {
            min_pps: min,
            max_pps: 100_000.0,
            resolution: Resolution::Relative(0.01),
            max_iterations: 30,
            tolerance: 0.0,
        };
        let r = run(spec(1_000.0), 37_000.0);
        let got = r.throughput_pps.unwrap();
        assert!((37_000.0 * 0.99..=37_000.0).contains(&got), "{got}");
        // A device faster than the maximum: one trial.
        let r = run(spec(1_000.0), 1e9);
        assert_eq!((r.throughput_pps, r.trials.len()), (Some(100_000.0), 1));
        // Slower than the minimum: the minimum is tried, fails, and there is no throughput.
        let r = run(spec(50_000.0), 10_000.0);
        assert_eq!(r.throughput_pps, None);
        assert_eq!(r.trials.last().unwrap().rate_pps, 50_000.0);
    }

    #[test]
    fn iterations_cap_the_search_and_it_says_so() {
        let spec = SearchSpec {
            min_pps: 1.0,
            max_pps: 1e6,
            resolution: Resolution::Pps(1.0),
            max_iterations: 5,
            tolerance: 0.0,
        };
        let r = run(spec, 123_456.0);
        assert!(!r.converged);
        assert!(r.trials.len() <= 6, "{}", r.trials.len());
        assert!(r.throughput_pps.unwrap() <= 123_456.0);
    }

    #[test]
    fn bad_specs_are_refused() {
        let ok = SearchSpec {
            min_pps: 1.0,
            max_pps: 2.0,
            resolution: Resolution::Pps(0.1),
            max_iterations: 3,
            tolerance: 0.0,
        };
        assert!(Search::new(SearchSpec {
            min_pps: 3.0,
            ..ok.clone()
        })
        .unwrap_err()
        .contains("min below max"));
        assert!(Search::new(SearchSpec {
            tolerance: 1.0,
            ..ok.clone()
        })
        .unwrap_err()
        .contains("tolerance"));
        assert!(Search::new(SearchSpec {
            max_iterations: 0,
            ..ok.clone()
        })
        .is_err());
        assert!(Search::new(SearchSpec {
            resolution: Resolution::Relative(0.0),
            ..ok
        })
        .is_err());
    }
}
