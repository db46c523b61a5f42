//! Time-varying rates. A curve is a factor f(t) ≥ 0 on the stream's rate (1.0 = the rate
//! the profile gives). The schedule draws its gaps in *operational time* u, as it would at
//! the constant rate, and a departure at u leaves at the real time t = Λ⁻¹(u), where
//! Λ(t) = ∫₀ᵗ f. So CBR gaps follow the instantaneous rate (the rate is integrated), and a
//! Poisson stream becomes the non-homogeneous Poisson process of intensity rate·f(t) (the
//! time-change theorem).

use std::f64::consts::PI;

/// A rate factor over time (ns), and the inverse of its integral.
#[derive(Debug, Clone, PartialEq)]
pub enum RateCurve {
    /// Piecewise linear through knots (t ns, factor), held at the last factor after the
    /// last knot. Two knots at one time make a step.
    Knots { t: Vec<f64>, f: Vec<f64>, lam: Vec<f64> },
    /// 1 + amplitude · sin(2πt / period).
    Sine { amplitude: f64, period_ns: f64 },
    /// A factor per slot of `slot_ns`, repeating after the last slot (self-similar rates).
    /// `lam[k]` is Λ at the start of slot k; `lam[n]` the integral over the whole block.
    Slots { slot_ns: f64, f: Vec<f64>, lam: Vec<f64> },
}

/// Where the schedule is on its curve: the segment of its last departure, so that each
/// inversion starts there (departures only move forward).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cursor {
    seg: usize,
    /// Whole repetitions of a `Slots` block before the current one.
    rep: u64,
    /// The last answer of a sine inversion, where the next one starts.
    last_t: f64,
}

impl RateCurve {
    /// Builds a knot curve. Knot times must not decrease; factors must be ≥ 0 and the last
    /// one > 0 (checked by the caller, who names the TOML path).
    pub fn knots(points: &[(f64, f64)]) -> RateCurve {
        let t: Vec<f64> = points.iter().map(|p| p.0).collect();
        let f: Vec<f64> = points.iter().map(|p| p.1).collect();
        let mut lam = vec![0.0; t.len()];
        for i in 1..t.len() {
            lam[i] = lam[i - 1] + (t[i] - t[i - 1]) * (f[i] + f[i - 1]) / 2.0;
        }
        RateCurve::Knots { t, f, lam }
    }

    /// Builds a slot curve from factors ≥ 0 with a positive sum.
    pub fn slots(slot_ns: f64, f: Vec<f64>) -> RateCurve {
        let mut lam = Vec::with_capacity(f.len() + 1);
        let mut acc = 0.0;
        lam.push(0.0);
        for x in &f {
            acc += x * slot_ns;
            lam.push(acc);
        }
        RateCurve::Slots { slot_ns, f, lam }
    }

    /// The factor at `t` ns.
    pub fn factor(&self, t: f64) -> f64 {
        match self {
            RateCurve::Knots { t: kt, f, .. } => {
                let i = kt.partition_point(|&x| x <= t);
                if i == 0 {
                    return f[0];
                }
                if i >= kt.len() {
                    return f[f.len() - 1];
                }
                let (t0, t1) = (kt[i - 1], kt[i]);
                f[i - 1] + (f[i] - f[i - 1]) * (t - t0) / (t1 - t0)
            }
            RateCurve::Sine { amplitude, period_ns } => 1.0 + amplitude * (2.0 * PI * t / period_ns).sin(),
            RateCurve::Slots { slot_ns, f, .. } => f[((t / slot_ns) as usize) % f.len()],
        }
    }

    /// Λ(t): the integral of the factor from 0 to `t` ns.
    pub fn integral(&self, t: f64) -> f64 {
        match self {
            RateCurve::Knots { t: kt, f, lam } => {
                let i = kt.partition_point(|&x| x <= t).max(1) - 1;
                let tau = t - kt[i];
                let s = if i + 1 < kt.len() {
                    (f[i + 1] - f[i]) / (kt[i + 1] - kt[i])
                } else {
                    0.0
                };
                lam[i] + f[i] * tau + s * tau * tau / 2.0
            }
            RateCurve::Sine { amplitude, period_ns } => {
                t + amplitude * period_ns / (2.0 * PI) * (1.0 - (2.0 * PI * t / period_ns).cos())
            }
            RateCurve::Slots { slot_ns, f, lam } => {
                let n = f.len();
                let block = lam[n];
                let k = (t / slot_ns) as usize;
                let (rep, k) = (k / n, k % n);
                rep as f64 * block + lam[k] + f[k] * (t - (rep * n + k) as f64 * slot_ns)
            }
        }
    }

    /// The mean factor over [0, `horizon` ns] (the curve's mean rate over a run that long).
    pub fn mean_over(&self, horizon: f64) -> f64 {
        self.integral(horizon) / horizon
    }

    /// The largest factor over [0, `horizon` ns].
    pub fn peak(&self) -> f64 {
        match self {
            RateCurve::Knots { f, .. } | RateCurve::Slots { f, .. } => f.iter().copied().fold(0.0, f64::max),
            RateCurve::Sine { amplitude, .. } => 1.0 + amplitude,
        }
    }

    /// The real time t (ns) with Λ(t) = `u`. `u` must not decrease between calls that share
    /// a cursor.
    #[inline]
    pub fn inverse(&self, u: f64, c: &mut Cursor) -> f64 {
        match self {
            RateCurve::Knots { t, f, lam } => knots_inverse(t, f, lam, u, c),
            RateCurve::Sine { amplitude, period_ns } => {
                let t = sine_inverse(*amplitude, *period_ns, u, c.last_t);
                c.last_t = t;
                t
            }
            RateCurve::Slots { slot_ns, f, lam } => slots_inverse(*slot_ns, f, lam, u, c),
        }
    }
}

/// The τ ≥ 0 at which a segment starting at factor `f0` with slope `s` has integrated `d`.
#[inline]
fn segment_time(f0: f64, s: f64, d: f64) -> f64 {
    // f0 τ + s τ²/2 = d, in the form that is stable when s is small or f0 is 0.
    let disc = (f0 * f0 + 2.0 * s * d).max(0.0);
    let den = f0 + disc.sqrt();
    if den > 0.0 {
        2.0 * d / den
    } else {
        0.0
    }
}

fn knots_inverse(t: &[f64], f: &[f64], lam: &[f64], u: f64, c: &mut Cursor) -> f64 {
    let last = t.len() - 1;
    while c.seg < last && lam[c.seg + 1] <= u {
        c.seg += 1;
    }
    let i = c.seg;
    if i == last {
        return t[i] + (u - lam[i]) / f[i];
    }
    let s = (f[i + 1] - f[i]) / (t[i + 1] - t[i]);
    (t[i] + segment_time(f[i], s, u - lam[i])).min(t[i + 1])
}

fn slots_inverse(slot_ns: f64, f: &[f64], lam: &[f64], u: f64, c: &mut Cursor) -> f64 {
    let n = f.len();
    let block = lam[n];
    loop {
        let base = c.rep as f64 * block;
        if u - base >= block {
            c.rep += 1;
            c.seg = 0;
            continue;
        }
        while c.seg + 1 < n && lam[c.seg + 1] + base <= u {
            c.seg += 1;
        }
        let k = c.seg;
        let start = (c.rep as usize * n + k) as f64 * slot_ns;
        let d = u - base - lam[k];
        return start + if f[k] > 0.0 { (d / f[k]).min(slot_ns) } else { 0.0 };
    }
}

/// Λ is increasing and Λ(t + P) = Λ(t) + P: the answer is within a period, found by
/// Newton's method kept inside a shrinking bracket. It starts from the last answer (`hint`,
/// when it is in the same period), so consecutive departures take one or two steps.
fn sine_inverse(a: f64, p: f64, u: f64, hint: f64) -> f64 {
    let k = (u / p).floor();
    let r = u - k * p;
    let w = 2.0 * PI / p;
    let g = |x: f64| x + a / w * (1.0 - (w * x).cos()) - r;
    let (mut lo, mut hi) = (0.0, p);
    let h = hint - k * p;
    let mut x = if (0.0..p).contains(&h) && h <= r {
        h
    } else {
        r.clamp(lo, hi)
    };
    for _ in 0..60 {
        // Λ within 1/1000 of a ns: far below the 1 ns the departure is rounded to.
        let y = g(x);
        if y.abs() < 1e-3 {
            break;
        }
        if y > 0.0 {
            hi = x;
        } else {
            lo = x;
        }
        let d = 1.0 + a * (w * x).sin();
        let nx = if d > 1e-12 { x - y / d } else { f64::NAN };
        x = if nx > lo && nx < hi { nx } else { (lo + hi) / 2.0 };
    }
    k * p + x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(c: &RateCurve, horizon: f64) {
        let mut cur = Cursor::default();
        let total = c.integral(horizon);
        for i in 0..=1000 {
            let u = total * f64::from(i) / 1000.0;
            let t = c.inverse(u, &mut cur);
            let back = c.integral(t);
            assert!(
                (back - u).abs() < 1e-3 * (1.0 + u.abs() * 1e-9),
                "{c:?}: Λ(Λ⁻¹({u})) = {back}"
            );
        }
    }

    #[test]
    fn inverses_invert() {
        round_trip(&RateCurve::knots(&[(0.0, 0.1), (1e9, 1.0)]), 2e9);
        round_trip(
            &RateCurve::knots(&[
                (0.0, 0.5),
                (1e9, 0.5),
                (1e9, 2.0),
                (2e9, 2.0),
                (2e9, 0.0),
                (3e9, 0.0),
                (3e9, 1.0),
            ]),
            5e9,
        );
        round_trip(
            &RateCurve::Sine {
                amplitude: 1.0,
                period_ns: 1e8,
            },
            1e9,
        );
        round_trip(&RateCurve::slots(1e5, vec![1.0, 0.0, 2.5, 0.5]), 1e7);
    }

    #[test]
    fn a_ramp_integrates_to_its_trapezoid() {
        let c = RateCurve::knots(&[(0.0, 0.1), (1e9, 1.0)]);
        assert!((c.integral(1e9) - 0.55e9).abs() < 1e-3);
        assert!((c.integral(2e9) - 1.55e9).abs() < 1e-3, "held at 1 after the ramp");
        assert!((c.factor(0.5e9) - 0.55).abs() < 1e-12);
    }
}
