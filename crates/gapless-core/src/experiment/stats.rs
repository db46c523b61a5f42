//! Figures across repetitions: mean ± a Student-t confidence interval, and median with range
//! for percentiles (which do not average).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A mean with its confidence interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1).
    pub stddev: f64,
    /// The confidence level, e.g. 0.95.
    pub level: f64,
    /// Half the interval's width: the ± of `mean ± half_width`. None with one sample.
    pub half_width: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

/// The mean of `xs` and its Student-t interval at `level` (0 < level < 1).
pub fn mean_ci(xs: &[f64], level: f64) -> Result<Estimate, String> {
    if !(level > 0.0 && level < 1.0) {
        return Err(format!(
            "confidence level {level}: give a level between 0 and 1, e.g. 0.95"
        ));
    }
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return Err("a mean of no values, or of values that are not finite numbers".into());
    }
    let n = xs.len();
    let mean = xs.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Ok(Estimate {
            n,
            mean,
            stddev: 0.0,
            level,
            half_width: None,
            low: None,
            high: None,
        });
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let sd = var.sqrt();
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .map_err(|e| e.to_string())?
        .inverse_cdf(0.5 + level / 2.0);
    let h = t * sd / (n as f64).sqrt();
    Ok(Estimate {
        n,
        mean,
        stddev: sd,
        level,
        half_width: Some(h),
        low: Some(mean - h),
        high: Some(mean + h),
    })
}

/// Median and range: how percentiles are summarised across repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// The median (the mean of the middle two for an even count) and the range.
pub fn median_range(xs: &[f64]) -> Option<Spread> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Spread {
        n,
        median,
        min: v[0],
        max: v[n - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_matches_the_hand_computed_one() {
        // 10, 12, 14, 16, 18: mean 14, s = sqrt(10) = 3.16228, t(0.975, 4) = 2.776445,
        // half width 2.776445 × 3.16228 / sqrt(5) = 3.92644.
        let e = mean_ci(&[10.0, 12.0, 14.0, 16.0, 18.0], 0.95).unwrap();
        assert!((e.mean - 14.0).abs() < 1e-12);
        assert!((e.stddev - 10f64.sqrt()).abs() < 1e-12);
        let h = e.half_width.unwrap();
        assert!((h - 3.92644).abs() < 1e-4, "half width {h}");
        assert!((e.low.unwrap() - 10.07356).abs() < 1e-4);
        // 99 %, n = 3 (1, 2, 3): s = 1, t(0.995, 2) = 9.924843, h = 9.924843 / sqrt(3) = 5.73011.
        let e = mean_ci(&[1.0, 2.0, 3.0], 0.99).unwrap();
        assert!((e.half_width.unwrap() - 5.73011).abs() < 1e-4, "{e:?}");
    }

    #[test]
    fn one_sample_has_no_interval_and_bad_input_is_refused() {
        let e = mean_ci(&[7.0], 0.95).unwrap();
        assert_eq!((e.mean, e.half_width), (7.0, None));
        assert!(mean_ci(&[], 0.95).is_err());
        assert!(mean_ci(&[1.0, f64::NAN], 0.95).is_err());
        assert!(mean_ci(&[1.0, 2.0], 1.0).unwrap_err().contains("between 0 and 1"));
    }

    #[test]
    fn median_and_range() {
        let s = median_range(&[5.0, 1.0, 3.0, 9.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (4.0, 1.0, 9.0));
        assert_eq!(median_range(&[2.0, 8.0, 4.0]).unwrap().median, 4.0);
        assert!(median_range(&[]).is_none());
    }
}
