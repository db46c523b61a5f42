//! A histogram of signed values (latency after a calibration offset can be negative): one
//! HdrHistogram for values ≥ 0 and one for the magnitudes of values < 0.
//!
//! Contract: a quantile is never below the exact value at that rank (never understated), and
//! over the exact range (below 2048 units, with 3 significant digits) it is at most one unit
//! above it. Values ≥ 0 are recorded as ⌈v / unit⌉ and read back as the highest value of
//! their bucket; negative values are recorded as ⌊|v| / unit⌋ and read back as minus the
//! lowest value of their bucket. Quantiles are clamped to the exact min and max.

use super::lazy::LazyHist;

#[derive(Clone, Debug)]
pub struct SignedHist {
    pub(crate) pos: LazyHist,
    pub(crate) neg: LazyHist,
    unit: u64,
    /// ⌈2^64 / unit⌉ (mod 2^64): a quotient by `unit` as one multiply (see [`quotient`]).
    inv: u64,
}

/// ⌊v / d⌋ by the multiply `inv = ⌈2^64 / d⌉` gives exactly for every v below 2^32 (Lemire,
/// Kaser and Kurz, "Faster remainder by direct computation", 2019); a larger v divides.
#[inline(always)]
fn quotient(v: u64, d: u64, inv: u64) -> u64 {
    if v < 1 << 32 {
        ((u128::from(inv) * u128::from(v)) >> 64) as u64
    } else {
        v / d
    }
}

impl SignedHist {
    pub fn new(unit_ns: u64, sigfig: u8) -> SignedHist {
        SignedHist {
            pos: LazyHist::new(sigfig),
            neg: LazyHist::new(sigfig),
            unit: unit_ns.max(1),
            inv: (u64::MAX / unit_ns.max(1)).wrapping_add(1),
        }
    }

    #[inline(always)]
    pub fn record(&mut self, v_ns: i64) {
        self.record_units(self.units(v_ns));
    }

    /// `v_ns` as [`SignedHist::record`] counts it: whether negative, and its magnitude in
    /// units (rounded away from zero when positive). Two histograms of the same unit can
    /// take one value's units.
    #[inline(always)]
    pub fn units(&self, v_ns: i64) -> (bool, u64) {
        if self.unit == 1 {
            (v_ns < 0, v_ns.unsigned_abs())
        } else if v_ns >= 0 {
            let v = (v_ns as u64).saturating_add(self.unit - 1);
            (false, quotient(v, self.unit, self.inv))
        } else {
            (true, quotient(v_ns.unsigned_abs(), self.unit, self.inv))
        }
    }

    /// Counts a value given by [`SignedHist::units`] of a histogram with the same unit.
    #[inline(always)]
    pub fn record_units(&mut self, (negative, units): (bool, u64)) {
        if negative {
            self.neg.record(units);
        } else {
            self.pos.record(units);
        }
    }

    /// The unit, in ns.
    pub fn unit(&self) -> u64 {
        self.unit
    }

    pub fn len(&self) -> u64 {
        self.pos.len() + self.neg.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values below zero.
    pub fn negatives(&self) -> u64 {
        self.neg.len()
    }

    pub fn reset(&mut self) {
        self.pos.reset();
        self.neg.reset();
    }

    /// The value at quantile `q` in ns, clamped to the exact `[min_ns, max_ns]`.
    pub fn quantile(&self, q: f64, min_ns: i64, max_ns: i64) -> i64 {
        let n = self.len();
        if n == 0 {
            return 0;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let nn = self.neg.len();
        let v = if rank <= nn {
            // The rank-th smallest value is the (nn - rank + 1)-th smallest magnitude, negated.
            let m = self.neg.at_rank(nn - rank + 1);
            let mag = self.neg.lowest_equivalent(m).saturating_mul(self.unit);
            i64::try_from(mag).unwrap_or(i64::MAX).saturating_neg()
        } else {
            let v = self.pos.at_rank(rank - nn).saturating_mul(self.unit);
            i64::try_from(v).unwrap_or(i64::MAX)
        };
        v.clamp(min_ns, max_ns.max(min_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_multiply_gives_the_quotient_of_a_division() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for d in [2u64, 3, 7, 10, 100, 1000, 4093, 65_537, (1 << 31) - 1, (1 << 32) - 1] {
            let inv = (u64::MAX / d).wrapping_add(1);
            let mut vs = vec![0, 1, d - 1, d, d + 1, (1 << 32) - 1, 1 << 32, u64::MAX, u64::MAX / 2];
            for _ in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                vs.extend([x >> 32, x & 0xffff, x]);
            }
            for v in vs {
                assert_eq!(
                    quotient(v, d, inv),
                    v / d,
                    "{v} / {d}: expected the division's quotient"
                );
            }
        }
    }

    /// The exact value at quantile q of sorted `v` (the same rank rule).
    fn exact(v: &[i64], q: f64) -> i64 {
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }

    #[test]
    fn negative_values_are_kept_and_never_understated() {
        // 74 % below zero, as a calibrated run can be: p50 must be −401, not 0.
        let mut vals: Vec<i64> = (0..740)
            .map(|i| -401 - (i % 37))
            .chain((0..260).map(|i| 100 + i))
            .collect();
        let mut h = SignedHist::new(10, 3);
        for &v in &vals {
            h.record(v);
        }
        vals.sort();
        let (min, max) = (vals[0], *vals.last().unwrap());
        assert_eq!(h.negatives(), 740);
        for q in [0.01, 0.25, 0.5, 0.74, 0.75, 0.9, 0.99, 0.999999] {
            let got = h.quantile(q, min, max);
            let want = exact(&vals, q);
            assert!(
                got >= want && got - want < 10,
                "q {q}: expected {want} (at most 9 ns above), got {got}"
            );
        }
        assert!(h.quantile(0.5, min, max) < -400, "p50 must stay negative");
    }

    #[test]
    fn percentiles_are_never_below_the_exact_value() {
        // Values that a floor to 10 ns units would understate by up to 9 ns.
        let mut vals: Vec<i64> = (0..100_000).map(|i| 1_000 + (i * 7919) % 50_000).collect();
        let mut h = SignedHist::new(10, 3);
        for &v in &vals {
            h.record(v);
        }
        vals.sort();
        let (min, max) = (vals[0], *vals.last().unwrap());
        for q in [0.5, 0.9, 0.99, 0.999, 0.9999, 0.99999, 0.999999] {
            let got = h.quantile(q, min, max);
            let want = exact(&vals, q);
            // 3 significant digits: within 0.1 % above, never below.
            assert!(got >= want, "q {q}: expected at least {want}, got {got}");
            assert!(
                (got - want) as f64 <= want as f64 * 0.001 + 10.0,
                "q {q}: expected {want} (+0.1 %), got {got}"
            );
        }
    }
}
