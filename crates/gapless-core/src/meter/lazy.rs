//! A histogram that costs little until it is used: its first values are kept as they are,
//! and only past [`SMALL`] of them does it become an HdrHistogram with 3 significant digits
//! over 1 ns .. 1000 s, which starts at the smallest size (values up to 4 µs, 24 KB) and grows
//! only as far as its largest value needs (245 KB at 1000 s). A stream that sends a handful of
//! frames costs a few hundred bytes, so 65 536 streams fit in well under a gigabyte. Reads
//! build the HdrHistogram when the values are still few. The figures are those of a
//! histogram made at full size: the buckets are the same.

use std::borrow::Cow;

use hdrhistogram::Histogram;

use super::buckets::Buckets;

/// Values kept as they are before the histogram is built.
pub const SMALL: usize = 64;
const HIST_MAX: u64 = 1_000_000_000_000;

/// An empty histogram over 1 ns .. 1000 s that grows as values need it.
fn grown(sigfig: u8) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 2, sigfig).expect("valid bounds");
    h.auto(true);
    h
}

/// Records `v` `n` times, values above 1000 s as 1000 s.
#[inline(always)]
fn add_to(h: &mut Histogram<u64>, v: u64, n: u64) {
    let _ = h.record_n(v.min(HIST_MAX), n);
}

/// Once built, the counts are the meter's own [`Buckets`] in HdrHistogram's layout (a record
/// is a few instructions); reads build the HdrHistogram from them.
#[derive(Clone, Debug)]
pub struct LazyHist {
    sigfig: u8,
    small: Vec<u64>,
    /// Without counts until built: until then every record takes the cold path.
    b: Buckets,
}

impl LazyHist {
    pub fn new(sigfig: u8) -> LazyHist {
        LazyHist {
            sigfig,
            small: Vec::new(),
            b: Buckets::up_to(sigfig, HIST_MAX),
        }
    }

    /// The built counts, if built.
    fn full(&self) -> Option<&Buckets> {
        (!self.b.unbuilt()).then_some(&self.b)
    }

    /// One check on the hot path: a value whose entry the counts already hold is counted;
    /// anything else (not built yet, a larger value, one over 1000 s) takes the cold path.
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        if !self.b.try_count(v) {
            self.record_cold(v);
        }
    }

    #[cold]
    #[inline(never)]
    fn record_cold(&mut self, v: u64) {
        if !self.b.unbuilt() {
            return self.b.record_n(v.min(HIST_MAX), 1);
        }
        self.small.push(v);
        if self.small.len() > SMALL {
            for x in std::mem::take(&mut self.small) {
                self.b.record_n(x.min(HIST_MAX), 1);
            }
        }
    }

    /// Records `v` `n` times.
    #[inline(always)]
    pub fn record_n(&mut self, v: u64, n: u64) {
        if self.b.unbuilt() {
            for _ in 0..n {
                self.record(v);
            }
        } else {
            self.b.record_n(v.min(HIST_MAX), n);
        }
    }

    /// Adds every value of `other`.
    pub fn add(&mut self, other: &LazyHist) {
        match other.full() {
            None => other.small.iter().for_each(|&v| self.record(v)),
            Some(o) => {
                self.b.add(o);
                for v in std::mem::take(&mut self.small) {
                    self.b.record_n(v.min(HIST_MAX), 1);
                }
            }
        }
    }

    pub fn len(&self) -> u64 {
        self.full().map_or(self.small.len() as u64, |b| b.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The highest value of the bucket that holds the value at 1-based `rank` (ascending).
    pub fn at_rank(&self, rank: u64) -> u64 {
        match self.full() {
            Some(b) => b.at_rank(rank),
            None => {
                let h = self.view();
                let mut cum = 0;
                h.iter_recorded()
                    .find(|v| {
                        cum += v.count_at_value();
                        cum >= rank
                    })
                    .map_or(h.max(), |v| v.value_iterated_to())
            }
        }
    }

    /// The lowest value that shares `v`'s bucket.
    pub fn lowest_equivalent(&self, v: u64) -> u64 {
        self.b.lowest_equivalent(v.min(HIST_MAX))
    }

    /// The values as an HdrHistogram (built now).
    pub fn view(&self) -> Cow<'_, Histogram<u64>> {
        match self.full() {
            Some(b) => Cow::Owned(b.to_hdr(self.sigfig, 2)),
            None => {
                let mut h = grown(self.sigfig);
                for &x in &self.small {
                    add_to(&mut h, x, 1);
                }
                Cow::Owned(h)
            }
        }
    }

    /// Empties it, keeping a built histogram's memory for reuse.
    pub fn reset(&mut self) {
        self.small.clear();
        self.b.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_figures_before_and_after_it_is_built() {
        let mut a = LazyHist::new(3);
        let mut b = Histogram::<u64>::new_with_bounds(1, HIST_MAX, 3).unwrap();
        for i in 0..1000u64 {
            let v = (i * 7919) % 100_003;
            a.record(v);
            b.saturating_record(v);
            if i == 10 || i == 999 {
                let h = a.view();
                assert_eq!(
                    (h.len(), h.max(), h.value_at_quantile(0.5)),
                    (b.len(), b.max(), b.value_at_quantile(0.5))
                );
            }
        }
        assert!(a.full().is_some() && a.small.is_empty());
    }

    #[test]
    fn it_grows_only_as_far_as_its_values_and_clamps_at_1000_s() {
        let mut a = LazyHist::new(3);
        for v in 0..100u64 {
            a.record(v * 13);
        }
        let small = a.view().distinct_values();
        a.record(5_000_000_000_000);
        let h = a.view();
        assert!(
            small < 4096,
            "expected a small histogram for values under 2 µs, got {small} buckets"
        );
        assert!(
            h.equivalent(h.max(), HIST_MAX),
            "expected the 5000 s value kept as 1000 s, got {}",
            h.max()
        );
        let mut b = Histogram::<u64>::new_with_bounds(1, HIST_MAX, 3).unwrap();
        for v in 0..100u64 {
            b.saturating_record(v * 13);
        }
        b.saturating_record(5_000_000_000_000);
        assert_eq!(
            (h.len(), h.value_at_quantile(0.5), h.max()),
            (b.len(), b.value_at_quantile(0.5), b.max())
        );
    }
}
