//! Estimators of the Hurst parameter of a series of counts (departures per bin), used to
//! report the H a self-similar schedule achieved and by the tests that check it.

/// Least-squares slope of `y` on `x`, each point weighted by `w`.
fn slope(x: &[f64], y: &[f64], w: &[f64]) -> f64 {
    let sw: f64 = w.iter().sum();
    let mx = x.iter().zip(w).map(|(a, b)| a * b).sum::<f64>() / sw;
    let my = y.iter().zip(w).map(|(a, b)| a * b).sum::<f64>() / sw;
    let mut num = 0.0;
    let mut den = 0.0;
    for i in 0..x.len() {
        num += w[i] * (x[i] - mx) * (y[i] - my);
        den += w[i] * (x[i] - mx) * (x[i] - mx);
    }
    num / den
}

fn variance(v: &[f64]) -> f64 {
    let m = v.iter().sum::<f64>() / v.len() as f64;
    v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64
}

/// The aggregated-variance (variance-time) estimator: the variance of the means of blocks
/// of m bins falls as m^(2H-2). Block sizes are spaced by powers of 2 from 4 bins up to a
/// twentieth of the series. Under long-range dependence the sample variance of k block
/// means is biased low by the factor (k - k^(2H-1)) / (k - 1) (Beran, *Statistics for
/// Long-Memory Processes*, 1994, §2.3): the fit divides it out, iterating on H. `None`
/// below 160 bins.
pub fn aggregated_variance(counts: &[f64]) -> Option<f64> {
    let n = counts.len();
    let (mut xs, mut ys, mut ks) = (Vec::new(), Vec::new(), Vec::new());
    let mut m = 4;
    while m <= n / 20 {
        let means: Vec<f64> = counts
            .chunks_exact(m)
            .map(|c| c.iter().sum::<f64>() / m as f64)
            .collect();
        xs.push((m as f64).ln());
        ys.push(variance(&means).ln());
        ks.push(means.len() as f64);
        m *= 2;
    }
    if xs.len() < 3 {
        return None;
    }
    let w = vec![1.0; xs.len()];
    let mut h = 1.0 + slope(&xs, &ys, &w) / 2.0;
    for _ in 0..50 {
        let hc = h.clamp(0.01, 0.99);
        let yc: Vec<f64> = ys
            .iter()
            .zip(&ks)
            .map(|(y, k)| y - ((k - k.powf(2.0 * hc - 1.0)) / (k - 1.0)).ln())
            .collect();
        let next = 1.0 + slope(&xs, &yc, &w) / 2.0;
        if (next - h).abs() < 1e-6 {
            return Some(next);
        }
        h = next;
    }
    Some(h)
}

/// The Abry–Veitch wavelet estimator with the Haar wavelet: the mean square of the detail
/// coefficients at octave j grows as 2^(j(2H-1)). Octaves 2 and up with at least 16
/// coefficients each, weighted by their count. `None` below 256 bins.
pub fn wavelet(counts: &[f64]) -> Option<f64> {
    let mut approx: Vec<f64> = counts.to_vec();
    let (mut xs, mut ys, mut ws) = (Vec::new(), Vec::new(), Vec::new());
    let mut j = 1;
    while approx.len() >= 32 {
        let mut next = Vec::with_capacity(approx.len() / 2);
        let mut energy = 0.0;
        for p in approx.chunks_exact(2) {
            let d = (p[0] - p[1]) / std::f64::consts::SQRT_2;
            energy += d * d;
            next.push((p[0] + p[1]) / std::f64::consts::SQRT_2);
        }
        let nj = next.len() as f64;
        if j >= 2 {
            xs.push(f64::from(j));
            ys.push((energy / nj).log2());
            ws.push(nj);
        }
        approx = next;
        j += 1;
    }
    if xs.len() < 3 {
        return None;
    }
    Some((slope(&xs, &ys, &ws) + 1.0) / 2.0)
}

/// Counts of departures per bin of `bin_ns`, over whole bins from 0.
pub fn bin_counts(times_ns: impl IntoIterator<Item = u64>, bin_ns: u64) -> Vec<f64> {
    let mut counts: Vec<f64> = Vec::new();
    let mut last = 0;
    for t in times_ns {
        let b = (t / bin_ns) as usize;
        if b >= counts.len() {
            counts.resize(b + 1, 0.0);
        }
        counts[b] += 1.0;
        last = b;
    }
    counts.truncate(last); // the last bin may be partial
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Poisson};

    #[test]
    fn white_noise_reads_as_one_half() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let p = Poisson::new(100.0).unwrap();
        let c: Vec<f64> = (0..1 << 15).map(|_| p.sample(&mut rng)).collect();
        let (a, w) = (aggregated_variance(&c).unwrap(), wavelet(&c).unwrap());
        assert!(
            (a - 0.5).abs() < 0.05 && (w - 0.5).abs() < 0.05,
            "expected 0.5, got {a} and {w}"
        );
    }
}
