//! Inter-departure times from an analytic density: a formula in one variable (µs) over a
//! support interval, integrated to a CDF on a fine grid and sampled by inversion, as the
//! IXP2400 generator samples its gaps from an inversion table.
//!
//! The formula is parsed by [exmex](https://docs.rs/exmex). Its unary minus binds tighter
//! than `^`: `-x^2` is `(-x)^2`, so write `-(x^2)`.

use exmex::Express;

use crate::spec::error::ProfileError;

/// Cells of the integration grid: fine enough that the table's CDF is within 1e-6 of the
/// analytic one for smooth densities (the KS bound at 10⁵ samples and α = 0.001 is 6e-3).
pub const GRID_CELLS: usize = 1 << 16;
/// Entries of the inversion's guide table.
const GUIDE: usize = 1 << 13;

/// A density tabulated on a uniform grid over `[lo, hi]` (ns): the CDF at each grid point,
/// sampled by inversion with linear interpolation inside a cell.
#[derive(Debug, Clone)]
pub struct PdfTable {
    lo: f64,
    cell: f64,
    cdf: Vec<f64>,
    /// `guide[j]`: the cell where u = j / GUIDE falls, so an inversion scans a few cells
    /// from there instead of bisecting 65 536 (146 → ~40 ns a gap, bench/engine.sh).
    guide: Vec<u32>,
    mean: f64,
    /// The formula as given, for reports.
    pub formula: String,
}

fn err(path: &str, problem: String, fix: &str) -> ProfileError {
    ProfileError::invalid(format!("{path}.pdf"), problem, fix)
}

impl PdfTable {
    /// Parses `formula`, checks it on `support_us` and integrates it. `path` is the
    /// distribution's TOML path.
    pub fn new(formula: &str, support_us: [f64; 2], path: &str) -> Result<PdfTable, ProfileError> {
        let [a, b] = support_us;
        if !(a.is_finite() && b.is_finite() && a >= 0.0 && b > a) {
            return Err(ProfileError::invalid(
                format!("{path}.support_us"),
                format!("the support [{a}, {b}] µs is not an interval of gaps"),
                "give support_us = [lo, hi] with 0 <= lo < hi, in µs",
            ));
        }
        let f = exmex::parse::<f64>(formula).map_err(|e| {
            err(
                path,
                format!("the formula {formula:?} does not parse: {}", e.msg()),
                "write one variable with + - * / ^, parentheses and functions such as exp, ln, sin, sqrt (e.g. \"x^2 * exp(-x/3)\"; PI and E are constants)",
            )
        })?;
        let vars = f.var_names().to_vec();
        if vars.len() > 1 {
            return Err(err(
                path,
                format!(
                    "the formula {formula:?} has {} variables ({})",
                    vars.len(),
                    vars.join(", ")
                ),
                "use one variable, the gap in µs (write the constants PI and E in capitals, and numbers for the rest)",
            ));
        }
        let n = GRID_CELLS;
        let h = (b - a) / n as f64;
        let mut dens = Vec::with_capacity(n + 1);
        for i in 0..=n {
            let x = a + h * i as f64;
            let y = f.eval(&vec![x; vars.len()]).unwrap_or(f64::NAN);
            if !y.is_finite() || y < 0.0 {
                return Err(err(
                    path,
                    format!("the density is {y} at x = {x} µs, inside the support [{a}, {b}]"),
                    "make the formula finite and non-negative on the whole support, or narrow support_us",
                ));
            }
            dens.push(y);
        }
        Self::integrate(&dens, a, h, formula, path)
    }

    fn integrate(dens: &[f64], a: f64, h: f64, formula: &str, path: &str) -> Result<PdfTable, ProfileError> {
        let mut cdf = Vec::with_capacity(dens.len());
        let mut acc = 0.0;
        cdf.push(0.0);
        for w in dens.windows(2) {
            acc += (w[0] + w[1]) * h / 2.0;
            cdf.push(acc);
        }
        if !(acc > 0.0 && acc.is_finite()) {
            return Err(err(
                path,
                format!("the density integrates to {acc} over the support"),
                "give a formula with positive mass on the support (check the support's units: µs)",
            ));
        }
        let mut mean = 0.0;
        for (i, w) in cdf.windows(2).enumerate() {
            let p = (w[1] - w[0]) / acc;
            mean += p * (a + h * (i as f64 + 0.5));
        }
        cdf.iter_mut().for_each(|c| *c /= acc);
        let guide = (0..GUIDE)
            .map(|j| {
                (cdf.partition_point(|&v| v <= j as f64 / GUIDE as f64)
                    .clamp(1, cdf.len() - 1)
                    - 1) as u32
            })
            .collect();
        Ok(PdfTable {
            lo: a * 1e3,
            cell: h * 1e3,
            cdf,
            guide,
            mean: mean * 1e3,
            formula: formula.to_string(),
        })
    }

    /// The mean gap (ns) of the sampled distribution.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// The gap (ns) at quantile `u` in [0, 1).
    #[inline]
    pub fn quantile(&self, u: f64) -> f64 {
        let c = &self.cdf;
        let mut i = self.guide[((u * GUIDE as f64) as usize).min(GUIDE - 1)] as usize;
        while i + 2 < c.len() && c[i + 1] <= u {
            i += 1;
        }
        let span = c[i + 1] - c[i];
        let f = if span > 0.0 { (u - c[i]) / span } else { 0.0 };
        self.lo + self.cell * (i as f64 + f)
    }

    /// The CDF of the sampled distribution at `x` ns (for goodness-of-fit tests).
    pub fn cdf(&self, x: f64) -> f64 {
        let pos = (x - self.lo) / self.cell;
        if pos <= 0.0 {
            return 0.0;
        }
        let i = pos as usize;
        if i + 1 >= self.cdf.len() {
            return 1.0;
        }
        self.cdf[i] + (pos - i as f64) * (self.cdf[i + 1] - self.cdf[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_density_has_linear_quantiles() {
        let t = PdfTable::new("1", [10.0, 20.0], "d").unwrap();
        assert!((t.mean() - 15_000.0).abs() < 1e-6, "mean {}", t.mean());
        assert!((t.quantile(0.25) - 12_500.0).abs() < 1e-6);
        assert!((t.cdf(17_500.0) - 0.75).abs() < 1e-9);
    }

    #[test]
    fn bad_formulas_say_what_is_wrong() {
        let e = PdfTable::new("x^2 * exp(-x/3", [0.0, 10.0], "s.dist")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("s.dist.pdf:") && e.contains("does not parse"), "{e}");
        let e = PdfTable::new("x - 5", [0.0, 10.0], "d").unwrap_err().to_string();
        assert!(e.contains("the density is -5 at x = 0 µs"), "{e}");
        let e = PdfTable::new("1/(x-5)^2", [0.0, 10.0], "d").unwrap_err().to_string();
        assert!(e.contains("the density is inf at x = 5 µs"), "{e}");
        let e = PdfTable::new("0 * x", [0.0, 10.0], "d").unwrap_err().to_string();
        assert!(e.contains("integrates to 0"), "{e}");
        let e = PdfTable::new("x * y", [0.0, 10.0], "d").unwrap_err().to_string();
        assert!(e.contains("2 variables (x, y)"), "{e}");
        let e = PdfTable::new("x", [5.0, 1.0], "d").unwrap_err().to_string();
        assert!(e.starts_with("d.support_us:"), "{e}");
    }
}
