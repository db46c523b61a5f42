//! The packets a stream sends: one template, or several that the stream cycles through
//! (`[[stream.variant]]`), each with its own size and field ops. The stream's signature id
//! and sequence run across its variants, so the meter counts the stream as a whole.

use rand::{Rng, RngExt};

use crate::packet::fields::FieldOp;
use crate::packet::sizes::SizeGen;
use crate::packet::template::Template;
use crate::spec::error::ProfileError;
use crate::spec::{StreamSpec, VariantOrder, VariantSpec};

/// One packet of a stream: its template, sizes and field ops.
#[derive(Debug, Clone)]
pub struct Variant {
    pub name: String,
    pub template: Template,
    pub ops: Vec<FieldOp>,
    pub sizes: SizeGen,
}

/// How a stream picks the variant of its next frame.
#[derive(Debug, Clone, PartialEq)]
pub enum VariantPick {
    /// One variant.
    One,
    /// Variant i for `cum[i] - cum[i-1]` frames in a row, then the next, over and over.
    Sequence { cum: Vec<u64> },
    /// Variant i with probability `weight[i] / total`, drawn per frame.
    Random { cum: Vec<u64> },
}

impl VariantPick {
    /// The variant of the stream's `k`-th frame.
    #[inline]
    pub fn pick<R: Rng + ?Sized>(&self, k: u64, rng: &mut R) -> usize {
        match self {
            VariantPick::One => 0,
            VariantPick::Sequence { cum } => {
                let x = k % cum[cum.len() - 1];
                cum.partition_point(|&c| c <= x)
            }
            VariantPick::Random { cum } => {
                let x = rng.random_range(0..cum[cum.len() - 1]);
                cum.partition_point(|&c| c <= x)
            }
        }
    }

    /// The share of frames each of `n` variants gets in the long run.
    pub fn shares(&self, n: usize) -> Vec<f64> {
        match self {
            VariantPick::One => vec![1.0; n.min(1)],
            VariantPick::Sequence { cum } | VariantPick::Random { cum } => {
                let total = cum[cum.len() - 1] as f64;
                let mut prev = 0;
                cum.iter()
                    .map(|&c| {
                        let w = (c - prev) as f64 / total;
                        prev = c;
                        w
                    })
                    .collect()
            }
        }
    }

    pub fn describe(&self) -> &'static str {
        match self {
            VariantPick::One => "one",
            VariantPick::Sequence { .. } => "sequence",
            VariantPick::Random { .. } => "random",
        }
    }
}

/// The stream's variant order from its `[[stream.variant]]` tables: repeats for a sequence,
/// weights for a random pick; a key of the other order is an error.
pub fn compile_pick(s: &StreamSpec, path: &str) -> Result<VariantPick, ProfileError> {
    if s.variants.is_empty() {
        return Ok(VariantPick::One);
    }
    type Keys = fn(&VariantSpec) -> (Option<u32>, Option<u32>);
    let (used, other, key_of): (&str, &str, Keys) = match s.variant_order {
        VariantOrder::Sequence => ("repeat", "weight", |v| (v.repeat, v.weight)),
        VariantOrder::Random => ("weight", "repeat", |v| (v.weight, v.repeat)),
    };
    let mut cum = Vec::with_capacity(s.variants.len());
    let mut acc = 0u64;
    for (j, v) in s.variants.iter().enumerate() {
        let (mine, theirs) = key_of(v);
        if theirs.is_some() {
            return Err(ProfileError::invalid(
                format!("{path}.variant[{j}].{other}"),
                format!(
                    "`{other}` does not apply to variant_order = \"{}\"",
                    order_name(s.variant_order)
                ),
                format!(
                    "use `{used}`, or set variant_order = \"{}\"",
                    if used == "repeat" { "random" } else { "sequence" }
                ),
            ));
        }
        let n = mine.unwrap_or(1);
        if n == 0 {
            return Err(ProfileError::invalid(
                format!("{path}.variant[{j}].{used}"),
                format!("{used} is 0"),
                format!("use a {used} of at least 1, or remove the variant"),
            ));
        }
        acc += u64::from(n);
        cum.push(acc);
    }
    Ok(match s.variant_order {
        VariantOrder::Sequence => VariantPick::Sequence { cum },
        VariantOrder::Random => VariantPick::Random { cum },
    })
}

fn order_name(o: VariantOrder) -> &'static str {
    match o {
        VariantOrder::Sequence => "sequence",
        VariantOrder::Random => "random",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_sequence_repeats_each_variant_in_turn() {
        let p = VariantPick::Sequence { cum: vec![3, 4] };
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
        let got: Vec<usize> = (0..8).map(|k| p.pick(k, &mut rng)).collect();
        assert_eq!(got, [0, 0, 0, 1, 0, 0, 0, 1]);
        assert_eq!(p.shares(2), [0.75, 0.25]);
    }
}
