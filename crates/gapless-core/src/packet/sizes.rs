//! Frame sizes: the limits, and the generator of a stream's sizes.

use rand::{Rng, RngExt};

use crate::timing::dist::ScaledDist;

/// Frame length on the wire that the FCS adds.
pub const FCS_LEN: usize = 4;
/// Largest frame (with FCS) a template may have.
pub const MAX_FRAME: u32 = 16_384;
/// Smallest frame (with FCS).
pub const MIN_FRAME: u32 = 64;

/// Frame sizes of a stream (bytes with FCS).
#[derive(Debug, Clone)]
pub enum SizeGen {
    Fixed(u32),
    Dist(ScaledDist),
    /// Weighted random pick: sizes and cumulative weights.
    Imix {
        sizes: Vec<u32>,
        cum: Vec<u64>,
    },
    /// A fixed interleaved cycle.
    Cycle(Vec<u32>),
    /// Sizes known by their range only: a replayed capture's frames.
    Range {
        min: u32,
        max: u32,
        mean: f64,
    },
}

impl SizeGen {
    /// The size of the stream's `k`-th frame.
    #[inline]
    pub fn next<R: Rng + ?Sized>(&self, k: u64, rng: &mut R) -> u32 {
        match self {
            SizeGen::Fixed(s) => *s,
            SizeGen::Dist(d) => d.sample(rng).round() as u32,
            SizeGen::Imix { sizes, cum } => {
                let total = *cum.last().expect("non-empty");
                let x = rng.random_range(0..total);
                sizes[cum.partition_point(|&c| c <= x)]
            }
            SizeGen::Cycle(c) => c[(k % c.len() as u64) as usize],
            SizeGen::Range { mean, .. } => mean.round() as u32,
        }
    }

    pub fn min(&self) -> u32 {
        match self {
            SizeGen::Fixed(s) => *s,
            SizeGen::Dist(d) => d.min().round() as u32,
            SizeGen::Imix { sizes, .. } | SizeGen::Cycle(sizes) => *sizes.iter().min().expect("non-empty"),
            SizeGen::Range { min, .. } => *min,
        }
    }

    pub fn max(&self) -> u32 {
        match self {
            SizeGen::Fixed(s) => *s,
            SizeGen::Dist(d) => d.max().round() as u32,
            SizeGen::Imix { sizes, .. } | SizeGen::Cycle(sizes) => *sizes.iter().max().expect("non-empty"),
            SizeGen::Range { max, .. } => *max,
        }
    }

    pub fn mean(&self) -> f64 {
        match self {
            SizeGen::Fixed(s) => f64::from(*s),
            SizeGen::Dist(d) => d.mean(),
            SizeGen::Imix { sizes, cum } => {
                let mut prev = 0;
                let mut acc = 0.0;
                for (s, c) in sizes.iter().zip(cum) {
                    acc += f64::from(*s) * (c - prev) as f64;
                    prev = *c;
                }
                acc / prev as f64
            }
            SizeGen::Cycle(c) => c.iter().map(|s| f64::from(*s)).sum::<f64>() / c.len() as f64,
            SizeGen::Range { mean, .. } => *mean,
        }
    }
}
