//! Statistical tests of the schedules: each gap distribution against its CDF
//! (Kolmogorov–Smirnov, 10^5 gaps taken from the schedule itself), and mean-rate exactness
//! over 10^6 departures.

mod common;
use common::{ks, KS_CRIT};

use gapless_core::spec::files::FileLoader;
use gapless_core::spec::{DistKind, DistSpec};
use gapless_core::timing::departures::{Pattern, Rate, Schedule};
use gapless_core::timing::dist::UnitDist;
use statrs::distribution::{Cauchy, ContinuousCDF, Exp, Gamma, LogNormal, Normal, Pareto, Weibull};

const N: usize = 100_000;

struct Table(&'static str);
impl FileLoader for Table {
    fn load(&self, _: &str) -> Result<String, String> {
        Ok(self.0.to_string())
    }
}

fn spec(kind: DistKind) -> DistSpec {
    DistSpec {
        kind,
        shape: None,
        sigma: None,
        cv: None,
        scale: None,
        spread: None,
        file: None,
        pdf: None,
        support_us: None,
        mean: None,
        min: None,
        max: None,
    }
}

/// Gaps (ns) of a schedule with mean gap `mean_ns`.
fn gaps(d: UnitDist, mean_ns: f64, n: usize, seed: u64) -> Vec<f64> {
    let mut s = Schedule::new(Pattern::Random(d), Rate::Pps(1e9 / mean_ns), 1, 0, seed);
    let mut prev = s.current().at_ns;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        s.advance(64);
        let at = s.current().at_ns;
        out.push((at - prev) as f64);
        prev = at;
    }
    out
}

fn check(name: &str, s: DistSpec, cdf: impl Fn(f64) -> f64) {
    let files = Table("# gaps\n100\n200\n300\n400\n1000\n1600\n");
    let d = UnitDist::from_spec(&s, "dist", &files).unwrap();
    let mean = 1e6; // 1 ms: the 1-ns rounding of departure times is negligible
    let x = gaps(d, mean, N, 42);
    let m = x.iter().sum::<f64>() / N as f64;
    let stat = ks(x, |v| cdf(v / mean));
    println!("{name}: D = {stat:.5} (critical {KS_CRIT:.5}), mean gap {m:.1} ns");
    assert!(stat < KS_CRIT, "{name}: KS D = {stat} >= {KS_CRIT}");
}

/// CDF of `f` truncated to [0, 2].
fn trunc(f: impl Fn(f64) -> f64) -> impl Fn(f64) -> f64 {
    move |x| ((f(x.clamp(0.0, 2.0)) - f(0.0)) / (f(2.0) - f(0.0))).clamp(0.0, 1.0)
}

#[test]
fn ks_exponential() {
    let e = Exp::new(1.0).unwrap();
    check("exponential", spec(DistKind::Exponential), |x| e.cdf(x));
}

#[test]
fn ks_uniform() {
    let mut s = spec(DistKind::Uniform);
    s.spread = Some(0.5);
    check("uniform", s, |x| ((x - 0.5) / 1.0).clamp(0.0, 1.0));
}

#[test]
fn ks_pareto() {
    let mut s = spec(DistKind::Pareto);
    s.shape = Some(2.5);
    let p = Pareto::new(1.5 / 2.5, 2.5).unwrap();
    check("pareto", s, |x| p.cdf(x));
}

#[test]
fn ks_weibull() {
    let mut s = spec(DistKind::Weibull);
    s.shape = Some(0.7);
    let lambda = 1.0 / libm_gamma(1.0 + 1.0 / 0.7);
    let w = Weibull::new(0.7, lambda).unwrap();
    check("weibull", s, |x| w.cdf(x));
}

#[test]
fn ks_gamma() {
    let mut s = spec(DistKind::Gamma);
    s.shape = Some(2.0);
    let g = Gamma::new(2.0, 2.0).unwrap(); // shape 2, rate 2: mean 1
    check("gamma", s, |x| g.cdf(x));
}

#[test]
fn ks_normal_truncated() {
    let mut s = spec(DistKind::Normal);
    s.cv = Some(0.6);
    let n = Normal::new(1.0, 0.6).unwrap();
    check("normal", s, trunc(move |x| n.cdf(x)));
}

#[test]
fn ks_lognormal() {
    let mut s = spec(DistKind::Lognormal);
    s.sigma = Some(0.8);
    let l = LogNormal::new(-0.32, 0.8).unwrap();
    check("lognormal", s, |x| l.cdf(x));
}

#[test]
fn ks_cauchy_truncated() {
    let mut s = spec(DistKind::Cauchy);
    s.scale = Some(0.3);
    let c = Cauchy::new(1.0, 0.3).unwrap();
    check("cauchy", s, trunc(move |x| c.cdf(x)));
}

#[test]
fn ks_empirical_inversion() {
    let mut s = spec(DistKind::Empirical);
    s.file = Some("t".into());
    let t = gapless_core::timing::dist::EmpiricalTable::parse("100\n200\n300\n400\n1000\n1600\n", "t").unwrap();
    let m = t.mean();
    check("empirical", s, move |x| t.cdf(x * m));
}

/// Gamma function for the Weibull scale (Lanczos), written here independently of the core.
fn libm_gamma(x: f64) -> f64 {
    statrs::function::gamma::gamma(x)
}

#[test]
fn cbr_mean_rate_is_exact_over_a_million_departures() {
    let pps = 123_457u64;
    let mut s = Schedule::new(Pattern::Cbr, Rate::Pps(pps as f64), 1, 0, 1);
    for n in 0..1_000_000u64 {
        let exact = (u128::from(n) * 1_000_000_000 / u128::from(pps)) as u64;
        let at = s.current().at_ns;
        assert!(at == exact || at + 1 == exact, "departure {n}: {at} vs exact {exact}");
        s.advance(64);
    }
}

#[test]
fn poisson_mean_rate_over_a_million_departures() {
    let d = UnitDist::from_spec(&spec(DistKind::Exponential), "d", &Table("")).unwrap();
    let mut s = Schedule::new(Pattern::Random(d), Rate::Pps(1e5), 1, 0, 7);
    for _ in 0..1_000_000 {
        s.advance(64);
    }
    let mean_gap = s.current().at_ns as f64 / 1e6;
    // The standard error of the mean of 10^6 exponential gaps is 0.1 %; allow 5 sigma.
    let rel = (mean_gap - 10_000.0).abs() / 10_000.0;
    println!("poisson mean gap {mean_gap:.3} ns, relative error {rel:.5}");
    assert!(rel < 0.005, "relative error {rel}");
}

#[test]
fn bit_rate_is_exact_with_mixed_sizes() {
    // 1 Gbit/s at L1 with sizes cycling 64/570/1518: bits on the wire / elapsed = 1e9.
    let mut s = Schedule::new(
        Pattern::Cbr,
        Rate::Bps {
            bps: 1e9,
            overhead_bytes: 20,
        },
        1,
        0,
        1,
    );
    let sizes = [64u64, 570, 1518];
    let mut bits = 0u64;
    for i in 0..1_000_000 {
        let b = sizes[i % 3];
        bits += (b + 20) * 8;
        s.advance(b);
    }
    let elapsed = s.current().at_ns as f64;
    let rate = bits as f64 / elapsed * 1e9;
    assert!((rate - 1e9).abs() / 1e9 < 1e-9, "rate {rate}");
}
