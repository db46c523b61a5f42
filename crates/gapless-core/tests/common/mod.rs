//! Helpers the statistical tests share.

/// KS critical value at α = 0.001 for n = 10^5: 1.949 / sqrt(n).
pub const KS_CRIT: f64 = 1.949 / 316.227_766;

/// Kolmogorov–Smirnov statistic of `x` against `cdf`.
pub fn ks(mut x: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    x.sort_by(|a, b| a.total_cmp(b));
    let n = x.len() as f64;
    let mut d: f64 = 0.0;
    for (i, v) in x.iter().enumerate() {
        let f = cdf(*v);
        d = d.max((f - i as f64 / n).abs()).max(((i + 1) as f64 / n - f).abs());
    }
    d
}
