//! Self-similar traffic, two ways:
//! - `fgn`: fractional Gaussian noise of Hurst parameter H, generated exactly by the
//!   Davies–Harte method (circulant embedding, one FFT), modulates the rate per slot. The
//!   factor is 1 + cv·X, clipped at 0, with X normalised to mean 0 and variance 1 over the
//!   generated block, so the block's mean rate is exactly the rate asked.
//! - `onoff`: the aggregate of N sources that alternate between on periods (sending CBR at
//!   their on rate) and off periods, both Pareto with shape α in (1, 2): H = (3 − α)/2
//!   (Taqqu, Willinger and Sherman, 1997).
//!
//! DESIGN-NOTES 29 gives the measurements that made `fgn` the default.

use std::sync::Arc;

use rand::SeedableRng;
use rand_distr::{Distribution, Pareto, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use rustfft::num_complex::Complex64;
use rustfft::FftPlanner;

use crate::timing::curve::RateCurve;

/// The most slots generated at once (64 MiB of FFT buffer); longer runs repeat the block.
pub const MAX_SLOTS: usize = 1 << 21;
/// The fewest slots generated.
pub const MIN_SLOTS: usize = 64;

/// Autocovariance of unit fGn at lag k.
fn fgn_acov(h: f64, k: f64) -> f64 {
    0.5 * ((k + 1.0).powf(2.0 * h) - 2.0 * k.powf(2.0 * h) + (k - 1.0).abs().powf(2.0 * h))
}

/// `n` samples of fractional Gaussian noise (Davies–Harte): exact for 0 < H < 1.
pub fn fgn(n: usize, h: f64, seed: u64) -> Vec<f64> {
    let m = 2 * n;
    let mut c: Vec<Complex64> = (0..m)
        .map(|j| {
            let k = if j <= n { j } else { m - j };
            Complex64::new(fgn_acov(h, k as f64), 0.0)
        })
        .collect();
    let mut planner = FftPlanner::<f64>::new();
    let fft = planner.plan_fft_forward(m);
    fft.process(&mut c);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut w: Vec<Complex64> = c
        .iter()
        .map(|l| {
            // Eigenvalues of fGn's embedding are non-negative; round-off may dip below 0.
            let s = (l.re.max(0.0) / m as f64).sqrt();
            let (a, b): (f64, f64) = (StandardNormal.sample(&mut rng), StandardNormal.sample(&mut rng));
            Complex64::new(s * a, s * b)
        })
        .collect();
    fft.process(&mut w);
    w.truncate(n);
    w.into_iter().map(|z| z.re).collect()
}

/// The rate factors of `n` slots: 1 + cv·X for fGn X normalised over the block, clipped at
/// 0, then scaled so that their mean is exactly 1. Returns the factors and the share of
/// slots clipped.
pub fn fgn_factors(n: usize, h: f64, cv: f64, seed: u64) -> (Vec<f64>, f64) {
    let x = fgn(n, h, seed);
    let mean = x.iter().sum::<f64>() / n as f64;
    let sd = (x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64).sqrt();
    let mut clipped = 0usize;
    let mut f: Vec<f64> = x
        .iter()
        .map(|v| {
            let y = 1.0 + cv * (v - mean) / sd;
            if y < 0.0 {
                clipped += 1;
            }
            y.max(0.0)
        })
        .collect();
    let m = f.iter().sum::<f64>() / n as f64;
    f.iter_mut().for_each(|v| *v /= m);
    (f, clipped as f64 / n as f64)
}

/// Slots to generate for a stream that lasts `horizon_ns` (unknown: the largest block).
pub fn slots_for(horizon_ns: Option<f64>, slot_ns: f64) -> usize {
    match horizon_ns {
        Some(h) => ((h / slot_ns).ceil() as usize).clamp(MIN_SLOTS, MAX_SLOTS),
        None => MAX_SLOTS,
    }
}

/// The fGn rate curve.
pub fn fgn_curve(n: usize, slot_ns: f64, h: f64, cv: f64, seed: u64) -> (Arc<RateCurve>, f64) {
    let (f, clipped) = fgn_factors(n, h, cv, seed);
    (Arc::new(RateCurve::slots(slot_ns, f)), clipped)
}

/// The on/off aggregate's parameters (compiled).
#[derive(Debug, Clone, PartialEq)]
pub struct OnOffParams {
    pub sources: u32,
    pub alpha: f64,
    /// Gap between a source's frames while on, ns.
    pub on_gap_ns: f64,
    pub mean_on_ns: f64,
    pub mean_off_ns: f64,
}

/// One source: on until `until`, sending every `on_gap_ns` from `next`; or off until `until`.
#[derive(Debug, Clone)]
struct Source {
    on: bool,
    next: f64,
    until: f64,
}

/// The running aggregate: the next departure of all sources.
#[derive(Debug, Clone)]
pub struct OnOffAggregate {
    p: OnOffParams,
    on: Pareto<f64>,
    off: Pareto<f64>,
    rng: Xoshiro256PlusPlus,
    src: Vec<Source>,
}

impl OnOffAggregate {
    /// Sources start in their stationary state: on with probability on/(on+off), in a
    /// period whose residual is drawn from the same Pareto (a close start).
    pub fn new(p: OnOffParams, seed: u64) -> OnOffAggregate {
        let scale = |mean: f64| mean * (p.alpha - 1.0) / p.alpha;
        let on = Pareto::new(scale(p.mean_on_ns), p.alpha).expect("checked");
        let off = Pareto::new(scale(p.mean_off_ns), p.alpha).expect("checked");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let share_on = p.mean_on_ns / (p.mean_on_ns + p.mean_off_ns);
        let src = (0..p.sources)
            .map(|_| {
                let u: f64 = rand::RngExt::random(&mut rng);
                let is_on = u < share_on;
                let len = if is_on {
                    on.sample(&mut rng)
                } else {
                    off.sample(&mut rng)
                };
                let until = len * rand::RngExt::random::<f64>(&mut rng);
                Source {
                    on: is_on,
                    next: if is_on { 0.0 } else { until },
                    until,
                }
            })
            .collect();
        let mut a = OnOffAggregate { p, on, off, rng, src };
        for i in 0..a.src.len() {
            a.settle(i);
        }
        a
    }

    /// Moves source `i` through whole periods until its next frame is inside an on period.
    fn settle(&mut self, i: usize) {
        loop {
            let s = &mut self.src[i];
            if s.on && s.next < s.until {
                return;
            }
            if s.on {
                let off = self.off.sample(&mut self.rng);
                s.on = false;
                s.next = s.until;
                s.until += off;
            } else {
                let on = self.on.sample(&mut self.rng);
                s.on = true;
                s.next = s.until;
                s.until += on;
            }
        }
    }

    /// The time (ns from the start) of the aggregate's next frame, and moves past it.
    pub fn next_time(&mut self) -> f64 {
        let (i, t) = self
            .src
            .iter()
            .enumerate()
            .map(|(i, s)| (i, s.next))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("at least one source");
        self.src[i].next += self.p.on_gap_ns;
        self.settle(i);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::hurst;

    #[test]
    fn fgn_of_known_h_reads_back_as_h() {
        for h in [0.6, 0.8] {
            let x = fgn(1 << 15, h, 9);
            let (a, w) = (hurst::aggregated_variance(&x).unwrap(), hurst::wavelet(&x).unwrap());
            assert!((a - h).abs() < 0.05 && (w - h).abs() < 0.05, "H = {h}: got {a} and {w}");
        }
    }

    #[test]
    fn factors_have_mean_one() {
        let (f, clipped) = fgn_factors(4096, 0.9, 0.3, 1);
        let m = f.iter().sum::<f64>() / f.len() as f64;
        assert!((m - 1.0).abs() < 1e-12 && clipped < 0.01, "mean {m}, clipped {clipped}");
    }
}
