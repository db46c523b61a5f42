//! Distributions, compiled from [`DistSpec`].
//!
//! Gaps use [`UnitDist`]: a distribution with mean exactly 1 that the schedule scales by the
//! gap the rate asks for, so every family keeps the target mean rate. Where a family has no
//! mean (Cauchy) or would go negative (normal), it is truncated symmetrically to [0, 2]
//! around its centre 1, which keeps the mean at 1.
//! Sizes and burst lengths use [`ScaledDist`]: absolute mean, min and max.

use rand::{Rng, RngExt};
use rand_distr::{Cauchy, Distribution, Exp, Gamma, LogNormal, Normal, Pareto, Weibull};

use crate::spec::error::ProfileError;
use crate::spec::files::FileLoader;
use crate::spec::{DistKind, DistSpec};

/// A sample table sampled by inversion of its empirical CDF (linear interpolation between
/// order statistics).
#[derive(Debug, Clone)]
pub struct EmpiricalTable {
    sorted: Vec<f64>,
    mean: f64,
}

impl EmpiricalTable {
    /// Parses one value per line; blank lines and `#` comments are skipped. A line with
    /// commas takes its first column.
    pub fn parse(text: &str, path: &str) -> Result<EmpiricalTable, ProfileError> {
        let mut v = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let first = line.split(',').next().unwrap_or("").trim();
            let x: f64 = first.parse().map_err(|_| {
                ProfileError::invalid(
                    path,
                    format!("line {}: {first:?} is not a number", i + 1),
                    "write one non-negative number a line (# starts a comment)",
                )
            })?;
            if !x.is_finite() || x < 0.0 {
                return Err(ProfileError::invalid(
                    path,
                    format!("line {}: {x} is negative or not finite", i + 1),
                    "use non-negative finite values",
                ));
            }
            v.push(x);
        }
        if v.len() < 2 {
            return Err(ProfileError::invalid(
                path,
                format!("the table has {} value(s)", v.len()),
                "give at least 2 values",
            ));
        }
        v.sort_by(|a, b| a.total_cmp(b));
        // Mean of the piecewise-linear quantile function on [0, 1].
        let n = v.len();
        let mean = v.windows(2).map(|w| (w[0] + w[1]) / 2.0).sum::<f64>() / (n - 1) as f64;
        if mean <= 0.0 {
            return Err(ProfileError::invalid(
                path,
                "the table's mean is 0",
                "give some positive values",
            ));
        }
        Ok(EmpiricalTable { sorted: v, mean })
    }

    /// The mean of the distribution that [`EmpiricalTable::quantile`] samples.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// The quantile function at `u` in [0, 1).
    #[inline]
    pub fn quantile(&self, u: f64) -> f64 {
        let pos = u * (self.sorted.len() - 1) as f64;
        let i = pos as usize;
        if i + 1 >= self.sorted.len() {
            return self.sorted[self.sorted.len() - 1];
        }
        let f = pos - i as f64;
        self.sorted[i] + f * (self.sorted[i + 1] - self.sorted[i])
    }

    /// The CDF of the sampled distribution (for goodness-of-fit tests).
    pub fn cdf(&self, x: f64) -> f64 {
        let s = &self.sorted;
        if x <= s[0] {
            return 0.0;
        }
        if x >= s[s.len() - 1] {
            return 1.0;
        }
        let i = s.partition_point(|&v| v <= x) - 1;
        let f = if s[i + 1] > s[i] {
            (x - s[i]) / (s[i + 1] - s[i])
        } else {
            0.0
        };
        (i as f64 + f) / (s.len() - 1) as f64
    }
}

/// A distribution with mean 1.
#[derive(Debug, Clone)]
pub enum UnitDist {
    Constant,
    /// U(1 - spread, 1 + spread).
    Uniform {
        spread: f64,
    },
    Exponential(Exp<f64>),
    Pareto(Pareto<f64>),
    Weibull(Weibull<f64>),
    Gamma(Gamma<f64>),
    /// N(1, cv) truncated to [0, 2].
    Normal(Normal<f64>),
    LogNormal(LogNormal<f64>),
    /// Cauchy(1, scale) truncated to [0, 2].
    Cauchy(Cauchy<f64>),
    Empirical(EmpiricalTable),
    /// An analytic density, tabulated (absolute gaps in ns, like `Empirical`).
    Pdf(crate::timing::pdf::PdfTable),
}

fn need(spec: &DistSpec, v: Option<f64>, path: &str, key: &str, what: &str) -> Result<f64, ProfileError> {
    v.ok_or_else(|| {
        ProfileError::invalid(
            format!("{path}.{key}"),
            format!("a {:?} distribution needs `{key}`", spec.kind).to_lowercase(),
            format!("add {key} = ... ({what})"),
        )
    })
}

fn bad(path: &str, key: &str, problem: String, fix: &str) -> ProfileError {
    ProfileError::invalid(format!("{path}.{key}"), problem, fix)
}

impl UnitDist {
    /// Compiles the shape of `spec` into a unit-mean distribution. `path` names it in errors.
    pub fn from_spec(spec: &DistSpec, path: &str, files: &dyn FileLoader) -> Result<UnitDist, ProfileError> {
        let u = Self::from_spec_unchecked(spec, path, files)?;
        check_variance(spec, path)?;
        Ok(u)
    }

    fn from_spec_unchecked(spec: &DistSpec, path: &str, files: &dyn FileLoader) -> Result<UnitDist, ProfileError> {
        Ok(match spec.kind {
            DistKind::Constant => UnitDist::Constant,
            DistKind::Uniform => {
                let s = spec.spread.unwrap_or(1.0);
                if !(s > 0.0 && s <= 1.0) {
                    return Err(bad(
                        path,
                        "spread",
                        format!("spread {s} is outside (0, 1]"),
                        "use a spread in (0, 1]: the gaps range over mean x (1 +- spread)",
                    ));
                }
                UnitDist::Uniform { spread: s }
            }
            DistKind::Exponential => UnitDist::Exponential(Exp::new(1.0).expect("rate 1 is valid")),
            DistKind::Pareto => {
                let a = need(spec, spec.shape, path, "shape", "alpha > 1, e.g. 1.5")?;
                if !(a > 1.0 && a.is_finite()) {
                    return Err(bad(
                        path,
                        "shape",
                        format!("pareto shape {a} must be > 1 (below it the mean is infinite)"),
                        "use shape > 1, e.g. 1.5",
                    ));
                }
                UnitDist::Pareto(Pareto::new((a - 1.0) / a, a).expect("checked"))
            }
            DistKind::Weibull => {
                let k = need(spec, spec.shape, path, "shape", "k > 0, e.g. 0.7")?;
                if !(k > 0.05 && k.is_finite()) {
                    return Err(bad(
                        path,
                        "shape",
                        format!("weibull shape {k} must be > 0.05"),
                        "use a shape k > 0.05",
                    ));
                }
                let lambda = 1.0 / libm::tgamma(1.0 + 1.0 / k);
                UnitDist::Weibull(Weibull::new(lambda, k).expect("checked"))
            }
            DistKind::Gamma => {
                let k = need(spec, spec.shape, path, "shape", "k > 0, e.g. 2")?;
                if !(k > 0.0 && k.is_finite()) {
                    return Err(bad(
                        path,
                        "shape",
                        format!("gamma shape {k} must be > 0"),
                        "use a shape k > 0",
                    ));
                }
                UnitDist::Gamma(Gamma::new(k, 1.0 / k).expect("checked"))
            }
            DistKind::Normal => {
                let cv = need(spec, spec.cv, path, "cv", "standard deviation / mean, e.g. 0.2")?;
                if !(cv > 0.0 && cv <= 10.0) {
                    return Err(bad(
                        path,
                        "cv",
                        format!("normal cv {cv} is outside (0, 10]"),
                        "use 0 < cv <= 10",
                    ));
                }
                UnitDist::Normal(Normal::new(1.0, cv).expect("checked"))
            }
            DistKind::Lognormal => {
                let s = need(spec, spec.sigma, path, "sigma", "sigma of the log, e.g. 0.5")?;
                if !(s > 0.0 && s <= 5.0) {
                    return Err(bad(
                        path,
                        "sigma",
                        format!("lognormal sigma {s} is outside (0, 5]"),
                        "use 0 < sigma <= 5",
                    ));
                }
                UnitDist::LogNormal(LogNormal::new(-s * s / 2.0, s).expect("checked"))
            }
            DistKind::Cauchy => {
                let g = need(spec, spec.scale, path, "scale", "half-width / median, e.g. 0.1")?;
                if !(g > 0.0 && g <= 10.0) {
                    return Err(bad(
                        path,
                        "scale",
                        format!("cauchy scale {g} is outside (0, 10]"),
                        "use 0 < scale <= 10",
                    ));
                }
                UnitDist::Cauchy(Cauchy::new(1.0, g).expect("checked"))
            }
            DistKind::Empirical => {
                let file = spec.file.as_deref().ok_or_else(|| {
                    bad(
                        path,
                        "file",
                        "an empirical distribution needs `file`".into(),
                        "add file = \"table.txt\" (one value a line)",
                    )
                })?;
                let text = files.load(file).map_err(|e| {
                    bad(
                        path,
                        "file",
                        format!("cannot read {file:?}: {e}"),
                        "check the path (relative to the profile)",
                    )
                })?;
                let t = EmpiricalTable::parse(&text, &format!("{path}.file ({file})"))?;
                UnitDist::Empirical(t)
            }
            DistKind::Pdf => {
                let (Some(f), Some(support)) = (spec.pdf.as_deref(), spec.support_us) else {
                    return Err(bad(
                        path,
                        if spec.pdf.is_none() { "pdf" } else { "support_us" },
                        "a pdf distribution needs `pdf` (the formula) and `support_us` (its interval)".into(),
                        "add pdf = \"x^2 * exp(-x/3)\" and support_us = [0, 60]",
                    ));
                };
                UnitDist::Pdf(crate::timing::pdf::PdfTable::new(f, support, path)?)
            }
        })
    }

    /// Draws one value; the mean over many draws is 1 (the table's own mean for `Empirical`,
    /// which [`UnitDist::raw_mean`] reports; [`UnitDist::sample`] divides it out).
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match self {
            UnitDist::Constant => 1.0,
            UnitDist::Uniform { spread } => 1.0 - spread + 2.0 * spread * rng.random::<f64>(),
            UnitDist::Exponential(d) => d.sample(rng),
            UnitDist::Pareto(d) => d.sample(rng),
            UnitDist::Weibull(d) => d.sample(rng),
            UnitDist::Gamma(d) => d.sample(rng),
            UnitDist::Normal(d) => truncated(|| d.sample(rng)),
            UnitDist::LogNormal(d) => d.sample(rng),
            UnitDist::Cauchy(d) => truncated(|| d.sample(rng)),
            UnitDist::Empirical(t) => t.quantile(rng.random::<f64>()) / t.mean(),
            UnitDist::Pdf(t) => t.quantile(rng.random::<f64>()) / t.mean(),
        }
    }

    /// The largest value the family draws (relative to a mean of 1), for the families that
    /// are truncated symmetrically so that their mean holds.
    pub fn upper_bound(&self) -> Option<f64> {
        match self {
            UnitDist::Normal(_) | UnitDist::Cauchy(_) => Some(2.0),
            UnitDist::Uniform { spread } => Some(1.0 + spread),
            _ => None,
        }
    }

    /// The mean of the family before normalisation: 1, or an empirical table's own mean.
    pub fn raw_mean(&self) -> f64 {
        match self {
            UnitDist::Empirical(t) => t.mean(),
            UnitDist::Pdf(t) => t.mean(),
            _ => 1.0,
        }
    }
}

/// Largest squared coefficient of variation (variance / mean²) a gap distribution may have:
/// the mean of n gaps is within about 100·sqrt(CV² / n) % of the asked one, so above 10⁴ even
/// a million gaps miss it by 10 % or more, and a run would not send at the asked rate.
pub const MAX_CV2: f64 = 1e4;

/// The squared coefficient of variation of the families that have one in closed form.
pub fn cv2(spec: &DistSpec) -> Option<f64> {
    let lg = libm::lgamma;
    match (spec.kind, spec.shape, spec.sigma) {
        (DistKind::Weibull, Some(k), _) => Some((lg(1.0 + 2.0 / k) - 2.0 * lg(1.0 + 1.0 / k)).exp() - 1.0),
        (DistKind::Gamma, Some(k), _) => Some(1.0 / k),
        (DistKind::Lognormal, _, Some(s)) => Some((s * s).exp() - 1.0),
        (DistKind::Pareto, Some(a), _) if a > 2.0 => Some(1.0 / (a * (a - 2.0))),
        _ => None,
    }
}

fn check_variance(spec: &DistSpec, path: &str) -> Result<(), ProfileError> {
    match cv2(spec) {
        Some(c) if c > MAX_CV2 => Err(ProfileError::invalid(
            path,
            format!(
                "these gaps vary too much for their mean to hold: variance / mean² = {c:.3e} (at most {MAX_CV2:.0e}), so even a million of them would average 10 % or more off the asked gap and the stream would not send at its rate"
            ),
            "use a lighter tail (Weibull shape ≥ 0.15, lognormal sigma ≤ 3, Gamma shape ≥ 0.0001)",
        )),
        _ => Ok(()),
    }
}

/// Rejection sampling into [0, 2]; the families truncated this way are symmetric about 1,
/// so the mean stays 1. Acceptance is at least 6 % with the parameter bounds above.
#[inline]
fn truncated(mut f: impl FnMut() -> f64) -> f64 {
    for _ in 0..10_000 {
        let x = f();
        if (0.0..=2.0).contains(&x) {
            return x;
        }
    }
    1.0
}

/// A distribution over absolute values with bounds: `mean * unit`, redrawn into [min, max].
#[derive(Debug, Clone)]
pub struct ScaledDist {
    unit: UnitDist,
    mean: f64,
    min: f64,
    max: f64,
}

impl ScaledDist {
    /// Compiles `spec` with absolute `mean`/`min`/`max`; `lo`/`hi` are the hard bounds of the
    /// quantity (e.g. 64 and the MTU for frame sizes).
    pub fn from_spec(
        spec: &DistSpec,
        path: &str,
        lo: f64,
        hi: f64,
        files: &dyn FileLoader,
    ) -> Result<ScaledDist, ProfileError> {
        let min = spec.min.unwrap_or(lo);
        let max = spec.max.unwrap_or(hi);
        if min < lo || max > hi || min > max {
            return Err(ProfileError::invalid(
                path,
                format!("the range [{min}, {max}] is not inside [{lo}, {hi}] or is empty"),
                format!("set min and max within [{lo}, {hi}], min <= max"),
            ));
        }
        if spec.kind == DistKind::Pdf {
            return Err(ProfileError::invalid(
                format!("{path}.kind"),
                "a pdf formula is for inter-departure times only",
                "use another kind here (uniform, normal, empirical, ...), or move the formula to timing.dist",
            ));
        }
        let mut s = spec.clone();
        let mean = match spec.kind {
            DistKind::Uniform if spec.mean.is_none() => {
                let mean = (min + max) / 2.0;
                s.spread = Some(if mean > 0.0 {
                    ((max - min) / 2.0 / mean).max(1e-12)
                } else {
                    1.0
                });
                mean
            }
            DistKind::Empirical => f64::NAN, // filled below from the table
            _ => need(spec, spec.mean, path, "mean", "the mean value")?,
        };
        let unit = UnitDist::from_spec(&s, path, files)?;
        let mean = if mean.is_nan() {
            spec.mean.unwrap_or(unit.raw_mean())
        } else {
            mean
        };
        if !(mean >= min && mean <= max) {
            return Err(ProfileError::invalid(
                format!("{path}.mean"),
                format!("mean {mean} is outside [{min}, {max}]"),
                "choose a mean between min and max",
            ));
        }
        // A max the family can never reach would be capped silently: refuse it.
        if let (Some(asked), Some(ub)) = (spec.max, unit.upper_bound()) {
            if asked > mean * ub * (1.0 + 1e-9) && spec.kind != DistKind::Uniform {
                return Err(ProfileError::invalid(
                    format!("{path}.max"),
                    format!(
                        "max = {asked} can never be drawn: a {:?} distribution is truncated symmetrically about its mean to keep the mean, so with mean = {mean} it draws nothing above {}",
                        spec.kind,
                        mean * ub
                    ),
                    format!("set max to at most {}, or the mean to at least {}", mean * ub, (asked / ub).ceil()),
                ));
            }
        }
        Ok(ScaledDist { unit, mean, min, max })
    }

    /// A constant.
    pub fn constant(v: f64) -> ScaledDist {
        ScaledDist {
            unit: UnitDist::Constant,
            mean: v,
            min: v,
            max: v,
        }
    }

    pub fn mean(&self) -> f64 {
        self.mean
    }
    pub fn min(&self) -> f64 {
        self.min
    }
    pub fn max(&self) -> f64 {
        self.max
    }

    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        for _ in 0..64 {
            let x = self.mean * self.unit.sample(rng);
            if x >= self.min && x <= self.max {
                return x;
            }
        }
        self.mean.clamp(self.min, self.max)
    }
}
