//! The counts of an HdrHistogram with lowest discernible value 1, kept by the meter itself so
//! that recording a value costs a few instructions: no Result, no min/max or total upkeep (the
//! meter keeps exact extremes beside it), and a counts array that grows as values need it.
//!
//! The layout is HdrHistogram's own (`bucket_for`, `sub_bucket_for` and `index_for` of the
//! hdrhistogram crate, with unit magnitude 0), so [`Buckets::to_hdr`] gives exactly the
//! histogram that recording the same values into `Histogram::new_with_bounds(1, _, sigfig)`
//! gives: the same counts, total, quantiles and serialized form. The test below holds the two
//! side by side.

use hdrhistogram::Histogram;

#[derive(Clone, Debug)]
pub struct Buckets {
    /// log2 of half the sub-buckets of a bucket (10 for 3 significant digits).
    half_mag: u32,
    /// 64 − log2(sub-bucket count): the leading zeros of the largest value of bucket 0.
    lz_base: u32,
    /// sub-bucket count − 1.
    mask: u64,
    counts: Vec<u64>,
    total: u64,
    /// The counts never grow past this many, so a value whose index lies beyond is never
    /// counted by [`Buckets::try_count`] (its owner clamps it first).
    cap: usize,
}

impl Buckets {
    /// Empty counts for `sigfig` significant digits (0..=5), as HdrHistogram lays them out.
    pub fn new(sigfig: u8) -> Buckets {
        let largest = 2 * 10u32.pow(u32::from(sigfig.min(5)));
        let count_mag = f64::from(largest).log2().ceil() as u32;
        Buckets {
            half_mag: count_mag - 1,
            lz_base: 64 - count_mag,
            mask: (1u64 << count_mag) - 1,
            counts: Vec::new(),
            total: 0,
            cap: usize::MAX,
        }
    }

    /// Empty counts whose array never grows past `highest`'s entry: any larger value has a
    /// larger index, which [`Buckets::try_count`] refuses.
    pub fn up_to(sigfig: u8, highest: u64) -> Buckets {
        let mut b = Buckets::new(sigfig);
        b.cap = b.index(highest) + 1;
        b
    }

    /// Whether no count has been made room for yet.
    #[inline(always)]
    pub fn unbuilt(&self) -> bool {
        self.counts.is_empty()
    }

    /// Counts `v` once if the array already holds its entry; false (nothing counted) if not.
    #[inline(always)]
    pub fn try_count(&mut self, v: u64) -> bool {
        let i = self.index(v);
        let Some(c) = self.counts.get_mut(i) else {
            return false;
        };
        *c += 1;
        self.total += 1;
        true
    }

    /// The counts index of `v`.
    #[inline(always)]
    fn index(&self, v: u64) -> usize {
        if v <= self.mask {
            // Bucket 0, where a value is its own index: the common case for a fast stream's
            // gaps, errors and latencies (below 2048 units at 3 digits), without the `bsr`
            // and two shifts.
            return v as usize;
        }
        let bucket = self.lz_base - (v | self.mask).leading_zeros();
        let sub = v >> bucket;
        // (bucket + 1) · half + sub − half: bucket 0 uses all its sub-buckets.
        ((bucket as usize) << self.half_mag) + sub as usize
    }

    /// The lowest value of counts index `i`.
    fn value_at(&self, i: usize) -> u64 {
        let half = 1usize << self.half_mag;
        let bucket = (i >> self.half_mag) as i64 - 1;
        let sub = (i & (half - 1)) + half;
        if bucket < 0 {
            (sub - half) as u64
        } else {
            (sub as u64) << bucket
        }
    }

    /// The lowest value that shares `v`'s bucket.
    pub fn lowest_equivalent(&self, v: u64) -> u64 {
        self.value_at(self.index(v))
    }

    /// The highest value that shares `i`'s bucket.
    fn highest_at(&self, i: usize) -> u64 {
        let bucket = (i >> self.half_mag).saturating_sub(1) as u32;
        self.value_at(i) + (1u64 << bucket) - 1
    }

    /// Counts `v` `n` times.
    #[inline(always)]
    pub fn record_n(&mut self, v: u64, n: u64) {
        let i = self.index(v);
        match self.counts.get_mut(i) {
            Some(c) => *c += n,
            None => self.grow_and_record(i, n),
        }
        self.total += n;
    }

    /// Grows the counts to the end of `i`'s bucket, as HdrHistogram grows by whole buckets.
    #[cold]
    #[inline(never)]
    fn grow_and_record(&mut self, i: usize, n: u64) {
        let half = 1usize << self.half_mag;
        let end = ((i / half + 1) * half).max(2 * half).min(self.cap);
        self.counts.resize(end, 0);
        self.counts[i] += n;
    }

    pub fn len(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Adds every count of `other` (of the same significant digits).
    pub fn add(&mut self, other: &Buckets) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }

    /// Empties the counts, keeping their memory.
    pub fn reset(&mut self) {
        self.counts.fill(0);
        self.total = 0;
    }

    /// The highest value of the bucket that holds the value at 1-based `rank`, ascending
    /// (HdrHistogram's `value_iterated_to` at that rank); 0 when empty.
    pub fn at_rank(&self, rank: u64) -> u64 {
        let mut cum = 0;
        let mut last = 0;
        for (i, &c) in self.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            cum += c;
            last = i;
            if cum >= rank {
                break;
            }
        }
        if cum == 0 {
            0
        } else {
            self.highest_at(last)
        }
    }

    /// The same counts as an HdrHistogram over `1..=high` with auto-resize on.
    pub fn to_hdr(&self, sigfig: u8, high: u64) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, high.max(2), sigfig).expect("valid bounds");
        h.auto(true);
        for (i, &c) in self.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            let _ = h.record_n(self.value_at(i), c);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Serializer;

    fn values() -> impl Iterator<Item = u64> {
        // Every bucket of a 1000 s range, bucket 0's edges, and a spread of odd values.
        (0..4200u64)
            .chain((0..40).flat_map(|k| [(1u64 << k) - 1, 1u64 << k, (1u64 << k) + 1]))
            .chain((0..20_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_000_000))
    }

    #[test]
    fn the_same_histogram_as_hdrhistogram_for_every_sigfig() {
        for sigfig in 1..=5u8 {
            let mut b = Buckets::new(sigfig);
            let mut h = Histogram::<u64>::new_with_bounds(1, 2, sigfig).unwrap();
            h.auto(true);
            for v in values() {
                b.record_n(v, 1 + v % 3);
                h.record_n(v, 1 + v % 3).unwrap();
            }
            let got = b.to_hdr(sigfig, 2);
            let pairs = |x: &Histogram<u64>| {
                x.iter_recorded()
                    .map(|v| (v.value_iterated_to(), v.count_at_value()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(pairs(&got), pairs(&h), "sigfig {sigfig}: bucket counts differ");
            assert_eq!((got.len(), got.min(), got.max()), (h.len(), h.min(), h.max()));
            assert_eq!(b.len(), h.len());
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999999, 1.0] {
                assert_eq!(
                    got.value_at_quantile(q),
                    h.value_at_quantile(q),
                    "sigfig {sigfig} q {q}"
                );
            }
            for rank in [1, 2, 1000, h.len() / 2, h.len()] {
                let mut cum = 0;
                let want = h
                    .iter_recorded()
                    .find(|v| {
                        cum += v.count_at_value();
                        cum >= rank
                    })
                    .map(|v| v.value_iterated_to());
                assert_eq!(Some(b.at_rank(rank)), want, "sigfig {sigfig} rank {rank}");
            }
            let ser = |x: &Histogram<u64>| {
                let mut out = Vec::new();
                hdrhistogram::serialization::V2Serializer::new()
                    .serialize(x, &mut out)
                    .unwrap();
                out
            };
            assert_eq!(ser(&got), ser(&h), "sigfig {sigfig}: serialized forms differ");
        }
    }

    #[test]
    fn add_and_reset() {
        let (mut a, mut b) = (Buckets::new(3), Buckets::new(3));
        a.record_n(5, 1);
        b.record_n(5_000_000, 2);
        a.add(&b);
        assert_eq!(a.len(), 3);
        assert_eq!(a.at_rank(3), a.to_hdr(3, 2).max());
        a.reset();
        assert!(a.is_empty() && a.at_rank(1) == 0);
    }
}
